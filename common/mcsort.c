// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * LSD radix sort, 11 bits per pass (2048 counters stay in the L1 cache,
 * where 65536 made every scatter a miss).  Passes whose digit is the same
 * for every key (the high bits of addresses, mostly) are skipped, so the
 * addresses of one image take two or three passes; input that is already
 * in order (a table sorted before) takes none.
 */
#include "mcsort.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BITS 11
#define RADIX (1u << BITS)

int mc_sort_kv(struct mc_kv *v, size_t n)
{
	struct mc_kv *tmp, *src = v, *dst;
	size_t *count;
	uint64_t all_or = 0, all_and = ~(uint64_t)0;

	if (n < 64) {
		/* insertion sort: stable, and cheaper than the counting */
		for (size_t i = 1; i < n; i++) {
			struct mc_kv x = v[i];
			size_t j = i;

			for (; j > 0 && v[j - 1].key > x.key; j--)
				v[j] = v[j - 1];
			v[j] = x;
		}
		return 0;
	}
	bool sorted = true;
	for (size_t i = 0; i < n; i++) {
		all_or |= v[i].key;
		all_and &= v[i].key;
		if (i && v[i].key < v[i - 1].key)
			sorted = false;
	}
	if (sorted)
		return 0;
	tmp = malloc(n * sizeof(*tmp));
	count = malloc(RADIX * sizeof(*count));
	if (!tmp || !count) {
		free(tmp);
		free(count);
		return -1;
	}
	dst = tmp;
	for (unsigned shift = 0; shift < 64; shift += BITS) {
		if ((((all_or ^ all_and) >> shift) & (RADIX - 1)) == 0)
			continue;	/* every key has the same digit here */
		memset(count, 0, RADIX * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(src[i].key >> shift) & (RADIX - 1)]++;
		size_t sum = 0;
		for (size_t d = 0; d < RADIX; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(src[i].key >> shift) & (RADIX - 1)]++] = src[i];
		struct mc_kv *t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
	free(tmp);
	free(count);
	return 0;
}
