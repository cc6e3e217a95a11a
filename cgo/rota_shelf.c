/*
 * rota_shelf.c: decisions the plugin's Go half made in advance, served to
 * matching submissions on slurmctld's thread without entering Go.
 *
 * Entering Go from a thread it has not seen (each slurmctld RPC runs on a
 * new one) costs about 50 us before any of Rota's code runs. In a loop of
 * sbatch, most submissions ask the same as the one before, and in a queue
 * fed by many users most ask one of a few requests seen lately; for
 * those, Go (plugin/submit/shelf.go) decides the next few placements
 * ahead, in the same state and with the same rule, for every order in
 * which those requests may come (a tree: rota_shim.h), and stocks them
 * here. A submission whose decision-relevant fields are byte-for-byte
 * those of one of the stock's keys takes the decision for that key below
 * the node the shelf stands at; the shelf records who took it, and Go
 * takes those records within a poll (20 ms), counts the placements and
 * sends the decisions to the controller. Nothing here parses a request
 * or decides anything: anything not identical, or not decided ahead,
 * goes to Go.
 *
 * Compiled into job_submit_rota.so through plugin/shelf (which tests it
 * from Go); job_submit_rota.c calls rota_shelf_serve.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rota_shim.h"

static pthread_mutex_t shelf_mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
	uint64_t gen;            /* 0: empty */
	uint64_t last_gen;       /* gens are never reused */
	rota_job_t keys[ROTA_SHELF_KEYS]; /* n_keys; their strings are the shelf's copies */
	uint32_t n_keys;
	rota_change_t *changes;  /* n nodes' decisions */
	/* kids[0]: the root's children by key; kids[i + 1]: node i's; -1 none */
	int32_t (*kids)[ROTA_SHELF_KEYS];
	uint32_t n;
	int32_t at;              /* the node the shelf stands at, -1 the root */
	uint64_t until_ns;       /* CLOCK_MONOTONIC */
	rota_used_t used[ROTA_SHELF_USED_MAX];
	uint32_t n_used;
} shelf;

/* A lock-free hint for the common case of an empty shelf. */
static int shelf_open;

