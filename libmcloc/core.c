// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's core: registering images and ops, and what every site should
 * be (state.c holds the shared state, images.c the records and names,
 * dispatch.c what a call runs).
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
 * Ops.  The registered set is an array published with RCU (rcu.h, which
 * needs no per-thread registration call: any thread may
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
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "patch.h"

#include "rcu.h"

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

static bool inited;
static int init_status;



static void cover_new_image(void);

/* ---- registering images ---------------------------------------------------- */

uint8_t *mcr_near_page(uintptr_t lo, uintptr_t hi)
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
#if MCR_ONE_STORE
	(void)im;
	return NULL;	/* (the sites' ops slots do this job) */
#else
	uint8_t *pg = im->nrecs ? mcr_near_page(im->lo, im->hi + MCR_MAX_SITE) : NULL;

	if (!pg)
		return NULL;
	for (size_t i = 0; i < MCR_DIRECT_PAGE / MCR_DIRECT_STUB; i++)
		mcr_direct_stub(pg + i * MCR_DIRECT_STUB, (uintptr_t)mcr_direct_tramp);
	if (mprotect(pg, MCR_DIRECT_PAGE, PROT_READ | PROT_EXEC)) {
		munmap(pg, MCR_DIRECT_PAGE);
		return NULL;
	}
	return pg;
#endif
}

/*
 * An image's constructor and destructor call these, under the dynamic
 * loader's lock, while other threads may run callbacks: nothing here
 * waits for a grace period (a reader could be waiting for that lock, as
 * a callback calling dladdr() once did).  Registering publishes the
 * image, lets the hooks see it (the environment's tracer extends its
 * filter to it), and patches its sites for the ops that cover it, which
 * waits for no reader; what that replaces is retired with mcr_defer().
 * Unregistering takes the image out of the table and retires its memory
 * the same way.
 */
int mcloc_register_image(struct mcloc_image *desc)
{
	struct image im = { .desc = desc, .base = desc->base };
	int ret = 0;

	/* Version 2 images work, but their trampolines cannot enter a
	 * direct trampoline from the list. */
	if (desc->magic != MCLOC_IMAGE_MAGIC || desc->version < 2 ||
	    desc->version > MCLOC_IMAGE_VERSION)
		return -EINVAL;
	im.version = desc->version;
	pthread_mutex_lock(&mcr_lock);
	struct image *slot = calloc(1, sizeof(*slot));
	size_t at = 0;

	while (at < mcr_nimages && mcr_images[at])
		at++;
	if (!slot || at == MCR_MAX_IMAGES) {
		free(slot);
		ret = slot ? -ENOSPC : -ENOMEM;
		goto out;
	}
	ret = mcr_image_records(&im, desc);
	if (ret) {
		free(slot);
		goto out;
	}
	im.first = mcr_nrecords;
	im.stubs = direct_page(&im);
	if (im.nrecs && !im.stubs && !MCR_ONE_STORE)
		mcr_say(1, "no page for direct stubs within reach; single ops go through the list");
	const char *path = mcr_image_name(&im, desc);

	*slot = im;
	__atomic_store_n(&mcr_images[at], slot, __ATOMIC_RELEASE);
	if (at == mcr_nimages)
		__atomic_store_n(&mcr_nimages, mcr_nimages + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&mcr_images_gen, mcr_images_gen + 1, __ATOMIC_RELEASE);
	mcr_nrecords += im.nrecs;
	/* Before the handlers: a dispatcher finds the image through it. */
	__atomic_store_n(&desc->lib, slot, __ATOMIC_RELEASE);
	desc->args_handler = mcr_args_dispatch;
	desc->regs_handler = mcr_regs_dispatch;
	mcr_say(2, "image %s: %zu sites", path ? path : "?", im.nrecs);
out:
	pthread_mutex_unlock(&mcr_lock);
	if (ret)
		return ret;
	/* The hooks first (a filter extended to the image's functions), then
	 * the sites.  (The image stays: only its own destructor, which runs
	 * after this constructor, takes it away.) */
	if (mcr_hooks.image_added)
		mcr_hooks.image_added();
	if (im.nrecs) {
		pthread_mutex_lock(&mcr_lock);
		cover_new_image();
		pthread_mutex_unlock(&mcr_lock);
	}
	mcr_rcu_try_reclaim();
	return 0;
}

/* A grace period after its image left the table: no dispatcher, name
 * lookup or SIGTRAP handler (each in a read-side section) can still see
 * it, and no site calls its stubs (a site of its own runs only while a
 * thread runs its code, which dlclose() forbids). */
static void image_retire(void *p)
{
	struct image *gone = p;

	if (gone->stubs)
		munmap(gone->stubs, MCR_DIRECT_PAGE);
	mcr_image_free(gone);
}

/* Its code is going away (dlclose): out of the table now, its memory
 * once nobody can be reading it.  Its names stay (intern()). */
