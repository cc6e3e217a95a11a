package placement

import (
	"strconv"

	"github.com/rota-hpc/rota/wire"
)

// placeServe places a service replica (docs/serve.md). Its GPU type is
// left to Slurm: the controller keeps replicas of one service off each
// other's nodes (ExcNodeList), and a type pinned here could leave a
// replica waiting for the one node its sibling holds. Its time limit is
// kept: it rolls over before it, and a shorter one would only roll it
// over sooner. A replica of a named service is held (its begin time) until
// the controller has excluded its siblings' nodes and released it, or
// the hold ends: replicas submitted together would otherwise start on the
// same node before the controller sees them.
func placeServe(v *View, req *wire.PlaceRequest, explain bool) Result {
	var res Result
	if v.s != nil && req.Hints.Service != "" && !req.Modify {
		res.HoldS = v.s.Rule.ServeHoldS
	}
	if explain {
		res.Reason = "a service replica: GPU type left to Slurm on any node not excluded for its siblings, time limit kept (it rolls over before it)"
		if res.HoldS > 0 {
			res.Reason += "; held up to " + strconv.FormatUint(uint64(res.HoldS), 10) + " s for the controller to spread it"
		}
	}
	return res
}
