// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * recordmcount on one object, any architecture (the input's e_machine
 * picks it), with the options its last byte selects: --kernel, --nop,
 * --gc-sections' table per section, --force, --in-place, -o, -n, -w.
 * Whatever it makes is then opened again as recordmcount's own input
 * would be: an output it wrote must be an object it can read.
 */
#include "harness.h"
#include "../../common/diag.h"
#include "../../recordmcount/record.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	mc_tool = "recordmcount";
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t k = size ? data[size - 1] : 0;
	struct record_opts o = {
		.kernel = k & 1, .nop = k & 2, .gc = k & 4, .force = k & 8,
		.in_place = k & 16, .dry_run = (k & 0xc0) == 0xc0, .warn_untraced = k & 32,
		.section = (k & 0xc0) == 0x40 ? "__patchable_function_entries" : "__mcount_loc",
	};
	char out[512];
	const char *in = fz_put("in.o", data, size);

	if (k & 0x80 && !o.dry_run) {
		snprintf(out, sizeof(out), "%s", fz_path("out.o"));
		o.output = out;
	}
	snprintf(out, sizeof(out), "%s", o.output ? o.output : in);
	if (record_file(in, &o) == 0 && !o.dry_run) {
		/* Its own output, read back: a second run finds the table. */
		struct record_opts again = { .section = o.section, .kernel = o.kernel };

		record_file(out, &again);
	}
	return 0;
}
