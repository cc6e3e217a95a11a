// Command jobsubmit is Slurm's job_submit/rota plugin, built with
// -buildmode=c-shared into job_submit_rota.so and loaded by slurmctld.
//
// The C shim (cgo/job_submit_rota.c) owns every Slurm structure; this file
// converts its plain rota_job_t to submit.Job, runs submit.Handler, and
// hands back malloc()ed strings. Every exported function recovers from
// panics: a panic here would take slurmctld down with it.
//
// Rules that hold inside slurmctld: never call signal.Notify (the daemon
// owns signals); init may run again after fini (scontrol reconfigure after
// JobSubmitPlugins changed; a plain reconfigure keeps the plugin), so
// state is rebuilt, never assumed; the Go runtime cannot be unloaded.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../cgo -Wall
// slurm_* symbols come from slurmctld at load time. A c-shared build allows
// that anyway; this flag lets a plain `go build ./...` link too (the
// resulting executable does nothing).
#cgo LDFLAGS: -Wl,--unresolved-symbols=ignore-in-object-files
#include <stdlib.h>
#include <string.h>
#include "rota_shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/breaker"
	"github.com/rota-hpc/rota/plugin/shelf"
	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire/hints"
)

var (
	// Conditions that would otherwise log a line per job: each is logged
	// when it starts and when it ends.
	noController = outage{start: "no controller answers placements; jobs pass through unchanged until one does",
		end: "a controller answers placements again"}
	noState = outage{start: "jobs pass through unchanged until the controller's placement state arrives",
		end: "the controller's placement state is here; GPU jobs are placed by Rota"}
	queueFull = outage{start: "decision records are not being sent; jobs pass through unchanged until they are",
		end: "decision records are being sent again; GPU jobs are placed by Rota"}
	// Time spent in rota_go_job since init, logged at fini: what the
	// plugin cost slurmctld (scripts/bench-submit reads it).
	calls, totalNs, maxNs atomic.Int64
	mu                    sync.RWMutex
	handler               *submit.Handler
	// stopStats ends the stats file's writer (stats.go), if one runs.
	stopStats chan struct{}
	log       = zerolog.New(slurmLog{}).Level(zerolog.InfoLevel)
)

//export rota_go_init
func rota_go_init(path *C.char) {
	defer recoverAndLog("init")
	p := "job_submit_rota.conf"
	if path != nil {
		p = C.GoString(path)
	}
	cfg, err := submit.LoadConfig(p)
	if err != nil {
		log.Error().Err(err).Str("config", p).Msg("config unusable; every job passes through unchanged until it is fixed and slurmctld reconfigured")
	}
	lvl := zerolog.InfoLevel
	if cfg.Debug {
		lvl = zerolog.DebugLevel
	}
	mu.Lock()
	defer mu.Unlock()
	log = log.Level(lvl)
	if handler != nil { // a second init after fini or reconfigure
		handler.Close()
		handler = nil
	}
	resetShelf()
	setTrusted(cfg.TrustedUIDs)
	optOut := 0
	if len(cfg.OptOutAccounts) > 0 {
		optOut = 1
	}
	C.rota_set_opt_out(C.int(optOut))
	// This load's: the Go runtime outlives a reload on 22.05 (nodelete).
	loadedNs.Store(time.Now().UnixNano())
	states.Store(0)
	if stopStats != nil {
		close(stopStats)
		stopStats = nil
	}
	if cfg.StatsFile != "" {
		stopStats = make(chan struct{})
		go writeStats(cfg.StatsFile, stopStats)
	}
	h, err := submit.Open(cfg, submit.Hooks{
		OnEvent: func(warn bool, msg string) {
			if warn {
				log.Warn().Msg(msg)
			} else {
				log.Info().Msg(msg)
			}
		},
		OnBreaker: func(_, to breaker.State) {
			switch to {
			case breaker.Open:
				log.Warn().Dur("cooldown", cfg.BreakerCooldown).Msg("controller not answering in time; passing GPU jobs through unchanged without asking until a probe succeeds")
			case breaker.Closed:
				log.Info().Msg("controller answering again; GPU jobs are placed by Rota")
			}
		},
		// The shim then passes GPU jobs without entering Go.
		PassThrough: func(d time.Duration) { C.rota_away(C.int64_t(d)) },
		Shelf:       shelf.Shelf{},
		OnState: func(bytes int, decode time.Duration) {
			states.Add(1)
			stateBytes.Store(int64(bytes))
			stateDecodeNs.Store(decode.Nanoseconds())
		},
	})
	if err != nil {
		log.Error().Err(err).Msg("cannot set up the NATS client; jobs pass through unchanged")
	}
	handler = h
	log.Info().Str("config", p).Bool("enabled", cfg.Enabled).Str("nats", cfg.NATSURL).Str("placement", cfg.Placement).
		Bool("decide_ahead", cfg.DecideAhead && cfg.Placement == submit.PlacementLocal).Dur("deadline", cfg.Deadline).Msg("loaded")
}

