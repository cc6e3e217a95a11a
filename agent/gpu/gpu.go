// Package gpu is the agent's narrow view of a node's GPUs: a Backend that
// returns one sample per device. The real one (nvmlgpu) sits on NVIDIA's
// NVML; the synthetic one (simgpu) serves the dev cluster and demos on
// machines without GPUs. Nothing else in the agent imports go-nvml.
package gpu

import (
	"context"
	"errors"

	"github.com/rota-hpc/rota/wire"
)

// Backend samples the node's GPUs.
type Backend interface {
	// Name is "nvml", "sim", ... for reports and logs.
	Name() string
	// Sample returns one entry per GPU (and per MIG device). A device whose
	// metrics partly failed is still returned, with its Problems filled; an
	// error means no device could be sampled at all.
	Sample(ctx context.Context) ([]wire.GPUSample, error)
	// Close releases the library.
	Close() error
}

// ErrNoGPU means the backend cannot reach any GPU on this node (no NVML
// library, no driver). The agent logs it once and goes on reporting host and
// job data.
var ErrNoGPU = errors.New("no GPU backend available")

// None is the backend of a node without GPUs: it reports no devices.
type None struct{ Reason string }

func (None) Name() string                                     { return "none" }
func (None) Sample(context.Context) ([]wire.GPUSample, error) { return nil, nil }
func (None) Close() error                                     { return nil }
