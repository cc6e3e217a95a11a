//go:build integration

// Package integration runs Rota against a real Slurm: the dev cluster
// (slurmctld + three slurmd with typed fake GPUs), the built plugins and the
// controller. It needs root and Debian's Slurm packages; `make test` sets
// both up. It uses its own cluster directory and ports, so a running
// `make demo` is not disturbed.
package integration

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
)

var (
	repo    string
	devDir  string
	natsURL string
	env     []string
	// release is the Slurm release under test ($ROTA_SLURM; empty: the
	// host's). `make integration ROTA_SLURM=26.05` runs this binary inside
	// that release's chroot (scripts/slurm-release), where sbatch, scontrol
	// and the daemons are that release's.
	release string
	// nodePrefix names this cluster's nodes: its own, so that a dev cluster
	// of another release (or the demo) on this host never shares a node
	// name, hence a cgroup, with it.
	nodePrefix string
)

// node is the dev cluster's node of GPU type typ.
func node(typ string) string { return nodePrefix + "-" + typ }

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repo = filepath.Clean(filepath.Join(wd, "../.."))
	release = os.Getenv("ROTA_SLURM")
	tag := strings.ReplaceAll(release, ".", "")
	if tag == "" {
		tag = "host"
	}
	nodePrefix = "t" + strings.TrimPrefix(tag, "host")
	if nodePrefix == "t" {
		nodePrefix = "test"
	}
	// Two checkouts testing at once on one host need names of their own.
	if p := os.Getenv("ROTA_TEST_NODE_PREFIX"); p != "" {
		nodePrefix = p
	}
	// Outside the checkout, which may sit in a directory that munge, the
	// daemons and the test users cannot enter.
	sum := sha256.Sum256([]byte(repo))
	devDir = fmt.Sprintf("/var/lib/rota-dev/cluster/test-%s-%x", tag, sum[:4])
	// Free ports, so a demo cluster or another checkout's tests on this
	// machine never collide with this one.
	slurmPort, natsPort, err := freePorts()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	natsURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	// rota-test: the user TestJobModify submits as, in an account; the
	// agents' /metrics on the three ports after slurmdbd's (TestDashboards).
	testCluster = newDevCluster(devDir, nodePrefix, slurmPort, natsPort, "ROTA_DEV_USERS=rota-test:lab-a",
		fmt.Sprintf("ROTA_DEV_AGENT_METRICS_PORT=%d", natsPort+3))
	env = testCluster.env
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "integration tests need root (they run munge, slurmctld and slurmd): FAIL")
		os.Exit(1)
	}
	plugins := "bin"
	if os.Getenv("ROTA_IN_CHROOT") != "" {
		plugins = "bin/slurm-" + release
	}
	for _, f := range []string{plugins + "/job_submit_rota.so", plugins + "/spank_rota.so", "bin/rota-controller", "bin/rota"} {
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil {
			fmt.Fprintf(os.Stderr, "%s missing: run make build: FAIL\n", f)
			os.Exit(1)
		}
	}
	if err := testCluster.start(true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		for _, f := range []string{"log/slurmctld.log", "log/rota-controller.log"} {
			b, _ := os.ReadFile(filepath.Join(devDir, f))
			lines := strings.Split(string(b), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			fmt.Fprintf(os.Stderr, "--- last lines of %s ---\n%s\n", f, strings.Join(lines, "\n"))
		}
	}
	testCluster.stop()
	os.Exit(code)
}

// devCluster is one dev cluster: its directory and the environment that
// scripts/dev-cluster, Slurm's clients and bin/rota run with for it.
type devCluster struct {
	dir string
	env []string
	// logAt is the controller log's length before this run started the
	// cluster (ownCluster, restdCluster): its directory keeps earlier
	// runs' lines, which runLog leaves out.
	logAt int64
}

// testCluster is the cluster TestMain starts, which most tests use.
var testCluster devCluster

