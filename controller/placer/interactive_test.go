package placer

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/wire"
)

// The reserve and what sessions hold reach the state plugins place by:
// the round loop's count from the next refresh on, the placer's own
// interactive placements until then.
func TestPlacerInteractiveReserve(t *testing.T) {
	t.Parallel()
	c := cfg()
	c.InteractiveReserve = map[string]int{"v100": 1}
	p := New(c)
	p.Update(snapshot(nil))
	session := wire.PlaceRequest{NoScript: true, GPU: wire.GPUAsk{PerNode: 1}}
	if r := p.Place(&session); r.GPUType != "v100" || r.Kind != wire.KindInteractive {
		t.Fatalf("first session on %q (%s), want the reserved v100", r.GPUType, r.Reason)
	}
	s := p.State(time.Now())
	if s.Rule.InteractiveReserve["v100"] != 1 || s.InteractiveHeld["v100"] != 1 {
		t.Fatalf("state reserve %v held %v", s.Rule.InteractiveReserve, s.InteractiveHeld)
	}
	// A round that began before the session was placed did not see it:
	// the session still holds the reserve.
	p.SetInteractiveHeld(map[string]int{})
	p.Update(snapshot(nil))
	if s := p.State(time.Now()); s.InteractiveHeld["v100"] != 1 {
		t.Fatalf("held after a snapshot older than the session: %v", s.InteractiveHeld)
	}
	// One that began after it saw none (the session ended): free again.
	later := snapshot(nil)
	later.At = time.Now().Add(time.Second)
	p.Update(later)
	if s := p.State(time.Now()); s.InteractiveHeld["v100"] != 0 {
		t.Fatalf("held after a later snapshot %v", s.InteractiveHeld)
	}
	// Batch jobs fill every GPU but the reserved v100.
	counts := map[string]int{}
	for i := 0; i < 11; i++ {
		counts[p.Place(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}).GPUType]++
	}
	if counts["v100"] != 3 || counts["p100"] != 4 || counts["k80"] != 4 {
		t.Fatalf("11 batch jobs spread as %v, want v100 3 (4 less the reserve), p100 4, k80 4", counts)
	}
	if r := p.Place(&session); r.GPUType != "v100" {
		t.Fatalf("a session after the batch jobs on %q, want the reserved v100", r.GPUType)
	}
}
