// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's planner: what every site should be, and the one batch that
 * makes it so (patch.c writes it).  ops.c, direct.c and registry.c change
 * the counts; this file turns them into code.
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
 * Site states, as ftrace's: no ops, a NOP; one ops, a call to that ops's
 * own stub on the image's direct page (arch/runtime.h), which reaches its
 * callback without looking anything up; several, a call to the image's
 * args trampoline, whose dispatcher walks the set (ftrace's list
 * function); any that needs registers, a call to the regs trampoline.
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"
#include "patch.h"
#include "signals.h"
#include "rcu.h"
#include "dispatch.h"
#include "plan.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#define SCRATCH_STEP ((size_t)65536)

static bool inited;
static int init_status;

int mcloc_init(void)
{
	char err[256];
	bool first = false;

	pthread_mutex_lock(&mcr_lock);
	if (!inited) {
		inited = first = true;
		err[0] = 0;
		init_status = mcr_init(mcr_site_trap, err, sizeof(err));
		if (init_status)
			mcr_say(0, "%s", err);
		else if (err[0])	/* (how it works without something) */
			mcr_say(1, "%s", err);
		if (!init_status && !mcr_signals_interposed())
			mcr_say(1, "libmcloc was loaded after the program's calls to libc's signal "
				"functions were bound (dlopen): a thread that holds SIGTRAP is "
				"killed at a site's breakpoint (link or LD_PRELOAD libmcloc; "
				"libmcloc(3))");
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

/* What one ops adds to (DELTA +1) or takes from (-1) the state of a
 * record it covers: its reference, and its registers count if it needs
 * them, in one add.  Modulo 2^32 a negative one borrows from neither
 * neighbour while the counts stay non-negative. */
uint32_t mcr_count_unit(const struct mcloc_ops *ops, int delta)
{
	return (uint32_t)delta * (1u + (ops->flags & MCLOC_OPS_SAVE_REGS ? 1u << REC_REGS_SHIFT : 0));
}

#define REC_ENABLED_ALL (REC_ENABLED | REC_ENABLED_REGS | REC_ENABLED_DIRECT | REC_ENABLED_USER)

/* The registered ops a site may call alone, for one mcr_update_sites(): those
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

/* Add UNIT (mcr_count_unit()) to the state of global record G. */
void mcr_rec_add(size_t g, uint32_t unit)
{
	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];

		if (!im || g < im->first || g >= im->first + im->nrecs)
			continue;
		im->recs[g - im->first].state += unit;
		return;
	}
}

/* The bits of COVERS from global record G up to the next multiple of 64
 * or HI, whichever comes first (*END), bit 0 for G: how the records of
 * one image that an ops covers are walked (an image loaded after it
 * registered has records past its ncovered, which it does not cover). */
static inline uint64_t covered_from(const uint64_t *covers, size_t g, size_t hi, size_t *end)
{
	uint64_t bits = covers[g / 64] >> (g % 64);

	*end = (g / 64 + 1) * 64 < hi ? (g / 64 + 1) * 64 : hi;
	if (*end - g < 64)
		bits &= (1ull << (*end - g)) - 1;
	return bits;
}

/* Add DELTA to the counts of every record OPS covers. */
static void count(const struct mcloc_ops *ops, int delta)
{
	const uint64_t *covers = ops->priv->covers;
	size_t ncovered = ops->priv->ncovered, end;
	uint32_t d = mcr_count_unit(ops, delta);

	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];
		if (!im)
			continue;
		size_t lo = im->first, hi = im->first + im->nrecs;

		hi = hi < ncovered ? hi : ncovered;
		for (size_t g = lo; g < hi; g = end)
			for (uint64_t bits = covered_from(covers, g, hi, &end); bits; bits &= bits - 1)
				im->recs[g - lo + (size_t)__builtin_ctzll(bits)].state += d;
	}
}

