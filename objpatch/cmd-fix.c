// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The subcommands that change files: sort (the sorttable equivalent), nop,
 * and link, the linker wrapper that runs the real link and then does both
 * to its output.
 */
#include "objpatch.h"
#include "fix.h"
#include "lto.h"

#include "../common/command.h"
#include "../common/diag.h"
#include "../common/mcelf.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static void report(const char *path, const struct fix_opts *o, const struct fix_stats *st)
{
	if (!mc_noting())
		return;
	if (o->sort && st->tables)
		mc_note(path, "%zu of %zu entries kept (dropped: %zu zero, %zu outside code, "
			"%zu in no function, %zu duplicate)%s", st->kept, st->entries, st->zero,
			st->outside, st->stale, st->duplicate, st->changed ? "" : "; unchanged");
	if (o->sort && st->kt.ex)
		mc_note(path, "__ex_table: %zu entries, %zu moved; %zu relocation%s zeroed; "
			"main_extable_sort_needed %s", st->kt.ex, st->kt.ex_moved,
			st->kt.rels_cleared, st->kt.rels_cleared == 1 ? "" : "s",
			st->kt.flag_cleared ? "cleared" : "left as it was");
	if (o->sort && st->kt.orc)
		mc_note(path, "ORC: %zu entries, %zu moved", st->kt.orc, st->kt.orc_moved);
	if (o->sort && o->kernel)
		mc_note(path, "sorted as Linux %s's sorttable does%s; %zu __mcount_loc entr%s "
			"in no function zeroed", km_version_name(st->kversion),
			st->addends ? " (through relocation addends)" : "", st->weak_zeroed,
			st->weak_zeroed == 1 ? "y" : "ies");
	if (o->nop)
		mc_note(path, "%zu call site%s NOPed", st->nopped, st->nopped == 1 ? "" : "s");
	if (o->nop && st->converted)
		mc_note(path, "%zu patchable entr%s of the compiler's NOPs made the site's NOP",
			st->converted, st->converted == 1 ? "y" : "ies");
}

/* -v, and (where O is given: sort) --kernel[=VERSION] and --in-place. */
static int parse_verbose(int argc, char **argv, const char *cmd, struct fix_opts *o)
{
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "kernel", optional_argument, NULL, 'k' },
		{ "in-place", no_argument, NULL, 'i' },
		{ 0 }
	};
	int opt;

	while ((opt = getopt_long(argc, argv, o ? "+vi" : "+v", longopts, NULL)) != -1) {
		if (opt == 'k' && o) {
			o->kernel = true;
			if (optarg && km_version_parse(optarg, &o->kversion) < 0) {
				fprintf(stderr, "objpatch %s: --kernel=%s: not 6.1 or 6.12\n",
					cmd, optarg);
				return -1;
			}
		} else if (opt == 'i' && o) {
			o->in_place = true;
		} else if (opt == 'v') {
			mc_verbose++;
		} else {
			return -1;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "objpatch %s: no input files\n", cmd);
		return -1;
	}
	return 0;
}

/* objpatch sort (O) of the images ARGV[optind..ARGC). */
static int fix_files(int argc, char **argv, struct fix_opts *o)
{
	struct fix_stats st;
	int status = 0;

	for (int i = optind; i < argc; i++) {
		if (op_fix_file(argv[i], o, &st) < 0)
			status = 1;
		else
			report(argv[i], o, &st);
	}
	return status;
}

static int run_fix(int argc, char **argv, const char *cmd, struct fix_opts *o)
{
	if (parse_verbose(argc, argv, cmd, o->sort ? o : NULL) < 0)
		return 2;
	return fix_files(argc, argv, o);
}

int cmd_sort(int argc, char **argv, const struct op_common *c)
{
	(void)c;
	return run_fix(argc, argv, "sort", &(struct fix_opts){ .sort = true });
}

/*
 * The kernel's scripts/sorttable, command line and all: "sorttable [-s
 * NMFILE] vmlinux...", each image sorted as sort --kernel sorts it, with
 * the functions of NMFILE (nm -S) where 6.12's would zero entries, and
 * none without it, as sorttable zeroes none then.  -i (ours) edits in
 * place, as sorttable does; without it the image is replaced whole.
 */