// setTrusted hands the shim the uids whose updates pass untouched, so it
// answers them without entering Go (the controller's rounds send
// thousands). A list too long for the shim stays with Go's handler, which
// answers the same.
func setTrusted(uids []uint32) {
	var p *C.uint32_t
	if len(uids) > 0 {
		p = (*C.uint32_t)(unsafe.Pointer(&uids[0]))
	}
	if C.rota_trusted(p, C.uint32_t(len(uids))) == 0 {
		C.rota_trusted(nil, 0)
		log.Warn().Int("trusted_uids", len(uids)).Msg("more trusted_uids than the shim holds; their updates enter Go, which passes them as before, at a little more cost to slurmctld")
	}
}

// resetShelf empties the shim's shelf when the Local that stocked it is
// gone: no one would take its records.
func resetShelf() {
	if n := (shelf.Shelf{}).Reset(); n > 0 {
		log.Warn().Int("jobs", n).Msg("jobs placed from the shelf as the plugin stopped; their decisions were not recorded (rota explain will not find them)")
	}
}

// rota_go_fini gets the shim's own count of calls and their time (the
// whole call, entering Go included), and of the jobs it handled without
// calling Go: passed for having no "gpu" in their request, placed from
// the shelf, passed while the controller was away, updates by a trusted
// uid.
//
//export rota_go_fini
func rota_go_fini(shimCalls, shimNs, shimMaxNs, shimSkipped, shimShelf, shimAway, shimTrusted C.uint64_t) {
	defer recoverAndLog("fini")
	mu.Lock()
	defer mu.Unlock()
	if shimSkipped > 0 {
		log.Info().Uint64("jobs", uint64(shimSkipped)).Msg("jobs without GPUs passed through since the plugin was loaded")
	}
	if shimTrusted > 0 {
		log.Info().Uint64("updates", uint64(shimTrusted)).Msg("job updates by trusted_uids (the controller's rounds, admins) passed through unchanged since the plugin was loaded")
	}
	if shimAway > 0 {
		log.Info().Uint64("jobs", uint64(shimAway)).Msg("GPU jobs passed through unchanged without entering Go while the controller was away, since the plugin was loaded")
	}
	if n := calls.Swap(0); n > 0 || shimCalls > 0 {
		ev := log.Info()
		if n > 0 {
			total, longest := totalNs.Swap(0), maxNs.Swap(0)
			ev = ev.Int64("jobs", n).Int64("mean_us", total/n/1000).Int64("max_us", longest/1000)
		}
		if shimCalls > 0 {
			ev = ev.Uint64("call_mean_us", uint64(shimNs/shimCalls/1000)).Uint64("call_max_us", uint64(shimMaxNs/1000))
		}
		ev.Uint64("from_shelf", uint64(shimShelf)).Msg("time spent in the plugin since it was loaded (jobs, mean/max: the GPU jobs that entered Go, time in Go; call_*: every GPU job's whole call from slurmctld's thread, entering Go included; from_shelf: GPU jobs placed by a decision made ahead, without entering Go)")
	}
	if handler != nil {
		handler.Close()
	}
	if stopStats != nil {
		close(stopStats)
		stopStats = nil
	}
	resetShelf()
	handler = nil
}

