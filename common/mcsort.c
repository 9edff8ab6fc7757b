// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Sorting a linked image's tables and symbols.
 *
 * The data are rarely random.  A call-site table is each object's table
 * concatenated in link order: a few ascending sequences interleaved (see
 * label_piles()).  Up to four of them cost two streaming reads of the
 * table, more a scatter and a merge pass per doubling.  Only other data
 * (symbols, which ld emits in hash order) get the radix sort.
 *
 * The radix sort is LSD with 11-bit digits (2048 counters stay in L1;
 * 65536 made every scatter a miss).  Digits that are the same in every key
 * (the high bits of addresses) are skipped, so the addresses of one image
 * take two or three passes.  On the VMs we measure on, a scattering pass
 * over a million records costs 40 to 60 ms, ten times a copy: callers
 * avoid sorting what they can look up.
 */
#include "mcsort.h"
#include "prefault.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BITS 11
#define RADIX (1u << BITS)

/*
 * One LSD radix sort, NAME, for records T with keys KEY(x).
 * Digits from bit 0 up, skipping those equal in every key.  (Bit 0
 * and not the lowest varying bit: a digit whose low bits are constant has
 * fewer distinct values, hence fewer write streams, and on these VMs the
 * number of streams, not the number of passes, sets the cost.)
 */
#define RADIX_SORT(NAME, T, KEY)							\
static int NAME(T *v, size_t n, uint64_t all_or, uint64_t all_and)	\
{										\
	T *tmp = malloc(n * sizeof(*tmp)), *src = v, *dst = tmp;		\
	size_t *count = malloc(RADIX * sizeof(*count));				\
										\
	if (!tmp || !count) {							\
		free(tmp);							\
		free(count);							\
		return -1;							\
	}									\
	mc_prefault_write(tmp, n * sizeof(*tmp));				\
	for (unsigned shift = 0; shift < 64; shift += BITS) {			\
		if ((((all_or ^ all_and) >> shift) & (RADIX - 1)) == 0)		\
			continue;	/* every key has the same digit here */	\
		memset(count, 0, RADIX * sizeof(*count));			\
		for (size_t i = 0; i < n; i++)					\
			count[(KEY(src[i]) >> shift) & (RADIX - 1)]++;		\
		size_t sum = 0;							\
		for (size_t d = 0; d < RADIX; d++) {				\
			size_t c = count[d];					\
										\
			count[d] = sum;						\
			sum += c;						\
		}								\
		for (size_t i = 0; i < n; i++)					\
			dst[count[(KEY(src[i]) >> shift) & (RADIX - 1)]++] = src[i]; \
		T *t = src;							\
		src = dst;							\
		dst = t;							\
	}									\
	if (src != v)								\
		memcpy(v, src, n * sizeof(*v));					\
	free(tmp);								\
	free(count);								\
	return 0;								\
}

#define KV_KEY(x) ((x).key)
#define U64_KEY(x) (x)
RADIX_SORT(radix_kv, struct mc_kv, KV_KEY)
RADIX_SORT(radix_u64, uint64_t, U64_KEY)

int mc_sort_kv(struct mc_kv *v, size_t n)
{
	uint64_t all_or = 0, all_and = ~(uint64_t)0;
	bool sorted = true;

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
	for (size_t i = 0; i < n; i++) {
		all_or |= v[i].key;
		all_and &= v[i].key;
		if (i && v[i].key < v[i - 1].key)
			sorted = false;
	}
	return sorted ? 0 : radix_kv(v, n, all_or, all_and);
}

/* Merge the sorted A[0..NA) and B[0..NB) into OUT. */
static void merge(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, uint64_t *out)
{
	size_t i = 0, j = 0, k = 0;

	while (i < na && j < nb) {
		/* (Branch-free: interleaved runs mispredict every step.) */
		uint64_t x = a[i], y = b[j];
		bool take = y < x;

		out[k++] = take ? y : x;
		j += take;
		i += !take;
	}
	memcpy(out + k, a + i, (na - i) * sizeof(*out));
	k += na - i;
	memcpy(out + k, b + j, (nb - j) * sizeof(*out));
}

/*
 * The keys as at most PILES interleaved ascending sequences: each key goes
 * on the pile whose last key is the largest not above it (which needs the
 * fewest piles).  A linked table is exactly that: every input-section kind
 * (.text.hot, .text, .text.unlikely, .init.text) gets its functions in
 * object order, so each kind's entries ascend while the objects' tables
 * alternate between kinds.  PILE[i] receives key i's pile (SKIPPED for the
 * keys SKIP marks), COUNT each pile's size.  Returns the number of piles,
 * or PILES + 1 when the keys need more.
 */
#define PILES 16
#define SKIPPED 0xff

static inline bool skipped(const uint64_t *skip, size_t i)
{
	return skip && skip[i / 64] >> (i % 64) & 1;
}
/* Up to this many piles are merged straight from the source, a cursor
 * per pile stepping over the others' keys; more are scattered first. */
#define CURSORS 4

static size_t label_piles(const uint64_t *src, size_t n, const uint64_t *skip, uint8_t *pile,
			  size_t *count)
{
	uint64_t tail[PILES];
	size_t np = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t x = src[i];
		size_t best = PILES;

		if (skipped(skip, i)) {
			pile[i] = SKIPPED;
			continue;
		}
		for (size_t p = 0; p < np; p++)
			if (tail[p] <= x && (best == PILES || tail[p] > tail[best]))
				best = p;
		if (best == PILES) {
			if (np == PILES)
				return PILES + 1;
			count[np] = 0;
			best = np++;
		}
		tail[best] = x;
		pile[i] = (uint8_t)best;
		count[best]++;
	}
	return np;
}

