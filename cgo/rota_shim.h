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
	const char *partition;
	const char *name;
	uint32_t time_limit;      /* minutes; ROTA_NO_VAL unset, ROTA_INFINITE */
	uint32_t min_nodes;       /* ROTA_NO_VAL or 0 unset */
	uint32_t num_tasks;
	char **spank_env;         /* "_SLURM_SPANK_OPTION_rota_..." entries */
	uint32_t spank_env_size;
	const char *features;     /* the job's constraint; NULL when unset */
	const char *script;       /* batch script (job_submit only), for its hash */
	uint64_t script_len;      /* strlen(script), measured in C: from Go it is a cgo call */
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
} rota_change_t;

/* Implemented in job_submit_rota.c: write one line to slurmctld's log. */
void rota_log(int error, const char *msg);

#endif
