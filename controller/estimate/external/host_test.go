package external

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/queuewait"
	"github.com/rota-hpc/rota/internal/eventually"
)

// builtin answers recognisably: 1 steps/s, 7 minutes, 3 seconds.
type builtin struct{}

func (builtin) Throughput(_ context.Context, q estimate.ThroughputQuery) (estimate.ThroughputAnswer, error) {
	a := estimate.ThroughputAnswer{}
	for _, ty := range q.Types {
		a.Rates = append(a.Rates, estimate.Rate{GPUType: ty, StepsPerSec: 1, Source: "builtin"})
	}
	return a, nil
}

func (builtin) Walltime(_ context.Context, q estimate.WalltimeQuery) (estimate.WalltimeEstimate, error) {
	return estimate.WalltimeEstimate{Minutes: 7, UncappedMin: 7, Source: "builtin"}, nil
}

func (builtin) QueueWait(context.Context, estimate.QueueWaitQuery) (estimate.QueueWaitAnswer, error) {
	return estimate.QueueWaitAnswer{Wait: 3 * time.Second, Source: "builtin"}, nil
}

// syncBuf is a log sink the plugin's goroutines may write to.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines counts the log lines of a failure kind.
func (s *syncBuf) lines(reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), `"failure":"`+reason+`"`)
}

// rig is a test plugin (this test binary) behind the three hosts.
type rig struct {
	mode string // the mode file
	log  *syncBuf
	tp   *Throughput
	wall *Walltime
	qw   *QueueWait
}

func testConfig(t *testing.T, mode string, log *syncBuf) Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A generous timeout: a loaded CI machine must not turn a good
	// answer into a timeout. The backoff is short so that recovery
	// comes quickly.
	return Config{Command: exe + " rota-test-plugin " + mode, Timeout: 2 * time.Second,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxTimeouts: 2,
		Log: zerolog.New(log).Level(zerolog.InfoLevel)}
}

