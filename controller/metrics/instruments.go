package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/rounds"
)

// Instruments are the controller's metrics that are observed as their
// value is measured (latencies, counts by label). A nil *Instruments
// observes nothing.
type Instruments struct {
	roundSecs     prometheus.Histogram
	solveSecs     prometheus.Histogram
	moveSecs      prometheus.Histogram
	placeSecs     *prometheus.HistogramVec
	placements    *prometheus.CounterVec
	chainGapSecs  prometheus.Histogram
	collectorList []prometheus.Collector
}

// Placement modes, as the plugin's `placement` setting names them.
const (
	Local  = "local"
	Remote = "remote"
)

// NewInstruments returns the instruments, every series at 0.
func NewInstruments() *Instruments {
	in := &Instruments{
		roundSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rota_controller_round_duration_seconds",
			Help: "Duration of rounds of the round loop: reading Slurm, solving, applying.",
			// Seconds-long rounds on a dev cluster, a minute on a big site.
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		solveSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rota_controller_solve_duration_seconds",
			Help:    "Policy solve time of each round.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		moveSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rota_controller_migration_duration_seconds",
			Help:    "Migrations' cost: from the checkpoint command to the job running again on its new GPU type.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600}}),
		placeSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rota_controller_placement_duration_seconds",
			Help: "Time to place a GPU job at submission: placement=local, the plugin's decision on slurmctld's thread (as it reports it); " +
				"placement=remote, the controller's answer to the plugin's request.",
			// From tens of microseconds (local) to the plugin's deadline (50 ms by default) and past it.
			Buckets: []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, .01, .025, .05, .1, .25}},
			[]string{"placement"}),
		placements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rota_controller_placements_total",
			Help: "GPU jobs placed at submission, by placement mode and the GPU type given (\"none\": left as asked)."},
			[]string{"placement", "gpu_type"}),
		chainGapSecs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rota_controller_chain_segment_gap_seconds",
			Help:    "Time between a chain segment's end and the start of the next one (docs/chains.md).",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600}}),
	}
	// Both modes exist from the start, so a dashboard's rate is 0, not absent.
	for _, m := range []string{Local, Remote} {
		in.placeSecs.WithLabelValues(m)
	}
	in.collectorList = []prometheus.Collector{in.roundSecs, in.solveSecs, in.moveSecs, in.placeSecs, in.placements, in.chainGapSecs}
	return in
}

func (in *Instruments) Describe(ch chan<- *prometheus.Desc) {
	// The same descriptors whether or not there are instruments yet.
	for _, c := range NewInstruments().collectorList {
		c.Describe(ch)
	}
}

func (in *Instruments) Collect(ch chan<- prometheus.Metric) {
	if in == nil {
		return
	}
	for _, c := range in.collectorList {
		c.Collect(ch)
	}
}

// Round, Solve and Move implement rounds.Timings.
func (in *Instruments) Round(d time.Duration) { in.roundSecs.Observe(d.Seconds()) }
func (in *Instruments) Solve(d time.Duration) { in.solveSecs.Observe(d.Seconds()) }
func (in *Instruments) Move(d time.Duration)  { in.moveSecs.Observe(d.Seconds()) }

var _ rounds.Timings = (*Instruments)(nil)

// ChainGap is the chain manager's SegmentGap.
func (in *Instruments) ChainGap(d time.Duration) { in.chainGapSecs.Observe(d.Seconds()) }

// Placed counts one placement in mode (Local, Remote) that gave gpuType
// ("" none); took <= 0 is not timed (a decision from the plugin's shelf,
// or a plugin that does not report its time).
func (in *Instruments) Placed(mode, gpuType string, took time.Duration) {
	if in == nil {
		return
	}
	typ := gpuType
	if typ == "" {
		typ = "none"
	}
	in.placements.WithLabelValues(mode, typ).Inc()
	if took > 0 {
		in.placeSecs.WithLabelValues(mode).Observe(took.Seconds())
	}
}
