//go:build install

package packages

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
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

// The tests here install the packages into a clean Debian bookworm root
// (scripts/debian-root: debootstrap minbase, cached) that holds no
// repository, as a site's machine would, and run them there: the CLI in
// a chroot, the units under the root's own systemd (systemd-nspawn).

// rootEnv is the environment of every command run in a root: nothing of
// this machine's (no ROTA_*, no SLURM_CONF, no PATH into the checkout).
var rootEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}

// newDebianRoot makes a clean root with the given parts' .debs installed
// (dpkg -i, as root in a chroot), and removes it at the end: never while
// anything is still mounted below it.
func newDebianRoot(t *testing.T, parts ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("makes a Debian root and chroots into it: run as root (make packages-test)")
	}
	for _, tool := range []string{"debootstrap", "zstd", "chroot", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed: run scripts/setup-deps", tool)
		}
	}
	parent, err := os.MkdirTemp("", "rota-debian-root-")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(parent, "root")
	t.Cleanup(func() {
		for _, m := range mountsUnder(root) {
			if err := exec.Command("umount", "-R", m).Run(); err != nil {
				exec.Command("umount", "-l", m).Run()
			}
		}
		if left := mountsUnder(root); len(left) > 0 {
			t.Errorf("left %s: still mounted there: %v", parent, left)
			return
		}
		os.RemoveAll(parent)
	})
	start := time.Now()
	if out, err := exec.Command(filepath.Join(repo, "scripts/debian-root"), root).CombinedOutput(); err != nil {
		t.Fatalf("scripts/debian-root: %v\n%s", err, out)
	} else {
		t.Logf("%s(%.1fs)", out, time.Since(start).Seconds())
	}
	args := []string{"dpkg", "-i"}
	for _, part := range parts {
		deb := pkgs[part]["deb"]
		b, err := os.ReadFile(deb)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "tmp", filepath.Base(deb)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "/tmp/"+filepath.Base(deb))
	}
	if out, err := inRoot(root, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s in the root: %v\n%s", strings.Join(args, " "), err, out)
	}
	return root
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/mounts")
	var ms []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			ms = append([]string{f[1]}, ms...)
		}
	}
	return ms
}

// inRoot is a command run in the root, from /root, with rootEnv.
func inRoot(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("chroot", append([]string{root, "/bin/sh", "-c", `cd /root && exec "$@"`, "sh"}, args...)...)
	cmd.Env = rootEnv
	return cmd
}

