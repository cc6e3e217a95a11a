package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// rota runs one command line as main would, and returns what it wrote and
// its exit status.
func rota(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// commands is every command of the tree, root first, each with the
// arguments that name it (nil for rota itself).
func commands(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	all := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		all[c.CommandPath()] = c
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(io.Discard, io.Discard))
	return all
}

func pathArgs(path string) []string { return strings.Fields(path)[1:] }

// visibleFlags are the flags a command's help must list.
func visibleFlags(c *cobra.Command) []*pflag.Flag {
	var fl []*pflag.Flag
	for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				fl = append(fl, f)
			}
		})
	}
	return fl
}

// Every command, nested ones included, answers -h and --help with its
// usage and every flag it takes, on stdout, and exits 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	all := commands(t)
	for _, want := range []string{"rota", "rota status", "rota explain", "rota estimate", "rota sim", "rota solve",
		"rota queuewait", "rota queuewait train", "rota queuewait eval", "rota completion", "rota completion bash", "rota completion zsh", "rota help"} {
		if all[want] == nil {
			t.Errorf("no command %q in the tree", want)
		}
	}
	for path, c := range all {
		// Read before the parallel subtests: cobra merges a command's
		// flag sets lazily, writing as it reads (go test -race).
		flags := visibleFlags(c)
		for _, h := range []string{"-h", "--help"} {
			t.Run(strings.ReplaceAll(path, " ", "_")+h, func(t *testing.T) {
				t.Parallel()
				stdout, stderr, code := rota(t, append(pathArgs(path), h)...)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				if strings.Contains(stdout, "help requested") || !strings.Contains(stdout, "Usage:\n  "+path) {
					t.Errorf("no usage of %s in\n%s", path, stdout)
				}
				for _, f := range flags {
					if !strings.Contains(stdout, "--"+f.Name+" ") && !strings.Contains(stdout, "--"+f.Name+"\n") {
						t.Errorf("help lacks --%s:\n%s", f.Name, stdout)
					}
					if f.Usage == "" {
						t.Errorf("--%s has no description", f.Name)
					}
				}
				if c.Short == "" {
					t.Errorf("%s has no summary", path)
				}
			})
		}
	}
}

