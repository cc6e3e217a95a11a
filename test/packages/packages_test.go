// Package packages builds every Rota package (`make packages`: rota-agent,
// rota-controller, rota-slurm-plugins, each as RPM and .deb) and checks what
// is in them: files, config files, scripts, dependencies (the plugin
// package's exact Slurm release) and the systemd units (systemd-analyze
// verify). With -tags install (`make packages-test`, as root) it also
// installs the .debs on this machine and runs a job through them
// (install_test.go), and installs them in a clean Debian bookworm root
// with no repository (debianroot_test.go): the CLI there (help, sim, man
// pages, completions, estimate against a controller of that root), and
// the units started and stopped by that root's own systemd
// (systemd-nspawn). -short skips it all; a missing tool is a failure.
package packages

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	repo string
	// pkgs: part -> packager -> package file.
	pkgs = map[string]map[string]string{}
	// slurmVersion is the release of the Slurm headers the plugins were
	// built against, decoded here independently of scripts/slurm-version.
	slurmVersion string
	// debPluginDir is Debian's PluginDir on this machine.
	debPluginDir string
	// release is $ROTA_SLURM (empty: the host's): `make packages` builds the
	// plugin package for it, from its chroot's headers, and the plugins come
	// from pluginBin.
	release string
	// pluginBin: where `make packages` puts the plugins it packages (built
	// in scripts/build-root, like every shipped binary).
	pluginBin = "bin/ship"
	// manPages: the rota CLI's pages `make man` wrote, as installed.
	manPages []string
)

var parts = []string{"rota-agent", "rota-controller", "rota-slurm-plugins"}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	wd, _ := os.Getwd()
	repo = filepath.Clean(filepath.Join(wd, "../.."))
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "packages: %v: FAIL\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(filepath.Dir(pkgs["rota-agent"]["deb"]))
	os.Exit(code)
}

func setup() error {
	for _, tool := range []string{"make", "rpm", "dpkg-deb", "dpkg", "systemd-analyze", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not installed: run scripts/setup-deps", tool)
		}
	}
	include := "/usr/include"
	release = os.Getenv("ROTA_SLURM")
	if release != "" && exec.Command(filepath.Join(repo, "scripts/slurm-release"), "is-host", release).Run() != nil {
		out, err := exec.Command(filepath.Join(repo, "scripts/slurm-release"), "include", release).Output()
		if err != nil {
			return fmt.Errorf("scripts/slurm-release include %s: %v", release, err)
		}
		include = strings.TrimSpace(string(out))
		pluginBin = "bin/ship/slurm-" + release
	}
	var err error
	if slurmVersion, err = headerVersion(filepath.Join(include, "slurm/slurm_version.h")); err != nil {
		return fmt.Errorf("%v: run scripts/setup-deps (libslurm-dev)", err)
	}
	out, err := exec.Command("gcc", "-print-multiarch").Output()
	if err != nil {
		return fmt.Errorf("gcc -print-multiarch: %v", err)
	}
	debPluginDir = "/usr/lib/" + strings.TrimSpace(string(out)) + "/slurm-wlm"
	// Its own output folder, so nothing else writing dist/ mixes in.
	dist, err := os.MkdirTemp("", "rota-packages-")
	if err != nil {
		return err
	}
	cmd := exec.Command("make", "packages", "DIST="+dist, "PKG_VERSION=0.1.0", "SLURM="+release)
	cmd.Dir = repo
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make packages: %v\n%s", err, b)
	}
	// One page per command (controller/cmd/rota's TestManPages checks
	// that); these must be among them.
	pages, _ := filepath.Glob(filepath.Join(repo, "bin/man/rota*.1.gz"))
	for _, p := range pages {
		manPages = append(manPages, "/usr/share/man/man1/"+filepath.Base(p))
	}
	for _, want := range []string{"rota", "rota-status", "rota-explain", "rota-estimate", "rota-sim", "rota-solve", "rota-queuewait-train", "rota-completion-bash"} {
		if !slices.Contains(manPages, "/usr/share/man/man1/"+want+".1.gz") {
			return fmt.Errorf("make packages made no %s.1.gz in bin/man: %v", want, pages)
		}
	}
	for _, part := range parts {
		pkgs[part] = map[string]string{}
		for packager, pattern := range map[string]string{"rpm": part + "-0.1.0*.rpm", "deb": part + "_0.1.0*.deb"} {
			m, _ := filepath.Glob(filepath.Join(dist, pattern))
			if len(m) != 1 {
				return fmt.Errorf("want one %s in %s, found %v", pattern, dist, m)
			}
			pkgs[part][packager] = m[0]
		}
	}
	return nil
}

