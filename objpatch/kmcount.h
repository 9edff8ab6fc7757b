/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A kernel image's __mcount_loc as the kernel's own build leaves it, and
 * which kernel's conventions an image follows.
 *
 * Linux 6.1's scripts/sorttable sorts the table's words and keeps every
 * entry.  6.12's (link-vmlinux.sh runs "sorttable -s NMFILE vmlinux" on
 * the output of "nm -S vmlinux") also zeroes each entry that lies in no
 * function NMFILE lists, the call sites of weak definitions that a strong
 * one replaced, whose code stays in .text under no symbol, and which the
 * kernel skips at boot; and on arm64 it sorts the addends of the table's
 * R_AARCH64_RELATIVE relocations, as gcc leaves zeros in place there.
 */
#ifndef MCLOC_OBJPATCH_KMCOUNT_H
#define MCLOC_OBJPATCH_KMCOUNT_H

#include "../arch/arch.h"
#include "../common/mcelf.h"

enum km_version {
	KM_DETECT = 0,	/* from the image (km_detect) */
	KM_6_1,		/* 6.1's conventions, and every kernel's before 6.12 */
	KM_6_12,	/* 6.12's */
};

/* "6.1" or "6.12" into *V: 0, or -1 for anything else. */
int km_version_parse(const char *s, enum km_version *v);
const char *km_version_name(enum km_version v);

/*
 * Which conventions F follows: the version in its linux_banner ("Linux
 * version X.Y..."), 6.12's from 6.12 on; without a banner, 6.12's when it
 * has an .orc_header (6.4 or later), else 6.1's.
 */
enum km_version km_detect(struct mce_file *f);

/* Where the function list of 6.12's sorttable -s comes from. */
enum km_funcs_from {
	KM_FUNCS_SYMTAB,	/* the image's symbol table, as nm -S lists it */
	KM_FUNCS_NONE,		/* none: sorttable without -s zeroes nothing */
	KM_FUNCS_FILE,		/* an nm -S listing (sorttable -s NMFILE) */
};

struct km_opts {
	enum km_funcs_from from;
	const char *nm_file;	/* KM_FUNCS_FILE */
};

struct km_stats {
	size_t entries, zeroed;	/* zeroed: in no function */
	bool addends;		/* sorted through relocation addends */
	bool changed;
};

/*
 * Sort F's table [START, END) as 6.12's sorttable does under O.  A table
 * whose entries all come out zero is refused (the kernel would trace
 * nothing, and its self-test would not notice).  -1 with f->err set.
 */
int km_sort(struct mce_file *f, const struct mc_arch *a, uint64_t start, uint64_t end,
	    const struct km_opts *o, struct km_stats *st);

#endif
