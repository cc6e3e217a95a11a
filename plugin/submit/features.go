package submit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// WithTypeFeature returns the constraint that keeps the user's own and
// adds gpuType: "v100" alone, or "ib&v100". ok is false when the user's
// constraint cannot be extended safely by "&" (alternatives with "|",
// bracketed or counted sets, parentheses): the caller then types the gres
// instead.
func WithTypeFeature(user, gpuType string) (string, bool) {
	user = strings.TrimSpace(user)
	if user == "" {
		return gpuType, true
	}
	if strings.ContainsAny(user, "|[]()*") {
		return "", false
	}
	for _, f := range strings.Split(user, "&") {
		if f == gpuType {
			return user, true
		}
	}
	return user + "&" + gpuType, true
}

// ScriptHash is how Rota recognises a batch script again: the first 16
// bytes of its SHA-256, in hex ("" for no script).
func ScriptHash(script []byte) string {
	if len(script) == 0 {
		return ""
	}
	sum := sha256.Sum256(script)
	return hex.EncodeToString(sum[:16])
}
