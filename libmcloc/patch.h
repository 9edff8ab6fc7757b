/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The batch patching engine (patch.c) and what it asks of its caller, plan.c. */
#ifndef MCLOC_PATCH_H
#define MCLOC_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../arch/runtime.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/mman.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* (Linux 5.14; older headers lack it) */
#endif

/* One site to change: 24 bytes, since a batch of 100,000 is read four
 * times over (map, check + int3, tails, heads) and on the VMs we measure
 * on, that reading was a good part of a batch. */
struct mcr_poke {
	uintptr_t addr;
	uint8_t len;
	uint8_t flags;		/* MCR_POKE_* */
	uint8_t old_bytes[MCR_MAX_SITE];
	uint8_t new_bytes[MCR_MAX_SITE];
	uint16_t tag;		/* the caller's, carried along */
};
_Static_assert(sizeof(struct mcr_poke) <= 24, "a poke is at most 24 bytes");

/*
 * For a call whose target the caller would have to read back from the
 * site (x86_64: one to a stub, parked or not), where checking the tail
 * against what was just read would prove nothing.  OLD_TAIL: old_bytes'
 * tail (every byte but the first) is whatever the site holds, and only
 * the first byte is checked.  SAME_TAIL: so is new_bytes' (only the
 * first byte changes).
 */
#define MCR_POKE_OLD_TAIL 1u
#define MCR_POKE_SAME_TAIL 2u
#define MCR_POKE_TAIL 4u	/* (the patcher's: its tail changes) */
/* The site's image is faulted in as its text is made writable (the
 * batch's prefault, decided image by image, but pokes are written after
 * every image was decided). */
#define MCR_POKE_PREFAULT 8u

/* An ops slot to set (aarch64, riscv64): 8 bytes at AT, 8-aligned. */
struct mcr_slot_write {
	uintptr_t at;
	uintptr_t val;
};

struct mcr_stats {
	size_t batches, sites, syncs;
	double last_batch_ms;
	size_t insn_stores, slot_stores;	/* every store into text */
};
extern struct mcr_stats mcr_stats;

/* A run of pages made writable for a batch, with the protection to
 * restore; a mapping of /proc/self/maps. */
struct mcr_span {
	uintptr_t lo, hi;
	int prot;
};

/* What a batch writes over its flips (below): their breakpoint, their new
 * first byte, or (the batch refused) their old one. */
enum mcr_flip_step { MCR_FLIPS_BREAKPOINT, MCR_FLIPS_NEW, MCR_FLIPS_OLD };

struct mcr_batch;

/*
 * Sites that change by their first byte alone (x86_64's parked sites:
 * arch/runtime.h) are armed as the caller decides them, by mcr_flip(),
 * rather than listed as pokes for a later pass: on a batch that toggles
 * every one of 100,000 sites, each pass over the sites and each list
 * written costs as much as the protocol's own stores.  Nor does the
 * batch list them: the caller marks each where it can find it again
 * (plan.c: a bit per record, and the record's state after) before its
 * breakpoint goes in, so that the SIGTRAP handler finds it there (it is
 * given the batch's CTX: mcr_site_fn), and writes their first bytes
 * itself, a pass a step, with FLIPS.  A list was a fresh 800 KB a
 * process's first batch faulted in, a tenth of that batch; a mark in
 * each record's state had to come off again, a pass over every record
 * that a batch alone in its process needs for nothing else (without
 * it, its first enable took 0.89-0.95 of the time).
 *
 * FLIPS(B, STEP) writes STEP over every armed flip (in a batch alone in
 * its process, each holds its new byte already, and MCR_FLIPS_NEW has
 * nothing to write).  The marks stay until the batch has ended and no
 * handler reads them; the caller then takes them off, giving the states
 * back if the batch failed.  Returns 0 or the first -errno (a write that
 * fails does not stop the others).
 */
typedef int mcr_flips_fn(struct mcr_batch *b, enum mcr_flip_step step);

/* A batch under way (patch.c's; the caller only passes it on). */
struct mcr_batch {
	mcr_flips_fn *flips;	/* the caller's (NULL: none) */
	void *ctx;		/* for FLIPS, and the handler's SITE_OF */
	size_t nflips;		/* how many the caller armed */
	/* The process has no thread but this one, whose signals are held
	 * for the batch (OLDMASK: as they were): no other code runs while
	 * the text changes, so a flip takes its new byte at once (marked
	 * still, should the batch be undone) and the batch makes no sync
	 * (patch.c). */
	bool alone;
	/* Set by mcr_patch_batch(): every site and flip holds its new
	 * instruction, whatever it returns (the text's protection may not
	 * have come back). */
	bool changed;
	sigset_t oldmask;
	uintptr_t wlo, whi;	/* the writable span mcr_flip() stores into */
	int memfd;		/* /proc/self/mem, when mprotect was refused */
	bool prefault;		/* each span made writable is faulted in at once
				 * (for a poke: as its MCR_POKE_PREFAULT says) */
	struct mcr_span *spans;
	size_t nspans, cap;
	struct mcr_span *maps;
	size_t nmaps;
	double t0;
};

