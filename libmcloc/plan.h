/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plan.c: what every site should be.  Callers hold mcr_lock, change the
 * records' counts, and ask for the batch that brings the code in line.
 */
#ifndef MCLOC_PLAN_H
#define MCLOC_PLAN_H

#include "mcr.h"

/* Patch every site whose wanted state differs from its code, in one
 * batch: 0, or -errno (the records then say what the code holds). */
int mcr_update_sites(void);

/* The same after adding DELTA (+1, -1) to the counts of every record COPS
 * covers; on failure before the batch, the counts are put back. */
int mcr_update_sites_with(const struct mcloc_ops *cops, int delta);
/* What one ops adds to (DELTA +1) or takes from (-1) the state of a
 * record it covers. */
uint32_t mcr_count_unit(const struct mcloc_ops *ops, int delta);
/* Add UNIT (mcr_count_unit()) to the state of global record G. */
void mcr_rec_add(size_t g, uint32_t unit);
/* fork.c's: no patching across fork(). */
void mcr_plan_fork(enum mcr_fork stage);

/* The patcher's question about a breakpoint at ADDR (patch.h:
 * mcr_site_fn), answered from the records, in a read-side section so
 * that an image unloaded meanwhile is freed only after it. */
int mcr_site_trap(const void *ctx, uintptr_t addr, bool undo, uint8_t *first);

#endif