void mcloc_unregister_image(struct mcloc_image *desc)
{
	struct image *gone = NULL;

	pthread_mutex_lock(&mcr_lock);
	for (size_t i = 0; i < mcr_nimages && !gone; i++)
		if (mcr_images[i] && mcr_images[i]->desc == desc) {
			gone = mcr_images[i];
			__atomic_store_n(&mcr_images[i], NULL, __ATOMIC_RELEASE);
			__atomic_store_n(&mcr_images_gen, mcr_images_gen + 1, __ATOMIC_RELEASE);
		}
	if (gone)
		__atomic_store_n(&desc->lib, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mcr_lock);
	/* (Without memory to queue it, the image's memory is leaked: safe,
	 * where waiting here is not.) */
	if (gone && mcr_defer(image_retire, gone))
		mcr_say(1, "an unloaded image's memory is leaked: no memory to retire it");
	mcr_rcu_try_reclaim();
}

/* ---- ops ------------------------------------------------------------------------ */

int mcloc_init(void)
{
	char err[256];
	bool first = false;

	pthread_mutex_lock(&mcr_lock);
	if (!inited) {
		inited = first = true;
		err[0] = 0;
		init_status = mcr_init(mcr_is_site, err, sizeof(err));
		if (init_status)
			mcr_say(0, "%s", err);
		else if (err[0])	/* (how it works without something) */
			mcr_say(1, "%s", err);
	}
	pthread_mutex_unlock(&mcr_lock);
	if (first && !init_status && mcr_hooks.after_init) {
		err[0] = 0;
		int r = mcr_hooks.after_init(err, sizeof(err));
		if (r)
			mcr_say(1, "the main program's own table: %s", err[0] ? err : strerror(-r));
	}
	return init_status;
}

bool mcr_covers(uintptr_t lo, uintptr_t hi)
{
	bool found = false;

	pthread_mutex_lock(&mcr_lock);
	for (size_t i = 0; i < mcr_nimages && !found; i++)
		found = mcr_images[i] && mcr_images[i]->nrecs && mcr_images[i]->lo < hi && mcr_images[i]->hi >= lo;
	pthread_mutex_unlock(&mcr_lock);
	return found;
}

static size_t words(void)
{
	return mcr_nrecords / 64 + 1;
}

/* OPS as its caller compiled it: see struct mcloc_ops's sz. */
static int ops_valid(const struct mcloc_ops *ops)
{
	if (!ops)
		return -EINVAL;
	for (size_t i = sizeof(*ops); i < ops->sz; i++)
		if (((const unsigned char *)ops)[i])
			return -E2BIG;
	return 0;
}

static int ensure_priv(struct mcloc_ops *ops)
{
	struct mcloc_ops_priv *p = ops->priv;
	int v = ops_valid(ops);

	if (v)
		return v;
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
static void count(const struct mcloc_ops *ops, int delta);

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
	pthread_mutex_lock(&mcr_lock);
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

		for (size_t i = 0; i < mcr_nimages; i++)
			for (size_t r = 0; mcr_images[i] && r < mcr_images[i]->nrecs; r++) {
				const char *name = mcr_images[i]->names ? mcr_images[i]->names[r] : NULL;
				size_t g = mcr_images[i]->first + r;

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
	pthread_mutex_unlock(&mcr_lock);
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

/* With the lock held: the record of the site at IP, or of the function
 * at IP (its site lies within its first 16 bytes); -1 if none. */
static long site_rec(uintptr_t ip, struct image **imp)
{
	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];

		if (!im)
			continue;
		long r = mcr_rec_at(im, ip);
		if (r < 0 && im->names && ip >= im->base) {
			/* A function's entry names its site: the first record
			 * within the function (a -pg site follows the
			 * prologue), or without its symbol within 16 bytes. */
			size_t k = mcr_rec_lower(im, ip);
			const struct fsym *f = mcr_func_at(im, ip);
			uintptr_t end = f && f->lo == ip ? f->hi : ip + 16;

			if (k < im->nrecs && im->base + im->recs[k].off < end)
				r = (long)k;
		}
		if (r >= 0) {
			*imp = im;
			return r;
		}
	}
	return -1;
}

uintptr_t mcr_site_of_func(uintptr_t fn)
{
	struct image *im;

	pthread_mutex_lock(&mcr_lock);
	long r = site_rec(fn, &im);
	uintptr_t site = r >= 0 ? im->base + im->recs[r].off : 0;
	pthread_mutex_unlock(&mcr_lock);
	return site;
}

