/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by the ELF layer's own source files, not by its users.
 * The layer is split by what a caller does: mcelf-open.c reads,
 * mcelf-rel.c handles relocations, mcelf-edit.c changes, mcelf-write.c
 * writes; mcelf-sym.c adds and changes symbols, mcelf-image.c sees a
 * linked image by address.
 */
#ifndef MCLOC_ELF_PRIV_H
#define MCLOC_ELF_PRIV_H

#include "mcelf.h"

/* a + b > limit, without overflowing. */
bool mce_add_overflows(uint64_t a, uint64_t b, uint64_t limit);
/* Write rs->rels[i] back into the section's data. */
int mce_store_rel(struct mce_file *f, struct mce_sec *rs, size_t i);
/* Keep P alive until mce_close(): names may point into a replaced buffer. */
int mce_keep(struct mce_file *f, void *p);
/* S's data become BUF (SIZE bytes, malloc'ed, a byte image; the file
 * owns it from now, even on failure), described as OLD was; S's own old
 * buffer is kept, as names and views may point into it.  The caller says
 * what changed (mce_sec_edited(), mce_sec_rewritten()).  0, or -1. */
int mce_sec_adopt(struct mce_file *f, struct mce_sec *s, const Elf_Data *old, void *buf,
		  size_t size);
/* Grow f->secs to CAP entries, re-pointing the links into the old array. */
int mce_grow_secs(struct mce_file *f, size_t cap);
/* A new, zeroed section at the end of f->secs, which may move (see
 * mce_reserve_sections()).  NULL when out of memory. */
struct mce_sec *mce_new_sec(struct mce_file *f);
/* Let a read of f->map[0..f->size) past a shrunk file end in one line
 * naming f->path and exit 1, not a crash (see mcelf-open.c); and no more. */
void mce_guard_map(struct mce_file *f);
void mce_unguard_map(struct mce_file *f);
/* r_info as the object's own structures hold it (not gelf's). */
uint64_t mce_raw_info(const struct mce_file *f, const struct mce_rel *r);

#endif
