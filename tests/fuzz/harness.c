// SPDX-License-Identifier: GPL-2.0-or-later
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];
static char path[512];

/* The directory and whatever a tool left in it, at exit. */
static void clean(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' || (e->d_name[1] && strcmp(e->d_name, "..")))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

const char *fz_path(const char *name)
{
	if (!dir[0]) {
		const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

		snprintf(dir, sizeof(dir), "%s/mcloc-fuzz.%d", base, (int)getpid());
		if (mkdir(dir, 0700) < 0 && access(dir, W_OK) < 0)
			fz_fail("%s: %s", dir, strerror(errno));
		atexit(clean);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

const char *fz_put(const char *name, const uint8_t *data, size_t size)
{
	const char *p = fz_path(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) < 0)
		fz_fail("%s: %s", p, strerror(errno));
	return p;
}

void fz_fail(const char *fmt, ...)
{
	const char *log = getenv("MCLOC_FUZZ_LOG");
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", msg);
	if (log) {
		FILE *f = fopen(log, "a");

		if (f) {
			fprintf(f, "%d: %s\n", (int)getpid(), msg);
			fclose(f);
		}
	}
	abort();
}

void fz_quiet(void)
{
	int fd;

	if (getenv("MCLOC_FUZZ_VERBOSE"))
		return;
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	dup2(fd, 1);
	dup2(fd, 2);
	close(fd);
}
