// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * An LD_PRELOAD shim that makes one call of a tool's write path fail, for
 * tests/faults.bats.  The write path: opening a file for writing, every
 * write to it (write, writev, pwrite, pwritev, copy_file_range,
 * ftruncate, fsync, fdatasync), closing it, what it keeps of the file it
 * replaces (fchmod, fchown, fsetxattr), naming it (linkat), unlink and
 * rename.
 *
 *   MCLOC_FAULT=N:MODE   the Nth such call (from 1) fails, as MODE says:
 *     eio      -1, EIO
 *     enospc   -1, ENOSPC
 *     eacces   -1, EACCES
 *     erofs    -1, EROFS
 *     short    a write does half of what was asked; every write after it
 *              fails with ENOSPC (a disk filling up); other calls: EIO
 *   MCLOC_FAULT_COUNT=FILE   at exit, the number of such calls into FILE
 *   MCLOC_FAULT_NO_TMPFILE=1 O_TMPFILE is refused (EOPNOTSUPP, not counted),
 *                            as on a file system without it
 *   MCLOC_FAULT_NO_PROC=1    a linkat() from a /proc path fails (ENOENT, not
 *                            counted), as in a chroot without /proc
 *
 * Only the process it is preloaded into: it takes itself out of the
 * environment, so that a linker objpatch link runs writes undisturbed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAXFD 1024

static long nth, calls;
static int mode_err = EIO;
static bool short_mode, filling, no_tmpfile, no_proc;
static const char *count_file;
static bool writable[MAXFD];

__attribute__((constructor)) static void shim_init(void)
{
	const char *f = getenv("MCLOC_FAULT");
	char *end;

	no_tmpfile = getenv("MCLOC_FAULT_NO_TMPFILE") != NULL;
	no_proc = getenv("MCLOC_FAULT_NO_PROC") != NULL;
	count_file = getenv("MCLOC_FAULT_COUNT");
	if (count_file)
		count_file = strdup(count_file);
	if (f) {
		nth = strtol(f, &end, 10);
		if (*end == ':') {
			end++;
			if (!strcmp(end, "enospc"))
				mode_err = ENOSPC;
			else if (!strcmp(end, "eacces"))
				mode_err = EACCES;
			else if (!strcmp(end, "erofs"))
				mode_err = EROFS;
			else if (!strcmp(end, "short"))
				short_mode = true;
		}
	}
	unsetenv("LD_PRELOAD");
	unsetenv("MCLOC_FAULT");
	unsetenv("MCLOC_FAULT_COUNT");
	unsetenv("MCLOC_FAULT_NO_TMPFILE");
	unsetenv("MCLOC_FAULT_NO_PROC");
}

__attribute__((destructor)) static void shim_fini(void)
{
	if (count_file) {
		FILE *f = fopen(count_file, "w");

		if (f) {
			fprintf(f, "%ld\n", calls);
			fclose(f);
		}
	}
}

#define REAL(name) static __typeof__(name) *real_##name; \
	if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

/* Whether this call fails: 1 (with errno set), 0 no; *HALF for short. */
static int fault(bool is_write, bool *half)
{
	if (half)
		*half = false;
	calls++;
	if (filling && is_write) {
		errno = ENOSPC;
		return 1;
	}
	if (calls != nth)
		return 0;
	if (short_mode && is_write && half) {
		*half = true;
		filling = true;
		return 0;
	}
	errno = short_mode ? EIO : mode_err;
	return 1;
}

static bool tracked(int fd)
{
	return fd >= 0 && fd < MAXFD && writable[fd];
}

static int opened(int fd, int flags)
{
	if (fd >= 0 && fd < MAXFD)
		writable[fd] = (flags & O_ACCMODE) != O_RDONLY;
	return fd;
}

/* The mode argument of an open that creates (read inside the variadic
 * function itself). */
#define MODE_ARG(flags, last) ({					\
	mode_t m_ = 0;							\
	if ((flags) & (O_CREAT | O_TMPFILE)) {				\
		va_list ap;						\
		va_start(ap, last);					\
		m_ = (mode_t)va_arg(ap, int);				\
		va_end(ap);						\
	}								\
	m_; })

/* Whether an open with FLAGS fails here (errno set). */
static bool open_fails(int flags)
{
	if ((flags & O_TMPFILE) == O_TMPFILE && no_tmpfile) {
		errno = EOPNOTSUPP;
		return true;
	}
	return (flags & O_ACCMODE) != O_RDONLY && fault(false, NULL);
}

int open(const char *path, int flags, ...)
{
	REAL(open);
	mode_t m = MODE_ARG(flags, flags);

	return open_fails(flags) ? -1 : opened(real_open(path, flags, m), flags);
}

