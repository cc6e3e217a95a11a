package slurm

import (
	"reflect"
	"testing"

	"github.com/rota-hpc/rota/controller/limits"
)

// Output of the three sacctmgr queries on the dev cluster (22.05.8), with
// a QOS limit on v100 and an account limit on p100.
func TestParseLimits(t *testing.T) {
	t.Parallel()
	qos := "normal||||\nvlim|gres/gpu:v100=1|||\n"
	assoc := "root|||||\nroot|root||||\nlab-a||root|||\nlab-a|rota-a||vlim||\nlab-b||root||gres/gpu:p100=2,cpu=8|\nlab-b|rota-b||||\n"
	users := "root|root\nrota-a|lab-a\nrota-b|lab-b\n"
	s, err := ParseLimits([]byte(qos), []byte(assoc), []byte(users))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.QOS["vlim"].PerUser; !reflect.DeepEqual(got, limits.PerType{"v100": 1}) {
		t.Errorf("vlim MaxTRESPerUser = %v", got)
	}
	if len(s.Assocs) != 6 || s.Assocs[3].DefaultQOS != "vlim" || !reflect.DeepEqual(s.Assocs[4].Group, limits.PerType{"p100": 2}) {
		t.Errorf("associations = %+v", s.Assocs)
	}
	if s.DefaultAccount["rota-b"] != "lab-b" || !s.Typed() {
		t.Errorf("default accounts %v, typed %v", s.DefaultAccount, s.Typed())
	}
	for _, bad := range [][3]string{{"normal|||\n", "", ""}, {"x|gres/gpu:v100=a|||\n", "", ""}, {"", "a|b\n", ""}} {
		if _, err := ParseLimits([]byte(bad[0]), []byte(bad[1]), []byte(bad[2])); err == nil {
			t.Errorf("ParseLimits(%q, %q, %q): no error", bad[0], bad[1], bad[2])
		}
	}
}

func TestParseRelease(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][2]int{"slurm 22.05.8\n": {22, 5}, "slurm-wlm 24.11.5": {24, 11}, "slurm 26.05.5-1": {26, 5}} {
		if ma, mi, err := ParseRelease(in); err != nil || [2]int{ma, mi} != want {
			t.Errorf("ParseRelease(%q) = %d.%d %v, want %v", in, ma, mi, err, want)
		}
	}
	if _, _, err := ParseRelease("garbage"); err == nil {
		t.Error("ParseRelease(garbage): no error")
	}
}
