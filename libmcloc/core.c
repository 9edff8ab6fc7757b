// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's core: images and their records, ops, and what every site
 * should be.
 *
 * Records.  Each image keeps its sites sorted, one 8-byte record each: the
 * offset from the image's load address and 32 bits of state, a reference
 * count of the ops that cover the site, a count of those that need
 * registers, and the enabled/enabled-with-regs pair that says what the
 * code holds now (the kernel's dyn_ftrace takes 16 bytes for the same).
 * Registering or unregistering an ops changes the counts; then every
 * record whose wanted state differs from its enabled one is patched, in
 * one batch, and nothing else is touched.
 *
 * Ops.  The registered set is an array published with RCU (liburcu's
 * urcu-bp flavour, which needs no per-thread registration: any thread may
 * run a traced function).  The trampolines call a dispatcher that walks
 * the set inside a read-side critical section; unregister removes the ops,
 * waits for a grace period, and only then returns, so the caller may free
 * the ops.  Each ops carries a bitmap over the records it covers.
 *
 * Site states, as ftrace's: no ops, a NOP; one ops, a call to that ops's
 * own stub on the image's direct page (arch/runtime.h), which reaches its
 * callback without looking anything up; several, a call to the image's
 * args trampoline, whose dispatcher walks the set (ftrace's list
 * function); any that needs registers, a call to the regs trampoline.
 */
#include "mcloc.h"
#include "mcloc-abi.h"
#include "patch.h"
#include "core.h"
#include "tracer.h"

/* The inline read-side fast paths (this library is LGPL as liburcu is);
 * not in a sanitized build (MCLOC_URCU_OUT_OF_LINE, from meson).
 * liburcu-bp's reader arena gives its readers less than the 128-byte
 * alignment their type declares, and UBSan instruments the inlined
 * accesses wherever they are inlined, whatever the caller's attributes:
 * there the library's own functions, which are not instrumented, do the
 * same work out of line. */
#ifndef MCLOC_URCU_OUT_OF_LINE
#define _LGPL_SOURCE
#endif
#include <urcu-bp.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct mcloc_rec {
	uint32_t off;		/* from the image's load address */
	uint32_t state;		/* MCLOC_REC_* */
};
_Static_assert(sizeof(struct mcloc_rec) == 8, "a record is 8 bytes");

#define REC_REF_MASK	0x0000ffffu	/* ops covering the site */
#define REC_REGS_SHIFT	16
#define REC_REGS_MASK	0x00ff0000u	/* of which need registers */
#define REC_ENABLED	(1u << 24)	/* the site holds a call */
#define REC_ENABLED_REGS (1u << 25)	/* ... to the regs trampoline */
#define REC_REFUSED	(1u << 26)	/* its bytes were not what we expected */
#define REC_ENABLED_DIRECT (1u << 27)	/* ... to an ops's direct stub */
#define REC_LEN_SHIFT	28		/* site length, 1..15 */

struct fsym {
	uintptr_t lo, hi;
	uint32_t name;
};

struct image {
	struct mcloc_image *desc;
	uintptr_t base;
	struct mcloc_rec *recs;
	const char **names;	/* function of each record (NULL: unknown), interned */
	char *strtab;		/* the names of FUNCS */
	struct fsym *funcs;	/* every function symbol, by address */
	size_t nfuncs;
	size_t nrecs, first;	/* global index of recs[0] */
	uintptr_t lo, hi;	/* first and last site */
	uint64_t scale;		/* (nrecs - 1) / (last - first offset), 32.32 */
	uint8_t *stubs;		/* its direct page (NULL: none within reach) */
};

struct mcloc_ops_priv {
	uint64_t *filter, *notrace, *covers;	/* bitmaps over global record indices */
	size_t nfilter;
	size_t ncovered;	/* records that existed when it registered */
	int slot;		/* its direct slot + 1 (0: none) */
	bool registered;
	bool leaving;		/* unregistering: its counts are gone already */
};

/* A direct slot: what a site that calls one of the slot's stubs runs.
 * Set before any site calls the stub, cleared a grace period after the
 * last one stopped calling it. */
struct direct {
	mcloc_func_t func;
	struct mcloc_ops *ops;
};
static struct direct direct[MCR_DIRECT_SLOTS];

/* What the dispatcher needs of each registered ops, copied into the set
 * so that a traced call follows one pointer less per ops (its callback,
 * flags and bitmap are fixed while it is registered; the bitmap's words
 * change in place). */
struct set_ent {
	struct mcloc_ops *ops;
	mcloc_func_t func;
	const uint64_t *covers;
	bool regs;
};

