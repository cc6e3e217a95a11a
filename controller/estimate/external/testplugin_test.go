package external

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
)

// The test binary doubles as a misbehaving estimator plugin: run as
// "<test binary> rota-test-plugin MODEFILE" it serves all three
// estimators, behaving on each call as MODEFILE says (read per call, so
// a test can make a running plugin crash, hang or recover).
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "rota-test-plugin" {
		p := testPlugin{modeFile: os.Args[2]}
		Serve(Estimators{Throughput: p, Walltime: p, QueueWait: p})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type testPlugin struct{ modeFile string }

// Modes, and what "ok" answers: numbers a test can tell from the
// built-in's and that depend on the question.
const (
	modeOK         = "ok"
	modeUnknown    = "unknown"
	modeCrash      = "crash"
	modeHang       = "hang"
	modeNaN        = "nan"
	modeNegative   = "negative"
	modeInf        = "inf"
	modeAbsurd     = "absurd"
	modeWrongTypes = "wrongtypes"
	modeBadSource  = "badsource"
	modeError      = "error"
)

func (p testPlugin) mode() string {
	b, err := os.ReadFile(p.modeFile)
	if err != nil {
		return modeError
	}
	m := strings.TrimSpace(string(b))
	switch m {
	case modeCrash:
		os.Exit(3)
	case modeHang:
		time.Sleep(time.Hour)
	}
	return m
}

// bad is the number a nonsense mode answers, and ok false for others.
func bad(mode string, absurd float64) (float64, bool) {
	switch mode {
	case modeNaN:
		return math.NaN(), true
	case modeNegative:
		return -5, true
	case modeInf:
		return math.Inf(1), true
	case modeAbsurd:
		return absurd, true
	}
	return 0, false
}

func (p testPlugin) Throughput(_ context.Context, q estimate.ThroughputQuery) (estimate.ThroughputAnswer, error) {
	m := p.mode()
	a := estimate.ThroughputAnswer{Rates: make([]estimate.Rate, len(q.Types))}
	for i, ty := range q.Types {
		// ok: 100 + the hint + the measurement for the type, so a test
		// sees the query arrive whole.
		v := 100 + q.Hints[ty] + q.Measured[ty].StepsPerSec
		r := estimate.Rate{GPUType: ty, StepsPerSec: v, Source: "test", Basis: "test plugin"}
		if b, ok := bad(m, 1e12); ok {
			r.StepsPerSec = b
		}
		switch m {
		case modeUnknown:
			r = estimate.Rate{GPUType: ty, Source: estimate.SourceUnknown}
		case modeWrongTypes:
			r.GPUType = "not-asked-" + ty
		case modeBadSource:
			r.Source = "two words"
		case modeError:
			return a, errors.New("test plugin failing on purpose")
		}
		a.Rates[i] = r
	}
	return a, nil
}

func (p testPlugin) Walltime(_ context.Context, q estimate.WalltimeQuery) (estimate.WalltimeEstimate, error) {
	m := p.mode()
	// ok: ten minutes per past run, plus 1.
	e := estimate.WalltimeEstimate{UncappedMin: 1 + 10*float64(len(q.PastRunSec)), Source: "test", Basis: "test plugin"}
	if b, ok := bad(m, 1e9); ok {
		e.UncappedMin = b
	}
	switch m {
	case modeUnknown:
		e = estimate.WalltimeEstimate{Source: estimate.SourceUnknown}
	case modeWrongTypes, modeBadSource:
		e.Source = ""
	case modeError:
		return e, errors.New("test plugin failing on purpose")
	}
	return e, nil
}

func (p testPlugin) QueueWait(_ context.Context, q estimate.QueueWaitQuery) (estimate.QueueWaitAnswer, error) {
	m := p.mode()
	// ok: a minute per pending job.
	a := estimate.QueueWaitAnswer{Wait: time.Duration(len(q.State.Pending)) * time.Minute, Source: "test"}
	if b, ok := bad(m, 1e12); ok {
		a.Wait = time.Duration(b * float64(time.Second))
		if math.IsNaN(b) || math.IsInf(b, 0) {
			// A Duration cannot hold them; the wire's seconds can.
			a.Wait = -1
		}
	}
	switch m {
	case modeUnknown:
		a = estimate.QueueWaitAnswer{Source: estimate.SourceUnknown}
	case modeWrongTypes, modeBadSource:
		a.Source = ""
	case modeError:
		return a, errors.New("test plugin failing on purpose")
	}
	return a, nil
}
