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

#endif