// newDevCluster is the cluster in dir whose nodes are named prefix-...,
// with slurmctld on slurmPort and the slurmds on the ports after it, NATS
// on natsPort, the controller's /metrics on the next one and slurmdbd on
// the one after (its MariaDB has a socket only); extra adds
// scripts/dev-cluster settings (ROTA_DEV_...).
func newDevCluster(dir, prefix string, slurmPort, natsPort int, extra ...string) devCluster {
	e := append(os.Environ(),
		"ROTA_DEV_DIR="+dir, "ROTA_DEV_NODE_PREFIX="+prefix, fmt.Sprintf("ROTA_DEV_PORT=%d", slurmPort), fmt.Sprintf("ROTA_DEV_NATS_PORT=%d", natsPort),
		fmt.Sprintf("ROTA_DEV_METRICS_PORT=%d", natsPort+1), fmt.Sprintf("ROTA_DEV_DBD_PORT=%d", natsPort+2),
		// bin/rota signs in with the dev cluster's read-only credential.
		"ROTA_NATS_NKEY_SEED="+filepath.Join(dir, "creds", "cli.nk"),
		"SLURM_CONF="+filepath.Join(dir, "slurm.conf"))
	// The web view's port, claimed like the rest (dev-cluster's default,
	// port + 97, may be in another cluster's run of ports).
	web := true
	for _, x := range extra {
		web = web && x != "ROTA_DEV_WEB=off" && !strings.HasPrefix(x, "ROTA_DEV_WEB_PORT=")
	}
	if p, err := freeport.Consecutive(1); web && err == nil {
		e = append(e, fmt.Sprintf("ROTA_DEV_WEB_PORT=%d", p))
	}
	return devCluster{dir: dir, env: append(e, extra...)}
}

// start brings the cluster up from a clean slurmctld and controller state;
// with rota, the controller too, once a submission is placed. What it
// started is stopped again when it fails.
func (c devCluster) start(rota bool) error {
	for _, f := range []string{"state", "controller"} {
		os.RemoveAll(filepath.Join(c.dir, f))
	}
	// The plugin loaded now, not a stats file of an earlier run.
	loaded := pluginMark{loaded: time.Now()}
	if out, err := c.dev("up"); err != nil {
		// What up started before it failed (munged, MariaDB, slurmdbd...)
		// would hold its ports and pid files for the next run.
		c.dev("down")
		return fmt.Errorf("dev-cluster up: %v\n%s", err, out)
	}
	if !rota {
		return nil
	}
	if out, err := c.dev("controller", "start"); err != nil {
		c.dev("down")
		return fmt.Errorf("controller start: %v\n%s", err, out)
	}
	// slurmctld started before the controller, so the plugin connects on
	// its next reconnect attempt (about a second): wait until a submission
	// is placed, as a user would see it.
	if err := c.waitPlacedAfter(loaded); err != nil {
		c.dev("down")
		return err
	}
	return nil
}

// stop cancels the cluster's jobs and stops its daemons.
func (c devCluster) stop() {
	c.run("scancel", "--user=root")
	c.dev("down")
}

func (c devCluster) dev(args ...string) (string, error) {
	return c.run(filepath.Join(repo, "scripts/dev-cluster"), args...)
}

func (c devCluster) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = c.env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// freePorts: four consecutive ports (slurmctld and three slurmd), the
// next one for NATS, then the controller's /metrics, slurmdbd and the
// three agents' /metrics.
func freePorts() (slurm, nats int, err error) {
	base, err := freeport.Consecutive(10)
	return base, base + 4, err
}

