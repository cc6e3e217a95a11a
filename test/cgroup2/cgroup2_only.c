/*
 * cgroup2_only.so: an LD_PRELOAD library for the dev cluster's slurmd (and
 * the slurmstepd it starts) on a host that boots cgroups in the hybrid
 * layout (v1 controllers, cgroup2 at /sys/fs/cgroup/unified), as the
 * project's machines do. Slurm's cgroup/v2 plugin refuses such a host
 * ("Hybrid mode is not supported"): it reads /proc/self/cgroup and wants
 * the unified hierarchy's "0::" line alone. Sites boot pure cgroup v2
 * (RHEL/Rocky 9, Debian 12+), where this library is not needed; here it
 * lets Slurm's real cgroup/v2 plugin run on the real unified hierarchy:
 * reads of /proc/<pid>/cgroup return only the "0::" line.
 * Nothing else changes. Job processes do not inherit it (slurmstepd builds
 * their environment).
 *
 * Built by scripts/dev-cluster with the host's cc (ROTA_DEV_CGROUP=v2).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

/* is_proc_cgroup: path is /proc/<pid|self|thread-self>/cgroup. Slurm reads
 * its own and (26.05) init's, /proc/1/cgroup, to find the cgroup
 * root; each must show the unified hierarchy alone. */
static int is_proc_cgroup(const char *path)
{
	const char *p;

	if (!path || strncmp(path, "/proc/", 6))
		return 0;
	p = path + 6;
	if (!strncmp(p, "self/", 5))
		p += 5;
	else if (!strncmp(p, "thread-self/", 12))
		p += 12;
	else {
		const char *d = p;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p == d || *p != '/')
			return 0;
		p++;
	}
	return !strcmp(p, "cgroup");
}

/* unified_only returns a memory file holding the 0:: lines of path, at
 * offset 0; -1 (errno set) when path cannot be read. */
static int unified_only(const char *path, int flags)
{
	static int (*real_open)(const char *, int, ...);
	char buf[16384];
	ssize_t n, got = 0;
	int in, out;

	if (!real_open)
		real_open = (int (*)(const char *, int, ...)) dlsym(RTLD_NEXT, "open");
	in = real_open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -1;
	while (got < (ssize_t) sizeof(buf) - 1 && (n = read(in, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += n;
	close(in);
	buf[got] = '\0';
	out = memfd_create("cgroup2-only", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
	if (out < 0)
		return -1;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			next++;
		if (!strncmp(line, "0::", 3)) {
			size_t len = next ? (size_t) (next - line) : strlen(line);
			if (write(out, line, len) != (ssize_t) len) {
				close(out);
				return -1;
			}
		}
	}
	lseek(out, 0, SEEK_SET);
	return out;
}

#define FORWARD_OPEN(name, ...)                                                \
	static int (*real)(__VA_ARGS__);                                       \
	mode_t mode = 0;                                                       \
	if (flags & (O_CREAT | O_TMPFILE)) {                                   \
		va_list ap;                                                    \
		va_start(ap, flags);                                           \
		mode = va_arg(ap, mode_t);                                     \
		va_end(ap);                                                    \
	}                                                                      \
	if (!real)                                                             \
		real = (int (*)(__VA_ARGS__)) dlsym(RTLD_NEXT, name);

int open(const char *path, int flags, ...)
{
	FORWARD_OPEN("open", const char *, int, ...)
	if (is_proc_cgroup(path))
		return unified_only(path, flags);
	return real(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	FORWARD_OPEN("open64", const char *, int, ...)
	if (is_proc_cgroup(path))
		return unified_only(path, flags);
	return real(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	FORWARD_OPEN("openat", int, const char *, int, ...)
	if (path[0] == '/' && is_proc_cgroup(path))
		return unified_only(path, flags);
	return real(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	FORWARD_OPEN("openat64", int, const char *, int, ...)
	if (path[0] == '/' && is_proc_cgroup(path))
		return unified_only(path, flags);
	return real(dirfd, path, flags, mode);
}

static FILE *fopen_common(const char *name, const char *path, const char *mode)
{
	FILE *(*real)(const char *, const char *) = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, name);

	if (is_proc_cgroup(path) && mode && mode[0] == 'r') {
		int fd = unified_only(path, strchr(mode, 'e') ? O_CLOEXEC : 0);
		return fd < 0 ? NULL : fdopen(fd, "r");
	}
	return real(path, mode);
}

FILE *fopen(const char *path, const char *mode)
{
	return fopen_common("fopen", path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	return fopen_common("fopen64", path, mode);
}
