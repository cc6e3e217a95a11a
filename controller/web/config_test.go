package web

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/internal/conf"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, conf, err string
		want            Auth // Mode, Token, UserHeader, number of Trusted
		trusted         int
	}{
		{"off by default", "", "", Auth{Mode: AuthNone, UserHeader: "X-Remote-User"}, 0},
		{"loopback, open", "web_listen = 127.0.0.1:8080\n", "", Auth{Mode: AuthNone, UserHeader: "X-Remote-User"}, 0},
		{"token", "web_listen = 127.0.0.1:8080\nweb_auth = token\nweb_token_file = " + tok + "\n", "",
			Auth{Mode: AuthToken, Token: "0123456789abcdef0123", UserHeader: "X-Remote-User"}, 0},
		{"token without a file", "web_auth = token\n", "web_token_file", Auth{}, 0},
		{"token others can read", "web_auth = token\nweb_token_file = " + open + "\n", "chmod 600", Auth{}, 0},
		{"proxy with networks", "web_auth = proxy\nweb_user_header = X-Forwarded-User\nweb_trusted_proxies = 10.0.0.5, 192.168.0.0/24\n", "",
			Auth{Mode: AuthProxy, UserHeader: "X-Forwarded-User"}, 2},
		{"proxy without a header", "web_auth = proxy\nweb_user_header =\n", "web_user_header", Auth{}, 0},
		{"bad proxy address", "web_auth = proxy\nweb_trusted_proxies = proxy.example\n", "web_trusted_proxies", Auth{}, 0},
		{"unknown mode", "web_auth = ldap\n", `web_auth = "ldap"`, Auth{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := conf.Parse(strings.NewReader(tc.conf), "controller.conf")
			if err != nil {
				t.Fatal(err)
			}
			c := DefaultConfig()
			c.Read(v)
			if err := v.Err(); err != nil {
				t.Fatal(err)
			}
			err = c.Check()
			var a Auth
			if err == nil {
				a, err = c.Authn()
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Mode != tc.want.Mode || a.Token != tc.want.Token || a.UserHeader != tc.want.UserHeader || len(a.Trusted) != tc.trusted {
				t.Errorf("auth %+v, want %+v with %d trusted", a, tc.want, tc.trusted)
			}
		})
	}
}
