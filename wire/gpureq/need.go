package gpureq

import "github.com/rota-hpc/rota/wire"

// Need is what a job asks of the nodes of the one GPU type Rota would
// give it: at least Nodes nodes (at most MaxNodes, 0 no limit), each with
// PerNode GPUs of the type, and Total GPUs in all, in Units that cannot be
// split over nodes (a task's GPUs; 1 otherwise). It is the one count of
// a request's GPUs: the submit-time rule, the round loop, the queue's
// readers and the estimate all use it.
type Need struct {
	Nodes, MaxNodes, PerNode, Total, Unit int
}

// maxAsk bounds each count NeedOf reads, so that products cannot
// overflow whatever a request says.
const maxAsk = 1 << 20

// NeedOf reads a request's need as Slurm counts it: --gpus is the total;
// --gres / --gpus-per-node is per node, --gpus-per-socket per socket
// (times --sockets-per-node), --gpus-per-task per task (times
// --ntasks-per-node on each node, times the tasks in all); a job on one
// node (-N1) needs its whole total there.
func NeedOf(a wire.GPUAsk) Need {
	c := func(v uint32) int { return int(min(v, maxAsk)) }
	nodes := max(c(a.Nodes), 1)
	tasks := c(a.Tasks)
	if tasks == 0 {
		// Slurm's default: one task per node (sbatch -n).
		tasks = max(c(a.TasksPerNode), 1) * nodes
	}
	n := Need{Nodes: nodes, MaxNodes: c(a.MaxNodes), Unit: max(c(a.PerTask), 1)}
	n.PerNode = max(c(a.PerNode), c(a.PerSocket)*max(c(a.SocketsPerNode), 1), c(a.PerTask)*max(c(a.TasksPerNode), 1))
	n.Total = max(c(a.PerJob), c(a.PerNode)*nodes, c(a.PerSocket)*max(c(a.SocketsPerNode), 1)*nodes, c(a.PerTask)*max(tasks, 1))
	if a.MaxNodes == 1 || a.Nodes == 1 && a.MaxNodes == 0 {
		// Everything lands on the one node (-N1; a record made before
		// MaxNodes was kept says only Nodes).
		n.PerNode = max(n.PerNode, n.Total)
	}
	if n.Total > 0 {
		n.PerNode = max(n.PerNode, 1)
	}
	return n
}
