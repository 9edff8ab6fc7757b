/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Helpers shared by the ELF layer's own source files, not by its users. */
#ifndef MCLOC_ELF_PRIV_H
#define MCLOC_ELF_PRIV_H

#include "mcelf.h"

/* a + b > limit, without overflowing. */
bool mce_add_overflows(uint64_t a, uint64_t b, uint64_t limit);
/* Write rs->rels[i] back into the section's data. */
int mce_store_rel(struct mce_file *f, struct mce_sec *rs, size_t i);
/* Keep P alive until mce_close(): names may point into a replaced buffer. */
int mce_keep(struct mce_file *f, void *p);

#endif
