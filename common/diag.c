// SPDX-License-Identifier: GPL-2.0-or-later
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>

const char *mc_tool = "mcloc";
int mc_verbose;
bool mc_quiet;

static void emit(const char *file, const char *level, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One line per diagnostic, whatever the message carried. */
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fprintf(stderr, "%s: %s: %s: %s\n", file, level, mc_tool, msg);
}

void mc_error(const char *file, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(file, "error", fmt, ap);
	va_end(ap);
}

void mc_warn(const char *file, const char *fmt, ...)
{
	va_list ap;

	if (mc_quiet)
		return;
	va_start(ap, fmt);
	emit(file, "warning", fmt, ap);
	va_end(ap);
}

void mc_note(const char *file, const char *fmt, ...)
{
	va_list ap;

	if (!mc_verbose || mc_quiet)
		return;
	va_start(ap, fmt);
	emit(file, "note", fmt, ap);
	va_end(ap);
}
