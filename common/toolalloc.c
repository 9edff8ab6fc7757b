// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The allocator of the short-lived, single-threaded tools.
 *
 * recordmcount runs once per object from a Makefile and lives about a
 * millisecond.  In the musl build (see meson.build: glibc's start-up alone
 * costs more than a third of such a run on a VM, where its cpuid cache
 * probing traps to the hypervisor), musl's own malloc was the next cost:
 * mallocng maps and unmaps a group for nearly every size it meets, and a
 * run paid about 14% of its time in malloc, free and the mmap/munmap/TLB
 * work behind them.  A tool that allocates a few hundred blocks and exits
 * wants none of that: blocks are carved from large mappings by bumping a
 * pointer, and a freed block goes on a free list of its size class for
 * the next request of that class, so that a batch run over many objects
 * stays bounded.
 *
 * Every malloc-family entry point is defined here, so the static link
 * takes none of musl's (it supports replacing them); musl's internal
 * allocations (locale, atexit) keep their own allocator.  Not
 * thread-safe: only linked into single-threaded tools.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

/*
 * Each block is preceded by a 16-byte header that keeps user pointers
 * 16-byte aligned: its class, and its usable size (for an aligned block,
 * the distance back to the block it was cut from).
 */
struct hdr {
	uint32_t cls;
	uint32_t magic;
	size_t size;
};

#define HDR sizeof(struct hdr)
#define MAGIC 0x6d636c63u	/* "mclc": catches a free() of a foreign pointer */

/* Classes 0..63: 16-byte steps up to 1 KiB; then powers of two to 256 KiB. */
#define SMALL_STEP 16u
#define SMALL_MAX 1024u
#define NSMALL (SMALL_MAX / SMALL_STEP)
#define MEDIUM_MAX (256u * 1024u)
#define NCLASS (NSMALL + 8)		/* 2K, 4K, ... 256K */
#define CLS_LARGE 0xfffffffeu		/* a mapping of its own */
#define CLS_ALIGNED 0xffffffffu		/* cut from inside another block */

#define CHUNK (1u << 20)

static void *freelist[NCLASS];
static uint8_t *bump, *bump_end;	/* fresh, zeroed memory of the current chunk */

static unsigned size_class(size_t n, size_t *cap)
{
	if (n <= SMALL_MAX) {
		size_t c = n ? (n + SMALL_STEP - 1) / SMALL_STEP : 1;

		*cap = c * SMALL_STEP;
		return (unsigned)c - 1;
	}
	unsigned c = NSMALL;
	size_t s = 2 * SMALL_MAX;

	while (s < n) {
		s *= 2;
		c++;
	}
	*cap = s;
	return c;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static struct hdr *header(void *p)
{
	return (struct hdr *)((uint8_t *)p - HDR);
}

/* A block of at least n bytes; *fresh says whether it is still all zero. */
static void *alloc(size_t n, bool *fresh)
{
	struct hdr *h;

	if (n > MEDIUM_MAX) {
		if (n > SIZE_MAX - HDR - 4095) {
			errno = ENOMEM;
			return NULL;
		}
		size_t len = (n + HDR + 4095) & ~(size_t)4095;

		h = map(len);
		if (!h) {
			errno = ENOMEM;
			return NULL;
		}
		*h = (struct hdr){ CLS_LARGE, MAGIC, len - HDR };
		*fresh = true;
		return h + 1;
	}

	size_t cap;
	unsigned c = size_class(n, &cap);

	if (freelist[c]) {
		void *p = freelist[c];

		memcpy(&freelist[c], p, sizeof(void *));
		header(p)->magic = MAGIC;
		*fresh = false;
		return p;
	}
	if ((size_t)(bump_end - bump) < cap + HDR) {
		size_t len = cap + HDR > CHUNK ? cap + HDR : CHUNK;
		uint8_t *m = map(len);

		if (!m) {
			errno = ENOMEM;
			return NULL;
		}
		/* The old chunk's tail is given up: a few KiB at most. */
		bump = m;
		bump_end = m + len;
	}
	h = (struct hdr *)bump;
	bump += cap + HDR;
	*h = (struct hdr){ c, MAGIC, cap };
	*fresh = true;
	return h + 1;
}

void *malloc(size_t n)
{
	bool fresh;

	return alloc(n, &fresh);
}

void free(void *p)
{
	if (!p)
		return;

	struct hdr *h = header(p);

	if (h->magic != MAGIC)
		__builtin_trap();	/* a double free or a foreign pointer */
	if (h->cls == CLS_ALIGNED) {
		free((uint8_t *)p - h->size);
		return;
	}
	h->magic = 0;
	if (h->cls == CLS_LARGE) {
		munmap(h, h->size + HDR);
		return;
	}
	memcpy(p, &freelist[h->cls], sizeof(void *));
	freelist[h->cls] = p;
}

size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;

	struct hdr *h = header(p);

	if (h->cls == CLS_ALIGNED) {
		uint8_t *base = (uint8_t *)p - h->size;

		return header(base)->size - h->size;
	}
	return h->size;
}

void *calloc(size_t m, size_t n)
{
	bool fresh;

	if (n && m > SIZE_MAX / n) {
		errno = ENOMEM;
		return NULL;
	}

	void *p = alloc(m * n, &fresh);

	if (p && !fresh)
		memset(p, 0, m * n);
	return p;
}

void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);

	size_t have = malloc_usable_size(p);

	if (n <= have)
		return p;

	void *q = malloc(n);

	if (q) {
		memcpy(q, p, have);
		free(p);
	}
	return q;
}

void *aligned_alloc(size_t align, size_t n)
{
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	if (align <= HDR)
		return malloc(n);
	if (n > SIZE_MAX - align - HDR) {
		errno = ENOMEM;
		return NULL;
	}

	uint8_t *base = malloc(n + align + HDR);

	if (!base)
		return NULL;

	uintptr_t at = ((uintptr_t)base + HDR + align - 1) & ~(uintptr_t)(align - 1);
	struct hdr *h = header((void *)at);

	*h = (struct hdr){ CLS_ALIGNED, MAGIC, (size_t)(at - (uintptr_t)base) };
	return (void *)at;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;

	void *p = aligned_alloc(align, n);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *memalign(size_t align, size_t n)
{
	return aligned_alloc(align, n);
}
