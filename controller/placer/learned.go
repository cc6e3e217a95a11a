package placer

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/rota-hpc/rota/wire"
)

// maxLearnedKept bounds the user/name pairs the placer remembers; what it
// publishes is bounded again by bytes (wire.MaxLearnedBytes).
const maxLearnedKept = 4096

// learnedRates is what the round loop measured of one user's job name.
type learnedRates struct {
	rates map[string]float64
	at    time.Time
}

// Learn takes the rates the round loop measured (rounds.Plan.Learned,
// keyed by wire.LearnedKey) at time at: the submit-time placement places
// that user's next job of that name by them when it gives no rate hint.
// Pairs no job renews are kept, the most recently renewed first, up to
// maxLearnedKept and what fits in wire.MaxLearnedBytes of the state.
func (p *Placer) Learn(rates map[string]map[string]float64, at time.Time) {
	if len(rates) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.learned == nil {
		p.learned = map[string]learnedRates{}
	}
	for k, r := range rates {
		p.learned[k] = learnedRates{rates: r, at: at}
	}
	keys := make([]string, 0, len(p.learned))
	for k := range p.learned {
		keys = append(keys, k)
	}
	// Newest first; the key breaks ties so that the cut is the same
	// whatever the map's order.
	slices.SortFunc(keys, func(a, b string) int {
		if c := p.learned[b].at.Compare(p.learned[a].at); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, k := range keys[min(len(keys), maxLearnedKept):] {
		delete(p.learned, k)
	}
	// A new map each time: states handed out keep theirs.
	out, size := map[string]map[string]float64{}, 0
	for _, k := range keys[:min(len(keys), maxLearnedKept)] {
		n := learnedSize(k, p.learned[k].rates)
		if n > wire.MaxLearnedBytes {
			continue // cannot be sent at all
		}
		if size+n > wire.MaxLearnedBytes {
			break
		}
		out[k], size = p.learned[k].rates, size+n
	}
	p.state.Learned = out
	p.state.Gen++
}

// learnedSize is what one entry of PlaceState.Learned takes in JSON,
// escapes of odd job names included.
func learnedSize(key string, rates map[string]float64) int {
	b, err := json.Marshal(map[string]map[string]float64{key: rates})
	if err != nil { // a rate JSON cannot hold: never sent
		return wire.MaxLearnedBytes + 1
	}
	return len(b) - 1 // the braces around it, less the comma between entries
}