int cmd_sorttable(int argc, char **argv, const struct op_common *c)
{
	struct fix_opts o = { .sort = true, .kernel = true, .km.from = KM_FUNCS_NONE };
	int opt;

	(void)c;
	/* (Permuting, as sorttable's own getopt does: -s may follow the image.) */
	while ((opt = getopt(argc, argv, "is:v")) != -1) {
		if (opt == 'i') {
			o.in_place = true;
		} else if (opt == 's') {
			o.km.from = KM_FUNCS_FILE;
			o.km.nm_file = optarg;
			o.kversion = KM_6_12;	/* (only 6.12 on takes -s) */
		} else if (opt == 'v') {
			mc_verbose++;
		} else {
			fprintf(stderr, "usage: sorttable [-i] [-s NMFILE] vmlinux...\n");
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: sorttable [-i] [-s NMFILE] vmlinux...\n");
		return 2;
	}
	return fix_files(argc, argv, &o);
}

int cmd_nop(int argc, char **argv, const struct op_common *c)
{
	(void)c;
	return run_fix(argc, argv, "nop", &(struct fix_opts){ .nop = true });
}

/*
 * -lmcloc into CMD, made to stick: an image reaches libmcloc only through
 * weak references (it must run without it too), which --as-needed, the
 * default of some distributions' compilers, takes as no need, and the
 * tracer would silently do nothing.  The linker itself (LD) takes the
 * options bare; a compiler driver passes them on through -Wl.  Returns
 * the count of words written.
 */
static int keep_libmcloc(bool ld, char *lib, char **cmd)
{
	int n = 0;

	cmd[n++] = ld ? "--push-state" : "-Wl,--push-state,--no-as-needed";
	if (ld)
		cmd[n++] = "--no-as-needed";
	cmd[n++] = lib;
	cmd[n++] = ld ? "--pop-state" : "-Wl,--pop-state";
	return n;
}

/* Copy the link command ARGV into CMD; with KEEP, every -lmcloc made to
 * stick.  Returns the new count. */
static int copy_command(int argc, char **argv, bool keep, char **cmd)
{
	/* The linker itself takes the options bare; a compiler driver
	 * passes them on through -Wl. */
	bool ld = mc_linker_prefix(mc_ccargs_driver(argc, argv)) >= 0;
	int n = 0;

	for (int i = 0; i < argc; i++)
		if (keep && i > 0 && !strcmp(argv[i], "-lmcloc"))
			n += keep_libmcloc(ld, argv[i], cmd + n);
		else
			cmd[n++] = argv[i];
	return n;
}

/*
 * --libmcloc: -lmcloc added to the link CMD[0..N) of ARGV[0..ARGC) unless
 * it has one, kept as copy_command keeps it.  A CC chain's links are the
 * build system's (libtool's), with no place of their own for -lmcloc;
 * LIBS would reach configure's probes too.  Returns the new count.
 */
static int add_libmcloc(int argc, char **argv, char **cmd, int n)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-lmcloc"))
			return n;
	return n + keep_libmcloc(mc_linker_prefix(mc_ccargs_driver(argc, argv)) >= 0, "-lmcloc", cmd + n);
}

/*
 * The name the link writes to instead of OUT: a new file beside it,
 * ".OUT.mcloc-XXXXXX", made by this run (O_EXCL), so that nothing but
 * what this run made is ever worked on or removed, and OUT is replaced
 * only by a whole, finished image.  Concurrent links of one output each
 * rename their own.  NULL (said) on failure.
 */
static char *private_output(const char *out)
{
	const char *slash = strrchr(out, '/');
	int dirlen = slash ? (int)(slash - out) + 1 : 0;
	char *tmp;
	int fd;

	if (asprintf(&tmp, "%.*s.%s.mcloc-XXXXXX", dirlen, out, out + dirlen) < 0) {
		mc_error(out, "out of memory");
		return NULL;
	}
	/* (0777 less the umask, as a linker makes an executable.) */
	fd = mce_make_temp(tmp, 0777);
	if (fd < 0) {
		mc_error(out, "cannot create a temporary file beside it: %s", strerror(errno));
		free(tmp);
		return NULL;
	}
	close(fd);
	return tmp;
}

/* CMD[0..N) with its output ARGS->output, or the default a.out, made
 * TMP.  Returns the new count, or -1 when out of memory. */