// headerVersion reads "22.05.8" from slurm_version.h's SLURM_VERSION_NUMBER
// (0x160508).
func headerVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^#define\s+SLURM_VERSION_NUMBER\s+0x([0-9a-fA-F]+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("no SLURM_VERSION_NUMBER in %s", path)
	}
	n, _ := strconv.ParseUint(string(m[1]), 16, 32)
	return fmt.Sprintf("%d.%02d.%d", n>>16, (n>>8)&0xff, n&0xff), nil
}

func short(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds packages; skipped with -short")
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func lines(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			m[l] = true
		}
	}
	return m
}

// want: what each package holds. Config files are also listed in config.
type want struct {
	files  []string // RPM paths; the .deb has the same unless deb maps it
	config []string // %config(noreplace) / conffiles, RPM paths
	// Per-packager differences: RPM path -> .deb path.
	deb map[string]string
	// Package scripts (both packagers) and what they must say.
	scripts []string
}

func wants() map[string]want {
	return map[string]want{
		"rota-agent": {
			files:   []string{"/usr/bin/rota-agent", "/usr/lib/systemd/system/rota-agent.service", "/etc/rota/agent.conf", "/etc/sysconfig/rota-agent", "/var/lib/rota-agent", "/usr/share/doc/rota-agent/agent.md"},
			config:  []string{"/etc/rota/agent.conf", "/etc/sysconfig/rota-agent"},
			deb:     map[string]string{"/etc/sysconfig/rota-agent": "/etc/default/rota-agent"},
			scripts: []string{"systemctl daemon-reload", "try-restart rota-agent.service", "disable --now rota-agent.service"},
		},
		"rota-controller": {
			files: append([]string{"/usr/bin/rota-controller", "/usr/bin/rota", "/usr/libexec/rota/rota-estimator-speedtable", "/usr/lib/systemd/system/rota-controller.service", "/etc/rota/controller.conf", "/etc/sysconfig/rota-controller", "/var/lib/rota", "/usr/share/doc/rota-controller/operations.md", "/usr/share/doc/rota-controller/architecture.md",
				"/usr/share/rota/simulation_throughputs.json", "/usr/share/doc/rota-controller/simulation_throughputs.LICENSE",
				"/usr/share/bash-completion/completions/rota", "/usr/share/zsh/site-functions/_rota",
				"/usr/share/rota/grafana/rota-controller.json", "/usr/share/rota/grafana/rota-agents.json"}, manPages...),
			config: []string{"/etc/rota/controller.conf", "/etc/sysconfig/rota-controller"},
			deb: map[string]string{"/etc/sysconfig/rota-controller": "/etc/default/rota-controller",
				"/usr/share/zsh/site-functions/_rota": "/usr/share/zsh/vendor-completions/_rota"},
			scripts: []string{"systemctl daemon-reload", "try-restart rota-controller.service", "disable --now rota-controller.service"},
		},
		"rota-slurm-plugins": {
			files:  []string{"/usr/lib64/slurm/job_submit_rota.so", "/usr/lib64/slurm/spank_rota.so", "/etc/slurm/job_submit_rota.conf", "/usr/share/doc/rota-slurm-plugins/slurm.conf.snippet", "/usr/share/doc/rota-slurm-plugins/plugstack.conf.snippet", "/usr/share/doc/rota-slurm-plugins/building-plugins.md"},
			config: []string{"/etc/slurm/job_submit_rota.conf"},
			deb: map[string]string{
				"/usr/lib64/slurm/job_submit_rota.so": debPluginDir + "/job_submit_rota.so",
				"/usr/lib64/slurm/spank_rota.so":      debPluginDir + "/spank_rota.so",
			},
			// None: the plugins take effect when the admin restarts
			// slurmctld, never behind their back.
		},
	}
}

