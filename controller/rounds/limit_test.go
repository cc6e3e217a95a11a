package rounds

import (
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/slurmtime"
)

// The issue's job: `-t 2:00:00 --rota-steps=3000 --rota-throughput=v100:43.9`
// that really does 4.4 steps/s; Rota gave it 7 minutes. Three minutes in,
// with 5-minute rounds.
func issueJob() LimitInput {
	return LimitInput{Elapsed: 3 * time.Minute, LimitMin: 7, CeilingMin: 120, Step: 792, Total: 3000,
		Rate: 4.4, Spread: 0.2, Samples: 30, RateAge: 10 * time.Second, Round: 5 * time.Minute}
}

func TestFollowLimit(t *testing.T) {
	t.Parallel()
	with := func(f func(*LimitInput)) LimitInput {
		in := issueJob()
		f(&in)
		return in
	}
	// A job of 20,000 steps at 10 steps/s under an hour, 10 minutes in.
	hour := func(f func(*LimitInput)) LimitInput {
		in := LimitInput{Elapsed: 10 * time.Minute, LimitMin: 60, CeilingMin: 120, Step: 6000, Total: 20000,
			Rate: 10, Spread: 0.5, Samples: 30, RateAge: 10 * time.Second, Round: 5 * time.Minute}
		f(&in)
		return in
	}
	day := func(f func(*LimitInput)) LimitInput {
		return with(func(in *LimitInput) { in.CeilingMin = 1440; f(in) })
	}
	unmeasured := func(limit uint32, ran time.Duration) func(*LimitInput) {
		return func(in *LimitInput) { in.Rate, in.LimitMin, in.Elapsed = 0, limit, ran }
	}
	for _, c := range []struct {
		name     string
		in       LimitInput
		want     uint32
		measured bool
		short    bool
		whyHas   string
	}{
		// 2208 steps at 4.4 x (1-2x0.1) = 3.52/s: 627 s; ends 13.5 min
		// in, past 7 min less the 10.5-min lead; 13.5 + 2 x 10.5 = 34.5.
		{"the issue's job: raised to hold it plus two leads", issueJob(), 35, true, false, ""},
		// Dev cluster: 3-s rounds, a one-minute limit, ten seconds in:
		// 3373 steps at 19.2/s end 186 s in; + 2 x 36 s = 258 s.
		{"one-minute limit, 3-s rounds", LimitInput{Elapsed: 10 * time.Second, LimitMin: 1, CeilingMin: 10, Step: 240, Total: 3613,
			Rate: 24, Spread: 0.5, Samples: 10, RateAge: time.Second, Round: 3 * time.Second}, 5, true, false, ""},
		{"no ceiling: raised all the same", with(func(in *LimitInput) { in.CeilingMin = 0 }), 35, true, false, ""},
		{"capped at the user's limit", with(func(in *LimitInput) { in.CeilingMin = 20 }), 20, true, false, "raised to its user's limit 00:20:00"},
		{"capped at MaxTime", with(func(in *LimitInput) { in.CeilingMin, in.CeilingMaxTime = 20, true }), 20, true, false, "the partition's MaxTime 00:20:00"},
		{"the user's limit is short of it too", with(func(in *LimitInput) { in.CeilingMin = 12 }), 12, true, true, "ends 1m27s before it would"},
		// Ends 39.2 min in (8/s), + 10.5 = 49.7 <= 60.
		{"measured and the limit holds", hour(func(*LimitInput) {}), 0, false, false, ""},
		// A steady rate still gets the floor's 10%: 33.3 min at 10/s fits
		// 45 - 10.5, 39.2 at 8/s does not: 39.2 + 21 = 60.2.
		{"a steady rate gets the floor's margin", hour(func(in *LimitInput) { in.LimitMin, in.Spread = 45, 0 }), 61, true, false, ""},
		// ±24%: 5.2/s, 44.9 min, ends 54.9 min in: 54.9 + 21 = 75.9.
		{"a wider spread, a wider margin", hour(func(in *LimitInput) { in.Spread = 2.4 }), 76, true, false, ""},
		{"limit not shortened (at the ceiling)", with(func(in *LimitInput) { in.LimitMin = 120 }), 0, false, false, ""},
		{"limit above the ceiling (the user raised it? an admin?)", with(func(in *LimitInput) { in.LimitMin = 130 }), 0, false, false, ""},
		{"no limit at all", with(func(in *LimitInput) { in.LimitMin = 0 }), 0, false, false, ""},
		// Nothing measured: the lead is max(2 x 5 min + 30 s, limit/10).
		{"unmeasured, an hour's limit, 20 min left: kept", hour(unmeasured(60, 40*time.Minute)), 0, false, false, ""},
		{"unmeasured, 11 min left: kept", hour(unmeasured(60, 49*time.Minute)), 0, false, false, ""},
		{"unmeasured, a lead left: given back", hour(unmeasured(60, 49*time.Minute+30*time.Second)), 120, false, false, ""},
		{"unmeasured, a limit under the lead: given back at once", with(unmeasured(7, 0)), 120, false, false, ""},
		{"unmeasured, past its limit (Slurm is late): given back", with(unmeasured(7, 8*time.Minute)), 120, false, false, ""},
		{"unmeasured, no ceiling: UNLIMITED", with(func(in *LimitInput) { in.Rate, in.CeilingMin = 0, 0 }), slurmtime.Unlimited, false, false, "UNLIMITED"},
		{"unmeasured, 10-h limit of 24, 65 min left: kept", day(unmeasured(600, 535*time.Minute)), 0, false, false, ""},
		{"unmeasured, 10-h limit of 24, 55 min left (under a tenth): given back", day(unmeasured(600, 545*time.Minute)), 1440, false, false, ""},
		{"rate older than two rounds: unmeasured", with(func(in *LimitInput) { in.RateAge = 11 * time.Minute }), 120, false, false, ""},
		{"rate within two rounds: measured", with(func(in *LimitInput) { in.RateAge = 9 * time.Minute }), 35, true, false, ""},
		{"rate moving ±27%: unmeasured", with(func(in *LimitInput) { in.Spread = 1.2 }), 120, false, false, ""},
		{"steps done but still running: unmeasured", with(func(in *LimitInput) { in.Step = 3000 }), 120, false, false, ""},
		{"one report of the rate: unmeasured", with(func(in *LimitInput) { in.Samples = 1 }), 120, false, false, "single report"},
		{"two reports: measured", with(func(in *LimitInput) { in.Samples = 2 }), 35, true, false, ""},
		{"total steps unknown: unmeasured", with(func(in *LimitInput) { in.Total = 0 }), 120, false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := FollowLimit(c.in)
			if d.NewMin != c.want || d.Measured != c.measured || d.Short != c.short {
				t.Fatalf("new %d measured %v short %v, want %d %v %v (%s)", d.NewMin, d.Measured, d.Short, c.want, c.measured, c.short, d.Why)
			}
			if (d.NewMin == 0) != (d.Why == "") {
				t.Errorf("why %q for new limit %d", d.Why, d.NewMin)
			}
			if d.NewMin != 0 && !strings.Contains(d.Why, slurmtime.Format(d.NewMin)) {
				t.Errorf("why does not name the new limit %s: %s", slurmtime.Format(d.NewMin), d.Why)
			}
			if !strings.Contains(d.Why, c.whyHas) {
				t.Errorf("why does not say %q: %s", c.whyHas, d.Why)
			}
		})
	}
}