struct ops_set {
	size_t n;
	struct set_ent v[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Loaded images; a NULL slot is free.  Readers (dispatchers, the SIGTRAP
 * handler, the name lookups) do not take the lock: an unloaded image's
 * slot is cleared first, and its memory freed only after a grace period
 * and after every SIGTRAP handler that could have seen it.  Record
 * numbers (global indices into the ops's bitmaps) are never reused: each
 * load takes new ones.
 */
#define MAX_IMAGES 256
static struct image *images[MAX_IMAGES];
static size_t nimages, nrecords;	/* slots in use, at most; records ever */

static struct image *image_at(size_t i)
{
	return __atomic_load_n(&images[i], __ATOMIC_ACQUIRE);
}
static struct ops_set *cur_set;
static void (*log_fn)(int, const char *);
static bool inited;
static int init_status;
static size_t nrefused;

static __thread int in_tracer __attribute__((tls_model("initial-exec")));

static void say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fn(level, msg);
}

void mcloc_set_log(void (*log)(int level, const char *msg))
{
	log_fn = log;
}

/* ---- records ------------------------------------------------------------ */

static unsigned rec_len(const struct mcloc_rec *r)
{
	return r->state >> REC_LEN_SHIFT;
}

static const struct image *image_of(uintptr_t addr)
{
	size_t n = __atomic_load_n(&nimages, __ATOMIC_ACQUIRE);

	for (size_t i = 0; i < n; i++) {
		const struct image *im = image_at(i);

		if (im && addr >= im->lo && addr <= im->hi + 16)
			return im;
	}
	return NULL;
}

/*
 * The first record of IM at or after ADDR.  Sites are spread over the text
 * about evenly (one per function), so the search first guesses where ADDR
 * falls between the first and the last site and narrows from there: two
 * or three probes instead of a binary search's log2(n), which showed in
 * every dispatch.  The guess only sets the start; the answer is exact.
 */
static size_t rec_lower(const struct image *im, uintptr_t addr)
{
	size_t lo = 0, hi = im->nrecs;
	uint64_t off = addr - im->base;

	if (hi > 8) {
		uint64_t first = im->recs[0].off, last = im->recs[hi - 1].off;

		if (off <= first)
			return 0;
		if (off > last)
			return hi;
		/* (A multiply, not a division: offsets are 32-bit and sites
		 * are at least a byte apart, so scale fits 32 bits too.) */
		size_t g = (size_t)(((off - first) * im->scale) >> 32);
		if (g >= hi)
			g = hi - 1;
		/* Gallop from the guess to a bracket [lo, hi). */
		size_t step = 1;
		if (im->recs[g].off < off) {
			lo = g + 1;
			while (lo + step < hi && im->recs[lo + step - 1].off < off) {
				lo += step;
				step *= 2;
			}
			hi = lo + step < hi ? lo + step : hi;
		} else {
			hi = g;
			while (hi > step && im->recs[hi - step].off >= off) {
				hi -= step;
				step *= 2;
			}
			lo = hi > step ? hi - step : 0;
		}
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (im->recs[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The record of the site that starts at SITE, or -1. */
static long rec_at(const struct image *im, uintptr_t site)
{
	size_t k = rec_lower(im, site);

	return k < im->nrecs && im->base + im->recs[k].off == site ? (long)k : -1;
}

/* The record whose site ends at AFTER (the trampolines' return address). */
static long rec_before(const struct image *im, uintptr_t after)
{
	size_t k = rec_lower(im, after);

	if (!k)
		return -1;
	const struct mcloc_rec *r = &im->recs[k - 1];
	return im->base + r->off + rec_len(r) == after ? (long)k - 1 : -1;
}

bool mcr_is_site(uintptr_t addr)
{
	const struct image *im = image_of(addr);

	return im && rec_at(im, addr) >= 0;
}

/* ---- function names from the image's symbol table ---------------------------- */

static int cmp_fsym(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void *mcloc_read_at(int fd, off_t off, size_t len)
{
	void *p = malloc(len + 1);

	if (p && pread(fd, p, len, off) != (ssize_t)len) {
		free(p);
		return NULL;
	}
	return p;
}

/*
 * Name every record of IM from PATH's .symtab (or .dynsym): the FUNC
 * symbol that contains it.  A stripped image keeps its records unnamed;
 * they are still traced by address.
 */
/*
 * The .mcloc_names section objpatch link --runtime adds (see add_names()
 * in objpatch/fix.c): functions with their link-time start and size, and
 * their names, which strip(1) leaves in place.  Returns the functions (and
 * the names in *STR), or NULL when there is no valid such section.
 */
static struct fsym *own_names(int fd, const Elf64_Ehdr *eh, const Elf64_Shdr *sh,
			      uintptr_t bias, char **str, size_t *nf)
{
	const Elf64_Shdr *shs = eh->e_shstrndx < eh->e_shnum ? &sh[eh->e_shstrndx] : NULL;
	char *names = shs ? mcloc_read_at(fd, (off_t)shs->sh_offset, shs->sh_size) : NULL;
	const Elf64_Shdr *ns = NULL;
	uint8_t *b = NULL;
	struct fsym *fs = NULL;

	if (!names)
		return NULL;
	names[shs->sh_size] = 0;
	for (unsigned i = 0; i < eh->e_shnum && !ns; i++)
		if (sh[i].sh_name < shs->sh_size && !strcmp(names + sh[i].sh_name, ".mcloc_names"))
			ns = &sh[i];
	free(names);
	if (!ns || ns->sh_size < 16 || !(b = mcloc_read_at(fd, (off_t)ns->sh_offset, ns->sh_size)))
		return NULL;
	uint64_t n;
	memcpy(&n, b + 8, 8);
	if (memcmp(b, "MCLNAME1", 8) || n > (ns->sh_size - 16) / 24)
		goto bad;
	size_t sbytes = ns->sh_size - 16 - n * 24;
	fs = malloc((n + 1) * sizeof(*fs));
	*str = malloc(sbytes + 1);
	if (!fs || !*str)
		goto bad;
	memcpy(*str, b + 16 + n * 24, sbytes);
	(*str)[sbytes] = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t start, size;
		uint32_t name;

		memcpy(&start, b + 16 + i * 24, 8);
		memcpy(&size, b + 16 + i * 24 + 8, 8);
		memcpy(&name, b + 16 + i * 24 + 16, 4);
		if (name >= sbytes)
			goto bad;
		fs[i] = (struct fsym){ start + bias, start + bias + (size ? size : 1), name };
	}
	*nf = (size_t)n;
	free(b);
	return fs;
bad:
	free(b);
	free(fs);
	free(*str);
	*str = NULL;
	return NULL;
}

/*
 * Function names outlive their image: a profile still prints the calls of
 * a library that has been dlclose()d, and a name handed out by
 * mcloc_site_name() stays valid.  So the names of traced functions are
 * interned here, once each however often a library is loaded again, and
 * never freed.  Only under the lock.
 */
static struct {
	const char **slot;	/* open addressing, a power of two */
	size_t cap, n;
	char *chunk;		/* where the next string goes */
	size_t left;
} pool;

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static const char *intern(const char *name)
{
	uint64_t h = name_hash(name);
	size_t len = strlen(name);
	if (2 * (pool.n + 1) > pool.cap) {
		size_t cap = pool.cap ? 2 * pool.cap : 4096;
		const char **slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return NULL;
		for (size_t i = 0; i < pool.cap; i++)
			if (pool.slot[i]) {
				size_t j = name_hash(pool.slot[i]) & (cap - 1);
				while (slot[j])
					j = (j + 1) & (cap - 1);
				slot[j] = pool.slot[i];
			}
		free(pool.slot);
		pool.slot = slot;
		pool.cap = cap;
	}
	size_t j = h & (pool.cap - 1);
	for (; pool.slot[j]; j = (j + 1) & (pool.cap - 1))
		if (!strcmp(pool.slot[j], name))
			return pool.slot[j];
	if (pool.left < len + 1) {
		size_t sz = len + 1 > 65536 ? len + 1 : 65536;

		if (!(pool.chunk = malloc(sz)))
			return NULL;
		pool.left = sz;
	}
	char *copy = memcpy(pool.chunk, name, len + 1);
	pool.chunk += len + 1;
	pool.left -= len + 1;
	pool.n++;
	return pool.slot[j] = copy;
}

static void name_records(struct image *im, const char *path, uintptr_t bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL;
	Elf64_Sym *syms = NULL;
	struct fsym *fs = NULL;
	char *str = NULL;

	if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || !eh.e_shnum)
		goto out;
	sh = mcloc_read_at(fd, (off_t)eh.e_shoff, (size_t)eh.e_shnum * sizeof(*sh));
	if (!sh)
		goto out;
	const Elf64_Shdr *st = NULL;
	size_t nf = 0;
	for (unsigned i = 0; i < eh.e_shnum; i++)
		if (sh[i].sh_type == SHT_SYMTAB && sh[i].sh_link < eh.e_shnum &&
		    sh[i].sh_entsize == sizeof(Elf64_Sym)) {
			st = &sh[i];
			break;
		}
	/* Stripped: the names objpatch link --runtime kept, else the
	 * dynamic symbols (exported functions only). */
	if (!st && (fs = own_names(fd, &eh, sh, bias, &str, &nf)))
		goto merge;
	for (unsigned i = 0; !st && i < eh.e_shnum; i++)
		if (sh[i].sh_type == SHT_DYNSYM && sh[i].sh_link < eh.e_shnum &&
		    sh[i].sh_entsize == sizeof(Elf64_Sym))
			st = &sh[i];
	if (!st)
		goto out;
	size_t n = st->sh_size / sizeof(Elf64_Sym);
	const Elf64_Shdr *ss = &sh[st->sh_link];
	syms = mcloc_read_at(fd, (off_t)st->sh_offset, st->sh_size);
	str = mcloc_read_at(fd, (off_t)ss->sh_offset, ss->sh_size);
	fs = malloc((n + 1) * sizeof(*fs));
	if (!syms || !str || !fs)
		goto out;
	str[ss->sh_size] = 0;
	for (size_t i = 0; i < n; i++)
		if (ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC && syms[i].st_shndx != SHN_UNDEF &&
		    syms[i].st_name < ss->sh_size)
			fs[nf++] = (struct fsym){ syms[i].st_value + bias,
						  syms[i].st_value + bias + (syms[i].st_size ?
									      syms[i].st_size : 1),
						  syms[i].st_name };
merge:
	qsort(fs, nf, sizeof(*fs), cmp_fsym);
	im->names = calloc(im->nrecs + 1, sizeof(*im->names));
	if (!im->names)
		goto out;
	/* Records and functions are both sorted: one merge. */
	size_t k = 0;
	for (size_t r = 0; r < im->nrecs; r++) {
		uintptr_t a = im->base + im->recs[r].off;

		while (k + 1 < nf && fs[k + 1].lo <= a)
			k++;
		if (nf && fs[k].lo <= a && a < fs[k].hi)
			im->names[r] = intern(str + fs[k].name);
		else if (nf && k + 1 < nf && fs[k + 1].lo > a && fs[k + 1].lo - a < 16)
			im->names[r] = intern(str + fs[k + 1].name);	/* patchable NOPs before the entry */
	}
	im->strtab = str;
	im->funcs = fs;
	im->nfuncs = nf;
	str = NULL;
	fs = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(sh);
	free(syms);
	free(fs);
	free(str);
}

struct find_ctx {
	uintptr_t addr;
	char path[4096];
	uintptr_t bias;
	bool found;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_ctx *c = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && c->addr >= lo && c->addr < lo + p->p_memsz) {
			snprintf(c->path, sizeof(c->path), "%s",
				 info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name
								       : "/proc/self/exe");
			c->bias = info->dlpi_addr;
			c->found = true;
			return 1;
		}
	}
	return 0;
}

/* ---- images ----------------------------------------------------------------- */

uint8_t *mcloc_near_page(uintptr_t lo, uintptr_t hi)
{
	long pg = sysconf(_SC_PAGESIZE);

	for (uintptr_t step = 0; step < (1ul << 30); step += 2ul << 20)
		for (int side = 0; side < 2; side++) {
			uintptr_t at = side ? ((lo - step - (uintptr_t)pg) & ~(uintptr_t)(pg - 1))
					    : ((hi + step + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1));
			void *p = mmap((void *)at, (size_t)pg, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

			if (p == MAP_FAILED)
				continue;
			if ((uintptr_t)p == at)
				return p;
			munmap(p, (size_t)pg);
		}
	return NULL;
}

/* IM's page of direct stubs, all written now and never again; NULL (its
 * sites then go through the args trampoline) when no page is in reach. */
static uint8_t *direct_page(const struct image *im)
{
	uint8_t *pg = im->nrecs ? mcloc_near_page(im->lo, im->hi + MCR_MAX_SITE) : NULL;

	if (!pg)
		return NULL;
	for (size_t i = 0; i < MCR_DIRECT_PAGE / MCR_DIRECT_STUB; i++)
		mcr_direct_stub(pg + i * MCR_DIRECT_STUB, (uintptr_t)mcr_direct_tramp);
	if (mprotect(pg, MCR_DIRECT_PAGE, PROT_READ | PROT_EXEC)) {
		munmap(pg, MCR_DIRECT_PAGE);
		return NULL;
	}
	return pg;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void args_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
			  void *args);
static void regs_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
			  void *regs);

static void cover_new_image(struct image *im);

int mcloc_register_image(struct mcloc_image *desc)
{
	/* The object the sites are in (the descriptor may be on the heap,
	 * for a program linked without objpatch). */
	struct find_ctx fc = { .addr = desc->mcount_stop > desc->mcount_start ?
				       *(const uintptr_t *)desc->mcount_start : (uintptr_t)desc };
	struct image im = { .desc = desc, .base = desc->base };
	int ret = 0;

	if (desc->magic != MCLOC_IMAGE_MAGIC || desc->version != MCLOC_IMAGE_VERSION)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	size_t n = desc->mcount_stop > desc->mcount_start ?
		(desc->mcount_stop - desc->mcount_start) / sizeof(uintptr_t) : 0;
	const uintptr_t *tab = (const uintptr_t *)desc->mcount_start;
	uint32_t *offs = malloc((n + 1) * sizeof(*offs));
	struct image *slot = calloc(1, sizeof(*slot));

	size_t at = 0;
	while (at < nimages && images[at])
		at++;
	if (!offs || !slot || at == MAX_IMAGES) {
		free(offs);
		free(slot);
		ret = offs && slot ? -ENOSPC : -ENOMEM;
		goto out;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		/* A zero entry becomes the load address after relocation:
		 * objpatch sort leaves those behind its __stop_ symbol. */
		if (tab[i] && tab[i] != im.base && tab[i] - im.base < UINT32_MAX)
			offs[k++] = (uint32_t)(tab[i] - im.base);
	qsort(offs, k, sizeof(*offs), cmp_u32);
	im.recs = calloc(k + 1, sizeof(*im.recs));
	if (!im.recs) {
		free(offs);
		free(slot);
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < k; i++) {
		const uint8_t *p = (const uint8_t *)(im.base + offs[i]);
		uint8_t nop[MCR_MAX_SITE];
		unsigned len = 0;

		/* The site is the NOP objpatch link --nop wrote; its length
		 * says which form it was compiled as. */
		for (unsigned l = 5; l <= 6 && !len; l++)
			if (mcr_encode(im.base + offs[i], l, 0, nop) == 0 && !memcmp(p, nop, l))
				len = l;
		im.recs[im.nrecs].off = offs[i];
		im.recs[im.nrecs].state = len << REC_LEN_SHIFT | (len ? 0 : REC_REFUSED);
		if (!len)
			nrefused++;
		im.nrecs++;
	}
	free(offs);
	if (im.nrecs) {
		im.lo = im.base + im.recs[0].off;
		im.hi = im.base + im.recs[im.nrecs - 1].off;
		uint64_t span = im.recs[im.nrecs - 1].off - im.recs[0].off;
		im.scale = span ? ((uint64_t)(im.nrecs - 1) << 32) / span : 0;
	}
	im.first = nrecords;
	im.stubs = direct_page(&im);
	if (im.nrecs && !im.stubs)
		say(1, "no page for direct stubs within reach; single ops go through the list");
	dl_iterate_phdr(find_object, &fc);
	if (fc.found)
		name_records(&im, fc.path, fc.bias);
	*slot = im;
	__atomic_store_n(&images[at], slot, __ATOMIC_RELEASE);
	if (at == nimages)
		__atomic_store_n(&nimages, nimages + 1, __ATOMIC_RELEASE);
	nrecords += im.nrecs;
	/* Before the handlers: a dispatcher finds the image through it. */
	__atomic_store_n(&desc->lib, slot, __ATOMIC_RELEASE);
	desc->args_handler = args_dispatch;
	desc->regs_handler = regs_dispatch;
	say(2, "image %s: %zu sites", fc.found ? fc.path : "?", im.nrecs);
	if (im.nrecs)
		cover_new_image(slot);
out:
	pthread_mutex_unlock(&lock);
	if (!ret)
		mcloc_env_tracer_kick();
	return ret;
}

/* Its code is going away (dlclose): out of the table now, its memory
 * once nobody can be reading it.  Its names stay (intern()). */
void mcloc_unregister_image(struct mcloc_image *desc)
{
	struct image *gone = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nimages && !gone; i++)
		if (images[i] && images[i]->desc == desc) {
			gone = images[i];
			__atomic_store_n(&images[i], NULL, __ATOMIC_RELEASE);
		}
	if (gone) {
		__atomic_store_n(&desc->lib, NULL, __ATOMIC_RELEASE);
		synchronize_rcu_bp();
		mcr_wait_handlers();
		if (gone->stubs)
			munmap(gone->stubs, MCR_DIRECT_PAGE);
		free(gone->recs);
		free(gone->names);
		free(gone->funcs);
		free(gone->strtab);
		free(gone);
	}
	pthread_mutex_unlock(&lock);
}

/* ---- dispatch ------------------------------------------------------------------ */

static bool bit_of(const uint64_t *map, size_t g)
{
	/* (Relaxed: a filter change rewrites words while sites run.) */
	return __atomic_load_n(&map[g / 64], __ATOMIC_RELAXED) >> (g % 64) & 1;
}

/* The set's callbacks for the site that ends at AFTER, in the thread's
 * in_tracer section. */
static void walk(uintptr_t after, uintptr_t parent, struct mcloc_image *img, void *regs)
{
	const struct image *im = NULL;
	long r;

	rcu_read_lock_bp();
	/* The image of the descriptor the trampoline passed, else by
	 * address: the library's own trampolines serve images without any.
	 * (An image's record is freed a grace period after it is unloaded.) */
	if (img)
		im = __atomic_load_n((struct image **)&img->lib, __ATOMIC_ACQUIRE);
	r = im && im->nrecs ? rec_before(im, after) : -1;
	if (r < 0 && (im = image_of(after - 1)))
		r = rec_before(im, after);
	if (r >= 0) {
		uintptr_t ip = im->base + im->recs[r].off;
		size_t g = im->first + (size_t)r;
		struct ops_set *set = rcu_dereference(cur_set);

		for (size_t i = 0; set && i < set->n; i++) {
			const struct set_ent *e = &set->v[i];

			if (bit_of(e->covers, g))
				e->func(ip, parent, e->ops, e->regs ? regs : NULL);
		}
	}
	rcu_read_unlock_bp();
}

static void dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
		     void *regs)
{
	if (in_tracer)
		return;		/* a callback called a traced function */
	in_tracer = 1;
	walk(after, parent, img, regs);
	in_tracer = 0;
}

/*
 * A site alone in one ops's hands, through its stub.  The stub says which
 * slot, but a thread may have been stopped between the site and here for
 * any time, long enough for the slot's ops to go and another to take it.
 * So the slot is trusted only if, inside the read-side section, the site
 * still calls this stub: then its ops is the one registered now, and it
 * cannot go before the section ends.  Otherwise the site changed under
 * the call, and the set decides, as for any call in flight.
 */
__attribute__((used)) void mcr_direct_hook(uintptr_t after, uintptr_t parent, uintptr_t stub)
{
	size_t i = (stub & (MCR_DIRECT_PAGE - 1)) / MCR_DIRECT_STUB;
	unsigned len = mcr_direct_len[i / MCR_DIRECT_SLOTS];

	if (in_tracer)
		return;
	in_tracer = 1;
	rcu_read_lock_bp();
	if (mcr_call_dest(after, len) == stub) {
		const struct direct *d = &direct[i % MCR_DIRECT_SLOTS];

		if (d->func)
			d->func(after - len, parent, d->ops, NULL);
	} else {
		walk(after, parent, NULL, NULL);
	}
	rcu_read_unlock_bp();
	in_tracer = 0;
}

static void args_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
			  void *args)
{
	(void)args;
	dispatch(after, parent, img, NULL);
}

static void regs_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
			  void *regs)
{
	dispatch(after, parent, img, regs);
}

