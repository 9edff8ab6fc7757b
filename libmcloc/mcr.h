/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What libmcloc's modules all share: the records, the images, the ops's
 * private part and the state state.c holds, and (until they get headers of
 * their own) the fork handlers of control.c and redirect.c.  images.c,
 * dispatch.c, plan.c, direct.c, ops.c, registry.c, patch.c, rcu.c,
 * timing.c, trace.c and tracer.c have their own headers.
 * The modules' order, bottom up, each calling only those before it, is
 * RUNTIME_ORDER in tests/layout.bats, which checks it against the
 * objects' undefined symbols; README.md's layout row names it.
 */
#ifndef MCLOC_MCR_H
#define MCLOC_MCR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <pthread.h>

#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "../arch/runtime.h"

/* ---- records, images, ops ------------------------------------------ */

struct mcloc_rec {
	uint32_t off;		/* from the image's load address */
	uint32_t state;		/* MCLOC_REC_* */
};
_Static_assert(sizeof(struct mcloc_rec) == 8, "a record is 8 bytes");

#define REC_REF_MASK	0x0000ffffu	/* ops (and a direct) covering the site */
#define REC_REF_MAX	0xffff
#define REC_REGS_SHIFT	16
#define REC_REGS_MASK	0x003f0000u	/* of which need registers */
#define REC_REGS_MAX	63
#define REC_PARKED	(1u << 22)	/* disabled, it parks its last call (x86_64) */
#define REC_HAS_DIRECT	(1u << 23)	/* mcloc_register_direct() covers it */
#define REC_ENABLED	(1u << 24)	/* the site holds a call */
#define REC_ENABLED_REGS (1u << 25)	/* ... to the regs trampoline */
#define REC_REFUSED	(1u << 26)	/* its bytes were not what we expected */
#define REC_ENABLED_DIRECT (1u << 27)	/* ... to one ops (stub or slot) */
#define REC_ENABLED_USER (1u << 28)	/* ... to a direct trampoline itself */
#define REC_LEN_SHIFT	29		/* site length, 1..7 */
/* (The ENABLED_REGS, _DIRECT and _USER bits of a parked site say which
 * call it parks.) */

struct fsym {
	uintptr_t lo, hi;
	uint32_t name;
};

struct image {
	struct mcloc_image *desc;
	unsigned version;	/* of its descriptor (the ABI it was linked with) */
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
	bool stubs_linked;	/* ... in its own text (else mapped by us) */
	bool prefaulted;	/* a batch faulted its text in (plan.c) */
	bool slots;		/* every site has an ops slot (MCR_SLOT_BACK) */
	/* Bit r: record r's site is at its function's entry (after a
	 * landing pad), by the symbols; NULL without symbols.  Only there
	 * is the caller's return address where a return hook looks. */
	uint64_t *at_entry;
	/* Every bit of at_entry set (-mfentry, patchable entries): a call
	 * from a site of the image is at its entry, with no search. */
	bool all_at_entry;
	/* Bit r: record r's site is after the frame -pg builds
	 * (mcr_site_framed()); NULL when none is. */
	uint64_t *framed;
	/* Entries refused for a reason the architecture names (say, GCC's
	 * raw patchable NOPs): how many, and that reason, said once. */
	size_t nskipped;
	const char *skip_why;
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
extern struct direct mcr_direct[MCR_DIRECT_SLOTS];

/*
 * The sites of mcloc_register_direct(), by global record index, sorted;
 * published with RCU (the dispatcher returns a site's trampoline to the
 * image's trampoline, which enters it).  An entry that is leaving stays
 * until its site no longer calls its trampoline.
 */
struct direct_ent {
	size_t g;
	uintptr_t tramp;
};
struct direct_set {
	size_t n;
	struct direct_ent v[];
};
extern struct direct_set *mcr_directs;

/* The direct trampoline of global record G in SET, or 0. */
static inline uintptr_t mcr_direct_of(const struct direct_set *set, size_t g)
{
	size_t lo = 0, hi = set ? set->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set->v[mid].g < g)
			lo = mid + 1;
		else
			hi = mid;
	}
	return set && lo < set->n && set->v[lo].g == g ? set->v[lo].tramp : 0;
}

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

/*
 * The shared state, under mcr_lock for writers.  Loaded images: a NULL
 * slot is free.  Readers (dispatchers, the SIGTRAP handler, the name
 * lookups) do not take the lock: an unloaded image's slot is cleared
 * first, and its memory freed only after a grace period and after every
 * SIGTRAP handler that could have seen it.  Record numbers (global indices
 * into the ops's bitmaps) are never reused: each load takes new ones.
 */