/* The records of a batch's flips: in each image, the first and the last
 * record armed, and (BITS, by a record's index among all: as an ops's
 * covers) which between them were.  BITS is kept from batch to batch,
 * all 0 between them. */
struct flip_span {
	struct image *im;
	size_t lo, hi;
};

struct flip_spans {
	size_t n;
	struct flip_span v[MCR_MAX_IMAGES];
	uint64_t *bits;
};

#ifdef MCR_FLIP_LEN
/* The last flip mcr_update_sites() decided, for the next records like it:
 * their state and owner, the target their call must have (0: any), the
 * first byte, and the state after. */
struct flip_memo {
	uint32_t s;
	int who;
	uintptr_t expect;
	uint8_t old;
	uint32_t now;
};

/* A flip's first byte, new or old, from its record's state after. */
static inline uint8_t flip_byte(uint32_t s, bool old)
{
	return !(s & REC_ENABLED) == old ? MCR_CALL : MCR_PARK;
}

/* What the patcher is told of a flip as memo M says. */
static inline struct mcr_flip_to flip_to(const struct flip_memo *m)
{
	return (struct mcr_flip_to){ m->old, flip_byte(m->now, false) };
}

/*
 * Mark record R of IV a flip of batch FS, whose state is NOW after it
 * (ON), or take the mark off and give it back its state S (!ON): before
 * its breakpoint goes in, for the SIGTRAP handler (mcr_site_trap()).
 * Its state stays the state after until the batch has ended: a handler
 * reads the two apart (flips_done()).
 */
static inline void flip_mark(struct flip_spans *fs, const struct site_view *iv, size_t r,
			     uint32_t now, bool on)
{
	size_t g = iv->first + r;
	uint64_t *w = &fs->bits[g / 64], bit = (uint64_t)1 << (g % 64);

	__atomic_store_n(&iv->recs[r].state, now, __ATOMIC_RELAXED);
	__atomic_store_n(w, on ? *w | bit : *w & ~bit, __ATOMIC_RELAXED);
}

/*
 * Arm the records after R of IV that flip as memo M says, in a row: a
 * first enable flips a hundred thousand so, and this loop, apart from
 * the whole decision, keeps what it needs in registers (the first enable
 * took 0.94 of its time with it).  Each record is as the caller's loop
 * would see it: COPS's UNIT added where COVERS marks it.  Returns the
 * first record not armed: one unlike M, left as it was for the caller;
 * or, *RET set, one that could not be armed, its count added.
 */