/* The next key of pile P at or after index I (N when none is left). */
static size_t next_of(const uint8_t *pile, size_t n, size_t i, uint8_t p)
{
	while (i < n && pile[i] != p)
		i++;
	return i;
}

/* Merge NP <= CURSORS piles of SRC into OUT, reading SRC in place. */
static void merge_cursors(const uint64_t *src, size_t n, const uint8_t *pile, size_t np,
			  uint64_t *out)
{
	size_t cur[CURSORS], live = 0, k = 0;
	uint8_t id[CURSORS];

	for (size_t p = 0; p < np; p++) {
		cur[live] = next_of(pile, n, 0, (uint8_t)p);
		id[live] = (uint8_t)p;
		live += cur[live] < n;
	}
	while (live) {
		size_t best = 0;

		for (size_t c = 1; c < live; c++)
			if (src[cur[c]] < src[cur[best]])
				best = c;
		out[k++] = src[cur[best]];
		cur[best] = next_of(pile, n, cur[best] + 1, id[best]);
		if (cur[best] == n) {
			live--;
			cur[best] = cur[live];
			id[best] = id[live];
		}
	}
}

/* Scatter the NP piles of SRC into TMP, then merge neighbours until one
 * is left, ending in OUT.  (OUT and TMP hold the kept keys.) */
static void merge_scattered(const uint64_t *src, size_t n, const uint8_t *pile, size_t np,
			    const size_t *count, uint64_t *out, uint64_t *tmp)
{
	size_t start[PILES + 1], fill[PILES], rounds = 0, total;

	start[0] = 0;
	for (size_t p = 0; p < np; p++) {
		start[p + 1] = start[p] + count[p];
		fill[p] = start[p];
	}
	total = start[np];
	for (size_t w = np; w > 1; w = (w + 1) / 2)
		rounds++;
	/* Start in whichever buffer makes the last round land in OUT. */
	uint64_t *dst = rounds % 2 ? tmp : out, *other = rounds % 2 ? out : tmp;
	for (size_t i = 0; i < n; i++)
		if (pile[i] != SKIPPED)
			dst[fill[pile[i]]++] = src[i];
	uint64_t *from = dst, *to = other;
	while (np > 1) {
		size_t w = 0;

		for (size_t p = 0; p < np; p += 2) {
			if (p + 1 < np)
				merge(from + start[p], start[p + 1] - start[p], from + start[p + 1],
				      start[p + 2] - start[p + 1], to + start[p]);
			else
				memcpy(to + start[p], from + start[p],
				       (start[p + 1] - start[p]) * sizeof(*to));
			start[w++] = start[p];
		}
		start[w] = total;
		np = w;
		uint64_t *t = from;
		from = to;
		to = t;
	}
}

long mc_sort_u64_into(const uint64_t *src, size_t n, const uint64_t *skip, uint64_t *out)
{
	size_t count[PILES], np, kept = 0;
	uint8_t *pile = malloc(n + 1);
	uint64_t *tmp = NULL;
	long ret = -1;

	if (!pile)
		return -1;
	np = label_piles(src, n, skip, pile, count);
	if (np > PILES) {
		uint64_t all_or = 0, all_and = ~(uint64_t)0;

		for (size_t i = 0; i < n; i++)
			if (!skipped(skip, i)) {
				all_or |= src[i];
				all_and &= src[i];
				out[kept++] = src[i];
			}
		if (radix_u64(out, kept, all_or, all_and) < 0)
			goto out;
	} else {
		for (size_t p = 0; p < np; p++)
			kept += count[p];
		mc_prefault_write(out, kept * sizeof(*out));
		if (np <= CURSORS) {
			merge_cursors(src, n, pile, np, out);
		} else {
			tmp = malloc(kept * sizeof(*tmp));
			if (!tmp)
				goto out;
			merge_scattered(src, n, pile, np, count, out, tmp);
		}
	}
	ret = (long)kept;
out:
	free(pile);
	free(tmp);
	return ret;
}

/*
 * The small tables of one object (its sections by offset, the calls of a
 * section by offset) come almost in order.  musl's qsort, a smoothsort
 * that moves elements with memcpy through a buffer, took more of a
 * recordmcount run than all its decoding; an insertion sort on the
 * nearly sorted input is one pass.  If the input turns out to be far
 * from sorted, the moves stop paying and qsort_r finishes the job.
 */
void mc_sort_nearly(void *base, size_t n, size_t size,
		    int (*cmp)(const void *, const void *, void *), void *arg)
{
	unsigned char *p = base, tmp[64];
	size_t budget = 8 * n + 64;

	if (size > sizeof(tmp)) {
		qsort_r(base, n, size, cmp, arg);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		if (cmp(p + (i - 1) * size, p + i * size, arg) <= 0)
			continue;

		size_t j = i - 1;

		memcpy(tmp, p + i * size, size);
		while (j > 0 && cmp(p + (j - 1) * size, tmp, arg) > 0)
			j--;
		if (i - j > budget) {
			qsort_r(base, n, size, cmp, arg);
			return;
		}
		budget -= i - j;
		memmove(p + (j + 1) * size, p + j * size, (i - j) * size);
		memcpy(p + j * size, tmp, size);
	}
}
