/*
 * job_submit_rota.c: the C half of Slurm's job_submit/rota plugin.
 *
 * slurmctld loads job_submit_rota.so (a Go c-shared object: this file is
 * compiled into it through plugin/jobsubmit/shim.c). This file owns every
 * contact with Slurm's structures: it copies the fields Rota reads out of
 * job_desc_msg_t into a rota_job_t, calls Go, and writes the answer back
 * using Slurm's own allocator (slurm_xstrdup / slurm_xfree), because
 * slurmctld frees those strings with xfree.
 *
 * Build against the headers of the Slurm that will load it: plugin_version
 * must equal that slurmctld's SLURM_VERSION_NUMBER or it refuses the plugin
 * (and a job_submit plugin that fails to load stops slurmctld). See
 * docs/building-plugins.md.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>

#include "rota_shim.h"
#include "_cgo_export.h"

/* Exported by libslurmfull, which slurmctld links; resolved at load time. */
extern char *slurm_xstrdup(const char *str);
extern void slurm_xfree(void **ptr);
extern void slurm_info(const char *fmt, ...);
extern void slurm_error(const char *fmt, ...);
extern char *slurm_get_extra_conf_path(const char *conf_name);

const char plugin_name[] = "Rota heterogeneity-aware GPU placement";
const char plugin_type[] = "job_submit/rota";
/* Not const: the upgrade guard below may set it before slurmctld reads it. */
uint32_t plugin_version = SLURM_VERSION_NUMBER;

/*
 * The upgrade guard. slurmctld loads a job_submit plugin only when its
 * plugin_version is slurmctld's own release, micro included, and stops
 * ("fatal: failed to initialize job_submit plugin") when one fails to load:
 * a site that upgrades Slurm and forgets to rebuild Rota would have no
 * controller. slurmctld reads plugin_version after dlopen, and dlopen runs
 * constructors first; so this one asks the slurmctld binary that loads us
 * for its release (`slurmctld -V`) and, when that is not the release these
 * headers are of, takes that release as plugin_version and makes the plugin
 * a pass-through that never looks inside a job (job_desc_msg_t's layout may
 * differ), saying at init what to rebuild. Compiled out with
 * -DROTA_NO_VERSION_GUARD (to see what Slurm does without it).
 */
static uint32_t running_version;	/* != 0: the guard is on, pass everything */

/* release_of parses "slurm 24.11.6" or "slurm-wlm 22.05.8": 0 if neither. */
static uint32_t release_of(const char *out)
{
	const char *p = strrchr(out, ' ');
	unsigned maj, min, mic;

	if (!p || sscanf(p + 1, "%u.%u.%u", &maj, &min, &mic) != 3 ||
	    maj > 255 || min > 255 || mic > 255)
		return 0;
	return SLURM_VERSION_NUM(maj, min, mic);
}

/* slurmctld_release runs EXE -V (it prints its release and exits before
 * reading any configuration) and reads its answer, waiting at most 5 s. */
static uint32_t slurmctld_release(const char *exe)
{
	extern char **environ;
	char *argv[] = { (char *) exe, "-V", NULL };
	char out[128] = { 0 };
	size_t got = 0;
	int fds[2], null_fd;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	uint32_t v = 0;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return 0;
	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	if (null_fd >= 0) {
		posix_spawn_file_actions_adddup2(&fa, null_fd, 0);
		posix_spawn_file_actions_adddup2(&fa, null_fd, 2);
	}
	if (posix_spawn(&pid, exe, &fa, NULL, argv, environ) != 0)
		pid = -1;
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (null_fd >= 0)
		close(null_fd);
	if (pid > 0) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		while (got < sizeof(out) - 1 && poll(&pfd, 1, 5000) == 1) {
			ssize_t n = read(fds[0], out + got, sizeof(out) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t) n;
		}
		if (waitpid(pid, NULL, WNOHANG) == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		out[strcspn(out, "\n")] = '\0';
		v = release_of(out);
	}
	close(fds[0]);
	return v;
}

