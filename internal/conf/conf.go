// Package conf reads Rota's configuration files. They use the format admins
// already know from slurm.conf: one "key = value" per line, '#' starts a
// comment, blank lines are ignored. Unknown keys are errors, so a typo is
// reported instead of silently ignored; all errors are collected and
// reported together with their line numbers.
package conf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Values is a parsed file: key -> value and where it was set.
type Values struct {
	name string
	kv   map[string]string
	line map[string]int
	used map[string]bool
	errs []error
}

// ReadFile parses the file at path.
func ReadFile(path string) (*Values, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Empty is a Values with nothing set, for running on defaults alone.
func Empty() *Values {
	return &Values{kv: map[string]string{}, line: map[string]int{}, used: map[string]bool{}}
}

// Parse reads "key = value" lines from r; name labels errors.
func Parse(r io.Reader, name string) (*Values, error) {
	v := Empty()
	v.name = name
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	var errs []error
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("%s:%d: want key = value, got %q", name, n, line))
			continue
		}
		if prev, dup := v.line[k]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: %s already set on line %d", name, n, k, prev))
			continue
		}
		v.kv[k] = strings.TrimSpace(val)
		v.line[k] = n
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return v, errors.Join(errs...)
}

func (v *Values) get(key string) (string, bool) {
	v.used[key] = true
	s, ok := v.kv[key]
	return s, ok
}

func (v *Values) fail(key, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s:%d: %s: %s", v.name, v.line[key], key, fmt.Sprintf(format, args...)))
}

// String sets *dst from key when present.
func (v *Values) String(key string, dst *string) {
	if s, ok := v.get(key); ok {
		*dst = s
	}
}

// List sets *dst from a comma-separated key when present.
func (v *Values) List(key string, dst *[]string) {
	s, ok := v.get(key)
	if !ok {
		return
	}
	*dst = nil
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*dst = append(*dst, f)
		}
	}
}

// Bool sets *dst from key (true/false, yes/no, on/off, 1/0) when present.
func (v *Values) Bool(key string, dst *bool) {
	s, ok := v.get(key)
	if !ok {
		return
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1":
		*dst = true
	case "false", "no", "off", "0":
		*dst = false
	default:
		v.fail(key, "want true or false, got %q", s)
	}
}

// Duration sets *dst from key ("50ms", "2s", or a bare number of
// milliseconds) when present; it must lie in [min, max].
func (v *Values) Duration(key string, dst *time.Duration, min, max time.Duration) {
	s, ok := v.get(key)
	if !ok {
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, err2 := strconv.ParseUint(s, 10, 32)
		if err2 != nil {
			v.fail(key, "want a duration like 50ms, got %q", s)
			return
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d < min || d > max {
		v.fail(key, "%v is outside [%v, %v]", d, min, max)
		return
	}
	*dst = d
}

// Int sets *dst from key when present; it must lie in [min, max].
func (v *Values) Int(key string, dst *int, min, max int) {
	s, ok := v.get(key)
	if !ok {
		return
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		v.fail(key, "want a whole number in [%d, %d], got %q", min, max, s)
		return
	}
	*dst = n
}

// Float sets *dst from key when present; it must lie in [min, max].
func (v *Values) Float(key string, dst *float64, min, max float64) {
	s, ok := v.get(key)
	if !ok {
		return
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < min || f > max {
		v.fail(key, "want a number in [%g, %g], got %q", min, max, s)
		return
	}
	*dst = f
}

// Keys lists the keys set in the file (for maps of arbitrary names, such
// as per-type tables).
func (v *Values) Keys() []string {
	ks := make([]string, 0, len(v.kv))
	for k := range v.kv {
		ks = append(ks, k)
	}
	return ks
}

// Err reports every bad value read so far and every key nobody asked for.
// Call it after reading all keys.
func (v *Values) Err() error {
	errs := v.errs
	for k := range v.kv {
		if !v.used[k] {
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q", v.name, v.line[k], k))
		}
	}
	return errors.Join(errs...)
}