// rota alone, an unknown command and a wrong flag are usage errors (2);
// rota help is not.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{nil, 2, "", "Usage:\n  rota [flags]\n  rota [command]"},
		{[]string{"help"}, 0, "Available Commands:", ""},
		{[]string{"help", "sim"}, 0, "Usage:\n  rota sim [flags]", ""},
		{[]string{"stauts"}, 2, "", `rota: unknown command "stauts"; did you mean status?`},
		{[]string{"sim", "--bogus"}, 2, "", "rota sim: unknown flag: --bogus\nRun 'rota sim --help' for usage.\n"},
		{[]string{"sim", "extra"}, 2, "", `rota sim: unknown command "extra" for "rota sim"`},
		{[]string{"solve", "--repeat", "0"}, 2, "", "rota solve: --repeat must be >= 1"},
		{[]string{"explain", "x"}, 2, "", `rota explain: "x" is not a job id`},
		{[]string{"explain"}, 2, "", "rota explain: accepts 1 arg(s), received 0"},
		{[]string{"status", "--timeout", "soon"}, 2, "", `invalid argument "soon" for "--timeout"`},
		{[]string{"estimate", "--throughput", "v100:x"}, 2, "", "rota estimate: "},
		{[]string{"estimate"}, 2, "", "rota estimate: the job asks for no GPUs"},
	} {
		stdout, stderr, code := rota(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("rota %v: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout with %q, stderr with %q", tc.args, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}

// A flag name takes one type of value everywhere (one or several), and is
// spelled in lower-case words joined by hyphens.
func TestFlagSpellings(t *testing.T) {
	t.Parallel()
	spelling := regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	// Names whose meaning depends on the command, as a reader of that
	// command expects: status --jobs lists the jobs, solve --jobs is how
	// many to draw; estimate --nodes is the job's.
	differ := map[string]bool{"jobs": true, "nodes": true}
	typ := map[string]string{}
	where := map[string]string{}
	for path, c := range commands(t) {
		for _, f := range visibleFlags(c) {
			if !spelling.MatchString(f.Name) {
				t.Errorf("%s --%s: want lower-case words joined by hyphens", path, f.Name)
			}
			ty := strings.TrimSuffix(strings.TrimSuffix(f.Value.Type(), "Slice"), "Array")
			if prev, ok := typ[f.Name]; ok && prev != ty && !differ[f.Name] {
				t.Errorf("--%s takes a %s in %s but a %s in %s", f.Name, ty, path, prev, where[f.Name])
			}
			typ[f.Name], where[f.Name] = ty, path
		}
	}
	// What the controller-facing commands share, they spell alike.
	for _, path := range []string{"rota status", "rota explain", "rota estimate"} {
		c := commands(t)[path]
		for _, name := range []string{"nats", "nkey-seed", "tls-ca", "timeout", "json"} {
			if c.Flags().Lookup(name) == nil {
				t.Errorf("%s has no --%s", path, name)
			}
		}
	}
}

// The old spellings still work, say they are old, and are not in the help.
func TestOldSpellings(t *testing.T) {
	t.Parallel()
	table := filepath.Join("..", "..", "..", "contrib", "gavel", throughputTableName)
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	stdout, stderr, code := rota(t, "sim", "--static", "3", "--throughputs", table, "--cpuprofile", prof, "--json")
	if code != 0 {
		t.Fatalf("sim with old spellings: exit %d: %s", code, stderr)
	}
	for _, w := range []string{"--throughputs is an old spelling of --throughput-table", "--cpuprofile is an old spelling of --cpu-profile"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q lacks %q", stderr, w)
		}
	}
	var rep struct {
		JobsMeasured int `json:"jobs_measured"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.JobsMeasured != 3 {
		t.Errorf("sim --json: %v, %d jobs measured in %s", err, rep.JobsMeasured, stdout)
	}
	if st, err := os.Stat(prof); err != nil || st.Size() == 0 {
		t.Errorf("--cpuprofile wrote no profile: %v", err)
	}
	help, _, _ := rota(t, "sim", "--help")
	if strings.Contains(help, "--throughputs") || strings.Contains(help, "--cpuprofile") {
		t.Errorf("sim --help shows the old spellings:\n%s", help)
	}
}

// rota sim on a cluster with MIG slices and space sharing: slices are
// derived from their whole GPU (itself derived from a measured type, as the
// user says), each derivation is said, and pairs share GPUs.
func TestSimSlicesAndSharing(t *testing.T) {
	t.Parallel()
	table := filepath.Join("..", "..", "..", "contrib", "gavel", throughputTableName)
	stdout, stderr, code := rota(t, "sim", "--static", "40", "--throughput-table", table, "--cluster", "v100=4,a100_3g.20gb=4,a100_1g.5gb=4",
		"--derive-type", "a100=v100*2", "--space-sharing", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "a100_3g.20gb not measured in the table; its rates are v100 x 2 (given) x 3/7") {
		t.Errorf("stderr does not say how the slice's rates were made: %q", stderr)
	}
	var rep struct {
		JobsMeasured int       `json:"jobs_measured"`
		Utilisation  []float64 `json:"utilisation"`
		Shared       float64   `json:"shared_gpu_hours"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.JobsMeasured != 40 || len(rep.Utilisation) != 3 || rep.Utilisation[1] == 0 || rep.Shared == 0 {
		t.Errorf("sim --json: %v, %+v", err, rep)
	}
	for _, bad := range [][]string{{"sim", "--derive-type", "a100=v100"}, {"sim", "--derive-type", "a100=v100*-1"},
		{"sim", "--cluster", "v100=4,a100=4"}, {"sim", "--space-sharing", "--policy", "makespan"}} {
		if _, stderr, code := rota(t, append(bad, "--static", "2", "--throughput-table", table)...); code == 0 {
			t.Errorf("%v accepted: %s", bad, stderr)
		}
	}
}

// The man pages come from the same tree: one per visible command, each
// with its flags, and groff reads them without a warning.
func TestManPages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr, code := rota(t, "gen-man", "--dir", dir)
	if code != 0 || stdout != "" {
		t.Fatalf("gen-man: exit %d, %s %s", code, stdout, stderr)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	want := 0
	for path, c := range commands(t) {
		if !c.IsAvailableCommand() && c.HasParent() {
			continue
		}
		want++
		name := strings.ReplaceAll(path, " ", "-") + ".1"
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no page for %s: %v", path, err)
			continue
		}
		// Descriptions go through markdown: "[x] (y)" would become a link.
		if bytes.Contains(b, []byte(`\[la]`)) {
			t.Errorf("%s has a markdown link (a description with \"[...] (...)\"?):\n%s", name, b)
		}
		for _, f := range visibleFlags(c) {
			if !bytes.Contains(b, []byte(`\fB--`+f.Name+`\fP`)) {
				t.Errorf("%s lacks --%s", name, f.Name)
			}
		}
		if _, err := exec.LookPath("groff"); err == nil {
			cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", filepath.Join(dir, name))
			if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("groff %s: %v\n%s", name, err, out)
			}
		}
	}
	if len(pages) != want {
		t.Errorf("%d pages, want %d: %v", len(pages), want, pages)
	}
	if _, err := os.Stat(filepath.Join(dir, "rota-gen-man.1")); err == nil {
		t.Errorf("a page for the hidden gen-man")
	}
	if _, _, code := rota(t, "gen-man"); code != 2 {
		t.Errorf("gen-man without --dir: exit %d, want 2", code)
	}
}

// The completion scripts generate, parse in their shells where present,
// and complete from the tree (through `rota __complete`, which they call).
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "complete -o default -F __start_rota rota", "zsh": "#compdef rota"} {
		stdout, stderr, code := rota(t, "completion", shell)
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("completion %s: exit %d, %s; lacks %q", shell, code, stderr, want)
			continue
		}
		if _, err := exec.LookPath(shell); err == nil {
			cmd := exec.Command(shell, "-n")
			cmd.Stdin = strings.NewReader(stdout)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n on the completion script: %v\n%s", shell, err, out)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"status", "explain", "estimate", "sim", "solve", "queuewait", "completion"}},
		{[]string{"queuewait", ""}, []string{"train", "eval"}},
		{[]string{"sim", "--thr"}, []string{"--throughput-table"}},
		{[]string{"estimate", "--mo"}, []string{"--model"}},
	} {
		stdout, _, code := rota(t, append([]string{"__complete"}, tc.args...)...)
		for _, w := range tc.want {
			if code != 0 || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(w)+`(\t|$)`).MatchString(stdout) {
				t.Errorf("__complete %q: exit %d, lacks %s:\n%s", tc.args, code, w, stdout)
			}
		}
		if strings.Contains(stdout, "gen-man") || strings.Contains(stdout, "--throughputs") {
			t.Errorf("__complete %q offers a hidden command or flag:\n%s", tc.args, stdout)
		}
	}
}
