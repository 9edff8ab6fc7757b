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

/* Sort the N keys of V in place: nothing for sorted keys, streaming passes
 * for up to 16 interleaved ascending sequences (a linked call-site table),
 * else a radix sort.  0, or -1 when out of memory. */
int mc_sort_u64(uint64_t *v, size_t n);

#endif