static __attribute__((noinline)) size_t
flip_run(struct mcr_batch *b, const struct site_view *iv, size_t r, const struct flip_memo *m,
	 const struct owners *o, const uint64_t *covers, size_t ncovered, uint32_t unit,
	 uintptr_t hint, int *ret, char *err, size_t errlen)
{
	struct mcloc_rec *recs = iv->recs;
	uint64_t *const bits = ((struct flip_spans *)b->ctx)->bits;
	const uint32_t ms = m->s, now = m->now;
	const uintptr_t expect = m->expect, base = iv->base;
	const size_t first = iv->first, nrecs = iv->nrecs;
	const uint8_t old = m->old, new_byte = flip_byte(now, false);
	/* Whether an owner decides these records' call: as in owner_of(),
	 * for the state all of them share. */
	const bool owned = (ms & REC_REF_MASK) == 1 && (iv->slots || iv->stubs) && o->n;
	/* The words of COVERS, of a lone owner's map and of the marks that
	 * hold record G's bits, loaded once per 64 records (a bit test each
	 * through the maps was a third of this loop). */
	const uint64_t *own1 = owned && o->n == 1 ? o->v[0].covers : NULL;
	const size_t ncw = (ncovered + 63) / 64;
	uint64_t cw = 0, ow = 0, fw = 0;
	size_t w = SIZE_MAX;
	uintptr_t wlo = b->wlo, whi = b->whi;
	size_t k = r + 1;

	for (; k < nrecs; k++) {
		size_t g = first + k;
		uint32_t s = recs[k].state;

		if (g / 64 != w) {
			w = g / 64;
			cw = w < ncw ? covers[w] : 0;
			ow = own1 ? __atomic_load_n(&own1[w], __ATOMIC_RELAXED) : 0;
			fw = bits[w];
		}
		if (cw >> (g % 64) & 1)
			s += unit;
		if (s != ms)
			break;
		if (own1 ? (int)(ow >> (g % 64) & 1) - 1 != m->who
			 : owned && owner_of(iv, k, s, o) != m->who)
			break;
		uintptr_t site = base + recs[k].off;
		if (expect && mcr_flip_dest(site) != expect)
			break;
		/* Marked (as flip_mark()), then armed. */
		__atomic_store_n(&recs[k].state, now, __ATOMIC_RELAXED);
		fw |= (uint64_t)1 << (g % 64);
		__atomic_store_n(&bits[w], fw, __ATOMIC_RELAXED);
		if (site >= wlo && site + MCR_FLIP_LEN <= whi && *(const uint8_t *)site == old) {
			mcr_arm(b, site, new_byte);
			continue;
		}
		/* (Another span, or a refusal.) */
		const struct mcr_flip_to to = flip_to(m);

		*ret = mcr_flip_slow(b, site, &to, hint, err, errlen);
		if (*ret) {
			flip_mark(b->ctx, iv, k, s, false);
			break;
		}
		wlo = b->wlo;
		whi = b->whi;
	}
	return k;
}

/* A walk over the marked records of a batch's spans. */
struct flip_cursor {
	const struct flip_spans *fs;
	size_t i;		/* the span */
	size_t w, end;		/* the word of marks at hand, and the span's last */
	uint64_t left;		/* its marks not yet walked */
};

/* The marks of span I's word W, those of its records alone. */
static uint64_t flip_word(const struct flip_spans *fs, size_t i, size_t w)
{
	const struct flip_span *sp = &fs->v[i];
	size_t lo = sp->im->first + sp->lo, hi = sp->im->first + sp->hi;
	uint64_t x = fs->bits[w];

	if (w == lo / 64)
		x &= ~(uint64_t)0 << (lo % 64);
	if (w == hi / 64 && hi % 64 != 63)
		x &= ((uint64_t)1 << (hi % 64 + 1)) - 1;
	return x;
}

static struct flip_cursor flip_first(const struct flip_spans *fs, size_t i)
{
	struct flip_cursor c = { fs, i, 0, 0, 0 };

	if (i < fs->n) {
		const struct flip_span *sp = &fs->v[i];

		c.w = (sp->im->first + sp->lo) / 64;
		c.end = (sp->im->first + sp->hi) / 64;
		c.left = flip_word(fs, i, c.w);
	}
	return c;
}

/* The next marked record (*BASE: its image's load address), or NULL. */
static inline struct mcloc_rec *flip_next(struct flip_cursor *c, uintptr_t *base)
{
	while (c->i < c->fs->n) {
		if (c->left) {
			const struct image *im = c->fs->v[c->i].im;
			size_t g = c->w * 64 + (size_t)__builtin_ctzll(c->left);

			c->left &= c->left - 1;
			*base = im->base;
			return &im->recs[g - im->first];
		}
		if (c->w < c->end)
			c->left = flip_word(c->fs, c->i, ++c->w);
		else
			*c = flip_first(c->fs, c->i + 1);
	}
	return NULL;
}

/*
 * The batch's flips (patch.h: mcr_flips_fn): STEP over every marked
 * record of the spans, its first byte read from its state after.  The
 * marks and the states stay as they are: a thread that traps meanwhile
 * finds the flip and runs what it becomes (or, undoing, was).  In a
 * batch alone in its process the sites hold their new bytes already.
 */