// TestInstalledCLI: the rota-controller package in a clean root, with no
// repository there, runs rota sim and rota --help on its own files; its man
// pages and completions work in man, bash and zsh; and its controller,
// reading a Slurm cluster as a site's controller host would (the cluster's
// slurm.conf and munge key, its own munged), answers rota estimate --model
// from the throughput table the package installed.
func TestInstalledCLI(t *testing.T) {
	root := newDebianRoot(t, "rota-controller")
	if err := exec.Command("mount", "-t", "proc", "proc", filepath.Join(root, "proc")).Run(); err != nil {
		t.Fatalf("mount proc in the root: %v", err)
	}
	sh := func(script string) (string, error) {
		b, err := inRoot(root, "/bin/sh", "-c", script).CombinedOutput()
		return string(b), err
	}
	// Nothing of the checkout is there: not the repository, not ../shared.
	if out, err := sh(fmt.Sprintf("test ! -e %q && test ! -e %q && test ! -e /shared", repo, filepath.Dir(repo)+"/shared")); err != nil {
		t.Fatalf("the root has the repository or ../shared: %v %s", err, out)
	}

	t.Run("help", func(t *testing.T) {
		for _, c := range []string{"", "status", "explain", "estimate", "sim", "solve", "queuewait", "queuewait train", "queuewait eval", "completion", "completion bash"} {
			for _, h := range []string{"-h", "--help"} {
				out, err := sh("rota " + c + " " + h)
				if err != nil || !strings.Contains(out, "Usage:\n  "+strings.TrimSpace("rota "+c)) || strings.Contains(out, "help requested") {
					t.Errorf("rota %s %s: %v\n%s", c, h, err, out)
				}
			}
		}
		if out, err := sh("rota"); err == nil || !strings.Contains(out, "Usage:") {
			t.Errorf("rota alone: %v, want exit 2 with the usage\n%s", err, out)
		}
	})

	t.Run("sim", func(t *testing.T) {
		// No flag: the table the package installed.
		out, err := sh("rota sim --static 5 --json")
		var rep struct {
			JobsMeasured int     `json:"jobs_measured"`
			AvgJCTHours  float64 `json:"avg_jct_hours"`
		}
		if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.JobsMeasured != 5 || rep.AvgJCTHours <= 0 {
			t.Fatalf("rota sim --static 5: %v %+v\n%s", err, rep, out)
		}
		if out, err := sh("rota solve --jobs 64 --policy las"); err != nil || !strings.Contains(out, "las: 64 jobs") {
			t.Errorf("rota solve: %v\n%s", err, out)
		}
		// Without it, the error says where rota looked and what to do.
		out, err = sh("mv /usr/share/rota/simulation_throughputs.json /root/t.json && rota sim --static 2; rc=$?; mv /root/t.json /usr/share/rota/simulation_throughputs.json; exit $rc")
		if err == nil || !strings.Contains(out, "looked in /usr/share/rota/simulation_throughputs.json") || !strings.Contains(out, "--throughput-table FILE") {
			t.Errorf("rota sim without the table: %v\n%s", err, out)
		}
	})

	t.Run("man", func(t *testing.T) {
		for page, want := range map[string]string{"rota": "rota-sim(1)", "rota-sim": "--throughput-table", "rota-queuewait-train": "--from-sacct", "rota-estimate": "--model"} {
			out, err := sh("MANWIDTH=100 man -P cat " + page)
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("man %s: %v; lacks %q\n%s", page, err, want, out)
			}
		}
	})

	t.Run("completion", func(t *testing.T) {
		// bash-completion loads the package's script on demand (its loader
		// returns 124, "loaded, try again"); the script asks the installed
		// rota for the candidates.
		out, err := sh(`bash -c 'source /usr/share/bash-completion/bash_completion && { _completion_loader rota; complete -p rota; } &&
COMP_WORDS=(rota queuewait t) COMP_CWORD=2 COMP_LINE="rota queuewait t" COMP_POINT=16 && __start_rota && echo "reply: ${COMPREPLY[*]}"'`)
		if err != nil || !strings.Contains(out, "complete -o default -F __start_rota rota") || !strings.Contains(out, "reply: train") {
			t.Errorf("bash completion: %v\n%s", err, out)
		}
		out, err = sh(`zsh -fc 'autoload -Uz compinit && compinit -u && print -r -- "rota: ${_comps[rota]}"'`)
		if err != nil || !strings.Contains(out, "rota: _rota") {
			t.Errorf("zsh completion: %v\n%s", err, out)
		}
	})

	t.Run("estimate", func(t *testing.T) {
		estimateOnCluster(t, root, sh)
	})
}

