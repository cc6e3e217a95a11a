/*
 * spank_rota.c: Rota's SPANK plugin (plain C; slurmstepd runs SPANK code in
 * forked children where a Go runtime cannot live).
 *
 * On the submit side (sbatch/srun/salloc) it adds optional options:
 *   --rota=on|off                     let Rota choose GPU type and walltime
 *   --rota-steps=N                    the job's total training steps
 *   --rota-throughput=TYPE:RATE[,...] your own steps/s estimate per GPU type
 *   --rota-types=TYPE[,...]           the only GPU types Rota may choose
 *   --rota-kind=batch|interactive|serve
 *                                     what kind of job this is (docs/kinds.md)
 *   --rota-service=NAME               the inference service this job is a
 *                                     replica of
 *   --rota-gpu-mem=SIZE               the GPU memory the job needs per GPU
 *                                     (16G, 20480M): keeps it off smaller
 *                                     GPUs and MIG slices
 *   --rota-checkpoint-signal=SIG      the signal this job checkpoints on
 *                                     (declares that it can be migrated)
 *   --rota-chain[=on|off]             run past MaxTime as a chain of segments
 *                                     (docs/chains.md); off: never
 * Slurm hands their values to job_submit/rota in the job's spank env
 * (_SLURM_SPANK_OPTION_rota_<option>), where the controller's request is
 * built. Values are checked here so a typo fails at sbatch time with a
 * clear message instead of being ignored.
 *
 * On the node (slurmstepd) it creates <progress_dir>/<jobid>/, owned by the
 * job's user, and exports ROTA_JOB_ID, ROTA_PROGRESS_FILE and ROTA_READY_FILE
 * (a service replica creates it once it answers) into the job,
 * where a training loop may write its step count for the node agent, and
 * ROTA_CHECKPOINT_SIGNAL when the job declared one (the agent reads it).
 *
 * plugstack.conf:  optional /usr/lib64/slurm/spank_rota.so progress_dir=/run/rota/progress
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(rota, 1);

#define DEFAULT_PROGRESS_DIR "/run/rota/progress"

static char progress_dir[PATH_MAX] = DEFAULT_PROGRESS_DIR;

static int check_onoff(int val, const char *optarg, int remote);
static int check_steps(int val, const char *optarg, int remote);
static int check_throughput(int val, const char *optarg, int remote);
static int check_signal(int val, const char *optarg, int remote);
static int check_chain(int val, const char *optarg, int remote);
static int check_types(int val, const char *optarg, int remote);
static int check_kind(int val, const char *optarg, int remote);
static int check_service(int val, const char *optarg, int remote);
static int check_gpu_mem(int val, const char *optarg, int remote);
static int check_share(int val, const char *optarg, int remote);
static int check_model(int val, const char *optarg, int remote);

static struct spank_option rota_options[] = {
	{ "rota", "on|off",
	  "Let Rota choose this job's GPU type and walltime (default on).",
	  1, 0, check_onoff },
	{ "rota-steps", "N",
	  "Total training steps of this job, for Rota's walltime estimate.",
	  1, 1, check_steps },
	{ "rota-throughput", "TYPE:STEPS_PER_S[,...]",
	  "Your estimate of this job's steps/s per GPU type, e.g. v100:12.5,k80:3.",
	  1, 2, check_throughput },
	{ "rota-checkpoint-signal", "SIG",
	  "Signal this job saves a checkpoint on (USR1, USR2, TERM...); lets Rota move it between GPU types.",
	  1, 3, check_signal },
	{ "rota-chain", "on|off",
	  "Run this job past the partition's MaxTime as a chain of checkpointed segments (needs --rota-checkpoint-signal); off: never.",
	  2, 4, check_chain },
	{ "rota-types", "TYPE[,TYPE...]",
	  "The only GPU types Rota may give this job, e.g. v100,p100 (as --constraint=\"v100|p100\").",
	  1, 5, check_types },
	{ "rota-kind", "batch|interactive|serve",
	  "What this job is: batch training (default for sbatch), an interactive session (default for salloc/srun), or an inference service.",
	  1, 6, check_kind },
	{ "rota-service", "NAME",
	  "The inference service this job is a replica of (--rota-kind=serve); Rota spreads its replicas over nodes.",
	  1, 7, check_service },
	{ "rota-gpu-mem", "SIZE",
	  "GPU memory this job needs on each GPU, e.g. 16G or 20480M; Rota never gives it a smaller GPU or MIG slice.",
	  1, 8, check_gpu_mem },
	{ "rota-share", "yes|no",
	  "yes: Rota may run this one-GPU job on a GPU shared with another job where the two get more done together; no: never.",
	  1, 9, check_share },
	{ "rota-model", "NAME",
	  "What this job trains, as a job type of Rota's throughput table, e.g. 'ResNet-50 (batch size 64)'; lets Rota judge sharing a GPU.",
	  1, 10, check_model },
	SPANK_OPTIONS_TABLE_END
};

static int check_onoff(int val, const char *optarg, int remote)
{
	(void) val;
	(void) remote;
	if (optarg && (!strcmp(optarg, "on") || !strcmp(optarg, "off")))
		return 0;
	slurm_error("--rota: want on or off, got '%s'", optarg ? optarg : "");
	return -1;
}

static int check_steps(int val, const char *optarg, int remote)
{
	char *end = NULL;
	unsigned long long n;

	(void) val;
	(void) remote;
	if (!optarg || !*optarg || *optarg == '-')
		goto bad;
	errno = 0;
	n = strtoull(optarg, &end, 10);
	if (errno || *end || n == 0)
		goto bad;
	return 0;
bad:
	slurm_error("--rota-steps: want a positive whole number of steps, got '%s'", optarg ? optarg : "");
	return -1;
}

/* The end of the GPU type name at p: its characters are [A-Za-z0-9_.-]. */
static const char *type_name_end(const char *p)
{
	while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
	       (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.')
		p++;
	return p;
}

/* TYPE:RATE[,TYPE:RATE...]; TYPE of [A-Za-z0-9_.-], RATE a positive number. */
static int check_throughput(int val, const char *optarg, int remote)
{
	const char *p = optarg;

	(void) val;
	(void) remote;
	if (!p || !*p)
		goto bad;
	while (*p) {
		const char *t = p;
		char *end = NULL;
		double rate;

		p = type_name_end(p);
		if (p == t || *p != ':')
			goto bad;
		p++;
		errno = 0;
		rate = strtod(p, &end);
		if (errno || end == p || !(rate > 0) || rate > 1e9)
			goto bad;
		p = end;
		if (*p == ',')
			p++;
		else if (*p)
			goto bad;
	}
	return 0;
bad:
	slurm_error("--rota-throughput: want TYPE:STEPS_PER_S[,...] such as v100:12.5,k80:3, got '%s'",
		    optarg ? optarg : "");
	return -1;
}

/* TYPE[,TYPE...]; TYPE of [A-Za-z0-9_.-], starting alphanumeric. */
static int check_types(int val, const char *optarg, int remote)
{
	const char *p = optarg;

	(void) val;
	(void) remote;
	if (!p || !*p)
		goto bad;
	while (*p) {
		const char *t = p;

		p = type_name_end(p);
		if (p == t || p - t > 64 || (*p && *p != ','))
			goto bad;
		if (*p == ',' && !*++p)
			goto bad;
	}
	return 0;
bad:
	slurm_error("--rota-types: want GPU types such as v100,p100, got '%s'", optarg ? optarg : "");
	return -1;
}

static int check_kind(int val, const char *optarg, int remote)
{
	(void) val;
	(void) remote;
	if (optarg && (!strcasecmp(optarg, "batch") || !strcasecmp(optarg, "interactive") ||
		       !strcasecmp(optarg, "serve")))
		return 0;
	slurm_error("--rota-kind: want batch, interactive or serve, got '%s'", optarg ? optarg : "");
	return -1;
}

/* 1-64 of [A-Za-z0-9_.-], starting with a letter or digit (as wire/hints). */
static int check_service(int val, const char *optarg, int remote)
{
	const char *p = optarg;

	(void) val;
	(void) remote;
	if (!p || !*p || strlen(p) > 64)
		goto bad;
	for (int i = 0; p[i]; i++) {
		char c = p[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
			goto bad;
	}
	return 0;
bad:
	slurm_error("--rota-service: want a name of letters, digits, '_', '.' or '-' (at most 64), got '%s'",
		    optarg ? optarg : "");
	return -1;
}

/* A size as Slurm writes memory: a positive whole number of megabytes, or
 * with a K, M, G or T suffix (binary units); wire/hints reads the same. */
static int check_gpu_mem(int val, const char *optarg, int remote)
{
	char *end = NULL;
	unsigned long long n;

	(void) val;
	(void) remote;
	if (!optarg || *optarg < '0' || *optarg > '9')
		goto bad;
	errno = 0;
	n = strtoull(optarg, &end, 10);
	if (errno || n == 0 || n >= (1ULL << 40))
		goto bad;
	if (*end && (strchr("KkMmGgTt", *end) == NULL || end[1]))
		goto bad;
	return 0;
bad:
	slurm_error("--rota-gpu-mem: want a memory size such as 16G or 20480M, got '%s'", optarg ? optarg : "");
	return -1;
}

static int check_share(int val, const char *optarg, int remote)
{
	(void) val;
	(void) remote;
	if (optarg && (!strcmp(optarg, "yes") || !strcmp(optarg, "no")))
		return 0;
	slurm_error("--rota-share: want yes or no, got '%s'", optarg ? optarg : "");
	return -1;
}

/* A job type's name as the throughput table writes it: printable ASCII,
 * spaces and parentheses included, at most 128; wire/hints reads the same. */
static int check_model(int val, const char *optarg, int remote)
{
	const char *p = optarg;

	(void) val;
	(void) remote;
	if (!p || !*p || strlen(p) > 128 || *p == ' ')
		goto bad;
	for (; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			goto bad;
	return 0;
bad:
	slurm_error("--rota-model: want a job type of Rota's throughput table (printable, at most 128 characters), got '%s'",
		    optarg ? optarg : "");
	return -1;
}

/* Signals a job can catch; the node agent accepts the same names. */
static const char *catchable[] = {
	"HUP", "INT", "QUIT", "USR1", "USR2", "ALRM", "TERM", "CONT", "URG", "PWR", "XCPU", NULL
};

static int check_signal(int val, const char *optarg, int remote)
{
	const char *name = optarg;

	(void) val;
	(void) remote;
	if (name && !strncmp(name, "SIG", 3))
		name += 3;
	for (int i = 0; name && catchable[i]; i++)
		if (!strcmp(name, catchable[i]))
			return 0;
	slurm_error("--rota-checkpoint-signal: want a signal the job can catch, such as USR1, USR2 or TERM, got '%s'",
		    optarg ? optarg : "");
	return -1;
}

/* Optional argument: a bare --rota-chain means on. */
static int check_chain(int val, const char *optarg, int remote)
{
	(void) val;
	(void) remote;
	if (!optarg || !*optarg || !strcmp(optarg, "on") || !strcmp(optarg, "off"))
		return 0;
	slurm_error("--rota-chain: want on or off (or nothing, meaning on), got '%s'", optarg);
	return -1;
}

static void parse_args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		if (!strncmp(av[i], "progress_dir=", 13) && av[i][13] == '/')
			snprintf(progress_dir, sizeof(progress_dir), "%s", av[i] + 13);
		else
			slurm_error("spank_rota: ignoring unknown argument '%s' (known: progress_dir=/abs/path)", av[i]);
	}
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	parse_args(ac, av);
	for (struct spank_option *o = rota_options; o->name; o++) {
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("spank_rota: cannot register --%s", o->name);
			/* Not fatal: the job runs, without Rota's options. */
		}
	}
	return ESPANK_SUCCESS;
}

