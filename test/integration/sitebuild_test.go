//go:build integration

package integration

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
)

// TestSiteBuiltPlugins builds the plugins as a site does, from the source
// packages (`make srpm`, `make debsrc`, made before the tests), inside the
// release under test: rpmbuild --rebuild of the source RPM and
// dpkg-buildpackage of the Debian source package, against this root's Slurm
// headers. Each result's plugin_version must be the running Slurm's, the
// packages must require exactly that Slurm, the .deb must install here, and
// slurmctld started with each plugin must type a plain GPU job. Then the
// upgrade guard: a plugin built for the next micro release (the headers of
// this one with SLURM_VERSION_NUMBER bumped, as after a Slurm upgrade the
// site forgot to rebuild Rota for) keeps slurmctld up, says so in its log,
// and passes jobs unchanged; the same plugin without the guard is what Slurm
// does by itself (it refuses the plugin and stops), recorded here.
func TestSiteBuiltPlugins(t *testing.T) {
	heavy(t)
	for _, tool := range []string{"rpmbuild", "rpm2cpio", "cpio", "dpkg-source", "dpkg-buildpackage", "gcc", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (scripts/setup-deps; a release's chroot has it from scripts/slurm-release)", tool)
		}
	}
	srpms, _ := filepath.Glob(filepath.Join(repo, "dist/rota-slurm-plugins-*.src.rpm"))
	dscs, _ := filepath.Glob(filepath.Join(repo, "dist/rota-slurm-plugins_*.dsc"))
	if len(srpms) != 1 || len(dscs) != 1 {
		t.Fatalf("want one source RPM and one .dsc in dist/ (make srpm debsrc), found %v %v", srpms, dscs)
	}
	running := runningSlurm(t)
	t.Logf("running Slurm %s", running)
	tmp := t.TempDir()

	// The source RPM, rebuilt here. --nodeps: Debian's rpm database knows
	// no slurm-devel; the headers are libslurm-dev's, found by the spec.
	top := filepath.Join(tmp, "rpm")
	mustRun(t, "", "rpmbuild", "--rebuild", "--nodeps", "--define", "_topdir "+top, srpms[0])
	rpms, _ := filepath.Glob(filepath.Join(top, "RPMS/*/rota-slurm-plugins-*.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("rpmbuild --rebuild made %v", rpms)
	}
	if want := "rota-slurm-plugins-0.1.0+slurm" + running + "-1."; !strings.HasPrefix(filepath.Base(rpms[0]), want) {
		t.Errorf("the RPM is %s, want %s*", filepath.Base(rpms[0]), want)
	}
	reqs := mustRun(t, "", "rpm", "-qp", "--requires", rpms[0])
	if !regexp.MustCompile(`(?m)^slurm = ` + regexp.QuoteMeta(running) + `$`).MatchString(reqs) {
		t.Errorf("the RPM does not require slurm = %s:\n%s", running, reqs)
	}
	for _, debianOnly := range []string{"slurm-wlm", "slurm-client", "libslurm"} {
		if strings.Contains(reqs, debianOnly) {
			t.Errorf("the RPM requires a Debian package name (%s):\n%s", debianOnly, reqs)
		}
	}
	// Without Slurm headers both refuse, saying what to install.
	for _, c := range []*exec.Cmd{
		exec.Command("rpmbuild", "--rebuild", "--nodeps", "--define", "_topdir "+filepath.Join(tmp, "rpm-none"), "--define", "slurm_include /nonexistent/slurm", srpms[0]),
		exec.Command("sh", "-c", "dpkg-source -x \"$0\" debsrc-none >/dev/null && cd debsrc-none && SLURM_INCLUDE=/nonexistent/slurm dpkg-buildpackage -us -uc -b", dscs[0]),
	} {
		c.Dir = tmp
		out, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "rota-slurm-plugins: no Slurm headers found") {
			t.Errorf("%s without Slurm headers: %v, want a refusal that says so:\n%s", c.Args, err, out)
		}
	}
	rpmRoot := filepath.Join(tmp, "rpmroot")
	os.MkdirAll(rpmRoot, 0o755)
	mustRun(t, rpmRoot, "sh", "-c", "rpm2cpio "+rpms[0]+" | cpio -idm --quiet --no-absolute-filenames")
	rpmPlugins := filepath.Join(rpmRoot, "usr/lib64/slurm")

	// The Debian source package, unpacked and built here, then installed.
	mustRun(t, tmp, "dpkg-source", "-x", dscs[0], "debsrc")
	mustRun(t, filepath.Join(tmp, "debsrc"), "dpkg-buildpackage", "-us", "-uc", "-b")
	debs, _ := filepath.Glob(filepath.Join(tmp, "rota-slurm-plugins_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("dpkg-buildpackage made %v", debs)
	}
	if want := "rota-slurm-plugins_0.1.0+slurm" + running + "_"; !strings.HasPrefix(filepath.Base(debs[0]), want) {
		t.Errorf("the .deb is %s, want %s*", filepath.Base(debs[0]), want)
	}
	depends := mustRun(t, "", "dpkg-deb", "-f", debs[0], "Depends")
	if !strings.Contains(depends, "slurm-wlm-basic-plugins (>= "+running+")") {
		t.Errorf("the .deb does not require Slurm %s: %s", running, depends)
	}
	// An installed copy from the packages test or an earlier run would
	// make this an upgrade; either way dpkg must accept it here.
	mustRun(t, "", "dpkg", "-i", debs[0])
	t.Cleanup(func() { exec.Command("dpkg", "-P", "rota-slurm-plugins").Run() })
	debPlugins := strings.TrimSpace(mustRun(t, "", "sh", "-c", "dpkg -L rota-slurm-plugins | grep '/job_submit_rota.so$' | xargs dirname"))

	for _, dir := range []string{rpmPlugins, debPlugins} {
		for _, so := range []string{"job_submit_rota.so", "spank_rota.so"} {
			if v := pluginVersion(t, filepath.Join(dir, so)); v != running {
				t.Errorf("%s/%s: plugin_version %s, running Slurm %s", dir, so, v, running)
			}
		}
	}

	// A cluster of its own: slurmctld restarts here with one plugin after
	// another.
	base, err := freeport.Consecutive(10)
	if err != nil {
		t.Fatal(err)
	}
	dir := devDir + "-sitebuild"
	c := newDevCluster(dir, nodePrefix+"sb", base, base+4, "ROTA_DEV_ACCOUNTING=off", "ROTA_DEV_AGENTS=off", "ROTA_DEV_WEB=off")
	withPlugins := func(pluginDir string) devCluster {
		d := c
		d.env = append(append([]string{}, c.env...), "ROTA_DEV_PLUGIN_DIR="+pluginDir, "ROTA_DEV_SPANK_SO="+filepath.Join(pluginDir, "spank_rota.so"))
		return d
	}
	t.Cleanup(c.stop)
	// The installed .deb's plugin, from the system PluginDir.
	if err := withPlugins(debPlugins).start(true); err != nil {
		t.Fatalf("with the plugin built by dpkg-buildpackage: %v", err)
	}
	t.Logf("the .deb's plugin (%s) types jobs", debPlugins)
	// The RPM's.
	restartSlurmctld(t, withPlugins(rpmPlugins))
	if err := c.waitPlaced(); err != nil {
		t.Fatalf("with the plugin built by rpmbuild --rebuild: %v", err)
	}
	t.Logf("the RPM's plugin (%s) types jobs", rpmPlugins)
	// Slurm looks further along PluginDir when a plugin's version is
	// refused (seen on 22.05): no other job_submit_rota.so may be there
	// for what follows.
	mustRun(t, "", "dpkg", "-P", "rota-slurm-plugins")

	// The upgrade guard: built from the same source against headers that
	// say the next micro release.
	next := nextMicro(t, running)
	hdr := filepath.Join(tmp, "next/include/slurm")
	os.MkdirAll(hdr, 0o755)
	mustRun(t, "", "sh", "-c", "cp /usr/include/slurm/*.h "+hdr+"/")
	bumpHeaders(t, hdr, next)
	src := filepath.Join(tmp, "debsrc")
	guarded, unguarded := filepath.Join(tmp, "guarded"), filepath.Join(tmp, "unguarded")
	mustRun(t, src, "make", "SLURM_INCLUDE="+hdr, "OUT="+guarded)
	mustRun(t, src, "make", "SLURM_INCLUDE="+hdr, "OUT="+unguarded, "CFLAGS=-O2 -DROTA_NO_VERSION_GUARD")
	for _, d := range []string{guarded, unguarded} {
		if v := pluginVersion(t, filepath.Join(d, "job_submit_rota.so")); v != next {
			t.Fatalf("%s: plugin_version %s, want %s (the bumped headers')", d, v, next)
		}
		// SPANK plugins need only major.minor: the running release's.
		mustRun(t, "", "cp", filepath.Join(rpmPlugins, "spank_rota.so"), d)
	}

	// Without the guard: Slurm's own behaviour.
	logPath := filepath.Join(dir, "log/slurmctld.log")
	mark := fileSize(logPath)
	stopSlurmctld(t, c)
	out, err := withPlugins(unguarded).dev("up")
	if err == nil && slurmctldAlive(c) {
		t.Fatalf("slurmctld %s runs with a job_submit plugin built for %s and no guard: Slurm's check changed?\n%s", running, next, out)
	}
	tail := logSince(logPath, mark)
	for _, want := range []string{"Incompatible Slurm plugin", "fatal: failed to initialize job_submit plugin"} {
		if !strings.Contains(tail, want) {
			t.Errorf("slurmctld's log after an unguarded plugin for %s lacks %q:\n%s", next, want, tail)
		}
	}
	for _, l := range strings.Split(tail, "\n") {
		if strings.Contains(l, "plugin") && (strings.Contains(l, "Incompatible") || strings.Contains(l, "fatal") || strings.Contains(l, "cannot create")) {
			t.Logf("without the guard, slurmctld %s: %s", running, strings.TrimSpace(l))
		}
	}

	// With it: slurmctld runs, says what to rebuild, and Rota touches no job.
	mark = fileSize(logPath)
	restartSlurmctld(t, withPlugins(guarded))
	tail = logSince(logPath, mark)
	want := fmt.Sprintf("job_submit/rota: built for Slurm %s but this slurmctld is %s: every job passes unchanged", next, running)
	if !strings.Contains(tail, want) {
		t.Errorf("slurmctld's log lacks %q:\n%s", want, tail)
	}
	id, err := c.run("sbatch", "--parsable", "-H", "-o", "/dev/null", "--gres=gpu:1", "--wrap", "true")
	if err != nil {
		t.Fatalf("sbatch under the guard: %v: %s", err, id)
	}
	id = strings.TrimSpace(id)
	defer c.run("scancel", id)
	shown, _ := c.run("scontrol", "show", "job", id)
	if strings.Contains(shown, "AdminComment=rota") || !regexp.MustCompile(`TresPerNode=gres[:/]gpu:1\b`).MatchString(shown) {
		t.Errorf("under the guard the job was changed:\n%s", shown)
	}
	if !slurmctldAlive(c) {
		t.Error("slurmctld stopped under the guard")
	}
}

// runningSlurm is `slurmctld -V`'s release ("slurm-wlm 24.11.5" -> 24.11.5).
func runningSlurm(t *testing.T) string {
	t.Helper()
	f := strings.Fields(mustRun(t, "", "slurmctld", "-V"))
	if len(f) != 2 {
		t.Fatalf("slurmctld -V: %q", f)
	}
	return f[1]
}

func nextMicro(t *testing.T, v string) string {
	var a, b, c int
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &a, &b, &c); err != nil {
		t.Fatalf("release %q: %v", v, err)
	}
	return fmt.Sprintf("%d.%02d.%d", a, b, c+1)
}