// estimateOnCluster runs the installed controller in the root against a
// dev cluster of its own on this machine, and rota estimate --model
// against it.
func estimateOnCluster(t *testing.T, root string, sh func(string) (string, error)) {
	for _, tool := range []string{"slurmctld", "slurmd", "munge"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed: run scripts/setup-deps", tool)
		}
	}
	dir := fmt.Sprintf("/var/lib/rota-dev/cluster/droot-%x", sha256.Sum256([]byte(repo)))[:len("/var/lib/rota-dev/cluster/droot-")+8]
	os.RemoveAll(filepath.Join(dir, "state"))
	// slurmctld, three slurmd, the cluster's NATS and slurmdbd (unused),
	// and the root's controller.
	base, err := freeport.Consecutive(7)
	if err != nil {
		t.Fatal(err)
	}
	natsPort, ctlPort := base+4, base+6
	env := append(os.Environ(), "ROTA_DEV_DIR="+dir, fmt.Sprintf("ROTA_DEV_PORT=%d", base), fmt.Sprintf("ROTA_DEV_NATS_PORT=%d", natsPort),
		fmt.Sprintf("ROTA_DEV_DBD_PORT=%d", natsPort+1), "ROTA_DEV_ACCOUNTING=off", "ROTA_DEV_NODE_PREFIX=droot")
	dev := func(arg string) (string, error) {
		cmd := exec.Command(filepath.Join(repo, "scripts/dev-cluster"), arg)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	t.Cleanup(func() {
		if out, err := dev("down"); err != nil {
			t.Logf("dev-cluster down: %v\n%s", err, out)
		}
	})
	if out, err := dev("up"); err != nil {
		t.Fatalf("dev-cluster up: %v\n%s", err, out)
	}
	// The site's files on its controller host: slurm.conf (at the path the
	// cluster uses, with its plugin directory), /etc/hosts, the munge key.
	conf := filepath.Join(dir, "slurm.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "plugins")} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, conf), string(b))
	for _, f := range []string{"/etc/hosts", "/etc/munge/munge.key"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, f), string(b))
	}
	if out, err := sh("chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key && mkdir -p /run/munge && chown munge:munge /run/munge"); err != nil {
		t.Fatalf("munge key: %v\n%s", err, out)
	}
	munged := inRoot(root, "setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "munged", "--foreground")
	background(t, munged, filepath.Join(dir, "log/root-munged.log"))
	if out, err := waitOK(20*time.Second, func() (string, error) { return sh("munge -n | unmunge") }); err != nil {
		t.Fatalf("the root's munged: %v\n%s", err, out)
	}
	// The installed controller, with the package's controller.conf (its
	// throughput_table is the package's table) and this cluster.
	ctl := inRoot(root, "env", "SLURM_CONF="+conf, "/usr/bin/rota-controller", "--config", "/etc/rota/controller.conf",
		"--listen", fmt.Sprintf("127.0.0.1:%d", ctlPort), "--refresh", "5s")
	logFile := filepath.Join(dir, "log/root-rota-controller.log")
	background(t, ctl, logFile)
	nats := fmt.Sprintf("--nats nats://127.0.0.1:%d", ctlPort)
	model := "ResNet-50 (batch size 64)"
	out, err := waitOK(60*time.Second, func() (string, error) {
		return sh("rota estimate " + nats + " --gpus 1 --steps 36000 --json --model '" + model + "'")
	})
	if err != nil {
		b, _ := os.ReadFile(logFile)
		t.Fatalf("rota estimate --model: %v\n%s\ncontroller log:\n%s", err, out, tail(string(b), 20))
	}
	var rep struct {
		Rows []struct {
			Partition   string   `json:"partition"`
			GPUType     string   `json:"gpu_type"`
			StepsPerSec *float64 `json:"steps_per_s"`
			RateBasis   string   `json:"rate_basis"`
			RunMin      *float64 `json:"run_min"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Rows) != 3 {
		t.Fatalf("rota estimate --json: %v, want a row per GPU type\n%s", err, out)
	}
	for _, r := range rep.Rows {
		if r.StepsPerSec == nil || *r.StepsPerSec <= 0 || !strings.Contains(r.RateBasis, "throughput table: "+model) || r.RunMin == nil {
			t.Errorf("%s/%s: steps/s %v, run %v, basis %q: want the table's rate", r.Partition, r.GPUType, r.StepsPerSec, r.RunMin, r.RateBasis)
		}
	}
	// The words a user reads, and a model the table does not have.
	if out, err := sh("rota estimate " + nats + " --gpus 1 --steps 36000 --model '" + model + "'"); err != nil ||
		!regexp.MustCompile(`(?m)^gpu\s+v100\s+yes\s+1\s+[0-9.]+\s+[0-9.]+h\s`).MatchString(out) || !strings.Contains(out, "fastest:") {
		t.Errorf("rota estimate: %v\n%s", err, out)
	}
	if out, err := sh("rota estimate " + nats + " --gpus 1 --model 'no such model'"); err == nil || !strings.Contains(out, "is not in the throughput table") {
		t.Errorf("rota estimate --model 'no such model': %v\n%s", err, out)
	}
}

// background starts cmd (in its own session, output to logFile) and stops
// it with SIGTERM at the end of the test.
func background(t *testing.T, cmd *exec.Cmd, logFile string) {
	t.Helper()
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("%v did not stop on SIGTERM", cmd.Args)
		}
		lf.Close()
	})
}

// waitOK retries f until it succeeds or d has passed, and gives its last
// output and error.
func waitOK(d time.Duration, f func() (string, error)) (string, error) {
	var out string
	var err error
	eventually.Within(d, func() bool {
		out, err = f()
		return err == nil
	})
	return out, err
}

// unitsTest runs in the booted root (rota-units-test.service): it starts
// and stops the packaged units with systemctl and writes what systemd says
// of them as KEY=value lines, then powers the container off.
const unitsTest = `#!/bin/sh
out=/rota-units-test.out
: >$out
say() { echo "$*" >>$out; }
show() { systemctl show -p ActiveState,SubState,Result,ExecMainCode,ExecMainStatus,NRestarts "$1" | sed "s/^/$2./" >>$out; }
waitlog() { # unit text seconds
  i=0
  while [ $i -lt $(($3 * 2)) ]; do
    journalctl -q -u "$1" --no-pager -o cat | grep -q "$2" && return 0
    sleep 0.5; i=$((i + 1))
  done
  return 1
}
say "systemd=$(systemctl --version | head -1)"
systemctl start rota-controller.service; say "controller.start=$?"
waitlog rota-controller.service '"controller ready"' 30; say "controller.ready=$?"
systemctl start rota-agent.service; say "agent.start=$?"
waitlog rota-agent.service 'connected to NATS' 30; say "agent.connected=$?"
sleep 2
show rota-controller.service controller.running
show rota-agent.service agent.running
say "statedir=$(ls /var/lib/rota | tr '\n' ' ')"
systemctl stop rota-agent.service; say "agent.stop=$?"
systemctl stop rota-controller.service; say "controller.stop=$?"
show rota-controller.service controller.stopped
show rota-agent.service agent.stopped
journalctl -u rota-controller.service -u rota-agent.service --no-pager -o short-iso >/rota-units-test.journal 2>&1
say "done=1"
systemctl poweroff
`

// TestUnitsUnderSystemd boots a clean root with the agent and controller
// packages installed under its own systemd (systemd-nspawn -b, its own
// network namespace) and starts and stops rota-controller.service and
// rota-agent.service there: both must run, the agent reach the
// controller's embedded NATS, and both stop cleanly (Result=success).
// The agent runs on synthetic GPUs (/etc/default/rota-agent, as an admin
// would set it); the controller has no Slurm there and says so, running on.
func TestUnitsUnderSystemd(t *testing.T) {
	for _, tool := range []string{"systemd-nspawn", "script", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed: run scripts/setup-deps (systemd-container, bsdutils, coreutils)", tool)
		}
	}
	root := newDebianRoot(t, "rota-controller", "rota-agent")
	writeFile(t, filepath.Join(root, "etc/default/rota-agent"),
		`ROTA_AGENT_OPTS="--node rota-test --gpu-type v100 --backend sim --sim-gpus 2 --interval 1s --metrics-addr= --log-level info"`+"\n")
	if err := os.WriteFile(filepath.Join(root, "usr/local/sbin/rota-units-test"), []byte(unitsTest), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "etc/systemd/system/rota-units-test.service"), `[Unit]
Description=Start and stop Rota's units, then power off
After=multi-user.target
[Service]
Type=simple
ExecStart=/usr/local/sbin/rota-units-test
[Install]
WantedBy=multi-user.target
`)
	if err := os.Symlink("/etc/systemd/system/rota-units-test.service", filepath.Join(root, "etc/systemd/system/multi-user.target.wants/rota-units-test.service")); err != nil {
		t.Fatal(err)
	}
	// systemd wants a terminal for its console: script gives it one.
	// --keep-unit and --register=no: this machine's PID 1 need not be
	// systemd (no bus, no machined).
	console := filepath.Join(filepath.Dir(root), "console.log")
	start := time.Now()
	cmd := exec.Command("timeout", "180", "script", "-qfec",
		"systemd-nspawn --boot --directory="+root+" --register=no --keep-unit --private-network --machine=rota-test", console)
	out, err := cmd.CombinedOutput()
	b, _ := os.ReadFile(filepath.Join(root, "rota-units-test.out"))
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			got[k] = v
		}
	}
	t.Logf("booted, ran and powered off in %.1fs; %s", time.Since(start).Seconds(), got["systemd"])
	if err != nil || got["done"] != "1" {
		c, _ := os.ReadFile(console)
		t.Fatalf("systemd-nspawn: %v %s\nfindings: %v\nconsole:\n%s", err, out, got, tail(strings.ReplaceAll(string(c), "\r", ""), 40))
	}
	want := map[string]string{
		"controller.start": "0", "controller.ready": "0", "agent.start": "0", "agent.connected": "0",
		"agent.stop": "0", "controller.stop": "0",
	}
	for _, u := range []string{"controller", "agent"} {
		want[u+".running.ActiveState"], want[u+".running.SubState"], want[u+".running.NRestarts"] = "active", "running", "0"
		want[u+".stopped.ActiveState"], want[u+".stopped.SubState"], want[u+".stopped.Result"] = "inactive", "dead", "success"
		want[u+".stopped.ExecMainStatus"] = "0"
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// The controller kept its JetStream data in its StateDirectory.
	if !strings.Contains(got["statedir"], "jetstream") {
		t.Errorf("/var/lib/rota holds %q, want the controller's jetstream", got["statedir"])
	}
	if t.Failed() {
		j, _ := os.ReadFile(filepath.Join(root, "rota-units-test.journal"))
		t.Logf("journal:\n%s", tail(string(j), 40))
	}
}