// ownCluster starts a dev cluster of the test's own in dir (node names
// nodePrefix+name, ports of its own, ROTA_DEV_CLUSTER the same name) with
// the controller, stopped when the test ends, and clears start()'s probe
// jobs; natsURL is its controller's.
func ownCluster(t *testing.T, dir, name string, extra ...string) (c devCluster, natsURL string) {
	t.Helper()
	slurmPort, natsPort, err := freePorts()
	if err != nil {
		t.Fatal(err)
	}
	c = newDevCluster(dir, nodePrefix+name, slurmPort, natsPort, append(extra, "ROTA_DEV_CLUSTER="+nodePrefix+name)...)
	c.logAt = c.logSize()
	if err := c.start(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	c.run("scancel", "--user=root")
	return c, fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
}

// sacctOf is sacct's line (-X -P -n, fields) for job id among the jobs
// since since: the dev cluster's accounting keeps earlier runs' jobs,
// which had the same ids, and sacct -j alone may answer with one of them.
func (c devCluster) sacctOf(id string, since time.Time, fields string) string {
	out, _ := c.run("sacct", "-n", "-X", "-P", "-S", since.Format("2006-01-02T15:04:05"), "-j", id, "-o", fields)
	return strings.TrimSpace(out)
}

var placedRe = regexp.MustCompile(`AdminComment=rota: gpu any->(\w+)`)

func waitPlaced() error { return testCluster.waitPlaced() }

// waitPlaced: the plugin has the controller's state, and a job submitted
// now is placed (see waitPlacedAfter).
func (c devCluster) waitPlaced() error {
	return c.waitPlacedAfter(pluginMark{})
}

// waitPlacedNext is waitPlaced past an event that just ended (a controller
// restarted, resumed or started): the plugin must take a state the
// controller pushed after now, so a state from before the event, or a
// stats file written before it, never counts.
func (c devCluster) waitPlacedNext() error { return c.waitPlacedAfter(c.pluginMark()) }

// pluginMark is what the plugin's stats file says of its link to the
// controller (plugin/jobsubmit/stats.go): when this load of it began, the
// controller's states it has taken in since, and whether a GPU job
// submitted now would be placed.
type pluginMark struct {
	loaded time.Time
	states int
	ready  bool
}

func (c devCluster) pluginMark() pluginMark {
	s, _, err := c.statsFile()
	if err != nil {
		return pluginMark{} // not written yet: not ready
	}
	return pluginMark{loaded: time.Unix(0, int64(s["loaded_ns"])), states: s["states"], ready: s["ready"] == 1}
}

// waitPlacedAfter waits until the plugin's stats say it is ready with a
// load no older than after's and more states than after's (with
// placement = remote no state is pushed: ready alone), then submits one
// job, which must be placed. Never a job submitted again and again until
// one is placed: once the plugin is ready, a job that fails open is a
// failure of the test (issue #37); only one the plugin decided to leave
// as asked, for want of a usable node, is tried again.
func (c devCluster) waitPlacedAfter(after pluginMark) error {
	conf, _ := os.ReadFile(filepath.Join(c.dir, "job_submit_rota.conf"))
	remote := regexp.MustCompile(`(?m)^placement = remote$`).Match(conf)
	var m pluginMark
	if !eventually.Within(60*time.Second, func() bool {
		m = c.pluginMark()
		return m.ready && !m.loaded.Before(after.loaded) && (remote || m.states > after.states)
	}) {
		return fmt.Errorf("the plugin did not get the controller's state within 60 s (its stats: %+v; waiting past %+v)", m, after)
	}
	// The probe job must be typed. One the plugin left as asked (its note
	// says any->any) did not fail open: the controller saw no usable node,
	// as it does for a few seconds after slurmctld restarts (a reconfigure
	// re-executes it from 23.11 on) until the slurmds answer again and a
	// round reads them; a new probe is tried until it sees them. One with
	// no note at all failed open, and that fails at once.
	var shown string
	var failed error // an answer that ends the wait at once
	if eventually.Within(60*time.Second, func() bool {
		out, err := c.run("sbatch", "--parsable", "-H", "-o", "/dev/null", "--gres=gpu:1", "--wrap", "true")
		if err != nil {
			failed = fmt.Errorf("sbatch: %v: %s", err, out)
			return true
		}
		id := strings.TrimSpace(out)
		shown, _ = c.run("scontrol", "show", "job", id)
		c.run("scancel", id)
		if m := placedRe.FindStringSubmatch(shown); m != nil && m[1] != "any" {
			return true
		}
		if !strings.Contains(shown, "AdminComment=rota: ") {
			failed = fmt.Errorf("the plugin was ready (a one-GPU job could be typed from its state), yet the job it was given was not typed: it failed open (no decision on the job)\n%s", shown)
			return true
		}
		return false
	}) {
		return failed
	}
	return fmt.Errorf("the plugin was ready, yet for 60 s it left a one-GPU job as asked: the controller saw no usable node (sinfo: %s)\n%s", c.sinfoStates(), shown)
}

// sinfoStates is each node's state as sinfo prints it ("*": not responding).
func (c devCluster) sinfoStates() string {
	out, _ := c.run("sinfo", "-h", "-N", "-o", "%N=%t")
	return strings.Join(strings.Fields(out), " ")
}

// restartController restarts the controller with extra environment for
// scripts/dev-cluster, which writes the controller's configuration from
// it; the plugin reconnects by itself.
func restartController(t *testing.T, extra ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "scripts/dev-cluster"), "controller", "restart")
	cmd.Env = append(append([]string{}, env...), extra...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller restart %v: %v\n%s", extra, err, out)
	}
	// Until the plugin has reconnected and has the new controller's state,
	// jobs pass through unplaced: the next test's would fail open.
	if err := testCluster.waitPlacedNext(); err != nil {
		t.Fatalf("after the controller restart %v: %v", extra, err)
	}
}

