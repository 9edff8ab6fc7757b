/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MCLOC_RECORD_H
#define MCLOC_RECORD_H

#include <stdbool.h>
#include <stddef.h>

struct record_opts {
	bool kernel;		/* match scripts/recordmcount exactly */
	bool nop;		/* NOP every recorded call */
	bool gc;		/* one table per text section, SHF_LINK_ORDER */
	bool force;		/* regenerate an existing table */
	bool warn_untraced;	/* kernel -w: say when untraced sections call mcount */
	bool dry_run;		/* decide and report, write nothing */
	bool print;		/* list every recorded site on stdout */
	bool in_place;		/* append-and-retarget the input, no new inode */
	const char *section;	/* table name, default __mcount_loc */
	const char *output;	/* -o, single input only */
	const char **symbols;	/* --symbol NAMEs */
	size_t nsymbols;
};

/* Process one object.  Returns 0 on success (including "nothing to do"),
 * -1 after printing one diagnostic line. */
int record_file(const char *path, const struct record_opts *o);

/* Run the compiler command CMD (NULL-terminated), then record each object
 * it wrote with O.  Returns the exit status: the compiler's own when it
 * failed, else 0 or 1. */
int record_wrap(char **cmd, const struct record_opts *o);

#endif
