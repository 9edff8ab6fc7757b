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

/*
 * V, whose every value is its pair's place (the usual case: a
 * permutation is being worked out), sorted through one word per pair
 * when the keys' range leaves room for the place below: (key - MIN) << B
 * | place.  The place in the low bits makes any sort stable, half the
 * bytes move, and the words get mc_sort_u64_into()'s merge of interleaved
 * ascending runs, which an image's tables are (ORC, __ex_table).  The
 * words live in V's
 * own memory, the packed ones in its first half and the sorted ones in
 * its second (word I overwrites pair I / 2, already read; pair J, written
 * back in order, overwrites sorted words 2J - N and 2J - N + 1, already
 * read): fresh pages cost more than the sort.  1 when it did not apply,
 * 0 when done, -1 when out of memory.
 */
static int sort_packed(struct mc_kv *v, size_t n, uint64_t min, uint64_t max)
{
	unsigned b = 64 - (unsigned)__builtin_clzll(n - 1);
	uint64_t mask = ((uint64_t)1 << b) - 1, *w = (uint64_t *)v, *out = w + n;

	if (b >= 64 || (max - min) >> (64 - b))
		return 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t key = v[i].key;

		w[i] = (key - min) << b | i;
	}
	if (mc_sort_u64_into(w, n, NULL, out) < 0) {
		/* (Put back as it was.) */
		for (size_t i = n; i-- > 0;)
			v[i] = (struct mc_kv){ (w[i] >> b) + min, i };
		return -1;
	}
	for (size_t j = 0; j < n; j++) {
		uint64_t x = out[j];

		v[j] = (struct mc_kv){ (x >> b) + min, x & mask };
	}
	return 0;
}

int mc_sort_kv(struct mc_kv *v, size_t n)
{
	uint64_t all_or = 0, all_and = ~(uint64_t)0, min = ~(uint64_t)0, max = 0;
	bool sorted = true, places = true;
	int r;

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
		min = v[i].key < min ? v[i].key : min;
		max = v[i].key > max ? v[i].key : max;
		places &= v[i].val == i;
		if (i && v[i].key < v[i - 1].key)
			sorted = false;
	}
	if (sorted)
		return 0;
	if (places && (r = sort_packed(v, n, min, max)) <= 0)
		return r;
	return radix_kv(v, n, all_or, all_and);
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
	/* (B's rest may be in its place already: merge_scattered().) */
	if (out + k != b + j)
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
	uint64_t tail[PILES], above = 0;
	size_t np = 0, last = PILES;

	for (size_t i = 0; i < n; i++) {
		uint64_t x = src[i];
		size_t best = PILES;

		if (skipped(skip, i)) {
			pile[i] = SKIPPED;
			continue;
		}
		/* A run goes on the pile of the key before it while no other
		 * pile's tail (ABOVE: the least above it) comes between. */
		if (last < PILES && tail[last] <= x && x < above) {
			tail[last] = x;
			pile[i] = (uint8_t)last;
			count[last]++;
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
		last = best;
		above = UINT64_MAX;
		for (size_t p = 0; p < np; p++)
			if (p != best && tail[p] > x && tail[p] < above)
				above = tail[p];
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

/*
 * Scatter the NP piles of SRC, smallest first, then merge them into one
 * in that order, ending in OUT (OUT and TMP hold the kept keys).  An
 * image's piles are one large one (.text) and a few small ones: merging
 * the small ones first moves each key of the large one once, where
 * rounds of neighbours moved it once per round.
 *
 * Merge K takes the piles merged so far from one buffer and pile K from
 * the scatter buffer, into the other buffer.  When that is the scatter
 * buffer, pile K lies at the end of the output's place: the output
 * catches up with its reads only once the rest is spent, when what is
 * left of pile K is already in place.
 */
static void merge_scattered(const uint64_t *src, size_t n, const uint8_t *pile, size_t np,
			    const size_t *count, uint64_t *out, uint64_t *tmp)
{
	size_t order[PILES], start[PILES], fill[PILES], at = 0;

	for (size_t p = 0; p < np; p++) {
		size_t k = p;

		for (; k > 0 && count[order[k - 1]] > count[p]; k--)
			order[k] = order[k - 1];
		order[k] = p;
	}
	for (size_t k = 0; k < np; k++) {
		start[order[k]] = fill[order[k]] = at;
		at += count[order[k]];
	}
	/* np - 1 merges alternate the buffers: start where the last lands in OUT. */
	uint64_t *scat = (np - 1) % 2 ? tmp : out, *other = scat == out ? tmp : out;
	for (size_t i = 0; i < n; i++)
		if (pile[i] != SKIPPED)
			scat[fill[pile[i]]++] = src[i];
	if (np == 1) {
		if (scat != out)
			memcpy(out, scat, count[0] * sizeof(*out));
		return;
	}
	const uint64_t *have = scat;
	size_t len = count[order[0]];

	for (size_t k = 1; k < np; k++) {
		uint64_t *to = have == scat ? other : scat;
		size_t p = order[k];

		merge(have, len, scat + start[p], count[p], to);
		len += count[p];
		have = to;
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
