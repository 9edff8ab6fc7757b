/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The batch patching engine (patch.c) and what it asks of the core. */
#ifndef MCLOC_PATCH_H
#define MCLOC_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../arch/runtime.h"

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

/* Set the patcher up: register for membarrier, and (where sites change
 * under a breakpoint) install the SIGTRAP handler.  IS_SITE tells the trap handler whether an address
 * is a site of a registered image (a trap that raced the end of its
 * batch); the patcher knows no images itself. */
int mcr_init(bool (*is_site)(uintptr_t addr), char *err, size_t errlen);

/* Change every site of V (sorted here) from old_bytes to new_bytes, with
 * the breakpoint protocol or, where one store changes a site, with one
 * store each; first set the ops slots of S (of sites that stay or become
 * calls).  All or nothing: on failure no site changes. */
int mcr_patch(struct mcr_poke *v, size_t n, const struct mcr_slot_write *s, size_t ns,
	      char *err, size_t errlen);

/* Wait until no SIGTRAP handler is running: one that started before
 * what it reads was withdrawn is done with it. */
void mcr_wait_handlers(void);

#endif
