package gpureq

import (
	"strings"
	"testing"
)

// FuzzParse checks, for any input, that Parse never panics, that whatever
// it accepts prints back byte-identical, and that SetType yields a request
// that parses again with the new type on every GPU entry and the other
// entries untouched. The seed corpus runs in every `go test`.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "gres:gpu:1", "gres:gpu", "gres:gpu:v100:2", "gres/gpu:3", "gres/gpu=2",
		"gpu:2", "gres:gpu:1,gres:nvme:1", "cpu=4,gres/gpu:a100:1", "gres:gpu:k80:1,gres:gpu:p100:2",
		",", "gres:gpu::", "gres:gpu:v100:1:2", "gres:gpu:99999999999999999999999", "gres:gpu=x",
		"gpu:00", "gres/gpu=01", "gres:gpu:k80:007", // counts with leading zeros print back as written
		"gres:shard:2", "gres/shard=3,gres/gpu:1", "shard::2", "gres:shard:v100:4",
	} {
		f.Add(s, "v100")
	}
	f.Fuzz(func(t *testing.T, in, typ string) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		if got := s.String(); got != in {
			t.Fatalf("round trip %q -> %q", in, got)
		}
		if CheckTypeName(typ) != nil {
			return
		}
		shards, hadShard := s.Shards()
		before, _, hadGPU := s.GPUs()
		s.SetType(typ)
		out := s.String()
		s2, err := Parse(out)
		if err != nil {
			t.Fatalf("SetType(%q) on %q gave unparsable %q: %v", typ, in, out, err)
		}
		after, types, has := s2.GPUs()
		if has != hadGPU || after != before {
			t.Fatalf("SetType changed the GPU count: %q -> %q", in, out)
		}
		if n, h := s2.Shards(); n != shards || h != hadShard {
			t.Fatalf("SetType changed the shards: %q -> %q", in, out)
		}
		if has && (len(types) != 1 || types[0] != typ) {
			t.Fatalf("SetType(%q) on %q gave types %v", typ, in, types)
		}
		for i, e := range s2.Entries {
			if !e.GPU && e.raw != strings.Split(in, ",")[i] {
				t.Fatalf("non-GPU entry changed: %q -> %q", in, out)
			}
		}
	})
}