// bumpHeaders makes the copied slurm_version.h say release v.
func bumpHeaders(t *testing.T, dir, v string) {
	t.Helper()
	var a, b, c int
	fmt.Sscanf(v, "%d.%d.%d", &a, &b, &c)
	p := filepath.Join(dir, "slurm_version.h")
	h, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^(#define\s+SLURM_VERSION_NUMBER\s+)0x[0-9a-fA-F]+`)
	if !re.Match(h) {
		t.Fatalf("no SLURM_VERSION_NUMBER in %s", p)
	}
	h = re.ReplaceAll(h, []byte(fmt.Sprintf("${1}0x%02x%02x%02x", a, b, c)))
	if err := os.WriteFile(p, h, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pluginVersion reads the plugin_version symbol's value out of a plugin,
// as slurmctld's dlsym does, and prints it as a release.
func pluginVersion(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, s := range syms {
		if s.Name != "plugin_version" || s.Section >= elf.SectionIndex(len(f.Sections)) {
			continue
		}
		sec := f.Sections[s.Section]
		b, err := sec.Data()
		if err != nil || s.Value < sec.Addr || s.Value-sec.Addr+4 > uint64(len(b)) {
			t.Fatalf("%s: plugin_version not readable in %s: %v", path, sec.Name, err)
		}
		n := binary.LittleEndian.Uint32(b[s.Value-sec.Addr:])
		return fmt.Sprintf("%d.%02d.%d", n>>16, (n>>8)&0xff, n&0xff)
	}
	t.Fatalf("%s has no plugin_version", path)
	return ""
}

func mustRun(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}

func slurmctldPid(c devCluster) int {
	b, err := os.ReadFile(filepath.Join(c.dir, "run/slurmctld.pid"))
	if err != nil {
		return 0
	}
	var pid int
	fmt.Sscanf(string(b), "%d", &pid)
	return pid
}

func slurmctldAlive(c devCluster) bool {
	pid := slurmctldPid(c)
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

func stopSlurmctld(t *testing.T, c devCluster) {
	t.Helper()
	pid := slurmctldPid(c)
	if pid <= 0 {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	eventually.True(t, 60*time.Second, "slurmctld to stop", func() bool { return syscall.Kill(pid, 0) != nil })
}

// restartSlurmctld starts slurmctld again through `dev-cluster up`, which
// writes slurm.conf for d's plugins; the slurmds and the controller stay.
func restartSlurmctld(t *testing.T, d devCluster) {
	t.Helper()
	stopSlurmctld(t, d)
	if out, err := d.dev("up"); err != nil {
		t.Fatalf("dev-cluster up: %v\n%s", err, out)
	}
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

func logSince(p string, from int64) string {
	b, _ := os.ReadFile(p)
	if from > int64(len(b)) {
		from = 0
	}
	return string(b[from:])
}