static int write_flips(struct mcr_batch *b, enum mcr_flip_step step)
{
	struct flip_cursor c = flip_first(b->ctx, 0);
	struct mcloc_rec *rec;
	uintptr_t base;
	int ret = 0;

	if (step == MCR_FLIPS_NEW && b->alone)
		return 0;
	if (step == MCR_FLIPS_NEW && b->memfd < 0) {
		/* Every threaded batch's last pass, as short as it can be. */
		while ((rec = flip_next(&c, &base)))
			*(volatile uint8_t *)(base + rec->off) = flip_byte(rec->state, false);
		return 0;
	}
	while ((rec = flip_next(&c, &base))) {
		uint8_t x = step == MCR_FLIPS_BREAKPOINT ? mcr_breakpoint
						       : flip_byte(rec->state, step == MCR_FLIPS_OLD);
		int e = mcr_batch_store(b, base + rec->off, x);

		ret = ret ? ret : e;
	}
	return ret;
}

/* After batch FS, which no handler reads any more: the flips' states
 * given back if it FAILED (their old first bytes are back: the batch did
 * not change its sites), and their marks taken off. */
static void flips_done(struct flip_spans *fs, bool failed)
{
	struct flip_cursor c = flip_first(fs, 0);
	struct mcloc_rec *rec;
	uintptr_t base;

	while (failed && (rec = flip_next(&c, &base)))
		rec->state ^= REC_ENABLED | REC_PARKED;
	for (size_t i = 0; i < fs->n; i++) {
		size_t lo = (fs->v[i].im->first + fs->v[i].lo) / 64;
		size_t hi = (fs->v[i].im->first + fs->v[i].hi) / 64;

		memset(&fs->bits[lo], 0, (hi - lo + 1) * sizeof(*fs->bits));
	}
}
#endif

int mcr_site_trap(const void *ctx, uintptr_t addr, bool undo, uint8_t *first)
{
	int known = 0;

	mcr_read_lock();
	const struct image *im = mcr_image_of(addr);
	long r = im ? mcr_rec_at(im, addr) : -1;

	if (r >= 0) {
		known = 1;
#ifdef MCR_FLIP_LEN
		const struct flip_spans *fs = ctx;
		size_t g = im->first + (size_t)r;

		if (fs && __atomic_load_n(&fs->bits[g / 64], __ATOMIC_ACQUIRE) >> (g % 64) & 1) {
			*first = flip_byte(__atomic_load_n(&im->recs[r].state, __ATOMIC_RELAXED),
					   undo);
			known = 2;
		}
#else
		(void)ctx, (void)undo, (void)first;
#endif
	}
	mcr_read_unlock();
	return known;
}

/*
 * Whether a batch that changes the sites COVERS marks (the first NCOVERED
 * records) should fault in IM's text a span at a time (patch.h): on its
 * first batch only, while the pages are still the file's, and where the
 * sites are dense enough that hardly a page it copies goes unwritten.
 */
#define PREFAULT_SITES_PER_PAGE 4

static bool prefault(const struct image *im, const uint64_t *covers, size_t ncovered)
{
	size_t hi = im->first + im->nrecs, n = 0, end;

	if (im->prefaulted || !covers || !im->nrecs)
		return false;
	hi = hi < ncovered ? hi : ncovered;
	for (size_t g = im->first; g < hi; g = end)
		n += (size_t)__builtin_popcountll(covered_from(covers, g, hi, &end));
	return n >= PREFAULT_SITES_PER_PAGE *
			    ((im->hi - im->lo) / (uintptr_t)sysconf(_SC_PAGESIZE) + 1);
}

/* Images in address order: the patcher's flips and pokes must be. */
static size_t images_by_address(struct image **out)
{
	size_t k = 0;

	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];
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

/* Give back the states of a batch's pokes that was refused, from their
 * tags (its flips' went back with their old first bytes). */