//export rota_go_job
func rota_go_job(j *C.rota_job_t, out *C.rota_change_t) {
	defer recoverAndLog("job")
	mu.RLock()
	h := handler
	mu.RUnlock()
	if h == nil {
		return
	}
	start := time.Now()
	defer func() { // runs after the job is rewritten: all of the plugin's time
		ns := int64(time.Since(start))
		calls.Add(1)
		totalNs.Add(ns)
		for m := maxNs.Load(); ns > m && !maxNs.CompareAndSwap(m, ns); m = maxNs.Load() {
		}
	}()
	job := toJob(j)
	ch, outcome, err := h.Handle(context.Background(), &job)
	took := time.Since(start)
	ev := log.Debug()
	switch {
	case errors.Is(err, submit.ErrBreakerOpen), errors.Is(err, submit.ErrNotConnected):
		// Known and already logged once, when the connection dropped or
		// the breaker opened: one line per job would flood the log.
		ev = log.Debug().Err(err)
	case errors.Is(err, submit.ErrNoController):
		noController.begin(err)
		ev = log.Debug().Err(err)
	case errors.Is(err, submit.ErrNoState), errors.Is(err, submit.ErrStaleState):
		noState.begin(err) // local placement without a live controller
		ev = log.Debug().Err(err)
	case errors.Is(err, submit.ErrQueueFull):
		queueFull.begin(err)
		ev = log.Debug().Err(err)
	case err != nil:
		ev = log.Warn().Err(err)
	}
	if outcome == submit.Rewritten || outcome == submit.Kept {
		noController.over()
		noState.over()
		queueFull.over()
	}
	ev.Str("outcome", string(outcome)).Stringer("took", took).Bool("modify", job.Modify).Uint32("uid", job.UID).
		Str("name", job.Name).Msg(outcomeMessage(outcome))
	if err != nil {
		return
	}
	out.tres_per_job = cstr(ch.TresPerJob)
	out.tres_per_node = cstr(ch.TresPerNode)
	out.tres_per_socket = cstr(ch.TresPerSocket)
	out.tres_per_task = cstr(ch.TresPerTask)
	out.features = cstr(ch.Features)
	if ch.TimeLimit != nil {
		out.set_time_limit = 1
		out.time_limit = C.uint32_t(*ch.TimeLimit)
	}
	out.hold_s = C.uint32_t(ch.HoldS)
	if ch.AdminComment != "" {
		out.admin_comment = C.CString(ch.AdminComment)
	}
}

// outage is a condition that fails jobs open: logged once as it starts
// and once as it ends, where one line per job would flood slurmctld's log.
type outage struct {
	on         atomic.Bool
	start, end string
}

func (o *outage) begin(err error) {
	if o.on.CompareAndSwap(false, true) {
		log.Warn().Err(err).Msg(o.start)
	}
}

func (o *outage) over() {
	if o.on.Load() && o.on.CompareAndSwap(true, false) {
		log.Info().Msg(o.end)
	}
}

func outcomeMessage(o submit.Outcome) string {
	if o == submit.FailOpen {
		return "job passes through unchanged"
	}
	return "handled job"
}

func toJob(j *C.rota_job_t) submit.Job {
	job := submit.Job{
		Modify:         j.modify != 0,
		JobID:          uint32(j.job_id),
		UID:            uint32(j.uid),
		TresPerJob:     gostr(j.tres_per_job),
		TresPerNode:    gostr(j.tres_per_node),
		TresPerSocket:  gostr(j.tres_per_socket),
		TresPerTask:    gostr(j.tres_per_task),
		Account:        gostr(j.account),
		QOS:            gostr(j.qos),
		Partition:      gostr(j.partition),
		Name:           gostr(j.name),
		TimeLimit:      uint32(j.time_limit),
		MinNodes:       uint32(j.min_nodes),
		NumTasks:       uint32(j.num_tasks),
		MaxNodes:       uint32(j.max_nodes),
		TasksPerNode:   uint16(j.ntasks_per_node),
		SocketsPerNode: uint16(j.sockets_per_node),
		Features:       gostr(j.features),
	}
	if j.script != nil {
		// Hashed in place: scripts can be large, and only the hash leaves.
		job.ScriptHash = hints.ScriptHash(unsafe.Slice((*byte)(unsafe.Pointer(j.script)), int(j.script_len)))
	}
	if n := int(j.spank_env_size); n > 0 && n < 1<<16 && j.spank_env != nil {
		env := unsafe.Slice(j.spank_env, n)
		for _, e := range env {
			if e != nil {
				job.SpankEnv = append(job.SpankEnv, C.GoString(e))
			}
		}
	}
	return job
}

func gostr(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// cstr returns a malloc()ed copy for the shim, or NULL for "unchanged".
func cstr(s *string) *C.char {
	if s == nil {
		return nil
	}
	return C.CString(*s)
}

func recoverAndLog(where string) {
	if r := recover(); r != nil {
		log.Error().Str("in", where).Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).
			Msg("recovered from a panic; the job passes through unchanged. Please report this")
	}
}

// slurmLog sends each zerolog event to slurmctld's log as one line of
// key=value text: warnings and errors through slurm_error, the rest
// through slurm_info.
type slurmLog struct{}

func (slurmLog) Write(p []byte) (int, error) {
	return slurmLog{}.WriteLevel(zerolog.InfoLevel, p)
}

func (slurmLog) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	line := formatLine(p)
	cs := C.CString(line)
	defer C.free(unsafe.Pointer(cs))
	isErr := C.int(0)
	if l >= zerolog.WarnLevel {
		isErr = 1
	}
	C.rota_log(isErr, cs)
	return len(p), nil
}

func main() {}
