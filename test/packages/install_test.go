//go:build install

package packages

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
)

// TestInstall installs the three .debs on this machine, starts the installed
// controller and agent as their units would (systemd is not PID 1 here),
// brings up a dev cluster whose slurmctld loads the installed plugins from
// the system PluginDir, runs a GPU job through them, and removes everything
// again. Root only; refuses to touch a machine where Rota is installed.
func TestInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("installs packages and runs Slurm: run as root (make packages-test)")
	}
	for _, tool := range []string{"dpkg", "slurmctld", "slurmd", "sbatch", "munge"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed: run scripts/setup-deps", tool)
		}
	}
	// Never clobber a real installation or an admin's files.
	for _, p := range parts {
		if out, _ := exec.Command("dpkg-query", "-W", "-f", "${Status}", p).Output(); strings.Contains(string(out), "installed") {
			t.Fatalf("%s is already installed here (%s); this test would remove it", p, out)
		}
	}
	for _, f := range []string{"/etc/rota", "/var/lib/rota", "/var/lib/rota-agent", "/etc/slurm/job_submit_rota.conf", "/etc/default/rota-controller", "/etc/default/rota-agent", debPluginDir + "/job_submit_rota.so"} {
		if _, err := os.Lstat(f); err == nil {
			t.Fatalf("%s exists (not from these packages): remove it or run elsewhere", f)
		}
	}

	// Cleanups run last-registered first: processes, cluster, packages.
	t.Cleanup(func() {
		out, err := exec.Command("dpkg", "--purge", parts[0], parts[1], parts[2]).CombinedOutput()
		if err != nil {
			t.Errorf("dpkg --purge: %v\n%s", err, out)
		}
		// The controller's JetStream data: ours, the directory did not
		// exist before (checked above).
		os.RemoveAll("/var/lib/rota")
		os.RemoveAll("/var/lib/rota-agent")
		for _, p := range parts {
			if out, _ := exec.Command("dpkg-query", "-W", "-f", "${Status}", p).Output(); strings.Contains(string(out), "installed") {
				t.Errorf("%s still installed after purge: %s", p, out)
			}
		}
		for _, f := range []string{debPluginDir + "/job_submit_rota.so", "/etc/rota", "/etc/slurm/job_submit_rota.conf", "/usr/bin/rota-controller"} {
			if _, err := os.Lstat(f); err == nil {
				t.Errorf("%s left after purge", f)
			}
		}
	})
	out, err := exec.Command("dpkg", "-i", pkgs["rota-agent"]["deb"], pkgs["rota-controller"]["deb"], pkgs["rota-slurm-plugins"]["deb"]).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	installed := lines(run(t, "dpkg", "-L", "rota-slurm-plugins"))
	jobSubmit, spank := debPluginDir+"/job_submit_rota.so", debPluginDir+"/spank_rota.so"
	for _, f := range []string{jobSubmit, spank, "/etc/slurm/job_submit_rota.conf"} {
		if !installed[f] {
			t.Fatalf("dpkg -L rota-slurm-plugins lacks %s", f)
		}
	}

	// The installed units, in the real root now that their binaries exist.
	if out, err := exec.Command("systemd-analyze", "verify", "--man=no", "rota-controller.service", "rota-agent.service").CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify (installed): %v\n%s", err, out)
	}

	// A dev cluster of our own (directory, ports) whose PluginDir is only
	// the system one and whose plugstack names the installed SPANK plugin.
	// Outside the checkout, which may sit in a directory that munge, the
	// daemons and test users cannot enter.
	dir := fmt.Sprintf("/var/lib/rota-dev/cluster/pkgtest-%x", sha256.Sum256([]byte(repo)))[:len("/var/lib/rota-dev/cluster/pkgtest-")+8]
	os.RemoveAll(filepath.Join(dir, "state"))
	slurmPort, natsPort := freePorts(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	env := append(os.Environ(),
		"ROTA_DEV_DIR="+dir, fmt.Sprintf("ROTA_DEV_PORT=%d", slurmPort), fmt.Sprintf("ROTA_DEV_NATS_PORT=%d", natsPort),
		fmt.Sprintf("ROTA_DEV_DBD_PORT=%d", natsPort+1),
		"ROTA_DEV_PLUGIN_DIR="+debPluginDir, "ROTA_DEV_SPANK_SO="+spank,
		"SLURM_CONF="+filepath.Join(dir, "slurm.conf"))
	sh := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	t.Cleanup(func() {
		sh("scancel", "--user=root")
		if out, err := sh(filepath.Join(repo, "scripts/dev-cluster"), "down"); err != nil {
			t.Errorf("dev-cluster down: %v\n%s", err, out)
		}
	})
	if out, err := sh(filepath.Join(repo, "scripts/dev-cluster"), "up"); err != nil {
		t.Fatalf("dev-cluster up: %v\n%s", err, out)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "slurm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^PluginDir=`+debPluginDir+`$`).Match(conf) || !regexp.MustCompile(`(?m)^JobSubmitPlugins=rota$`).Match(conf) {
		t.Fatalf("slurm.conf does not load job_submit/rota from %s alone:\n%s", debPluginDir, conf)
	}

	// Credentials as in production (docs/operations.md, Security): the dev
	// cluster made them for its plugin and nodes; the installed
	// rota-controller adds an identity for the installed agent.
	creds := filepath.Join(dir, "creds")
	if out, err := sh("/usr/bin/rota-controller", "creds", "add-agent", "--dir", creds, "pkgtest"); err != nil {
		t.Fatalf("rota-controller creds add-agent: %v\n%s", err, out)
	}
	// The units' environment files, as an admin would edit them: this
	// cluster's slurm.conf, NATS port and credentials; the controller keeps
	// /etc/rota/controller.conf and its state_dir /var/lib/rota.
	writeFile(t, "/etc/default/rota-controller", fmt.Sprintf(
		"ROTA_CONTROLLER_OPTS=\"--listen 127.0.0.1:%d --creds-dir %s --refresh 10s\"\nSLURM_CONF=%s\n", natsPort, creds, filepath.Join(dir, "slurm.conf")))
	writeFile(t, "/etc/default/rota-agent", fmt.Sprintf(
		"ROTA_AGENT_OPTS=\"--node pkgtest --gpu-type v100 --backend sim --sim-gpus 2 --nats %s --nats-nkey-seed %s --interval 1s --metrics-addr= --progress-dir %s --log-level info\"\n",
		natsURL, filepath.Join(creds, "agents/pkgtest.nk"), filepath.Join(dir, "progress")))
	ctlLog := filepath.Join(dir, "log/installed-rota-controller.log")
	startUnit(t, "rota-controller.service", ctlLog)
	eventually.True(t, 30*time.Second, "the installed controller to be ready", func() bool {
		b, _ := os.ReadFile(ctlLog)
		return bytes.Contains(b, []byte(`"controller ready"`))
	})
	if _, err := os.Stat("/var/lib/rota/jetstream"); err != nil {
		t.Errorf("the controller does not keep its state in /var/lib/rota: %v", err)
	}

	// The installed agent reports to the installed controller's NATS. Only
	// the controller's identity may read reports: the test stands in for it.
	ctlCreds, err := auth.ClientOptions(filepath.Join(creds, "controller.nk"), "")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL, ctlCreds...)
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	defer nc.Close()
	reports, err := nc.SubscribeSync("rota.v1.agent.pkgtest.report")
	if err != nil {
		t.Fatal(err)
	}
	startUnit(t, "rota-agent.service", filepath.Join(dir, "log/installed-rota-agent.log"))
	if _, err := reports.NextMsg(20 * time.Second); err != nil {
		t.Errorf("no report from the installed agent: %v", err)
	}

	// A plain GPU job through the installed plugin and controller. The
	// plugin connects on its next reconnect after the controller came up.
	var id string
	var show string
	eventually.True(t, 30*time.Second, "a job typed by the installed plugin", func() bool {
		out, err := sh("sbatch", "--parsable", "-H", "-o", "/dev/null", "--gres=gpu:1", "--wrap", "true")
		if err != nil {
			t.Fatalf("sbatch: %v: %s", err, out)
		}
		id = strings.TrimSpace(out)
		show, _ = sh("scontrol", "show", "job", id)
		return strings.Contains(show, "AdminComment=rota:")
	})
	// Typed in the gres, or (nodes carry their GPU type as a feature) by
	// a constraint on an untyped request, which Rota can change later.
	typedGres := regexp.MustCompile(`(?m)^\s*TresPerNode=gres:gpu:(v100|p100|k80):1\s*$`).MatchString(show)
	byFeature := regexp.MustCompile(`(?m)^\s*TresPerNode=gres:gpu:1\s*$`).MatchString(show) &&
		regexp.MustCompile(`(?m)^\s*Features=(v100|p100|k80) `).MatchString(show)
	if !typedGres && !byFeature {
		t.Errorf("job %s not typed:\n%s", id, show)
	}
	if !regexp.MustCompile(`(?m)^\s*AdminComment=rota: gpu any->(v100|p100|k80)`).MatchString(show) {
		t.Errorf("job %s not annotated:\n%s", id, show)
	}
	// The plugin slurmctld runs is the installed file.
	pid, err := os.ReadFile(filepath.Join(dir, "run/slurmctld.pid"))
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(maps, []byte(" "+jobSubmit+"\n")) {
		t.Errorf("slurmctld has not mapped %s", jobSubmit)
	}
	if bytes.Contains(maps, []byte(filepath.Join(repo, "bin"))) {
		t.Errorf("slurmctld maps something from %s/bin", repo)
	}

	// The installed SPANK plugin: sbatch knows --rota-steps only through it,
	// and the controller turns it into a walltime.
	sb, err := sh("sbatch", "--parsable", "-H", "-o", "/dev/null", "--gres=gpu:1", "--rota-steps=36000", "--rota-throughput=v100:10,p100:9,k80:3", "--wrap", "true")
	if err != nil {
		t.Fatalf("sbatch with the installed SPANK plugin's options: %v: %s", err, sb)
	}
	show, _ = sh("scontrol", "show", "job", strings.TrimSpace(sb))
	if !regexp.MustCompile(`AdminComment=rota: gpu any->\S+, time none->`).MatchString(show) {
		t.Errorf("SPANK options did not reach the controller:\n%s", show)
	}

	// The installed CLI.
	cli := filepath.Join(creds, "cli.nk")
	if out, err := sh("/usr/bin/rota", "explain", "--nats", natsURL, "--nkey-seed", cli, id); err != nil || !strings.Contains(out, id) {
		t.Errorf("rota explain %s: %v\n%s", id, err, out)
	}
	if out, err := sh("/usr/bin/rota", "status", "--nats", natsURL, "--nkey-seed", cli); err != nil || !strings.Contains(out, "v100") {
		t.Errorf("rota status: %v\n%s", err, out)
	}
}

