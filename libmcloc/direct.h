/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* direct.c: the direct slots, which ops.c gives its ops (the public
 * mcloc_register_direct() is in <mcloc/mcloc.h>). */
#ifndef MCLOC_DIRECT_H
#define MCLOC_DIRECT_H

#include "mcr.h"

/* A direct slot for OPS, +1 (0: none), set before any site calls it. */
int mcr_direct_take(struct mcloc_ops *ops);
/* OPS's slot back, once it left the set, if SITES_OK says no site calls
 * its stubs any more (otherwise the slot stays taken, calling nothing). */
void mcr_direct_release(struct mcloc_ops *ops, bool sites_ok);

#endif
