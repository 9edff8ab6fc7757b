// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The subcommands that change files: sort (the sorttable equivalent), nop,
 * and link, the linker wrapper that runs the real link and then does both
 * to its output.
 */
#include "objpatch.h"
#include "fix.h"

#include "../common/diag.h"

#include <errno.h>
#include <getopt.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void report(const char *path, const struct fix_opts *o, const struct fix_stats *st)
{
	if (!mc_noting())
		return;
	if (o->sort)
		mc_note(path, "%zu of %zu entries kept (dropped: %zu zero, %zu outside code, "
			"%zu in no function, %zu duplicate)%s", st->kept, st->entries, st->zero,
			st->outside, st->stale, st->duplicate, st->changed ? "" : "; unchanged");
	if (o->nop)
		mc_note(path, "%zu call site%s NOPed", st->nopped, st->nopped == 1 ? "" : "s");
}

static int parse_verbose(int argc, char **argv, const char *cmd)
{
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ 0 }
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "+v", longopts, NULL)) != -1) {
		if (opt != 'v')
			return -1;
		mc_verbose++;
	}
	if (optind >= argc) {
		fprintf(stderr, "objpatch %s: no input files\n", cmd);
		return -1;
	}
	return 0;
}

static int run_fix(int argc, char **argv, const char *cmd, const struct fix_opts *o)
{
	struct fix_stats st;
	int status = 0;

	if (parse_verbose(argc, argv, cmd) < 0)
		return 2;
	for (int i = optind; i < argc; i++) {
		if (op_fix_file(argv[i], o, &st) < 0)
			status = 1;
		else
			report(argv[i], o, &st);
	}
	return status;
}

int cmd_sort(int argc, char **argv, const struct op_common *c)
{
	(void)c;
	return run_fix(argc, argv, "sort", &(struct fix_opts){ .sort = true });
}

int cmd_nop(int argc, char **argv, const struct op_common *c)
{
	(void)c;
	return run_fix(argc, argv, "nop", &(struct fix_opts){ .nop = true });
}

/* The link's output: the last -o, as the linker reads it. */
static const char *link_output(int argc, char **argv)
{
	const char *out = "a.out";

	for (int i = 0; i < argc; i++) {
		if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
			out = argv[++i];
		else if (!strncmp(argv[i], "--output=", 9))
			out = argv[i] + 9;
		else if (!strncmp(argv[i], "-o", 2) && argv[i][2])
			out = argv[i] + 2;
	}
	return out;
}

static int run(char **argv)
{
	pid_t pid;
	int st, err = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);

	if (err) {
		mc_error(argv[0], "cannot run the link command: %s", strerror(err));
		return 127;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			mc_error(argv[0], "cannot wait for the link: %s", strerror(errno));
			return 1;
		}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	mc_error(argv[0], "the link command died of signal %d", WTERMSIG(st));
	return 1;
}

int cmd_link(int argc, char **argv, const struct op_common *c)
{
	static const struct option longopts[] = {
		{ "nop", no_argument, NULL, 'n' },
		{ "no-sort", no_argument, NULL, 'S' },
		{ "check", no_argument, NULL, 'c' },
		{ "runtime", no_argument, NULL, 'r' },
		{ "verbose", no_argument, NULL, 'v' },
		{ 0 }
	};
	struct fix_opts o = { .sort = true };
	bool check = false, runtime = false;
	char rtdir[] = "/tmp/objpatch-rt.XXXXXX", rtobj[sizeof(rtdir) + 16] = "";
	char **cmd = NULL;
	int opt, status;

	while ((opt = getopt_long(argc, argv, "+v", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n': o.nop = true; break;
		case 'S': o.sort = false; break;
		case 'c': check = true; break;
		case 'r': runtime = true; break;
		case 'v': mc_verbose++; break;
		default: return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "objpatch link: no link command (objpatch link [OPTIONS] -- CC ARGS...)\n");
		return 2;
	}
	argc -= optind;
	argv += optind;
	const char *out = link_output(argc, argv);

	cmd = calloc((size_t)argc + 2, sizeof(*cmd));
	if (!cmd) {
		mc_error(out, "out of memory");
		return 1;
	}
	memcpy(cmd, argv, (size_t)argc * sizeof(*cmd));
	if (runtime) {
		/* The trampolines and the registration constructor go into the
		 * link itself, so they sit within branch range of every site. */
		if (!mkdtemp(rtdir)) {
			mc_error(out, "cannot make a temporary directory: %s", strerror(errno));
			free(cmd);
			return 1;
		}
		snprintf(rtobj, sizeof(rtobj), "%s/mcloc-rt.o", rtdir);
		if (op_tramp_for_link(argv[0], argc, argv, rtobj) < 0) {
			status = 1;
			goto out;
		}
		cmd[argc] = rtobj;
	}
	status = run(cmd);
	if (status)
		goto out;

	/* An image without any table (nothing in it was built for tracing)
	 * links through unchanged; one that cannot be read fails the link. */
	struct fix_stats st;

	o.missing_ok = true;
	o.names = runtime;	/* function names that survive strip(1) */
	if (op_fix_file(out, &o, &st) < 0) {
		status = 1;
		unlink(out);
		goto out;
	}
	report(out, &o, &st);
	if (check) {
		char *args[] = { "check", (char *)out, NULL };
		struct op_common cc = *c;

		optind = 1;
		if (cmd_check(2, args, &cc) != 0) {
			mc_error(out, "the call-site table is wrong; output removed");
			unlink(out);
			status = 1;
		}
	}
out:
	if (rtobj[0]) {
		unlink(rtobj);
		rmdir(rtdir);
	}
	free(cmd);
	return status;
}