func newRig(t *testing.T, mode string, timeout time.Duration) *rig {
	r := &rig{mode: filepath.Join(t.TempDir(), "mode"), log: &syncBuf{}}
	r.set(t, mode)
	cfg := testConfig(t, r.mode, r.log)
	if timeout > 0 {
		cfg.Timeout = timeout
	}
	var err error
	if r.tp, err = NewThroughput(cfg, builtin{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.tp.Close)
	if r.wall, err = NewWalltime(cfg, builtin{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.wall.Close)
	if r.qw, err = NewQueueWait(cfg, builtin{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.qw.Close)
	return r
}

func (r *rig) set(t *testing.T, mode string) {
	if err := os.WriteFile(r.mode, []byte(mode), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	tpQuery = estimate.ThroughputQuery{Key: "alice/resnet", Job: estimate.Identity{User: "alice", Name: "resnet"},
		Types: []string{"k80", "v100"}, Hints: map[string]float64{"v100": 20},
		Measured: map[string]estimate.Measured{"k80": {StepsPerSec: 3, Samples: 4}}}
	wallQuery = estimate.WalltimeQuery{WalltimeInput: estimate.WalltimeInput{Key: "alice/resnet", MaxTimeMin: 600},
		PastRunSec: []float64{60, 120}}
	qwQuery = estimate.QueueWaitQuery{Request: queuewait.Request{User: "alice", Nodes: 1},
		State: queuewait.QueueState{Now: time.Unix(1e9, 0), Pending: make([]queuewait.QueueJob, 4)}}
)

// answers asks all three estimators once and returns their sources.
func (r *rig) answers(t *testing.T) (tp estimate.ThroughputAnswer, wall estimate.WalltimeEstimate, qw estimate.QueueWaitAnswer) {
	t.Helper()
	ctx := context.Background()
	var err error
	if tp, err = r.tp.Throughput(ctx, tpQuery); err != nil {
		t.Fatal(err)
	}
	if wall, err = r.wall.Walltime(ctx, wallQuery); err != nil {
		t.Fatal(err)
	}
	if qw, err = r.qw.QueueWait(ctx, qwQuery); err != nil {
		t.Fatal(err)
	}
	return tp, wall, qw
}

// pluginAnswers checks that all three answers are the plugin's "ok" ones.
func pluginAnswers(tp estimate.ThroughputAnswer, wall estimate.WalltimeEstimate, qw estimate.QueueWaitAnswer) bool {
	return len(tp.Rates) == 2 && tp.Rates[0] == estimate.Rate{GPUType: "k80", StepsPerSec: 103, Source: "external:test",
		Basis: tp.Rates[0].Basis} && tp.Rates[1].StepsPerSec == 120 && tp.Rates[1].Source == "external:test" &&
		wall.Minutes == 21 && wall.Source == "external:test" &&
		qw.Wait == 4*time.Minute && qw.Source == "external:test"
}

// waitPlugin asks until the plugin answers (started, restarted or
// recovered), for at most a minute.
func (r *rig) waitPlugin(t *testing.T) {
	t.Helper()
	var tp estimate.ThroughputAnswer
	var wall estimate.WalltimeEstimate
	var qw estimate.QueueWaitAnswer
	answered := false
	defer func() {
		if !answered {
			t.Logf("the last answers: %+v %+v %+v\n%s", tp, wall, qw, r.log.b.String())
		}
	}()
	eventually.True(t, time.Minute, "the plugin to answer", func() bool {
		tp, wall, qw = r.answers(t)
		return pluginAnswers(tp, wall, qw)
	})
	answered = true
}

func builtinAnswers(tp estimate.ThroughputAnswer, wall estimate.WalltimeEstimate, qw estimate.QueueWaitAnswer) bool {
	return len(tp.Rates) == 2 && tp.Rates[0].Source == "builtin" && tp.Rates[1].Source == "builtin" &&
		wall.Source == "builtin" && qw.Source == "builtin"
}

func TestPluginAnswers(t *testing.T) {
	r := newRig(t, modeOK, 0)
	tp, wall, qw := r.answers(t)
	if !pluginAnswers(tp, wall, qw) {
		t.Fatalf("plugin answers: %+v %+v %+v", tp, wall, qw)
	}
	if !strings.HasPrefix(tp.Rates[0].Basis, filepath.Base(os.Args[0])+": test plugin") {
		t.Errorf("basis %q does not name the plugin", tp.Rates[0].Basis)
	}
	// The plugin's walltime is capped like the built-in's.
	q := wallQuery
	q.UserLimitMin = 15
	if w, _ := r.wall.Walltime(context.Background(), q); w.Minutes != 15 || w.CappedBy != estimate.CappedByUser || w.UncappedMin != 21 {
		t.Errorf("capped walltime: %+v", w)
	}
	// "unknown" is an answer, and the built-in fills it in.
	r.set(t, modeUnknown)
	if tp, wall, qw := r.answers(t); !builtinAnswers(tp, wall, qw) {
		t.Fatalf("unknown: %+v %+v %+v", tp, wall, qw)
	}
	for _, s := range []Stats{r.tp.Stats(), r.wall.Stats(), r.qw.Stats()} {
		if s.Answered != 3 && s.Answered != 2 || len(s.Fallbacks) != 0 || s.Starts != 1 {
			t.Errorf("stats %+v", s)
		}
	}
	if strings.Contains(r.log.b.String(), `"level":"warn"`) || r.log.lines("") != 0 {
		t.Errorf("a healthy plugin logged a failure: %s", r.log.b.String())
	}
}

// A plugin that crashes, hangs, fails or answers nonsense gets the
// built-in's answer in its place, one log line per kind of failure for
// many calls, and is used again once it behaves.
func TestPluginMisbehaves(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		reasons []string // logged, once each
		calls   int
		timeout time.Duration
	}{
		{modeCrash, []string{FailCrash}, 5, 0},
		// MaxTimeouts calls kill it; a short timeout keeps the test short.
		{modeHang, []string{FailTimeout, FailHung}, 2, 300 * time.Millisecond},
		{modeNaN, []string{FailNonsense}, 5, 0},
		{modeNegative, []string{FailNonsense}, 5, 0},
		{modeInf, []string{FailNonsense}, 5, 0},
		{modeAbsurd, []string{FailNonsense}, 5, 0},
		{modeWrongTypes, []string{FailNonsense}, 5, 0},
		{modeBadSource, []string{FailNonsense}, 5, 0},
		{modeError, []string{FailError}, 5, 0},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, modeOK, tc.timeout)
			r.waitPlugin(t)
			answered := r.tp.Stats().Answered
			r.set(t, tc.mode)
			for range tc.calls {
				if tp, wall, qw := r.answers(t); !builtinAnswers(tp, wall, qw) {
					t.Fatalf("misbehaving plugin's answers were used: %+v %+v %+v", tp, wall, qw)
				}
			}
			for _, reason := range tc.reasons {
				// One line per estimator (three hosts share the log).
				if n := r.log.lines(reason); n != 3 {
					t.Errorf("%d log lines for %s, want 3 (one per estimator):\n%s", n, reason, r.log.b.String())
				}
			}
			s := r.tp.Stats()
			if got := s.Fallbacks[tc.reasons[0]]; got == 0 || s.Answered != answered {
				t.Errorf("stats %+v: want fallbacks for %s", s, tc.reasons[0])
			}
			// Recovery: the same plugin (or, after a crash or hang, a
			// restarted one) answers again.
			r.set(t, modeOK)
			r.waitPlugin(t)
			for _, reason := range tc.reasons {
				if n := r.log.lines(reason); n != 3 {
					t.Errorf("after recovery %d log lines for %s, want 3", n, reason)
				}
			}
		})
	}
}

