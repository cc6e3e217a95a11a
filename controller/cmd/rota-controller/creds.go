package main

import (
	"flag"
	"fmt"
	"io"
	"os/user"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/controller/creds"
)

const defaultCredsDir = "/etc/rota/creds"

const credsUsage = `usage: rota-controller creds <command> [flags]

  init [--dir DIR] [--owner ROLE=USER[:GROUP]]...
        identities for controller, plugin, cli and admin (existing seeds are kept)
  add-agent [--dir DIR] [--owner USER[:GROUP]] NODE...
        one identity per node's agent, bound to that node's subjects
  server-config [--dir DIR]
        the permissions as a nats-server config block, for an external NATS

Seeds are written mode 0600 (0640 when --owner names a group); --owner
gives a seed to its user, e.g. --owner plugin=slurm for slurmctld.
DIR defaults to ` + defaultCredsDir + `; see docs/operations.md.
`

// runCreds is `rota-controller creds ...`; it returns the exit status.
func runCreds(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, credsUsage)
		return 2
	}
	fs := flag.NewFlagSet("creds "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", defaultCredsDir, "credentials directory")
	var owners []string
	fs.Func("owner", "owner of a seed: ROLE=USER[:GROUP] for init, USER[:GROUP] for add-agent (repeatable for init)", func(s string) error {
		owners = append(owners, s)
		return nil
	})
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "rota-controller creds %s: %v\n", args[0], err)
		return 1
	}
	switch args[0] {
	case "init":
		if fs.NArg() != 0 {
			fmt.Fprint(stderr, credsUsage)
			return 2
		}
		om := map[creds.Role]creds.Owner{}
		for _, s := range owners {
			role, who, ok := strings.Cut(s, "=")
			switch creds.Role(role) {
			case creds.Controller, creds.Plugin, creds.CLI, creds.Admin:
			default:
				ok = false
			}
			if !ok {
				return fail(fmt.Errorf("--owner %q: want ROLE=USER[:GROUP] with ROLE controller, plugin, cli or admin", s))
			}
			o, err := parseOwner(who)
			if err != nil {
				return fail(err)
			}
			om[creds.Role(role)] = o
		}
		res, err := creds.Init(*dir, om)
		printResults(stdout, res)
		if err != nil {
			return fail(err)
		}
	case "add-agent":
		if fs.NArg() == 0 {
			fmt.Fprint(stderr, credsUsage)
			return 2
		}
		var o creds.Owner
		if len(owners) > 1 {
			return fail(fmt.Errorf("one --owner for add-agent"))
		} else if len(owners) == 1 {
			var err error
			if o, err = parseOwner(owners[0]); err != nil {
				return fail(err)
			}
		}
		for _, node := range fs.Args() {
			r, err := creds.AddAgent(*dir, node, o)
			if err != nil {
				return fail(err)
			}
			printResults(stdout, []creds.Result{r})
		}
		fmt.Fprintln(stdout, "copy each agent's seed to its node (mode 0600) and restart the controller to admit new agents")
	case "server-config":
		ids, err := creds.ReadIdentities(*dir)
		if err != nil {
			return fail(err)
		}
		fmt.Fprint(stdout, creds.ServerConfig(ids))
	default:
		fmt.Fprintf(stderr, "rota-controller creds: unknown command %q\n\n%s", args[0], credsUsage)
		return 2
	}
	return 0
}

func printResults(w io.Writer, res []creds.Result) {
	for _, r := range res {
		what := "kept   "
		if r.Created {
			what = "created"
		}
		fmt.Fprintf(w, "%s %-18s %s  %s\n", what, r.Identity, r.Identity.PublicKey, r.Seed)
	}
}

// parseOwner resolves USER[:GROUP]. Without a group the user's primary
// group owns the file and only the user may read it; naming a group lets
// that group read it too.
func parseOwner(s string) (creds.Owner, error) {
	name, group, withGroup := strings.Cut(s, ":")
	u, err := user.Lookup(name)
	if err != nil {
		return creds.Owner{}, fmt.Errorf("--owner %q: %w", s, err)
	}
	o := creds.Owner{Set: true}
	o.UID, _ = strconv.Atoi(u.Uid)
	o.GID, _ = strconv.Atoi(u.Gid)
	if withGroup {
		g, err := user.LookupGroup(group)
		if err != nil {
			return creds.Owner{}, fmt.Errorf("--owner %q: %w", s, err)
		}
		o.GID, _ = strconv.Atoi(g.Gid)
		o.GroupRead = true
	}
	return o, nil
}
