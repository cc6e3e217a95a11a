// Package creds is the server side of Rota's NATS security: generating an
// nkey per identity (controller, plugin, cli, admin, one per agent node),
// the identities file the controller reads, and what each role may publish
// and subscribe to, applied by the embedded server or written out as a
// nats-server configuration for an external cluster.
//
// A credentials directory looks like this:
//
//	identities          role, node and public key of every identity (0644, root)
//	controller.nk       seed of the controller (0600, root)
//	plugin.nk           seed of the job_submit plugin (0600, owner SlurmUser)
//	cli.nk              seed for read-only `rota status` / `rota explain` (0600)
//	admin.nk            seed for admin commands (0600, root)
//	agents/<node>.nk    seed of the agent of <node> (0600); copy it to the node
//
// Seeds never leave the directory except by the admin copying an agent's
// to its node; the controller needs only its own seed and the public keys.
package creds

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/wire"
)

// Role is what an identity is for; it decides its permissions.
type Role string

// The roles. Every identity has exactly one.
const (
	Controller Role = "controller"
	Plugin     Role = "plugin"
	CLI        Role = "cli"
	Admin      Role = "admin"
	Agent      Role = "agent"
)

// fixedRoles are the roles `creds init` makes one identity each for.
var fixedRoles = []Role{Controller, Plugin, CLI, Admin}

// IdentitiesFile is the name of the public-key list in a credentials dir.
const IdentitiesFile = "identities"

// Identity is one NATS user: a role, the node for an agent, and its
// public nkey.
type Identity struct {
	Role      Role
	Node      string // agents only
	PublicKey string
}

func (id Identity) String() string {
	if id.Role == Agent {
		return "agent of " + id.Node
	}
	return string(id.Role)
}

// SeedPath is where the seed of role (and node, for an agent) lives in dir.
func SeedPath(dir string, role Role, node string) string {
	if role == Agent {
		return filepath.Join(dir, "agents", node+".nk")
	}
	return filepath.Join(dir, string(role)+".nk")
}

// CheckNodeName accepts the node names an agent identity may be bound to.
// Stricter than Slurm: the name becomes a file name and (through
// wire.AgentToken) a subject token, so only letters, digits, '-', '_' and
// '.' are allowed.
func CheckNodeName(node string) error {
	if node == "" || len(node) > 128 {
		return fmt.Errorf("node name %q: want 1 to 128 characters", node)
	}
	if node[0] == '.' || node[0] == '-' {
		return fmt.Errorf("node name %q: must not start with '.' or '-'", node)
	}
	for _, r := range node {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("node name %q: %q is not allowed (letters, digits, '-', '_', '.')", node, r)
		}
	}
	return nil
}

// ReadIdentities reads dir/identities. It refuses a file that anyone but
// its owner can write (whoever can add a line there can make themselves
// admin), unknown roles, invalid keys, a key listed twice, a role other
// than agent listed twice, and two agents whose node names map to the same
// subject token (they would share permissions).
func ReadIdentities(dir string) ([]Identity, error) {
	path := filepath.Join(dir, IdentitiesFile)
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("identities file: %w (create it with 'rota-controller creds init --dir %s')", err, dir)
	}
	if p := fi.Mode().Perm(); p&0o022 != 0 {
		return nil, fmt.Errorf("identities file %s has mode %04o, writable by others; run 'chmod 644 %s'", path, p, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identities file: %w", err)
	}
	return parseIdentities(path, b)
}

func parseIdentities(path string, b []byte) ([]Identity, error) {
	var ids []Identity
	keys := map[string]int{}
	roles := map[Role]int{}
	tokens := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want 'role node public-key' (node '-' for other roles than agent), got %q", path, n, line)
		}
		id := Identity{Role: Role(f[0]), Node: f[1], PublicKey: f[2]}
		switch id.Role {
		case Controller, Plugin, CLI, Admin:
			if id.Node != "-" {
				return nil, fmt.Errorf("%s:%d: role %s takes no node; write '-'", path, n, id.Role)
			}
			id.Node = ""
			if prev, dup := roles[id.Role]; dup {
				return nil, fmt.Errorf("%s:%d: a second %s identity (first on line %d)", path, n, id.Role, prev)
			}
			roles[id.Role] = n
		case Agent:
			if err := CheckNodeName(id.Node); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			tok := wire.AgentToken(id.Node)
			if other, dup := tokens[tok]; dup {
				return nil, fmt.Errorf("%s:%d: nodes %q and %q share the subject token %q; one agent could act as the other", path, n, other, id.Node, tok)
			}
			tokens[tok] = id.Node
		default:
			return nil, fmt.Errorf("%s:%d: unknown role %q (controller, plugin, cli, admin, agent)", path, n, f[0])
		}
		if !nkeys.IsValidPublicUserKey(id.PublicKey) {
			return nil, fmt.Errorf("%s:%d: %q is not a user public nkey (U...)", path, n, id.PublicKey)
		}
		if prev, dup := keys[id.PublicKey]; dup {
			return nil, fmt.Errorf("%s:%d: key already listed on line %d; every identity needs its own", path, n, prev)
		}
		keys[id.PublicKey] = n
		ids = append(ids, id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ids, nil
}

