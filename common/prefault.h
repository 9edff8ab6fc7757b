/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Taking a large buffer's page faults in one call.  Writing a fresh
 * 8 MB array, or storing into a privately mapped image, traps once per
 * 4 KB page; on the VMs we measure on each trap costs over a
 * microsecond, a third of a million-entry sort.  MADV_POPULATE_WRITE
 * (Linux 5.14) takes them all in one system call.  Only a hint: where it
 * is missing or refused, the stores fault as usual.
 */
#ifndef MCLOC_PREFAULT_H
#define MCLOC_PREFAULT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* Worth a system call from this many pages on. */
#define MC_PREFAULT_MIN (64u * 4096u)

static inline void mc_prefault_write(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	const uintptr_t page = 4096;
	uintptr_t from = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t to = ((uintptr_t)p + len) & ~(page - 1);

	if (len >= MC_PREFAULT_MIN && to > from)
		madvise((void *)from, to - from, MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)len;
#endif
}

#endif
