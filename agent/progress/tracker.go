package progress

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rota-hpc/rota/wire"
)

// FileName is the per-job file inside <progress_dir>/<jobid>/.
const FileName = "progress"

// ReadyName is the file a service replica creates in the same directory
// ($ROTA_READY_FILE) once it answers requests: its content does not
// matter, and removing it says the replica is no longer ready.
const ReadyName = "ready"

// Path is where job's progress file lives under dir.
func Path(dir string, job uint32) string {
	return filepath.Join(dir, strconv.FormatUint(uint64(job), 10), FileName)
}

// Tracker follows every job's progress file under Dir.
type Tracker struct {
	Dir string
	// Tau is the smoothing time constant (default 30 s): a new rate counts
	// for 1-exp(-dt/Tau) of the smoothed one.
	Tau time.Duration
	// StaleAfter drops a job whose file has not changed for this long
	// (default 15 min).
	StaleAfter time.Duration

	mu   sync.Mutex
	jobs map[uint32]*jobState
}

type jobState struct {
	last     Reading
	at       time.Time // when last.Step was reached
	changed  time.Time // when the file last changed (mtime)
	mtime    time.Time
	size     int64
	rate     float64
	haveRate bool
	problem  string
	// reset: the job moved here (Reset); stale: the baseline read since
	// was written by the run before (staleBaseline).
	reset bool
	stale bool
}

// staleBaseline: a first reading, after a job moved here (Reset), written
// longer than this before the tracker read it is the previous run's (the
// file the job's last run, on another node, left, read before the new run
// first writes it), so it is no baseline: a rate from it would span the checkpoint,
// the requeue and the restart. Seen in scripts/trace-replay: jobs moved
// to a V100 measured 66 steps/s there against 186 on their K80, and were
// moved back. Its next change is the baseline instead.
const staleBaseline = 2 * time.Second

// Reset forgets a job's rate: its next readings start a new baseline. For
// a job that moved here from another node (the file is shared, the GPU type
// is not), whose rate so far was measured elsewhere.
func (t *Tracker) Reset(job uint32) {
	t.mu.Lock()
	if t.jobs != nil {
		t.jobs[job] = &jobState{reset: true}
	}
	t.mu.Unlock()
}

// Scan reads every job's file (skipping files unchanged since the last
// scan) and returns each live job's progress.
func (t *Tracker) Scan(now time.Time) (map[uint32]wire.JobProgress, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jobs == nil {
		t.jobs = map[uint32]*jobState{}
	}
	entries, err := os.ReadDir(t.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing the progress directory %s: %w", t.Dir, err)
	}
	stale := t.StaleAfter
	if stale <= 0 {
		stale = 15 * time.Minute
	}
	seen := map[uint32]bool{}
	out := map[uint32]wire.JobProgress{}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || id == 0 || !e.IsDir() {
			continue
		}
		job := uint32(id)
		ready := isReady(filepath.Join(t.Dir, e.Name(), ReadyName))
		st := t.update(job, now)
		if st == nil || now.Sub(st.mtime) > stale {
			if ready {
				// A service that counts no steps: its readiness alone,
				// which does not go stale while the file is there.
				out[job] = wire.JobProgress{Ready: true}
			}
			continue
		}
		seen[job] = true
		p := st.report(now)
		p.Ready = ready
		out[job] = p
	}
	for job := range t.jobs {
		if !seen[job] {
			delete(t.jobs, job)
		}
	}
	return out, nil
}

// Latest returns job's last reading straight from its file, for the
// checkpoint acknowledgement.
func (t *Tracker) Latest(job uint32) (Reading, error) {
	data, _, err := readFile(Path(t.Dir, job))
	if err != nil {
		return Reading{}, err
	}
	return Parse(data)
}

// update rereads job's file if it changed and returns its state, or nil
// when it has no usable file.
func (t *Tracker) update(job uint32, now time.Time) *jobState {
	st := t.jobs[job]
	path := Path(t.Dir, job)
	fi, err := os.Lstat(path)
	if err != nil {
		if st != nil {
			st.problem = "progress file gone"
		}
		return nil
	}
	if st != nil && fi.ModTime().Equal(st.mtime) && fi.Size() == st.size {
		return st
	}
	if st == nil {
		st = &jobState{}
		t.jobs[job] = st
	}
	st.mtime, st.size = fi.ModTime(), fi.Size()
	data, mtime, err := readFile(path)
	if err != nil {
		st.problem = err.Error()
		return st
	}
	r, err := Parse(data)
	if err != nil {
		st.problem = fmt.Sprintf("unreadable progress file: %v", err)
		if st.at.IsZero() {
			st.changed = mtime
		}
		return st
	}
	st.problem = ""
	at := r.Time
	if at.IsZero() {
		at = mtime
	}
	st.observe(r, at, now, t.tau())
	return st
}

func (t *Tracker) tau() time.Duration {
	if t.Tau <= 0 {
		return 30 * time.Second
	}
	return t.Tau
}

// observe folds one reading taken at time at, read at now, into the
// smoothed rate.
func (st *jobState) observe(r Reading, at, now time.Time, tau time.Duration) {
	prev := st.last
	switch {
	case st.at.IsZero():
		// First reading: a baseline, no rate yet; none at all if the run
		// before wrote it.
		st.stale = st.reset && at.Before(now.Add(-staleBaseline))
	case st.stale && r.Step != prev.Step:
		// The first reading of this run: the baseline.
		st.stale = false
	case r.Step < prev.Step:
		// The job restarted (requeued from a checkpoint): new baseline,
		// keep the rate, which belongs to this GPU type.
	case r.Step > prev.Step:
		dt := at.Sub(st.at).Seconds()
		if dt <= 0 {
			// Same timestamp: wait for a later reading to measure.
			st.last.Ckpt, st.last.HasCk, st.last.Total = r.Ckpt, r.HasCk, r.Total
			return
		}
		inst := float64(r.Step-prev.Step) / dt
		if !st.haveRate {
			st.rate, st.haveRate = inst, true
		} else {
			alpha := 1 - math.Exp(-dt/tau.Seconds())
			st.rate += alpha * (inst - st.rate)
		}
	default:
		// Same step: nothing to measure; the time of progress stays.
		st.last.Ckpt, st.last.HasCk, st.last.Total = r.Ckpt, r.HasCk, r.Total
		return
	}
	st.last, st.at, st.changed = r, at, at
}

func (st *jobState) report(now time.Time) wire.JobProgress {
	p := wire.JobProgress{
		Step:        st.last.Step,
		Total:       st.last.Total,
		Ckpt:        st.last.Ckpt,
		StepsPerSec: st.rate,
		Problem:     st.problem,
	}
	if !st.changed.IsZero() {
		p.AgeSeconds = math.Max(0, now.Sub(st.changed).Seconds())
	}
	return p
}

// isReady says whether path is a regular file (not a symlink a job could
// point anywhere).
func isReady(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular()
}

// readFile opens without following a symlink and without blocking on a
// FIFO (a job owns its directory and could put either there), checks for a
// regular file, and reads at most MaxFileBytes.
func readFile(path string) ([]byte, time.Time, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("opening progress file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("progress file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, time.Time{}, fmt.Errorf("progress file is not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("reading progress file: %w", err)
	}
	return data, fi.ModTime(), nil
}
