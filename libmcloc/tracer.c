// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The built-in tracers, configured by the environment (read with
 * secure_getenv, so a setuid program ignores them):
 *
 *   MCLOC_TRACER=function  one line per call, in ftrace's format
 *                              TASK-TID [CPU] SECONDS: function <-parent
 *   MCLOC_TRACER=profile   at exit, calls per function, most first
 *   MCLOC_FILTER=globs     what to trace (default: everything)
 *   MCLOC_NOTRACE=globs    what not to trace; wins over the filter
 *   MCLOC_OUTPUT=path      where (default: standard error)
 *
 * Lines go to a buffer per thread, written out whole when it fills, when
 * the thread exits and at process exit: no lock is taken per call.
 *
 * The profile counts calls only.  Timing a function needs its return,
 * which means hijacking its return address (the function-graph tracer's
 * way); that is not done yet, so no time is shown rather than a wrong one.
 */
#include "mcloc.h"
#include "tracer.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TBUF_SIZE (64 << 10)

struct tbuf {
	size_t len;
	atomic_int busy;		/* the owner is writing; exit waits */
	struct tbuf *next;
	char comm[20];
	char data[TBUF_SIZE];
};

static int out_fd = -1;
static enum { NONE, FUNCTION, PROFILE } kind;
static bool started, key_made;
static char cur_filter[1024], cur_notrace[1024];
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcloc_ops tracer_ops;
static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tkey;
static struct tbuf *all_bufs;
static __thread struct tbuf *mybuf __attribute__((tls_model("initial-exec")));

/* profile: calls per site, by name */
struct hit {
	const char *name;
	atomic_ulong n;
};
static struct hit *hits;
static size_t nhits, caphits;

static void write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(out_fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void flush(struct tbuf *b)
{
	if (b->len)
		write_all(b->data, b->len);
	b->len = 0;
}

static void thread_gone(void *p)
{
	struct tbuf *b = p;

	atomic_store(&b->busy, 1);
	flush(b);
	atomic_store(&b->busy, 0);
}

static struct tbuf *get_buf(void)
{
	struct tbuf *b = mybuf;

	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b->comm, sizeof(b->comm) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0 && b->comm[n - 1] == '\n')
		n--;
	b->comm[n > 0 ? n : 0] = 0;
	pthread_mutex_lock(&tlock);
	b->next = all_bufs;
	all_bufs = b;
	pthread_mutex_unlock(&tlock);
	pthread_setspecific(tkey, b);
	mybuf = b;
	return b;
}

static void function_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
			struct mcloc_regs *regs)
{
	struct tbuf *b = get_buf();
	struct timespec ts;
	const char *fn = mcloc_site_name(ip), *pn = mcloc_addr_name(parent, NULL);
	char pbuf[24];

	(void)ops;
	(void)regs;
	if (!b)
		return;
	atomic_store(&b->busy, 1);
	if (b->len > TBUF_SIZE - 512)
		flush(b);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!pn) {
		Dl_info di;

		if (dladdr((void *)parent, &di) && di.dli_sname)
			pn = di.dli_sname;	/* outside every traced image */
		else {
			snprintf(pbuf, sizeof(pbuf), "%#lx", (unsigned long)parent);
			pn = pbuf;
		}
	}
	int n = snprintf(b->data + b->len, TBUF_SIZE - b->len,
			 "%16s-%-7ld [%03d] %5ld.%06ld: %s <-%s\n", b->comm,
			 (long)syscall(SYS_gettid), sched_getcpu(), (long)ts.tv_sec,
			 ts.tv_nsec / 1000, fn ? fn : "?", pn);
	if (n > 0)
		b->len += (size_t)n < TBUF_SIZE - b->len ? (size_t)n : TBUF_SIZE - b->len - 1;
	atomic_store(&b->busy, 0);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct hit *)a)->name, ((const struct hit *)b)->name);
}

static void profile_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
		       struct mcloc_regs *regs)
{
	const char *fn = mcloc_site_name(ip);
	struct hit key = { .name = fn };

	(void)parent;
	(void)ops;
	(void)regs;
	if (!fn)
		return;
	struct hit *h = bsearch(&key, hits, nhits, sizeof(*hits), cmp_name);
	if (h)
		atomic_fetch_add_explicit(&h->n, 1, memory_order_relaxed);
}

static int cmp_hits(const void *a, const void *b)
{
	unsigned long x = atomic_load(&((const struct hit *)a)->n);
	unsigned long y = atomic_load(&((const struct hit *)b)->n);

	return x < y ? 1 : x > y ? -1 : strcmp(((const struct hit *)a)->name,
					       ((const struct hit *)b)->name);
}