func dev(args ...string) (string, error) { return testCluster.dev(args...) }

func run(name string, args ...string) (string, error) { return testCluster.run(name, args...) }

// cancelWait cancels jobs (ids, or --name=N) and waits, up to 15 s, until
// the queue lists none of them: for a test's cleanup, so it never fails.
func cancelWait(jobs ...string) {
	run("scancel", jobs...)
	q := []string{"-h", "-o", "%i"}
	var ids []string
	for _, j := range jobs {
		if strings.HasPrefix(j, "--") {
			q = append(q, j)
		} else {
			ids = append(ids, j)
		}
	}
	if len(ids) > 0 {
		q = append(q, "-j", strings.Join(ids, ","))
	}
	eventually.Within(15*time.Second, func() bool {
		out, _ := run("squeue", q...)
		return strings.TrimSpace(out) == ""
	})
}

// sbatch submits a held job (it stays pending, so the cluster never fills
// up) and returns its id.
func sbatch(t *testing.T, args ...string) uint32 {
	t.Helper()
	all := append([]string{"--parsable", "-H", "-o", "/dev/null"}, args...)
	all = append(all, "--wrap", "sleep 1")
	out, err := run("sbatch", all...)
	if err != nil {
		t.Fatalf("sbatch %v: %v: %s", args, err, out)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(strings.Split(out, ";")[0]), 10, 32)
	if err != nil {
		t.Fatalf("sbatch %v printed %q", args, out)
	}
	t.Cleanup(func() { run("scancel", strconv.FormatUint(id, 10)) })
	return uint32(id)
}

// job is what `scontrol show job` says about the fields Rota touches.
// Where Rota chose the type by node constraint (the dev cluster's nodes
// carry their GPU type as a feature), the untyped GPU entries of the TRES
// fields are shown with that type, the type the job will run on; Raw
// keeps what Slurm printed.
type job struct {
	TresPerNode, TresPerJob, TresPerTask, TresPerSocket string
	TimeLimit, AdminComment, Features                   string
	Raw                                                 struct{ TresPerNode, TresPerJob, TresPerTask, TresPerSocket string }
}

var (
	kvRe      = regexp.MustCompile(`(TresPerNode|TresPerJob|TresPerTask|TresPerSocket|TimeLimit|Features)=(\S*)`)
	featureRe = regexp.MustCompile(`(?:^|&)(v100|p100|k80)(?:&|$)`)
	untypedRe = regexp.MustCompile(`gres:gpu(:\d+)?(,|$)`)
	// Slurm 23.11+'s spellings of TRES entries (see show).
	tresSpelling = strings.NewReplacer("gres/", "gres:")
	tresEquals   = regexp.MustCompile(`gres:(\w+)=(\d+)`)
)

