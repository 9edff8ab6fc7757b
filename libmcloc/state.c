// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's shared state (the images, the published ops set, the direct
 * slots), its lock, and its log: the bottom of the runtime, which calls
 * nothing of it.  mcr.h says who may touch what.
 */
#include "mcr.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

pthread_mutex_t mcr_lock = PTHREAD_MUTEX_INITIALIZER;
struct image *mcr_images[MCR_MAX_IMAGES];
size_t mcr_nimages, mcr_nrecords;
struct ops_set *mcr_cur_set;
struct direct mcr_direct[MCR_DIRECT_SLOTS];
size_t mcr_nrefused;
size_t mcr_list_calls;
struct direct_set *mcr_directs;
__thread int mcr_in_tracer __attribute__((tls_model("initial-exec")));
__thread struct mcr_entry_args mcr_entry_args __attribute__((tls_model("initial-exec")));
__thread signed char mcr_call_at_entry __attribute__((tls_model("initial-exec")));
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

void mcr_warn(const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	int n = snprintf(msg, sizeof(msg), "libmcloc: ");

	va_start(ap, fmt);
	n += vsnprintf(msg + n, sizeof(msg) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	if (write(2, msg, (size_t)n) < 0)
		return;
}

void mcr_comm(char *buf, size_t len)
{
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n > 0 ? n : 0] = 0;
}
