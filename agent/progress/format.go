// Package progress reads the progress files jobs write and turns them into
// a smoothed steps-per-second rate per job.
//
// # File format
//
// A job writes its progress to the file named by $ROTA_PROGRESS_FILE,
// which the SPANK plugin sets to <progress_dir>/<jobid>/progress. The file
// holds one line of space-separated key=value pairs:
//
//		step=1200 ckpt=1000 total=50000 time=1732250000.25
//
//	  - step  (required) training steps done so far, a non-negative integer.
//	  - ckpt  (optional) the step of the last completed checkpoint. When it
//	    changes after a checkpoint command, the agent counts the checkpoint
//	    as acknowledged.
//	  - total (optional) the steps the job will run in all.
//	  - time  (optional) Unix time in seconds when the line was written; when
//	    absent the file's modification time is used.
//
// A line that is just an integer ("1200") means step=1200. Unknown keys are
// ignored, so the format can grow. Only the first line is read, and at most
// MaxFileBytes of it. Write the file atomically (write a temporary file in
// the same directory, then rename it over the old one), as
// contrib/python/rota_progress.py does; a torn or garbled file is reported
// as a problem for that reading and the previous reading is kept.
package progress

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// MaxFileBytes bounds what the agent reads of a progress file.
const MaxFileBytes = 4096

// Reading is one parsed progress file.
type Reading struct {
	Step  uint64
	Ckpt  uint64
	HasCk bool
	Total uint64
	// Time is the writer's time, zero when the file does not say.
	Time time.Time
}

// ErrEmpty is returned for an empty file (often one caught mid-write by a
// writer that does not rename).
var ErrEmpty = errors.New("progress file is empty")

// Parse reads the first line of a progress file.
func Parse(data []byte) (Reading, error) {
	if len(data) > MaxFileBytes {
		data = data[:MaxFileBytes]
	}
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Reading{}, ErrEmpty
	}
	var r Reading
	if n, err := strconv.ParseUint(string(data), 10, 64); err == nil {
		r.Step = n
		return r, nil
	}
	haveStep := false
	for _, field := range bytes.Fields(data) {
		k, v, ok := bytes.Cut(field, []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case "step", "ckpt", "total":
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return Reading{}, fmt.Errorf("%s=%.20q is not a non-negative integer", k, v)
			}
			switch string(k) {
			case "step":
				r.Step, haveStep = n, true
			case "ckpt":
				r.Ckpt, r.HasCk = n, true
			case "total":
				r.Total = n
			}
		case "time":
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
				return Reading{}, fmt.Errorf("time=%.20q is not Unix seconds", v)
			}
			sec, frac := math.Modf(f)
			r.Time = time.Unix(int64(sec), int64(frac*1e9))
		}
	}
	if !haveStep {
		return Reading{}, errors.New("no step=<n> on the first line")
	}
	return r, nil
}

// Format is the progress line for r: "step=<n> [ckpt=<n>] [total=<n>]
// [time=<unix seconds>]\n", the line Parse reads back. It is the Go
// counterpart of contrib/python/rota_progress.py's format_line.
func Format(r Reading) string {
	b := make([]byte, 0, 80)
	b = append(b, "step="...)
	b = strconv.AppendUint(b, r.Step, 10)
	if r.HasCk {
		b = append(b, " ckpt="...)
		b = strconv.AppendUint(b, r.Ckpt, 10)
	}
	if r.Total > 0 {
		b = append(b, " total="...)
		b = strconv.AppendUint(b, r.Total, 10)
	}
	if !r.Time.IsZero() {
		b = append(b, " time="...)
		b = strconv.AppendFloat(b, float64(r.Time.UnixNano())/1e9, 'f', 3, 64)
	}
	return string(append(b, '\n'))
}

// WriteFile replaces path with r's line atomically: a temporary file in the
// same directory, then a rename, so the agent never reads half a line. No
// fsync: progress is advisory and rewritten every few seconds.
func WriteFile(path string, r Reading) error {
	tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(Format(r)), 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
