package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/wire"
)

// printRoute says where a job went, or came from, between clusters.
func printRoute(w io.Writer, r *wire.MCRoute) {
	if r.Incoming {
		fmt.Fprintf(w, "cluster\tcame from cluster %s (its job %d) as job %d, route %s (%s): %s\n", r.From, r.FromJob, r.ToJob, r.ID, r.State, r.Why)
		return
	}
	if r.State == "refused_slow" {
		fmt.Fprintf(w, "cluster\tnot moved (refused: slow link): %s\n", r.Why)
		return
	}
	to := fmt.Sprintf("cluster %s", r.To)
	if r.ToJob != 0 {
		to += fmt.Sprintf(" as job %d", r.ToJob)
	}
	what := "sent to"
	switch {
	case r.Move && (r.State == "resuming" || r.State == "resumed"):
		what = "move not taken by" // it resumes here (the why says as which job)
	case r.Move:
		what = "running job moved to"
	}
	fmt.Fprintf(w, "cluster\t%s %s, route %s (%s): %s\n", what, to, r.ID, r.State, r.Why)
	if x := transferWords(r); x != "" {
		fmt.Fprintf(w, "transfer\tcheckpoint %s\n", x)
	}
}

// transferWords are a move's checkpoint transfer: predicted vs actual once
// done, how far it is while under way ("" none).
func transferWords(r *wire.MCRoute) string {
	switch {
	case r.ActualS > 0:
		return fmt.Sprintf("%s sent in %s, predicted %s", mcBytes(float64(r.SizeBytes)), mcSecsFine(r.ActualS), mcSecsFine(r.PredictedS))
	case r.SizeBytes > 0:
		return fmt.Sprintf("%s of %s sent so far, predicted %s in all", mcBytes(float64(r.SentBytes)), mcBytes(float64(r.SizeBytes)), mcSecsFine(r.PredictedS))
	}
	return ""
}

// mcBytes is a size in decimal units; mcRate a bandwidth (the
// controller's explanations use the same words).
func mcBytes(b float64) string { return xcluster.SizeWords(b) }

func mcRate(bps float64) string { return xcluster.RateWords(bps) }

// mcSecsFine is a time to a hundredth of a second under a minute.
func mcSecsFine(s float64) string {
	if s < 60 {
		return fmt.Sprintf("%.2fs", s)
	}
	return mcSecs(s)
}

// measuredWords is the link to p as measured: bandwidth and latency, each
// with the age of its last sample (one age when they came together); "-"
// never measured.
func measuredWords(p wire.MCPeer) string {
	bw, lat := p.BandwidthAgeSeconds >= 0, p.LatencyAgeSeconds >= 0
	var out string
	switch {
	case bw && lat && math.Abs(p.BandwidthAgeSeconds-p.LatencyAgeSeconds) < 1:
		out = fmt.Sprintf("%s, %s (%s ago)", mcRate(p.MeasuredBandwidth), mcLatency(p.MeasuredLatencySeconds), mcSecs(p.BandwidthAgeSeconds))
	case bw && lat:
		out = fmt.Sprintf("%s (%s ago), %s (%s ago)", mcRate(p.MeasuredBandwidth), mcSecs(p.BandwidthAgeSeconds),
			mcLatency(p.MeasuredLatencySeconds), mcSecs(p.LatencyAgeSeconds))
	case bw:
		out = fmt.Sprintf("%s (%s ago)", mcRate(p.MeasuredBandwidth), mcSecs(p.BandwidthAgeSeconds))
	case lat:
		out = fmt.Sprintf("latency %s (%s ago)", mcLatency(p.MeasuredLatencySeconds), mcSecs(p.LatencyAgeSeconds))
	default:
		out = "-"
	}
	if p.ProbeError != "" {
		out += "; last probe failed"
	}
	return out
}

func mcLatency(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}

// printMC is the other clusters as this one sees them, and the routes.
func printMC(w io.Writer, s *wire.MCStatus) error {
	fmt.Fprintf(w, "\nclusters (this one: %s):\n", s.Cluster)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tVIEW AGE\tGPUS (USED/TOTAL)\tRUNNING\tPENDING\tDEMAND GPUS\tPRICE\tLINK CONFIGURED\tLINK MEASURED\tUSED\tROUTED/RECEIVED")
	for _, p := range s.Peers {
		v := p.View
		var types []string
		for _, t := range sortedTypes(v.Types) {
			types = append(types, fmt.Sprintf("%s %d/%d", t, v.Types[t].Used, v.Types[t].GPUs))
		}
		link := "none"
		if p.Bandwidth > 0 {
			link = fmt.Sprintf("%s, %s", mcRate(p.Bandwidth), time.Duration(p.LatencySeconds*float64(time.Second)))
		}
		used := p.Used
		if used == "" {
			used = "-"
		}
		fmt.Fprintf(tw, "%s\t%.0fs\t%s\t%d\t%d\t%g\t%g\t%s\t%s\t%s\t%d/%d\n", v.Cluster, p.AgeSeconds, strings.Join(types, ", "),
			v.Running, v.Pending, v.DemandGPUs, v.Price, link, measuredWords(p), used, v.Routed, v.Received)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Routes) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\njobs between clusters (newest first):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tFROM JOB\tTO JOB\tSTATE\tAT\tCHECKPOINT TRANSFER\tWHY")
	for i := range s.Routes {
		r := &s.Routes[i]
		x := transferWords(r)
		if x == "" {
			x = "-"
		}
		fmt.Fprintf(tw, "%s\t%s:%d\t%s:%d\t%s\t%s\t%s\t%s\n", r.ID, r.From, r.FromJob, r.To, r.ToJob, r.State, r.At, x, r.Why)
	}
	return tw.Flush()
}

// printMCEstimate is the job on every cluster.
func printMCEstimate(w io.Writer, rows []wire.MCEstimate) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nevery cluster (the shared-cluster estimate of docs/multicluster.md; transfer = the job's data over the link, at its measured speed while fresh, else mc_link's):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPARTITION\tTYPE\tFITS\tRUN\tWAIT (LOAD)\tCOST\tTRANSFER\tFINISH\tVIEW AGE")
	for _, r := range rows {
		name := r.Cluster
		if !r.Remote {
			name += " (here)"
		}
		if !r.Fits {
			fmt.Fprintf(tw, "%s\t%s\t%s\tno: %s\t-\t-\t-\t-\t-\t%.0fs\n", name, r.Partition, r.Type, r.Why, r.AgeSeconds)
			continue
		}
		xfer := "-"
		fin := r.RunSeconds + r.WaitSeconds
		switch {
		case r.TransferSeconds < 0:
			xfer, fin = "no link", math.Inf(1)
		case r.Remote:
			xfer = fmt.Sprintf("%s (%.3g GB)", mcSecs(r.TransferSeconds), r.DataGB)
			fin += r.TransferSeconds
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tyes\t%s\t%s\t%.3g\t%s\t%s\t%.0fs\n", name, r.Partition, r.Type, mcSecs(r.RunSeconds),
			mcSecs(r.WaitSeconds), r.Cost, xfer, mcSecs(fin), r.AgeSeconds)
	}
	return tw.Flush()
}

func mcSecs(s float64) string {
	if math.IsInf(s, 1) {
		return "never"
	}
	return (time.Duration(s) * time.Second).Round(time.Second).String()
}

func sortedTypes(m map[string]wire.MCType) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
