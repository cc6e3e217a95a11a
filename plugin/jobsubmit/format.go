package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// formatLine turns one zerolog JSON event into "message key=value ...",
// the shape of a slurmctld log line; slurmctld adds time and level itself.
func formatLine(p []byte) string {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return strings.TrimSpace(string(p))
	}
	var b strings.Builder
	if msg, ok := m["message"].(string); ok {
		b.WriteString(msg)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "message" && k != "level" && k != "time" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := fmt.Sprint(m[k])
		if strings.ContainsAny(v, " \t\"=") {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String()
}
