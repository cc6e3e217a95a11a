package gpureq

import "strings"

// WithTypeFeature returns the constraint that keeps the user's own and
// adds gpuType: "v100" alone, or "ib&v100". ok is false when the user's
// constraint cannot be extended safely by "&" (alternatives with "|",
// bracketed or counted sets, parentheses): the caller then types the gres
// instead.
//
// A constraint that only offers alternatives ("v100|p100", a choice the
// user left to Rota, see TypeChoice) becomes the one chosen among them.
func WithTypeFeature(user, gpuType string) (string, bool) {
	user = strings.TrimSpace(user)
	if user == "" {
		return gpuType, true
	}
	if alts, ok := orList(user); ok {
		for _, a := range alts {
			if a == gpuType {
				return gpuType, true
			}
		}
		return "", false
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
// isType says is a GPU type, or "". A choice of types ("v100|p100", see
// TypeChoice) names none: the user left the choice to Rota.
func FeatureType(features string, isType func(string) bool) string {
	if TypeChoice(features, isType) != nil {
		return ""
	}
	for _, f := range strings.FieldsFunc(features, func(r rune) bool { return strings.ContainsRune("&|,[]()*", r) }) {
		if isType(f) {
			return f
		}
	}
	return ""
}

// TypeChoice returns the GPU types a constraint offers when it is nothing
// but alternatives of two or more types ("v100|p100", as Slurm users write
// --constraint): Rota may pick any one of them. nil otherwise.
func TypeChoice(features string, isType func(string) bool) []string {
	alts, ok := orList(strings.TrimSpace(features))
	if !ok || len(alts) < 2 {
		return nil
	}
	for _, a := range alts {
		if !isType(a) {
			return nil
		}
	}
	return alts
}

// orList splits "a|b|c" into its distinct alternatives; ok is false for
// anything else (no "|", an empty alternative, or any other operator).
func orList(s string) (alts []string, ok bool) {
	if !strings.Contains(s, "|") || strings.ContainsAny(s, "&[]()*!,:= \t") {
		return nil, false
	}
	for _, a := range strings.Split(s, "|") {
		if a == "" {
			return nil, false
		}
		dup := false
		for _, b := range alts {
			dup = dup || a == b
		}
		if !dup {
			alts = append(alts, a)
		}
	}
	return alts, true
}
