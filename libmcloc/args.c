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
 * missing (qemu-user) or refused (a seccomp filter), the kernel copies
 * them through a pipe instead, which fails the same way.  A thread under
 * a seccomp filter never tries it: a filter may kill rather than refuse
 * what it does not allow (systemd's @system-service leaves it out, with
 * the rest of @debug, and kills by default), where read, write and pipe2
 * are what any filter lets through.
 */
#include "args.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
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

/* Two pieces of the N bytes at P, split at a page boundary: a copy by
 * the kernel takes a piece whole or stops at it, so the bytes before an
 * unreadable page are kept.  (The smallest page: a larger one's
 * boundaries are among its boundaries.) */
static size_t first_piece(uintptr_t p, size_t n)
{
	size_t first = 4096 - (p & 4095);

	return first < n ? first : n;
}

/*
 * Up to N bytes at P into OUT by a pipe of its own: the kernel's copy
 * into it fails where a load would fault, a page mapped readable past its
 * file's end too (SIGBUS), which /proc/self/maps does not tell.  System
 * calls alone, as a signal handler may be here, and not their libc
 * wrappers, which a sanitizer checks as loads.
 */
static size_t read_by_pipe(uintptr_t p, uint8_t *out, size_t n)
{
	int fd[2];
	size_t got = 0, first = first_piece(p, n);
	const size_t piece[2] = { first, n - first };

	if (syscall(SYS_pipe2, fd, O_CLOEXEC) < 0)
		return 0;
	for (unsigned k = 0; k < 2 && piece[k]; k++) {
		ssize_t w = syscall(SYS_write, fd[1], (const void *)(p + got), piece[k]);

		if (w != (ssize_t)piece[k])
			break;
		got += piece[k];
	}
	size_t in = 0;

	while (in < got) {
		ssize_t r = syscall(SYS_read, fd[0], out + in, got - in);

		if (r <= 0)
			break;
		in += (size_t)r;
	}
	syscall(SYS_close, fd[0]);
	syscall(SYS_close, fd[1]);
	return in;
}

/* Up to N bytes at P into OUT, as many as are readable from P on.
 * (Whether the thread is filtered is asked each time: a thread may take
 * a filter at any moment, from itself or, with TSYNC, another thread.) */
static size_t read_mem(uintptr_t p, uint8_t *out, size_t n)
{
	if (!__atomic_load_n(&no_vm_readv, __ATOMIC_RELAXED) &&
	    syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0) == 0) {
		size_t first = first_piece(p, n);
		struct iovec local = { out, n };
		struct iovec remote[2] = { { (void *)p, first }, { (void *)(p + first), n - first } };
		ssize_t got = syscall(SYS_process_vm_readv, getpid(), &local, 1, remote,
				      n > first ? 2 : 1, 0);

		if (got >= 0)
			return (size_t)got;
		/* (EFAULT alone is about P: a filter refuses with any errno.) */
		if (errno == EFAULT)
			return 0;
		__atomic_store_n(&no_vm_readv, 1, __ATOMIC_RELAXED);
	}
	return read_by_pipe(p, out, n);
}

static size_t put_item(uint8_t *out, unsigned fmt, const void *val, size_t len)
{
	out[0] = (uint8_t)fmt;
	out[1] = (uint8_t)len;
	if (len)	/* (VAL is NULL without bytes, which memcpy may not take) */
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
