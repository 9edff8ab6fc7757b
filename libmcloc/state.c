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
__thread uintptr_t *mcr_call_framed __attribute__((tls_model("initial-exec")));
bool mcr_framed_images;
__thread struct mcloc_regs *mcr_entry_regs __attribute__((tls_model("initial-exec")));
unsigned long mcr_images_gen;
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
	char raw[600], msg[600 * 4 + 16];
	va_list ap;
	int n;
	size_t m = (size_t)snprintf(msg, sizeof(msg), "libmcloc: ");

	va_start(ap, fmt);
	n = vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(raw) - 1)
		n = (int)sizeof(raw) - 1;
	/* One line, whatever a value quoted in it holds (an environment
	 * variable with a newline or a terminal escape): control bytes are
	 * written as \xNN. */
	for (int i = 0; i < n; i++) {
		unsigned char c = (unsigned char)raw[i];

		if (c < 0x20 || c == 0x7f)
			m += (size_t)snprintf(msg + m, sizeof(msg) - m, "\\x%02x", c);
		else
			msg[m++] = (char)c;
	}
	msg[m++] = '\n';
	if (write(2, msg, m) < 0)
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