func TestRPM(t *testing.T) {
	short(t)
	for part, w := range wants() {
		f := pkgs[part]["rpm"]
		t.Run(part, func(t *testing.T) {
			list := lines(run(t, "rpm", "-qpl", f))
			for _, p := range w.files {
				if !list[p] {
					t.Errorf("lacks %s; has %v", p, list)
				}
			}
			if len(list) != len(w.files) {
				t.Errorf("%d files, want %d: %v", len(list), len(w.files), list)
			}
			flags := lines(run(t, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", f))
			for _, c := range w.config {
				if !flags[c+" cn"] {
					t.Errorf("%s not %%config(noreplace): %v", c, flags)
				}
			}
			s := run(t, "rpm", "-qp", "--scripts", f)
			if len(w.scripts) == 0 && strings.TrimSpace(s) != "" {
				t.Errorf("has scripts:\n%s", s)
			}
			for _, want := range w.scripts {
				if !strings.Contains(s, want) {
					t.Errorf("scripts lack %q:\n%s", want, s)
				}
			}
			if len(w.scripts) > 0 && (!strings.Contains(s, "postinstall scriptlet") || !strings.Contains(s, "preuninstall scriptlet")) {
				t.Errorf("want postinstall and preuninstall scriptlets:\n%s", s)
			}
		})
	}
}

func TestRPMPluginsRequireExactSlurm(t *testing.T) {
	short(t)
	f := pkgs["rota-slurm-plugins"]["rpm"]
	var req []string
	for l := range lines(run(t, "rpm", "-qp", "--requires", f)) {
		if !strings.HasPrefix(l, "rpmlib(") {
			req = append(req, l)
		}
	}
	if want := "slurm = " + slurmVersion; len(req) != 1 || req[0] != want {
		t.Errorf("requires %q, want only %q", req, want)
	}
	if v := run(t, "rpm", "-qp", "--qf", "%{VERSION}", f); v != "0.1.0+slurm"+slurmVersion {
		t.Errorf("version %q, want 0.1.0+slurm%s", v, slurmVersion)
	}
	// RHEL's plugins are executable, like the ones Slurm ships there.
	for l := range lines(run(t, "rpm", "-qp", "--qf", "[%{FILEMODES:perms} %{FILENAMES}\n]", f)) {
		if strings.HasSuffix(l, ".so") && !strings.HasPrefix(l, "-rwxr-xr-x ") {
			t.Errorf("plugin mode: %s", l)
		}
	}
	// The controller only recommends Slurm's commands (Slurm may live in /opt).
	if r := run(t, "rpm", "-qp", "--recommends", pkgs["rota-controller"]["rpm"]); strings.TrimSpace(r) != "slurm" {
		t.Errorf("controller recommends %q, want slurm", r)
	}
}

func TestDeb(t *testing.T) {
	short(t)
	for part, w := range wants() {
		f := pkgs[part]["deb"]
		t.Run(part, func(t *testing.T) {
			var list []string
			for l := range lines(run(t, "dpkg-deb", "-c", f)) {
				// drwxr-xr-x root/root 0 2025-01-01 00:00 ./etc/rota/
				fs := strings.Fields(l)
				list = append(list, strings.TrimSuffix(strings.TrimPrefix(fs[len(fs)-1], "."), "/"))
			}
			have := lines(strings.Join(list, "\n"))
			deb := func(p string) string {
				if d, ok := w.deb[p]; ok {
					return d
				}
				return p
			}
			for _, p := range w.files {
				if !have[deb(p)] {
					t.Errorf("lacks %s; has %v", deb(p), list)
				}
			}
			conf := lines(run(t, "dpkg-deb", "-I", f, "conffiles"))
			for _, c := range w.config {
				if !conf[deb(c)] {
					t.Errorf("%s not a conffile: %v", deb(c), conf)
				}
			}
			if len(conf) != len(w.config) {
				t.Errorf("conffiles %v, want %v", conf, w.config)
			}
			info := run(t, "dpkg-deb", "-I", f)
			for _, s := range []string{"postinst", "prerm"} {
				if has := regexp.MustCompile(`(?m)^\s+\d+ bytes,\s+\d+ lines\s+\*?\s*` + s + `\b`).MatchString(info); has != (len(w.scripts) > 0) {
					t.Errorf("%s present = %v, want %v:\n%s", s, has, len(w.scripts) > 0, info)
				}
			}
			for _, s := range []string{"postinst", "prerm"} {
				if len(w.scripts) == 0 {
					continue
				}
				body := run(t, "dpkg-deb", "-I", f, s)
				for _, want := range w.scripts {
					if strings.Contains(want, "disable") == (s == "prerm") && !strings.Contains(body, want) {
						t.Errorf("%s lacks %q:\n%s", s, want, body)
					}
				}
			}
			if p := strings.TrimSpace(run(t, "dpkg-deb", "-f", f, "Package")); p != part {
				t.Errorf("Package = %q", p)
			}
		})
	}
}

// The .deb's dependency must accept Debian's build of exactly this upstream
// release (22.05.8-4+deb12u3) and nothing of another release; dpkg itself
// judges the versions.
func TestDebPluginsDependOnExactSlurm(t *testing.T) {
	short(t)
	f := pkgs["rota-slurm-plugins"]["deb"]
	dep := strings.TrimSpace(run(t, "dpkg-deb", "-f", f, "Depends"))
	next := regexp.MustCompile(`\d+$`).ReplaceAllStringFunc(slurmVersion, func(s string) string {
		n, _ := strconv.Atoi(s)
		return strconv.Itoa(n + 1)
	})
	want := fmt.Sprintf("slurm-wlm-basic-plugins (>= %s), slurm-wlm-basic-plugins (<< %s~)", slurmVersion, next)
	if dep != want {
		t.Fatalf("Depends: %q, want %q", dep, want)
	}
	if v := strings.TrimSpace(run(t, "dpkg-deb", "-f", f, "Version")); v != "0.1.0+slurm"+slurmVersion+"-1" {
		t.Errorf("Version %q", v)
	}
	satisfies := func(v string) bool {
		return exec.Command("dpkg", "--compare-versions", v, "ge", slurmVersion).Run() == nil &&
			exec.Command("dpkg", "--compare-versions", v, "lt", next+"~").Run() == nil
	}
	// The installed Slurm of the release built for: the host's, or its chroot's.
	query := []string{"dpkg-query", "-W", "-f", "${Version}", "slurm-wlm-basic-plugins"}
	if pluginBin != "bin/ship" {
		query = append([]string{"exec", release}, query...)
		query = append([]string{filepath.Join(repo, "scripts/slurm-release")}, query...)
	}
	installed := strings.TrimSpace(run(t, query[0], query[1:]...))
	for v, ok := range map[string]bool{
		installed:                   true,
		slurmVersion + "-1":         true,
		slurmVersion + "-4+deb12u3": true,
		slurmVersion + "+dfsg-2":    true,
		slurmVersion + "~rc1-1":     false,
		next + "-1":                 false,
		next + "~rc1-1":             false,
		"1:" + slurmVersion + "-1":  false, // an epoch is another version
	} {
		if satisfies(v) != ok {
			t.Errorf("slurm-wlm-basic-plugins %s: satisfies = %v, want %v", v, !ok, ok)
		}
	}
	// Debian's plugins are 0644, like the ones Slurm ships there; the
	// plugstack snippet names Debian's PluginDir.
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", f, root)
	for _, so := range []string{"job_submit_rota.so", "spank_rota.so"} {
		st, err := os.Stat(filepath.Join(root, debPluginDir, so))
		if err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v %v", so, err, st)
		}
	}
	snip, err := os.ReadFile(filepath.Join(root, "usr/share/doc/rota-slurm-plugins/plugstack.conf.snippet"))
	if err != nil || !regexp.MustCompile(`(?m)^optional `+debPluginDir+`/spank_rota.so `).Match(snip) {
		t.Errorf("deb plugstack snippet does not load %s/spank_rota.so: %v\n%s", debPluginDir, err, snip)
	}
	// The packaged plugin is the one built here, for this Slurm.
	b, err := os.ReadFile(filepath.Join(repo, pluginBin, "job_submit_rota.so"))
	got, err2 := os.ReadFile(filepath.Join(root, debPluginDir, "job_submit_rota.so"))
	if err != nil || err2 != nil || string(b) != string(got) {
		t.Errorf("packaged job_submit_rota.so differs from %s/ (%v, %v)", pluginBin, err, err2)
	}
}

// The units as packaged, checked by systemd-analyze in a root made of the
// .debs' contents plus this machine's own units (targets such as
// network-online.target): ExecStart binaries must exist and every key parse.
// systemd is not PID 1 here, but verify needs no running manager.
func TestUnitsVerify(t *testing.T) {
	short(t)
	root := t.TempDir()
	for _, part := range []string{"rota-agent", "rota-controller"} {
		run(t, "dpkg-deb", "-x", pkgs[part]["deb"], root)
	}
	sys := "/usr/lib/systemd/system"
	if _, err := os.Stat(filepath.Join(sys, "multi-user.target")); err != nil {
		t.Fatalf("no %s/multi-user.target: run scripts/setup-deps (systemd)", sys)
	}
	run(t, "cp", "-a", "--no-clobber", sys+"/.", filepath.Join(root, sys))
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, "rota-agent.service", "rota-controller.service").CombinedOutput()
	// verify exits 0 on keys it ignores ("Unknown key ...", "Failed to
	// parse ..."): any output is a finding.
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	unit, err := os.ReadFile(filepath.Join(root, sys, "rota-controller.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"After=network-online.target munge.service", "Wants=network-online.target", "Restart=on-failure",
		"StateDirectory=rota", "EnvironmentFile=-/etc/default/rota-controller", "EnvironmentFile=-/etc/sysconfig/rota-controller",
		"ExecStart=/usr/bin/rota-controller --config /etc/rota/controller.conf $ROTA_CONTROLLER_OPTS",
	} {
		if !lines(string(unit))[want] {
			t.Errorf("rota-controller.service lacks %q", want)
		}
	}
	unit, err = os.ReadFile(filepath.Join(root, sys, "rota-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"After=munge.service network-online.target", "Restart=on-failure", "StateDirectory=rota-agent",
		"EnvironmentFile=-/etc/default/rota-agent", "EnvironmentFile=-/etc/sysconfig/rota-agent",
		"ExecStart=/usr/bin/rota-agent --config /etc/rota/agent.conf $ROTA_AGENT_OPTS",
	} {
		if !lines(string(unit))[want] {
			t.Errorf("rota-agent.service lacks %q", want)
		}
	}
	// The default files set the variables the units pass on.
	for file, v := range map[string]string{"etc/default/rota-controller": "ROTA_CONTROLLER_OPTS=", "etc/default/rota-agent": "ROTA_AGENT_OPTS="} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil || !regexp.MustCompile(`(?m)^`+v).Match(b) {
			t.Errorf("%s does not set %s: %v", file, v, err)
		}
	}
}

// maxGlibc is the newest GLIBC_x.y symbol version that objdump -T says an
// ELF file needs ("" when it needs none).
func maxGlibc(t *testing.T, path string) string {
	t.Helper()
	out := run(t, "objdump", "-T", path)
	best := ""
	for _, m := range regexp.MustCompile(`GLIBC_([0-9]+(?:\.[0-9]+)*)`).FindAllStringSubmatch(out, -1) {
		if best == "" || versionLess(best, m[1]) {
			best = m[1]
		}
	}
	return best
}

// versionLess compares dotted numbers: 2.3.4 < 2.28 < 2.34.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	n, _ := f.Read(magic)
	return n == 4 && string(magic) == "\x7fELF"
}

