/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfetto.c: Perfetto's protobuf trace format, streamed. */
#ifndef MCLOC_COMMAND_PERFETTO_H
#define MCLOC_COMMAND_PERFETTO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* TrackEvent.Type */
enum pf_type { PF_BEGIN = 1, PF_END = 2, PF_INSTANT = 3 };

struct perfetto;

/* A writer of a Perfetto trace to F; NULL when out of memory. */
struct perfetto *pf_open(FILE *f);
/* A new packet sequence (one per process): its names interned afresh. */
void pf_sequence(struct perfetto *p);
/* A track UUID: a process's (TID 0) or a thread's, under PARENT (0: none). */
void pf_track(struct perfetto *p, uint64_t uuid, uint32_t pid, uint32_t tid, const char *name,
	      uint64_t parent);
/* An event at NS on TRACK: a slice's begin or end, or an instant, of the
 * function at IP named NAME (its name is written once per sequence). */
void pf_event(struct perfetto *p, uint64_t ns, uint64_t track, enum pf_type type, uint64_t ip,
	      const char *name);
/* A debug annotation NAME of the next event: a signed or unsigned number
 * (POINTER: an address, which viewers show in hex), a flag, a
 * floating-point number, or the N bytes at S (valid UTF-8). */
void pf_arg_int(struct perfetto *p, const char *name, int64_t v);
void pf_arg_uint(struct perfetto *p, const char *name, uint64_t v, bool pointer);
void pf_arg_bool(struct perfetto *p, const char *name, bool v);
void pf_arg_double(struct perfetto *p, const char *name, double v);
void pf_arg_str(struct perfetto *p, const char *name, const char *s, size_t n);
/* Freed; -1 when anything failed (out of memory, or a write). */
int pf_close(struct perfetto *p);

#endif
