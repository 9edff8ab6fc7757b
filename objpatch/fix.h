/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Post-link work on a table: clean, sort, bound with symbols, NOP.  Shared
 * by objpatch sort, nop and link.
 */
#ifndef MCLOC_OBJPATCH_FIX_H
#define MCLOC_OBJPATCH_FIX_H

#include "kmcount.h"
#include "ktables.h"
#include "sites.h"

struct fix_opts {
	bool sort;		/* clean and sort (linked images) */
	bool kernel;		/* with sort: as the kernel's sorttable, which
				 * keeps every entry and adds no symbol */
	enum km_version kversion;	/* with kernel: whose conventions */
	struct km_opts km;	/* with kernel under 6.12's: the functions */
	bool in_place;		/* with sort: overwrite the tables in the file
				 * itself (mce_write_over()), not a new file */
	bool nop;		/* NOP every call site */
	bool missing_ok;	/* a file without a table is left alone (link) */
	bool no_call_left;	/* with nop: a call in no table fails (link) */
	bool runtime;		/* link --runtime: fill the descriptor's table
				 * bounds, and add .mcloc_names */
	const char *name;	/* the name messages give the file, if not its
				 * path (link works on a temporary file) */
};

struct fix_stats {
	size_t entries, kept;
	size_t zero, outside, stale, duplicate;	/* dropped, by reason */
	size_t nopped;
	size_t converted;	/* raw patchable entries made the site's NOP */
	size_t prepared;	/* patchable entries made run-time sites */
	size_t symbols_added;
	size_t names;		/* functions in .mcloc_names */
	bool tables;		/* there were call-site tables */
	struct kt_sort_stats kt;	/* with sort: __ex_table and ORC */
	enum km_version kversion;	/* with kernel: the conventions followed */
	size_t weak_zeroed;	/* with kernel under 6.12's: entries zeroed */
	bool addends;		/* the same: sorted through relocation addends */
	bool changed;
};

/* Apply OPTS to the open file F (op_open_mode, writable or not) whose
 * sites S are loaded.  -1 with a diagnostic printed on failure. */
int op_fix(struct mce_file *f, const struct mc_arch *a, struct op_sites *s,
	   const struct fix_opts *o, struct fix_stats *st);

/* Open PATH, fix it and write it back atomically if anything changed. */
int op_fix_file(const char *path, const struct fix_opts *o, struct fix_stats *st);

#endif