// glibcGoal: RHEL/Rocky 8's glibc. Every ELF file shipped must load there.
const glibcGoal = "2.28"

// TestShippedELFNeedGlibc228 opens every package, RPM and .deb, and checks
// each ELF file in it with objdump -T: none may need a glibc symbol newer
// than GLIBC_2.28 (the binaries are built in scripts/build-root's Debian 11
// root; built on this Debian 12 host they need GLIBC_2.34).
func TestShippedELFNeedGlibc228(t *testing.T) {
	short(t)
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Fatal("objdump not installed (binutils: scripts/setup-deps installs gcc, which brings it)")
	}
	if !versionLess("2.3.4", "2.28") || !versionLess("2.28", "2.34") || versionLess("2.28", "2.28") {
		t.Fatal("versionLess is wrong")
	}
	for _, part := range parts {
		for _, packager := range []string{"rpm", "deb"} {
			root := t.TempDir()
			if packager == "rpm" {
				cmd := exec.Command("sh", "-c", "rpm2cpio \"$0\" | cpio -idm --quiet --no-absolute-filenames", pkgs[part]["rpm"])
				cmd.Dir = root
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("rpm2cpio %s: %v\n%s", pkgs[part]["rpm"], err, out)
				}
			} else {
				run(t, "dpkg-deb", "-x", pkgs[part]["deb"], root)
			}
			n := 0
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() || !isELF(p) {
					return nil
				}
				n++
				rel := strings.TrimPrefix(p, root)
				if v := maxGlibc(t, p); v != "" && versionLess(glibcGoal, v) {
					t.Errorf("%s %s: %s needs GLIBC_%s (goal: at most GLIBC_%s)", part, packager, rel, v, glibcGoal)
				} else {
					t.Logf("%s %s: %s needs at most GLIBC_%s", part, packager, rel, v)
				}
				return nil
			})
			if n == 0 {
				t.Errorf("%s %s holds no ELF file", part, packager)
			}
		}
	}
}

