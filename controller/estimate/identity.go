package estimate

import (
	"net/url"
	"strings"
)

// Identity is what makes two Slurm jobs "the same job" for estimation: the
// same user submitting the same job name with the same batch script.
type Identity struct {
	User       string
	Name       string
	ScriptHash string
}

// Key is the identity as one stable, printable string: the fields
// path-escaped and joined by "/", so no field can forge another's
// boundary. Without a script hash the key is "user/name": a job whose
// script is unknown keys on its user and name alone.
func (id Identity) Key() string {
	k := url.PathEscape(id.User) + "/" + url.PathEscape(id.Name)
	if id.ScriptHash != "" {
		k += "/" + url.PathEscape(id.ScriptHash)
	}
	return k
}

// ParseKey reverses Key. ok is false for a string Key cannot produce.
func ParseKey(key string) (id Identity, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return Identity{}, false
	}
	var err error
	if id.User, err = url.PathUnescape(parts[0]); err != nil {
		return Identity{}, false
	}
	if id.Name, err = url.PathUnescape(parts[1]); err != nil {
		return Identity{}, false
	}
	if len(parts) == 3 {
		if id.ScriptHash, err = url.PathUnescape(parts[2]); err != nil || id.ScriptHash == "" {
			return Identity{}, false
		}
	}
	return id, true
}
