// Package shelf is the Go side of the C shim's shelf (cgo/rota_shelf.c):
// decisions made in advance that slurmctld's thread serves to matching
// submissions without entering Go. Shelf implements submit.Shelf over it.
//
// The C code is linked into whatever binary imports this package; in
// job_submit_rota.so the shim (cgo/job_submit_rota.c) calls
// rota_shelf_serve for every GPU submission before it calls Go.
package shelf

/*
#cgo CFLAGS: -I${SRCDIR}/../../cgo -Wall
#include <stdlib.h>
#include <string.h>
#include "rota_shim.h"

// copy_out is Serve's apply: the change outlives the shelf's lock.
static void copy_out(const rota_change_t *c, void *arg)
{
	rota_change_t *o = arg;
	*o = *c;
	o->tres_per_job = c->tres_per_job ? strdup(c->tres_per_job) : NULL;
	o->tres_per_node = c->tres_per_node ? strdup(c->tres_per_node) : NULL;
	o->tres_per_socket = c->tres_per_socket ? strdup(c->tres_per_socket) : NULL;
	o->tres_per_task = c->tres_per_task ? strdup(c->tres_per_task) : NULL;
	o->admin_comment = c->admin_comment ? strdup(c->admin_comment) : NULL;
	o->features = c->features ? strdup(c->features) : NULL;
}

static int serve_copy(const rota_job_t *job, rota_change_t *out)
{
	return rota_shelf_serve(job, copy_out, out);
}
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire/hints"
)

// Shelf is the shim's one shelf (there is one per process).
type Shelf struct{}

var _ submit.Shelf = Shelf{}

// Stock implements submit.Shelf.
func (Shelf) Stock(keys []submit.Job, nodes []submit.Node, validFor time.Duration) (uint64, bool) {
	if len(nodes) == 0 || len(keys) == 0 || len(keys) > submit.MaxShelfKeys || len(nodes) > submit.MaxShelfNodes {
		return 0, false
	}
	var a arena
	defer a.free()
	ks := (*C.rota_job_t)(a.calloc(len(keys), unsafe.Sizeof(C.rota_job_t{})))
	ns := (*C.rota_shelf_node_t)(a.calloc(len(nodes), unsafe.Sizeof(C.rota_shelf_node_t{})))
	if ks == nil || ns == nil {
		return 0, false // out of memory: jobs go to Go
	}
	for i := range keys {
		if !a.fill(&unsafe.Slice(ks, len(keys))[i], &keys[i]) {
			return 0, false
		}
	}
	dsts := unsafe.Slice(ns, len(nodes))
	for i := range nodes {
		dsts[i].parent = C.int32_t(nodes[i].Parent)
		dsts[i].key = C.uint32_t(nodes[i].Key)
		a.change(&dsts[i].change, &nodes[i].Change)
	}
	gen := uint64(C.rota_shelf_stock(ks, C.uint32_t(len(keys)), ns, C.uint32_t(len(nodes)), C.int64_t(validFor)))
	return gen, gen != 0
}

// Renew implements submit.Shelf.
func (Shelf) Renew(gen uint64, validFor time.Duration) bool {
	return C.rota_shelf_renew(C.uint64_t(gen), C.int64_t(validFor)) != 0
}

// Take implements submit.Shelf: each record's script is hashed here, off
// slurmctld's thread, and the shelf's copies are freed.
func (Shelf) Take(dst []submit.Used) []submit.Used {
	var buf [64]C.rota_used_t
	for {
		n := int(C.rota_shelf_take(&buf[0], C.uint32_t(len(buf))))
		for _, u := range buf[:n] {
			rec := submit.Used{Gen: uint64(u.gen), Index: int(u.index), UID: uint32(u.uid), At: time.Unix(0, int64(u.at_ns))}
			if u.name != nil {
				rec.Name = C.GoString(u.name)
			}
			if u.script != nil {
				rec.ScriptHash = hints.ScriptHash(unsafe.Slice((*byte)(unsafe.Pointer(u.script)), int(u.script_len)))
			}
			C.free(unsafe.Pointer(u.name))
			C.free(unsafe.Pointer(u.script))
			dst = append(dst, rec)
		}
		if n < len(buf) {
			return dst
		}
	}
}

// Clear implements submit.Shelf.
func (Shelf) Clear() bool { return C.rota_shelf_clear() != 0 }

// Reset empties the shelf whatever was taken from it (the plugin's init
// and fini: no Go is left to take the records) and says how many records
// it dropped.
func (Shelf) Reset() int { return int(C.rota_shelf_reset()) }

// Serve is what the shim does for a submission before calling Go: the
// next decision for job if it matches the stock. For tests and
// benchmarks; slurmctld's thread calls rota_shelf_serve itself.
func (Shelf) Serve(job *submit.Job, script []byte) (submit.Change, bool) {
	var a arena
	defer a.free()
	j := a.job(job)
	if script != nil {
		j.script = (*C.char)(a.bytes(script))
		j.script_len = C.uint64_t(len(script))
	}
	var out C.rota_change_t
	if C.serve_copy(j, &out) == 0 {
		return submit.Change{}, false
	}
	ch := submit.Change{
		TresPerJob: gostr(out.tres_per_job), TresPerNode: gostr(out.tres_per_node),
		TresPerSocket: gostr(out.tres_per_socket), TresPerTask: gostr(out.tres_per_task),
		Features: gostr(out.features),
	}
	if out.set_time_limit != 0 {
		t := uint32(out.time_limit)
		ch.TimeLimit = &t
	}
	ch.HoldS = uint32(out.hold_s)
	if s := gostr(out.admin_comment); s != nil {
		ch.AdminComment = *s
	}
	for _, p := range []*C.char{out.tres_per_job, out.tres_per_node, out.tres_per_socket, out.tres_per_task, out.admin_comment, out.features} {
		C.free(unsafe.Pointer(p))
	}
	return ch, true
}

func gostr(p *C.char) *string {
	if p == nil {
		return nil
	}
	s := C.GoString(p)
	return &s
}

// arena holds the C memory made for one call, freed together after it:
// the shelf copies what it keeps.
type arena struct{ ptrs []unsafe.Pointer }

func (a *arena) free() {
	for _, p := range a.ptrs {
		C.free(p)
	}
}

func (a *arena) str(s string) *C.char {
	p := C.CString(s)
	a.ptrs = append(a.ptrs, unsafe.Pointer(p))
	return p
}

// opt is NULL for nil (leave as is), else a copy of *s.
func (a *arena) opt(s *string) *C.char {
	if s == nil {
		return nil
	}
	return a.str(*s)
}

func (a *arena) bytes(b []byte) unsafe.Pointer {
	p := C.CBytes(b)
	a.ptrs = append(a.ptrs, p)
	return p
}

func (a *arena) calloc(n int, size uintptr) unsafe.Pointer {
	p := C.calloc(C.size_t(n), C.size_t(size))
	if p != nil {
		a.ptrs = append(a.ptrs, p)
	}
	return p
}

// job is j as the shim fills rota_job_t for a submission; "" goes as
// NULL, which the shelf counts as "" anyway.
func (a *arena) job(j *submit.Job) *C.rota_job_t {
	k := (*C.rota_job_t)(a.calloc(1, unsafe.Sizeof(C.rota_job_t{})))
	if k == nil || !a.fill(k, j) {
		panic("shelf: out of memory") // tests only (Serve)
	}
	return k
}

// fill writes j into k; false when out of memory.
func (a *arena) fill(k *C.rota_job_t, j *submit.Job) bool {
	if j.Modify {
		k.modify = 1
	}
	k.job_id = C.uint32_t(j.JobID)
	k.uid = C.uint32_t(j.UID)
	k.time_limit = C.uint32_t(j.TimeLimit)
	k.min_nodes = C.uint32_t(j.MinNodes)
	k.num_tasks = C.uint32_t(j.NumTasks)
	k.max_nodes = C.uint32_t(j.MaxNodes)
	k.ntasks_per_node = C.uint16_t(j.TasksPerNode)
	k.sockets_per_node = C.uint16_t(j.SocketsPerNode)
	if j.NameKeyed {
		k.by_name = 1
	}
	var ok bool
	if k.not_names, ok = a.strs(j.NotNames); !ok {
		return false
	}
	k.n_not_names = C.uint32_t(len(j.NotNames))
	for _, f := range []struct {
		dst **C.char
		s   string
	}{{&k.tres_per_job, j.TresPerJob}, {&k.tres_per_node, j.TresPerNode}, {&k.tres_per_socket, j.TresPerSocket},
		{&k.tres_per_task, j.TresPerTask}, {&k.account, j.Account}, {&k.qos, j.QOS}, {&k.partition, j.Partition}, {&k.name, j.Name},
		{&k.features, j.Features}} {
		if f.s != "" {
			*f.dst = a.str(f.s)
		}
	}
	if k.spank_env, ok = a.strs(j.SpankEnv); !ok {
		return false
	}
	k.spank_env_size = C.uint32_t(len(j.SpankEnv))
	return true
}

// strs copies ss into an array of C strings (NULL for none); false when
// out of memory.
func (a *arena) strs(ss []string) (**C.char, bool) {
	if len(ss) == 0 {
		return nil, true
	}
	arr := (**C.char)(a.calloc(len(ss), unsafe.Sizeof((*C.char)(nil))))
	if arr == nil {
		return nil, false
	}
	for i, s := range ss {
		unsafe.Slice(arr, len(ss))[i] = a.str(s)
	}
	return arr, true
}

func (a *arena) change(dst *C.rota_change_t, ch *submit.Change) {
	dst.tres_per_job = a.opt(ch.TresPerJob)
	dst.tres_per_node = a.opt(ch.TresPerNode)
	dst.tres_per_socket = a.opt(ch.TresPerSocket)
	dst.tres_per_task = a.opt(ch.TresPerTask)
	dst.features = a.opt(ch.Features)
	if ch.TimeLimit != nil {
		dst.set_time_limit = 1
		dst.time_limit = C.uint32_t(*ch.TimeLimit)
	}
	// A hold (a job for another cluster, a service replica) is part of
	// the decision: without it a job served from the shelf started at once.
	dst.hold_s = C.uint32_t(ch.HoldS)
	if ch.AdminComment != "" {
		dst.admin_comment = a.str(ch.AdminComment)
	}
}
