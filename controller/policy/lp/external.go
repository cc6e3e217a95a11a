package lp

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
)

var (
	clpObjective = regexp.MustCompile(`Optimal objective\s+([-+0-9.eE]+)`)
	clpTime      = regexp.MustCompile(`Optimal objective.*time ([0-9.eE+-]+)`)
)

// SolveWithCLP runs COIN-OR's clp on an MPS file and returns the optimum it
// reports (for the minimisation in the file). It is an independent check,
// used by tests and by benchmarks that compare speed.
func SolveWithCLP(mpsPath string) (float64, error) {
	v, _, err := SolveWithCLPTimed(mpsPath)
	return v, err
}

// SolveWithCLPTimed also returns the solve time clp reports for itself
// (excluding reading the file), for speed comparisons.
func SolveWithCLPTimed(mpsPath string) (float64, float64, error) {
	bin, err := exec.LookPath("clp")
	if err != nil {
		return 0, 0, fmt.Errorf("clp not found (run scripts/setup-deps): %w", err)
	}
	out, err := exec.Command(bin, mpsPath, "-solve").CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("clp: %v: %s", err, out)
	}
	m := clpObjective.FindSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("clp did not report an optimum: %s", lastLines(out))
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	secs := 0.0
	if tm := clpTime.FindSubmatch(out); tm != nil {
		secs, _ = strconv.ParseFloat(string(tm[1]), 64)
	}
	return v, secs, err
}

func lastLines(b []byte) []byte {
	if i := bytes.LastIndex(b[:max(0, len(b)-300)], []byte("\n")); i > 0 {
		return b[i:]
	}
	return b
}

func lookClp() (string, error) { return exec.LookPath("clp") }
