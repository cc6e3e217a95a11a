// Package layout holds the rules of Rota's package layout as tests
// (docs/architecture.md, "Who imports whom"): each binary links only what
// it runs, and the plugin, the agent and the controller share nothing but
// the packages made for sharing.
package layout

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/rota-hpc/rota/"

// deps is every package pkg links (tests aside), its own module's without
// the module prefix.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath", "./"+pkg)
	cmd.Dir = "../.." // the module's root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var all []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		all = append(all, strings.TrimPrefix(p.ImportPath, module))
	}
	return all
}

func TestWhoImportsWhom(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pkg string
		// forbidden prefixes of what pkg links
		not []string
	}{
		// The plugin, inside slurmctld: the protocol, the rule, helpers.
		{"plugin/jobsubmit", []string{"controller/", "agent/", "github.com/nats-io/nats-server"}},
		// The agent on every GPU node.
		{"agent/cmd/rota-agent", []string{"controller/", "plugin/", "placement", "github.com/nats-io/nats-server"}},
		// The user's CLI asks the controller; it runs none of it.
		{"controller/cmd/rota", []string{"plugin/", "agent/", "controller/app", "controller/rounds", "controller/chains", "controller/faulttol",
			"controller/bus", "controller/loadgen", "github.com/nats-io/nats-server", "github.com/hashicorp/go-plugin"}},
		// The controller does not link the plugin's code.
		{"controller/cmd/rota-controller", []string{"plugin/", "agent/", "controller/loadgen"}},
		// What both sides share depends on nothing of either.
		{"placement", []string{"controller/", "plugin/", "agent/"}},
		{"wire/...", []string{"controller/", "plugin/", "agent/", "placement"}},
		// The boundary to Slurm knows Slurm, not Rota's rule (issue #39):
		// facts such as a request's GPU count live in wire/gpureq.
		{"controller/slurm", []string{"placement", "controller/rounds", "controller/chains", "controller/estimate"}},
		// Estimates feed the round loop and the chains; they import neither
		// (app wires them together).
		{"controller/estimate/...", []string{"controller/chains", "controller/rounds", "controller/app"}},
		{"controller/...", []string{"plugin/", "agent/"}},
		{"agent/...", []string{"plugin/", "controller/"}},
	} {
		t.Run(strings.ReplaceAll(c.pkg, "/", "_"), func(t *testing.T) {
			t.Parallel()
			for _, d := range deps(t, c.pkg) {
				for _, no := range c.not {
					if strings.HasPrefix(d, no) {
						t.Errorf("%s links %s", c.pkg, d)
					}
				}
			}
		})
	}
}
