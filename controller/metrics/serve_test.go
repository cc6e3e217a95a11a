package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/serve"
)

// The service manager's counters, each once; nothing while no manager
// runs (a standby controller).
func TestServicesCollector(t *testing.T) {
	t.Parallel()
	m, err := serve.New(serve.DefaultConfig(), zerolog.Nop(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *serve.Manager
		want int
	}{{"leading", m, 6}, {"standby", nil, 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(Services{Manager: func() *serve.Manager { return c.m }})
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if len(fams) != c.want {
				t.Fatalf("%d families, want %d", len(fams), c.want)
			}
			for _, f := range fams {
				if f.GetType().String() != "COUNTER" || len(f.GetMetric()) != 1 {
					t.Errorf("%s: %s with %d series", f.GetName(), f.GetType(), len(f.GetMetric()))
				}
			}
		})
	}
}
