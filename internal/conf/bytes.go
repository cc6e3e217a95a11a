package conf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseBytes reads a size: a number with an optional unit K, M, G, T
// (powers of 1024, with or without "iB" or "B"); a bare number is bytes.
func ParseBytes(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (K, M, G, T)", s)
	}
	mult := 1.0
	switch strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "i")) {
	case "":
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (K, M, G, T)", s, unit)
	}
	v := f * mult
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return uint64(v), nil
}

// Bytes sets *dst from key (a size, ParseBytes) when present.
func (v *Values) Bytes(key string, dst *uint64) {
	s, ok := v.get(key)
	if !ok {
		return
	}
	b, err := ParseBytes(s)
	if err != nil {
		v.fail(key, "want a size such as 10GiB or 40G, got %q", s)
		return
	}
	*dst = b
}