// startUnit runs an installed unit's ExecStart the way systemd would: its
// EnvironmentFile= files (a leading "-": may be missing) read into a clean
// environment, $VAR split into words, in its own session; the process is
// stopped (SIGTERM, as systemctl stop) at the end of the test. The state
// and runtime directories come from the package, not from systemd.
func startUnit(t *testing.T, unit, logFile string) {
	t.Helper()
	b, err := os.ReadFile("/usr/lib/systemd/system/" + unit)
	if err != nil {
		t.Fatal(err)
	}
	var envFiles []string
	var execStart string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "EnvironmentFile="); ok {
			envFiles = append(envFiles, strings.TrimPrefix(v, "-"))
		}
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			execStart = v
		}
	}
	if execStart == "" {
		t.Fatalf("%s has no ExecStart", unit)
	}
	// The files are KEY=value lines, which sh reads the same way.
	script := `set -a; for f; do [ -r "$f" ] && . "$f"; done; set +a; exec ` + execStart
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, unit}, envFiles...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", unit, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop on SIGTERM", unit)
		}
		lf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("--- %s ---\n%s", logFile, tail(string(b), 30))
		}
	})
	time.Sleep(300 * time.Millisecond) // time to die at once, if it wrongly would: what is tested is that it does not
	select {
	case err := <-done:
		b, _ := os.ReadFile(logFile)
		t.Fatalf("%s exited at once: %v\n%s", unit, err, b)
	default:
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// freePorts: four consecutive ports (slurmctld and three slurmd), the
// next one for NATS and the one after for slurmdbd, so no other cluster on
// this machine collides.
func freePorts(t *testing.T) (slurm, nats int) {
	base, err := freeport.Consecutive(6)
	if err != nil {
		t.Fatal(err)
	}
	return base, base + 4
}
