package slurm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenSource gives the JWT slurmrestd passes on to slurmctld.
type TokenSource interface {
	Token(user string) (string, error)
}

// KeyTokens signs its own tokens with slurm.conf's jwt_key
// (AuthAltParameters=jwt_key=...), as `scontrol token` does inside
// slurmctld: HS256, claims sun (the user), iat and exp. A token is made
// for Lifetime and replaced a fifth of it before it expires, so the
// controller never runs on an expired token and asks slurmctld for
// nothing.
type KeyTokens struct {
	// KeyFile is the key (the file slurmctld reads; keep it root-only).
	KeyFile string
	// Lifetime of each token (default 1 h).
	Lifetime time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	key     []byte
	keyRead time.Time
	tok     string
	user    string
	exp     time.Time
}

// Token implements TokenSource.
func (k *KeyTokens) Token(user string) (string, error) {
	if user == "" {
		return "", errors.New("no slurmrestd_user to make a token for")
	}
	now := time.Now
	if k.Now != nil {
		now = k.Now
	}
	life := k.Lifetime
	if life <= 0 {
		life = time.Hour
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	t := now()
	if k.tok != "" && k.user == user && t.Before(k.exp.Add(-life/5)) {
		return k.tok, nil
	}
	// Re-read the key with each new token: an admin may rotate it.
	key, err := os.ReadFile(k.KeyFile)
	if err != nil {
		if k.key == nil {
			return "", fmt.Errorf("cannot read the JWT key (slurmrestd_jwt_key): %w", err)
		}
		key = k.key
	}
	if len(key) < 16 {
		return "", fmt.Errorf("JWT key %s has %d bytes: too short for HS256 (slurmctld needs the same key; make one with dd if=/dev/urandom bs=32 count=1)", k.KeyFile, len(key))
	}
	k.key = key
	tok, err := SignJWT(key, user, t, t.Add(life))
	if err != nil {
		return "", err
	}
	k.tok, k.user, k.exp = tok, user, t.Add(life)
	return tok, nil
}

// SignJWT makes an HS256 token for user, valid from iat to exp, as
// Slurm's auth/jwt checks it (claims sun, iat, exp).
func SignJWT(key []byte, user string, iat, exp time.Time) (string, error) {
	enc := base64.RawURLEncoding
	head, err := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{"sun": user, "iat": iat.Unix(), "exp": exp.Unix()})
	if err != nil {
		return "", err
	}
	msg := enc.EncodeToString(head) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil)), nil
}

// FileTokens reads a token someone else makes (`scontrol token
// username=U lifespan=S` run by cron, say) from a file, again whenever
// the file changes. The file holds the token or scontrol's
// "SLURM_JWT=<token>" line.
type FileTokens struct {
	Path string

	mu    sync.Mutex
	tok   string
	mtime time.Time
}

// Token implements TokenSource.
func (f *FileTokens) Token(string) (string, error) {
	st, err := os.Stat(f.Path)
	if err != nil {
		return "", fmt.Errorf("slurmrestd_token_file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tok != "" && st.ModTime().Equal(f.mtime) {
		return f.tok, nil
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return "", fmt.Errorf("slurmrestd_token_file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	tok = strings.TrimPrefix(tok, "SLURM_JWT=")
	if tok == "" || strings.ContainsAny(tok, " \n\t") || strings.Count(tok, ".") != 2 {
		return "", fmt.Errorf("slurmrestd_token_file %s holds no JWT (want the token, or scontrol token's SLURM_JWT=... line)", f.Path)
	}
	f.tok, f.mtime = tok, st.ModTime()
	return tok, nil
}
