package submit

import (
	"crypto/sha256"
	"encoding/hex"
)

// ScriptHash is how Rota recognises a batch script again: the first 16
// bytes of its SHA-256, in hex ("" for no script).
func ScriptHash(script []byte) string {
	if len(script) == 0 {
		return ""
	}
	sum := sha256.Sum256(script)
	return hex.EncodeToString(sum[:16])
}
