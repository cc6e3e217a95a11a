package live

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/external"
)

// Estimators whose answers are counted by source.
const (
	estThroughput = "throughput"
	estWalltime   = "walltime"
)

// countedSources are the sources every dashboard may ask for, counted
// from 0; an external estimator's (external:<its own>) count as
// "external", so its words cannot grow the label set.
var countedSources = map[string][]string{
	estThroughput: {estimate.SourceMeasured, estimate.SourceHint, estimate.SourceCompleted, estimate.SourceTable,
		SourceSameName, estimate.SourceRelative, estimate.SourceUnknown, sourceExternal},
	estWalltime: {estimate.WalltimeSteps, estimate.WalltimeHistory, estimate.WalltimeUnknown, sourceExternal},
}

const sourceExternal = "external"

func newEstimateCounter() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rota_controller_estimates_total",
		Help: "Estimates the controller's estimators gave, by estimator (throughput: one per job and GPU type; walltime: one per job) " +
			"and source: how far they fell back from measurement (docs/estimators.md)."},
		[]string{"estimator", "source"})
	for est, srcs := range countedSources {
		for _, s := range srcs {
			v.WithLabelValues(est, s)
		}
	}
	return v
}

// sourceLabel is src as a label value of rota_controller_estimates_total.
func sourceLabel(src string) string {
	if strings.HasPrefix(src, sourceExternal+":") {
		return sourceExternal
	}
	return src
}

func metricDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("rota_controller_"+name, help, nil, nil)
}

var (
	mWallCount    = metricDesc("walltime_estimates_judged", "Finished jobs whose Rota walltime was compared with their run time (latest window).")
	mWallRatio    = metricDesc("walltime_estimate_ratio_median", "Median of Rota's time limit over the actual run time on finished jobs (above 1: room to spare).")
	mWallUnder    = metricDesc("walltime_underestimated_ratio", "Fraction of judged jobs whose run time exceeded Rota's limit.")
	mHintRatio    = metricDesc("throughput_hint_error_ratio_median", "Median of measured over hinted steps/s for jobs with --rota-throughput hints (1: hints were right).")
	estimateDescs = []*prometheus.Desc{mWallCount, mWallRatio, mWallUnder, mHintRatio}
)

// Describe describes what Collect gives: with Collect, the Estimator is
// the estimators' prometheus.Collector.
func (e *Estimator) Describe(ch chan<- *prometheus.Desc) {
	for _, ds := range [][]*prometheus.Desc{estimateDescs, pluginDescs} {
		for _, d := range ds {
			ch <- d
		}
	}
	newEstimateCounter().Describe(ch)
}

// Collect gives the estimator's metrics: how its walltimes and the users'
// hints fared, its estimates by source, and its plugins' calls.
func (e *Estimator) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	w := e.wall.Errors()
	gauge(mWallCount, float64(w.Count))
	if w.Count > 0 {
		gauge(mWallRatio, w.MedianRatio)
		gauge(mWallUnder, w.Under)
	}
	if r, ok := e.HintRatio(); ok {
		gauge(mHintRatio, r)
	}
	e.counts.Collect(ch)
	emit := func(kind string, s external.Stats) {
		ch <- prometheus.MustNewConstMetric(mPluginAnswers, prometheus.CounterValue, float64(s.Answered), kind)
		ch <- prometheus.MustNewConstMetric(mPluginStarts, prometheus.CounterValue, float64(s.Starts), kind)
		ch <- prometheus.MustNewConstMetric(mPluginStartFails, prometheus.CounterValue, float64(s.StartFailures), kind)
		// Every reason from 0, so a dashboard's rate is 0, not absent.
		for _, reason := range fallbackReasons {
			ch <- prometheus.MustNewConstMetric(mPluginFallbacks, prometheus.CounterValue, float64(s.Fallbacks[reason]), kind, reason)
		}
	}
	if e.ext.tp != nil {
		emit(external.KindThroughput, e.ext.tp.Stats())
	}
	if e.ext.wall != nil {
		emit(external.KindWalltime, e.ext.wall.Stats())
	}
}