// Find returns the identity of role (and node), if listed.
func Find(ids []Identity, role Role, node string) (Identity, bool) {
	for _, id := range ids {
		if id.Role == role && (role != Agent || id.Node == node) {
			return id, true
		}
	}
	return Identity{}, false
}

func formatIdentities(ids []Identity) []byte {
	var b bytes.Buffer
	b.WriteString("# Rota's NATS identities: role, node (agents; '-' otherwise), public nkey.\n")
	b.WriteString("# Written by 'rota-controller creds'; read by the controller at start.\n")
	b.WriteString("# Public keys are not secret, but whoever can edit this file can grant\n")
	b.WriteString("# rights: keep it owned by root and not writable by others.\n")
	sorted := append([]Identity(nil), ids...)
	rank := map[Role]int{Controller: 0, Plugin: 1, CLI: 2, Admin: 3, Agent: 4}
	sort.SliceStable(sorted, func(i, j int) bool {
		if rank[sorted[i].Role] != rank[sorted[j].Role] {
			return rank[sorted[i].Role] < rank[sorted[j].Role]
		}
		return sorted[i].Node < sorted[j].Node
	})
	for _, id := range sorted {
		node := id.Node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(&b, "%-10s %-16s %s\n", id.Role, node, id.PublicKey)
	}
	return b.Bytes()
}

// Owner is who a seed file is given to; zero values keep the creator's.
type Owner struct {
	UID, GID int
	// Set says UID/GID are to be applied; GroupRead makes the file 0640.
	Set, GroupRead bool
}

// Result says what Init or AddAgent did for one identity.
type Result struct {
	Identity Identity
	Seed     string
	Created  bool // false: the seed existed and was kept
}

// Init creates dir with one identity per fixed role. Existing seeds are
// kept (so running it again is safe and adds only what is missing); their
// public keys are (re)written to the identities file, as are the agents
// already listed there.
func Init(dir string, owners map[Role]Owner) ([]Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	ids, err := readExisting(dir)
	if err != nil {
		return nil, err
	}
	var res []Result
	for _, role := range fixedRoles {
		r, err := ensureSeed(dir, role, "", owners[role])
		if err != nil {
			return res, err
		}
		ids = replace(ids, r.Identity)
		res = append(res, r)
	}
	return res, writeIdentities(dir, ids)
}

// AddAgent creates (or keeps) the identity of node's agent and lists it.
func AddAgent(dir, node string, owner Owner) (Result, error) {
	if err := CheckNodeName(node); err != nil {
		return Result{}, err
	}
	ids, err := readExisting(dir)
	if err != nil {
		return Result{}, err
	}
	if len(ids) == 0 {
		return Result{}, fmt.Errorf("%s has no identities yet; run 'rota-controller creds init --dir %s' first", dir, dir)
	}
	tok := wire.AgentToken(node)
	for _, id := range ids {
		if id.Role == Agent && id.Node != node && wire.AgentToken(id.Node) == tok {
			return Result{}, fmt.Errorf("node %q would share the subject token %q with the listed node %q", node, tok, id.Node)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
		return Result{}, err
	}
	r, err := ensureSeed(dir, Agent, node, owner)
	if err != nil {
		return r, err
	}
	return r, writeIdentities(dir, replace(ids, r.Identity))
}

func readExisting(dir string) ([]Identity, error) {
	ids, err := ReadIdentities(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return ids, err
}

func replace(ids []Identity, id Identity) []Identity {
	for i := range ids {
		if ids[i].Role == id.Role && ids[i].Node == id.Node {
			ids[i] = id
			return ids
		}
	}
	return append(ids, id)
}

// ensureSeed keeps an existing seed (checking its mode) or writes a new one.
func ensureSeed(dir string, role Role, node string, o Owner) (Result, error) {
	path := SeedPath(dir, role, node)
	r := Result{Identity: Identity{Role: role, Node: node}, Seed: path}
	if _, err := os.Stat(path); err == nil {
		pub, err := auth.PublicKey(path)
		if err != nil {
			return r, fmt.Errorf("keeping the existing seed: %w", err)
		}
		r.Identity.PublicKey = pub
		return r, nil
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return r, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return r, err
	}
	r.Identity.PublicKey, err = kp.PublicKey()
	if err != nil {
		return r, err
	}
	mode := os.FileMode(0o600)
	if o.GroupRead {
		mode = 0o640
	}
	// O_EXCL: never follow or overwrite something placed there meanwhile.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return r, fmt.Errorf("writing seed: %w", err)
	}
	_, werr := f.Write(append(seed, '\n'))
	if werr == nil {
		werr = f.Chmod(mode) // the umask may have taken bits off
	}
	if werr == nil && o.Set {
		werr = f.Chown(o.UID, o.GID)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return r, fmt.Errorf("writing seed %s: %w", path, werr)
	}
	r.Created = true
	return r, nil
}

// writeIdentities replaces dir/identities atomically, mode 0644.
func writeIdentities(dir string, ids []Identity) error {
	path := filepath.Join(dir, IdentitiesFile)
	tmp, err := os.CreateTemp(dir, ".identities-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(formatIdentities(ids))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
