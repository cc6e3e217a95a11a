package main

/*
#include "rota_shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// counts is what the plugin has cost slurmctld since it was loaded: the
// GPU jobs that entered Go and their time there, every GPU job's whole
// call from slurmctld's thread, and the jobs the shim handled alone.
type counts struct {
	goJobs, goNs, goMaxNs               int64
	calls, callNs, callMaxNs            uint64
	skipped, fromShelf, passedWhileAway uint64
	trusted                             uint64 // updates by trusted_uids
	stateBytes, stateDecodeNs           int64
	// Batch jobs the shelf did not serve: empty, expired, unmatched, full.
	shelfMiss [4]uint64
	// loadedNs: when this load of the plugin began (unix ns); states: the
	// controller's states taken in since; ready: a GPU job submitted now
	// would be placed (Handler.Ready). What tests wait on after a restart
	// or a reload, instead of submitting until a job is placed.
	loadedNs, states int64
	ready            bool
}

// loadedNs and states: see counts.
var loadedNs, states atomic.Int64

// stateBytes and stateDecodeNs: the last placement state the controller
// pushed, its size and its decode time (on the connection's goroutine).
var stateBytes, stateDecodeNs atomic.Int64

func readCounts() counts {
	var c [7]C.uint64_t
	C.rota_shim_counts(&c[0])
	var m [4]C.uint64_t
	C.rota_shelf_misses(&m[0])
	return counts{
		goJobs: calls.Load(), goNs: totalNs.Load(), goMaxNs: maxNs.Load(),
		calls: uint64(c[0]), callNs: uint64(c[1]), callMaxNs: uint64(c[2]),
		skipped: uint64(c[3]), fromShelf: uint64(c[4]), passedWhileAway: uint64(c[5]),
		trusted:    uint64(c[6]),
		stateBytes: stateBytes.Load(), stateDecodeNs: stateDecodeNs.Load(),
		shelfMiss: [4]uint64{uint64(m[0]), uint64(m[1]), uint64(m[2]), uint64(m[3])},
		loadedNs:  loadedNs.Load(), states: states.Load(), ready: handlerReady(),
	}
}

func handlerReady() bool {
	mu.RLock()
	defer mu.RUnlock()
	return handler.Ready()
}

// line is the stats file's one line: the fields of fini's log lines.
func (c counts) line() string {
	mean := func(ns, n int64) int64 {
		if n == 0 {
			return 0
		}
		return ns / n / 1000
	}
	return fmt.Sprintf("pid=%d jobs=%d mean_us=%d max_us=%d calls=%d call_mean_us=%d call_max_us=%d from_shelf=%d away=%d no_gpu=%d trusted=%d"+
		" shelf_empty=%d shelf_expired=%d shelf_unmatched=%d shelf_full=%d state_bytes=%d state_decode_us=%d loaded_ns=%d states=%d ready=%d\n",
		os.Getpid(), c.goJobs, mean(c.goNs, c.goJobs), c.goMaxNs/1000, c.calls, mean(int64(c.callNs), int64(c.calls)), c.callMaxNs/1000,
		c.fromShelf, c.passedWhileAway, c.skipped, c.trusted, c.shelfMiss[0], c.shelfMiss[1], c.shelfMiss[2], c.shelfMiss[3],
		c.stateBytes, c.stateDecodeNs/1000, c.loadedNs, c.states, b2i(c.ready))
}

// writeStats keeps path up to date with the counters, once a second when
// they changed, until stop is closed. From Slurm 23.11 slurmctld replaces
// itself at a reconfigure or shutdown without calling fini, so this file,
// not fini's log line, is where an admin or a benchmark reads them.
func writeStats(path string, stop <-chan struct{}) {
	defer recoverAndLog("stats")
	var last counts
	write := func(c counts) bool {
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
		err := os.WriteFile(tmp, []byte(c.line()), 0o644)
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			log.Warn().Err(err).Str("stats_file", path).Msg("cannot write the plugin's stats file; not writing it until the plugin is loaded again")
			return false
		}
		last = c
		return true
	}
	if !write(readCounts()) { // zeros: a fresh load is visible at once
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if c := readCounts(); c != last && !write(c) {
				return
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
