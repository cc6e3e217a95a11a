package submit

import "testing"

func TestWithTypeFeature(t *testing.T) {
	for _, c := range []struct {
		user, typ, want string
		ok              bool
	}{
		{"", "v100", "v100", true},
		{" ", "v100", "v100", true},
		{"ib", "v100", "ib&v100", true},
		{"ib&v100", "v100", "ib&v100", true},
		{"ib|eth", "v100", "", false},
		{"[rack1|rack2]", "v100", "", false},
		{"(a&b)", "v100", "", false},
		{"ib*2", "v100", "", false},
	} {
		got, ok := WithTypeFeature(c.user, c.typ)
		if got != c.want || ok != c.ok {
			t.Errorf("WithTypeFeature(%q, %q) = %q, %v; want %q, %v", c.user, c.typ, got, ok, c.want, c.ok)
		}
	}
}

func TestScriptHash(t *testing.T) {
	a, b := ScriptHash([]byte("#!/bin/sh\ntrain\n")), ScriptHash([]byte("#!/bin/sh\ntrain 2\n"))
	if len(a) != 32 || a == b || a != ScriptHash([]byte("#!/bin/sh\ntrain\n")) {
		t.Fatalf("hashes %q %q", a, b)
	}
	if ScriptHash(nil) != "" {
		t.Fatal("empty script hashed")
	}
}