/* Why batch jobs the shelf did not serve went to Go (rota_shelf_misses). */
static uint64_t miss_empty, miss_expired, miss_unmatched, miss_full;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int64_t real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + (int64_t) ts.tv_nsec;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* same: equal, NULL counting as "" (Go reads both as ""). */
static int same(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

void rota_change_free(rota_change_t *c)
{
	free(c->tres_per_job);
	free(c->tres_per_node);
	free(c->tres_per_socket);
	free(c->tres_per_task);
	free(c->admin_comment);
	free(c->features);
}

static void free_strv(char **v, uint32_t n)
{
	for (uint32_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* copy_strv copies the non-NULL entries of src[0..n), in order; -1 when
 * out of memory (what was copied is in *dst and *dst_n, for free_strv). */
static int copy_strv(char ***dst, uint32_t *dst_n, char *const *src, uint32_t n)
{
	*dst = NULL;
	*dst_n = 0;
	if (!n || !src)
		return 0;
	if (!(*dst = calloc(n, sizeof(char *))))
		return -1;
	for (uint32_t i = 0; i < n; i++)
		if (src[i] && !((*dst)[(*dst_n)++] = strdup(src[i])))
			return -1;
	return 0;
}

static void free_key(rota_job_t *k)
{
	free((char *) k->tres_per_job);
	free((char *) k->tres_per_node);
	free((char *) k->tres_per_socket);
	free((char *) k->tres_per_task);
	free((char *) k->account);
	free((char *) k->qos);
	free((char *) k->partition);
	free((char *) k->features);
	free((char *) k->name);
	free_strv(k->not_names, k->n_not_names);
	free_strv(k->spank_env, k->spank_env_size);
	memset(k, 0, sizeof(*k));
}

/* empty_locked drops the stock (not the used records). */
static void empty_locked(void)
{
	for (uint32_t i = 0; i < shelf.n; i++)
		rota_change_free(&shelf.changes[i]);
	free(shelf.changes);
	shelf.changes = NULL;
	free(shelf.kids);
	shelf.kids = NULL;
	shelf.n = 0;
	shelf.at = -1;
	for (uint32_t k = 0; k < shelf.n_keys; k++)
		free_key(&shelf.keys[k]);
	shelf.n_keys = 0;
	shelf.gen = 0;
	__atomic_store_n(&shelf_open, 0, __ATOMIC_RELEASE);
}

/* copy_key keeps the fields a match compares (and nothing else: the
 * job's own script is not part of the key, nor its name unless by_name).
 * Non-NULL SPANK entries only, in order, as Go reads them. */
static int copy_key(rota_job_t *dst, const rota_job_t *k)
{
	memset(dst, 0, sizeof(*dst));
	dst->job_id = k->job_id;
	dst->uid = k->uid;
	dst->time_limit = k->time_limit;
	dst->min_nodes = k->min_nodes;
	dst->num_tasks = k->num_tasks;
	dst->max_nodes = k->max_nodes;
	dst->ntasks_per_node = k->ntasks_per_node;
	dst->sockets_per_node = k->sockets_per_node;
	dst->tres_per_job = dup_or_null(k->tres_per_job);
	dst->tres_per_node = dup_or_null(k->tres_per_node);
	dst->tres_per_socket = dup_or_null(k->tres_per_socket);
	dst->tres_per_task = dup_or_null(k->tres_per_task);
	dst->account = dup_or_null(k->account);
	dst->qos = dup_or_null(k->qos);
	dst->partition = dup_or_null(k->partition);
	dst->features = dup_or_null(k->features);
	dst->by_name = k->by_name;
	if (k->by_name && k->name && !(dst->name = strdup(k->name)))
		return -1;
	if (!k->by_name && (k->n_not_names > ROTA_SHELF_NOT_NAMES ||
			    copy_strv(&dst->not_names, &dst->n_not_names, k->not_names, k->n_not_names) < 0))
		return -1;
	return copy_strv(&dst->spank_env, &dst->spank_env_size, k->spank_env, k->spank_env_size);
}

static int copy_change(rota_change_t *dst, const rota_change_t *c)
{
	memset(dst, 0, sizeof(*dst));
	dst->set_time_limit = c->set_time_limit;
	dst->time_limit = c->time_limit;
	dst->hold_s = c->hold_s;
	if ((c->tres_per_job && !(dst->tres_per_job = strdup(c->tres_per_job))) ||
	    (c->tres_per_node && !(dst->tres_per_node = strdup(c->tres_per_node))) ||
	    (c->tres_per_socket && !(dst->tres_per_socket = strdup(c->tres_per_socket))) ||
	    (c->tres_per_task && !(dst->tres_per_task = strdup(c->tres_per_task))) ||
	    (c->admin_comment && !(dst->admin_comment = strdup(c->admin_comment))) ||
	    (c->features && !(dst->features = strdup(c->features))))
		return -1;
	return 0;
}

uint64_t rota_shelf_stock(const rota_job_t *keys, uint32_t n_keys, const rota_shelf_node_t *nodes, uint32_t n,
			  int64_t valid_ns)
{
	uint64_t gen = 0;

	if (n == 0 || n > ROTA_SHELF_NODES || n_keys == 0 || n_keys > ROTA_SHELF_KEYS || valid_ns <= 0)
		return 0;
	pthread_mutex_lock(&shelf_mu);
	if (shelf.n_used > 0) /* Go has not counted those yet */
		goto out;
	empty_locked();
	shelf.changes = calloc(n, sizeof(*shelf.changes));
	shelf.kids = malloc((n + 1) * sizeof(*shelf.kids));
	if (!shelf.changes || !shelf.kids)
		goto fail;
	memset(shelf.kids, 0xff, (n + 1) * sizeof(*shelf.kids)); /* every entry -1 */
	for (uint32_t k = 0; k < n_keys; k++) {
		shelf.n_keys = k + 1; /* freed by empty_locked if the copy fails */
		if (copy_key(&shelf.keys[k], &keys[k]) < 0)
			goto fail;
	}
	for (uint32_t i = 0; i < n; i++) {
		int32_t *slot;

		if (nodes[i].parent < -1 || nodes[i].parent >= (int32_t) i || nodes[i].key >= n_keys)
			goto fail; /* not a tree in order: refused */
		slot = &shelf.kids[nodes[i].parent + 1][nodes[i].key];
		if (*slot != -1)
			goto fail; /* two decisions for one place */
		*slot = (int32_t) i;
		shelf.n = i + 1;
		if (copy_change(&shelf.changes[i], &nodes[i].change) < 0)
			goto fail;
	}
	shelf.gen = gen = ++shelf.last_gen;
	shelf.until_ns = mono_ns() + (uint64_t) valid_ns;
	__atomic_store_n(&shelf_open, 1, __ATOMIC_RELEASE);
	goto out;
fail:
	empty_locked(); /* out of memory, or not a tree: jobs go to Go */
out:
	pthread_mutex_unlock(&shelf_mu);
	return gen;
}

int rota_shelf_renew(uint64_t gen, int64_t valid_ns)
{
	int ok;

	pthread_mutex_lock(&shelf_mu);
	ok = gen != 0 && shelf.gen == gen && valid_ns > 0;
	if (ok)
		shelf.until_ns = mono_ns() + (uint64_t) valid_ns;
	pthread_mutex_unlock(&shelf_mu);
	return ok;
}

uint32_t rota_shelf_take(rota_used_t *dst, uint32_t cap)
{
	uint32_t n;

	pthread_mutex_lock(&shelf_mu);
	n = shelf.n_used < cap ? shelf.n_used : cap;
	memcpy(dst, shelf.used, n * sizeof(*dst));
	memmove(shelf.used, shelf.used + n, (shelf.n_used - n) * sizeof(*dst));
	shelf.n_used -= n;
	pthread_mutex_unlock(&shelf_mu);
	return n;
}

int rota_shelf_clear(void)
{
	int ok;

	pthread_mutex_lock(&shelf_mu);
	ok = shelf.n_used == 0;
	if (ok)
		empty_locked();
	pthread_mutex_unlock(&shelf_mu);
	return ok;
}

uint32_t rota_shelf_reset(void)
{
	uint32_t dropped;

	pthread_mutex_lock(&shelf_mu);
	empty_locked();
	dropped = shelf.n_used;
	miss_empty = miss_expired = miss_unmatched = miss_full = 0;
	for (uint32_t i = 0; i < shelf.n_used; i++) {
		free(shelf.used[i].name);
		free(shelf.used[i].script);
	}
	shelf.n_used = 0;
	pthread_mutex_unlock(&shelf_mu);
	return dropped;
}

static int spank_same(const rota_job_t *job, const rota_job_t *k)
{
	uint32_t j = 0;

	for (uint32_t i = 0; job->spank_env && i < job->spank_env_size; i++) {
		if (!job->spank_env[i])
			continue;
		if (j >= k->spank_env_size || strcmp(job->spank_env[i], k->spank_env[j]) != 0)
			return 0;
		j++;
	}
	return j == k->spank_env_size;
}

/* name_ok: the job's name takes this key's decision (rota_shim.h). */
static int name_ok(const rota_job_t *job, const rota_job_t *k)
{
	if (k->by_name)
		return same(job->name, k->name);
	for (uint32_t i = 0; i < k->n_not_names; i++)
		if (same(job->name, k->not_names[i]))
			return 0;
	return 1;
}

static int matches(const rota_job_t *job, const rota_job_t *k)
{
	return !job->modify && job->job_id == k->job_id && job->uid == k->uid && job->time_limit == k->time_limit &&
	       job->min_nodes == k->min_nodes && job->num_tasks == k->num_tasks &&
	       job->max_nodes == k->max_nodes && job->ntasks_per_node == k->ntasks_per_node &&
	       job->sockets_per_node == k->sockets_per_node &&
	       same(job->tres_per_node, k->tres_per_node) && same(job->tres_per_job, k->tres_per_job) &&
	       same(job->tres_per_socket, k->tres_per_socket) && same(job->tres_per_task, k->tres_per_task) &&
	       same(job->partition, k->partition) && same(job->account, k->account) &&
	       same(job->qos, k->qos) &&
	       same(job->features, k->features) && spank_same(job, k) && name_ok(job, k);
}

/* next_locked is the node a job takes from where the shelf stands, -1
 * none: the child of the first key it matches (Go's keys are distinct
 * requests, so it matches one at most). */
static int32_t next_locked(const rota_job_t *job)
{
	for (uint32_t k = 0; k < shelf.n_keys; k++)
		if (matches(job, &shelf.keys[k]))
			return shelf.kids[shelf.at + 1][k];
	return -1;
}

void rota_shelf_misses(uint64_t out[4])
{
	pthread_mutex_lock(&shelf_mu);
	out[0] = __atomic_load_n(&miss_empty, __ATOMIC_RELAXED);
	out[1] = miss_expired;
	out[2] = miss_unmatched;
	out[3] = miss_full;
	pthread_mutex_unlock(&shelf_mu);
}

int rota_shelf_serve(const rota_job_t *job, void (*apply)(const rota_change_t *change, void *arg), void *arg)
{
	rota_used_t *u;
	int32_t node;
	int hit = 0;

	/* An allocation without a script (salloc, srun) is interactive:
	 * never one of the batch jobs the shelf holds decisions for. */
	if (!job->script || job->script_len > ROTA_SHELF_MAX_SCRIPT || job->modify)
		return 0;
	if (!__atomic_load_n(&shelf_open, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&miss_empty, 1, __ATOMIC_RELAXED);
		return 0;
	}
	pthread_mutex_lock(&shelf_mu);
	if (!shelf.gen) {
		miss_empty++;
		goto out;
	}
	if (shelf.n_used >= ROTA_SHELF_USED_MAX) {
		miss_full++;
		goto out;
	}
	if (mono_ns() >= shelf.until_ns) {
		miss_expired++;
		goto out;
	}
	if ((node = next_locked(job)) < 0) {
		miss_unmatched++;
		goto out;
	}
	u = &shelf.used[shelf.n_used];
	memset(u, 0, sizeof(*u));
	if ((job->name && !(u->name = strdup(job->name))) ||
	    (job->script && !(u->script = malloc(job->script_len + 1)))) {
		free(u->name);
		goto out; /* out of memory: Go decides */
	}
	if (job->script) {
		memcpy(u->script, job->script, job->script_len);
		u->script[job->script_len] = 0;
		u->script_len = job->script_len;
	}
	u->gen = shelf.gen;
	u->index = (uint32_t) node;
	u->uid = job->uid;
	u->at_ns = real_ns();
	apply(&shelf.changes[node], arg);
	shelf.at = node;
	shelf.n_used++;
	hit = 1;
out:
	pthread_mutex_unlock(&shelf_mu);
	return hit;
}
