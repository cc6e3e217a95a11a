package live

import (
	"context"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
)

func TestEstimatorRates(t *testing.T) {
	e := NewEstimator(map[string]float64{"v100": 3.36, "k80": 1}, 1.5, 5)
	types := []string{"k80", "p100", "v100"}
	// Nothing known: the admin's relative speeds, marked as such.
	r, src := e.Rates(context.Background(), "u/a", types)
	if r[0] != 1 || r[1] != 1 || r[2] != 3.36 || src[0] != estimate.SourceRelative {
		t.Fatalf("unknown job: %v %v", r, src)
	}
	// Measured on the K80: real steps/s there, the table scales the rest.
	now := time.Now()
	e.Observe(context.Background(), "u/a", "k80", 3, now)
	e.Observe(context.Background(), "u/a", "k80", 3, now.Add(time.Second))
	r, src = e.Rates(context.Background(), "u/a", types)
	if r[0] != 3 || src[0] != "measured" || r[2] < 10 || r[2] > 10.2 || src[2] == estimate.SourceRelative {
		t.Fatalf("measured job: %v %v", r, src)
	}
	// Memory: a 30 GB peak does not fit a 16 GB card.
	e.ObserveMemory(context.Background(), "u/a", 30<<30)
	if e.MemoryFits(context.Background(), "u/a", 16<<30) || !e.MemoryFits(context.Background(), "u/a", 80<<30) || !e.MemoryFits(context.Background(), "u/b", 1<<30) {
		t.Fatal("memory fits wrong")
	}
}

// A job never measured takes the rates of its user's latest measured job
// of the same name (a resubmission with an edited script).
func TestEstimatorSameName(t *testing.T) {
	e := NewEstimator(map[string]float64{"v100": 3.36, "k80": 1}, 1.5, 5)
	types := []string{"k80", "v100"}
	now := time.Now()
	e.Observe(context.Background(), "alice/resnet/aaa", "v100", 12, now)
	e.Observe(context.Background(), "alice/resnet/aaa", "v100", 12, now.Add(time.Second))
	r, src := e.Rates(context.Background(), "alice/resnet/bbb", types)
	if r[1] != 12 || src[1] != SourceSameName || src[0] != SourceSameName || r[0] <= 0 {
		t.Fatalf("same user and name: %v %v", r, src)
	}
	if _, src := e.Rates(context.Background(), "bob/resnet/ccc", types); src[1] != estimate.SourceRelative {
		t.Fatalf("another user's job borrowed alice's rates: %v", src)
	}
}
