// Command rota is Rota's command-line tool: status, explain, estimate, and
// the policy solver and simulator that run the controller's own code. It
// asks the controller over NATS and links none of it: no NATS server, no
// round loop (the load generator is rota-loadgen, a command of its own).
//
// The command tree is built with cobra (github.com/spf13/cobra): every
// subcommand has its own file and one constructor (newSimCmd, ...), wired
// in newRootCmd below. cobra gives each command -h/--help, the shell
// completions (`rota completion bash|zsh`) and, through cobra/doc, the man
// pages (`make man`), all from the same flag definitions.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rota-hpc/rota/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// newRootCmd builds the whole command tree. Output (results, help,
// completion scripts) goes to stdout; errors and warnings to stderr.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "rota",
		Short: "Rota's command-line tool",
		Long: `rota asks the Rota controller what it decided and why (status, explain,
estimate), and runs the controller's own policies offline (solve, sim,
queuewait).

The controller-facing commands reach it over NATS: --nats (default
$ROTA_NATS_URL, else nats://127.0.0.1:4222), with --nkey-seed and --tls-ca
where the site secures NATS (docs/operations.md).`,
		Version:       buildinfo.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// `rota` alone prints the usage and exits 2; an unknown command is
		// a usage error with suggestions.
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newStatusCmd(),
		newExplainCmd(),
		newEstimateCmd(),
		newSolveCmd(),
		newSimCmd(),
		newQueuewaitCmd(),
		newGenManCmd(),
	)
	// Added now rather than at Execute, so the tree is whole for the man
	// pages and the tests (and the completion scripts go to stdout above).
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err.Error()} })
	root.DisableAutoGenTag = true
	return root
}

// execute runs one command line and returns the exit status: 0, 1 for a
// failure, 2 for a mistake in how the command was called.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var u usageError
	if errors.As(err, &u) {
		if u.msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), u.msg)
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	return 1
}

// usageError marks a mistake in how the command was called (exit 2). An
// empty message means the usage was printed already.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// usageArgs makes an argument check's error a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err.Error()}
		}
		return nil
	}
}

// groupRunE runs a command that only groups others (rota, rota
// queuewait): alone it prints its usage to stderr (exit 2); with an
// unknown subcommand it says so.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Usage()
		return usageError{}
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{msg}
}

// aliasFlag keeps an old spelling of a flag working: hidden from help,
// sharing the new flag's value, and saying on stderr that it is old.
func aliasFlag(cmd *cobra.Command, old, name string) {
	fs := cmd.Flags()
	f := fs.Lookup(name)
	if f == nil {
		panic("rota: alias --" + old + " of undefined flag --" + name)
	}
	fs.AddFlag(&pflag.Flag{
		Name:        old,
		Usage:       "old spelling of --" + name,
		Value:       aliasValue{Value: f.Value, cmd: cmd, old: old, name: name},
		DefValue:    f.DefValue,
		NoOptDefVal: f.NoOptDefVal,
		Hidden:      true,
	})
}

type aliasValue struct {
	pflag.Value
	cmd       *cobra.Command
	old, name string
}

func (a aliasValue) Set(s string) error {
	fmt.Fprintf(a.cmd.ErrOrStderr(), "%s: --%s is an old spelling of --%s; it will go away\n", a.cmd.CommandPath(), a.old, a.name)
	return a.Value.Set(s)
}
