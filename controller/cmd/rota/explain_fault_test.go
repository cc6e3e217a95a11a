package main

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// explain shows a job's periodic checkpoints, the MTBF behind them, and
// each event of a node failure it went through.
func TestPrintFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    wire.FaultStatus
		want []string
	}{
		{"checkpointed through a failure", wire.FaultStatus{Periodic: true, Why: "a checkpoint every 16s: ...", Checkpoints: 2, LastStep: 255,
			LastCheckpoint: "2026-11-26T07:58:03Z", NodeMTBFSeconds: 120, MTBFSource: "node_mtbf in controller.conf",
			Events: []wire.FaultEvent{{Time: "2026-11-26T07:58:08Z", Kind: "node_failed", Text: "node ft-k80 failed"}}}, []string{
			`(?m)^checkpoints\ta checkpoint every 16s: \.\.\.$`,
			`(?m)^\t2 taken, the latest at step 255 \(2026-11-26T07:58:03Z\)$`,
			`(?m)^\tnode MTBF 2m0s: node_mtbf in controller.conf$`,
			`(?m)^2026-11-26T07:58:08Z\tnode failed\tnode ft-k80 failed$`,
		}},
		{"refused", wire.FaultStatus{Why: "no periodic checkpoints: the job declares no periodic checkpoint signal"}, []string{
			`(?m)^checkpoints\tno periodic checkpoints: the job declares no periodic checkpoint signal\n$`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printFault(&b, &tc.f)
			for _, re := range tc.want {
				if !regexp.MustCompile(re).MatchString(b.String()) {
					t.Errorf("no match for %s in\n%s", re, b.String())
				}
			}
		})
	}
}
