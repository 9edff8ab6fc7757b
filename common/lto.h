/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Link-time-optimisation inputs: objects whose code the compiler writes
 * only at the link.  recordmcount passes them through (there is no code
 * to record yet) and objpatch link records the code the LTO step made.
 */
#ifndef MCLOC_LTO_H
#define MCLOC_LTO_H

#include <stdbool.h>

struct mce_file;

enum mce_lto {
	MCE_LTO_NONE,		/* not an LTO object (or not readable as one) */
	MCE_LTO_GCC,		/* ELF with GCC's .gnu.lto_* sections */
	MCE_LTO_BITCODE,	/* LLVM bitcode, raw or in its wrapper */
};

struct mce_lto_info {
	enum mce_lto kind;
	bool fat;		/* GCC: it has code as well (-ffat-lto-objects) */
	/* GCC: its .gnu.lto_.opts holds -p or -pg, or -fpatchable-function-
	 * entry (bitcode keeps the equivalent in function attributes that
	 * only LLVM reads, so it is never set for bitcode). */
	bool profile, patchable;
};

/* Whether the file at PATH is LLVM bitcode (its first four bytes). */
bool mce_is_bitcode(const char *path);

/* What kind of LTO object PATH is: bitcode by its magic, GCC's by its
 * sections (it is opened with the ELF layer).  Unreadable files and
 * anything else are MCE_LTO_NONE. */
void mce_lto_probe(const char *path, struct mce_lto_info *info);

/* The same for the open relocatable F. */
void mce_lto_of(struct mce_file *f, struct mce_lto_info *info);

#endif
