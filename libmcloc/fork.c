// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * fork(): the runtime's one set of handlers, at the top of the layering
 * (it names every module).  Before the fork every lock of the runtime is
 * taken, in the order in which the runtime nests them, so that the child
 * gets each one free and what each one guards whole: a child forked while
 * another thread held any of them would otherwise wait for that thread,
 * which it does not have, forever.  After it, the parent releases them;
 * the child, from the innermost module out, makes each one's state its
 * own and releases its locks, so that each may use the ones below it
 * (trace.c's part unregisters the session's ops through ops.c).
 *
 * The order, outermost first:
 *   control   ctl.lock (start and stop: stop joins the server thread, which
 *             takes everything below) and first.lock (MCLOC_CONTROL=wait)
 *   tracer    api_lock (the built-in tracers' start, stop and extension)
 *   trace     trace_lock (a controller's session)
 *   redirect  rlock
 *   plan      mcr_lock, then the RCU's grace-period lock
 *   images    the symbol cache's lock
 *   tracer    the function tracer's buffers (no lock: a callback pushes
 *             onto their list with compare-and-swap; the child makes
 *             every one free again)
 *   signals   the SIGEV_THREAD timers' lock; and the flag of SIGTRAP's
 *             disposition (not taken: a setter holds it with its signals
 *             held, for a system call or two; the child makes it free)
 * Nothing in the runtime takes a lock of this list while it holds a later
 * one.
 */
#include "mcr.h"
#include "images.h"
#include "plan.h"
#include "tracer.h"
#include "trace.h"
#include "signals.h"

#include <pthread.h>

static void (*const parts[])(enum mcr_fork) = {
	mcr_control_fork, mcr_tracer_fork, mcr_trace_fork, mcr_redirect_fork,
	mcr_plan_fork, mcr_symbolize_fork, mcr_tracer_bufs_fork, mcr_signals_fork,
};
#define NPARTS (sizeof(parts) / sizeof(parts[0]))

static void before(void)
{
	for (size_t i = 0; i < NPARTS; i++)
		parts[i](MCR_FORK_PREPARE);
}

static void in_parent(void)
{
	for (size_t i = NPARTS; i--;)
		parts[i](MCR_FORK_PARENT);
}

static void in_child(void)
{
	for (size_t i = NPARTS; i--;)
		parts[i](MCR_FORK_CHILD);
}

__attribute__((constructor)) static void fork_handlers(void)
{
	pthread_atfork(before, in_parent, in_child);
}