static int job_dir(spank_t sp, uint32_t *job_id, char *dir, size_t n)
{
	if (spank_get_item(sp, S_JOB_ID, job_id) != ESPANK_SUCCESS)
		return -1;
	if (snprintf(dir, n, "%s/%u", progress_dir, *job_id) >= (int) n)
		return -1;
	return 0;
}

/* Runs in slurmstepd as root, before privileges are dropped: make the
 * job's progress directory and give it to the job's user. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	uint32_t job_id;
	uid_t uid;
	gid_t gid;
	char dir[PATH_MAX];

	(void) ac;
	(void) av;
	if (!spank_remote(sp))
		return ESPANK_SUCCESS;
	if (job_dir(sp, &job_id, dir, sizeof(dir)) < 0)
		return ESPANK_SUCCESS;
	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
		return ESPANK_SUCCESS;
	if (mkdir(progress_dir, 0755) < 0 && errno != EEXIST) {
		slurm_error("spank_rota: cannot create %s: %m; job %u runs without progress reporting", progress_dir, job_id);
		return ESPANK_SUCCESS;
	}
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		slurm_error("spank_rota: cannot create %s: %m; job %u runs without progress reporting", dir, job_id);
		return ESPANK_SUCCESS;
	}
	if (chown(dir, uid, gid) < 0)
		slurm_error("spank_rota: cannot chown %s to %u:%u: %m", dir, (unsigned) uid, (unsigned) gid);
	return ESPANK_SUCCESS;
}

/* Runs in the job's steps: tell the job where to report progress. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	uint32_t job_id;
	char dir[PATH_MAX], file[PATH_MAX + 16], id[16];

	(void) ac;
	(void) av;
	if (job_dir(sp, &job_id, dir, sizeof(dir)) < 0)
		return ESPANK_SUCCESS;
	snprintf(id, sizeof(id), "%u", job_id);
	snprintf(file, sizeof(file), "%s/progress", dir);
	spank_setenv(sp, "ROTA_JOB_ID", id, 1);
	spank_setenv(sp, "ROTA_PROGRESS_FILE", file, 1);
	/* A service replica creates this file once it answers requests
	 * (docs/serve.md); the node agent reports it. */
	snprintf(file, sizeof(file), "%s/ready", dir);
	spank_setenv(sp, "ROTA_READY_FILE", file, 1);

	for (struct spank_option *o = rota_options; o->name; o++) {
		char *sig = NULL;
		if (strcmp(o->name, "rota-checkpoint-signal"))
			continue;
		if (spank_option_getopt(sp, o, &sig) == ESPANK_SUCCESS && sig && *sig)
			spank_setenv(sp, "ROTA_CHECKPOINT_SIGNAL", sig, 1);
	}
	return ESPANK_SUCCESS;
}
