/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ops.c: the registered ops, as the registry needs them. */
#ifndef MCLOC_OPS_H
#define MCLOC_OPS_H

#include <stdbool.h>
#include <stdint.h>

struct mcloc_ops;

/* With mcr_lock held, after an image was registered: every registered
 * ops covers the new records its filters name, and the sites follow. */
void mcr_cover_new_image(void);
/* Each pattern of the comma-separated GLOBS added to OPS's filter (or,
 * NOTRACE, its notrace) on its own, so that one that matches no function
 * loaded yet does not stop the others: how many matched something, and
 * with MATCHED, bit i set for the i-th pattern if it did.  Called again
 * when an image registers, it extends the filter to the image's
 * functions. */
int mcr_add_patterns(struct mcloc_ops *ops, const char *globs, bool notrace, uint64_t *matched);

#endif
