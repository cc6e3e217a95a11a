// Package slurmtime reads and writes Slurm's time-limit notation, in whole
// minutes as Slurm stores limits: "30", "1:30:00", "2-00:00:00", "UNLIMITED".
package slurmtime

import (
	"fmt"
	"strconv"
	"strings"
)

// Unlimited is what Parse returns for "UNLIMITED" / "INFINITE".
const Unlimited = ^uint32(0)

// Format writes minutes the way `scontrol show job` does.
func Format(min uint32) string {
	if min == Unlimited {
		return "UNLIMITED"
	}
	d, h, m := min/1440, (min%1440)/60, min%60
	if d > 0 {
		return fmt.Sprintf("%d-%02d:%02d:00", d, h, m)
	}
	return fmt.Sprintf("%02d:%02d:00", h, m)
}

// Parse reads the forms sbatch --time accepts: "M", "M:S", "H:M:S",
// "D-H", "D-H:M", "D-H:M:S", and UNLIMITED. Seconds round up to a minute.
func Parse(s string) (uint32, error) {
	s = strings.TrimSpace(s)
	switch strings.ToUpper(s) {
	case "UNLIMITED", "INFINITE":
		return Unlimited, nil
	case "", "N/A", "NONE":
		return 0, fmt.Errorf("slurmtime: no time in %q", s)
	}
	days := uint64(0)
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseUint(d, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("slurmtime: bad days in %q", s)
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, fmt.Errorf("slurmtime: too many fields in %q", s)
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("slurmtime: bad number %q in %q", p, s)
		}
		nums[i] = n
	}
	var h, m, sec uint64
	switch {
	case days > 0 || strings.Contains(s, "-"):
		// D-H, D-H:M, D-H:M:S
		h = nums[0]
		if len(nums) > 1 {
			m = nums[1]
		}
		if len(nums) > 2 {
			sec = nums[2]
		}
	case len(nums) == 1:
		m = nums[0]
	case len(nums) == 2:
		m, sec = nums[0], nums[1]
	default:
		h, m, sec = nums[0], nums[1], nums[2]
	}
	total := days*1440 + h*60 + m + (sec+59)/60
	if total >= uint64(Unlimited) {
		return 0, fmt.Errorf("slurmtime: %q is out of range", s)
	}
	return uint32(total), nil
}
