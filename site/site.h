/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Where the ELF layer (common/) and the architectures (arch/) meet, for
 * both command-line tools: a section's code as a backend reads it, and a
 * call site replaced by its NOP.  Neither of the two layers includes the
 * other; this one includes both.
 */
#ifndef MCLOC_SITE_H
#define MCLOC_SITE_H

#include "../arch/arch.h"
#include "../common/mcelf.h"

/* The code of section S of F as a backend decodes it (an empty text when
 * the section has no data), with a known instruction start at BOUNDARY. */
struct mc_text mc_text_of(struct mce_file *f, struct mce_sec *s, uint64_t boundary);

/*
 * Write the NOP replacement of SITE (pre + len + post bytes from
 * site->off - pre) into section TX, and retire every relocation of RS
 * (may be NULL) inside the call.  Returns 0; 1 when this form of site has
 * no safe NOP (nothing changed); -1 with f->err set on failure.
 */
int mc_nop_site(struct mce_file *f, const struct mc_arch *a, struct mce_sec *tx,
		struct mce_sec *rs, const struct mc_site *site);

#endif
