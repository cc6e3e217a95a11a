package wire

import (
	"strings"
)

// Annotation is the line the job_submit plugin writes into a job's
// AdminComment, readable with `scontrol show job`, e.g.
//
//	rota: gpu any->v100, time 2-00:00:00->06:00:00 (interim) [d=Ab12...]
//
// The plugin runs before Slurm assigns the job id, so the decision id in
// brackets is how the controller later ties a job to its decision.
func Annotation(asked, given, timeAsked, timeGiven, policy, decisionID string) string {
	// Concatenated, not Sprintf: this runs on slurmctld's submit thread.
	return "rota: gpu " + asked + "->" + given + ", time " + timeAsked + "->" + timeGiven + " (" + policy + ") [d=" + decisionID + "]"
}

// DecisionIDFromComment finds the decision id of an Annotation inside an
// admin comment, or "".
func DecisionIDFromComment(c string) string {
	i := strings.LastIndex(c, "[d=")
	if i < 0 {
		return ""
	}
	rest := c[i+3:]
	j := strings.IndexByte(rest, ']')
	if j <= 0 {
		return ""
	}
	return rest[:j]
}
