package slurm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// saveEvery is how often slurmctld saves its job state while jobs change:
// at most once per SAVE_MAX_WAIT (5 s, state_save.c, 22.05 to 26.05),
// counted from one save's start to the next's.
const saveEvery = 5 * time.Second

// StateSaves tells when slurmctld's next job state save is due, from the
// time its last one was written (the mtime of <StateSaveLocation>/job_state),
// so that a round's apply can leave it alone. Each save packs every job
// under slurmctld's job lock (dump_all_job_state), about 0.1 s at 11,000
// jobs; a user's submission that comes while Rota's updates queue behind
// such a save waited 20 to 60 ms longer than one with no updates around
// (docs/rounds.md, "Slurm's state saves"). It needs the directory
// slurmctld writes, so the controller on slurmctld's host.
type StateSaves struct {
	path string
	// Lead is how long before the next save may start the apply holds:
	// the save starts saveEvery after the last one started, which was its
	// duration (pack and write) before its file's mtime.
	Lead time.Duration
	// Late bounds the hold past the due time: slurmctld starts a due save
	// at the next change, or within a second without one.
	Late time.Duration
	stat func(string) (os.FileInfo, error)
}

// NewStateSaves watches the job state file in dir, slurmctld's
// StateSaveLocation.
func NewStateSaves(dir string) *StateSaves {
	return &StateSaves{path: filepath.Join(dir, "job_state"), Lead: 300 * time.Millisecond, Late: 1200 * time.Millisecond, stat: os.Stat}
}

// Check says whether the state file can be read here: an error names
// why not (the controller on another host, or without the rights). A
// file not written yet, in a directory that is there, can be: a new
// slurmctld writes its first save once a job comes.
func (s *StateSaves) Check() error {
	_, err := s.stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		if fi, derr := s.stat(filepath.Dir(s.path)); derr == nil && fi.IsDir() {
			return nil
		}
	}
	return err
}

// Hold is how long, from now, an update should wait so that it does not
// meet slurmctld's next job state save: 0 outside [due-Lead, due+Late),
// where due is saveEvery after the last save was written, and also once
// that save is written (the file's mtime moves on, and with it the next
// due). The caller asks again after waiting: the answer follows the file.
// An unreadable file holds nothing.
func (s *StateSaves) Hold(now time.Time) time.Duration {
	fi, err := s.stat(s.path)
	if err != nil {
		return 0
	}
	due := fi.ModTime().Add(saveEvery)
	if now.Before(due.Add(-s.Lead)) || !now.Before(due.Add(s.Late)) {
		return 0
	}
	return due.Add(s.Late).Sub(now)
}

// StateSaveDir is slurmctld's StateSaveLocation (scontrol show config).
func (c *CLI) StateSaveDir(ctx context.Context) (string, error) {
	return c.configValue(ctx, "StateSaveLocation")
}

// configValue is one key of `scontrol show config` (read once: these
// keys never change while slurmctld runs).
func (c *CLI) configValue(ctx context.Context, key string) (string, error) {
	conf, _ := c.config.Load().(map[string]string)
	if conf == nil {
		out, err := c.run(ctx, "scontrol", "show", "config")
		if err != nil {
			return "", err
		}
		conf = map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				conf[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		c.config.Store(conf)
	}
	v, ok := conf[key]
	if !ok || v == "" {
		return "", fmt.Errorf("scontrol show config: no %s", key)
	}
	return v, nil
}
