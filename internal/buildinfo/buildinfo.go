// Package buildinfo holds what the build stamps into every binary.
package buildinfo

// Version is set by the Makefile through -ldflags -X.
var Version = "dev"
