/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A stable radix sort of (key, value) pairs by key: linked images carry a
 * million symbols or table entries, and qsort was most of sort's time. */
#ifndef MCLOC_SORT_H
#define MCLOC_SORT_H

#include <stddef.h>
#include <stdint.h>

struct mc_kv {
	uint64_t key;
	uint64_t val;
};

/* Sort V (N pairs) by key, stably.  Returns 0, or -1 when out of memory. */
int mc_sort_kv(struct mc_kv *v, size_t n);

/*
 * The keys of SRC[0..N) whose bit in SKIP is clear (SKIP may be NULL),
 * sorted into OUT (room for N; SRC is only read, and may be a view of the
 * file).  A linked call-site table is a few interleaved ascending
 * sequences: for up to 4 of them the sort is two streaming reads of SRC,
 * for up to 16 a scatter and merges, else a radix sort.  Returns how many
 * keys OUT holds, or -1 when out of memory.
 */
long mc_sort_u64_into(const uint64_t *src, size_t n, const uint64_t *skip, uint64_t *out);

/* Sort BASE like qsort_r, fastest when it is nearly in order already. */
void mc_sort_nearly(void *base, size_t n, size_t size,
		    int (*cmp)(const void *, const void *, void *), void *arg);

#endif