/* ---- ops ------------------------------------------------------------------------ */

int mcloc_init(void)
{
	char err[256];
	bool first = false;

	pthread_mutex_lock(&lock);
	if (!inited) {
		inited = first = true;
		init_status = mcr_init(err, sizeof(err));
		if (init_status)
			say(0, "%s", err);
	}
	pthread_mutex_unlock(&lock);
	if (first && !init_status) {
		err[0] = 0;
		int r = mcloc_discover_main(err, sizeof(err));
		if (r)
			say(1, "the main program's own table: %s", err[0] ? err : strerror(-r));
	}
	return init_status;
}

bool mcloc_covers(uintptr_t lo, uintptr_t hi)
{
	bool found = false;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nimages && !found; i++)
		found = images[i] && images[i]->nrecs && images[i]->lo < hi && images[i]->hi >= lo;
	pthread_mutex_unlock(&lock);
	return found;
}

static size_t words(void)
{
	return nrecords / 64 + 1;
}

static int ensure_priv(struct mcloc_ops *ops)
{
	struct mcloc_ops_priv *p = ops->priv;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		ops->priv = p;
	}
	/* Bitmaps grow with the records (an image loaded since). */
	size_t w = words();
	if (!p->filter || p->nfilter < w) {
		uint64_t *f = realloc(p->filter, w * 8), *t = realloc(p->notrace, w * 8);

		if (f)
			p->filter = f;
		if (t)
			p->notrace = t;
		if (!f || !t)
			return -ENOMEM;
		memset(p->filter + p->nfilter, 0, (w - p->nfilter) * 8);
		memset(p->notrace + p->nfilter, 0, (w - p->nfilter) * 8);
		p->nfilter = w;
	}
	return 0;
}

