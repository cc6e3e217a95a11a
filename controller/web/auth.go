package web

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
)

// Who may see the explain details and use the estimate form (the rest of
// the view is open to whoever reaches it).
const (
	// AuthNone: everyone.
	AuthNone = "none"
	// AuthToken: whoever presents the token, as HTTP Basic's password
	// (browsers ask for it; any user name) or as a Bearer token.
	AuthToken = "token"
	// AuthProxy: whoever the site's reverse proxy names in UserHeader,
	// believed only from Trusted addresses.
	AuthProxy = "proxy"
)

// Auth configures who is authenticated.
type Auth struct {
	Mode       string
	Token      string
	UserHeader string
	// Trusted are the proxies' addresses; empty means loopback.
	Trusted []netip.Prefix
}

// loopback is who is trusted when no proxy address is configured.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// minToken: a shorter token could be guessed.
const minToken = 16

func (a Auth) check() error {
	switch a.Mode {
	case AuthNone:
	case AuthToken:
		if len(a.Token) < minToken {
			return fmt.Errorf("web_auth = token: the token must have at least %d characters", minToken)
		}
	case AuthProxy:
		if a.UserHeader == "" {
			return fmt.Errorf("web_auth = proxy needs web_user_header")
		}
	default:
		return fmt.Errorf("web_auth = %q: want %s, %s or %s", a.Mode, AuthNone, AuthToken, AuthProxy)
	}
	return nil
}

// userName is what a proxy may pass as a user name: a POSIX-ish login, or
// an e-mail-like principal. Anything else is ignored.
var userName = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}$`)

// who says whether r is authenticated, and as which user ("" when the
// credential names none: no auth, or the token).
func (a Auth) who(r *http.Request) (user string, ok bool) {
	switch a.Mode {
	case AuthNone:
		return "", true
	case AuthToken:
		got := ""
		if _, pw, basic := r.BasicAuth(); basic {
			got = pw
		} else if b, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
			got = strings.TrimSpace(b)
		}
		return "", got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) == 1
	case AuthProxy:
		if !a.trusted(r.RemoteAddr) {
			return "", false
		}
		u := r.Header.Get(a.UserHeader)
		if !userName.MatchString(u) {
			return "", false
		}
		return u, true
	}
	return "", false
}

// trusted says whether the request comes straight from a trusted proxy.
func (a Auth) trusted(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	nets := a.Trusted
	if len(nets) == 0 {
		nets = loopback
	}
	for _, p := range nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParseTrusted reads proxy addresses: IPs or CIDR prefixes.
func ParseTrusted(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("web_trusted_proxies: %q is neither an IP address nor a prefix (10.0.0.0/8)", s)
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
	}
	return out, nil
}