func show(t *testing.T, id uint32) job {
	t.Helper()
	out, err := run("scontrol", "show", "job", strconv.FormatUint(uint64(id), 10))
	if err != nil {
		t.Fatalf("scontrol show job %d: %v: %s", id, err, out)
	}
	var j job
	for _, m := range kvRe.FindAllStringSubmatch(out, -1) {
		switch m[1] {
		case "TresPerNode":
			j.TresPerNode = m[2]
		case "TresPerJob":
			j.TresPerJob = m[2]
		case "TresPerTask":
			j.TresPerTask = m[2]
		case "TresPerSocket":
			j.TresPerSocket = m[2]
		case "TimeLimit":
			j.TimeLimit = m[2]
		case "Features":
			if m[2] != "(null)" {
				j.Features = m[2]
			}
		}
	}
	// 23.11 and later write gres/gpu:N (and gres/gpu=N for
	// --gpus-per-task) where 22.05 writes gres:gpu:N: the same request,
	// compared here in 22.05's spelling.
	for _, f := range []*string{&j.TresPerNode, &j.TresPerJob, &j.TresPerTask, &j.TresPerSocket} {
		*f = tresSpelling.Replace(*f)
		*f = tresEquals.ReplaceAllString(*f, "gres:$1:$2")
	}
	j.Raw.TresPerNode, j.Raw.TresPerJob, j.Raw.TresPerTask, j.Raw.TresPerSocket = j.TresPerNode, j.TresPerJob, j.TresPerTask, j.TresPerSocket
	if m := featureRe.FindStringSubmatch(j.Features); m != nil {
		for _, f := range []*string{&j.TresPerNode, &j.TresPerJob, &j.TresPerTask, &j.TresPerSocket} {
			*f = untypedRe.ReplaceAllString(*f, "gres:gpu:"+m[1]+"$1$2")
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "AdminComment="); ok && v != "(null)" {
			j.AdminComment = v
		}
	}
	return j
}

// gpuTypes are the dev cluster's types; the controller must pick one.
var typed = regexp.MustCompile(`^gres:gpu:(v100|p100|k80):`)

