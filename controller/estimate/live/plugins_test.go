package live

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// The controller's estimator with the contrib speed-table plugin as its
// throughput estimator: the plugin's rates reach the round loop, the
// built-ins fill in the rest, /metrics counts the answers, and a
// command that cannot be run stops the controller with a clear error.
func TestEstimatorWithPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the contrib estimator")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rota-estimator-speedtable")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	if out, err := exec.Command(goTool, "build", "-o", bin, "github.com/rota-hpc/rota/controller/cmd/rota-estimator-speedtable").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	table := filepath.Join(dir, "speeds.csv")
	writeFile(t, table, "resnet*,v100,12\nresnet*,k80,3\n")

	// A deadline a busy CI machine meets; the default is 200 ms.
	p := Plugins{Throughput: bin + " --table " + table, Timeout: 10 * time.Second}
	e := NewEstimator(map[string]float64{"v100": 4, "p100": 3, "k80": 1}, 1.5, 5)
	stop, err := e.StartPlugins(p, zerolog.Nop())
	defer stop()
	if err != nil {
		t.Fatal(err)
	}

	types := []string{"k80", "p100", "v100"}
	e.Observe(context.Background(), "alice/resnet18", "k80", 6, time.Now())
	rates, src := e.Rates(context.Background(), "alice/resnet18", types)
	if src[0] != "measured" || rates[0] != 6 || src[1] != "table" || src[2] != "external:table-scaled" || rates[2] < 23.99 || rates[2] > 24.01 {
		t.Fatalf("rates %v from %v", rates, src)
	}
	// A job the table does not know and nobody measured: the built-in's
	// last resort, the admin's relative speeds.
	if _, src := e.Rates(context.Background(), "bob/bert", types); src[2] != "relative" {
		t.Fatalf("unknown job: %v", src)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(e)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var answers float64
	fallbacks := map[string]bool{}
	for _, f := range fams {
		switch f.GetName() {
		case "rota_controller_estimator_plugin_answers_total":
			answers = f.GetMetric()[0].GetCounter().GetValue()
		case "rota_controller_estimator_plugin_fallbacks_total":
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" {
						fallbacks[l.GetValue()] = true
					}
				}
			}
		}
	}
	if answers != 2 {
		t.Fatalf("answers_total %v, want 2", answers)
	}
	// Every reason from 0, none having happened.
	if len(fallbacks) != len(fallbackReasons) {
		t.Fatalf("fallbacks_total reasons %v, want %v", fallbacks, fallbackReasons)
	}

	p.Walltime = filepath.Join(dir, "missing")
	stop2, err := NewEstimator(nil, 1.5, 5).StartPlugins(p, zerolog.Nop())
	stop2()
	if err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Fatalf("missing walltime estimator: %v", err)
	}
}
