package slurm

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/conf"
)

// TestConfig: the backend's keys, what Check refuses, and the client New
// builds of them.
func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ conf, err string }{
		{"", ""},
		{"slurm_backend = cli", ""},
		{"slurm_backend = restd\nslurmrestd_url = http://127.0.0.1:6820\nslurmrestd_jwt_key = /etc/slurm/jwt.key", ""},
		{"slurm_backend = restd\nslurmrestd_url = unix:/run/slurmrestd.sock\nslurmrestd_token_file = /run/rota/token\nslurmrestd_version = v0.0.38", ""},
		{"slurm_backend = restd\nslurmrestd_url = http://h:1\nslurmrestd_jwt_key = /k\nslurmrestd_queue_read = squeue", ""},
		{"slurm_backend = restd\nslurmrestd_url = http://h:1\nslurmrestd_jwt_key = /k\nslurmrestd_queue_read = sinfo", "want restd or squeue"},
		{"slurm_backend = rest", "want cli or restd"},
		{"slurm_backend = restd\nslurmrestd_jwt_key = /k", "needs slurmrestd_url"},
		{"slurm_backend = restd\nslurmrestd_url = 127.0.0.1:6820\nslurmrestd_jwt_key = /k", "want http://"},
		{"slurm_backend = restd\nslurmrestd_url = http://h:1", "exactly one of"},
		{"slurm_backend = restd\nslurmrestd_url = http://h:1\nslurmrestd_jwt_key = /k\nslurmrestd_token_file = /t", "exactly one of"},
		{"slurm_backend = restd\nslurmrestd_url = http://h:1\nslurmrestd_jwt_key = /k\nslurmrestd_version = v0.0.12", "want one of"},
	} {
		v, err := conf.Parse(strings.NewReader(tc.conf+"\n"), "controller.conf")
		if err != nil {
			t.Fatal(err)
		}
		var c Config
		c.Read(v)
		if err = v.Err(); err == nil {
			err = c.Check()
		}
		if tc.err == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.conf, err)
				continue
			}
			cl := New(c, zerolog.Nop())
			_, isRestd := cl.(*Restd)
			if isRestd != (c.Backend == "restd") {
				t.Errorf("%q: built %T", tc.conf, cl)
			}
			if _, ok := cl.(Scheduler); !ok {
				t.Errorf("%q: %T is no Scheduler", tc.conf, cl)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: want an error with %q, got %v", tc.conf, tc.err, err)
		}
	}
}
