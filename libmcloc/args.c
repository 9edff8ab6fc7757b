// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Arguments and return values of traced calls (uftrace's -A and -R): the
 * tracer's callback reads them from the registers a trampoline saved, as
 * arch's mcr_call_argregs() and the return trampoline's struct
 * mcr_retregs lay them out, and writes them as the DATA items of
 * <mcloc/control.h>, raw: formatting is the reader's.
 *
 * What a pointer points at (a string, a stack argument) is read with
 * process_vm_readv() on the process itself, never loaded: an argument
 * said to be a string may point anywhere (an uninitialised out-parameter,
 * freed memory), and the kernel's copy fails where a load would fault,
 * with no signal handler of ours in the program.  Where that call is
 * missing (qemu-user) or refused (a seccomp filter), /proc/self/maps says
 * which bytes are mapped readable before they are loaded: an unmapping by
 * another thread in between could still fault, which the first way
 * excludes.
 */
#include "args.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Stack arguments are read this far up at most: 32 integer arguments. */
#define ARG_INDEX_MAX 32

bool mcr_arg_valid(const struct mcloc_arg *a, bool ret)
{
	if (a->fmt < 1 || a->fmt > MCLOC_ARG_FMT_MAX ||
	    (a->size != 1 && a->size != 2 && a->size != 4 && a->size != 8) ||
	    (a->in != MCLOC_ARG_IN_INT && a->in != MCLOC_ARG_IN_FP))
		return false;
	if ((a->fmt == MCLOC_ARG_FLOAT && a->size < 4) ||
	    (a->fmt == MCLOC_ARG_STR && (a->size != 8 || a->in != MCLOC_ARG_IN_INT)))
		return false;
	if (ret)
		return a->index == 0;
	return a->index >= 1 && a->index <= (a->in == MCLOC_ARG_IN_FP ? 8 : ARG_INDEX_MAX);
}

/* 1: process_vm_readv() is missing or refused in this process. */
static int no_vm_readv;

/*
 * How many of the MAX bytes at P lie in a readable mapping, by
 * /proc/self/maps: its lines are "LO-HI PERMS ...", read a piece at a
 * time and parsed by a few states, as a signal handler may be here (no
 * allocation, no stdio).
 */
static size_t readable_by_maps(uintptr_t p, size_t max)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	char buf[1024];
	uintptr_t lo = 0, hi = 0;
	unsigned state = 0;	/* 0: LO, 1: HI, 2: the first perm, 3: to the line's end */
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return 0;
	while (!got && (n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n && !got; i++) {
			char c = buf[i];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

			if (c == '\n') {
				state = 0;
				lo = hi = 0;
			} else if (state == 0 && d >= 0) {
				lo = lo << 4 | (uintptr_t)d;
			} else if (state == 1 && d >= 0) {
				hi = hi << 4 | (uintptr_t)d;
			} else if (state < 2) {
				state++;	/* ('-', then ' ') */
			} else if (state == 2) {
				if (c == 'r' && p >= lo && p < hi)
					got = hi - p < max ? hi - p : max;
				state = 3;
			}
		}
	}
	close(fd);
	return got;
}

/* Up to N bytes at P into OUT, as many as are readable from P on. */
static size_t read_mem(uintptr_t p, uint8_t *out, size_t n)
{
	if (!__atomic_load_n(&no_vm_readv, __ATOMIC_RELAXED)) {
		/* (Two pieces at a page boundary: a copy stops at the piece
		 * that faults, and keeps the bytes before it.) */
		size_t first = 4096 - (p & 4095);

		first = first < n ? first : n;
		struct iovec local = { out, n };
		struct iovec remote[2] = { { (void *)p, first }, { (void *)(p + first), n - first } };
		ssize_t got = syscall(SYS_process_vm_readv, getpid(), &local, 1, remote,
				      n > first ? 2 : 1, 0);

		if (got >= 0)
			return (size_t)got;
		if (errno != ENOSYS && errno != EPERM)
			return 0;
		__atomic_store_n(&no_vm_readv, 1, __ATOMIC_RELAXED);
	}
	size_t k = readable_by_maps(p, n);

	memcpy(out, (const void *)p, k);
	return k;
}

static size_t put_item(uint8_t *out, unsigned fmt, const void *val, size_t len)
{
	out[0] = (uint8_t)fmt;
	out[1] = (uint8_t)len;
	memcpy(out + 2, val, len);
	return 2 + len;
}

/* The item of A, whose register or stack word is RAW (HAVE: it could be
 * read), for the return value or not. */
static size_t capture(const struct mcloc_arg *a, uint64_t raw, bool have, bool ret, uint8_t *out)
{
	unsigned fmt = a->fmt | (ret ? MCLOC_DATA_RET : 0);
	uint8_t s[MCLOC_ARG_STR_MAX + 1];

	if (!have)
		return put_item(out, fmt | MCLOC_DATA_BAD, NULL, 0);
	if (a->fmt != MCLOC_ARG_STR)
		return put_item(out, fmt, &raw, a->size);
	if (!raw)
		return put_item(out, fmt | MCLOC_DATA_NULL, NULL, 0);
	size_t n = read_mem((uintptr_t)raw, s, sizeof(s));

	if (!n)
		return put_item(out, fmt | MCLOC_DATA_BAD, &raw, sizeof(raw));
	size_t len = strnlen((const char *)s, n);

	/* (No NUL in what was read: the string is longer than what is kept,
	 * or runs into memory that cannot be read.) */
	if (len == n) {
		len = len < MCLOC_ARG_STR_MAX ? len : MCLOC_ARG_STR_MAX;
		fmt |= MCLOC_DATA_CUT;
	}
	return put_item(out, fmt, s, len);
}

size_t mcr_args_capture(const struct mcloc_args_ent *e, const struct mcr_argregs *ar,
			uint8_t *out)
{
	int saved = errno;	/* (the interrupted code's, in a signal handler) */
	size_t len = 0;

	for (unsigned k = 0; k < e->nargs && k < MCLOC_ARGS_MAX; k++) {
		const struct mcloc_arg *a = &e->args[k];
		uint64_t raw = 0;
		bool have = ar != NULL;

		if (have && a->in == MCLOC_ARG_IN_FP) {
			memcpy(&raw, ar->fp + (size_t)(a->index - 1) * ar->fp_stride, sizeof(raw));
		} else if (have && a->index <= ar->ni) {
			raw = ar->i[a->index - 1];
		} else if (have) {
			const uint64_t *at = ar->stack ? ar->stack + (a->index - ar->ni - 1) : NULL;

			have = at && read_mem((uintptr_t)at, (uint8_t *)&raw, sizeof(raw)) ==
					     sizeof(raw);
		}
		len += capture(a, raw, have, false, out + len);
	}
	errno = saved;
	return len;
}

size_t mcr_ret_capture(const struct mcloc_arg *ret, const struct mcr_retregs *rr, uint8_t *out)
{
	int saved = errno;
	uint64_t raw = rr->i[0];

	if (ret->in == MCLOC_ARG_IN_FP)
		memcpy(&raw, &rr->fp[0], sizeof(raw));
	size_t len = capture(ret, raw, true, true, out);

	errno = saved;
	return len;
}