/* Start a batch whose flips FLIPS writes (NULL: it has none), and
 * publish CTX to the SIGTRAP handler until the batch ends. */
void mcr_batch_begin(struct mcr_batch *b, mcr_flips_fn *flips, void *ctx);

/* Store BYTE at SITE, text batch B made writable: in memory, or through
 * /proc/self/mem.  0 or -errno. */
int mcr_batch_poke(struct mcr_batch *b, uintptr_t site, uint8_t byte);

static inline int mcr_batch_store(struct mcr_batch *b, uintptr_t site, uint8_t byte)
{
	if (b->memfd >= 0)
		return mcr_batch_poke(b, site, byte);
	*(volatile uint8_t *)site = byte;
	return 0;
}

/* What the caller knows of a flip: its first byte now (OLD) and after
 * (NEW_BYTE). */
struct mcr_flip_to {
	uint8_t old, new_byte;
};

/* mcr_flip() for a site outside the span at hand, or through
 * /proc/self/mem. */
int mcr_flip_slow(struct mcr_batch *b, uintptr_t site, const struct mcr_flip_to *to,
		  uintptr_t hint, char *err, size_t errlen);

#ifdef MCR_FLIP_LEN
/* Arm the site at SITE, checked, marked by the caller and writable in
 * memory: its breakpoint, or in a batch alone in its process its new
 * byte NEW_BYTE.  x86_64 keeps the caller's stores and this one in
 * order; the fence keeps the compiler from moving this one first (a
 * release orders what comes before a store, not after it). */
static inline void mcr_arm(const struct mcr_batch *b, uintptr_t site, uint8_t new_byte)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	*(volatile uint8_t *)site = b->alone ? new_byte : mcr_breakpoint;
}

/*
 * Arm the site at SITE (MCR_FLIP_LEN bytes, its tail already checked by
 * the caller, and marked) to change its first byte as TO says: the byte
 * is checked, then the site armed (mcr_arm()).  HINT is the end of what
 * the caller will write soon (its image's last site), so that the text is
 * made writable in few calls.  Returns 0; -EILSEQ when the site does not
 * hold OLD (ERR says which), or another -errno: nothing was written then,
 * the caller takes its mark off, and gives the batch up with
 * mcr_batch_abort().
 */
static inline int mcr_flip(struct mcr_batch *b, uintptr_t site, const struct mcr_flip_to *to,
			   uintptr_t hint, char *err, size_t errlen)
{
	/* (Empty through /proc/self/mem.) */
	if (site < b->wlo || site + MCR_FLIP_LEN > b->whi ||
	    *(volatile const uint8_t *)site != to->old)
		return mcr_flip_slow(b, site, to, hint, err, errlen);
	mcr_arm(b, site, to->new_byte);
	return 0;
}
#endif

/* Give a batch up before mcr_patch_batch(): every armed flip goes back
 * to its old byte, and the text to its protection. */
void mcr_batch_abort(struct mcr_batch *b);

/*
 * What the SIGTRAP handler asks of the caller about ADDR, where it met a
 * breakpoint that no poke of the batch explains: 0, not a site of a
 * registered image; 1, a site (a trap that raced the end of its batch:
 * what is there now runs); 2, a flip of the batch under way, whose first
 * byte is then *FIRST: the new one, or the old one if UNDO.  CTX is the
 * batch's (mcr_batch_begin()), NULL between batches.  The patcher knows
 * no images itself.
 */
typedef int mcr_site_fn(const void *ctx, uintptr_t addr, bool undo, uint8_t *first);

/* Set the patcher up: register for membarrier, and (where sites change
 * under a breakpoint) install the SIGTRAP handler, which asks SITE_OF.
 * Returns 0 or -errno, with the reason in ERR; ERR is also set, with 0,
 * where patching works without something it would use (aarch64, riscv64:
 * membarrier). */
int mcr_init(mcr_site_fn *site_of, char *err, size_t errlen);

/* Change every site of V (sorted here) from old_bytes to new_bytes, with
 * the breakpoint protocol or, where one store changes a site, with one
 * store each; first set the ops slots of S (of sites that stay or become
 * calls).  All or nothing: on failure no site changes. */
int mcr_patch(struct mcr_poke *v, size_t n, const struct mcr_slot_write *s, size_t ns,
	      char *err, size_t errlen);

/* The same, finishing batch B: its flips change with V's sites, or, on
 * failure, go back with them (their states are the caller's to give
 * back). */
int mcr_patch_batch(struct mcr_batch *b, struct mcr_poke *v, size_t n,
		    const struct mcr_slot_write *s, size_t ns, char *err, size_t errlen);

/* In a fork()ed child, before anything else patches (plan.c's fork
 * handler). */
void mcr_patch_after_fork_child(void);

/* Wait until no SIGTRAP handler is running: one that started before
 * what it reads was withdrawn is done with it. */
void mcr_wait_handlers(void);

#endif
