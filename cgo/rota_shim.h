/*
 * rota_shim.h: the plain-C view of a job that the job_submit shim hands to
 * Go, and the changes Go hands back. Only C types with fixed meaning cross
 * this line; Slurm's job_desc_msg_t (whose layout changes every release)
 * stays on the C side, in job_submit_rota.c.
 */
#ifndef ROTA_SHIM_H
#define ROTA_SHIM_H

#include <stdint.h>

/* Time values as Slurm writes them. */
#define ROTA_NO_VAL    0xfffffffeU
#define ROTA_INFINITE  0xffffffffU

typedef struct {
	int modify;               /* 1 for job_modify, 0 for job_submit */
	uint32_t job_id;          /* job_modify only */
	uint32_t uid;             /* submit_uid: who submits or updates */
	const char *tres_per_job; /* NULL when unset */
	const char *tres_per_node;
	const char *tres_per_socket;
	const char *tres_per_task;
	const char *account;
	const char *qos;          /* --qos; NULL when unset (the association's default) */
	const char *partition;
	const char *name;
	uint32_t time_limit;      /* minutes; ROTA_NO_VAL unset, ROTA_INFINITE */
	uint32_t min_nodes;       /* ROTA_NO_VAL or 0 unset */
	uint32_t num_tasks;
	/* The job's shape, for the check that a GPU type can hold it: */
	uint32_t max_nodes;        /* ROTA_NO_VAL, ROTA_INFINITE or 0 unset */
	uint16_t ntasks_per_node;  /* 0xfffe (NO_VAL16), 0xffff or 0 unset */
	uint16_t sockets_per_node; /* likewise */
	char **spank_env;         /* "_SLURM_SPANK_OPTION_rota_..." entries */
	uint32_t spank_env_size;
	const char *features;     /* the job's constraint; NULL when unset */
	const char *script;       /* batch script (job_submit only), for its hash */
	uint64_t script_len;      /* strlen(script), measured in C: from Go it is a cgo call */
	/* Shelf keys only, where the user's jobs are placed by speeds learned
	 * per job name (wire.PlaceState.Learned): by_name, the job's name must
	 * equal the key's; else it must be none of not_names (the user's
	 * learned names, at most ROTA_SHELF_NOT_NAMES). */
	int by_name;
	char **not_names;
	uint32_t n_not_names;
} rota_job_t;

/* Every pointer is NULL for "leave as is", else malloc()ed by Go: the shim
 * copies it into Slurm's allocator and free()s it. */
typedef struct {
	char *tres_per_job;
	char *tres_per_node;
	char *tres_per_socket;
	char *tres_per_task;
	int set_time_limit;
	uint32_t time_limit;
	char *admin_comment;
	char *features;
	uint32_t hold_s;          /* begin no sooner than now + hold_s; 0 none */
} rota_change_t;

/*
 * The shelf (cgo/rota_shelf.c; plugin/submit/shelf.go says why): decisions
 * Go made in advance for submissions identical to ones it placed. A job
 * matches one of the shelf's keys (up to ROTA_SHELF_KEYS, each a request
 * Go placed recently) when every field that Go's decision reads is equal
 * byte for byte: uid, the four TRES strings, account, qos, partition,
 * constraint, job_id, time_limit, min_nodes, num_tasks, max_nodes,
 * ntasks_per_node, sockets_per_node and the SPANK env entries in order,
 * NULL counting as "" (uid, account and qos: the site's typed GPU limits
 * differ by user, account and QOS). script may differ, and name too unless
 * the controller learned speeds of the user's jobs by name: then a key
 * of a learned name (by_name) takes that name only, and any other key
 * no learned name (not_names); the shelf keeps them for the job's
 * record. job_modify never matches.
 *
 * The decisions form a tree: each node is the decision for a job of its
 * key after the jobs of the path above it were placed from the shelf, in
 * that order (every placement changes what the next one sees). The shelf
 * stands at a node (at first the root, above every node) and a job of key
 * k takes that node's child of key k, if Go decided one, and stands there.
 */
typedef struct {
	int32_t parent;       /* an earlier node's index, -1 for the root */
	uint32_t key;         /* the index of its key */
	rota_change_t change;
} rota_shelf_node_t;

typedef struct {
	uint64_t gen;         /* the stock the decision came from */
	uint32_t index;       /* the node taken in that stock */
	uint32_t uid;
	int64_t at_ns;        /* CLOCK_REALTIME when taken */
	char *name;           /* malloc()ed copies, NULL for none: */
	char *script;         /* the taker (Go) frees them */
	uint64_t script_len;
} rota_used_t;

/* Scripts longer than this are not copied for their hash: such jobs go
 * to Go, which hashes the script in place. */
#define ROTA_SHELF_MAX_SCRIPT (64 * 1024)
/* Records of taken decisions the shelf holds until Go takes them; a full
 * shelf sends jobs to Go. */
#define ROTA_SHELF_USED_MAX 512
/* At most this many keys, and nodes, in one stock. */
#define ROTA_SHELF_KEYS 8
#define ROTA_SHELF_NODES 1024
#define ROTA_SHELF_NOT_NAMES 16

/* Called from Go: the shelf copies what it keeps. Stock refuses (0) a
 * tree whose parents do not come before their children, whose keys are
 * out of range, or that gives a node two children of one key. */
uint64_t rota_shelf_stock(const rota_job_t *keys, uint32_t n_keys, const rota_shelf_node_t *nodes, uint32_t n,
			  int64_t valid_ns);
int rota_shelf_renew(uint64_t gen, int64_t valid_ns);
uint32_t rota_shelf_take(rota_used_t *dst, uint32_t cap);
int rota_shelf_clear(void);
/* Empties the shelf whatever was taken, and zeroes rota_shelf_misses;
 * the count of records dropped. */
uint32_t rota_shelf_reset(void);
/* Batch submissions the shelf did not serve since the last reset, by why:
 * it held no stock, its stock had expired, no decision for the job's
 * request where the shelf stands (no key like it, or not decided that
 * far), its records were full. */
void rota_shelf_misses(uint64_t out[4]);

/* Called from slurmctld's thread: if job matches a key and the node the
 * shelf stands at has a child of that key, apply() gets
 * the next decision (valid only during the call, which runs under the
 * shelf's lock) and 1 is returned; else 0 and nothing happened. */
int rota_shelf_serve(const rota_job_t *job, void (*apply)(const rota_change_t *change, void *arg), void *arg);

/* Implemented in job_submit_rota.c, called from Go: for the next for_ns
 * (0: no longer) every job passes through unchanged without entering Go,
 * as Go would pass it (no usable state from the controller, or no
 * connection to send decisions on). */
void rota_away(int64_t for_ns);
/* Implemented in job_submit_rota.c, called from Go at init: updates by
 * these uids pass through unchanged without entering Go, as Go's handler
 * passes them (submit.Trusted). 0 when there are too many to hold (Go
 * then keeps answering them itself, and sets none). */
int rota_trusted(const uint32_t *uids, uint32_t n);
/* Whether opt_out_accounts is set: while the controller is away the shim
 * still hands Go a job that names an account, so an opted-out one gets
 * its note. */
void rota_set_opt_out(int accounts);
/* The shim's counters (calls, ns, max_ns, skipped, shelf, away, trusted)
 * so far. */
void rota_shim_counts(uint64_t out[7]);

/* Frees a change's strings (malloc()ed), not the struct. */
void rota_change_free(rota_change_t *c);

/* Implemented in job_submit_rota.c: write one line to slurmctld's log. */
void rota_log(int error, const char *msg);

#endif
