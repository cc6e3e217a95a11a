package conf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxWindow bounds a history window: a year of sacct is already far more
// than the queue-wait history keeps.
const maxWindow = 366 * 24 * time.Hour

// ParseWindow reads a history window (the controller's history_window,
// rota queuewait train --since): days as "7d", or a Go duration
// ("36h", "90m"); "0" is none.
func ParseWindow(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil || math.IsNaN(days) || math.IsInf(days, 0) {
			return 0, fmt.Errorf("%q: want days like 7d, a duration like 36h, or 0", s)
		}
		d = time.Duration(days * 24 * float64(time.Hour))
		if days > maxWindow.Hours()/24 {
			d = maxWindow + 1
		}
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want days like 7d, a duration like 36h, or 0", s)
		}
	}
	if d < 0 || d > maxWindow {
		return 0, fmt.Errorf("%q: must be 0 (off) to 366d", s)
	}
	return d, nil
}

// FormatWindow prints a window as ParseWindow reads it, in days when whole.
func FormatWindow(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
