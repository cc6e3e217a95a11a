// Package layout holds the rules of Rota's package layout as tests
// (docs/architecture.md, "Who imports whom"): each binary links only what
// it runs, and the plugin, the agent and the controller share nothing but
// the packages made for sharing.
package layout

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rota-hpc/rota/"

// deps is every package pkg links (tests aside), its own module's without
// the module prefix.
func deps(t *testing.T, pkg string, except ...string) []string {
	t.Helper()
	pkgs := []string{"./" + pkg}
	if len(except) > 0 {
		pkgs = nil
		for _, p := range list(t, pkg) {
			if !slices.Contains(except, p) {
				pkgs = append(pkgs, "./"+p)
			}
		}
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath"}, pkgs...)...)
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

// list is the packages pattern matches, without the module prefix.
func list(t *testing.T, pattern string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "./"+pattern)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	var pkgs []string
	for _, l := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(l, module))
	}
	return pkgs
}

func TestWhoImportsWhom(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pkg string
		// forbidden prefixes of what pkg links
		not []string
		// packages of pkg's pattern the rule leaves out
		except []string
	}{
		// The plugin, inside slurmctld: the protocol, the rule, helpers.
		{"plugin/jobsubmit", []string{"controller/", "agent/", "github.com/nats-io/nats-server"}, nil},
		// The agent on every GPU node.
		{"agent/cmd/rota-agent", []string{"controller/", "plugin/", "placement", "github.com/nats-io/nats-server"}, nil},
		// The user's CLI asks the controller; it runs none of it.
		{"controller/cmd/rota", []string{"plugin/", "agent/", "controller/app", "controller/rounds", "controller/chains", "controller/faulttol",
			"controller/bus", "controller/loadgen", "github.com/nats-io/nats-server", "github.com/hashicorp/go-plugin"}, nil},
		// The controller does not link the plugin's code.
		{"controller/cmd/rota-controller", []string{"plugin/", "agent/", "controller/loadgen"}, nil},
		// What both sides share depends on nothing of either.
		{"placement", []string{"controller/", "plugin/", "agent/"}, nil},
		{"wire/...", []string{"controller/", "plugin/", "agent/", "placement"}, nil},
		// The boundary to Slurm knows Slurm, not Rota's rule (issue #39):
		// facts such as a request's GPU count live in wire/gpureq.
		{"controller/slurm", []string{"placement", "controller/rounds", "controller/chains", "controller/estimate"}, nil},
		// Estimates feed the round loop and the chains; they import neither
		// (app wires them together).
		{"controller/estimate/...", []string{"controller/chains", "controller/rounds", "controller/app"}, nil},
		// The parts share nothing but what is made for sharing. The one
		// exception is a test workload: rota-synthtrain is a job that
		// speaks the agent's progress and checkpoint protocol and draws
		// its model and speed as Gavel's simulator does.
		{"controller/...", []string{"plugin/", "agent/"}, nil},
		{"agent/...", []string{"plugin/", "controller/"}, []string{"agent/cmd/rota-synthtrain"}},
	} {
		t.Run(strings.ReplaceAll(c.pkg, "/", "_"), func(t *testing.T) {
			t.Parallel()
			for _, d := range deps(t, c.pkg, c.except...) {
				for _, no := range c.not {
					if strings.HasPrefix(d, no) {
						t.Errorf("%s links %s", c.pkg, d)
					}
				}
			}
		})
	}
}

// Every binary is a cmd/ folder of its part (docs/architecture.md), so
// the folder names say what runs; plugin/jobsubmit is the plugin's
// c-shared object, loaded by slurmctld, not run.
func TestBinariesLiveInCmd(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-f", "{{if eq .Name \"main\"}}{{.ImportPath}}{{end}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		p = strings.TrimPrefix(p, module)
		part, rest, _ := strings.Cut(p, "/")
		if p == "plugin/jobsubmit" {
			continue
		}
		if !slices.Contains([]string{"plugin", "agent", "controller"}, part) || !strings.HasPrefix(rest, "cmd/") || strings.Count(rest, "/") != 1 {
			t.Errorf("binary %s: want plugin/cmd/NAME, agent/cmd/NAME or controller/cmd/NAME", p)
		}
	}
}
