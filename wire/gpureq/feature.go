package gpureq

import "strings"

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

// FeatureType returns the first feature of a constraint ("ib&v100") that
// isType says is a GPU type, or "".
func FeatureType(features string, isType func(string) bool) string {
	for _, f := range strings.FieldsFunc(features, func(r rune) bool { return strings.ContainsRune("&|,[]()*", r) }) {
		if isType(f) {
			return f
		}
	}
	return ""
}
