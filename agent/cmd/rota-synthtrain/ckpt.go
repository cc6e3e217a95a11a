package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// ckptFile is what the program saves: the step it reached, and enough
// about the job to refuse a checkpoint that belongs to another one.
type ckptFile struct {
	V     int     `json:"v"`
	Job   string  `json:"job"`
	Model string  `json:"model"`
	Total uint64  `json:"total"`
	Step  uint64  `json:"step"`
	GPU   string  `json:"gpu"` // type it was written on (informational)
	T     float64 `json:"t"`
	// CRC covers the fields that decide where training resumes, so a
	// damaged digit in step is caught, not resumed from.
	CRC uint32 `json:"crc"`
}

const checkpointVersion = 1

func (c ckptFile) sum() uint32 {
	return crc32.ChecksumIEEE(fmt.Appendf(nil, "%d|%s|%s|%d|%d", c.V, c.Job, c.Model, c.Total, c.Step))
}

// errNoCheckpoint: the job has not saved one yet (a fresh start).
var errNoCheckpoint = errors.New("no checkpoint")

// readCheckpoint loads path and checks it is sound and this job's. Anything
// wrong is an error: resuming from a wrong step would fake the progress the
// demonstration measures.
func readCheckpoint(path, job, model string, total uint64) (ckptFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ckptFile{}, errNoCheckpoint
	}
	if err != nil {
		return ckptFile{}, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	var c ckptFile
	if err := json.Unmarshal(data, &c); err != nil {
		return ckptFile{}, fmt.Errorf("checkpoint %s is corrupt (%v); remove it to start over", path, err)
	}
	switch {
	case c.V != checkpointVersion:
		return ckptFile{}, fmt.Errorf("checkpoint %s: version %d, want %d", path, c.V, checkpointVersion)
	case c.CRC != c.sum():
		return ckptFile{}, fmt.Errorf("checkpoint %s is corrupt (checksum %08x, content gives %08x); remove it to start over", path, c.CRC, c.sum())
	case c.Job != job:
		return ckptFile{}, fmt.Errorf("checkpoint %s belongs to job %q, not %q", path, c.Job, job)
	case c.Model != model || c.Total != total:
		return ckptFile{}, fmt.Errorf("checkpoint %s is for %q with %d steps, not %q with %d (a stale checkpoint from an earlier run with the same job id? use a fresh --ckpt-dir)",
			path, c.Model, c.Total, model, total)
	case c.Step > c.Total:
		return ckptFile{}, fmt.Errorf("checkpoint %s: step %d beyond the total %d", path, c.Step, c.Total)
	}
	return c, nil
}

// writeCheckpoint saves c durably: temporary file, fsync, rename, fsync of
// the directory. A crash at any point leaves either the old checkpoint or
// the new one, never a torn file.
func writeCheckpoint(path string, c ckptFile) error {
	c.V = checkpointVersion
	c.CRC = c.sum()
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint %s: sync directory: %w", path, err)
	}
	return nil
}
