package placement

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rota-hpc/rota/wire"
)

// KindOf is the kind of job req is (wire.KindBatch, KindInteractive or
// KindServe) and why, first match wins:
//   - what the user said (--rota-kind);
//   - the admin's rules (rules.Serve, then rules.Interactive): a partition,
//     QOS, account or job-name pattern;
//   - a submission without a batch script (salloc, srun) is interactive:
//     a person is waiting at a prompt;
//   - anything else is a batch job.
func KindOf(req *wire.PlaceRequest, rules *wire.KindRules) (kind, why string) {
	if k := req.Hints.Kind; k != "" {
		return k, "--rota-kind=" + k
	}
	if rules != nil {
		if w := kindMatch(req, &rules.Serve); w != "" {
			return wire.KindServe, w + " (the admin's serve_* rule)"
		}
		if w := kindMatch(req, &rules.Interactive); w != "" {
			return wire.KindInteractive, w + " (the admin's interactive_* rule)"
		}
	}
	if req.NoScript {
		return wire.KindInteractive, "no batch script (salloc or srun)"
	}
	return wire.KindBatch, ""
}

// kindMatch says what of req m matches ("" nothing).
func kindMatch(req *wire.PlaceRequest, m *wire.KindMatch) string {
	if m.Empty() {
		return ""
	}
	if len(m.Partitions) > 0 {
		for _, p := range strings.Split(req.Partition, ",") {
			if p != "" && slices.Contains(m.Partitions, p) {
				return "partition " + p
			}
		}
	}
	if req.QOS != "" && slices.Contains(m.QOS, req.QOS) {
		return "QOS " + req.QOS
	}
	if req.Account != "" && slices.Contains(m.Accounts, req.Account) {
		return "account " + req.Account
	}
	for _, pat := range m.Names {
		if ok, _ := path.Match(pat, req.Name); ok && req.Name != "" {
			return "job name " + req.Name + " matches " + pat
		}
	}
	return ""
}

// CheckKindRules refuses a name pattern path.Match cannot read, so that
// a typo in controller.conf is an error at start, not a rule that never
// matches.
func CheckKindRules(r wire.KindRules) error {
	for _, k := range []struct {
		key string
		m   wire.KindMatch
	}{{"interactive_names", r.Interactive}, {"serve_names", r.Serve}} {
		for _, pat := range k.m.Names {
			if _, err := path.Match(pat, ""); err != nil {
				return fmt.Errorf("%s: %q is not a shell pattern: %w", k.key, pat, err)
			}
		}
	}
	return nil
}
