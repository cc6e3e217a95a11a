package limits

import (
	"reflect"
	"testing"
)

func TestParseTRES(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want PerType
		bad  bool
	}{
		{"", nil, false},
		{"gres/gpu:v100=1", PerType{"v100": 1}, false},
		{"cpu=4,gres/gpu:v100=2,gres/gpu=8,gres/gpu:k80=0", PerType{"v100": 2, "k80": 0}, false},
		{"gres/gpu=8", nil, false},
		{"gres/gpu:v100", nil, true},
		{"gres/gpu:v100=x", nil, true},
		{"gres/gpu:=1", nil, true},
		{"gres/gpu:v100=-1", nil, true},
	} {
		got, err := ParseTRES(tc.in)
		if (err != nil) != tc.bad || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTRES(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// A site: lab-a under root, lab-b under lab-a; QOS lim caps each user at
// one v100; lab-b's jobs together at two p100s; lab-a's MaxTRES caps one
// job at 4 k80s.
func site() *Set {
	return &Set{
		QOS: map[string]QOS{"normal": {Name: "normal"}, "lim": {Name: "lim", PerUser: PerType{"v100": 1}}},
		Assocs: []Assoc{
			{Account: "root"}, {Account: "lab-a", Parent: "root", PerJob: PerType{"k80": 4}},
			{Account: "lab-b", Parent: "lab-a", Group: PerType{"p100": 2}, DefaultQOS: "lim"},
			{Account: "lab-a", User: "ann"}, {Account: "lab-b", User: "bob"}, {Account: "lab-b", User: "cy"},
		},
		DefaultAccount: map[string]string{"ann": "lab-a", "bob": "lab-b", "cy": "lab-b"},
	}
}

func TestRoom(t *testing.T) {
	t.Parallel()
	s := site()
	u := s.NewUsage([]Use{
		{User: "bob", Account: "lab-b", QOS: "lim", Type: "v100", GPUs: 1},
		{User: "cy", Account: "lab-b", QOS: "lim", Type: "p100", GPUs: 1},
	})
	for _, tc := range []struct {
		user, account, qos, typ string
		left                    int
		limited                 bool
	}{
		{"bob", "lab-b", "lim", "v100", 0, true}, // his own one v100
		{"cy", "lab-b", "lim", "v100", 1, true},  // per user: cy's is free
		{"bob", "lab-b", "lim", "p100", 1, true}, // lab-b's group: cy holds one of two
		{"ann", "lab-a", "normal", "p100", 0, false},
		{"ann", "lab-a", "normal", "k80", 4, true}, // per job, from the account
		{"bob", "lab-b", "lim", "k80", 4, true},    // inherited from lab-a
		{"bob", "lab-b", "normal", "v100", 0, false},
	} {
		left, why, ok := u.Room(tc.user, tc.account, tc.qos, tc.typ)
		if ok != tc.limited || (ok && left != tc.left) {
			t.Errorf("Room(%s,%s,%s,%s) = %d %q %v, want %d %v", tc.user, tc.account, tc.qos, tc.typ, left, why, ok, tc.left, tc.limited)
		}
		if ok && why == "" {
			t.Errorf("Room(%s,%s,%s,%s): no reason", tc.user, tc.account, tc.qos, tc.typ)
		}
	}
}

func TestResolveAndTyped(t *testing.T) {
	t.Parallel()
	s := site()
	for _, tc := range []struct{ user, account, qos, wantA, wantQ string }{
		{"bob", "", "", "lab-b", "lim"},    // default account, its default QOS
		{"ann", "", "", "lab-a", "normal"}, // none set: normal
		{"bob", "lab-b", "normal", "lab-b", "normal"},
	} {
		a, q := s.Resolve(tc.user, tc.account, tc.qos)
		if a != tc.wantA || q != tc.wantQ {
			t.Errorf("Resolve(%s,%q,%q) = %s %s, want %s %s", tc.user, tc.account, tc.qos, a, q, tc.wantA, tc.wantQ)
		}
	}
	if !s.Typed() {
		t.Error("site with typed limits: Typed false")
	}
	if (&Set{QOS: map[string]QOS{"normal": {Name: "normal"}}}).Typed() || (*Set)(nil).Typed() {
		t.Error("no typed limits: Typed true")
	}
	if got := s.Users(); !reflect.DeepEqual(got, []string{"ann", "bob", "cy"}) {
		t.Errorf("Users = %v", got)
	}
}
