/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What every harness of tests/fuzz shares.  The tools read files by path
 * and write their results beside them (a temp file, then rename), so a
 * harness puts each input in a file of its own directory on a tmpfs
 * (/dev/shm when there is one) and runs the tool's own code on it, the
 * code of the command line minus main().  Standard output and error go to
 * /dev/null: a fuzzer runs millions of inputs, and each bad one is meant
 * to get its one-line diagnostic.
 *
 * The same harness links either with libFuzzer (make fuzz) or with
 * replay.c, which runs it once on each saved input: the regression
 * replay of make check.
 */
#ifndef MCLOC_FUZZ_HARNESS_H
#define MCLOC_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The harness's directory (made once per process) and, in it, the path
 * NAME.  Aborts when the directory cannot be made: a fuzzer that cannot
 * write its input finds nothing. */
const char *fz_path(const char *name);

/* Write DATA[0..SIZE) to fz_path(NAME), replacing it; its path. */
const char *fz_put(const char *name, const uint8_t *data, size_t size);

/* A harness's own failure (the program hung, the socket vanished): the
 * message on standard error and appended to $MCLOC_FUZZ_LOG when set (a
 * campaign's children may have no standard error left), then abort(). */
__attribute__((noreturn, format(printf, 1, 2))) void fz_fail(const char *fmt, ...);

/* Point standard output and error at /dev/null, unless MCLOC_FUZZ_VERBOSE
 * is set (to see the diagnostics of one input): what replay.c does.
 * (Under libFuzzer, -close_fd_mask=3 does it, and libFuzzer and the
 * sanitizers keep reporting on a copy of the old standard error.) */
void fz_quiet(void);

#endif
