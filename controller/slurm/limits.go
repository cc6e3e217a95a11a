package slurm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rota-hpc/rota/controller/limits"
)

// Limits reads the site's limits on typed GPUs from slurmdbd: every QOS,
// the associations of this cluster, and users' default accounts
// (sacctmgr -n -P; three short queries that slurmctld never sees). An
// error: no accounting, or slurmdbd unreachable.
func (c *CLI) Limits(ctx context.Context) (*limits.Set, error) {
	cluster, err := c.clusterName(ctx)
	if err != nil {
		return nil, err
	}
	qos, err := c.run(ctx, "sacctmgr", "-n", "-P", "show", "qos", "format=name,maxtrespu,maxtrespa,grptres,maxtres")
	if err != nil {
		if strings.Contains(err.Error(), "accounting_storage") {
			// "You are not running a supported accounting_storage plugin"
			return nil, ErrNoAccounting
		}
		return nil, err
	}
	assoc, err := c.run(ctx, "sacctmgr", "-n", "-P", "show", "assoc", "where", "cluster="+cluster,
		"format=account,user,parentname,defaultqos,grptres,maxtres")
	if err != nil {
		return nil, err
	}
	users, err := c.run(ctx, "sacctmgr", "-n", "-P", "show", "user", "format=user,defaultaccount")
	if err != nil {
		return nil, err
	}
	return ParseLimits(qos, assoc, users)
}

// ErrNoAccounting: the cluster keeps no accounting (no slurmdbd), so it
// has no limits to read.
var ErrNoAccounting = errors.New("no accounting (AccountingStorageType is not slurmdbd)")

// clusterName is slurmctld's ClusterName (scontrol show config).
func (c *CLI) clusterName(ctx context.Context) (string, error) {
	return c.configValue(ctx, "ClusterName")
}

// ParseLimits reads the three sacctmgr outputs Limits asks for.
func ParseLimits(qos, assoc, users []byte) (*limits.Set, error) {
	s := &limits.Set{QOS: map[string]limits.QOS{}, DefaultAccount: map[string]string{}}
	err := eachRow(qos, 5, "qos", func(f []string) error {
		q := limits.QOS{Name: f[0]}
		var err error
		for _, p := range []struct {
			dst *limits.PerType
			src string
		}{{&q.PerUser, f[1]}, {&q.PerAccount, f[2]}, {&q.Group, f[3]}, {&q.PerJob, f[4]}} {
			if *p.dst, err = limits.ParseTRES(p.src); err != nil {
				return fmt.Errorf("QOS %s: %w", f[0], err)
			}
		}
		s.QOS[q.Name] = q
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(assoc, 6, "association", func(f []string) error {
		a := limits.Assoc{Account: f[0], User: f[1], Parent: f[2], DefaultQOS: f[3]}
		var err error
		if a.Group, err = limits.ParseTRES(f[4]); err != nil {
			return fmt.Errorf("association %s/%s: %w", f[0], f[1], err)
		}
		if a.PerJob, err = limits.ParseTRES(f[5]); err != nil {
			return fmt.Errorf("association %s/%s: %w", f[0], f[1], err)
		}
		s.Assocs = append(s.Assocs, a)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(users, 2, "user", func(f []string) error {
		s.DefaultAccount[f[0]] = f[1]
		return nil
	})
	return s, err
}

// eachRow calls fn with the n '|'-separated fields of each non-empty line.
func eachRow(out []byte, n int, what string, fn func([]string) error) error {
	for i, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) < n {
			return fmt.Errorf("sacctmgr %s line %d: %d fields, want %d: %q", what, i+1, len(f), n, line)
		}
		if err := fn(f[:n]); err != nil {
			return err
		}
	}
	return nil
}

// Release is the running Slurm's major.minor release as two numbers
// (`scontrol --version`: "slurm 22.05.8", "slurm-wlm 24.11.5").
func (c *CLI) Release(ctx context.Context) (major, minor int, err error) {
	out, err := c.run(ctx, "scontrol", "--version")
	if err != nil {
		return 0, 0, err
	}
	return ParseRelease(string(out))
}

// ParseRelease reads `scontrol --version`.
func ParseRelease(s string) (major, minor int, err error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("scontrol --version: %q", strings.TrimSpace(s))
	}
	if _, err := fmt.Sscanf(f[len(f)-1], "%d.%d", &major, &minor); err != nil {
		return 0, 0, fmt.Errorf("scontrol --version: %q: %w", strings.TrimSpace(s), err)
	}
	return major, minor, nil
}
