package app

import (
	"testing"

	"github.com/rota-hpc/rota/wire/gputype"
)

// gpu_mem.<type> and slice_min_gpu_mem reach the rule the plugins get.
func TestLoadConfigGPUMemory(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/c.conf"
	writeFile(t, path, "")
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Placement.Rule(); r.SliceMinMemory != gputype.DefaultSliceMinMemory || len(r.GPUMemory) != 0 {
		t.Fatalf("default rule: slice minimum %d, memory %v", r.SliceMinMemory, r.GPUMemory)
	}
	writeFile(t, path, "gpu_mem.v100 = 32GiB\nslice_min_gpu_mem = 20G\n")
	if c, err = LoadConfig(path); err != nil {
		t.Fatal(err)
	}
	if r := c.Placement.Rule(); r.SliceMinMemory != 20<<30 || r.GPUMemory["v100"] != 32<<30 {
		t.Fatalf("rule: slice minimum %d, memory %v", r.SliceMinMemory, r.GPUMemory)
	}
	writeFile(t, path, "slice_min_gpu_mem = 0\n")
	if c, err = LoadConfig(path); err != nil || c.Placement.Rule().SliceMinMemory != 0 {
		t.Fatalf("slice_min_gpu_mem = 0: %v, %d", err, c.Placement.SliceMinMemory)
	}
	writeFile(t, path, "slice_min_gpu_mem = lots\n")
	if _, err := LoadConfig(path); err == nil {
		t.Fatal("slice_min_gpu_mem = lots accepted")
	}
}