int open64(const char *path, int flags, ...)
{
	return open(path, flags, MODE_ARG(flags, flags));
}

int openat(int dir, const char *path, int flags, ...)
{
	REAL(openat);
	mode_t m = MODE_ARG(flags, flags);

	return open_fails(flags) ? -1 : opened(real_openat(dir, path, flags, m), flags);
}

int openat64(int dir, const char *path, int flags, ...)
{
	return openat(dir, path, flags, MODE_ARG(flags, flags));
}

int dup(int fd)
{
	REAL(dup);
	int n = real_dup(fd);

	if (n >= 0 && n < MAXFD)
		writable[n] = tracked(fd);
	return n;
}

int close(int fd)
{
	REAL(close);
	bool t = tracked(fd);

	if (fd >= 0 && fd < MAXFD)
		writable[fd] = false;
	if (t && fault(false, NULL)) {
		int e = errno;

		real_close(fd);	/* (Linux closes it all the same) */
		errno = e;
		return -1;
	}
	return real_close(fd);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(write);
	bool half;

	if (tracked(fd) && fault(true, &half))
		return -1;
	return real_write(fd, buf, tracked(fd) && half ? n / 2 : n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	REAL(pwrite);
	bool half;

	if (tracked(fd) && fault(true, &half))
		return -1;
	return real_pwrite(fd, buf, tracked(fd) && half ? n / 2 : n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

/* A vector cut to half its bytes. */
static int halve(const struct iovec *iov, int cnt, struct iovec *out)
{
	size_t total = 0, want;
	int k = 0;

	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	want = total / 2;
	for (; k < cnt && want; k++) {
		out[k] = iov[k];
		if (out[k].iov_len > want)
			out[k].iov_len = want;
		want -= out[k].iov_len;
	}
	return k;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	REAL(writev);
	bool half;

	if (tracked(fd) && fault(true, &half))
		return -1;
	if (tracked(fd) && half && cnt > 0 && cnt <= 1024) {
		struct iovec h[1024];

		return real_writev(fd, h, halve(iov, cnt, h));
	}
	return real_writev(fd, iov, cnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	REAL(pwritev);
	bool half;

	if (tracked(fd) && fault(true, &half))
		return -1;
	if (tracked(fd) && half && cnt > 0 && cnt <= 1024) {
		struct iovec h[1024];

		return real_pwritev(fd, h, halve(iov, cnt, h), off);
	}
	return real_pwritev(fd, iov, cnt, off);
}

ssize_t copy_file_range(int in, off_t *ip, int out, off_t *op, size_t n, unsigned flags)
{
	REAL(copy_file_range);
	bool half;

	if (tracked(out) && fault(true, &half))
		return -1;
	return real_copy_file_range(in, ip, out, op, tracked(out) && half ? n / 2 : n, flags);
}

int ftruncate(int fd, off_t len)
{
	REAL(ftruncate);
	if (tracked(fd) && fault(false, NULL))
		return -1;
	return real_ftruncate(fd, len);
}
int ftruncate64(int fd, off_t len)
{
	return ftruncate(fd, len);
}

int fsync(int fd)
{
	REAL(fsync);
	if (tracked(fd) && fault(false, NULL))
		return -1;
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(fdatasync);
	if (tracked(fd) && fault(false, NULL))
		return -1;
	return real_fdatasync(fd);
}

int fchmod(int fd, mode_t m)
{
	REAL(fchmod);
	if (fault(false, NULL))
		return -1;
	return real_fchmod(fd, m);
}

int fchown(int fd, uid_t u, gid_t g)
{
	REAL(fchown);
	if (fault(false, NULL))
		return -1;
	return real_fchown(fd, u, g);
}

int fsetxattr(int fd, const char *name, const void *v, size_t n, int flags)
{
	REAL(fsetxattr);
	if (fault(false, NULL))
		return -1;
	return real_fsetxattr(fd, name, v, n, flags);
}

int rename(const char *a, const char *b)
{
	REAL(rename);
	if (fault(false, NULL))
		return -1;
	return real_rename(a, b);
}

int linkat(int da, const char *a, int db, const char *b, int flags)
{
	REAL(linkat);
	if (no_proc && !strncmp(a, "/proc/", 6)) {
		errno = ENOENT;
		return -1;
	}
	if (fault(false, NULL))
		return -1;
	return real_linkat(da, a, db, b, flags);
}

int unlink(const char *p)
{
	REAL(unlink);
	if (fault(false, NULL))
		return -1;
	return real_unlink(p);
}

int renameat(int da, const char *a, int db, const char *b)
{
	REAL(renameat);
	if (fault(false, NULL))
		return -1;
	return real_renameat(da, a, db, b);
}
