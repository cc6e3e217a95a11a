package submit

import "testing"

func TestScriptHash(t *testing.T) {
	a, b := ScriptHash([]byte("#!/bin/sh\ntrain\n")), ScriptHash([]byte("#!/bin/sh\ntrain 2\n"))
	if len(a) != 32 || a == b || a != ScriptHash([]byte("#!/bin/sh\ntrain\n")) {
		t.Fatalf("hashes %q %q", a, b)
	}
	if ScriptHash(nil) != "" {
		t.Fatal("empty script hashed")
	}
}
