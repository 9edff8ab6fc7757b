// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the tools' allocator (common/toolalloc.c), TAP output.
 * Linked into this program it replaces malloc for the whole process, as
 * it does in recordmcount, so stdio's own buffers go through it too.
 */
#include "tap.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t malloc_usable_size(void *p);

static int filled(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

int main(void)
{
	/* Every size class, and a few sizes on each side of the limits. */
	static const size_t sizes[] = { 0, 1, 15, 16, 17, 1000, 1024, 1025, 2048, 2049,
					100000, 262144, 262145, 3000000 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	unsigned char *p[N];
	int good = 1;

	for (int i = 0; i < N; i++) {
		p[i] = malloc(sizes[i]);
		good &= p[i] && !((uintptr_t)p[i] & 15) && malloc_usable_size(p[i]) >= sizes[i];
		memset(p[i], i + 1, sizes[i]);
	}
	ok(good, "malloc: 16-byte aligned blocks of at least the size asked, for every class");
	good = 1;
	for (int i = 0; i < N; i++)
		good &= filled(p[i], sizes[i], (unsigned char)(i + 1));
	ok(good, "blocks do not overlap");
	for (int i = 0; i < N; i++)
		free(p[i]);

	/* A freed block is reused for its class, and calloc zeroes it. */
	unsigned char *a = malloc(100);

	memset(a, 0xa5, 100);
	free(a);
	unsigned char *b = calloc(10, 10);
	ok(b == a, "a freed block is reused by its class");
	ok(filled(b, 100, 0), "calloc zeroes a reused block");
	free(b);
	/* volatile: GCC would refuse to compile the overflowing call. */
	volatile size_t huge = SIZE_MAX / 2;

	ok(!calloc(huge, 3) && errno == ENOMEM, "calloc refuses a size that overflows");

	/* realloc keeps the contents across classes, in place when it fits. */
	unsigned char *r = malloc(20);

	memset(r, 7, 20);
	uintptr_t was = (uintptr_t)r;

	r = realloc(r, 30);
	ok((uintptr_t)r == was, "realloc within the block's class stays in place");
	r = realloc(r, 5000);
	ok(r && filled(r, 20, 7), "realloc to a larger class keeps the contents");
	r = realloc(r, 400000);
	ok(r && filled(r, 20, 7), "realloc to a mapping of its own keeps the contents");
	free(r);
	ok(realloc(NULL, 8) != NULL, "realloc(NULL) allocates");

	/* Aligned allocations, freed through the aligned pointer. */
	good = 1;
	for (size_t al = 8; al <= 65536; al *= 2) {
		void *q = aligned_alloc(al, 100);

		good &= q && !((uintptr_t)q & (al - 1)) && malloc_usable_size(q) >= 100;
		memset(q, 1, 100);
		free(q);
	}
	ok(good, "aligned_alloc: every power of two up to 64 KiB");
	void *q = NULL;

	ok(posix_memalign(&q, 4096, 10) == 0 && !((uintptr_t)q & 4095), "posix_memalign");
	q = realloc(q, 8000);
	ok(q != NULL, "realloc of an aligned block");
	free(q);
	ok(posix_memalign(&q, 3, 10) == EINVAL, "posix_memalign refuses an alignment that is not a power of two");

	/* Many small blocks: a batch run over many objects stays bounded. */
	void *first = malloc(48);

	free(first);
	good = 1;
	for (int i = 0; i < 100000; i++) {
		void *t = malloc(48);

		good &= t == first;
		free(t);
	}
	ok(good, "a freed and reallocated block comes back each time");

	return tap_done();
}