/* With the lock held: OPS's filter bitmaps cover every record there is. */
static int prepare(struct mcloc_ops *ops)
{
	return ensure_priv(ops);
}

/* A copy of an ops's filters, to put back when a change cannot be
 * applied to its sites. */
struct filters {
	uint64_t *filter, *notrace;
};

static int save_filters(struct mcloc_ops *ops, struct filters *f)
{
	size_t bytes = ops->priv->nfilter * 8;

	f->filter = malloc(bytes + 8);
	f->notrace = malloc(bytes + 8);
	if (!f->filter || !f->notrace) {
		free(f->filter);
		free(f->notrace);
		return -ENOMEM;
	}
	memcpy(f->filter, ops->priv->filter, bytes);
	memcpy(f->notrace, ops->priv->notrace, bytes);
	return 0;
}

static void restore_filters(struct mcloc_ops *ops, struct filters *f)
{
	memcpy(ops->priv->filter, f->filter, ops->priv->nfilter * 8);
	memcpy(ops->priv->notrace, f->notrace, ops->priv->nfilter * 8);
	free(f->filter);
	free(f->notrace);
}

/* What OPS covers, word W: the filter (all when empty) minus notrace,
 * within the NCOVERED records that existed when it registered. */
static uint64_t covered_word(const struct mcloc_ops_priv *p, bool all, size_t w, size_t ncovered)
{
	uint64_t v = (all ? ~0ull : p->filter[w]) & ~p->notrace[w];

	if ((w + 1) * 64 > ncovered)
		v &= w * 64 >= ncovered ? 0 : (1ull << (ncovered - w * 64)) - 1;
	return v;
}

