// Package metrics is the controller's Prometheus exposition, built as
// node_exporter's is: one collector per part, each in a file of its own,
// reading that part's own counters at scrape time (so nothing on the
// request path or in the round loop pays for them), and Instruments for
// what is observed as it happens (latencies, counts by label). The
// estimators' metrics are their package's (controller/estimate/live).
// The controller registers them all in one registry.
package metrics

import "github.com/prometheus/client_golang/prometheus"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("rota_controller_"+name, help, labels, nil)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func describe(ch chan<- *prometheus.Desc, ds ...*prometheus.Desc) {
	for _, d := range ds {
		ch <- d
	}
}
