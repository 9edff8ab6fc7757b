/* SPDX-License-Identifier: GPL-2.0-or-later */
/* record.c: the live side of mcloc record, which trace.c's session runs. */
#ifndef MCLOC_COMMAND_RECORDER_H
#define MCLOC_COMMAND_RECORDER_H

#include "format.h"

#include <stddef.h>
#include <stdint.h>

/* Make the recording DIR, of a program whose command line is ARGS
 * (ARGS_LEN bytes, each argument NUL-terminated, kept until the end); a
 * recorder for t->rec, or NULL with a message. */
struct recorder *rec_open(const char *dir, const char *args, size_t args_len);
/* Another process's recorder in ROOT's directory (a child followed, or
 * a program exec'd: GEN, its pid's image, 1 on), for a program whose
 * command line is ARGS; NULL with a message. */
struct recorder *rec_another(const struct recorder *root, unsigned gen, const char *args,
			     size_t args_len);
/* A recorder dropped before its trace started. */
void rec_abort(struct recorder *r);
/* Copy what the rings hold to the thread files, and show SEEN (if not
 * NULL) the slots copied, whole events; the bytes copied. */
size_t rec_drain(struct tracing *t,
		 void (*seen)(struct tracing *t, const uint64_t *ev, size_t n));
/* The program's file mappings, added to those seen (read again while it
 * runs, as it may load more): what names callers and source lines
 * later. */
void rec_maps(struct tracing *t);
/* A flight recorder's snapshot is being taken (counted for the info). */
void rec_snapshot(struct tracing *t);
/* Complete the recording (LOST: events lost in all); 0, or 1 with a
 * message. */
int rec_close(struct tracing *t, uint64_t lost);

#endif
