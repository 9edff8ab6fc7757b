/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Replacing a call site by its NOP, in an object or a linked image: the
 * glue between the ELF layer and an architecture's encodings, shared by
 * recordmcount --nop and objpatch nop/link --nop.
 */
#ifndef MCLOC_SITENOP_H
#define MCLOC_SITENOP_H

#include "../arch/arch.h"
#include "mcelf.h"

/*
 * Write the NOP replacement of SITE (pre + len + post bytes from
 * site->off - pre) into section TX, and retire every relocation of RS
 * (may be NULL) inside the call.  Returns 0; 1 when this form of site has
 * no safe NOP (nothing changed); -1 with f->err set on failure.
 */
int mc_nop_site(struct mce_file *f, const struct mc_arch *a, struct mce_sec *tx,
		struct mce_sec *rs, const struct mc_site *site);

#endif
