package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

func TestPrintRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    wire.MCRoute
		want string
	}{
		{wire.MCRoute{ID: "a.1", From: "a", FromJob: 1, To: "b", ToJob: 7, State: "routed", Why: "cannot run here"}, "sent to cluster b as job 7, route a.1 (routed): cannot run here"},
		{wire.MCRoute{ID: "a.2", From: "a", FromJob: 2, To: "b", ToJob: 8, State: "routed", Move: true, Why: "gains 6s"}, "running job moved to cluster b as job 8, route a.2 (routed)"},
		{wire.MCRoute{ID: "a.3", From: "a", FromJob: 3, To: "b", State: "resumed", Move: true, Why: "gains 6s; resumed here as job 9 from its checkpoint"}, "move not taken by cluster b, route a.3 (resumed): gains 6s; resumed here as job 9"},
		{wire.MCRoute{ID: "a.4", From: "a", FromJob: 4, To: "b", ToJob: 3, State: "submitted", Incoming: true, Why: "w"}, "came from cluster a (its job 4) as job 3, route a.4 (submitted): w"},
		{wire.MCRoute{State: "refused_slow", Move: true, Why: "copying 50 GB takes 8m20s"}, "not moved (refused: slow link): copying 50 GB"},
	} {
		var b bytes.Buffer
		printRoute(&b, &tc.r)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v:\n%s\nwant %q", tc.r, b.String(), tc.want)
		}
	}
}

// rota status's clusters: the link as configured, as measured (with its
// age) and which one predictions use; a move's transfer, predicted vs
// actual, or how far it is; rota explain says the same.
func TestPrintMCLinkAndTransfer(t *testing.T) {
	t.Parallel()
	s := &wire.MCStatus{Cluster: "a", Peers: []wire.MCPeer{
		{View: wire.MCView{Cluster: "b"}, Bandwidth: 100e6, LatencySeconds: 0.02, MeasuredBandwidth: 312e6, MeasuredLatencySeconds: 0.0004,
			BandwidthAgeSeconds: 45, LatencyAgeSeconds: 45, Used: "measured"},
		{View: wire.MCView{Cluster: "c"}, Bandwidth: 1e9, BandwidthAgeSeconds: -1, LatencyAgeSeconds: -1, Used: "configured", ProbeError: "nats: timeout"},
		{View: wire.MCView{Cluster: "d"}, MeasuredBandwidth: 80e6, MeasuredLatencySeconds: 0.03, BandwidthAgeSeconds: 5, LatencyAgeSeconds: 250, Used: "measured"},
	}, Routes: []wire.MCRoute{
		{ID: "a.74", From: "a", FromJob: 74, To: "b", ToJob: 30, State: "routed", Move: true, PredictedS: 0.22, ActualS: 0.23, SizeBytes: 20000020, SentBytes: 20000020},
		{ID: "a.75", From: "a", FromJob: 75, To: "b", State: "transferring", Move: true, PredictedS: 500, SizeBytes: 50e9, SentBytes: 12.5e9},
	}}
	var b bytes.Buffer
	if err := printMC(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"LINK CONFIGURED", "LINK MEASURED", "USED",
		"100 MB/s, 20ms", "312 MB/s, 400µs (45s ago)", "measured",
		"1 GB/s, 0s", "-; last probe failed", "configured",
		"none", "80 MB/s (5s ago), 30ms (4m10s ago)",
		"20 MB sent in 0.23s, predicted 0.22s",
		"12.5 GB of 50 GB sent so far, predicted 8m20s in all",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printRoute(&b, &s.Routes[0])
	if !strings.Contains(b.String(), "transfer\tcheckpoint 20 MB sent in 0.23s, predicted 0.22s") {
		t.Errorf("explain:\n%s", b.String())
	}
}
