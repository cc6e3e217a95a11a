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
