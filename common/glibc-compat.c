// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What Debian's static archives, built against glibc with
 * _FORTIFY_SOURCE, need from a musl link that musl does not have: the
 * two checked string functions capstone's printers call.  Both keep
 * glibc's contract: an overflow of the destination aborts.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __sprintf_chk(char *s, int flag, size_t slen, const char *fmt, ...);
char *__strcpy_chk(char *dst, const char *src, size_t dstlen);

int __sprintf_chk(char *s, int flag, size_t slen, const char *fmt, ...)
{
	va_list ap;

	(void)flag;
	va_start(ap, fmt);
	/* An unknown size comes as (size_t)-1, which musl's vsnprintf
	 * refuses (it takes no size over INT_MAX). */
	int n = slen > INT_MAX ? vsprintf(s, fmt, ap) : vsnprintf(s, slen, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= slen)
		abort();
	return n;
}

char *__strcpy_chk(char *dst, const char *src, size_t dstlen)
{
	size_t n = strlen(src);

	if (n >= dstlen)
		abort();
	return memcpy(dst, src, n + 1);
}
