// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The regression replay: a harness run once on each file given, or on
 * each file of each directory given (saved corpus inputs and crash
 * reproducers), without libFuzzer, so that the ordinary and the
 * sanitized builds run it in make check.  Prints TAP, a line per
 * directory or file; a crash or a sanitizer report ends the run
 * non-zero, as the fuzzer would.
 */
#include "harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	return 0;
}

static int one(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t n;

	if (!f || fstat(fileno(f), &st) < 0)
		return -1;
	buf = malloc((size_t)st.st_size + 1);
	n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	if (!buf)
		return -1;
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Under ASan (the sanitized build), as under the fuzzer's -rss_limit_mb:
 * one allocation of more than 2 GiB is a failure to report (an input
 * that makes a tool ask for that is a bug even where the kernel would
 * overcommit it), and so are leaks. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "max_allocation_size_mb=2048:allocator_may_return_null=0:detect_leaks=1";
}

/* Where a sanitizer reports, when one is linked in. */
__attribute__((weak)) void __sanitizer_set_report_fd(void *fd);

int main(int argc, char **argv)
{
	/* (Before fz_quiet(): the TAP lines go to the real stdout, and a
	 * sanitizer's report to the real standard error.) */
	FILE *tap = fdopen(dup(1), "w");
	int bad = 0;

	if (__sanitizer_set_report_fd)
		__sanitizer_set_report_fd((void *)(intptr_t)dup(2));
	LLVMFuzzerInitialize(&argc, &argv);
	fz_quiet();
	fprintf(tap, "1..%d\n", argc - 1);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		size_t n = 0, cap = 0, done = 0;
		char **names = NULL;

		if (stat(argv[i], &st) < 0) {
			fprintf(tap, "not ok %d %s: missing\n", i, argv[i]);
			bad = 1;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			DIR *d = opendir(argv[i]);
			struct dirent *e;

			while (d && (e = readdir(d))) {
				if (e->d_name[0] == '.')
					continue;
				if (n == cap) {
					cap = cap ? 2 * cap : 64;
					names = realloc(names, cap * sizeof(*names));
					if (!names)
						abort();
				}
				if (asprintf(&names[n++], "%s/%s", argv[i], e->d_name) < 0)
					abort();
			}
			if (d)
				closedir(d);
			qsort(names, n, sizeof(*names), cmp);
		} else {
			names = malloc(sizeof(*names));
			names[n++] = strdup(argv[i]);
		}
		for (size_t k = 0; k < n; k++) {
			/* (Named first: a crash is then the last one named.) */
			fprintf(tap, "# %s\n", names[k]);
			fflush(tap);
			if (one(names[k]) < 0) {
				fprintf(tap, "# %s: unreadable\n", names[k]);
				bad = 1;
			} else {
				done++;
			}
			free(names[k]);
		}
		free(names);
		fprintf(tap, "%s %d %s: %zu inputs\n", done == n ? "ok" : "not ok", i, argv[i],
			done);
		fflush(tap);
	}
	return bad;
}