// TestShippedRunOnDebian11 runs the packaged binaries in a Debian 11 root
// (glibc 2.31, the one scripts/build-root builds in): the CLI's help and a
// small simulation of the controller's policies, the controller's and the
// agent's flags.
func TestShippedRunOnDebian11(t *testing.T) {
	short(t)
	if os.Geteuid() != 0 {
		t.Fatal("needs root (chroot into the Debian 11 root)")
	}
	// Under /tmp, which the root sees at the same path.
	dir, err := os.MkdirTemp("/tmp", "rota-bullseye-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, part := range []string{"rota-controller", "rota-agent"} {
		run(t, "dpkg-deb", "-x", pkgs[part]["deb"], dir)
	}
	table := filepath.Join(dir, "usr/share/rota/simulation_throughputs.json")
	for _, c := range [][]string{
		{"usr/bin/rota", "--version"},
		{"usr/bin/rota", "sim", "--static", "20", "--throughput-table", table, "--seed", "1"},
		{"usr/bin/rota-controller", "--help"},
		// Runs until stopped: three seconds of sampling simulated GPUs.
		{"usr/bin/rota-agent", "--config", "/dev/null", "--backend", "sim", "--sim-gpus", "2", "--gpu-type", "v100", "--log-level", "info", "--node", "n1", "--nats", "nats://127.0.0.1:1", "--interval", "1s"},
	} {
		script := `cat /etc/debian_version; exec "$@"`
		if strings.HasSuffix(c[0], "rota-agent") {
			script = `cat /etc/debian_version; timeout 3 "$@"; rc=$?; [ $rc = 124 ] && exit 0; exit $rc`
		}
		args := append([]string{"exec", "sh", "-c", script, "sh", filepath.Join(dir, c[0])}, c[1:]...)
		cmd := exec.Command(filepath.Join(repo, "scripts/build-root"), args...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s on Debian 11: %v\n%s", strings.Join(c, " "), err, out)
			continue
		}
		if !strings.HasPrefix(string(out), "11.") {
			t.Errorf("%s did not run in the Debian 11 root: %s", c[0], out)
		}
		if strings.HasSuffix(c[0], "rota-agent") && !strings.Contains(string(out), "agent started") {
			t.Errorf("the agent did not start on Debian 11:\n%s", out)
		}
		first := strings.SplitN(string(out), "\n", 3)
		t.Logf("Debian %s: %s: %s", first[0], strings.Join(c, " "), first[1])
	}
}

