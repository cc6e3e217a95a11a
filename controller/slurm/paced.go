package slurm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Change is one job's update in a round's apply.
type Change struct {
	JobID  uint32
	Update JobUpdate
}

// PacedUpdater sends a round's updates one at a time through one client
// and calls gap after each, so the caller can leave slurmctld free
// between them. A burst of updates, even of RPCs that take no job lock,
// keeps a user's sbatch waiting for most of the burst; the same updates
// spread one by one cost it a few milliseconds (docs/rounds.md, "Pacing
// the apply").
type PacedUpdater interface {
	// UpdatePaced sends changes in order, calling gap after each change
	// it sent but the last; when gap returns false the rest are not sent
	// (their errs say so). errs[i] is changes[i]'s outcome (nil: applied).
	UpdatePaced(ctx context.Context, changes []Change, gap func() bool) (errs []error)
}

// markPrefix names the marker line after each update: `show hostnames
// M` runs in scontrol itself (no RPC) and prints M, so a line naming M
// means the update before it is done. scontrol reads its commands
// through readline, which echoes each ("scontrol: <line>") and flushes
// its output as it reads the next: the marker's echo is the first sign.
// Where no readline echoes, stdbuf makes M's own output line-buffered.
const markPrefix = "rota-mark-"

// maxStreamStarts bounds the scontrol processes one call starts: a
// process that dies or stops answering costs the update in flight, and
// the rest go through a new one.
const maxStreamStarts = 4

// errNotSent is the outcome of a change left unsent when gap stopped.
var errNotSent = errors.New("not sent: the round's apply was stopped")

// notSent sets errs to why they were not sent: ctx's end, or the gap's.
func notSent(ctx context.Context, errs []error) {
	why := errNotSent
	if err := ctx.Err(); err != nil {
		why = err
	}
	for j := range errs {
		errs[j] = why
	}
}

// UpdateOneByOne sends changes through update, one at a time, calling
// gap between them as a PacedUpdater does: for a client whose every
// update is its own request (Restd), or a Scheduler with no
// PacedUpdater of its own.
func UpdateOneByOne(ctx context.Context, update func(context.Context, uint32, JobUpdate) error, changes []Change, gap func() bool) []error {
	errs := make([]error, len(changes))
	for i, ch := range changes {
		errs[i] = update(ctx, ch.JobID, ch.Update)
		if i < len(changes)-1 && !gap() {
			notSent(ctx, errs[i+1:])
			break
		}
	}
	return errs
}

// UpdatePaced implements PacedUpdater with one scontrol process reading
// commands from its standard input, one update at a time.
func (c *CLI) UpdatePaced(ctx context.Context, changes []Change, gap func() bool) []error {
	errs := make([]error, len(changes))
	if len(changes) == 0 {
		return errs // a round that changes nothing writes nothing
	}
	// The whole apply is one write for the shared reads (shared.go): a
	// read from before it is not reused, nor one made during it after it;
	// between, readers share as they do between any writes. Counted per
	// update, every reader's tick that fell in a round's apply read the
	// whole queue again on its own, each a pack of every job under
	// slurmctld's job lock that users' submissions wait for.
	c.wrote()
	defer c.wrote()
	var s *stream
	defer func() { s.close() }()
	starts := 0
	for i, ch := range changes {
		cmds, ok := cmdLines(ch)
		switch {
		case !ok: // a value scontrol's line reader could split
			errs[i] = c.Update(ctx, ch.JobID, ch.Update)
		case len(cmds) == 0:
			continue
		default:
			if s == nil {
				if starts == maxStreamStarts {
					errs[i] = fmt.Errorf("scontrol: %d processes stopped answering in this round; the rest wait for the next", starts)
					continue
				}
				starts++
				var err error
				if s, err = c.startStream(ctx); err != nil {
					errs[i] = err
					continue
				}
			}
			var broken error
			errs[i], broken = s.send(ctx, ch.JobID, cmds, c.timeout())
			if broken != nil {
				errs[i] = broken
				s.close()
				s = nil
			}
		}
		if i < len(changes)-1 && !gap() {
			notSent(ctx, errs[i+1:])
			break
		}
	}
	return errs
}

// stream is one scontrol process taking updates on its standard input;
// lines carries its standard output and error, merged so that an
// update's error comes before the marker that follows it.
type stream struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *os.File // the read end of lines' pipe
	lines chan string
	seq   int
}

func (c *CLI) startStream(ctx context.Context) (*stream, error) {
	name, args := "scontrol", []string(nil)
	if p, err := exec.LookPath("stdbuf"); err == nil {
		name, args = p, []string{"-oL", "scontrol"}
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(cmd.Environ(), c.Env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("scontrol: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("scontrol: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("scontrol: %w", err)
	}
	w.Close() // the child holds its own copy
	s := &stream{cmd: cmd, in: in, out: r, lines: make(chan string, 64)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	return s, nil
}

// send writes one job's commands and its marker, and waits for the
// marker. err is the job's own error (what scontrol printed for it);
// broken, that the process is of no further use (it exited, stopped
// answering within timeout, or ctx ended).
func (s *stream) send(ctx context.Context, jobID uint32, cmds []string, timeout time.Duration) (err, broken error) {
	s.seq++
	mark := markPrefix + strconv.Itoa(s.seq)
	markCmd := "show hostnames " + mark
	if _, werr := io.WriteString(s.in, strings.Join(cmds, "\n")+"\n"+markCmd+"\n"); werr != nil {
		return nil, fmt.Errorf("scontrol: %w", werr)
	}
	echo := map[string]bool{"scontrol: " + markCmd: true}
	for _, c := range cmds {
		echo["scontrol: "+c] = true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var said []string
	for {
		select {
		case l, ok := <-s.lines:
			switch {
			case !ok:
				return nil, fmt.Errorf("scontrol exited during the update of job %d: %s", jobID, strings.Join(said, "; "))
			case l == mark || l == "scontrol: "+markCmd:
				return jobErr(jobID, said), nil
			case echo[l] || strings.HasPrefix(l, markPrefix) || strings.TrimSpace(l) == "":
				// an echo, or an earlier marker's own output
			default:
				said = append(said, strings.TrimSpace(l))
			}
		case <-t.C:
			return nil, fmt.Errorf("scontrol did not finish the update of job %d within %s", jobID, timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// jobErr is what scontrol said during one job's update as its error:
// "<what> for job <id>" reads as <what>; nil when it said nothing.
func jobErr(jobID uint32, said []string) error {
	if len(said) == 0 {
		return nil
	}
	if len(said) == 1 {
		if m := jobError.FindStringSubmatch(said[0]); m != nil && m[2] == strconv.FormatUint(uint64(jobID), 10) {
			return errors.New(m[1])
		}
	}
	return fmt.Errorf("scontrol (update of job %d): %s", jobID, strings.Join(said, "; "))
}

// close ends the process: end of input, then a kill if it lingers.
func (s *stream) close() {
	if s == nil {
		return
	}
	drained := make(chan struct{})
	go func() {
		for range s.lines { // so the process never blocks writing
		}
		close(drained)
	}()
	s.in.Close()
	exited := make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		s.cmd.Process.Kill()
		<-exited
	}
	s.out.Close() // ends the reader, even where a child holds the pipe open
	<-drained
}

// cmdLines is change ch as scontrol commands ("update JobId=... ",
// "release ..."); false when a value holds a blank or a quote, which
// scontrol's command reader would take apart.
func cmdLines(ch Change) ([]string, bool) {
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
