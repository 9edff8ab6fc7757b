/* SPDX-License-Identifier: GPL-2.0-or-later */
/* One-instruction decoding through capstone, for the non-x86 backends. */
#ifndef MCLOC_ARCH_CAPSTONE_H
#define MCLOC_ARCH_CAPSTONE_H

#include "arch.h"

#include <capstone/capstone.h>

/*
 * Decode the instruction at OFF of T with capstone's ARCH/MODE (the byte
 * order is added from T).  Returns its capstone id and length, or 0 when
 * nothing decodes there.  The text form goes to S->what when S is given.
 */
unsigned mc_cs_decode(cs_arch arch, cs_mode mode, const struct mc_text *t,
		      uint64_t off, unsigned *len, struct mc_site *s);

#endif
