package wire

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	good, _ := json.Marshal(PlaceRequest{V: Version, GPU: GPUAsk{PerNode: 1}})
	var r PlaceRequest
	if err := Decode(good, &r); err != nil || r.GPU.PerNode != 1 {
		t.Fatalf("good message: %v %+v", err, r)
	}
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"old version", []byte(`{"v":0}`), ErrVersion},
		{"new version", []byte(`{"v":2,"gpu":{}}`), ErrVersion},
		{"not json", []byte(`{"v":1`), nil},
		{"wrong type", []byte(`{"v":1,"uid":"root"}`), nil},
		{"too big", []byte(`{"v":1,"name":"` + strings.Repeat("x", MaxMessageBytes) + `"}`), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Decode(tc.data, &PlaceRequest{})
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAnnotationRoundTrip(t *testing.T) {
	a := Annotation("any", "v100", "none", "01:35:00", "interim", "zRoJxe0UZVrkpfZdUQLBJi")
	if a != "rota: gpu any->v100, time none->01:35:00 (interim) [d=zRoJxe0UZVrkpfZdUQLBJi]" {
		t.Fatalf("annotation %q", a)
	}
	for in, want := range map[string]string{
		a:                       "zRoJxe0UZVrkpfZdUQLBJi",
		"site note; " + a:       "zRoJxe0UZVrkpfZdUQLBJi",
		"no decision here":      "",
		"rota: [d=]":            "",
		"rota: [d=unterminated": "",
	} {
		if got := DecisionIDFromComment(in); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
}

// FuzzDecodePlaceRequest: whatever arrives on the wire, Decode returns an
// error or a message of the current version; it never panics.
func FuzzDecodePlaceRequest(f *testing.F) {
	f.Add([]byte(`{"v":1,"gpu":{"per_node":1},"hints":{"steps":10,"throughput":{"v100":1.5}}}`))
	f.Add([]byte(`{"v":1,"time_limit_min":4294967295}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r PlaceRequest
		if err := Decode(data, &r); err == nil && r.V != Version {
			t.Fatalf("accepted version %d", r.V)
		}
		var p PlaceReply
		if err := Decode(data, &p); err == nil && p.V != Version {
			t.Fatalf("accepted version %d", p.V)
		}
	})
}

// A decision whose figures include an infinity (a type that never frees)
// still encodes: the figure is left out, the decision is kept.
func TestDecisionWithNonFiniteNumbersEncodes(t *testing.T) {
	d := Decision{ID: "x", Numbers: Numbers{"start_s.k80": math.Inf(1), "nan": math.NaN(), "free.v100": 2}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("encoding: %v", err)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Numbers) != 1 || back.Numbers["free.v100"] != 2 {
		t.Fatalf("numbers after a round trip: %v", back.Numbers)
	}
	if b, err := json.Marshal(Decision{ID: "y"}); err != nil || strings.Contains(string(b), "numbers") {
		t.Fatalf("empty numbers: %s %v", b, err)
	}
}

// numbersReference is what encoding/json writes for the finite values.
func numbersReference(n Numbers) string {
	finite := map[string]float64{}
	for k, v := range n {
		if !nonFinite(v) {
			finite[k] = v
		}
	}
	b, _ := json.Marshal(finite)
	return string(b)
}

// Numbers encodes byte for byte as encoding/json encodes the same map
// (less non-finite values), whether written directly or, for a key that
// needs escaping, through encoding/json.
func TestNumbersEncodeAsEncodingJSON(t *testing.T) {
	for _, n := range []Numbers{
		{},
		{"need.total": 1, "need.per_node": 1, "free.v100": 3, "free.k80": 0, "speed.v100": 3.5, "chosen.score": 10.5},
		{"tiny": 1e-7, "small": 0.000001, "big": 1e21, "bigger": 1.5e300, "neg": -2.25e-9, "zero": 0, "negzero": math.Copysign(0, -1)},
		{"start_s.k80": math.Inf(1), "run_s.k80": math.NaN(), "run_s.v100": 123.456},
		{"free.a<b": 1, "x": 2},         // escaped by encoding/json
		{"quote\"d": 1, "tab\t": 2},     // escaped
		{"utf8.é": 1, "ok.type-1_a": 2}, // non-ASCII: through encoding/json
	} {
		b, err := n.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if want := numbersReference(n); string(b) != want {
			t.Errorf("Numbers %v encoded as\n%s\nwant\n%s", n, b, want)
		}
	}
}

func FuzzNumbersEncode(f *testing.F) {
	f.Add("free.v100", 3.0, "speed.k80", 1e-7)
	f.Add("a&b", 1e21, "", -0.0)
	f.Fuzz(func(t *testing.T, k1 string, v1 float64, k2 string, v2 float64) {
		n := Numbers{k1: v1, k2: v2}
		b, err := n.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if want := numbersReference(n); string(b) != want {
			t.Fatalf("%v: %s, encoding/json %s", n, b, want)
		}
	})
}

// A route request may carry a batch script past the general limit, up to
// its own; every multi-cluster message is checked for its version.
func TestDecodeLimits(t *testing.T) {
	t.Parallel()
	script := strings.Repeat("x", 3<<20)
	b, err := json.Marshal(MCRouteRequest{V: Version, ID: "a.1", Script: []byte(script)})
	if err != nil {
		t.Fatal(err)
	}
	var r MCRouteRequest
	if err := Decode(b, &r); err == nil {
		t.Error("Decode took a 4 MB route request under the 64 KiB limit")
	}
	if err := DecodeLimit(b, &r, MaxRouteBytes); err != nil || string(r.Script) != script {
		t.Errorf("DecodeLimit(MaxRouteBytes): %v", err)
	}
	if err := DecodeLimit(b, &r, len(b)-1); err == nil {
		t.Error("DecodeLimit took a message over its limit")
	}
	for _, m := range []Message{&MCView{}, &MCRouteRequest{}, &MCRouteReply{}, &MCChunkReply{}} {
		if err := Decode([]byte(`{"v":99,"id":"x"}`), m); !errors.Is(err, ErrVersion) {
			t.Errorf("%T of another version: %v, want ErrVersion", m, err)
		}
	}
}
