package submit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// scripted answers every placement with a fixed reply (or error) and keeps
// what it was asked.
type scripted struct {
	reply *wire.PlaceReply
	err   error
	got   []*wire.PlaceRequest
}

func (s *scripted) Place(_ context.Context, _ *Job, r *wire.PlaceRequest) (*wire.PlaceReply, error) {
	s.got = append(s.got, r)
	return s.reply, s.err
}

func str(p *string) string {
	if p == nil {
		return "<unchanged>"
	}
	return *p
}

func TestHandleRewriteRules(t *testing.T) {
	v100 := &wire.PlaceReply{V: 1, DecisionID: "d1", GPUType: "v100", Policy: "interim", Reason: "most free"}
	v100time := &wire.PlaceReply{V: 1, DecisionID: "d2", GPUType: "v100", TimeLimitMin: 360, Policy: "interim"}
	keep := &wire.PlaceReply{V: 1, DecisionID: "d3", Policy: "interim"}
	tests := []struct {
		name        string
		job         Job
		cfg         func(*Config)
		reply       *wire.PlaceReply
		askErr      error
		wantOutcome Outcome
		wantAsked   bool
		wantNode    string
		wantJob     string
		wantTask    string
		wantTime    uint32 // 0: unchanged
		wantComment string // substring; "" means no comment
	}{
		{
			name:        "gres untyped gets type",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "gres:gpu:v100:1", wantJob: "<unchanged>", wantTask: "<unchanged>",
			wantComment: "rota: gpu any->v100, time none->none (interim) [d=d1]",
		},
		{
			name:        "gpus per job",
			job:         Job{TresPerJob: "gres:gpu:2", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "<unchanged>", wantJob: "gres:gpu:v100:2", wantTask: "<unchanged>",
		},
		{
			name:        "gpus per task with per job",
			job:         Job{TresPerJob: "gres:gpu:2", TresPerTask: "gres:gpu:1", NumTasks: 2, TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "<unchanged>", wantJob: "gres:gpu:v100:2", wantTask: "gres:gpu:v100:1",
		},
		{
			name:        "mixed gres keeps the other one",
			job:         Job{TresPerNode: "gres:nvme:1,gres:gpu:2", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "gres:nvme:1,gres:gpu:v100:2", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "23.11 spelling",
			job:         Job{TresPerNode: "gres/gpu:1", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "gres/gpu:v100:1", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "time shortened to estimate",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: 2880},
			reply:       v100time,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "gres:gpu:v100:1", wantJob: "<unchanged>", wantTask: "<unchanged>",
			wantTime:    360,
			wantComment: "time 2-00:00:00->06:00:00",
		},
		{
			name:        "time never above the user's",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: 60},
			reply:       v100time,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "gres:gpu:v100:1", wantJob: "<unchanged>", wantTask: "<unchanged>",
			wantComment: "time 01:00:00->01:00:00",
		},
		{
			name:        "estimate applies when user gave no time",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: NoVal},
			reply:       v100time,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "gres:gpu:v100:1", wantJob: "<unchanged>", wantTask: "<unchanged>",
			wantTime:    360,
			wantComment: "time none->06:00:00",
		},
		{
			name:        "controller says keep",
			job:         Job{TresPerNode: "gres:gpu:p100:1", TimeLimit: 30},
			reply:       keep,
			wantOutcome: Kept, wantAsked: true,
			wantNode: "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
			wantComment: "rota: gpu p100->p100, time 00:30:00->00:30:00",
		},
		{
			name:        "no gpu untouched and not asked",
			job:         Job{TresPerNode: "gres:nvme:1", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: NoGPU,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "shards of a GPU: noted, untouched and not asked",
			job:         Job{TresPerNode: "gres:shard:1", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Shared,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
			wantComment: "asks for shards of a GPU",
		},
		{
			name:        "shards beside a GPU: noted, untouched and not asked",
			job:         Job{TresPerNode: "gres/shard:2,gres/gpu:1", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Shared,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
			wantComment: "asks for shards of a GPU",
		},
		{
			name:        "cpu only job",
			job:         Job{TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: NoGPU,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "malformed gpu request fails open",
			job:         Job{TresPerNode: "gres:gpu:v100:x", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: FailOpen,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "controller error fails open",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: NoVal},
			askErr:      errors.New("boom"),
			wantOutcome: FailOpen, wantAsked: true,
			wantNode: "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "bad type from controller fails open",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: NoVal},
			reply:       &wire.PlaceReply{V: 1, GPUType: "v100:9"},
			wantOutcome: FailOpen, wantAsked: true,
			wantNode: "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "spank off",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: NoVal, SpankEnv: []string{"_SLURM_SPANK_OPTION_rota_rota=off"}},
			reply:       v100,
			wantOutcome: OptedOut, wantComment: "opted out",
			wantNode: "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "opted out account",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: NoVal, Account: "physics"},
			cfg:         func(c *Config) { c.OptOutAccounts = []string{"physics"} },
			reply:       v100,
			wantOutcome: OptedOut, wantComment: "opted out",
			wantNode: "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "disabled",
			job:         Job{TresPerNode: "gres:gpu:1", TimeLimit: NoVal},
			cfg:         func(c *Config) { c.Enabled = false },
			reply:       v100,
			wantOutcome: Disabled, wantComment: "plugin is disabled",
			wantNode: "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "opted-out update: no note",
			job:         Job{Modify: true, UID: 1000, TresPerNode: "gres:gpu:1", TimeLimit: NoVal, SpankEnv: []string{"_SLURM_SPANK_OPTION_rota_rota=off"}},
			reply:       v100,
			wantOutcome: OptedOut,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "update by trusted uid passes",
			job:         Job{Modify: true, UID: 0, TresPerNode: "gres:gpu:1", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Trusted,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "user update untyped gets type, no comment, no time",
			job:         Job{Modify: true, UID: 1000, JobID: 7, TresPerNode: "gres:gpu:2", TimeLimit: NoVal},
			reply:       v100time,
			wantOutcome: Rewritten, wantAsked: true,
			wantNode: "gres:gpu:v100:2", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
		{
			name:        "user update typed is kept unasked",
			job:         Job{Modify: true, UID: 1000, TresPerNode: "gres:gpu:k80:2", TimeLimit: NoVal},
			reply:       v100,
			wantOutcome: Kept,
			wantNode:    "<unchanged>", wantJob: "<unchanged>", wantTask: "<unchanged>",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			a := &scripted{reply: tc.reply, err: tc.askErr}
			h := &Handler{Config: cfg, Placer: a}
			ch, out, err := h.Handle(context.Background(), &tc.job)
			if out != tc.wantOutcome {
				t.Fatalf("outcome %s (err %v), want %s", out, err, tc.wantOutcome)
			}
			if (out == FailOpen) != (err != nil) {
				t.Fatalf("outcome %s with err %v", out, err)
			}
			if asked := len(a.got) > 0; asked != tc.wantAsked {
				t.Fatalf("asked controller = %v, want %v", asked, tc.wantAsked)
			}
			if got := str(ch.TresPerNode); got != tc.wantNode {
				t.Errorf("tres_per_node = %s, want %s", got, tc.wantNode)
			}
			if got := str(ch.TresPerJob); got != tc.wantJob {
				t.Errorf("tres_per_job = %s, want %s", got, tc.wantJob)
			}
			if got := str(ch.TresPerTask); got != tc.wantTask {
				t.Errorf("tres_per_task = %s, want %s", got, tc.wantTask)
			}
			var gotTime uint32
			if ch.TimeLimit != nil {
				gotTime = *ch.TimeLimit
			}
			if gotTime != tc.wantTime {
				t.Errorf("time = %d, want %d", gotTime, tc.wantTime)
			}
			if tc.wantComment == "" && ch.AdminComment != "" && out != Rewritten && out != Kept {
				t.Errorf("unexpected comment %q", ch.AdminComment)
			}
			if tc.wantComment != "" && !strings.Contains(ch.AdminComment, tc.wantComment) {
				t.Errorf("comment %q lacks %q", ch.AdminComment, tc.wantComment)
			}
			if tc.job.Modify && ch.AdminComment != "" {
				t.Errorf("job_modify must not set admin_comment, got %q", ch.AdminComment)
			}
		})
	}
}

func TestHandleSendsHintsAndCounts(t *testing.T) {
	a := &scripted{reply: &wire.PlaceReply{V: 1}}
	h := &Handler{Config: DefaultConfig(), Placer: a}
	job := &Job{JobID: NoVal, // not assigned yet at submission
		TresPerTask: "gres:gpu:1", NumTasks: 4, MinNodes: NoVal, TimeLimit: 120, Account: "ml", Partition: "gpu", Name: "train",
		SpankEnv: []string{"OTHER=1", "_SLURM_SPANK_OPTION_rota_rota_steps=5000", "_SLURM_SPANK_OPTION_rota_rota_throughput=v100:10,k80:2.5",
			"_SLURM_SPANK_OPTION_rota_rota_checkpoint_signal=SIGUSR2", "_SLURM_SPANK_OPTION_rota_rota_types=p100, v100,p100"},
	}
	if _, out, err := h.Handle(context.Background(), job); err != nil || out != Kept {
		t.Fatalf("outcome %s err %v", out, err)
	}
	r := a.got[0]
	if r.V != wire.Version || r.GPU.PerTask != 1 || r.GPU.Tasks != 4 || r.GPU.Nodes != 0 || r.TimeLimitMin != 120 ||
		r.Account != "ml" || r.Partition != "gpu" || r.Name != "train" || r.Hints.Steps != 5000 ||
		r.Hints.Throughput["v100"] != 10 || r.Hints.Throughput["k80"] != 2.5 || r.Hints.CheckpointSignal != "USR2" ||
		r.JobID != 0 || strings.Join(r.Hints.Types, ",") != "p100,v100" {
		t.Fatalf("request %+v", r)
	}
}

// With ByFeature the type goes into the constraint and the gres stays (or
// becomes) untyped, so the controller can retype the job while it waits.
func TestHandleByFeature(t *testing.T) {
	for _, c := range []struct {
		name                   string
		tres, features         string
		wantTres, wantFeatures string
	}{
		{"untyped, no constraint", "gres:gpu:2", "", "<unchanged>", "v100"},
		{"untyped, user constraint", "gres:gpu:2", "ib", "<unchanged>", "ib&v100"},
		{"untyped, constraint with alternatives: gres typed", "gres:gpu:2", "ib|eth", "gres:gpu:v100:2", "<unchanged>"},
		{"typed, controller retypes: gres untyped", "gres:gpu:k80:1,gres:nvme:1", "", "gres:gpu:1,gres:nvme:1", "v100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &scripted{reply: &wire.PlaceReply{V: 1, GPUType: "v100", ByFeature: true, Policy: "las", DecisionID: "d1"}}
			h := &Handler{Config: DefaultConfig(), Placer: a}
			job := &Job{TresPerNode: c.tres, Features: c.features, TimeLimit: NoVal, ScriptHash: "abc"}
			ch, out, err := h.Handle(context.Background(), job)
			if err != nil || out != Rewritten {
				t.Fatalf("outcome %s err %v", out, err)
			}
			if str(ch.TresPerNode) != c.wantTres || str(ch.Features) != c.wantFeatures {
				t.Errorf("tres %s features %s; want %s %s", str(ch.TresPerNode), str(ch.Features), c.wantTres, c.wantFeatures)
			}
			if a.got[0].Features != c.features || a.got[0].ScriptHash != "abc" {
				t.Errorf("request %+v", a.got[0])
			}
		})
	}
}

// A service replica's hold becomes its begin time at submission, bounded
// so that it starts even when no controller releases it; never on an
// update.
func TestHandleServeHold(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		hold     uint32
		modify   bool
		want     uint32
		wantOut  Outcome
		wantType string
	}{
		{"held", 30, false, 30, Rewritten, "<unchanged>"},
		{"bounded", 86400, false, maxHoldS, Rewritten, "<unchanged>"},
		{"no hold asked", 0, false, 0, Kept, "<unchanged>"},
		{"update", 30, true, 0, Kept, "<unchanged>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := &scripted{reply: &wire.PlaceReply{V: 1, DecisionID: "d1", Policy: "las", Kind: wire.KindServe, HoldS: c.hold}}
			h := &Handler{Config: DefaultConfig(), Placer: a}
			job := &Job{UID: 1000, TresPerNode: "gres/gpu:1", TimeLimit: 60, Modify: c.modify, ScriptHash: "abc"}
			ch, out, err := h.Handle(context.Background(), job)
			if err != nil || out != c.wantOut || ch.HoldS != c.want || str(ch.TresPerNode) != c.wantType {
				t.Fatalf("outcome %s err %v hold %d tres %s; want %s %d", out, err, ch.HoldS, str(ch.TresPerNode), c.wantOut, c.want)
			}
		})
	}
}