static bool filter_empty(const struct mcloc_ops_priv *p)
{
	for (size_t w = 0; w < p->nfilter; w++)
		if (p->filter[w])
			return false;
	return true;
}

/* What one ops adds to (DELTA +1) or takes from (-1) the state of a
 * record it covers: its reference, and its registers count if it needs
 * them, in one add.  Modulo 2^32 a negative one borrows from neither
 * neighbour while the counts stay non-negative. */
static uint32_t count_unit(const struct mcloc_ops *ops, int delta)
{
	return (uint32_t)delta * (1u + (ops->flags & MCLOC_OPS_SAVE_REGS ? 1u << REC_REGS_SHIFT : 0));
}

static void rec_add(size_t g, uint32_t unit);
static int update_sites(void);

/* Make OPS's bitmap word W hold TO: the records it gains and loses
 * change their counts, then the word the dispatcher reads changes. */
static void move_covers_word(struct mcloc_ops *ops, size_t w, uint64_t to)
{
	uint64_t *word = &ops->priv->covers[w];

	for (uint64_t d = *word ^ to; d; d &= d - 1) {
		size_t g = w * 64 + (size_t)__builtin_ctzll(d);

		rec_add(g, count_unit(ops, to >> (g % 64) & 1 ? +1 : -1));
	}
	__atomic_store_n(word, to, __ATOMIC_RELAXED);
}

/*
 * With the lock held, after OPS's filters changed: nothing for an ops that
 * is not registered (registering reads them).  For a registered one, its
 * sites follow now, as ftrace's follow a write to set_ftrace_filter while
 * tracing: the records it gains and loses change counts, the bitmap the
 * dispatcher reads changes word by word (a site in flight may see either
 * side of the change, never a half), and only the sites whose state
 * changes are patched, in one batch.  If the batch is refused, everything
 * goes back to SAVED and the error is returned.  Frees SAVED.
 */
static int retarget(struct mcloc_ops *ops, struct filters *saved)
{
	struct mcloc_ops_priv *p = ops->priv;
	size_t nw = (p->ncovered + 63) / 64;
	int ret = 0;

	if (!p->registered) {
		free(saved->filter);
		free(saved->notrace);
		return 0;
	}
	bool all = filter_empty(p);
	uint64_t *before = malloc(nw * 8 + 8);
	if (!before) {
		restore_filters(ops, saved);
		return -ENOMEM;
	}
	memcpy(before, p->covers, nw * 8);
	for (size_t w = 0; w < nw; w++)
		move_covers_word(ops, w, covered_word(p, all, w, p->ncovered));
	ret = update_sites();
	if (ret) {
		/* Back to what was, sites included. */
		for (size_t w = 0; w < nw; w++)
			move_covers_word(ops, w, before[w]);
		update_sites();
		restore_filters(ops, saved);
	} else {
		free(saved->filter);
		free(saved->notrace);
	}
	free(before);
	return ret;
}

