package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Change is one job's update in a batch.
type Change struct {
	JobID  uint32
	Update JobUpdate
}

// BatchUpdater is a Scheduler that sends many updates at a time, for a
// round that changes hundreds of jobs. Slurm takes one RPC per job
// whatever the client (scontrol sends one per id even for a list); what
// a batch saves is a client process, its configuration read and its
// authentication per job.
type BatchUpdater interface {
	// UpdateMany sends every change; errs[i] is changes[i]'s outcome (nil:
	// applied). A failed change affects that job only.
	UpdateMany(ctx context.Context, changes []Change) (errs []error)
}

// batchSize bounds the updates one scontrol process sends: a failure
// of the process (a timeout, a crash) costs at most this many, and the
// next round sends them again.
const batchSize = 256

// UpdateMany implements BatchUpdater: batchSize updates per scontrol
// process, read from its standard input, one line per job.
func (c *CLI) UpdateMany(ctx context.Context, changes []Change) []error {
	errs := make([]error, len(changes))
	var lines []string
	var idx []int // change index per batched change
	flush := func() {
		if len(idx) == 0 {
			return
		}
		c.sendBatch(ctx, lines, idx, changes, errs)
		lines, idx = lines[:0], idx[:0]
	}
	for i, ch := range changes {
		cmds, ok := batchLines(ch)
		if !ok {
			// A value scontrol's line reader could split: as its own process.
			errs[i] = c.Update(ctx, ch.JobID, ch.Update)
			continue
		}
		if len(cmds) == 0 {
			continue
		}
		lines = append(lines, cmds...)
		idx = append(idx, i)
		if len(idx) == batchSize {
			flush()
		}
	}
	flush()
	return errs
}

// batchLines is change ch as scontrol commands ("update JobId=... ",
// "release ..."); false when a value holds a blank or a quote, which
// scontrol's command reader would take apart.
func batchLines(ch Change) ([]string, bool) {
	id := strconv.FormatUint(uint64(ch.JobID), 10)
	var out []string
	if a := ch.Update.args(); len(a) > 0 {
		for _, s := range a {
			if strings.ContainsAny(s, " \t\n\"'") {
				return nil, false
			}
		}
		out = append(out, "update JobId="+id+" "+strings.Join(a, " "))
	}
	if ch.Update.ResetPriority {
		out = append(out, "release "+id)
	}
	return out, true
}

// jobError is scontrol's error line for one job: "<what> for job <id>".
var jobError = regexp.MustCompile(`^(.*) for job (\d+)\s*$`)

// sendBatch runs one scontrol with lines on its standard input and sets
// errs[idx[k]] for each change that failed. scontrol names the job in
// each error it reports for one ("Job has already finished for job 12");
// an error line that names none fails every change of the batch, so the
// next round sends them again (updates are idempotent).
func (c *CLI) sendBatch(ctx context.Context, lines []string, idx []int, changes []Change, errs []error) {
	// 50 ms more per update: slurmctld served each in about 3 ms with
	// 10,000 jobs pending (scripts/bench-scale), but it may be busy; a
	// batch cut short is sent again next round.
	ctx, cancel := context.WithTimeout(ctx, c.timeout()+time.Duration(len(lines))*50*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scontrol")
	cmd.Env = append(cmd.Environ(), c.Env...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var errb bytes.Buffer
	cmd.Stderr = &errb // stdout echoes the commands
	runErr := cmd.Run()
	c.wrote()
	byJob := map[uint32]string{}
	var other []string
	for _, l := range strings.Split(errb.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if m := jobError.FindStringSubmatch(l); m != nil {
			if id, err := strconv.ParseUint(m[2], 10, 32); err == nil {
				byJob[uint32(id)] = m[1]
				continue
			}
		}
		other = append(other, l)
	}
	var all error
	switch {
	case len(other) > 0:
		all = fmt.Errorf("scontrol (a batch of %d updates): %s", len(idx), strings.Join(other, "; "))
	case runErr != nil && len(byJob) == 0:
		all = fmt.Errorf("scontrol (a batch of %d updates): %w", len(idx), runErr)
	}
	for _, i := range idx {
		switch {
		case all != nil:
			errs[i] = all
		case byJob[changes[i].JobID] != "":
			errs[i] = errors.New(byJob[changes[i].JobID])
		}
	}
}