static void restore_states(const struct mcr_poke *v, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		struct image *im = (struct image *)mcr_image_of(v[k].addr);
		long r = im ? mcr_rec_at(im, v[k].addr) : -1;

		if (r < 0)
			continue;
		uint32_t *st = &im->recs[r].state;
		*st = (*st & ~REC_SITE_BITS) | (uint32_t)v[k].tag << REC_SITE_SHIFT;
	}
}

/*
 * A batch's scratch array OLD (*HAVE bytes) made at least BYTES long.  A
 * longer one is fresh pages, in memory at once (ALL) or as *READY says
 * (populate()): the first batch of a process, a hundred thousand sites,
 * took a page fault per 4 KiB of its arrays, a fifth of its time on a
 * VM, yet a batch of flips alone writes no poke.  The contents are not
 * kept (each batch fills them anew).  NULL when out of memory, OLD then
 * freed.
 */
static void *scratch(void *old, size_t *have, size_t *ready, size_t bytes, bool all)
{
	if (bytes <= *have)
		return old;
	bytes = (bytes + SCRATCH_STEP - 1) & ~(size_t)(SCRATCH_STEP - 1);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (all ? MAP_POPULATE : 0), -1, 0);

	if (old)
		munmap(old, *have);
	*have = p == MAP_FAILED ? 0 : bytes;
	*ready = all ? *have : 0;
	return p == MAP_FAILED ? NULL : p;
}

/* The first AT bytes of scratch array P in memory (*READY of them are):
 * SCRATCH_STEP bytes a system call rather than a page fault a page.  A
 * kernel before 5.14 refuses MADV_POPULATE_WRITE, and the pages fault in
 * as they are written. */
static void populate(void *p, size_t *ready, size_t at)
{
	size_t to = (at + SCRATCH_STEP - 1) & ~(size_t)(SCRATCH_STEP - 1);

	madvise((char *)p + *ready, to - *ready, MADV_POPULATE_WRITE);
	*ready = to;
}

/*
 * Patch every record whose wanted state differs from its enabled one:
 * one pass over the records, one batch.  A site that changes by its first
 * byte alone (x86_64: parked, and enabled again to the same target, or
 * the reverse) is armed as it is decided (patch.h: mcr_flip()); the
 * others become pokes, armed by mcr_patch_batch().
 */
