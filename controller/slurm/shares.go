package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// ShareReader reads the site's fair-share tree. The CLI implements it
// with sshare; a Scheduler without it (tests, a cluster without
// accounting) leaves every entity's weight alike.
type ShareReader interface {
	// Shares maps each account to its share of the cluster: the product
	// of its and its ancestors' normalised shares (so nested accounts
	// weigh as Slurm's tree gives them), scaled so the largest is 1.
	Shares(ctx context.Context) (map[string]float64, error)
}

// sshareFields is what Shares asks sshare for: -P keeps the account
// field's leading spaces, one per level below root.
const sshareFields = "Account,User,NormShares"

// Shares implements ShareReader with `sshare -a -P -n`. Without
// accounting sshare fails (or lists nothing) and Shares says so.
func (c *CLI) Shares(ctx context.Context) (map[string]float64, error) {
	out, err := c.run(ctx, "sshare", "-a", "-P", "-n", "-o", sshareFields)
	if err != nil {
		return nil, err
	}
	return ParseShares(string(out))
}

// ParseShares reads `sshare -a -P -n -o Account,User,NormShares`: account
// rows (no user) nest by their leading spaces; user rows are skipped
// (Rota's entities are accounts). The root row's own NormShares is
// meaningless and counts as 1.
func ParseShares(out string) (map[string]float64, error) {
	type level struct {
		depth int
		share float64
	}
	var path []level // ancestors of the current row, with effective shares
	w := map[string]float64{}
	for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) < 3 {
			return nil, fmt.Errorf("sshare line %d: want 3 fields, got %q", i+1, line)
		}
		name := strings.TrimLeft(f[0], " ")
		depth := len(f[0]) - len(name)
		if name == "" || f[1] != "" {
			continue
		}
		for len(path) > 0 && path[len(path)-1].depth >= depth {
			path = path[:len(path)-1]
		}
		share := 1.0
		if depth > 0 {
			norm, err := strconv.ParseFloat(f[2], 64)
			if err != nil || norm < 0 {
				return nil, fmt.Errorf("sshare line %d: NormShares %q", i+1, f[2])
			}
			parent := 1.0
			if len(path) > 0 {
				parent = path[len(path)-1].share
			}
			share = parent * norm
			w[name] = share
		}
		path = append(path, level{depth, share})
	}
	if len(w) == 0 {
		return nil, fmt.Errorf("sshare lists no accounts")
	}
	top := 0.0
	for _, v := range w {
		top = max(top, v)
	}
	if top <= 0 {
		return nil, fmt.Errorf("every account has a zero share")
	}
	for k := range w {
		w[k] /= top
	}
	return w, nil
}