// A plugin that crashes at every call is not restarted in a tight loop:
// within the backoff every call goes to the built-in without a start.
func TestCrashBackoff(t *testing.T) {
	log := &syncBuf{}
	mode := filepath.Join(t.TempDir(), "mode")
	if err := os.WriteFile(mode, []byte(modeCrash), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, mode, log)
	cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour
	tp, err := NewThroughput(cfg, builtin{})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	for range 20 {
		a, _ := tp.Throughput(context.Background(), tpQuery)
		if a.Rates[0].Source != "builtin" {
			t.Fatalf("answer %+v", a)
		}
	}
	s := tp.Stats()
	if s.Starts != 1 || s.Fallbacks[FailCrash] != 1 || s.Fallbacks[FailDown] != 19 || log.lines(FailCrash) != 1 {
		t.Fatalf("stats %+v, %d crash lines", s, log.lines(FailCrash))
	}
}

// An executable that is no Rota estimator fails the handshake: logged
// once, and the built-in answers.
func TestNotAPlugin(t *testing.T) {
	for _, tc := range []struct{ name, cmd, wantErr string }{
		{"relative path", "true", "absolute path"},
		{"missing", "/nonexistent/rota-estimator", "not an executable"},
		{"empty", "  ", "no executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewThroughput(Config{Command: tc.cmd}, builtin{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	log := &syncBuf{}
	cfg := Config{Command: sh + " -c true", StartTimeout: 5 * time.Second, MinBackoff: time.Hour, Log: zerolog.New(log).Level(zerolog.InfoLevel)}
	tp, err := NewThroughput(cfg, builtin{})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	for range 3 {
		if a, _ := tp.Throughput(context.Background(), tpQuery); a.Rates[0].Source != "builtin" {
			t.Fatalf("answer %+v", a)
		}
	}
	if s := tp.Stats(); s.StartFailures != 1 || s.Fallbacks[FailDown] != 3 || log.lines(FailStart) != 1 {
		t.Fatalf("stats %+v, log %s", s, log.b.String())
	}
}

// How fast the controller can ask a healthy plugin (the round loop asks
// once per job per round): go test -bench Plugin -run XXX.
func BenchmarkPluginThroughput(b *testing.B) {
	mode := filepath.Join(b.TempDir(), "mode")
	if err := os.WriteFile(mode, []byte(modeOK), 0o644); err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	tp, err := NewThroughput(Config{Command: exe + " rota-test-plugin " + mode, Timeout: 10 * time.Second,
		Log: zerolog.Nop()}, builtin{})
	if err != nil {
		b.Fatal(err)
	}
	defer tp.Close()
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if a, _ := tp.Throughput(ctx, tpQuery); a.Rates[0].Source != "external:test" {
			b.Fatalf("answer %+v", a)
		}
	}
}
