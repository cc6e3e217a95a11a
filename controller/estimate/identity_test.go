package estimate

import "testing"

func TestIdentityKey(t *testing.T) {
	for _, tc := range []struct {
		id   Identity
		want string
	}{
		{Identity{"alice", "train", "ab12"}, "alice/train/ab12"},
		{Identity{"alice", "train", ""}, "alice/train"},
		{Identity{"al/ice", "a b", "x/y"}, "al%2Fice/a%20b/x%2Fy"},
		{Identity{"", "", ""}, "/"},
	} {
		got := tc.id.Key()
		if got != tc.want {
			t.Errorf("%+v.Key() = %q, want %q", tc.id, got, tc.want)
		}
		back, ok := ParseKey(got)
		if !ok || back != tc.id {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", got, back, ok, tc.id)
		}
	}
	// Fields cannot forge each other's boundaries.
	if (Identity{"a/b", "c", ""}).Key() == (Identity{"a", "b/c", ""}).Key() {
		t.Error("keys of different identities collide")
	}
	for _, bad := range []string{"", "justone", "a/b/c/d", "a/b/", "%zz/b"} {
		if id, ok := ParseKey(bad); ok {
			t.Errorf("ParseKey(%q) = %+v, want not ok", bad, id)
		}
	}
}
