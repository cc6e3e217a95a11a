// Package wire holds what crosses the network between Rota's parts: NATS
// subject names and the versioned JSON messages sent on them. Its children
// read what a job carries the same way everywhere: gpureq its Slurm GPU
// request, hints its --rota-* options and script hash. The plugin, the
// agent, the controller and the CLI share these, the placement rule
// (package placement) and internal/ helpers, and nothing else of each
// other (test/layout checks it), so the protocol is written down in one
// place.
//
// Every message carries "v", the schema version. A receiver rejects a
// version it does not know rather than guessing at its fields.
package wire
