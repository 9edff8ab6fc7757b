/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Other programs' commands, for the tools that wrap them: running one, and
 * reading a compiler driver's command line (GCC's and Clang's options).
 * recordmcount -- CC ARGS records after a compile to objects, objpatch
 * link -- CC ARGS post-processes a link: each must know which one it was
 * given, and configure's probes (a compile and a link in one step) must go
 * through both unchanged.
 */
#ifndef MCLOC_COMMAND_H
#define MCLOC_COMMAND_H

#include <stdbool.h>

struct mc_ccargs {
	bool compile_only;	/* -c, -S, -E, -M, -MM or -fsyntax-only */
	bool objects;		/* -c alone: it writes objects */
	int nsources;		/* source files among the arguments */
	int ninputs;		/* any input: sources, objects, archives, -l */
	bool query;		/* --version, -dump*, -print-*, --help, -###: the
				 * driver answers and links nothing */
	const char *output;	/* the last -o (or ld's --output), or NULL */
	int output_arg;		/* the index of the argument output lies in */
};

/* Read the command ARGV[0..ARGC) (ARGV[0] is the driver itself). */
void mc_ccargs_read(int argc, char *const *argv, struct mc_ccargs *c);

/*
 * The compiler driver of the command ARGV[0..ARGC): ARGV[0], or, when that
 * is a compiler cache or distribution launcher (ccache, sccache, distcc,
 * icecc) with the compiler as its next argument, that compiler (through a
 * chain of them).  What the tools run of their own must go to the driver:
 * the launcher reads options of its own ("ccache -c" cleans the cache).
 */
const char *mc_ccargs_driver(int argc, char *const *argv);

/* Whether ARG is an option whose value is the next argument. */
bool mc_ccargs_takes_value(const char *arg);

/*
 * Whether the command read into C links nothing: the driver only answers
 * a query (gcc -print-search-dirs, -v with no input), which a wrapper must
 * pass through with the driver's own output and status (libtool's
 * configure reads them).
 */
bool mc_ccargs_no_link(const struct mc_ccargs *c);

/* Whether ARG names a source file by its suffix. */
bool mc_ccargs_is_source(const char *arg);

/*
 * Whether the command ARGV0 is the linker itself (ld, x86_64-linux-gnu-ld,
 * ld.bfd, ld.gold...) rather than a compiler driver, which takes linker
 * options through -Wl.  Returns the length of its name before "ld" (so
 * that the as beside it is ARGV0[0..n) + "as"), or -1.
 */
int mc_linker_prefix(const char *argv0);

/*
 * Run ARGV (NULL-terminated; ARGV[0] found in PATH) and wait for it.
 * Returns its exit status, as a shell reports one: 127 when it cannot be
 * run and 128 + the signal when one ended it, each said in one line
 * naming WHAT ("the link command").
 */
int mc_run(char *const *argv, const char *what);

/*
 * Whether PATH exists and is not a regular file.  Such a command output
 * (-o /dev/null) is the command's alone: the tools never rewrite it and
 * never remove it.
 */
bool mc_special_file(const char *path);

#endif