/* Stop the tracer and write out what it holds. */
static void finish(void)
{
	if (!started)
		return;
	mcloc_unregister_ops(&tracer_ops);
	mcloc_ops_free(&tracer_ops);
	started = false;
	if (kind == FUNCTION) {
		pthread_mutex_lock(&tlock);
		for (struct tbuf *b = all_bufs; b; b = b->next) {
			while (atomic_load(&b->busy))
				sched_yield();
			flush(b);
		}
		pthread_mutex_unlock(&tlock);
	} else if (kind == PROFILE) {
		char line[512];

		qsort(hits, nhits, sizeof(*hits), cmp_hits);
		int n = snprintf(line, sizeof(line), "%-40s %12s\n", "Function", "Hit");
		write_all(line, (size_t)n);
		n = snprintf(line, sizeof(line), "%-40s %12s\n", "--------", "---");
		write_all(line, (size_t)n);
		for (size_t i = 0; i < nhits && atomic_load(&hits[i].n); i++) {
			n = snprintf(line, sizeof(line), "%-40s %12lu\n", hits[i].name,
				     atomic_load(&hits[i].n));
			write_all(line, (size_t)n);
		}
		n = snprintf(line, sizeof(line), "(time per function is not measured: return "
			     "hooking is not implemented yet)\n");
		write_all(line, (size_t)n);
		free(hits);
		hits = NULL;
		nhits = caphits = 0;
	}
}

static void at_exit(void)
{
	pthread_mutex_lock(&api_lock);
	finish();
	pthread_mutex_unlock(&api_lock);
}

static void add_name(const char *name, void *arg)
{
	(void)arg;
	if (nhits == caphits) {
		size_t cap = caphits ? 2 * caphits : 1024;
		struct hit *n = realloc(hits, cap * sizeof(*n));

		if (!n)
			return;
		hits = n;
		caphits = cap;
	}
	hits[nhits].name = name;
	atomic_init(&hits[nhits].n, 0);
	nhits++;
}

/* The profile's counters, one per traced function name, keeping what was
 * counted before (a new image was loaded: the ops is unregistered, so no
 * callback runs meanwhile). */
static void build_hits(void)
{
	struct hit *old = hits;
	size_t nold = nhits;

	hits = NULL;
	nhits = caphits = 0;
	mcloc_each_site_name(add_name, NULL);
	qsort(hits, nhits, sizeof(*hits), cmp_name);
	size_t u = 0;
	for (size_t i = 0; i < nhits; i++)
		if (!u || strcmp(hits[i].name, hits[u - 1].name))
			hits[u++] = hits[i];
	nhits = u;
	for (size_t i = 0; i < nold; i++) {
		struct hit *h = bsearch(&old[i], hits, nhits, sizeof(*hits), cmp_name);

		if (h)
			atomic_store(&h->n, atomic_load(&old[i].n));
	}
	free(old);
}

/* (Re)register the tracer's ops over every image known now. */
static int arm(void)
{
	if (started) {
		mcloc_unregister_ops(&tracer_ops);
		mcloc_ops_free(&tracer_ops);
		started = false;
	}
	tracer_ops = (struct mcloc_ops){ .func = kind == FUNCTION ? function_cb : profile_cb };
	if (cur_filter[0])
		mcloc_set_filter(&tracer_ops, cur_filter, 1);
	if (cur_notrace[0])
		mcloc_set_notrace(&tracer_ops, cur_notrace, 1);
	if (kind == PROFILE)
		build_hits();
	int ret = mcloc_register_ops(&tracer_ops);
	started = ret == 0;
	return ret;
}

static bool at_exit_set;

int mcloc_tracer_start(const char *which, const char *filter, const char *notrace, int fd)
{
	int ret = mcloc_init();	/* finds the main program's own table, if any */

	if (ret)
		return ret;
	pthread_mutex_lock(&api_lock);
	if (started) {
		ret = -EBUSY;
		goto out;
	}
	if (!which || (strcmp(which, "function") && strcmp(which, "profile"))) {
		ret = -EINVAL;
		goto out;
	}
	kind = !strcmp(which, "function") ? FUNCTION : PROFILE;
	snprintf(cur_filter, sizeof(cur_filter), "%s", filter ? filter : "");
	snprintf(cur_notrace, sizeof(cur_notrace), "%s", notrace ? notrace : "");
	if (out_fd >= 0 && out_fd != fd)
		close(out_fd);
	out_fd = fd >= 0 ? dup(fd) : dup(2);
	if (out_fd < 0) {
		ret = -errno;
		goto out;
	}
	if (!key_made) {
		if (pthread_key_create(&tkey, thread_gone)) {
			ret = -EAGAIN;
			goto out;
		}
		key_made = true;
	}
	if (!at_exit_set) {
		atexit(at_exit);
		at_exit_set = true;
	}
	ret = arm();
out:
	pthread_mutex_unlock(&api_lock);
	return ret;
}

void mcloc_tracer_stop(void)
{
	pthread_mutex_lock(&api_lock);
	finish();
	pthread_mutex_unlock(&api_lock);
}

void mcloc_env_tracer_kick(void)
{
	static bool read_env, from_env;

	if (!read_env) {
		read_env = true;
		const char *t = secure_getenv("MCLOC_TRACER");
		const char *o = secure_getenv("MCLOC_OUTPUT");

		if (!t || !*t)
			return;
		int fd = o && *o ? open(o, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)
				 : 2;
		if (fd < 0)
			return;
		from_env = mcloc_tracer_start(t, secure_getenv("MCLOC_FILTER"),
					      secure_getenv("MCLOC_NOTRACE"), fd) == 0;
		if (fd != 2)
			close(fd);
		return;
	}
	/* A new image: extend the tracer started from the environment (not
	 * when the image registers from inside a start, which covers it). */
	if (pthread_mutex_trylock(&api_lock))
		return;
	if (from_env && started)
		arm();
	pthread_mutex_unlock(&api_lock);
}
