/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * objpatch link and link-time optimisation: what the inputs say, the
 * options the link needs for the LTO step's code to be recorded, and the
 * table of that code written into the output.
 */
#ifndef MCLOC_OBJPATCH_LTO_H
#define MCLOC_OBJPATCH_LTO_H

#include <stdbool.h>

struct op_lto {
	bool gcc;		/* a GCC LTO object among the inputs */
	bool gcc_profile;	/* ... compiled with -p or -pg */
	bool bitcode;		/* LLVM bitcode among the inputs */
	bool traced;		/* an input was compiled for tracing: a table or
				 * an mcount call, or GCC LTO options that say so */
	bool user_profile;	/* -p, -pg or -fprofile on the link line */
	bool user_emit_relocs;	/* --emit-relocs (-q) asked for by the user */
	bool user_strip;	/* -s (--strip-all): no symbols for relocations */
	bool record;		/* record the LTO step's code after the link */
	const char *unrecorded;	/* why this link's LTO code cannot be recorded */
	bool ld;		/* the command is the linker itself */
	char uninspected[256];	/* an archive whose members could not all be read */
	const char *driver;	/* the compiler driver, behind any launcher */
	const char *searched[16]; /* -lNAME of the command line not in its -L
				 * directories: the driver's search path's */
	int nsearched;
};

/* Read the link command ARGV[0..ARGC). */
void op_lto_scan(int argc, char **argv, struct op_lto *l);

/* The options L needs, appended to CMD[0..N) (room for 2 more): GCC's
 * -fprofile, so that its LTO step compiles with -pg, and --emit-relocs,
 * so that the output keeps the relocations of the code it made.  Returns
 * the new count. */
int op_lto_args(const struct op_lto *l, char **cmd, int n);

/*
 * After the link of CMD[0..N) (room for one more) wrote TMP: record the
 * calls of the code the LTO step made, from the relocations that
 * --emit-relocs kept, into a __mcount_loc table of the output.  The link
 * runs once more, with a table of as many entries (an object assembled
 * in a private directory beside TMP by the command's driver, behind any
 * launcher, and removed), and the entries are filled in with the
 * sites of that link; then the relocation sections only --emit-relocs put
 * there are emptied.  OUT names the output in messages.  Returns 0, or 1
 * after one diagnostic line.
 */
int op_lto_record(const struct op_lto *l, char **cmd, int n, const char *tmp,
		  const char *out);

/* Once the output TMP (OUT) is final: when its inputs were compiled for
 * tracing (a table or an mcount call in an object, -p, -pg or
 * -fpatchable-function-entry among a GCC LTO object's options) and it
 * has no call-site table, one warning line, and with CHECK an error (1). */
int op_lto_untraced(const struct op_lto *l, const char *tmp, const char *out, bool check);

#endif
