package slurm

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// BillingWeights reads a partition's TRESBillingWeights
// ("CPU=1.0,Mem=0.25G,GRES/gpu=2.0,GRES/shard:v100=1"): TRES name, lower
// case, -> weight per unit (a memory weight's K/M/G/T suffix kept out:
// only GRES weights are read here).
func BillingWeights(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("TRESBillingWeights %q: %q is not NAME=WEIGHT", s, item)
		}
		v = strings.TrimRight(v, "KMGTkmgt")
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || w < 0 || math.IsInf(w, 0) || math.IsNaN(w) {
			return nil, fmt.Errorf("TRESBillingWeights %q: weight of %s %q", s, k, v)
		}
		out[strings.ToLower(k)] = w
	}
	return out, nil
}

// ShardBilling says, per partition whose billing weighs GPUs, where fair
// share does not count a job on shards as the fraction of a GPU it is:
// Slurm accounts gres/shard as a TRES of its own (sacct's AllocTRES
// gres/shard=1, never gres/gpu), so a shard bills only what
// TRESBillingWeights gives GRES/shard, and a site that weighs GPUs wants a
// shard of a GPU cut into N to weigh GRES/gpu/N. A type's weight
// (GRES/gpu:v100) is taken before the plain one. Empty when every
// partition is right, or weighs no GPUs.
func ShardBilling(parts []Partition, nodes []Node) []string {
	byName := make(map[string]*Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	var out []string
	for _, p := range parts {
		w, err := BillingWeights(p.BillingWeights)
		if err != nil {
			out = append(out, fmt.Sprintf("partition %s: %v", p.Name, err))
			continue
		}
		names, err := ExpandHostlist(p.Nodes)
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		for _, name := range names {
			n := byName[name]
			if n == nil {
				continue
			}
			per, t, ok := n.ShardsPerGPU()
			if !ok || per <= 0 {
				continue
			}
			wg, okG := weight(w, "gpu", t)
			if !okG || wg <= 0 {
				continue // GPUs are not billed here: a shard is no less than a GPU
			}
			ws, _ := weight(w, "shard", t)
			want := wg / float64(per)
			key := fmt.Sprintf("%s/%d", t, per)
			if math.Abs(ws-want) <= 0.01*want || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, fmt.Sprintf("partition %s bills a %s GPU %g and one of its %d shards %g (TRESBillingWeights %q): "+
				"fair share counts a job on a shard as %.2f of a GPU, not the %.2f it is; GRES/shard=%g would",
				p.Name, t, wg, per, ws, p.BillingWeights, ws/wg, 1/float64(per), want))
		}
	}
	sort.Strings(out)
	return out
}

// weight is the billing weight of gres/<name>:<typ> if set, else of
// gres/<name>.
func weight(w map[string]float64, name, typ string) (float64, bool) {
	if v, ok := w["gres/"+name+":"+strings.ToLower(typ)]; ok {
		return v, true
	}
	v, ok := w["gres/"+name]
	return v, ok
}
