package main

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/estimate"
)

const testTable = `# pattern,gpu_type,steps_per_sec
pattern,gpu_type,steps_per_sec
resnet*,v100,12
resnet*,k80,3
"lm",v100,40
`

func TestReadTableErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no rows"},
		{"header only", "pattern,gpu_type,steps_per_sec\n", "no rows"},
		{"two fields", "a,v100\n", "line 1: 2 fields"},
		{"zero", "a,v100,0\n", "line 1: steps/s"},
		{"negative", "x,v100,1\na,v100,-3\n", "line 2: steps/s"},
		{"nan", "a,v100,NaN\n", "line 1: steps/s"},
		{"inf", "a,v100,+Inf\n", "line 1: steps/s"},
		{"word after first", "a,v100,1\nb,k80,fast\n", "line 2: steps/s"},
		{"empty type", "a,,1\n", "line 1: empty"},
		{"twice", "a,v100,1\na,v100,2\n", "line 2: a on v100 given twice"},
		{"bad pattern", "[a,v100,1\n", "line 1: pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTable(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTableThroughput(t *testing.T) {
	tab, err := ReadTable(strings.NewReader(testTable))
	if err != nil {
		t.Fatal(err)
	}
	types := []string{"k80", "p100", "v100"}
	for _, tc := range []struct {
		name     string
		job      string
		measured map[string]estimate.Measured
		want     []estimate.Rate // Basis not compared
	}{
		{"nothing measured: the rows", "resnet50", nil, []estimate.Rate{
			{GPUType: "k80", StepsPerSec: 3, Source: "table"}, {GPUType: "p100", Source: "unknown"},
			{GPUType: "v100", StepsPerSec: 12, Source: "table"}}},
		{"measured on k80: scaled, k80 left to the controller", "resnet18",
			map[string]estimate.Measured{"k80": {StepsPerSec: 6, Samples: 3}}, []estimate.Rate{
				{GPUType: "k80", Source: "unknown"}, {GPUType: "p100", Source: "unknown"},
				{GPUType: "v100", StepsPerSec: 24, Source: "table-scaled"}}},
		{"measured on a type off the table: rows as given", "lm",
			map[string]estimate.Measured{"p100": {StepsPerSec: 6, Samples: 3}}, []estimate.Rate{
				{GPUType: "k80", Source: "unknown"}, {GPUType: "p100", Source: "unknown"},
				{GPUType: "v100", StepsPerSec: 40, Source: "table"}}},
		{"no pattern matches", "bert", nil, []estimate.Rate{
			{GPUType: "k80", Source: "unknown"}, {GPUType: "p100", Source: "unknown"}, {GPUType: "v100", Source: "unknown"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tab.Throughput(context.Background(), estimate.ThroughputQuery{
				Key: "u/" + tc.job, Job: estimate.Identity{User: "u", Name: tc.job}, Types: types, Measured: tc.measured})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range a.Rates {
				w := tc.want[i]
				if r.GPUType != w.GPUType || r.Source != w.Source || math.Abs(r.StepsPerSec-w.StepsPerSec) > 1e-9*w.StepsPerSec {
					t.Errorf("%s: got %+v, want %+v", w.GPUType, r, w)
				}
			}
		})
	}
}

// ReadTable must not panic and must give rows that are usable numbers.
func FuzzReadTable(f *testing.F) {
	for _, s := range []string{testTable, "", "a,b,1\n", "\"a,b\",c,2\n", "x,y,1e308\n", "a,b,c,d\n", "[,v,1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tab, err := ReadTable(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, r := range tab.rows {
			if !(r.StepsPerSec > 0) || r.Pattern == "" || r.GPUType == "" {
				t.Fatalf("bad row %+v from %q", r, in)
			}
		}
	})
}
