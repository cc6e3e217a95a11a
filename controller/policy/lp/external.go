package lp

import (
	"bytes"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
)

var clpObjective = regexp.MustCompile(`Optimal objective\s+([-+0-9.eE]+)`)

// SolveWithCLP runs COIN-OR's clp on an MPS file and returns the optimum it
// reports (for the minimisation in the file). It is an independent check,
// used by tests and by benchmarks that compare speed.
func SolveWithCLP(mpsPath string) (float64, error) {
	bin, err := exec.LookPath("clp")
	if err != nil {
		return 0, fmt.Errorf("clp not found (run scripts/setup-deps): %w", err)
	}
	out, err := exec.Command(bin, mpsPath, "-primalsimplex").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("clp: %v: %s", err, out)
	}
	m := clpObjective.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("clp did not report an optimum: %s", lastLines(out))
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func lastLines(b []byte) []byte {
	if i := bytes.LastIndex(b[:max(0, len(b)-300)], []byte("\n")); i > 0 {
		return b[i:]
	}
	return b
}

func lookClp() (string, error) { return exec.LookPath("clp") }
