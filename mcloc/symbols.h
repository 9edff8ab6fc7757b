/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * symbols.c: names and source lines of a process's addresses from the
 * files it mapped, as its /proc/PID/maps lists them, through the tools'
 * libdw layer (common/mclines.c): what names callers and sites that the
 * program could not be asked about (it exited first, or the recording is
 * read later).  Without libdw, nothing is named this way.
 */
#ifndef MCLOC_COMMAND_SYMBOLS_H
#define MCLOC_COMMAND_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

struct symbols;

struct symbols *sym_new(void);
/* The process's file mappings: MAPS, LEN bytes of /proc/PID/maps lines.
 * Names found before are forgotten when they change. */
void sym_set_maps(struct symbols *c, const char *maps, size_t len);
/* /proc/PID/maps read whole: a malloc'd NUL-terminated text, its length
 * in *LEN; NULL when the process is gone. */
char *sym_read_maps(uint32_t pid, size_t *len);
/* PID's parent, from /proc (0 when it cannot be read). */
uint32_t proc_parent(uint32_t pid);
/* The function ADDR lies in, or NULL; "file:line" of ADDR in BUF, or
 * NULL. */
const char *sym_func(struct symbols *c, uint64_t addr);
const char *sym_source(struct symbols *c, uint64_t addr, char *buf, size_t len);
/* The parameters and result of the function whose code holds ADDR, as
 * mc_lines_params() (common/mclines.h) gives them: -1 where unknown. */
struct mc_param;
int sym_params(struct symbols *c, uint64_t addr, struct mc_param *v, int max,
	       struct mc_param *ret);
void sym_free(struct symbols *c);
/* LEN bytes of text from a recording or an image (names, command lines,
 * file names) made safe to print as text, JSON or folded stacks: each
 * control byte and each byte of no valid UTF-8 sequence becomes '?'
 * (NULs, the separators of a command line, are kept). */
void sym_clean(char *s, size_t len);
/* The length of the valid UTF-8 sequence at S (N bytes there), 0 if none. */
size_t sym_utf8_len(const unsigned char *s, size_t n);

#endif
