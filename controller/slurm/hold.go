package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Hold keeps a pending job from starting (`scontrol hold`: priority 0,
// Reason JobHeldAdmin as root); it fails for a job that is no longer
// pending.
func (c *CLI) Hold(ctx context.Context, id uint32) error {
	_, err := c.run(ctx, "scontrol", "hold", strconv.FormatUint(uint64(id), 10))
	return err
}

// Unhold gives a held job back to the scheduler (`scontrol release`).
func (c *CLI) Unhold(ctx context.Context, id uint32) error {
	_, err := c.run(ctx, "scontrol", "release", strconv.FormatUint(uint64(id), 10))
	return err
}

// FindByComment is the job, in any state Slurm still knows, whose
// comment is exactly comment: how a copy submitted with --comment is
// found again after a crash between sbatch and recording its id.
func (c *CLI) FindByComment(ctx context.Context, comment string) (uint32, bool, error) {
	out, err := c.run(ctx, "squeue", "-h", "-t", "all", "-o", "%i|%k")
	if err != nil {
		return 0, false, err
	}
	return ParseComments(string(out), comment)
}

// ParseComments finds comment in `squeue -o "%i|%k"` output.
func ParseComments(out, comment string) (uint32, bool, error) {
	for _, line := range strings.Split(out, "\n") {
		id, k, ok := strings.Cut(strings.TrimSpace(line), "|")
		if !ok || k != comment {
			continue
		}
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return 0, false, fmt.Errorf("squeue printed job id %q", id)
		}
		return uint32(n), true, nil
	}
	return 0, false, nil
}
