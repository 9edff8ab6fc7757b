// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * recordmcount: after each cc, record where an object calls mcount,
 * _mcount, __fentry__ or __gnu_mcount_nc, in a __mcount_loc table.
 */
#include "record.h"

#include "../common/diag.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MCLOC_VERSION
#define MCLOC_VERSION "unknown"
#endif

static void usage(FILE *out)
{
	fputs("Usage: recordmcount [OPTIONS] FILE.o...\n"
	      "       recordmcount [OPTIONS] -- CC ARGS...   (compile, then record)\n"
	      "Record the calls to mcount/_mcount/__fentry__/__gnu_mcount_nc of each\n"
	      "object in a __mcount_loc section (with .rel[a]__mcount_loc).\n"
	      "\n"
	      "  -k, --kernel          behave exactly like the kernel's scripts/recordmcount\n"
	      "                        (only its traced text sections; NOP the rest)\n"
	      "  -n, --nop             replace every recorded call with a NOP\n"
	      "  -s, --section NAME    name the table NAME (e.g. __patchable_function_entries)\n"
	      "  -g, --gc-sections     one table per text section (SHF_LINK_ORDER), so that\n"
	      "                        ld --gc-sections drops entries with their functions\n"
	      "  -S, --symbol NAME     treat calls to NAME as mcount calls too (repeatable)\n"
	      "  -f, --force           regenerate a table the object already has\n"
	      "  -o, --output FILE     write the result to FILE (one input only)\n"
	      "  -i, --in-place        append to the object and rewrite its header instead of\n"
	      "                        replacing it (no new inode; a failure or a kill leaves\n"
	      "                        the old object, but nothing is synced)\n"
	      "  -N, --dry-run         report what would be done, write nothing\n"
	      "  -p, --print           list each recorded call on standard output\n"
	      "  -w, --warn-untraced   warn about calls in sections that are not traced\n"
	      "  -v, --verbose         say what was done to each file\n"
	      "  -q, --quiet           errors only\n"
	      "  -h, --help            this text\n"
	      "  -V, --version         the version\n"
	      "\n"
	      "Exit status: 0 all files done, 1 a file failed, 2 usage error.\n", out);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "kernel", no_argument, NULL, 'k' },
		{ "nop", no_argument, NULL, 'n' },
		{ "section", required_argument, NULL, 's' },
		{ "gc-sections", no_argument, NULL, 'g' },
		{ "symbol", required_argument, NULL, 'S' },
		{ "force", no_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "in-place", no_argument, NULL, 'i' },
		{ "dry-run", no_argument, NULL, 'N' },
		{ "print", no_argument, NULL, 'p' },
		{ "warn-untraced", no_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct record_opts o = { .section = "__mcount_loc" };
	int c, status = 0;

	mc_tool = "recordmcount";
	o.symbols = calloc((size_t)argc, sizeof(*o.symbols));
	if (!o.symbols)
		return 1;
	while ((c = getopt_long(argc, argv, "kns:gS:fo:iNpwvqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'k': o.kernel = true; break;
		case 'n': o.nop = true; break;
		case 's':
			if (!*optarg) {
				fprintf(stderr, "recordmcount: --section needs a name\n");
				status = 2;
				goto done;
			}
			o.section = optarg;
			break;
		case 'g': o.gc = true; break;
		case 'S': o.symbols[o.nsymbols++] = optarg; break;
		case 'f': o.force = true; break;
		case 'o': o.output = optarg; break;
		case 'i': o.in_place = true; break;
		case 'N': o.dry_run = true; break;
		case 'p': o.print = true; break;
		case 'w': o.warn_untraced = true; break;
		case 'v': mc_verbose++; break;
		case 'q': mc_quiet = true; break;
		case 'h': usage(stdout); status = 0; goto done;
		case 'V': printf("recordmcount (mcloc) %s\n", MCLOC_VERSION); status = 0; goto done;
		default: usage(stderr); status = 2; goto done;
		}
	}
	/* getopt_long() stops at "--" and leaves optind past it. */
	if (optind > 1 && !strcmp(argv[optind - 1], "--") && optind < argc) {
		if (o.output || o.in_place || o.dry_run) {
			fprintf(stderr, "recordmcount: -o, --in-place and --dry-run do not go "
				"with a compiler command\n");
			status = 2;
			goto done;
		}
		status = record_wrap(argv + optind, &o);
		goto done;
	}
	if (optind >= argc) {
		fprintf(stderr, "recordmcount: no input files\n");
		usage(stderr);
		status = 2;
		goto done;
	}
	if (o.output && o.in_place) {
		fprintf(stderr, "recordmcount: --in-place and --output exclude each other\n");
		status = 2;
		goto done;
	}
	if (o.output && argc - optind != 1) {
		fprintf(stderr, "recordmcount: --output takes exactly one input file\n");
		status = 2;
		goto done;
	}
	for (int i = optind; i < argc; i++) {
		size_t len = strlen(argv[i]);

		/* The kernel's own tracer references mcount without calling it
		 * for tracing; scripts/recordmcount skips it by name. */
		if (o.kernel && len >= 9 && !strcmp(argv[i] + len - 9, "/ftrace.o"))
			continue;
		if (record_file(argv[i], &o) < 0)
			status = 1;
	}
done:
	free(o.symbols);
	return status;
}
