// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * recordmcount as a compiler wrapper: `recordmcount [OPTIONS] -- CC ARGS`
 * runs the compile, then records every object it wrote, so that a build
 * system needs only CC="recordmcount -- gcc".
 *
 * Only a compile to objects (-c) is followed by recording.  Anything
 * else runs unchanged: preprocessing, -S, and a compile and link in one
 * step, which is what configure's probes do.  Such a program still links
 * and runs (its calls reach libc's mcount or __fentry__), it is only not
 * recorded; a real build compiles with -c and links separately.
 */
#include "record.h"

#include "../common/command.h"
#include "../common/diag.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The object gcc -c writes for SRC without -o: its base name, .o. */
static char *default_object(const char *src)
{
	const char *base = strrchr(src, '/') ? strrchr(src, '/') + 1 : src;
	size_t stem = (size_t)(strrchr(base, '.') - base);
	char *o = malloc(stem + 3);

	if (o)
		snprintf(o, stem + 3, "%.*s.o", (int)stem, base);
	return o;
}

int record_wrap(char **cmd, const struct record_opts *o)
{
	struct mc_ccargs c;
	int argc = 0, status;

	while (cmd[argc])
		argc++;
	mc_ccargs_read(argc, cmd, &c);
	status = mc_run(cmd, "the compiler");
	if (status || !c.objects || !c.nsources)
		return status;
	if (c.output && mc_special_file(c.output)) {
		/* -o /dev/null, configure's probe of what the compiler
		 * accepts: no object to record, and the compiler's answer
		 * stands. */
		mc_note(c.output, "not a regular file: nothing to record");
		return status;
	}
	if (c.output) {
		/* (gcc refuses -o with -c and several sources.) */
		struct record_opts one = *o;

		one.output = NULL;
		return record_file(c.output, &one) < 0 ? 1 : 0;
	}
	for (int i = 1; i < argc; i++) {
		if (mc_ccargs_takes_value(cmd[i]) && i + 1 < argc) {
			i++;
			continue;
		}
		if (!mc_ccargs_is_source(cmd[i]))
			continue;
		char *obj = default_object(cmd[i]);

		if (!obj) {
			mc_error(cmd[i], "out of memory");
			return 1;
		}
		if (record_file(obj, o) < 0)
			status = 1;
		free(obj);
	}
	return status;
}
