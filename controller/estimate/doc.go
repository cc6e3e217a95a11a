// Package estimate holds the controller's learning estimators (issue #5):
// a job's throughput on each GPU type, its walltime, and its GPU memory
// need, and the interfaces every estimator answers behind (Throughput,
// Walltime, QueueWait: a plain query and answer each, with built-ins
// over the learners and the queue-wait model). It is pure Go: no NATS, no
// Slurm. The controller's round loop feeds it the agents' measurements
// and the users' hints, asks it for numbers, and persists its state
// (Export/Import, versioned JSON) in JetStream KV.
//
// Everything is keyed by a job's Identity rather than its Slurm job id, so
// what was learnt about a job carries over to its requeues and to the
// user's next submission of the same script. docs/estimators.md describes
// the methods and their evaluation on Gavel's measured throughput table.
//
// Its children:
//
//   - queuewait: the queue-wait model (boosted trees over the queue's
//     state and recent waits, trained on a sacct trace).
//   - external: an admin's estimator executable (go-plugin over gRPC) in
//     front of a built-in, which answers when it cannot.
//   - forecast: `rota estimate`'s arithmetic (fit, run time, chain, wait,
//     cost, plans); forecast/report: its request and table, for the CLI
//     and the web form alike.
package estimate