// A raised limit holds at the next round when the job keeps its pace: it
// is not raised again and again.
func TestFollowLimitSettles(t *testing.T) {
	t.Parallel()
	for _, in := range []LimitInput{
		issueJob(),
		{Elapsed: 10 * time.Second, LimitMin: 1, CeilingMin: 10, Step: 240, Total: 3613, Rate: 24, Spread: 0.5, Samples: 10, RateAge: time.Second, Round: 3 * time.Second},
		{Elapsed: time.Hour, LimitMin: 90, Step: 36000, Total: 400000, Rate: 10, Spread: 1, Samples: 30, RateAge: time.Minute, Round: 5 * time.Minute},
	} {
		t.Run(slurmtime.Format(in.LimitMin), func(t *testing.T) {
			t.Parallel()
			d := FollowLimit(in)
			if d.NewMin == 0 {
				t.Fatalf("not raised: %+v", in)
			}
			for r := 1; r <= 3; r++ {
				in.Elapsed += in.Round
				in.Step += uint64(in.Rate * in.Round.Seconds())
				in.LimitMin = d.NewMin
				if again := FollowLimit(in); again.NewMin != 0 {
					t.Fatalf("round %d raised again %d -> %d: %s", r, in.LimitMin, again.NewMin, again.Why)
				}
			}
		})
	}
}

func TestUnderMaxTime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                              string
		reason                            string
		limit, given, user, maxTime, want uint32
	}{
		{"Rota's limit above a lowered MaxTime", "PartitionTimeLimit", 240, 240, 0, 120, 120},
		{"the user's --time under it", "PartitionTimeLimit", 240, 240, 100, 120, 120},
		{"the user's own --time above it: plain Slurm waits too", "PartitionTimeLimit", 240, 240, 300, 120, 0},
		{"Rota did not set the limit", "PartitionTimeLimit", 240, 0, 0, 120, 0},
		{"waiting for another reason", "Resources", 240, 240, 0, 120, 0},
		{"already under (the read was older)", "PartitionTimeLimit", 100, 240, 0, 120, 0},
		{"an unlimited job under a finite MaxTime", "PartitionTimeLimit", 0, 240, 0, 120, 120},
		{"MaxTime unlimited", "PartitionTimeLimit", 240, 240, 0, slurmtime.Unlimited, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, ok := UnderMaxTime(c.reason, c.limit, c.given, c.user, c.maxTime)
			if got != c.want || ok != (c.want != 0) {
				t.Fatalf("UnderMaxTime = %d, %v; want %d", got, ok, c.want)
			}
		})
	}
}
