// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's shared state (the images, the published ops set, the direct
 * slots), its lock, and its log: the bottom of the runtime, which calls
 * nothing of it.  mcr.h says who may touch what.
 */
#include "mcr.h"

#include <stdarg.h>
#include <stdio.h>

pthread_mutex_t mcr_lock = PTHREAD_MUTEX_INITIALIZER;
struct image *mcr_images[MCR_MAX_IMAGES];
size_t mcr_nimages, mcr_nrecords;
struct ops_set *mcr_cur_set;
struct direct mcr_direct[MCR_DIRECT_SLOTS];
size_t mcr_nrefused;
size_t mcr_list_calls;
struct direct_set *mcr_directs;
__thread int mcr_in_tracer __attribute__((tls_model("initial-exec")));
struct mcr_hooks mcr_hooks;

static void (*log_fn)(int, const char *);

void mcr_say(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fn(level, msg);
}

void mcloc_set_log(void (*log)(int level, const char *msg))
{
	log_fn = log;
}
