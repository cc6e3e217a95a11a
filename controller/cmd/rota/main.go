// Command rota is Rota's command-line tool: status, explain, estimate, and
// the policy solver and simulator that run the controller's own code.
//
// Each subcommand lives in its own file and registers itself in init(), so
// adding one never touches this file.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one `rota <name>` subcommand.
type command struct {
	summary string
	// run gets the arguments after the subcommand name and writes its
	// output to stdout. A returned error is printed and exits 1; a
	// usageError exits 2.
	run func(ctx context.Context, args []string, stdout io.Writer) error
}

var commands = map[string]command{}

func register(name string, c command) {
	if _, dup := commands[name]; dup {
		panic("rota: subcommand registered twice: " + name)
	}
	commands[name] = c
}

// usageError marks a mistake in how the command was called.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rota <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'rota <command> -h' for a command's flags")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(os.Stderr)
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "rota: unknown command %q\n\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.run(ctx, os.Args[2:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "rota %s: %v\n", os.Args[1], err)
		if _, ok := err.(usageError); ok {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
