// Package hints reads what a job tells Rota beyond its Slurm request: the
// --rota-* options the SPANK plugin passes in the job's environment, and
// the hash that recognises its batch script again. The job_submit plugin
// reads them at submission; the controller and the CLI read the same
// options from #SBATCH lines (`rota estimate`), so both use this package.
package hints

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/internal/slurmsize"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Options are the sbatch options the SPANK plugin registers.
type Options struct {
	Off   bool // --rota=off
	Hints wire.Hints
}

// spankPrefix is how Slurm passes SPANK options to job_submit: the plugin
// name ("rota"), then the option name with '-' turned into '_'.
const spankPrefix = "_SLURM_SPANK_OPTION_rota_"

// Parse reads Rota's SPANK options from a job's spank env. An option it
// cannot read is an error (the job then passes unchanged), not a guess.
func Parse(env []string) (Options, error) {
	var o Options
	for _, kv := range env {
		if !strings.HasPrefix(kv, spankPrefix) {
			continue
		}
		k, v, _ := strings.Cut(kv[len(spankPrefix):], "=")
		switch strings.ReplaceAll(k, "-", "_") {
		case "rota":
			switch strings.ToLower(v) {
			case "off", "no", "false", "0":
				o.Off = true
			case "on", "yes", "true", "1", "":
			default:
				return o, fmt.Errorf("--rota=%q: want on or off", v)
			}
		case "rota_steps":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return o, fmt.Errorf("--rota-steps=%q: want a positive whole number of steps", v)
			}
			o.Hints.Steps = n
		case "rota_checkpoint_signal":
			sig := strings.TrimPrefix(strings.ToUpper(v), "SIG")
			if !catchable[sig] {
				return o, fmt.Errorf("--rota-checkpoint-signal=%q: want a signal the job can catch (USR1, USR2, TERM...)", v)
			}
			o.Hints.CheckpointSignal = sig
		case "rota_chain":
			switch strings.ToLower(v) {
			case "", "on", "yes", "true", "1":
				o.Hints.Chain = "on"
			case "off", "no", "false", "0":
				o.Hints.Chain = "off"
			default:
				return o, fmt.Errorf("--rota-chain=%q: want on or off", v)
			}
		case "rota_throughput":
			tp, err := ParseThroughput(v)
			if err != nil {
				return o, err
			}
			o.Hints.Throughput = tp
		case "rota_types":
			ts, err := ParseTypes(v)
			if err != nil {
				return o, err
			}
			o.Hints.Types = ts
		case "rota_kind":
			k, err := ParseKind(v)
			if err != nil {
				return o, err
			}
			o.Hints.Kind = k
		case "rota_gpu_mem":
			mb, err := slurmsize.MB(v)
			if err != nil || mb == 0 {
				return o, fmt.Errorf("--rota-gpu-mem=%q: want a memory size such as 16G or 20480M", v)
			}
			o.Hints.GPUMemBytes = mb << 20
		case "rota_share":
			sh, err := ParseShare(v)
			if err != nil {
				return o, err
			}
			o.Hints.Share = sh
		case "rota_model":
			m, err := ParseModel(v)
			if err != nil {
				return o, err
			}
			o.Hints.Model = m
		case "rota_service":
			if err := checkName(v); err != nil {
				return o, fmt.Errorf("--rota-service=%q: %w", v, err)
			}
			o.Hints.Service = v
		}
	}
	return o, nil
}

// ParseShare reads --rota-share: yes or no.
func ParseShare(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "yes", "on", "true", "1":
		return wire.ShareYes, nil
	case "no", "off", "false", "0":
		return wire.ShareNo, nil
	}
	return "", fmt.Errorf("--rota-share=%q: want yes or no", v)
}

// ParseModel reads --rota-model: a job type's name as the throughput
// table writes it ("ResNet-50 (batch size 64)"): printable ASCII, at
// most 128 characters. Whether the table knows it is the controller's
// to say (rota explain).
func ParseModel(v string) (string, error) {
	m := strings.TrimSpace(v)
	if m == "" || len(m) > 128 {
		return "", fmt.Errorf("--rota-model=%q: want a job type of the throughput table, at most 128 characters", v)
	}
	for i := 0; i < len(m); i++ {
		if m[i] < 0x20 || m[i] > 0x7e {
			return "", fmt.Errorf("--rota-model=%q: want printable ASCII", v)
		}
	}
	return m, nil
}

// catchable are the checkpoint signals the SPANK plugin and the agent accept.
var catchable = map[string]bool{
	"HUP": true, "INT": true, "QUIT": true, "USR1": true, "USR2": true, "ALRM": true,
	"TERM": true, "CONT": true, "URG": true, "PWR": true, "XCPU": true,
}

// ParseKind reads --rota-kind: batch, interactive or serve.
func ParseKind(v string) (string, error) {
	switch k := strings.ToLower(strings.TrimSpace(v)); k {
	case wire.KindBatch, wire.KindInteractive, wire.KindServe:
		return k, nil
	}
	return "", fmt.Errorf("--rota-kind=%q: want batch, interactive or serve", v)
}

// checkName accepts a service name: 1-64 of [A-Za-z0-9_.-], starting
// with a letter or digit (it appears in job comments and subjects).
func checkName(v string) error {
	if v == "" || len(v) > 64 {
		return fmt.Errorf("want 1 to 64 characters")
	}
	for i, c := range []byte(v) {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return fmt.Errorf("want letters, digits, '_', '.' or '-', starting with a letter or digit")
		}
	}
	return nil
}

// ParseTypes reads --rota-types=TYPE[,TYPE...]: the GPU types the
// user lets Rota choose from, each once.
func ParseTypes(v string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if err := gpureq.CheckTypeName(t); err != nil {
			return nil, fmt.Errorf("--rota-types: %w", err)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// ParseThroughput reads --rota-throughput=TYPE:STEPS_PER_S[,...].
func ParseThroughput(v string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, item := range strings.Split(v, ",") {
		t, rate, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, fmt.Errorf("--rota-throughput: %q is not TYPE:STEPS_PER_S", item)
		}
		if err := gpureq.CheckTypeName(t); err != nil {
			return nil, fmt.Errorf("--rota-throughput: %w", err)
		}
		f, err := strconv.ParseFloat(rate, 64)
		if err != nil || !(f > 0) || f > 1e9 {
			return nil, fmt.Errorf("--rota-throughput: rate %q for %s is not a positive number", rate, t)
		}
		out[t] = f
	}
	return out, nil
}

// ScriptHash is how Rota recognises a batch script again: the first 16
// bytes of its SHA-256, in hex ("" for no script).
func ScriptHash(script []byte) string {
	if len(script) == 0 {
		return ""
	}
	sum := sha256.Sum256(script)
	return hex.EncodeToString(sum[:16])
}