func controllerPid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(devDir, "run/rota-controller.pid"))
	if err != nil {
		t.Fatalf("controller pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func slurmctldUp(t *testing.T) {
	t.Helper()
	out, err := run("scontrol", "ping")
	if err != nil || !strings.Contains(out, "UP") {
		t.Fatalf("slurmctld is not up: %v %s", err, out)
	}
}

func signalController(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(controllerPid(t), sig); err != nil {
		t.Fatalf("kill -%v controller: %v", sig, err)
	}
}

// setPlacement switches the plugin to placement = mode (local or remote)
// and reloads it, and returns the function that switches it back.
// slurmctld reloads job_submit plugins only when JobSubmitPlugins changes,
// so the plugin is taken out and put back.
func setPlacement(t *testing.T, mode string) (restore func()) {
	t.Helper()
	return setPluginConf(t, "placement", mode)
}

// setPluginConf sets key = value in job_submit_rota.conf (adding the line
// where there is none) and reloads the plugin; it returns the function
// that puts the file back as it was and reloads it again.
func setPluginConf(t *testing.T, key, value string) (restore func()) {
	t.Helper()
	conf := filepath.Join(devDir, "job_submit_rota.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` = .*$`)
	line := []byte(key + " = " + value)
	nb := re.ReplaceAll(b, line)
	if !re.Match(b) {
		nb = append(append(append([]byte{}, b...), line...), '\n')
	}
	if err := os.WriteFile(conf, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	// Put back once, by the caller or, when the reload below fails (and
	// the caller never gets restore), when t ends: a cluster left with
	// another placement mode fails every test after it.
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		if err := os.WriteFile(conf, b, 0o644); err != nil {
			t.Fatal(err)
		}
		reloadPlugin(t)
	}
	t.Cleanup(restore)
	reloadPlugin(t)
	return restore
}

// reloadPlugin takes job_submit/rota out of slurm.conf and puts it back
// (slurmctld reloads a job_submit plugin only when JobSubmitPlugins
// changes; from 23.11 a reconfigure re-executes slurmctld, which loads it
// afresh either way): the plugin's counters (pluginStats) start again.
func reloadPlugin(t *testing.T) {
	t.Helper()
	slurmConf := filepath.Join(devDir, "slurm.conf")
	sc, err := os.ReadFile(slurmConf)
	if err != nil {
		t.Fatal(err)
	}
	reloaded := pluginMark{loaded: time.Now()}
	without := regexp.MustCompile(`(?m)^JobSubmitPlugins=.*\n`).ReplaceAll(sc, nil)
	for _, c := range [][]byte{without, sc} {
		if err := os.WriteFile(slurmConf, c, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := run("scontrol", "reconfigure"); err != nil {
			t.Fatalf("scontrol reconfigure: %v %s", err, out)
		}
		time.Sleep(time.Second)
	}
	if err := testCluster.waitPlacedAfter(reloaded); err != nil {
		t.Fatal(err)
	}
}

// pluginStats reads the counters the plugin keeps in its stats file
// (stats_file in job_submit_rota.conf; the dev cluster sets it), counted
// since it was last loaded. The plugin writes the file once a second
// while they change, so it waits for one write after the caller's last
// submission.
func pluginStats(t *testing.T) map[string]int {
	t.Helper()
	time.Sleep(1500 * time.Millisecond)
	stats, line, err := testCluster.statsFile()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plugin stats: %s", line)
	return stats
}

// statsFile reads the plugin's stats file of cluster c (stats_file; one
// key=number line, plugin/jobsubmit/stats.go): its fields and the line.
func (c devCluster) statsFile() (map[string]int, string, error) {
	path := filepath.Join(c.dir, "run", "job_submit_rota.stats")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("the plugin's stats file: %w", err)
	}
	line := strings.TrimSpace(string(b))
	stats := map[string]int{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, line, fmt.Errorf("%s: %q is not key=number", path, f)
		}
		stats[k] = n
	}
	return stats, line, nil
}

// cgroupMode is how cluster dir's Slurm tracks jobs: "v2", "v1", or ""
// (linuxproc), read from the cgroup.conf scripts/dev-cluster wrote
// (ROTA_DEV_CGROUP).
func cgroupMode(dir string) string {
	conf, _ := os.ReadFile(filepath.Join(dir, "slurm.conf"))
	if !strings.Contains(string(conf), "ProctrackType=proctrack/cgroup") {
		return ""
	}
	cg, _ := os.ReadFile(filepath.Join(dir, "cgroup.conf"))
	if strings.Contains(string(cg), "CgroupPlugin=cgroup/v2") {
		return "v2"
	}
	return "v1"
}

// cgroupMountpoint is CgroupMountpoint in cluster dir's cgroup.conf.
func cgroupMountpoint(dir string) string {
	cg, _ := os.ReadFile(filepath.Join(dir, "cgroup.conf"))
	if m := regexp.MustCompile(`(?m)^CgroupMountpoint=(\S+)`).FindSubmatch(cg); m != nil {
		return string(m[1])
	}
	return "/sys/fs/cgroup"
}

// nodeCgroupRoot is the cgroup directory under which Slurm puts every job
// of node (several slurmd share this host, so each has its own):
// v1 /sys/fs/cgroup/freezer/slurm_<node>, v2
// <mount>/system.slice/<node>_slurmstepd.scope.
func nodeCgroupRoot(t *testing.T, dir, node string) string {
	t.Helper()
	switch cgroupMode(dir) {
	case "v1":
		return "/sys/fs/cgroup/freezer/slurm_" + node
	case "v2":
		return filepath.Join(cgroupMountpoint(dir), "system.slice", node+"_slurmstepd.scope")
	}
	t.Fatal("the dev cluster runs without cgroups (proctrack/linuxproc), so no agent can tell jobs' processes apart")
	return ""
}

var sluidRe = regexp.MustCompile(`\bSLUID=(s[0-9A-Z]{13})\b`)

// jobCgroup is job id's own cgroup directory on node: job_<id>, or on
// Slurm 26.05's cgroup v2 the job's SLUID (scontrol -d show job) unless
// CgroupJobIdPaths=yes.
func jobCgroup(t *testing.T, c devCluster, node, id string) string {
	t.Helper()
	root := nodeCgroupRoot(t, c.dir, node)
	if d := jobCgroupOrEmpty(c, node, id); d != "" {
		return d
	}
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	t.Fatalf("no cgroup of job %s under %s (%v)", id, root, names)
	return ""
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// heavy makes t the only heavy test running on this machine until it
// ends: make test runs the releases' suites side by side, and two tests
// that each start many clusters (the differential test's six, two joined
// clusters) or compile (the site's builds) at once starve each other's
// daemons past their timeouts on a 2-core host (seen: a slurmdbd that
// did not answer in 120 s). A lock file under /tmp, which every release's
// chroot shares, held by flock until the test's cleanup.
func heavy(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "rota-heavy-test.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("heavy-test lock: %v", err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("heavy-test lock: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("waited %v for another release's heavy test to end", d.Round(time.Second))
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}
