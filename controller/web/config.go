package web

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rota-hpc/rota/internal/conf"
)

// Config is the web view's part of the controller's config
// (docs/operations.md, "The web view").
type Config struct {
	// Listen is where the view is served ("" off).
	Listen string
	// Auth is who may see the explain details and use the estimate
	// form: none (everyone), token (TokenFile's token), proxy (the user
	// a trusted reverse proxy names in UserHeader).
	Auth           string
	TokenFile      string
	UserHeader     string
	TrustedProxies []string
}

// DefaultConfig is off, open to everyone once listening, and believes
// X-Remote-User from a proxy when told to trust one.
func DefaultConfig() Config {
	return Config{Auth: AuthNone, UserHeader: "X-Remote-User"}
}

// Read reads the web view's keys over c:
//
//	web_listen = 127.0.0.1:8080
//	web_auth = none | token | proxy
//	web_token_file = /etc/rota/web.token
//	web_user_header = X-Remote-User
//	web_trusted_proxies = 10.0.0.5, 192.168.0.0/24
func (c *Config) Read(v *conf.Values) {
	v.String("web_listen", &c.Listen)
	v.String("web_auth", &c.Auth)
	v.String("web_token_file", &c.TokenFile)
	v.String("web_user_header", &c.UserHeader)
	v.List("web_trusted_proxies", &c.TrustedProxies)
}

// Check rejects settings that cannot work together.
func (c Config) Check() error {
	switch c.Auth {
	case AuthNone, AuthProxy:
	case AuthToken:
		if c.TokenFile == "" {
			return errors.New("web_auth = token needs web_token_file")
		}
	default:
		return fmt.Errorf("web_auth = %q: want none, token or proxy", c.Auth)
	}
	if c.Auth == AuthProxy && strings.TrimSpace(c.UserHeader) == "" {
		return errors.New("web_auth = proxy needs web_user_header (e.g. X-Remote-User)")
	}
	_, err := ParseTrusted(c.TrustedProxies)
	return err
}

// Authn reads what the view authenticates with (the token file, when
// there is one).
func (c Config) Authn() (Auth, error) {
	a := Auth{Mode: c.Auth, UserHeader: strings.TrimSpace(c.UserHeader)}
	var err error
	if a.Trusted, err = ParseTrusted(c.TrustedProxies); err != nil {
		return a, err
	}
	if c.Auth == AuthToken {
		if a.Token, err = readToken(c.TokenFile); err != nil {
			return a, err
		}
	}
	return a, nil
}

// readToken reads the token, refusing a file others may read or anyone
// but its owner may write (as the NATS seeds).
func readToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("web_token_file: %w", err)
	}
	if m := fi.Mode().Perm(); m&0o007 != 0 || m&0o020 != 0 {
		return "", fmt.Errorf("web_token_file %s is mode %04o: others may read or write it; chmod 600 (or 640 for a group)", path, m)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("web_token_file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