#ifndef ROTA_NO_VERSION_GUARD
__attribute__((constructor)) static void version_guard(void)
{
	char exe[PATH_MAX];
	const char *base;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	uint32_t v;

	if (n <= 0)
		return;
	exe[n] = '\0';
	base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	/* Only slurmctld loads job_submit plugins; anything else (a test, a
	 * tool that opens every plugin) keeps the compiled-in release.
	 * Debian's /usr/sbin/slurmctld is a link to slurmctld-wlm. */
	if (strncmp(base, "slurmctld", strlen("slurmctld")) != 0)
		return;
	v = slurmctld_release(exe);
	if (v == 0 || v == SLURM_VERSION_NUMBER)
		return;
	running_version = v;
	plugin_version = v;
}
#endif

static void version_str(uint32_t v, char *buf, size_t n)
{
	snprintf(buf, n, "%u.%02u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
}

void rota_log(int error, const char *msg)
{
	if (error)
		slurm_error("job_submit/rota: %s", msg);
	else
		slurm_info("job_submit/rota: %s", msg);
}

int init(void)
{
	char *path;

	if (running_version) {
		char built[16], running[16];

		version_str(SLURM_VERSION_NUMBER, built, sizeof(built));
		version_str(running_version, running, sizeof(running));
		slurm_error("job_submit/rota: built for Slurm %s but this slurmctld is %s: every job passes unchanged (Rota places none) until rota-slurm-plugins is rebuilt against Slurm %s's headers (rpmbuild --rebuild rota-slurm-plugins-*.src.rpm with slurm-devel %s installed; docs/install.md)",
			    built, running, running, running);
		return SLURM_SUCCESS;
	}
	path = slurm_get_extra_conf_path("job_submit_rota.conf");
	/* Go never fails init: a bad config means "pass everything through",
	 * which it logs; refusing to load would stop slurmctld. */
	rota_go_init(path);
	slurm_xfree((void **) &path);
	return SLURM_SUCCESS;
}

/* The plugin's whole cost to slurmctld's thread per call: Go's own
 * figure starts after the call has entered Go, and that entry (on a thread
 * Go has not seen, as each slurmctld RPC thread is) is a good part of it.
 * Logged by Go at fini; scripts/bench-submit reads it. */
static uint64_t shim_calls, shim_ns, shim_max_ns, shim_skipped, shim_shelf, shim_away, shim_trusted;

/*
 * The uids whose job updates pass untouched (trusted_uids, set by Go from
 * job_submit_rota.conf at init). Answered here, not in Go: the
 * controller's rounds send thousands of updates as such a user, each on a
 * fresh slurmctld RPC thread under the job write lock, and from 24.11 a
 * retype names the GPU in the update (TresPerNode), which would otherwise
 * enter Go for each one to learn what this array says.
 */
#define ROTA_MAX_TRUSTED 64
static uint32_t trusted_uids[ROTA_MAX_TRUSTED];
static uint32_t n_trusted;

/* Until when (CLOCK_MONOTONIC ns) jobs pass through without entering Go:
 * set by Go (rota_away) when the controller is away, so that an outage
 * costs each submission next to nothing rather than a call into Go that
 * would pass it anyway; a new state from the controller clears it, and it
 * lapses by itself (Go re-checks then). */
static uint64_t away_until_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void count_call(uint64_t ns)
{
	uint64_t m = __atomic_load_n(&shim_max_ns, __ATOMIC_RELAXED);
	__atomic_add_fetch(&shim_calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&shim_ns, ns, __ATOMIC_RELAXED);
	while (ns > m && !__atomic_compare_exchange_n(&shim_max_ns, &m, ns, 0,
						      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* The counters so far, for the stats file Go writes while the plugin
 * runs: from 23.11 slurmctld re-executes itself at a reconfigure and at
 * shutdown without calling fini, so fini's log line is not always there. */
void rota_shim_counts(uint64_t out[7])
{
	out[0] = __atomic_load_n(&shim_calls, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&shim_ns, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&shim_max_ns, __ATOMIC_RELAXED);
	out[3] = __atomic_load_n(&shim_skipped, __ATOMIC_RELAXED);
	out[4] = __atomic_load_n(&shim_shelf, __ATOMIC_RELAXED);
	out[5] = __atomic_load_n(&shim_away, __ATOMIC_RELAXED);
	out[6] = __atomic_load_n(&shim_trusted, __ATOMIC_RELAXED);
}

int fini(void)
{
	if (running_version)
		return SLURM_SUCCESS;
	rota_go_fini(__atomic_exchange_n(&shim_calls, 0, __ATOMIC_RELAXED),
		     __atomic_exchange_n(&shim_ns, 0, __ATOMIC_RELAXED),
		     __atomic_exchange_n(&shim_max_ns, 0, __ATOMIC_RELAXED),
		     __atomic_exchange_n(&shim_skipped, 0, __ATOMIC_RELAXED),
		     __atomic_exchange_n(&shim_shelf, 0, __ATOMIC_RELAXED),
		     __atomic_exchange_n(&shim_away, 0, __ATOMIC_RELAXED),
		     __atomic_exchange_n(&shim_trusted, 0, __ATOMIC_RELAXED));
	__atomic_store_n(&away_until_ns, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&n_trusted, 0, __ATOMIC_RELEASE);
	return SLURM_SUCCESS;
}

void rota_away(int64_t for_ns)
{
	__atomic_store_n(&away_until_ns, for_ns > 0 ? now_ns() + (uint64_t) for_ns : 0, __ATOMIC_RELEASE);
}

int rota_trusted(const uint32_t *uids, uint32_t n)
{
	if (n > ROTA_MAX_TRUSTED)
		return 0;
	/* Shrink first, so that a thread reading meanwhile sees only uids of
	 * the old list or the new one, never a half-written slot it counts. */
	__atomic_store_n(&n_trusted, 0, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < n; i++)
		__atomic_store_n(&trusted_uids[i], uids[i], __ATOMIC_RELAXED);
	__atomic_store_n(&n_trusted, n, __ATOMIC_RELEASE);
	return 1;
}

static int trusted(uint32_t uid)
{
	uint32_t n = __atomic_load_n(&n_trusted, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&trusted_uids[i], __ATOMIC_RELAXED) == uid)
			return 1;
	return 0;
}

/* set_str swaps a Slurm-owned string for a copy of s (NULL: keep). */
static void set_str(char **field, const char *s)
{
	if (!s)
		return;
	slurm_xfree((void **) field);
	*field = slurm_xstrdup(s);
}

static void append_admin_comment(job_desc_msg_t *job_desc, const char *s)
{
	if (!s)
		return;
	if (job_desc->admin_comment && job_desc->admin_comment[0]) {
		size_t n = strlen(job_desc->admin_comment) + strlen(s) + 3;
		char *both = malloc(n);
		if (both) {
			strcpy(both, job_desc->admin_comment);
			strcat(both, "; ");
			strcat(both, s);
			set_str(&job_desc->admin_comment, both);
			free(both);
		}
		return;
	}
	set_str(&job_desc->admin_comment, s);
}

/* apply_change writes a decision into the job (copies: c stays its
 * owner's). The shelf calls it under its lock. */
static void apply_change(const rota_change_t *c, void *arg)
{
	job_desc_msg_t *job_desc = arg;

	set_str(&job_desc->tres_per_job, c->tres_per_job);
	set_str(&job_desc->tres_per_node, c->tres_per_node);
	set_str(&job_desc->tres_per_socket, c->tres_per_socket);
	set_str(&job_desc->tres_per_task, c->tres_per_task);
	set_str(&job_desc->features, c->features);
	if (c->set_time_limit)
		job_desc->time_limit = c->time_limit;
	if (c->hold_s) {
		/* A service replica waits for the controller to spread it; a
		 * later --begin of the user's own stands. */
		time_t begin = time(NULL) + c->hold_s;

		if (job_desc->begin_time < begin)
			job_desc->begin_time = begin;
	}
	append_admin_comment(job_desc, c->admin_comment);
}

/*
 * may_ask_gpu: some TRES string of the request contains "gpu" or "shard".
 * One that does not cannot name a GPU or a part of one (the parser in
 * wire/gpureq reads a GPU only from an entry named "gpu", a shard, which
 * Go notes and leaves as asked, from one named "shard"), so Go would leave
 * it unchanged; deciding that here spares CPU jobs, most of a typical
 * cluster's, the call into Go, which costs tens of microseconds on a fresh
 * slurmctld RPC thread. A byte search, not a parse: anything that mentions
 * either goes to the one parser.
 */
static int may_ask_gpu(const job_desc_msg_t *d)
{
	const char *tres[] = { d->tres_per_job, d->tres_per_node,
			       d->tres_per_socket, d->tres_per_task };

	for (size_t i = 0; i < sizeof(tres) / sizeof(tres[0]); i++)
		if (tres[i] && (strstr(tres[i], "gpu") || strstr(tres[i], "shard")))
			return 1;
	return 0;
}

/*
 * names_nodes: the job may run only on nodes it names (-w), not on nodes it
 * excludes (--exclude), or only in a reservation. Then only those nodes'
 * GPU types can run it, and Rota does not know here which those are: a
 * type it chose might exist on none of them (sbatch -w <k80 node> given a
 * v100 would be refused: "Requested node configuration is not
 * available"). Such a job passes as asked, as under plain Slurm, with no
 * decision, so the controller's rounds leave it too. Except the successors
 * of inference services that Rota itself submits (--rota-kind=serve),
 * which exclude their siblings' nodes to spread (controller/serve): Rota
 * places those, as before.
 */
/* spank_env_has: the job's SPANK environment has an entry starting with
 * the n bytes of s (n = strlen(s) + 1: the whole entry). */
static int spank_env_has(const job_desc_msg_t *d, const char *s, size_t n)
{
	for (uint32_t i = 0; d->spank_job_env && i < d->spank_job_env_size; i++)
		if (d->spank_job_env[i] && !strncmp(d->spank_job_env[i], s, n))
			return 1;
	return 0;
}

static int is_serve(const job_desc_msg_t *d)
{
	static const char kind[] = "_SLURM_SPANK_OPTION_rota_rota_kind=serve";

	return spank_env_has(d, kind, sizeof(kind));
}

#define NAMES_NODES_NOTE \
	"rota: gpu as asked, time as asked: the job names its nodes " \
	"(-w, --exclude or --reservation), which only those nodes' types can run"

static int names_nodes(const job_desc_msg_t *d)
{
	if ((d->req_nodes && d->req_nodes[0]) || (d->reservation && d->reservation[0]))
		return 1;
	return d->exc_nodes && d->exc_nodes[0] && !is_serve(d);
}

/*
 * may_opt_out: the job may be opted out of Rota (a --rota option, or an
 * account while opt_out_accounts is set), which Go decides and notes in
 * the job even while the controller is away: the rounds adopt GPU jobs
 * with no note (controller/rounds/adopt.go), and must not adopt these.
 */
static int opt_out_accounts_set;

void rota_set_opt_out(int accounts)
{
	__atomic_store_n(&opt_out_accounts_set, accounts, __ATOMIC_RELEASE);
}

static int may_opt_out(const job_desc_msg_t *d)
{
	static const char opt[] = "_SLURM_SPANK_OPTION_rota_rota=";

	if (d->account && d->account[0] && __atomic_load_n(&opt_out_accounts_set, __ATOMIC_ACQUIRE))
		return 1;
	return spank_env_has(d, opt, sizeof(opt) - 1);
}

/*
 * The job id job_modify is given: 25.11 moved it into step_id, and from
 * 24.11 an `scontrol update` brings it only as the string job_id_str (the
 * number is NO_VAL). A job_submit sees NO_VAL: Slurm assigns the id after.
 */
static uint32_t job_id_of(const job_desc_msg_t *d)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	uint32_t id = d->step_id.job_id;
#else
	uint32_t id = d->job_id;
#endif
	if ((id == 0 || id == NO_VAL) && d->job_id_str && d->job_id_str[0]) {
		char *end;
		unsigned long v = strtoul(d->job_id_str, &end, 10);

		/* "123", not an array element "123_4" or a list: those
		 * keep NO_VAL, as before. */
		if (*end == '\0' && v > 0 && v < NO_VAL)
			id = (uint32_t) v;
	}
	return id;
}

static int handle(job_desc_msg_t *job_desc, uint32_t submit_uid, int modify)
{
	rota_job_t job;
	rota_change_t change;
	uint64_t start;

	if (modify && trusted(submit_uid)) {
		__atomic_add_fetch(&shim_trusted, 1, __ATOMIC_RELAXED);
		return SLURM_SUCCESS;
	}
	if (!may_ask_gpu(job_desc)) {
		__atomic_add_fetch(&shim_skipped, 1, __ATOMIC_RELAXED);
		return SLURM_SUCCESS;
	}
	if (names_nodes(job_desc)) {
		/* Said in the job, so an admin (and the differential test)
		 * can tell a job Rota chose to leave from one it never saw
		 * (failed open, plugin not loaded). No decision id: the
		 * rounds leave it. */
		if (!modify)
			append_admin_comment(job_desc, NAMES_NODES_NOTE);
		__atomic_add_fetch(&shim_skipped, 1, __ATOMIC_RELAXED);
		return SLURM_SUCCESS;
	}
	start = now_ns();
	if (start < __atomic_load_n(&away_until_ns, __ATOMIC_ACQUIRE) && !may_opt_out(job_desc)) {
		__atomic_add_fetch(&shim_away, 1, __ATOMIC_RELAXED);
		count_call(now_ns() - start);
		return SLURM_SUCCESS;
	}
	memset(&job, 0, sizeof(job));
	memset(&change, 0, sizeof(change));
	job.modify = modify;
	job.job_id = job_id_of(job_desc);
	job.uid = submit_uid;
	job.tres_per_job = job_desc->tres_per_job;
	job.tres_per_node = job_desc->tres_per_node;
	job.tres_per_socket = job_desc->tres_per_socket;
	job.tres_per_task = job_desc->tres_per_task;
	job.account = job_desc->account;
	job.qos = job_desc->qos;
	job.partition = job_desc->partition;
	job.name = job_desc->name;
	job.time_limit = job_desc->time_limit;
	job.min_nodes = job_desc->min_nodes;
	job.num_tasks = job_desc->num_tasks;
	job.max_nodes = job_desc->max_nodes;
	job.ntasks_per_node = job_desc->ntasks_per_node;
	job.sockets_per_node = job_desc->sockets_per_node;
	job.spank_env = job_desc->spank_job_env;
	job.spank_env_size = job_desc->spank_job_env_size;
	job.features = job_desc->features;
	job.script = modify ? NULL : job_desc->script;
	job.script_len = job.script ? strlen(job.script) : 0;

	/* A submission like the last one Go placed takes the decision Go
	 * made for it in advance (rota_shelf.c), without entering Go. */
	if (rota_shelf_serve(&job, apply_change, job_desc)) {
		__atomic_add_fetch(&shim_shelf, 1, __ATOMIC_RELAXED);
		count_call(now_ns() - start);
		return SLURM_SUCCESS;
	}

	/* Go recovers its own panics and answers "no change" on any error. */
	rota_go_job(&job, &change);

	apply_change(&change, job_desc);
	rota_change_free(&change);
	count_call(now_ns() - start);
	return SLURM_SUCCESS;
}

int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid, char **err_msg)
{
	(void) err_msg;
	if (running_version)
		return SLURM_SUCCESS;
	return handle(job_desc, submit_uid, 0);
}

/* job_record_t is slurmctld-internal; Rota never looks inside it. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid,
	       char **err_msg)
{
	(void) job_ptr;
	(void) err_msg;
	if (running_version)
		return SLURM_SUCCESS;
	return handle(job_desc, submit_uid, 1);
}
#else
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid)
{
	(void) job_ptr;
	if (running_version)
		return SLURM_SUCCESS;
	return handle(job_desc, submit_uid, 1);
}
#endif
