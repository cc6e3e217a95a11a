// Package wire holds what crosses the network between Rota's parts: NATS
// subject names and the versioned JSON messages sent on them. The plugin,
// the agent, the controller and the CLI all import it, and nothing else of
// each other, so the protocol is written down in one place.
//
// Every message carries "v", the schema version. A receiver rejects a
// version it does not know rather than guessing at its fields.
package wire