#define MCR_MAX_IMAGES 256
extern pthread_mutex_t mcr_lock;
extern struct image *mcr_images[MCR_MAX_IMAGES];
extern size_t mcr_nimages, mcr_nrecords;	/* slots in use, at most; records ever */
extern struct ops_set *mcr_cur_set;		/* the published set (RCU) */
extern size_t mcr_nrefused;			/* sites refused for their bytes */
extern size_t mcr_list_calls;			/* traced calls that walked the set */
/* Set while this thread runs a tracer callback: traced calls it makes
 * are not traced again. */
extern __thread int mcr_in_tracer;
/* While callbacks of a call reached through an argument frame run (x86:
 * the args and direct trampolines): the frame and the call's two return
 * addresses, from which mcr_hook_return_args() finds the one to hook
 * without the register-saving trampoline.  ARGS NULL otherwise. */
struct mcr_entry_args {
	const void *args;
	uintptr_t after, parent;
	uintptr_t *slot;	/* where PARENT was read, if the trampoline says */
};
extern __thread struct mcr_entry_args mcr_entry_args;
/* While callbacks of a call reached through the register-saving
 * trampoline run (another ops of its site asked for the registers): those
 * registers, which the library's own tracers read (arguments, the return
 * address to hook) though their ops did not ask.  NULL otherwise. */
extern __thread struct mcloc_regs *mcr_entry_regs;
/* While callbacks of a call run: its site is at its function's entry
 * (image.at_entry), so its return can be hooked: 1 or 0, or -1 not
 * looked up yet (the direct trampoline's calls: only a callback that
 * hooks the return asks, through timing.c). */
extern __thread signed char mcr_call_at_entry;
/* While callbacks of a call from a framed site run (image.framed): where
 * its function's return address lies (mcr_framed_slot()), the parent the
 * callbacks were given; NULL otherwise. */
extern __thread uintptr_t *mcr_call_framed;
/* Some image registered has framed sites: the direct trampoline's calls
 * look theirs up (the others know it from their record). */
extern bool mcr_framed_images;
/* Counts the images that came or went (under mcr_lock), so that what a
 * thread learnt of an address is known to still hold. */
extern unsigned long mcr_images_gen;

static inline struct image *mcr_image_at(size_t i)
{
	return __atomic_load_n(&mcr_images[i], __ATOMIC_ACQUIRE);
}

static inline unsigned mcr_rec_len(const struct mcloc_rec *r)
{
	return r->state >> REC_LEN_SHIFT;
}

/* Bit G of MAP.  (Relaxed: a filter change rewrites words while sites
 * run.) */
static inline bool mcr_bit_of(const uint64_t *map, size_t g)
{
	return __atomic_load_n(&map[g / 64], __ATOMIC_RELAXED) >> (g % 64) & 1;
}

/* To the log callback mcloc_set_log() installed, if any. */
void mcr_say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One "libmcloc: ..." line on standard error, whatever the log: how the
 * environment interface and the control channel say what cannot work. */
void mcr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The process's command name (/proc/self/comm), into BUF. */
void mcr_comm(char *buf, size_t len);

/*
 * What plan.c and registry.c call in the modules above them, so that they
 * name none of them: each sets its hook from a constructor of priority
 * 101, which runs before any default-priority constructor of the library
 * (its own image's registration among them), so before they can need it.
 */
struct mcr_hooks {
	/* Once, after the first successful init: register the main program
	 * if it was linked without objpatch (discover.c). */
	int (*after_init)(char *err, size_t errlen);
	/* After every image registration (tracer.c: a tracer started from
	 * the environment extends to the new image). */
	void (*image_added)(void);
	/* Whether the names of an image that leaves are kept for a
	 * controller (trace.c: while a session traces); NULL: no. */
	bool (*keep_departed)(void);
};
extern struct mcr_hooks mcr_hooks;

/* ---- discover.c: the main program ---- */
/* Has the main program registered (is its text a registered image's)? */
bool mcr_main_registered(void);
/* Does the main program register its table itself, linked with objpatch
 * link --runtime?  Its constructor runs after every library's.  (Reads
 * its file: asked once.) */
bool mcr_main_registers_itself(void);

/* ---- fork.c: the runtime's fork handlers ---- */
/* Each module's part: PREPARE takes its locks, PARENT releases them, CHILD
 * makes its state the child's own (the modules below it are the child's
 * already) and releases them.  fork.c calls them in its lock order. */
enum mcr_fork { MCR_FORK_PREPARE, MCR_FORK_PARENT, MCR_FORK_CHILD };
/* LOCK's share of STAGE: taken before, released after. */
static inline void mcr_fork_lock(pthread_mutex_t *lock, enum mcr_fork stage)
{
	if (stage == MCR_FORK_PREPARE)
		pthread_mutex_lock(lock);
	else
		pthread_mutex_unlock(lock);
}
void mcr_control_fork(enum mcr_fork stage);
void mcr_redirect_fork(enum mcr_fork stage);

#endif
