package external

import (
	"math"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/estimate"
	pb "github.com/rota-hpc/rota/controller/estimate/external/estimatorpb"
)

func TestCheckThroughput(t *testing.T) {
	q := estimate.ThroughputQuery{Types: []string{"k80", "v100"}}
	rate := func(ty string, v float64, src string) *pb.Rate {
		return &pb.Rate{GpuType: ty, StepsPerSec: v, Source: src}
	}
	for _, tc := range []struct {
		name    string
		rates   []*pb.Rate
		wantErr string // "" = usable
	}{
		{"good, any order", []*pb.Rate{rate("v100", 9, "t"), rate("k80", 3, "t")}, ""},
		{"unknown needs no number", []*pb.Rate{rate("v100", 0, "unknown"), rate("k80", 3, "t")}, ""},
		{"missing type", []*pb.Rate{rate("k80", 3, "t")}, `no rate for GPU type "v100"`},
		{"type not asked", []*pb.Rate{rate("k80", 3, "t"), rate("v100", 3, "t"), rate("a100", 3, "t")}, "not asked"},
		{"twice", []*pb.Rate{rate("k80", 3, "t"), rate("k80", 3, "t")}, "two rates"},
		{"zero with a source", []*pb.Rate{rate("k80", 0, "t"), rate("v100", 3, "t")}, "not a number"},
		{"NaN", []*pb.Rate{rate("k80", math.NaN(), "t"), rate("v100", 3, "t")}, "not a number"},
		{"-Inf", []*pb.Rate{rate("k80", math.Inf(-1), "t"), rate("v100", 3, "t")}, "not a number"},
		{"absurd", []*pb.Rate{rate("k80", 2e9, "t"), rate("v100", 3, "t")}, "not a number"},
		{"no source", []*pb.Rate{rate("k80", 1, ""), rate("v100", 3, "t")}, "source"},
		{"source with a newline", []*pb.Rate{rate("k80", 1, "a\nb"), rate("v100", 3, "t")}, "printable"},
		{"long source", []*pb.Rate{rate("k80", 1, strings.Repeat("x", 65)), rate("v100", 3, "t")}, "source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := checkThroughput(q, &pb.ThroughputReply{Rates: tc.rates}, "est")
			if tc.wantErr == "" {
				if err != nil || a.Rates[0].GPUType != "k80" || a.Rates[1].GPUType != "v100" {
					t.Fatalf("%+v %v", a, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckWalltimeAndWait(t *testing.T) {
	q := estimate.WalltimeQuery{WalltimeInput: estimate.WalltimeInput{UserLimitMin: 100}}
	for _, tc := range []struct {
		min   float64
		src   string
		known bool
		ok    bool
		want  uint32
	}{
		{30.2, "t", true, true, 31},
		{500, "t", true, true, 100}, // capped by the user's limit
		{0, "unknown", false, true, 0},
		{0, "t", false, false, 0},
		{-1, "t", false, false, 0},
		{math.NaN(), "t", false, false, 0},
		{math.Inf(1), "t", false, false, 0},
		{MaxWalltimeMin + 1, "t", false, false, 0},
	} {
		est, known, err := checkWalltime(q, &pb.WalltimeReply{Minutes: tc.min, Source: tc.src, Basis: strings.Repeat("b", 600)}, "est")
		if known != tc.known || (err == nil) != tc.ok || est.Minutes != tc.want {
			t.Errorf("%v min %q: %+v known=%v err=%v", tc.min, tc.src, est, known, err)
		}
		if known && (!strings.HasPrefix(est.Basis, "est: bbb") || len(est.Basis) > maxBasisLen+100) {
			t.Errorf("basis %q", est.Basis)
		}
	}
	for _, tc := range []struct {
		sec float64
		ok  bool
	}{{0, true}, {3600, true}, {-1, false}, {math.NaN(), false}, {math.Inf(1), false}, {MaxWaitSec * 2, false}} {
		_, _, err := checkQueueWait(&pb.QueueWaitReply{WaitSec: tc.sec, Source: "t"}, "est")
		if (err == nil) != tc.ok {
			t.Errorf("wait %v s: %v", tc.sec, err)
		}
	}
}