static int redirect_output(char **cmd, int n, char **argv, const struct mc_ccargs *args,
			   const char *tmp, char **made)
{
	int prefix;

	if (!args->output) {
		cmd[n++] = "-o";
		cmd[n++] = (char *)tmp;
		return n;
	}
	prefix = (int)(args->output - argv[args->output_arg]);
	if (asprintf(made, "%.*s%s", prefix, argv[args->output_arg], tmp) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (cmd[i] == argv[args->output_arg])
			cmd[i] = *made;
	return n;
}

/* The table work on the linked TMP, reported as OUT's; --check after it. */
static int fix_linked(const char *tmp, const char *out, struct fix_opts *o, bool check,
		      const struct op_common *c)
{
	struct fix_stats st;

	/* An image without any table (nothing in it was built for tracing)
	 * links through unchanged; one that cannot be read fails the link. */
	o->missing_ok = true;
	o->no_call_left = true;
	o->name = out;
	if (op_fix_file(tmp, o, &st) < 0)
		return 1;
	report(out, o, &st);
	if (check && op_check_as(tmp, out, c) != 0) {
		mc_error(out, "the call-site table is wrong; output removed");
		return 1;
	}
	return 0;
}

int cmd_link(int argc, char **argv, const struct op_common *c)
{
	static const struct option longopts[] = {
		{ "nop", no_argument, NULL, 'n' },
		{ "no-sort", no_argument, NULL, 'S' },
		{ "check", no_argument, NULL, 'c' },
		{ "runtime", no_argument, NULL, 'r' },
		{ "libmcloc", no_argument, NULL, 'L' },
		{ "verbose", no_argument, NULL, 'v' },
		{ 0 }
	};
	struct fix_opts o = { .sort = true };
	bool check = false, runtime = false, libmcloc = false;
	char rtdir[] = "/tmp/objpatch-rt.XXXXXX", rtobj[sizeof(rtdir) + 16] = "";
	char **cmd = NULL, *tmp = NULL, *made = NULL;
	int opt, status;

	while ((opt = getopt_long(argc, argv, "+v", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n': o.nop = true; break;
		case 'S': o.sort = false; break;
		case 'c': check = true; break;
		case 'r': runtime = true; break;
		case 'L': runtime = libmcloc = true; break;
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
	struct mc_ccargs args;

	mc_ccargs_read(argc, argv, &args);
	const char *out = args.output ? args.output : "a.out";

	/*
	 * objpatch link may stand inside CC (libtool links shared libraries
	 * with $CC): a compile runs as it is, and so does a compile and link
	 * in one step, configure's probe, whose objects were never recorded.
	 */
	if (args.compile_only)
		return mc_run(argv, "the link command");
	/* Nor is a query (-print-search-dirs, --version, -v alone): the
	 * driver's answer is its own. */
	if (mc_ccargs_no_link(&args))
		return mc_run(argv, "the link command");
	if (args.nsources) {
		mc_warn(out, "the link compiles %d source file%s itself, which recordmcount "
			"never saw: linked as it is, with no table work", args.nsources,
			args.nsources == 1 ? "" : "s");
		return mc_run(argv, "the link command");
	}

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-pg"))
			mc_warn(out, "-pg on the link line links gcrt1.o, and the program "
				"writes gmon.out at exit: give -pg to the compiles only");

	/* Room for the runtime object, for up to four words for each
	 * -lmcloc and four for an added one, for an -o, and for LTO's
	 * options and table object. */
	cmd = calloc(4 * (size_t)argc + 16, sizeof(*cmd));
	if (!cmd) {
		mc_error(out, "out of memory");
		return 1;
	}
	int ncmd = copy_command(argc, argv, runtime, cmd);
	struct op_lto lto;

	op_lto_scan(argc, argv, &lto);
	ncmd = op_lto_args(&lto, cmd, ncmd);

	if (libmcloc)
		ncmd = add_libmcloc(argc, argv, cmd, ncmd);

	/* An output that is not a regular file (-o /dev/null: a probe) is
	 * the linker's to write, as it is. */
	bool special = mc_special_file(out);

	if (special)
		mc_note(out, "not a regular file: linked with no table work");
	if (runtime) {
		/* The trampolines and the registration constructor go into the
		 * link itself, so they sit within branch range of every site. */
		if (!mkdtemp(rtdir)) {
			mc_error(out, "cannot make a temporary directory: %s", strerror(errno));
			free(cmd);
			return 1;
		}
		snprintf(rtobj, sizeof(rtobj), "%s/mcloc-rt.o", rtdir);
		if (op_tramp_for_link(mc_ccargs_driver(argc, argv), argc, argv, rtobj) < 0) {
			status = 1;
			goto out;
		}
		cmd[ncmd++] = rtobj;
	}
	if (!special) {
		status = 1;
		if (!(tmp = private_output(out)))
			goto out;
		ncmd = redirect_output(cmd, ncmd, argv, &args, tmp, &made);
		if (ncmd < 0) {
			mc_error(out, "out of memory");
			goto out;
		}
	}
	status = mc_run(cmd, "the link command");
	if (status || special)
		goto out;
	status = op_lto_record(&lto, cmd, ncmd, tmp, out);
	if (status)
		goto out;
	o.runtime = runtime;	/* bounds, and names that survive strip(1) */
	status = fix_linked(tmp, out, &o, check, c);
	if (!status)
		status = op_lto_untraced(&lto, tmp, out, check);
	if (!status && rename(tmp, out) < 0) {
		mc_error(out, "cannot replace: %s", strerror(errno));
		status = 1;
	}
out:
	/* (Only the file this run made; once renamed, it is OUT.) */
	if (tmp && status)
		unlink(tmp);
	if (rtobj[0]) {
		unlink(rtobj);
		rmdir(rtdir);
	}
	free(made);
	free(tmp);
	free(cmd);
	return status;
}
