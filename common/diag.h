/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Diagnostics shared by the command-line tools.  One shape for every line,
 *     FILE: error: TOOL: [sym+0xoff: ]what went wrong
 * so that editors and CI logs can point at the place, as objtool does.
 */
#ifndef MCLOC_DIAG_H
#define MCLOC_DIAG_H

#include <stdbool.h>

/*
 * The run's own settings, set once by main() from the command line: they
 * are the same for every file of a run, which is why they may be
 * process-wide.  Nothing about a file is ever kept here.
 */
extern const char *mc_tool;	/* set by main() */
extern int mc_verbose;		/* -v count */
extern bool mc_quiet;		/* -q: errors only */

/* mc_note() prints only with -v; test this first to skip costly formatting. */
#define mc_noting() (mc_verbose && !mc_quiet)

void mc_error(const char *file, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void mc_warn(const char *file, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void mc_note(const char *file, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
