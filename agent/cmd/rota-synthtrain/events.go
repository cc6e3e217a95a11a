package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Event is one line of the job log (JSON lines, append-only). The driver
// (scripts/e2e-workload, or `rota-synthtrain summarize`) reads these.
//
//	start       job, restart ($SLURM_RESTART_COUNT), gpu, model, total, rate, resumed_from
//	lost        steps reached before the restart that the checkpoint did not hold: steps, reached, resumed_from
//	checkpoint  step, reason (signal | periodic | end)
//	stop        step, signal: ended by a signal without checkpointing (progress since the last checkpoint is lost)
//	rate        step, rate, msg: its speed changed from here (a sharer of its GPU came or went, --share-dir)
//	end         step: all steps done
//	error       msg: the program could not run (unknown GPU type, corrupt checkpoint, ...)
//
// Numbers that may legitimately be 0 are pointers so that 0 is written and
// an absent field stays absent.
type Event struct {
	Ev          string   `json:"ev"`
	Job         string   `json:"job"`
	T           float64  `json:"t"` // Unix seconds
	Restart     *int     `json:"restart,omitempty"`
	GPU         string   `json:"gpu,omitempty"`
	Model       string   `json:"model,omitempty"`
	Total       uint64   `json:"total,omitempty"`
	Rate        float64  `json:"rate,omitempty"` // steps/s, time scale applied
	ResumedFrom *uint64  `json:"resumed_from,omitempty"`
	Step        *uint64  `json:"step,omitempty"`
	Steps       *uint64  `json:"steps,omitempty"`
	Reached     *uint64  `json:"reached,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Signal      string   `json:"signal,omitempty"`
	Msg         string   `json:"msg,omitempty"`
	Elapsed     *float64 `json:"elapsed_s,omitempty"` // since this attempt's start
	Cost        *float64 `json:"cost_s,omitempty"`    // checkpoint: seconds training stood still for it
}

func u64(n uint64) *uint64 { return &n }

// eventLog appends events, one write(2) per line on an O_APPEND file, so
// several jobs may share one log without interleaving inside a line.
type eventLog struct {
	mu  sync.Mutex
	w   io.Writer
	f   *os.File // nil when writing to stdout
	job string
	now func() time.Time
}

func openEventLog(path, job string, now func() time.Time) (*eventLog, error) {
	l := &eventLog{w: os.Stdout, job: job, now: now}
	if path == "" {
		return l, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	l.w, l.f = f, f
	return l, nil
}

// emit stamps e with the job and the time and appends it. A log that cannot
// be written is reported on stderr but does not stop training: the job's
// progress file and checkpoint still tell the truth.
func (l *eventLog) emit(e Event) {
	e.Job = l.job
	if e.T == 0 {
		e.T = float64(l.now().UnixNano()) / 1e9
	}
	b, err := json.Marshal(e)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-synthtrain: log: %v\n", err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(b, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "rota-synthtrain: log: %v\n", err)
	}
}

func (l *eventLog) close() {
	if l.f != nil {
		l.f.Close()
	}
}