int mcloc_set_filter_ip(struct mcloc_ops *ops, uintptr_t ip, int remove)
{
	int ret;

	if (!ops)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	struct filters saved = { 0 };
	ret = prepare(ops);
	if (!ret)
		ret = save_filters(ops, &saved);
	if (!ret) {
		struct image *im;
		long r = site_rec(ip, &im);

		ret = -ENOENT;
		if (r >= 0) {
			size_t g = im->first + (size_t)r;

			if (remove)
				ops->priv->filter[g / 64] &= ~(1ull << (g % 64));
			else
				ops->priv->filter[g / 64] |= 1ull << (g % 64);
			ret = 0;
		}
		ret = ret ? (restore_filters(ops, &saved), ret) : retarget(ops, &saved);
	}
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

#define REC_ENABLED_ALL (REC_ENABLED | REC_ENABLED_REGS | REC_ENABLED_DIRECT | REC_ENABLED_USER)

/* The registered ops a site may call alone, for one update_sites(): those
 * that own a direct slot (x86_64), or all that need no registers (ops
 * slots).  An ops that is leaving has given up its counts already.  Past
 * MCR_DIRECT_SLOTS of them, the others' lone sites go through the list. */
struct owners {
	size_t n;
	struct { const uint64_t *covers; int slot; struct mcloc_ops *ops; } v[MCR_DIRECT_SLOTS];
};

static void owners_now(struct owners *o)
{
	const struct ops_set *set = mcr_cur_set;

	o->n = 0;
	for (size_t i = 0; set && i < set->n; i++) {
		const struct mcloc_ops_priv *p = set->v[i].ops->priv;

		if (!p->leaving && (MCR_ONE_STORE ? !set->v[i].regs : p->slot) &&
		    o->n < MCR_DIRECT_SLOTS) {
			o->v[o->n].covers = set->v[i].covers;
			o->v[o->n].ops = set->v[i].ops;
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
#if MCR_ONE_STORE
	(void)so;	/* (no stub pages) */
#else
	for (unsigned len = 0; len < 16; len++) {
		size_t v = 0;

		while (v + 1 < MCR_DIRECT_LENS && mcr_direct_len[v] != len)
			v++;
		so->of_len[len] = v * MCR_DIRECT_SLOTS * MCR_DIRECT_STUB;
	}
#endif
}

/* What deciding a site needs of its image, copied out of it: the
 * pokes are written as bytes, which may alias anything, so fields read
 * through the image were read again for every site. */
struct site_view {
	struct mcloc_rec *recs;
	size_t first, nrecs;
	uintptr_t base, args, regs;
	uint8_t *stubs;
	bool slots;
};

static struct site_view view_of(const struct image *im)
{
	return (struct site_view){ im->recs, im->first, im->nrecs, im->base,
				   im->desc->tramp_args, im->desc->tramp_regs, im->stubs, im->slots };
}

/* Which of O's owners alone covers record R of IV (state S) where that
 * decides its call (one ops on a site with an ops slot or a stub page);
 * -1 if none does or it does not matter. */
static inline int owner_of(const struct site_view *iv, size_t r, uint32_t s,
			   const struct owners *o)
{
	if ((s & REC_REF_MASK) != 1 || !(iv->slots || iv->stubs))
		return -1;
	for (size_t i = 0; i < o->n; i++)
		if (mcr_bit_of(o->v[i].covers, iv->first + r))
			return (int)i;
	return -1;
}

/*
 * Where the site of record R of IV should call, from its state S (0:
 * nowhere, the NOP) and its owner WHO (owner_of()), and in *FLAGS the
 * REC_ENABLED* bits that will say so: the regs trampoline if any ops
 * needs registers; else, where sites have ops slots, the args trampoline
 * with *SLOT the one ops that covers it or the list ops; else the one
 * ops's stub if one alone covers it and has a direct slot, else the list
 * (args trampoline).
 */
static inline uintptr_t wanted(const struct site_view *iv, size_t r, uint32_t s,
			       const struct owners *o, int who, const struct stub_offs *so,
			       uint32_t *flags, uintptr_t *slot)
{
	*flags = 0;
	if (!(s & REC_REF_MASK))
		return 0;
	*flags = REC_ENABLED;
	/* A direct trampoline alone, within the site's reach: called
	 * itself, nothing of ours in between. */
	if ((s & REC_HAS_DIRECT) && (s & REC_REF_MASK) == 1) {
		uintptr_t t = mcr_direct_of(mcr_directs, iv->first + r);
		uint8_t b[MCR_MAX_SITE];

		if (t && !mcr_encode(iv->base + iv->recs[r].off, s >> REC_LEN_SHIFT, t, b)) {
			*flags |= REC_ENABLED_USER;
			return t;
		}
	}
	if (s & REC_REGS_MASK) {
		*flags |= REC_ENABLED_REGS;
		return iv->regs;
	}
	if (iv->slots) {
		*slot = who < 0 ? (uintptr_t)&mcr_list_ops : (uintptr_t)o->v[who].ops;
		*flags |= who < 0 ? 0 : REC_ENABLED_DIRECT;
		return iv->args;
	}
	if (who >= 0) {
		*flags |= REC_ENABLED_DIRECT;
		return (uintptr_t)iv->stubs + so->of_len[s >> REC_LEN_SHIFT] +
		       (size_t)o->v[who].slot * MCR_DIRECT_STUB;
	}
	return iv->args;
}

/* What a batch may change in a record's state (and a poke's tag
 * carries back, should the batch be refused). */
#define REC_SITE_SHIFT 22
#define REC_SITE_BITS (REC_PARKED | REC_ENABLED_ALL | (7u << REC_LEN_SHIFT))
#define REC_KIND (REC_ENABLED_REGS | REC_ENABLED_DIRECT | REC_ENABLED_USER)

/* Where record R of IM calls now (S enabled), or would call if enabled
 * again (S parked), when the state says so: 0 for a call the site alone
 * knows (x86_64: which stub; a parked direct trampoline, which may be
 * gone from the set), whose tail the patcher then reads back. */
static inline uintptr_t current(const struct site_view *iv, size_t r, uint32_t s)
{
	if (s & REC_ENABLED_USER)
		return s & REC_ENABLED ? mcr_direct_of(mcr_directs, iv->first + r) : 0;
	if (s & REC_ENABLED_REGS)
		return iv->regs;
	if ((s & REC_ENABLED_DIRECT) && !MCR_ONE_STORE)
		return 0;
	return iv->args;
}

/* Encode a call from SITE (LEN bytes) to TO, a direct trampoline of the
 * user's (USER) or an image's trampoline or stub, parked (PARK) or not:
 * TO 0 gives a call whose tail (*FLAGS |= TAIL) the patcher reads back. */
static inline __attribute__((always_inline)) int
encode_call(uintptr_t site, unsigned len, uintptr_t to, bool user, bool park,
	    uint8_t *out, uint8_t *flags, uint8_t tail)
{
	if (!to) {
		*flags |= tail;
		to = site;	/* (any target in reach: only the first byte counts) */
		user = true;
	}
#ifdef MCR_PARK
	if (park)
		return mcr_encode_parked(site, len, to, out);
#else
	(void)park;
#endif
	return user ? mcr_encode(site, len, to, out) : mcr_encode_tramp(site, len, to, out);
}

#ifdef MCR_FLIP_LEN
/* The last flip update_sites() decided, for the next records like it:
 * their state and owner, the target their call must have (0: any), the
 * first bytes, and the state after. */
struct flip_memo {
	uint32_t s;
	int who;
	uintptr_t expect;
	uint8_t old, new_byte;
	uint32_t now;
};
#endif

/* Images in address order: the patcher's flips and pokes must be. */
static size_t images_by_address(const struct image **out)
{
	size_t k = 0;

	for (size_t i = 0; i < mcr_nimages; i++) {
		const struct image *im = mcr_images[i];
		size_t j = k++;

		if (!im) {
			k--;
			continue;
		}
		for (; j > 0 && out[j - 1]->lo > im->lo; j--)
			out[j] = out[j - 1];
		out[j] = im;
	}
	return k;
}

/* Give back the states of a batch that was refused: the pokes' from
 * their tags; a flip's by its old first byte (MCR_PARK: it was parked,
 * else enabled), the kind of call being the same on both sides. */
static void restore_states(const struct mcr_poke *v, size_t n, const uint64_t *flips, size_t nf)
{
	for (size_t k = 0; k < n + nf; k++) {
		uintptr_t a = k < n ? v[k].addr : MCR_FLIP_ADDR(flips[k - n]);
		struct image *im = (struct image *)mcr_image_of(a);
		long r = im ? mcr_rec_at(im, a) : -1;

		if (r < 0)
			continue;
		uint32_t *st = &im->recs[r].state;
		if (k < n) {
			*st = (*st & ~REC_SITE_BITS) | (uint32_t)v[k].tag << REC_SITE_SHIFT;
			continue;
		}
#ifdef MCR_PARK
		bool parked = MCR_FLIP_OLD(flips[k - n]) == MCR_PARK;
		*st = (*st & ~(REC_ENABLED | REC_PARKED)) | (parked ? REC_PARKED : REC_ENABLED);
#endif
	}
}

/*
 * Patch every record whose wanted state differs from its enabled one:
 * one pass over the records, one batch.  A site that changes by its first
 * byte alone (x86_64: parked, and enabled again to the same target, or
 * the reverse) is armed as it is decided (patch.h: mcr_flip()); the
 * others become pokes, armed by mcr_patch_batch().
 */
static int update_sites_with(const struct mcloc_ops *cops, int delta)
{
	/* Kept from batch to batch (under the lock): a fresh 100,000-site
	 * buffer costs more in page faults than the batch's own writes. */
	static struct mcr_poke *v;
	static struct mcr_slot_write *sv;
	static uint64_t *fl;
	static size_t vcap;
	const struct image *order[MCR_MAX_IMAGES];
	struct owners own;
	struct stub_offs so;
	struct mcr_batch b;
	size_t cap = 1, n = 0, ns = 0;
	char err[256];
	int ret = 0;

	for (size_t i = 0; i < mcr_nimages; i++)
		cap += mcr_images[i] ? mcr_images[i]->nrecs : 0;
	if (cap > vcap) {
		struct mcr_poke *nv = realloc(v, cap * sizeof(*v));
		struct mcr_slot_write *nsv = nv && MCR_ONE_STORE ?
					     realloc(sv, cap * sizeof(*sv)) : sv;
		uint64_t *nfl = nv && !MCR_ONE_STORE ? realloc(fl, cap * sizeof(*fl)) : fl;

		if (nv)
			v = nv;
		if (nsv)
			sv = nsv;
		if (nfl)
			fl = nfl;
		if (!nv || (MCR_ONE_STORE ? !nsv : !nfl)) {
			if (cops)
				count(cops, delta);
			return -ENOMEM;
		}
		vcap = cap;
	}
	owners_now(&own);
	stub_offs_init(&so);
	size_t nim = images_by_address(order);
	/* COPS's counts change as the records go by: a pass of its own over
	 * a hundred thousand records was a tenth of a batch.  After a
	 * refusal, the rest of the records are only counted. */
	const uint64_t *covers = cops ? cops->priv->covers : NULL;
	size_t ncovered = cops ? cops->priv->ncovered : 0;
	uint32_t unit = cops ? count_unit(cops, delta) : 0;
	mcr_batch_begin(&b, fl);
	for (size_t i = 0; i < nim; i++) {
		const struct site_view iv = view_of(order[i]);
		struct mcloc_rec *recs = iv.recs;
#ifdef MCR_FLIP_LEN
		uintptr_t hint = order[i]->hi + MCR_MAX_SITE;
		struct flip_memo m = { .s = REC_REFUSED };	/* (never one's state) */
#endif

		for (size_t r = 0; r < iv.nrecs; r++) {
			uint32_t s = recs[r].state, f;
			size_t g = iv.first + r;

			if (g < ncovered && (covers[g / 64] >> (g % 64) & 1))
				recs[r].state = s += unit;
			if (ret)
				continue;
			if (!(s & (REC_REF_MASK | REC_ENABLED)) || (s & REC_REFUSED))
				continue;
			int who = owner_of(&iv, r, s, &own);
			uintptr_t site = iv.base + recs[r].off;
#ifdef MCR_FLIP_LEN
			/* Records in a row mostly share their state and owner,
			 * and then flip as the one before did: only the target
			 * is checked again. */
			if (s == m.s && who == m.who &&
			    (!m.expect || mcr_flip_dest(site) == m.expect)) {
				int k = mcr_flip(&b, site, m.old, m.new_byte, hint, err, sizeof(err));

				if (k < 0) {
					ret = k;
					continue;
				}
				if (!k) {
					recs[r].state = m.now;
					continue;
				}
			}
#endif
			uintptr_t slot = 0;
			uintptr_t to = wanted(&iv, r, s, &own, who, &so, &f, &slot);
			bool was = s & (REC_ENABLED | REC_PARKED);
			uintptr_t from = was ? current(&iv, r, s) : 0;
#if MCR_ONE_STORE
			/* The slot before the call that reads it; a site that
			 * stops calling keeps its stale slot, which the
			 * dispatcher reads only behind the call. */
			if (slot && *(const uintptr_t *)(site - MCR_SLOT_BACK) != slot)
				sv[ns++] = (struct mcr_slot_write){ site - MCR_SLOT_BACK, slot };
#endif
			/* (f is 0 only for an enabled site: its count is 0.) */
			if ((s & REC_ENABLED) && f == (s & REC_ENABLED_ALL))
				continue;
			unsigned len = s >> REC_LEN_SHIFT;
			struct mcr_poke *p = &v[n];
			/* Same target, another meaning (one ops's slot or the
			 * list, through the same trampoline): no store. */
			if ((s & REC_ENABLED) && f && from == to) {
				recs[r].state = (s & ~REC_ENABLED_ALL) | f;
				continue;
			}
#ifdef MCR_FLIP_LEN
			/* Parked and enabled again, to the same target and as
			 * the same kind of call, or enabled and parked: the
			 * first byte alone, whose tail is checked here (a
			 * disabled stub call goes wherever it went). */
			if (len == MCR_FLIP_LEN &&
			    (f ? (s & REC_PARKED) && (f & REC_KIND) == (s & REC_KIND) &&
				 mcr_flip_dest(site) == to
			       : (s & REC_ENABLED) && (!from || mcr_flip_dest(site) == from))) {
				struct flip_memo fm = {
					s, who, f ? to : from, f ? MCR_PARK : MCR_CALL,
					f ? MCR_CALL : MCR_PARK,
					(s & ~(REC_ENABLED | REC_PARKED)) | (f ? REC_ENABLED : REC_PARKED)
				};
				int k = mcr_flip(&b, site, fm.old, fm.new_byte, hint, err, sizeof(err));

				if (k < 0) {
					ret = k;
					continue;
				}
				if (!k) {
					/* (Not for a trampoline of the site's own.) */
					if (!(s & (REC_HAS_DIRECT | REC_ENABLED_USER)))
						m = fm;
					recs[r].state = fm.now;
					continue;
				}
			}
#endif
			/* Disabled, a site parks its call where it can (then
			 * keeping the bits that say which), else it is the NOP
			 * again; enabled, a 6-byte x86_64 site is a 5-byte one
			 * from then on (arch/runtime.h). */
			uint32_t now = f;
			bool park = false;
#ifdef MCR_PARK
			park = !f && len == 5;
			if (park)
				now = REC_PARKED | (s & REC_KIND);
#endif
			now |= (f ? MCR_CALL_LEN(len) : len) << REC_LEN_SHIFT;
			p->addr = site;
			p->len = (uint8_t)len;
			p->flags = 0;
			int bad = was ? encode_call(site, len, from, s & REC_ENABLED_USER,
						    !(s & REC_ENABLED), p->old_bytes, &p->flags,
						    MCR_POKE_OLD_TAIL)
				      : mcr_encode(site, len, 0, p->old_bytes);
			if (!bad)
				bad = f ? encode_call(site, len, to, f & REC_ENABLED_USER, false,
						      p->new_bytes, &p->flags, 0)
				    : park ? encode_call(site, len, from, s & REC_ENABLED_USER, true,
							 p->new_bytes, &p->flags, MCR_POKE_SAME_TAIL)
					   : mcr_encode(site, len, 0, p->new_bytes);
			if (bad) {
				recs[r].state |= REC_REFUSED;
				mcr_nrefused++;
				mcr_say(1, "site %#lx: no %u-byte call reaches the trampoline; refused",
				    (unsigned long)site, len);
				continue;
			}
			/* The new state now, the old one in the poke, in case
			 * the batch is refused: a second walk over a hundred
			 * thousand records cost more than the batch's
			 * bookkeeping.  (No dispatcher reads these bits.) */
			p->tag = (uint16_t)((s & REC_SITE_BITS) >> REC_SITE_SHIFT);
			recs[r].state = (s & ~REC_SITE_BITS) | now;
			n++;
		}
	}
	size_t nflips = b.nflips;
	if (ret)
		mcr_batch_abort(&b);
	else
		ret = mcr_patch_batch(&b, v, n, sv, ns, err, sizeof(err));
	if (ret) {
		mcr_say(0, "%s", err);
		restore_states(v, n, fl, nflips);
	}
	return ret;
}

static int update_sites(void)
{
	return update_sites_with(NULL, 0);
}

/* Add UNIT (count_unit()) to the state of global record G. */
static void rec_add(size_t g, uint32_t unit)
{
	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];

		if (!im || g < im->first || g >= im->first + im->nrecs)
			continue;
		im->recs[g - im->first].state += unit;
		return;
	}
}

/* Add DELTA to the counts of every record OPS covers: its bitmap's set
 * bits, word by word (an image loaded after it registered has records
 * past its ncovered, which it does not cover). */
static void count(const struct mcloc_ops *ops, int delta)
{
	const uint64_t *covers = ops->priv->covers;
	size_t ncovered = ops->priv->ncovered;
	uint32_t d = count_unit(ops, delta);

	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];
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

/* free(P) after the next grace period (a set or bitmap a dispatcher may
 * still read); leaked rather than waited for when that cannot be queued. */
static void retire(void *p)
{
	if (p && mcr_defer(free, p))
		mcr_say(1, "a replaced set is leaked: no memory to retire it");
}

/* OPS's covers bitmap grown to every record there is, the records of the
 * images loaded since it last grew set where its filter (all when empty)
 * and not its notrace says, and their counts added: NULL when there are
 * none, or no memory.  (Every image loaded since, not only the one being
 * covered: two may register at once, and ncovered only grows.) */
static uint64_t *covers_grown(struct mcloc_ops *ops)
{
	struct mcloc_ops_priv *p = ops->priv;
	uint64_t *c;

	if (p->ncovered >= mcr_nrecords || ensure_priv(ops) || !(c = calloc(words(), 8)))
		return NULL;
	bool all = filter_empty(p);

	memcpy(c, p->covers, (p->ncovered + 63) / 64 * 8);
	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];

		for (size_t r = 0; im && im->first >= p->ncovered && r < im->nrecs; r++) {
			size_t g = im->first + r;

			if ((all || mcr_bit_of(p->filter, g)) && !mcr_bit_of(p->notrace, g)) {
				c[g / 64] |= 1ull << (g % 64);
				im->recs[r].state += count_unit(ops, +1);
			}
		}
	}
	return c;
}

