package slurm

import "testing"

func TestParseComments(t *testing.T) {
	out := "12|(null)\n13|rota-mc-route=a.7\n14|rota-mc-route=a.70\n"
	for _, tc := range []struct {
		comment string
		id      uint32
		ok      bool
	}{{"rota-mc-route=a.7", 13, true}, {"rota-mc-route=a.70", 14, true}, {"rota-mc-route=a.8", 0, false}} {
		id, ok, err := ParseComments(out, tc.comment)
		if err != nil || id != tc.id || ok != tc.ok {
			t.Errorf("%s: %d %v %v", tc.comment, id, ok, err)
		}
	}
	if _, _, err := ParseComments("x|c\n", "c"); err == nil {
		t.Error("a bad id parsed")
	}
}
