// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * objpatch: the post-link half of mcloc.  Subcommands are dispatched from
 * a table, bpftool-style: any unambiguous prefix names one.  -j/--json and
 * -p/--pretty may come before the subcommand or after it.
 */
#include "objpatch.h"

#include "../common/diag.h"

#include <getopt.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifndef MCLOC_VERSION
#define MCLOC_VERSION "unknown"
#endif

static const struct {
	const char *name;
	int (*fn)(int, char **, const struct op_common *);
	const char *usage;
} cmds[] = {
	{ "inspect", cmd_inspect, "inspect [-j|-p] [--functions] [--lines] FILE..." },
	{ "check", cmd_check, "check [--kernel[=6.1|6.12]] [-v] FILE..." },
	{ "sort", cmd_sort, "sort [--kernel[=6.1|6.12]] [-i|--in-place] [-v] IMAGE..." },
	{ "sorttable", cmd_sorttable, "sorttable [-i] [-s NMFILE] VMLINUX..." },
	{ "nop", cmd_nop, "nop [-v] FILE..." },
	{ "link", cmd_link, "link [--nop] [--no-sort] [--check] [--runtime] [--libmcloc] [-v] -- LINK-COMMAND..." },
	{ "tramp", cmd_tramp, "tramp --arch ARCH -o FILE.o|FILE.S" },
};

static void usage(FILE *out)
{
	fputs("Usage: objpatch [-j|-p] COMMAND [ARGS]\n", out);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(out, "       objpatch %s\n", cmds[i].usage);
	fputs("\n  -j, --json     JSON output (the stable interface for scripts)\n"
	      "  -p, --pretty   indented JSON\n"
	      "  -h, --help     this text\n"
	      "  -V, --version  the version\n"
	      "\nExit status: 0 ok, 1 a problem was found or a file failed, 2 usage.\n", out);
}

/*
 * Strip -j/-p wherever they stand before a "--", so every subcommand takes
 * them.  What follows "--" is another program's command line (objpatch
 * link -- cc ...): it is passed on untouched, "--" included.
 */
static int take_common(int argc, char **argv, struct op_common *c)
{
	int n = 0;
	bool rest = false;

	for (int i = 0; i < argc; i++) {
		if (rest || !strcmp(argv[i], "--")) {
			rest = true;
			argv[n++] = argv[i];
		} else if (!strcmp(argv[i], "-j") || !strcmp(argv[i], "--json")) {
			c->json = true;
		} else if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--pretty")) {
			c->json = c->pretty = true;
		} else {
			argv[n++] = argv[i];
		}
	}
	argv[n] = NULL;
	return n;
}

int main(int argc, char **argv)
{
	struct op_common c = { 0 };
	size_t hit = 0, nhits = 0;

	mc_tool = "objpatch";
#if defined(__GLIBC__)
	/*
	 * Keep freed buffers for the next ones.  glibc gives every buffer
	 * over 128 KB its own mapping and unmaps it when freed, so each phase
	 * of a run (the nm listing, the sorts, the tables written) touched
	 * fresh pages, one fault and one zeroed page each: on a kernel image
	 * those faults were a third of sort --kernel --in-place.  Served from
	 * the heap and kept there, they are reused; the peak stays the same.
	 */
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
	/* Installed as the kernel's scripts/sorttable (a link named so), it
	 * is that program, command line and all. */
	const char *base = strrchr(argv[0], '/');

	if (!strcmp(base ? base + 1 : argv[0], "sorttable")) {
		optind = 1;
		return cmd_sorttable(argc, argv, &c);
	}
	argc = take_common(argc, argv, &c);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("objpatch (mcloc) %s\n", MCLOC_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (!strcmp(argv[1], cmds[i].name)) {
			hit = i;
			nhits = 1;
			break;
		}
		if (!strncmp(argv[1], cmds[i].name, strlen(argv[1]))) {
			hit = i;
			nhits++;
		}
	}
	if (nhits != 1) {
		fprintf(stderr, "objpatch: %s command '%s'\n", nhits ? "ambiguous" : "unknown",
			argv[1]);
		usage(stderr);
		return 2;
	}
	optind = 1;
	return cmds[hit].fn(argc - 1, argv + 1, &c);
}
