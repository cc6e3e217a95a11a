// Package auth is the client side of Rota's NATS security, shared by the
// plugin, the agent, the CLI and the controller: reading an nkey seed file
// (refusing one that others can read), the identity's own reply inbox, and
// the TLS trust anchor. The server side (who may do what) is in
// controller/creds, which the plugin does not link.
package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// maxSeedFile bounds what is read from a seed file: a seed is 58 bytes,
// a decorated one a few hundred.
const maxSeedFile = 4096

// LoadSeed reads a user nkey seed from path. The file must be a regular
// file that no one but its owner (and, at most, its group, for reading)
// can read or write: anyone who can read a seed can act as its identity.
func LoadSeed(path string) (nkeys.KeyPair, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("nkey seed file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("nkey seed file %s is not a regular file", path)
	}
	if err := CheckSeedMode(path, fi.Mode()); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nkey seed file: %w", err)
	}
	if len(b) > maxSeedFile {
		return nil, fmt.Errorf("nkey seed file %s is %d bytes; a seed is one line of 58 characters", path, len(b))
	}
	kp, err := nkeys.ParseDecoratedUserNKey(b)
	if err != nil {
		return nil, fmt.Errorf("nkey seed file %s holds no user nkey seed (a line starting with SU, from 'rota-controller creds'): %w", path, err)
	}
	return kp, nil
}

// CheckSeedMode refuses a seed file whose mode lets anyone but the owner
// write it, or anyone outside owner and group read it. 0600 is what
// `rota-controller creds` writes; 0640 is accepted so a group (say, the
// people who may run `rota status`) can share the CLI's seed.
func CheckSeedMode(path string, m os.FileMode) error {
	if p := m.Perm(); p&0o037 != 0 {
		return fmt.Errorf("nkey seed file %s has mode %04o, readable or writable by others; run 'chmod 600 %s'", path, p, path)
	}
	return nil
}

// InboxPrefix is the reply inbox of the identity with public key pub.
// Each identity gets its own, derived from its key, so the server can let
// it subscribe to its own replies and to no one else's (with the default
// "_INBOX." every client could read every other client's replies).
func InboxPrefix(pub string) string { return "_INBOX_" + pub }

// ClientOptions are the NATS options that authenticate as the nkey seed in
// seedFile and trust the CA certificates in caFile. Either may be "" (no
// nkey: connect without credentials; no CA: the system's roots, used only
// if the server asks for TLS or the URL says tls://). It reads both files
// now, so a bad path or mode is reported at start, not at first connect.
func ClientOptions(seedFile, caFile string) ([]nats.Option, error) {
	var opts []nats.Option
	if seedFile != "" {
		kp, err := LoadSeed(seedFile)
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("nkey seed file %s: %w", seedFile, err)
		}
		// The key pair stays in memory for the life of the connection:
		// every reconnect signs the server's nonce again.
		opts = append(opts, nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix(InboxPrefix(pub)))
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", caFile)
		}
		opts = append(opts, nats.RootCAs(caFile))
	}
	return opts, nil
}

// PublicKey is the public key of the seed in seedFile.
func PublicKey(seedFile string) (string, error) {
	kp, err := LoadSeed(seedFile)
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}

// IsPermissionError reports whether err is the server refusing a publish
// or subscription (nats.ErrPermissionViolation), as delivered to a
// connection's async error handler.
func IsPermissionError(err error) bool { return errors.Is(err, nats.ErrPermissionViolation) }

// IsLoopback says whether host (a name or an address to listen on) is this
// machine's loopback: the only place a service without authentication
// may listen, reachable by this host's users alone.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
