/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MCLOC_OBJPATCH_H
#define MCLOC_OBJPATCH_H

#include "json.h"

#include <stdbool.h>

/* Options every inspecting subcommand takes. */
struct op_common {
	bool json;
	bool pretty;
};

int cmd_inspect(int argc, char **argv, const struct op_common *c);
int cmd_check(int argc, char **argv, const struct op_common *c);
/* objpatch check of PATH alone, said of NAME (link --check). */
int op_check_as(const char *path, const char *name, const struct op_common *c);
int cmd_sort(int argc, char **argv, const struct op_common *c);
/* The kernel's scripts/sorttable's command line (sort --kernel). */
int cmd_sorttable(int argc, char **argv, const struct op_common *c);
int cmd_nop(int argc, char **argv, const struct op_common *c);
int cmd_link(int argc, char **argv, const struct op_common *c);
int cmd_tramp(int argc, char **argv, const struct op_common *c);

/* Emit the runtime object for the link command ARGV (its compiler
 * driver CC) into OUT.  -1 with a diagnostic printed on failure. */
int op_tramp_for_link(const char *cc, int argc, char **argv, const char *out);

/* Assemble SRC into OUT with the compiler driver CC (or an as), saying
 * WHAT in the one line a failure gets.  0 or -1. */
int op_assemble(const char *cc, const char *src, const char *out, const char *what);

#endif
