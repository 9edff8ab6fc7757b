// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * objpatch on one linked image, by the job its last byte picks:
 * inspect (text or JSON, --functions, --lines), check (--kernel), sort,
 * sort --kernel, nop, and link's table work after the linker (clean,
 * sort, NOP, the run-time descriptor and .mcloc_names).  A job that
 * rewrote the image is followed by check on what it wrote.
 */
#include "harness.h"
#include "../../common/diag.h"
#include "../../objpatch/fix.h"
#include "../../objpatch/objpatch.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	mc_tool = "objpatch";
	return 0;
}

/* objpatch NAME ARGS... as main() runs it. */
static int command(int (*fn)(int, char **, const struct op_common *),
		   const struct op_common *c, char **argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	optind = 1;
	return fn(argc, argv, c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t k = size ? data[size - 1] : 0;
	struct op_common c = { .json = k & 8 };
	char path[512];
	struct fix_opts o = { 0 };
	struct fix_stats st;

	snprintf(path, sizeof(path), "%s", fz_put("image", data, size));
	switch (k & 7) {
	case 0: command(cmd_inspect, &c, (char *[]){ "inspect", path, NULL }); return 0;
	case 1: command(cmd_inspect, &c, (char *[]){ "inspect", "--functions", path, NULL }); return 0;
	case 2: command(cmd_inspect, &c, (char *[]){ "inspect", "--lines", path, NULL }); return 0;
	case 3:
		command(cmd_check, &c, (k & 16) ? (char *[]){ "check", "--kernel", path, NULL }
					       : (char *[]){ "check", path, NULL });
		return 0;
	case 4: o = (struct fix_opts){ .sort = true, .kernel = k & 16 }; break;
	case 5: o = (struct fix_opts){ .nop = true }; break;
	default:
		o = (struct fix_opts){ .sort = true, .nop = true, .missing_ok = true,
				       .no_call_left = k & 16, .runtime = true };
		break;
	}
	memset(&st, 0, sizeof(st));
	if (op_fix_file(path, &o, &st) == 0 && st.changed)
		command(cmd_check, &c, (char *[]){ "check", path, NULL });
	return 0;
}
