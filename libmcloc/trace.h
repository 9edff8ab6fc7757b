/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* trace.c: tracing into shared rings, for a controller (control.c). */
#ifndef MCLOC_TRACE_H
#define MCLOC_TRACE_H

#include "mcr.h"

#include <mcloc/control.h>

/* An argument glob (MCLOC_REQ_ARGS_GLOB): what E captures at every
 * function GLOB names, of the images registered now and later, where the
 * controller's entries name no site; the globs naming one function add
 * up in their order (mcloc_args_merge()). */
struct mcr_args_glob {
	struct mcloc_args_ent e;
	char *glob;
};

/* Start the tracer Q asks for, a session of its own beside any other
 * (MCLOC_SESSIONS_MAX at most), with the filter, notrace and
 * set_graph_function globs and the triggers given ("" for none;
 * <mcloc/control.h> says how triggers are written), capturing the
 * arguments and return values of the NARGS entries at ARGS and of the
 * NAGLOBS globs at AGLOBS (copied): the session's id, the rings' memfd in
 * *FD (the caller passes it on and closes it) and its size in *SIZE;
 * -errno with ERR saying why.  Each pattern extends to the functions of
 * images that register while the trace runs. */
int mcr_trace_start(const struct mcloc_req_trace *q, const char *filter, const char *notrace,
		    const char *graph, const char *triggers, const struct mcloc_args_ent *args,
		    size_t nargs, const struct mcr_args_glob *aglobs, size_t naglobs,
		    int *fd, uint64_t *size, char *err, size_t errlen);
/* Refresh every session's clock pair (the control thread, while
 * tracing). */
void mcr_trace_tick(void);
/* Stop session ID: every site it enabled is a NOP again (unless another
 * covers it), no callback of it runs, and its rings say done. */
void mcr_trace_stop(int id);
void mcr_trace_stop_all(void);
bool mcr_trace_active(void);
/* A snapshot asked of every session's reader (MCLOC_REQ_SNAPSHOT). */
unsigned mcr_trace_snapshot(void);	/* the flight recorders among them */
/* The program is exiting: the rings say so, for the controller. */
void mcr_trace_exiting(void);

/* In a forked child: whether a session of its parent follows children
 * (asked once). */
bool mcr_trace_forked_followed(void);
/* fork.c's: the session's lock, and a child that is no session's. */
void mcr_trace_fork(enum mcr_fork stage);

#endif
