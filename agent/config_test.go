package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	all := Defaults()
	all.Node, all.GPUType, all.Backend, all.SimGPUs = "gpu01", "a100", "sim", 8
	all.NATS, all.NATSNkeySeedFile, all.NATSTLSCA = "nats://ctl:4222", "/etc/rota/agent.nk", "/etc/rota/ca.pem"
	all.Interval, all.MetricsAddr, all.ProgressDir, all.ProcRoot = 1500*time.Millisecond, "", "/tmp/progress", "/tmp/proc"
	all.CheckpointSignal, all.Backlog, all.JobNodeFromEnviron, all.LogLevel = "USR2", 64, true, "debug"
	tests := []struct {
		name, in string
		want     Options // on success
		errs     []string
	}{
		{name: "empty", in: "", want: Defaults()},
		{name: "comments only", in: "# nothing\n\n   # here\n", want: Defaults()},
		{name: "every key", in: `# all of them
node = gpu01
gpu_type = a100
backend = sim
sim_gpus = 8
nats_url = nats://ctl:4222   # trailing comment
nats_nkey_seed_file = /etc/rota/agent.nk
nats_tls_ca = /etc/rota/ca.pem
interval = 1.5s
metrics_addr =
progress_dir = /tmp/progress
proc_root = /tmp/proc
checkpoint_signal = USR2
backlog = 64
job_node_from_environ = yes
Log_Level = debug
`, want: all},
		{name: "bare milliseconds", in: "interval = 250\n", want: func() Options { o := Defaults(); o.Interval = 250 * time.Millisecond; return o }()},
		{name: "unknown key", in: "node = a\ngpu_typ = v100\n", errs: []string{`x.conf:2: unknown key "gpu_typ"`}},
		{name: "bad duration", in: "\ninterval = soon\n", errs: []string{"x.conf:2: interval: want a duration like 50ms"}},
		{name: "duration too short", in: "interval = 10ms\n", errs: []string{"x.conf:1: interval: 10ms is outside [100ms, 1h0m0s]"}},
		{name: "bad bool", in: "job_node_from_environ = maybe\n", errs: []string{"x.conf:1: job_node_from_environ: want true or false"}},
		{name: "bad int", in: "sim_gpus = four\n", errs: []string{"x.conf:1: sim_gpus: want a whole number in [1, 64]"}},
		{name: "int out of range", in: "backlog = 0\n", errs: []string{"x.conf:1: backlog: want a whole number in [1, 1048576]"}},
		{name: "yaml", in: "node: gpu01\n", errs: []string{`x.conf:1: want key = value, got "node: gpu01"`}},
		{name: "duplicate", in: "node = a\nnode = b\n", errs: []string{"x.conf:2: node already set on line 1"}},
		{name: "every error at once", in: "# one\nnode: a\ninterval = 5\nsim_gpus = -1\ncolour = red\nbackend = sim\n", errs: []string{
			"x.conf:2: want key = value",
			"x.conf:3: interval: 5ms is outside",
			"x.conf:4: sim_gpus: want a whole number",
			`x.conf:5: unknown key "colour"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			err := Parse(strings.NewReader(tc.in), "x.conf", &o)
			if tc.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if o != tc.want {
					t.Fatalf("got  %+v\nwant %+v", o, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tc.errs) {
				t.Errorf("%d errors, want %d: %v", n, len(tc.errs), err)
			}
			if o != Defaults() {
				t.Errorf("a failed parse changed the options: %+v", o)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	o := Defaults()
	if err := LoadFile(write("good.conf", "gpu_type = v100\n"), &o); err != nil || o.GPUType != "v100" {
		t.Fatalf("good file: %v, gpu_type %q", err, o.GPUType)
	}

	// Missing, with nothing beside it: the caller decides.
	err := LoadFile(filepath.Join(dir, "none.conf"), &o)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}

	// Missing, with the old YAML beside it: never forgiven as missing.
	yaml := write("agent.yaml", "node: gpu01\nmetrics_addr: \":9410\"\n")
	conf := filepath.Join(dir, "agent.conf")
	err = LoadFile(conf, &o)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old yaml beside a missing conf: %v, want an error of its own", err)
	}
	for _, want := range []string{conf + " does not exist but " + yaml + " does", "not YAML", "one line per key", "node = gpu01"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("old yaml error %q lacks %q", err, want)
		}
	}
	if OldConfig(conf) != yaml || OldConfig(yaml) != "" || OldConfig(filepath.Join(dir, "good.conf")) != "" {
		t.Errorf("OldConfig: %q %q", OldConfig(conf), OldConfig(yaml))
	}

	// The YAML file named outright: its parse errors say why.
	err = LoadFile(yaml, &o)
	if err == nil || !strings.Contains(err.Error(), yaml+":1: want key = value") || !strings.Contains(err.Error(), "not YAML") {
		t.Fatalf("yaml file: %v", err)
	}
}

// The annotated example the packages install loads, commented-out keys
// included, and passes Validate.
func TestContribAgentConf(t *testing.T) {
	b, err := os.ReadFile("../contrib/agent.conf")
	if err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	if err := Parse(strings.NewReader(string(b)), "agent.conf", &o); err != nil {
		t.Fatal(err)
	}
	if o != Defaults() {
		t.Errorf("contrib/agent.conf sets other values than the defaults:\n%+v\n%+v", o, Defaults())
	}
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
	var on []string
	for _, l := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(strings.TrimPrefix(l, "#"), " = "); ok && strings.HasPrefix(l, "#") && !strings.Contains(k, " ") {
			l = l[1:]
		}
		on = append(on, l)
	}
	o = Defaults()
	if err := Parse(strings.NewReader(strings.Join(on, "\n")), "agent.conf", &o); err != nil {
		t.Fatalf("with every key on: %v", err)
	}
	if o.GPUType == "" || o.NATSNkeySeedFile == "" {
		t.Errorf("commented-out keys not read: %+v", o)
	}
}

// FuzzParse: no input makes the parser (or Validate after it) panic, and a
// failed parse leaves the options alone.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../contrib/agent.conf"); err == nil {
		f.Add(string(b))
	}
	for _, s := range []string{
		"", "node = gpu01\n", "interval = 250\nbacklog = 9\n", "node: gpu01\n", "=\n", " = x", "#\n=#=\n",
		"interval = 1e9h\n", "interval = -5s\n", "sim_gpus = 99999999999999999999\n", "node = a\nnode = b\n",
		"job_node_from_environ = ON\r\n", "\x00 = \xff\n", strings.Repeat("a", 70000) + " = 1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		o := Defaults()
		if err := Parse(strings.NewReader(in), "fuzz.conf", &o); err != nil {
			if o != Defaults() {
				t.Fatalf("a failed parse changed the options: %+v", o)
			}
			return
		}
		_ = o.Validate()
	})
}
