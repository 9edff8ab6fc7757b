/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * argspec.c: which arguments and return values a trace captures, as
 * uftrace's -A, -R and --auto-args say them, made into the per-site
 * entries of MCLOC_REQ_ARGS (<mcloc/control.h>).
 */
#ifndef MCLOC_COMMAND_ARGSPEC_H
#define MCLOC_COMMAND_ARGSPEC_H

#include <mcloc/control.h>

#include <stdbool.h>
#include <stddef.h>

struct names;
struct symbols;

/* One -A or -R: its functions' glob, and what it captures. */
struct argspec {
	char *glob;
	const char *text;	/* as given, for messages */
	unsigned nargs;
	bool has_args, has_ret;
	struct mcloc_arg args[MCLOC_ARGS_MAX];
	struct mcloc_arg ret;
};

struct argspecs {
	struct argspec *v;
	size_t n, cap;
	bool autoargs;		/* --auto-args: every function DWARF describes */
};

/*
 * TEXT, "FUNC@ITEM[,ITEM...]" (ITEM: argN, fpargN or retval, each with an
 * optional /FORMAT: d, i, u, x, p, s, c or f, and a size in bits), added
 * to S: 0, or -1 with a message for WHO ("-A" or "-R").
 */
int argspec_add(struct argspecs *s, const char *text, const char *who);
/*
 * The entries for the sites named in SITES that S covers, sorted by site,
 * into *OUT (malloc'd; *N of them).  --auto-args reads the functions'
 * DWARF through SYM (NULL: none).  RETVALS: return values may be
 * captured (function_graph).  0, or -1 with a message for WHO.
 */
int argspec_entries(const struct argspecs *s, const struct names *sites, struct symbols *sym,
		    bool retvals, const char *who, struct mcloc_args_ent **out, size_t *n);
void argspecs_free(struct argspecs *s);
/* SP as an entry (its site 0), as MCLOC_REQ_ARGS_GLOB sends it, and as
 * mcloc_args_merge() adds it to a function's. */
struct mcloc_args_ent argspec_ent(const struct argspec *sp);

#endif
