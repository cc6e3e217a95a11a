package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/multicluster"
)

// Several clusters under one Rota (docs/multicluster.md): the links to
// the other clusters and the checkpoints sent over them, from the
// multi-cluster manager.
var (
	mMCLinkBW   = desc("mc_link_bandwidth_bytes_per_second", "The link to another cluster as measured (probes and checkpoint transfers, a moving average); absent until measured.", "peer")
	mMCLinkLat  = desc("mc_link_latency_seconds", "The link's latency as measured (half a probe's round trip, a moving average); absent until measured.", "peer")
	mMCLinkAge  = desc("mc_link_measured_age_seconds", "Age of the link's last bandwidth sample; predictions take the configured figure (mc_link) once it is older than mc_link_max_age.", "peer")
	mMCLinkConf = desc("mc_link_configured_bandwidth_bytes_per_second", "The link's bandwidth as configured (mc_link); 0: none.", "peer")
	mMCXfers    = desc("mc_transfers_total", "Checkpoints of moved jobs sent to other clusters.")
	mMCXferB    = desc("mc_transfer_bytes_total", "Bytes of the checkpoints sent to other clusters.")
	mMCXferPred = desc("mc_transfer_last_predicted_seconds", "The last checkpoint sent: its transfer time as predicted when it began.")
	mMCXferAct  = desc("mc_transfer_last_actual_seconds", "The last checkpoint sent: the time spent sending it (summed over the ticks it spanned).")
)

// MultiCluster reads the multi-cluster manager's links and transfers.
type MultiCluster struct {
	// Manager is the multi-cluster manager while leading, nil otherwise.
	Manager func() *multicluster.Manager
}

func (MultiCluster) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, mMCLinkBW, mMCLinkLat, mMCLinkAge, mMCLinkConf, mMCXfers, mMCXferB, mMCXferPred, mMCXferAct)
}

func (c MultiCluster) Collect(ch chan<- prometheus.Metric) {
	m := c.Manager()
	if m == nil {
		return
	}
	for _, p := range m.Links() {
		name := p.View.Cluster
		gauge(ch, mMCLinkConf, p.Bandwidth, name)
		if p.BandwidthAgeSeconds >= 0 {
			gauge(ch, mMCLinkBW, p.MeasuredBandwidth, name)
			gauge(ch, mMCLinkAge, p.BandwidthAgeSeconds, name)
		}
		if p.LatencyAgeSeconds >= 0 {
			gauge(ch, mMCLinkLat, p.MeasuredLatencySeconds, name)
		}
	}
	t := m.Transfers()
	counter(ch, mMCXfers, float64(t.Count))
	counter(ch, mMCXferB, t.Bytes)
	if t.Count > 0 {
		gauge(ch, mMCXferPred, t.LastPredictedS)
		gauge(ch, mMCXferAct, t.LastActualS)
	}
}