/*
 * An image just loaded, with the lock held: as ftrace enables a new
 * module's functions for an ops whose filter is empty, every registered
 * ops covers the new records that its filter (everything, when empty)
 * and not its notrace name (a hook may have just extended them to the
 * image).  The bitmaps the dispatchers read cannot grow in place: each
 * ops gets a new one, published in a new set; the old ones are retired,
 * and the sites change in one batch, which waits for no reader: this
 * runs under the loader's lock.  On failure the image is simply not
 * covered, as before an ops registers again.
 */
static void cover_new_image(void)
{
	const struct ops_set *old = mcr_cur_set;
	size_t n = old ? old->n : 0, grown = 0;
	struct ops_set *set = malloc(sizeof(*set) + (n + 1) * sizeof(set->v[0]));
	uint64_t **gone = calloc(n + 1, sizeof(*gone));

	if (!set || !gone || !n)
		goto out;
	set->n = n;
	for (size_t i = 0; i < n; i++) {
		struct mcloc_ops *ops = old->v[i].ops;
		uint64_t *c = covers_grown(ops);

		set->v[i] = old->v[i];
		if (!c)
			continue;
		gone[grown++] = ops->priv->covers;
		ops->priv->covers = c;
		set->v[i].covers = c;
		ops->priv->ncovered = mcr_nrecords;
	}
	if (!grown)
		goto out;
	mcr_rcu_assign(mcr_cur_set, set);
	set = NULL;
	if (update_sites())
		mcr_say(1, "a new image's sites stay off: the batch was refused");
	retire((void *)old);
	for (size_t i = 0; i < grown; i++)
		retire(gone[i]);
out:
	free(set);
	free(gone);
}

