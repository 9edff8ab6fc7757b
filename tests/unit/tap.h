/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The TAP output of the C unit tests: one line per check, the plan last. */
#ifndef MCLOC_TESTS_TAP_H
#define MCLOC_TESTS_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

static void ok(int cond, const char *what)
{
	tap_n++;
	if (!cond)
		tap_failed++;
	printf("%s %d - %s\n", cond ? "ok" : "not ok", tap_n, what);
}

/* Print the plan; the exit status of the test. */
static int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}

#endif