int mcr_update_sites_with(const struct mcloc_ops *cops, int delta)
{
	/* Kept from batch to batch (under the lock): a fresh 100,000-site
	 * buffer costs more in page faults than the batch's own writes. */
	static struct mcr_poke *v;
	static struct mcr_slot_write *sv;
	static size_t vbytes, svbytes, vready, svready;
#ifdef MCR_FLIP_LEN
	static uint64_t *fbits;
	static size_t fbytes, fready;
#endif
	struct image *order[MCR_MAX_IMAGES];
#ifdef MCR_FLIP_LEN
	struct flip_spans fs = { 0 };
#endif
	struct owners own;
	struct stub_offs so;
	struct mcr_batch b;
	size_t cap = 1, n = 0, ns = 0, nflips = 0;
	char err[256];
	int ret = 0;

	for (size_t i = 0; i < mcr_nimages; i++)
		cap += mcr_images[i] ? mcr_images[i]->nrecs : 0;
	if (!(v = scratch(v, &vbytes, &vready, cap * sizeof(*v), false)) ||
#ifdef MCR_FLIP_LEN
	    !(fs.bits = fbits = scratch(fbits, &fbytes, &fready,
					(mcr_nrecords / 64 + 1) * sizeof(*fbits), false)) ||
#endif
	    (MCR_ONE_STORE && !(sv = scratch(sv, &svbytes, &svready, cap * sizeof(*sv), true)))) {
		if (cops)
			count(cops, delta);
		return -ENOMEM;
	}
	owners_now(&own);
	stub_offs_init(&so);
	size_t nim = images_by_address(order);
	/* COPS's counts change as the records go by: a pass of its own over
	 * a hundred thousand records was a tenth of a batch.  After a
	 * refusal, the rest of the records are only counted. */
	const uint64_t *covers = cops ? cops->priv->covers : NULL;
	size_t ncovered = cops ? cops->priv->ncovered : 0;
	uint32_t unit = cops ? mcr_count_unit(cops, delta) : 0;
#ifdef MCR_FLIP_LEN
	mcr_batch_begin(&b, write_flips, &fs);
#else
	mcr_batch_begin(&b, NULL, NULL);
#endif
	for (size_t i = 0; i < nim; i++) {
		const struct site_view iv = view_of(order[i]);
		struct mcloc_rec *recs = iv.recs;

		b.prefault = prefault(order[i], covers, ncovered);
		if (b.prefault)
			order[i]->prefaulted = true;
#ifdef MCR_FLIP_LEN
		uintptr_t hint = order[i]->hi + MCR_MAX_SITE;
		struct flip_memo m = { .s = REC_REFUSED };	/* (never one's state) */
		/* This image's first and last flip (none while lo > hi). */
		size_t flo = SIZE_MAX, fhi = 0;
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
				const struct mcr_flip_to to = flip_to(&m);

				flip_mark(&fs, &iv, r, m.now, true);
				ret = mcr_flip(&b, site, &to, hint, err, sizeof(err));
				if (ret) {
					flip_mark(&fs, &iv, r, s, false);
					continue;
				}
flipped:
				flo = flo < r ? flo : r;
				size_t k = flip_run(&b, &iv, r, &m, &own, covers, ncovered, unit, hint,
						    &ret, err, sizeof(err));
				nflips += k - r;
				fhi = k - 1;
				/* (The next record is K, or K + 1 past a failure.) */
				r = ret ? k : k - 1;
				continue;
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
					(s & ~(REC_ENABLED | REC_PARKED)) | (f ? REC_ENABLED : REC_PARKED)
				};
				const struct mcr_flip_to to = flip_to(&fm);

				flip_mark(&fs, &iv, r, fm.now, true);
				ret = mcr_flip(&b, site, &to, hint, err, sizeof(err));
				if (ret) {
					flip_mark(&fs, &iv, r, s, false);
					continue;
				}
				/* (Not for a trampoline of the site's own.) */
				if (!(s & (REC_HAS_DIRECT | REC_ENABLED_USER))) {
					m = fm;
					goto flipped;
				}
				flo = flo < r ? flo : r;
				fhi = r;
				nflips++;
				continue;
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
			if ((n + 1) * sizeof(*v) > vready)
				populate(v, &vready, (n + 1) * sizeof(*v));
			p->addr = site;
			p->len = (uint8_t)len;
			p->flags = b.prefault ? MCR_POKE_PREFAULT : 0;
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
#ifdef MCR_FLIP_LEN
		if (flo <= fhi)
			fs.v[fs.n++] = (struct flip_span){ order[i], flo, fhi };
#endif
	}
	b.nflips = nflips;
	if (ret)
		mcr_batch_abort(&b);
	else
		ret = mcr_patch_batch(&b, v, n, sv, ns, err, sizeof(err));
	/* (A batch whose sites all changed may still fail: the text's
	 * protection not given back.  Its states are the text's.) */
#ifdef MCR_FLIP_LEN
	flips_done(&fs, !b.changed);
#endif
	if (ret) {
		mcr_say(0, "%s", err);
		if (!b.changed)
			restore_states(v, n);
	}
	return ret;
}

int mcr_update_sites(void)
{
	return mcr_update_sites_with(NULL, 0);
}

/*
 * fork() (fork.c): no patching across it, so the child gets a consistent
 * text; and an RCU and a patcher that know only the thread it has.
 */
void mcr_plan_fork(enum mcr_fork stage)
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
