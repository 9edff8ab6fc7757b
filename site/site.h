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

#include <stdbool.h>

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

/* The bytes of whole NOP instructions (a->any_nop) from OFF of T that
 * cover at least MIN, or 0 when something else comes first. */
unsigned mc_nop_prefix(const struct mc_arch *a, const struct mc_text *t, uint64_t off,
		       unsigned min);

/*
 * The call sites that relocations against mcount symbols mark, decoded as
 * recordmcount records them: the N relocations PICK (of one relocation
 * section, against symbols mc_is_mcount_name() or the caller chose, all
 * applying to the executable section TX; in a linked image linked with
 * --emit-relocs their offsets are addresses) are taken in offset order,
 * those SKIP marks (may be NULL) left out; a relocation of a type that
 * never marks a call, or whose instruction is not a call, is noted and
 * left; each call is passed to PUSH once, with its offset in TX, however
 * many relocations it has.  With DESCRIBE, site->what holds the decoded
 * call.  Returns 0, or -1 after one diagnostic line.
 */
int mc_rel_sites(struct mce_file *f, const struct mc_arch *a, struct mce_sec *tx,
		 const struct mce_rel *pick, size_t n, const bool *skip, bool describe,
		 void (*push)(void *ctx, const struct mc_site *site), void *ctx);

#endif