static int publish(struct mcloc_ops *add, struct mcloc_ops *remove)
{
	struct ops_set *old = mcr_cur_set;
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
	mcr_rcu_assign(mcr_cur_set, set);
	/* An addition needs no grace period before returning (and may run
	 * under the loader's lock, from the environment's tracer): only the
	 * old array must outlive its readers.  A removal must wait: after
	 * it, no thread may be in the removed ops's callback. */
	retire(old);
	if (remove)
		mcr_synchronize_rcu();
	return 0;
}

/* A direct slot for OPS (+1; 0 when all are taken: its lone sites then
 * go through the list).  Set before any site can call the slot's stubs. */
static int take_slot(struct mcloc_ops *ops)
{
	if ((ops->flags & MCLOC_OPS_SAVE_REGS) || MCR_ONE_STORE)
		return 0;
	for (int k = 0; k < MCR_DIRECT_SLOTS; k++)
		if (!mcr_direct[k].func) {
			mcr_direct[k] = (struct direct){ ops->func, ops };
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
	mcr_direct[p->slot - 1] = sites_ok ? (struct direct){ 0 } : (struct direct){ ignore, NULL };
	p->slot = 0;
}

int mcloc_register_ops(struct mcloc_ops *ops)
{
	int ret = mcloc_init();

	if (ret)
		return ret;
	if (!ops || !ops->func)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	ret = prepare(ops);
	if (ret)
		goto out;
	struct mcloc_ops_priv *p = ops->priv;
	if (p->registered) {
		ret = -EBUSY;
		goto out;
	}
	/* A site counts the ops that need registers in 7 bits. */
	size_t nregs = 0;
	for (size_t i = 0; mcr_cur_set && i < mcr_cur_set->n; i++)
		nregs += mcr_cur_set->v[i].regs;
	if ((ops->flags & MCLOC_OPS_SAVE_REGS) && nregs >= REC_REGS_MAX) {
		ret = -ENOSPC;
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
	p->ncovered = mcr_nrecords;
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
	ret = update_sites_with(ops, +1);	/* (counted, then patched) */
	if (ret) {
		p->leaving = true;
		bool back = !update_sites_with(ops, -1);
		publish(NULL, ops);
		release_slot(ops, back);
		goto out;
	}
	p->registered = true;
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

int mcloc_unregister_ops(struct mcloc_ops *ops)
{
	int ret = 0;

	if (!ops || !ops->priv)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	if (!ops->priv->registered) {
		ret = -ENOENT;
		goto out;
	}
	ops->priv->leaving = true;
	ret = update_sites_with(ops, -1);
	if (ret)
		mcr_say(0, "unregister: sites stay enabled; the ops is removed anyway");
	/* Out of the set, then a grace period: after it, no thread is in
	 * OPS's callback or can reach it. */
	publish(NULL, ops);
	release_slot(ops, !ret);
	ops->priv->registered = false;
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

/* ---- direct calls ------------------------------------------------------------ */

/* A copy of the published direct set with G's entry added (TRAMP) or
 * removed (0), published; the old one is freed a grace period later. */
static int publish_directs(size_t g, uintptr_t tramp)
{
	struct direct_set *old = mcr_directs;
	size_t n = old ? old->n : 0, k = 0;
	struct direct_set *set = malloc(sizeof(*set) + (n + 1) * sizeof(set->v[0]));

	if (!set)
		return -ENOMEM;
	bool placed = !tramp;

	for (size_t i = 0; i < n; i++) {
		if (!placed && old->v[i].g > g) {
			set->v[k++] = (struct direct_ent){ g, tramp };
			placed = true;
		}
		if (old->v[i].g != g)
			set->v[k++] = old->v[i];
	}
	if (!placed)
		set->v[k++] = (struct direct_ent){ g, tramp };
	set->n = k;
	mcr_rcu_assign(mcr_directs, set);
	mcr_synchronize_rcu();
	free(old);
	return 0;
}

/*
 * The kernel's register_ftrace_direct(): the site at IP (or of the
 * function at IP) calls TRAMP itself when nothing else covers it and TRAMP
 * is within the site's reach; otherwise the image's trampoline enters
 * TRAMP after the other ops's callbacks, with the registers as the site
 * left them.  Either way no code of ours runs between the site and TRAMP
 * in the first case, and TRAMP sees the same state in both.
 */
int mcloc_register_direct(uintptr_t ip, void *tramp)
{
	int ret = mcloc_init();
	struct image *im;

	if (ret)
		return ret;
	if (!tramp)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	long r = site_rec(ip, &im);
	if (r < 0) {
		ret = -ENOENT;
		goto out;
	}
	uint32_t *st = &im->recs[r].state;
	size_t g = im->first + (size_t)r;
	if (*st & REC_HAS_DIRECT) {
		ret = -EEXIST;
		goto out;
	}
	if (im->version < 3 || (*st & REC_REFUSED)) {
		ret = im->version < 3 ? -EOPNOTSUPP : -EILSEQ;
		goto out;
	}
	/* In the set before any site can need it. */
	ret = publish_directs(g, (uintptr_t)tramp);
	if (ret)
		goto out;
	*st += 1;
	*st |= REC_HAS_DIRECT;
	ret = update_sites();
	if (ret) {
		*st -= 1;
		*st &= ~REC_HAS_DIRECT;
		update_sites();
		publish_directs(g, 0);
	}
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

/* When it returns, no call that starts after it enters TRAMP; one already
 * past the site may still be on its way in (keep TRAMP's code mapped, as
 * the kernel frees its trampolines only after an RCU-tasks grace period). */
int mcloc_unregister_direct(uintptr_t ip, void *tramp)
{
	struct image *im;
	int ret = 0;

	pthread_mutex_lock(&mcr_lock);
	long r = site_rec(ip, &im);
	size_t g = r >= 0 ? im->first + (size_t)r : 0;
	if (r < 0 || !(im->recs[r].state & REC_HAS_DIRECT) ||
	    mcr_direct_of(mcr_directs, g) != (uintptr_t)tramp) {
		ret = -ENOENT;
		goto out;
	}
	im->recs[r].state -= 1;
	im->recs[r].state &= ~REC_HAS_DIRECT;
	/* (Its entry stays while the site still calls TRAMP.) */
	ret = update_sites();
	if (ret) {
		im->recs[r].state += 1;
		im->recs[r].state |= REC_HAS_DIRECT;
		goto out;
	}
	ret = publish_directs(g, 0);
out:
	pthread_mutex_unlock(&mcr_lock);
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

int mcloc_get_stats(struct mcloc_stats *out)
{
	struct mcloc_stats all = { .sz = sizeof(all) }, *st = &all;

	if (!out || out->sz < offsetof(struct mcloc_stats, images) + sizeof(out->images))
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	for (size_t i = 0; i < mcr_nimages; i++) {
		if (!mcr_images[i])
			continue;
		st->images++;
		st->records += mcr_images[i]->nrecs;
		for (size_t r = 0; r < mcr_images[i]->nrecs; r++) {
			uint32_t s = mcr_images[i]->recs[r].state;

			/* (A parked site keeps its kind bits.) */
			if (!(s & REC_ENABLED))
				continue;
			st->enabled++;
			st->direct += !!(s & REC_ENABLED_DIRECT);
			st->direct_tramps += !!(s & REC_ENABLED_USER);
		}
	}
	st->record_bytes = st->records * sizeof(struct mcloc_rec);
	st->refused = mcr_nrefused;
	st->batches = mcr_stats.batches;
	st->sites_patched = mcr_stats.sites;
	st->syncs = mcr_stats.syncs;
	st->last_batch_ms = mcr_stats.last_batch_ms;
	st->insn_stores = mcr_stats.insn_stores;
	st->slot_stores = mcr_stats.slot_stores;
	st->list_calls = __atomic_load_n(&mcr_list_calls, __ATOMIC_RELAXED);

	pthread_mutex_unlock(&mcr_lock);
	size_t sz = out->sz < sizeof(all) ? out->sz : sizeof(all);

	memcpy((char *)out + sizeof(out->sz), (char *)&all + sizeof(all.sz), sz - sizeof(all.sz));
	return 0;
}


/*
 * fork() (fork.c): no patching across it, so the child gets a consistent
 * text; and an RCU and a patcher that know only the thread it has.
 */
void mcr_core_fork(enum mcr_fork stage)
{
	switch (stage) {
	case MCR_FORK_PREPARE:
		pthread_mutex_lock(&mcr_lock);
		mcr_rcu_before_fork();
		break;
	case MCR_FORK_PARENT:
		mcr_rcu_after_fork_parent();
		pthread_mutex_unlock(&mcr_lock);
		break;
	case MCR_FORK_CHILD:
		mcr_rcu_after_fork_child();
		mcr_patch_after_fork_child();
		pthread_mutex_unlock(&mcr_lock);
		break;
	}
}
