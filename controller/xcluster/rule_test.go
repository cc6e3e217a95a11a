package xcluster

import (
	"math"
	"testing"
)

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		types  []TypeRate
		scale  int
		others float64
		want   float64
	}{
		{"room: best type", []TypeRate{{Rate: 10, GPUs: 4}, {Rate: 4, GPUs: 4}}, 1, 0, 10},
		{"loaded: share of all", []TypeRate{{Rate: 10, GPUs: 4}, {Rate: 4, GPUs: 4}}, 1, 13, 56.0 / 14},
		{"cannot use a type", []TypeRate{{Rate: 0, GPUs: 4}, {Rate: 4, GPUs: 4}}, 1, 0, 4},
		{"too few GPUs of the type", []TypeRate{{Rate: 10, GPUs: 1}, {Rate: 4, GPUs: 4}}, 2, 0, 4},
		{"nowhere", []TypeRate{{Rate: 0, GPUs: 4}}, 1, 0, 0},
		{"no types", nil, 1, 0, 0},
	} {
		if got := Rate(tc.types, tc.scale, tc.others); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Rate = %g, want %g", tc.name, got, tc.want)
		}
	}
}

func TestPlaceGainAndMoveScore(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name                  string
		here, there, transfer float64
		want                  float64
	}{
		{"faster there", 1000, 300, 100, 600},
		{"slower there", 300, 250, 100, -50},
		{"fits only there", inf, 300, 100, inf},
		{"fits nowhere there", 300, inf, 0, math.Inf(-1)},
		{"no link", 300, 10, inf, math.Inf(-1)},
	} {
		if got := PlaceGain(tc.here, tc.there, tc.transfer); got != tc.want {
			t.Errorf("%s: PlaceGain = %g, want %g", tc.name, got, tc.want)
		}
	}
	greedy := Rule{}
	planned := Rule{Planned: true, MoveCost: 120, Margin: 60, MarginFraction: 0.1}
	if s := greedy.MoveScore(3600, 1800, 600); s != 1200 {
		t.Errorf("greedy = %g, want 1200", s)
	}
	// 3600 - 1800 - 600 - 120 - 60 - 360
	if s := planned.MoveScore(3600, 1800, 600); s != 660 {
		t.Errorf("planned = %g, want 660", s)
	}
	// A slow link: the transfer eats the gain.
	if s := planned.MoveScore(3600, 1800, 1500); s > 0 {
		t.Errorf("planned over a slow link = %g, want <= 0", s)
	}
	if got := MinStay(7200, 900); got != 7200 {
		t.Errorf("MinStay = %g", got)
	}
	if got := MinStay(60, 900); got != 900 {
		t.Errorf("MinStay = %g", got)
	}
}

func TestParseLink(t *testing.T) {
	for _, tc := range []struct {
		in      string
		bw, lat float64
		ok      bool
	}{
		{"a-b:1GB/s:20ms", 1e9, 0.02, true},
		{"a-b:10Gb/s", 1.25e9, 0, true},
		{"a-b:100MB/s:0s", 1e8, 0, true},
		{"a:1GB/s", 0, 0, false},
		{"a-b:fast", 0, 0, false},
		{"a-b:1GB/s:-2s", 0, 0, false},
	} {
		l, err := ParseLink(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.in, err)
			continue
		}
		if tc.ok && (l.Bandwidth != tc.bw || math.Abs(l.Latency-tc.lat) > 1e-12 || !l.Joins("b", "a")) {
			t.Errorf("%s: got %+v", tc.in, l)
		}
	}
	if tr := (Link{Bandwidth: 1e8, Latency: 0.5}).Transfer(1e9); tr != 10.5 {
		t.Errorf("Transfer = %g", tr)
	}
	if tr := (Link{}).Transfer(1); !math.IsInf(tr, 1) {
		t.Errorf("no link: Transfer = %g", tr)
	}
}
