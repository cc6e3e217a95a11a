package gpureq

// SplitTop splits a GRES list at its top-level commas: an allocation or a
// node's Gres as Slurm prints it keeps a group in parentheses whose commas
// are its own ("gpu:v100:2(IDX:0,2),shard:2(1/2,1/2)"). The controller's
// Slurm readers and the synthetic trainer read such lists alike.
func SplitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
