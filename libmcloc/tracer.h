/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tracer.c: the built-in tracers, as control.c and fork.c see them. */
#ifndef MCLOC_TRACER_H
#define MCLOC_TRACER_H

#include "mcr.h"

/* The built-in tracer running now ("function", "profile"), or "nop". */
const char *mcr_tracer_name(void);
/* fork.c's: the tracers' lock, and their buffers' (no lock: the child
 * makes every one free again). */
void mcr_tracer_fork(enum mcr_fork stage);
void mcr_tracer_bufs_fork(enum mcr_fork stage);

#endif
