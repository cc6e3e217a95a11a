package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/controller/estimate"
)

// Row is one line of the table: a job name pattern (path.Match syntax,
// e.g. "resnet50*"), a GPU type and the steps/s measured for it there.
type Row struct {
	Pattern     string
	GPUType     string
	StepsPerSec float64
}

// Table answers throughput questions from its rows. For a job, the rows
// of the first pattern (in file order) that matches its name count:
//
//   - a type the job was measured on: "unknown" (the controller's
//     measurement is better than any table);
//   - a type in the rows, and the job measured on another type in the
//     rows: the measurement scaled by the rows' ratio ("table-scaled");
//   - a type in the rows, nothing measured there: the row ("table");
//   - otherwise "unknown", and the controller's built-in answers.
type Table struct {
	rows []Row
}

// ReadTable reads CSV lines of pattern,gpu_type,steps_per_sec. Blank
// lines and lines starting with # are skipped, and so is a first line
// whose third field is not a number (a header). A bad line is an error
// naming its line number; nothing is half read.
func ReadTable(r io.Reader) (*Table, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	t := &Table{}
	seen := map[[2]string]bool{}
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != 3 {
			return nil, fmt.Errorf("line %d: %d fields, want pattern,gpu_type,steps_per_sec", line, len(rec))
		}
		pat, ty := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		v, err := strconv.ParseFloat(strings.TrimSpace(rec[2]), 64)
		if err != nil && first {
			continue // a header
		}
		switch {
		case err != nil || !(v > 0) || math.IsInf(v, 0):
			return nil, fmt.Errorf("line %d: steps/s %q is not a positive number", line, rec[2])
		case pat == "" || ty == "":
			return nil, fmt.Errorf("line %d: empty pattern or GPU type", line)
		case seen[[2]string{pat, ty}]:
			return nil, fmt.Errorf("line %d: %s on %s given twice", line, pat, ty)
		}
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("line %d: pattern %q: %w", line, pat, err)
		}
		seen[[2]string{pat, ty}] = true
		t.rows = append(t.rows, Row{Pattern: pat, GPUType: ty, StepsPerSec: v})
	}
	if len(t.rows) == 0 {
		return nil, errors.New("no rows")
	}
	return t, nil
}

// rowsFor returns the rates per type of the first pattern matching name.
func (t *Table) rowsFor(name string) (string, map[string]float64) {
	for _, r := range t.rows {
		if ok, _ := path.Match(r.Pattern, name); ok {
			m := map[string]float64{}
			for _, x := range t.rows {
				if x.Pattern == r.Pattern {
					m[x.GPUType] = x.StepsPerSec
				}
			}
			return r.Pattern, m
		}
	}
	return "", nil
}

// Throughput implements estimate.Throughput.
func (t *Table) Throughput(_ context.Context, q estimate.ThroughputQuery) (estimate.ThroughputAnswer, error) {
	pat, rates := t.rowsFor(q.Job.Name)
	// The measured types that the table also has, for scaling: the
	// geometric mean of measured/table over them.
	var logSum float64
	var on []string
	for ty, m := range q.Measured {
		if tv, ok := rates[ty]; ok && m.StepsPerSec > 0 {
			logSum += math.Log(m.StepsPerSec / tv)
			on = append(on, ty)
		}
	}
	slices.Sort(on)
	a := estimate.ThroughputAnswer{Rates: make([]estimate.Rate, len(q.Types))}
	for i, ty := range q.Types {
		tv, ok := rates[ty]
		_, measured := q.Measured[ty]
		switch {
		case !ok || measured:
			a.Rates[i] = estimate.Rate{GPUType: ty, Source: estimate.SourceUnknown}
		case len(on) > 0:
			c := math.Exp(logSum / float64(len(on)))
			a.Rates[i] = estimate.Rate{GPUType: ty, StepsPerSec: tv * c, Source: "table-scaled",
				Basis: fmt.Sprintf("table %s on %s %.4g steps/s x %.3g (measured/table on %s)", pat, ty, tv, c, strings.Join(on, ","))}
		default:
			a.Rates[i] = estimate.Rate{GPUType: ty, StepsPerSec: tv, Source: "table",
				Basis: fmt.Sprintf("table %s on %s: %.4g steps/s", pat, ty, tv)}
		}
	}
	return a, nil
}