static int set_globs(struct mcloc_ops *ops, const char *globs, int reset, bool notrace)
{
	int ret, count = 0;

	if (!ops || !globs)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	ret = prepare(ops);
	if (ret)
		goto out;
	struct filters saved;
	ret = save_filters(ops, &saved);
	if (ret)
		goto out;
	uint64_t *bits = notrace ? ops->priv->notrace : ops->priv->filter;
	if (reset)
		memset(bits, 0, ops->priv->nfilter * 8);
	char *dup = strdup(globs), *save = NULL;
	if (!dup) {
		restore_filters(ops, &saved);
		ret = -ENOMEM;
		goto out;
	}
	for (char *pat = strtok_r(dup, ", \t\n", &save); pat; pat = strtok_r(NULL, ", \t\n", &save)) {
		bool neg = pat[0] == '!', matched = false;

		for (size_t i = 0; i < nimages; i++)
			for (size_t r = 0; images[i] && r < images[i]->nrecs; r++) {
				const char *name = images[i]->names ? images[i]->names[r] : NULL;
				size_t g = images[i]->first + r;

				if (!name || fnmatch(pat + neg, name, 0))
					continue;
				matched = true;
				if (neg)
					bits[g / 64] &= ~(1ull << (g % 64));
				else
					bits[g / 64] |= 1ull << (g % 64);
			}
		/* As ftrace refuses a pattern that matches nothing: a filter
		 * left empty by it would mean every function. */
		if (!matched && !neg) {
			free(dup);
			restore_filters(ops, &saved);
			ret = -ENOENT;
			goto out;
		}
	}
	free(dup);
	ret = retarget(ops, &saved);
	if (ret)
		goto out;
	for (size_t w = 0; w < ops->priv->nfilter; w++)
		count += __builtin_popcountll(bits[w]);
	ret = count;
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

int mcloc_set_filter(struct mcloc_ops *ops, const char *globs, int reset)
{
	return set_globs(ops, globs, reset, false);
}

int mcloc_set_notrace(struct mcloc_ops *ops, const char *globs, int reset)
{
	return set_globs(ops, globs, reset, true);
}

int mcloc_set_filter_ip(struct mcloc_ops *ops, uintptr_t ip, int remove)
{
	int ret;

	if (!ops)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	struct filters saved = { 0 };
	ret = prepare(ops);
	if (!ret)
		ret = save_filters(ops, &saved);
	if (!ret) {
		ret = -ENOENT;
		for (size_t i = 0; i < nimages; i++) {
			if (!images[i])
				continue;
			long r = rec_at(images[i], ip);

			/* A function's address names its site too. */
			if (r < 0 && images[i]->names)
				for (size_t k = 0; k < images[i]->nrecs && r < 0; k++)
					if (images[i]->base + images[i]->recs[k].off >= ip &&
					    images[i]->base + images[i]->recs[k].off < ip + 16)
						r = (long)k;
			if (r < 0)
				continue;
			size_t g = images[i]->first + (size_t)r;
			if (remove)
				ops->priv->filter[g / 64] &= ~(1ull << (g % 64));
			else
				ops->priv->filter[g / 64] |= 1ull << (g % 64);
			ret = 0;
			break;
		}
		ret = ret ? (restore_filters(ops, &saved), ret) : retarget(ops, &saved);
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

#define REC_ENABLED_ALL (REC_ENABLED | REC_ENABLED_REGS | REC_ENABLED_DIRECT)

/* The registered ops that own a direct slot, for one update_sites(): an
 * ops that is leaving has given up its counts already. */
struct owners {
	size_t n;
	struct { const uint64_t *covers; int slot; } v[MCR_DIRECT_SLOTS];
};

static void owners_now(struct owners *o)
{
	const struct ops_set *set = cur_set;

	o->n = 0;
	for (size_t i = 0; set && i < set->n; i++) {
		const struct mcloc_ops_priv *p = set->v[i].ops->priv;

		if (!p->leaving && p->slot && o->n < MCR_DIRECT_SLOTS) {
			o->v[o->n].covers = set->v[i].covers;
			o->v[o->n++].slot = p->slot - 1;
		}
	}
}

/* Where, in a stub page, the stubs for sites of each length begin (a site
 * length has 4 bits in a record's state). */
struct stub_offs {
	size_t of_len[16];
};

static void stub_offs_init(struct stub_offs *so)
{
	for (unsigned len = 0; len < 16; len++) {
		size_t v = 0;

		while (v + 1 < MCR_DIRECT_LENS && mcr_direct_len[v] != len)
			v++;
		so->of_len[len] = v * MCR_DIRECT_SLOTS * MCR_DIRECT_STUB;
	}
}

/*
 * Where the site of record R of IM should call, from its state S (0:
 * nowhere, the NOP), and in *FLAGS the REC_ENABLED* bits that will say so:
 * the regs trampoline if any ops needs registers, the one ops's stub if
 * one alone covers it and has a slot, else the list (args trampoline).
 */
static uintptr_t wanted(const struct image *im, size_t r, uint32_t s, const struct owners *o,
			const struct stub_offs *so, uint32_t *flags)
{
	*flags = 0;
	if (!(s & REC_REF_MASK))
		return 0;
	*flags = REC_ENABLED;
	if (s & REC_REGS_MASK) {
		*flags |= REC_ENABLED_REGS;
		return im->desc->tramp_regs;
	}
	if ((s & REC_REF_MASK) == 1 && im->stubs) {
		size_t g = im->first + r;

		for (size_t i = 0; i < o->n; i++)
			if (bit_of(o->v[i].covers, g)) {
				*flags |= REC_ENABLED_DIRECT;
				return (uintptr_t)im->stubs + so->of_len[s >> REC_LEN_SHIFT] +
				       (size_t)o->v[i].slot * MCR_DIRECT_STUB;
			}
	}
	return im->desc->tramp_args;
}

/* Where record R of IM calls now.  A direct site's stub is read back from
 * the site: its slot's ops may be the one leaving. */
static uintptr_t current(const struct image *im, size_t r, uint32_t s)
{
	unsigned len = s >> REC_LEN_SHIFT;

	if (!(s & REC_ENABLED))
		return 0;
	if (s & REC_ENABLED_REGS)
		return im->desc->tramp_regs;
	if (s & REC_ENABLED_DIRECT)
		return mcr_call_dest(im->base + im->recs[r].off + len, len);
	return im->desc->tramp_args;
}

/* Patch every record whose wanted state differs from its enabled one:
 * one pass over the records, one batch. */
static int update_sites(void)
{
	/* Kept from batch to batch (under the lock): a fresh 100,000-site
	 * buffer costs more in page faults than the batch's own writes. */
	static struct mcr_poke *v;
	static size_t vcap;
	struct owners own;
	struct stub_offs so;
	size_t cap = 1, n = 0;
	char err[256];
	int ret = 0;

	for (size_t i = 0; i < nimages; i++)
		cap += images[i] ? images[i]->nrecs : 0;
	if (cap > vcap) {
		struct mcr_poke *nv = realloc(v, cap * sizeof(*v));

		if (!nv)
			return -ENOMEM;
		v = nv;
		vcap = cap;
	}
	owners_now(&own);
	stub_offs_init(&so);
	for (size_t i = 0; i < nimages; i++) {
		struct image *im = images[i];

		if (!im)
			continue;
		for (size_t r = 0; r < im->nrecs; r++) {
			uint32_t s = im->recs[r].state, f;

			if (!(s & (REC_REF_MASK | REC_ENABLED)) || (s & REC_REFUSED))
				continue;
			uintptr_t to = wanted(im, r, s, &own, &so, &f);
			if (f == (s & REC_ENABLED_ALL))
				continue;
			unsigned len = s >> REC_LEN_SHIFT;
			uintptr_t site = im->base + im->recs[r].off;
			struct mcr_poke *p = &v[n];

			p->addr = site;
			p->len = (uint8_t)len;
			if (mcr_encode(site, len, current(im, r, s), p->old_bytes) < 0 ||
			    mcr_encode(site, len, to, p->new_bytes) < 0) {
				im->recs[r].state |= REC_REFUSED;
				nrefused++;
				say(1, "site %#lx: no %u-byte call reaches the trampoline; refused",
				    (unsigned long)site, len);
				continue;
			}
			/* The new state now (a dispatcher reads only the
			 * length), the old one in the poke, in case the batch
			 * is refused: a second walk over a hundred thousand
			 * records cost more than the batch's bookkeeping. */
			p->tag = (uint8_t)((s & REC_ENABLED_ALL) >> 24);
			im->recs[r].state = (s & ~REC_ENABLED_ALL) | f;
			n++;
		}
	}
	ret = mcr_patch(v, n, err, sizeof(err));
	if (ret) {
		say(0, "%s", err);
		for (size_t k = 0; k < n; k++) {
			struct image *im = (struct image *)image_of(v[k].addr);
			long r = im ? rec_at(im, v[k].addr) : -1;

			if (r >= 0)
				im->recs[r].state = (im->recs[r].state & ~REC_ENABLED_ALL) |
						    (uint32_t)v[k].tag << 24;
		}
	}
	return ret;
}

/* Add UNIT (count_unit()) to the state of global record G. */
static void rec_add(size_t g, uint32_t unit)
{
	for (size_t i = 0; i < nimages; i++) {
		struct image *im = images[i];

		if (!im || g < im->first || g >= im->first + im->nrecs)
			continue;
		im->recs[g - im->first].state += unit;
		return;
	}
}

/* Add DELTA to the counts of every record OPS covers: its bitmap's set
 * bits, word by word (an image loaded after it registered has records
 * past its ncovered, which it does not cover). */
static void count(struct mcloc_ops *ops, int delta)
{
	const uint64_t *covers = ops->priv->covers;
	size_t ncovered = ops->priv->ncovered;
	uint32_t d = count_unit(ops, delta);

	for (size_t i = 0; i < nimages; i++) {
		struct image *im = images[i];
		if (!im)
			continue;
		size_t lo = im->first, hi = im->first + im->nrecs;

		if (hi > ncovered)
			hi = ncovered;
		for (size_t g = lo; g < hi;) {
			size_t end = (g / 64 + 1) * 64 < hi ? (g / 64 + 1) * 64 : hi;
			uint64_t bits = covers[g / 64] >> (g % 64);

			if (end - g < 64)
				bits &= (1ull << (end - g)) - 1;
			for (; bits; bits &= bits - 1)
				im->recs[g - lo + (size_t)__builtin_ctzll(bits)].state += d;
			g = end;
		}
	}
}

/* Sets replaced by an addition, freed after the next grace period. */
static struct ops_set *retired[64];
static size_t nretired;

/*
 * An image just loaded, with the lock held: as ftrace enables a new
 * module's functions for an ops whose filter is empty, every registered
 * ops that traces everything now covers IM's records too (its notrace
 * set names functions by record, so it has none of them).  The bitmaps
 * the dispatchers read cannot grow in place: each such ops gets a new
 * one, published in a new set, and the old ones are freed a grace period
 * later.  Then the sites change in one batch.  On failure the image is
 * simply not covered, as before an ops registers again.
 */
static void cover_new_image(struct image *im)
{
	const struct ops_set *old = cur_set;
	size_t n = old ? old->n : 0, w = words(), grown = 0;
	struct ops_set *set = malloc(sizeof(*set) + (n + 1) * sizeof(set->v[0]));
	uint64_t **gone = calloc(n + 1, sizeof(*gone));

	if (!set || !gone || !n)
		goto out;
	set->n = n;
	for (size_t i = 0; i < n; i++) {
		struct mcloc_ops *ops = old->v[i].ops;
		struct mcloc_ops_priv *p = ops->priv;
		uint64_t *c;

		set->v[i] = old->v[i];
		if (!filter_empty(p) || ensure_priv(ops) || !(c = calloc(w, 8)))
			continue;
		memcpy(c, p->covers, (p->ncovered + 63) / 64 * 8);
		for (size_t g = im->first; g < im->first + im->nrecs; g++)
			c[g / 64] |= 1ull << (g % 64);
		gone[grown++] = p->covers;
		p->covers = c;
		set->v[i].covers = c;
		p->ncovered = nrecords;
		for (size_t r = 0; r < im->nrecs; r++)
			im->recs[r].state += count_unit(ops, +1);
	}
	if (!grown)
		goto out;
	rcu_set_pointer(&cur_set, set);
	set = NULL;
	if (update_sites())
		say(1, "a new image's sites stay off: the batch was refused");
	synchronize_rcu_bp();
	free((void *)old);
	for (size_t i = 0; i < grown; i++)
		free(gone[i]);
out:
	free(set);
	free(gone);
}

static int publish(struct mcloc_ops *add, struct mcloc_ops *remove)
{
	struct ops_set *old = cur_set;
	size_t n = old ? old->n : 0;
	struct ops_set *set = malloc(sizeof(*set) + (n + 1) * sizeof(set->v[0]));

	if (!set)
		return -ENOMEM;
	set->n = 0;
	for (size_t i = 0; i < n; i++)
		if (old->v[i].ops != remove)
			set->v[set->n++] = old->v[i];
	if (add)
		set->v[set->n++] = (struct set_ent){ add, add->func, add->priv->covers,
						     add->flags & MCLOC_OPS_SAVE_REGS };
	rcu_set_pointer(&cur_set, set);
	/* An addition needs no grace period before returning: only the
	 * old array must outlive its readers, so it waits for the next
	 * removal's (or for a full list).  A removal must wait: after it,
	 * no thread may be in the removed ops's callback. */
	if (add && !remove && nretired < sizeof(retired) / sizeof(retired[0])) {
		retired[nretired++] = old;
		return 0;
	}
	synchronize_rcu_bp();
	free(old);
	for (size_t i = 0; i < nretired; i++)
		free(retired[i]);
	nretired = 0;
	return 0;
}

/* A direct slot for OPS (+1; 0 when all are taken: its lone sites then
 * go through the list).  Set before any site can call the slot's stubs. */
static int take_slot(struct mcloc_ops *ops)
{
	if (ops->flags & MCLOC_OPS_SAVE_REGS)
		return 0;
	for (int k = 0; k < MCR_DIRECT_SLOTS; k++)
		if (!direct[k].func) {
			direct[k] = (struct direct){ ops->func, ops };
			return k + 1;
		}
	return 0;
}

static void ignore(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops, struct mcloc_regs *regs)
{
	(void)ip, (void)parent, (void)ops, (void)regs;
}

/*
 * After OPS left the set (a grace period later): its slot is free again,
 * if SITES_OK says no site calls its stubs any more.  Otherwise a site
 * that could not be patched back still does, and the slot stays taken,
 * calling nothing: the caller may free OPS.
 */
static void release_slot(struct mcloc_ops *ops, bool sites_ok)
{
	struct mcloc_ops_priv *p = ops->priv;

	if (!p->slot)
		return;
	direct[p->slot - 1] = sites_ok ? (struct direct){ 0 } : (struct direct){ ignore, NULL };
	p->slot = 0;
}

int mcloc_register_ops(struct mcloc_ops *ops)
{
	int ret = mcloc_init();

	if (ret)
		return ret;
	if (!ops || !ops->func)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	ret = prepare(ops);
	if (ret)
		goto out;
	struct mcloc_ops_priv *p = ops->priv;
	if (p->registered) {
		ret = -EBUSY;
		goto out;
	}
	bool all = filter_empty(p);
	free(p->covers);
	p->covers = calloc(p->nfilter, 8);
	if (!p->covers) {
		ret = -ENOMEM;
		goto out;
	}
	/* The records that exist now; an image loaded later is covered
	 * only if the filter is empty (cover_new_image()), or once the ops
	 * registers again. */
	p->ncovered = nrecords;
	for (size_t w = 0; w < p->nfilter; w++)
		p->covers[w] = covered_word(p, all, w, p->ncovered);
	p->leaving = false;
	p->slot = take_slot(ops);
	/* Visible to the dispatcher before any site calls it. */
	ret = publish(ops, NULL);
	if (ret) {
		release_slot(ops, true);
		goto out;
	}
	count(ops, +1);
	ret = update_sites();
	if (ret) {
		p->leaving = true;
		count(ops, -1);
		bool back = !update_sites();
		publish(NULL, ops);
		release_slot(ops, back);
		goto out;
	}
	p->registered = true;
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

int mcloc_unregister_ops(struct mcloc_ops *ops)
{
	int ret = 0;

	if (!ops || !ops->priv)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	if (!ops->priv->registered) {
		ret = -ENOENT;
		goto out;
	}
	ops->priv->leaving = true;
	count(ops, -1);
	ret = update_sites();
	if (ret)
		say(0, "unregister: sites stay enabled; the ops is removed anyway");
	/* Out of the set, then a grace period: after it, no thread is in
	 * OPS's callback or can reach it. */
	publish(NULL, ops);
	release_slot(ops, !ret);
	ops->priv->registered = false;
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

void mcloc_ops_free(struct mcloc_ops *ops)
{
	if (!ops || !ops->priv || ops->priv->registered)
		return;
	free(ops->priv->filter);
	free(ops->priv->notrace);
	free(ops->priv->covers);
	free(ops->priv);
	ops->priv = NULL;
}

void mcloc_get_stats(struct mcloc_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nimages; i++) {
		if (!images[i])
			continue;
		st->images++;
		st->records += images[i]->nrecs;
		for (size_t r = 0; r < images[i]->nrecs; r++) {
			st->enabled += !!(images[i]->recs[r].state & REC_ENABLED);
			st->direct += !!(images[i]->recs[r].state & REC_ENABLED_DIRECT);
		}
	}
	st->record_bytes = st->records * sizeof(struct mcloc_rec);
	st->refused = nrefused;
	st->batches = mcr_stats.batches;
	st->sites_patched = mcr_stats.sites;
	st->syncs = mcr_stats.syncs;
	st->last_batch_ms = mcr_stats.last_batch_ms;
	pthread_mutex_unlock(&lock);
}

/* (The lookups below run in callbacks, so they take no lock: a
 * read-side section keeps an image being unloaded alive meanwhile.) */
const char *mcloc_addr_name(uintptr_t addr, uintptr_t *off)
{
	const char *name = NULL;
	size_t n = __atomic_load_n(&nimages, __ATOMIC_ACQUIRE);

	rcu_read_lock_bp();
	for (size_t i = 0; i < n && !name; i++) {
		const struct image *im = image_at(i);
		size_t lo = 0, hi = im ? im->nfuncs : 0;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (im->funcs[mid].lo <= addr)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && addr < im->funcs[lo - 1].hi) {
			if (off)
				*off = addr - im->funcs[lo - 1].lo;
			name = im->strtab + im->funcs[lo - 1].name;
		}
	}
	rcu_read_unlock_bp();
	return name;
}

const char *mcloc_site_name(uintptr_t ip)
{
	const char *name = NULL;

	rcu_read_lock_bp();
	const struct image *im = image_of(ip);
	long r = im ? rec_at(im, ip) : -1;
	if (r >= 0 && im->names)
		name = im->names[r];
	rcu_read_unlock_bp();
	return name;
}

void mcloc_each_site_name(void (*fn)(const char *name, void *arg), void *arg)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nimages; i++)
		for (size_t r = 0; images[i] && images[i]->names && r < images[i]->nrecs; r++)
			if (images[i]->names[r])
				fn(images[i]->names[r], arg);
	pthread_mutex_unlock(&lock);
}

uintptr_t mcloc_site_of(const char *name)
{
	uintptr_t site = 0;
	size_t n = __atomic_load_n(&nimages, __ATOMIC_ACQUIRE);

	rcu_read_lock_bp();
	for (size_t i = 0; i < n && !site; i++) {
		const struct image *im = image_at(i);

		for (size_t r = 0; im && im->names && r < im->nrecs && !site; r++)
			if (im->names[r] && !strcmp(im->names[r], name))
				site = im->base + im->recs[r].off;
	}
	rcu_read_unlock_bp();
	return site;
}

/*
 * No patching across fork(): the child gets a consistent text and a lock
 * nobody holds.  liburcu-bp must be told too, or a child that runs a
 * traced function can block on a registry lock some other thread held at
 * the fork (seen in the stress test).
 *
 * Its fork hooks do not cover the lock it takes when a thread registers
 * (its first read-side section) and when a registered thread exits.  So
 * the forking thread registers first, here: the child's only thread then
 * never needs that lock for a traced call (tests/fixtures/runtime/
 * forkreg.c hung one child in 9,000 forks without this).  A child that
 * creates threads which run traced functions can still meet it held; see
 * BUGS in libmcloc(3).
 */
static void atfork_prepare(void)
{
	urcu_bp_register_thread();
	pthread_mutex_lock(&lock);
	urcu_bp_before_fork();
}

static void atfork_parent(void)
{
	urcu_bp_after_fork_parent();
	pthread_mutex_unlock(&lock);
}

static void atfork_child(void)
{
	urcu_bp_after_fork_child();
	pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void mcloc_ctor(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
