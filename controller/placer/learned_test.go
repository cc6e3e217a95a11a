package placer

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rota-hpc/rota/wire"
)

// What the rounds measured reaches the state the plugins get; a state
// handed out keeps what it had; an old pair gives way to newer ones when
// the state's share runs out, and every state stays inside the message
// limit.
func TestLearnedReachesTheStateBounded(t *testing.T) {
	t.Parallel()
	p := New(DefaultConfig())
	t0 := time.Unix(1_000_000, 0)
	lm := wire.LearnedKey(7, "lm")
	gen := p.Generation()
	p.Learn(map[string]map[string]float64{lm: {"k80": 1, "v100": 1.2}}, t0)
	first := p.State(t0)
	if got := first.LearnedRates(7, "lm"); !reflect.DeepEqual(got, map[string]float64{"k80": 1, "v100": 1.2}) {
		t.Fatalf("state learned %v", got)
	}
	if p.Generation() == gen {
		t.Error("learning did not change the state's generation: plugins would not hear of it")
	}
	// Thousands of user/name pairs, each round newer: the oldest go first.
	for round := 1; round <= 40; round++ {
		m := map[string]map[string]float64{}
		for i := range 100 {
			m[wire.LearnedKey(uint32(1000+round), fmt.Sprintf("a-rather-long-job-name-%03d", i))] = map[string]float64{"k80": 1, "p100": 2.5, "v100": 4.25}
		}
		p.Learn(m, t0.Add(time.Duration(round)*time.Minute))
	}
	if got := first.LearnedRates(7, "lm"); got == nil || len(first.Learned) != 1 {
		t.Fatalf("a state handed out changed: %v", first.Learned)
	}
	s := p.State(t0.Add(time.Hour))
	if s.LearnedRates(7, "lm") != nil {
		t.Error("the oldest pair was kept over 4,000 newer ones")
	}
	if s.LearnedRates(1040, "a-rather-long-job-name-099") == nil {
		t.Error("the newest pair was left out")
	}
	b, _ := json.Marshal(s.Learned)
	if len(b) > wire.MaxLearnedBytes || len(s.Learned) < 50 {
		t.Errorf("learned takes %d bytes for %d pairs, want at most %d bytes and a useful number", len(b), len(s.Learned), wire.MaxLearnedBytes)
	}
	if len(p.learned) > maxLearnedKept {
		t.Errorf("the placer keeps %d pairs, more than %d", len(p.learned), maxLearnedKept)
	}
	// A pair renewed (its job measured again) is the newest again.
	p.Learn(map[string]map[string]float64{lm: {"k80": 1}}, t0.Add(2*time.Hour))
	if got := p.State(t0).LearnedRates(7, "lm"); !reflect.DeepEqual(got, map[string]float64{"k80": 1}) {
		t.Errorf("renewed pair: %v", got)
	}
}
