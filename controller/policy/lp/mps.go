package lp

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// WriteFreeMPS writes p in free MPS as a minimisation: MPS has no standard
// objective sense marker that every reader honours, so the maximised
// objective is negated and an independent solver's optimum is -Objective.
func WriteFreeMPS(w io.Writer, p *Problem, name string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "NAME %s\nROWS\n N obj\n", name)
	for i, r := range p.Rows {
		fmt.Fprintf(bw, " %s %s\n", r.Sense, rowName(p, i))
	}
	// Column-major order is required by MPS: gather each column's entries.
	cols := make([][]struct {
		row int
		v   float64
	}, p.NumVars())
	for i, r := range p.Rows {
		for k, j := range r.Idx {
			if r.Val[k] != 0 {
				cols[j] = append(cols[j], struct {
					row int
					v   float64
				}{i, r.Val[k]})
			}
		}
	}
	fmt.Fprintln(bw, "COLUMNS")
	for j := range cols {
		name := colName(p, j)
		if p.Obj[j] != 0 {
			fmt.Fprintf(bw, " %s obj %s\n", name, num(-p.Obj[j]))
		}
		for _, e := range cols[j] {
			fmt.Fprintf(bw, " %s %s %s\n", name, rowName(p, e.row), num(e.v))
		}
		if p.Obj[j] == 0 && len(cols[j]) == 0 {
			// A column must appear to exist; give it a zero objective entry.
			fmt.Fprintf(bw, " %s obj 0\n", name)
		}
	}
	fmt.Fprintln(bw, "RHS")
	for i, r := range p.Rows {
		if r.RHS != 0 {
			fmt.Fprintf(bw, " rhs %s %s\n", rowName(p, i), num(r.RHS))
		}
	}
	fmt.Fprintln(bw, "ENDATA")
	return bw.Flush()
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 17, 64) }

func rowName(p *Problem, i int) string {
	if n := p.Rows[i].Name; n != "" {
		return n
	}
	return "r" + strconv.Itoa(i)
}

func colName(p *Problem, j int) string {
	if j < len(p.VarNames) && p.VarNames[j] != "" {
		return p.VarNames[j]
	}
	return "c" + strconv.Itoa(j)
}