// TestBuildRootFollowsANewCheckout: a directory deleted and made again at
// the same path (CI's fresh clone where the last one was) is seen new inside
// scripts/build-root, not as the deleted one its old bind mount still shows
// (where make found no Makefile). Outside /tmp, which is bound whole.
func TestBuildRootFollowsANewCheckout(t *testing.T) {
	short(t)
	if os.Geteuid() != 0 {
		t.Fatal("needs root (chroot into the Debian 11 root)")
	}
	dir, err := os.MkdirTemp("/var/tmp", "rota-checkout-")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(repo, "scripts/build-root"), "root").Output()
	if err != nil {
		t.Fatalf("scripts/build-root root: %v", err)
	}
	root := strings.TrimSpace(string(out))
	defer func() {
		exec.Command("umount", "-l", root+dir).Run()
		os.Remove(root + dir)
		os.RemoveAll(dir)
	}()
	for _, gen := range []string{"first", "second"} {
		if gen == "second" {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(gen+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(repo, "scripts/build-root"), "exec", "cat", "Makefile")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ROTA_BUILD_ROOT_BINDS="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != gen {
			t.Fatalf("%s checkout at %s: inside the build root cat Makefile gave %q (%v), want %q", gen, dir, out, err, gen)
		}
	}
}

// TestRPMDependenciesAreRHELNames: what each RPM requires, recommends or
// suggests (rpm -qpR and friends) names packages of a RHEL-family system
// with SchedMD's slurm.spec packages (slurm, slurm-slurmd, ...), or
// rpmlib/ELF capabilities; never a Debian-only name.
func TestRPMDependenciesAreRHELNames(t *testing.T) {
	short(t)
	rhel := regexp.MustCompile(`^(slurm(-(slurmctld|slurmd|slurmdbd|devel|contribs|libpmi|pam_slurm|perlapi|sackd|slurmrestd))?( [<>=]+ \S+)?|rpmlib\(.*\).*|/bin/sh|/usr/bin/sh|libc\.so\.6.*|rtld\(GNU_HASH\)|config\(rota-.*\).*|systemd.*)$`)
	for _, part := range parts {
		out := run(t, "rpm", "-qp", "--requires", "--recommends", "--suggests", pkgs[part]["rpm"])
		for _, dep := range strings.Split(strings.TrimSpace(out), "\n") {
			if dep = strings.TrimSpace(dep); dep == "" {
				continue
			}
			if !rhel.MatchString(dep) {
				t.Errorf("%s: %q is not a package or capability of RHEL with SchedMD's Slurm packages", part, dep)
			}
		}
		t.Logf("%s: %s", part, strings.Join(strings.Fields(out), " "))
	}
}
