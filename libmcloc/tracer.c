// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The built-in tracers, configured by the environment (read with
 * secure_getenv, so a setuid program ignores them):
 *
 *   MCLOC_TRACER=function  one line per call, in ftrace's format
 *                              TASK-TID [CPU] SECONDS: function <-parent
 *   MCLOC_TRACER=profile   at exit, per function: calls, total and average
 *                          time, most time first
 *   MCLOC_FILTER=globs     what to trace (default: everything)
 *   MCLOC_NOTRACE=globs    what not to trace; wins over the filter
 *   MCLOC_OUTPUT=path      where (default: standard error)
 *
 * Lines go to a buffer per thread, written out whole when it fills, when
 * the thread exits and at process exit: no lock is taken per call.
 *
 * The profile times a function by hijacking its return address, as the
 * kernel's function-graph tracer does: the callback (with registers) swaps
 * the address for arch's return trampoline and keeps the real one on a
 * per-thread shadow stack with the entry time; the trampoline's hook pops
 * it, adds the time, and returns the real address.  The time is
 * inclusive (callees count), as ftrace's function profiler shows it.  A
 * longjmp past timed functions leaves their shadow entries behind; the
 * hook finds its own entry by the stack slot and drops those above it.
 * Calls whose return address is not at the entry's stack pointer (mcount
 * sites after a prologue) are counted, not timed.  C++ exceptions must not
 * pass through a timed function (the unwinder cannot walk the trampoline).
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "../arch/runtime.h"

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
/* Started and not stopped; `started` says whether its ops is registered
 * (it is not while its filter matches nothing loaded yet). */
static bool active;
static char cur_filter[1024], cur_notrace[1024];
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcloc_ops tracer_ops;
static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t tkey;
static struct tbuf *all_bufs;
static __thread struct tbuf *mybuf __attribute__((tls_model("initial-exec")));

/* profile: calls and time per site, by name */
struct hit {
	const char *name;
	atomic_ulong n;
	atomic_ulong timed, ns;		/* calls timed, and their total time */
};
static struct hit *hits;
static size_t nhits, caphits;
/* Arrays replaced while timed calls may still return into them: kept,
 * never freed, so that a late return adds to memory that is still there
 * (and is ignored, its generation being old). */
static struct hit *retired_hits[32];
static size_t nretired_hits;
static atomic_uint hits_gen;

/* The shadow stack of a thread's timed calls. */
#define SHADOW_DEPTH 128
struct frame {
	uintptr_t key;		/* the stack pointer after its return */
	uintptr_t ret;		/* its return address */
	struct hit *hit;
	unsigned gen;
	uint64_t t0;
};
struct shadow {
	unsigned depth;
	struct frame f[SHADOW_DEPTH];
};
static pthread_key_t shadow_key;
static pthread_once_t shadow_once = PTHREAD_ONCE_INIT;
static __thread struct shadow *myshadow __attribute__((tls_model("initial-exec")));

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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void shadow_key_make(void)
{
	pthread_key_create(&shadow_key, free);
}

static struct shadow *get_shadow(void)
{
	struct shadow *sh = myshadow;

	if (sh)
		return sh;
	pthread_once(&shadow_once, shadow_key_make);
	sh = calloc(1, sizeof(*sh));
	if (!sh)
		return NULL;
	pthread_setspecific(shadow_key, sh);
	myshadow = sh;
	return sh;
}

static void profile_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
		       struct mcloc_regs *regs)
{
	const char *fn = mcloc_site_name(ip);
	struct hit key = { .name = fn };

	(void)ops;
	if (!fn)
		return;
	struct hit *h = bsearch(&key, hits, nhits, sizeof(*hits), cmp_name);
	if (!h)
		return;
	atomic_fetch_add_explicit(&h->n, 1, memory_order_relaxed);

	struct shadow *sh = get_shadow();
	uintptr_t sp = 0;
	uintptr_t *slot = regs ? mcr_return_slot(regs, ip, parent, &sp) : NULL;
	if (!sh || !slot || sh->depth == SHADOW_DEPTH)
		return;		/* counted, not timed */
	sh->f[sh->depth] = (struct frame){ sp, *slot, h,
					   atomic_load_explicit(&hits_gen, memory_order_relaxed),
					   now_ns() };
	/* The entry first: a signal arriving between the two finds it. */
	__atomic_store_n(&sh->depth, sh->depth + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	*slot = (uintptr_t)mcr_return_tramp;
}

__attribute__((used)) uintptr_t mcr_return_hook(uintptr_t sp)
{
	struct shadow *sh = myshadow;
	uint64_t t = now_ns();

	/* The returning call's entry is the newest that returns to SP;
	 * newer ones were left by a longjmp past them. */
	for (unsigned k = sh ? sh->depth : 0; k-- > 0;) {
		struct frame *f = &sh->f[k];

		if (f->key != sp)
			continue;
		uintptr_t ret = f->ret;
		if (f->gen == atomic_load_explicit(&hits_gen, memory_order_relaxed)) {
			atomic_fetch_add_explicit(&f->hit->timed, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&f->hit->ns, t - f->t0, memory_order_relaxed);
		}
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&sh->depth, k, __ATOMIC_RELAXED);
		return ret;
	}
	/* Nowhere to return to: the shadow stack no longer matches the
	 * real one.  Say so rather than jump somewhere. */
	static const char msg[] = "libmcloc: profile: a timed function returned with no "
				  "record of its caller; aborting\n";
	if (write(2, msg, sizeof(msg) - 1) < 0)
		abort();
	abort();
}

/* Most time first; then most calls; then by name. */
static int cmp_hits(const void *a, const void *b)
{
	const struct hit *p = a, *q = b;
	unsigned long x = atomic_load(&p->ns), y = atomic_load(&q->ns);

	if (x != y)
		return x < y ? 1 : -1;
	x = atomic_load(&p->n);
	y = atomic_load(&q->n);
	return x < y ? 1 : x > y ? -1 : strcmp(p->name, q->name);
}

/* Stop the tracer and write out what it holds. */
static void finish(void)
{
	active = false;
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

		/* Sorted in a copy: a timed call still running in another
		 * thread adds to the array it started with. */
		struct hit *v = malloc((nhits + 1) * sizeof(*v));
		if (!v)
			return;
		for (size_t i = 0; i < nhits; i++) {
			v[i].name = hits[i].name;
			atomic_init(&v[i].n, atomic_load(&hits[i].n));
			atomic_init(&v[i].timed, atomic_load(&hits[i].timed));
			atomic_init(&v[i].ns, atomic_load(&hits[i].ns));
		}
		qsort(v, nhits, sizeof(*v), cmp_hits);
		int n = snprintf(line, sizeof(line), "%-40s %12s %14s %12s\n", "Function", "Hit",
				 "Time (us)", "Avg (us)");
		write_all(line, (size_t)n);
		n = snprintf(line, sizeof(line), "%-40s %12s %14s %12s\n", "--------", "---",
			     "---------", "--------");
		write_all(line, (size_t)n);
		for (size_t i = 0; i < nhits && atomic_load(&v[i].n); i++) {
			unsigned long timed = atomic_load(&v[i].timed), ns = atomic_load(&v[i].ns);

			if (timed)
				n = snprintf(line, sizeof(line), "%-40s %12lu %14.3f %12.3f\n",
					     v[i].name, atomic_load(&v[i].n), ns / 1e3,
					     ns / 1e3 / (double)timed);
			else	/* (an mcount site: counted, not timed) */
				n = snprintf(line, sizeof(line), "%-40s %12lu %14s %12s\n",
					     v[i].name, atomic_load(&v[i].n), "-", "-");
			write_all(line, (size_t)n);
		}
		free(v);
		/* A later start counts afresh; returns still in flight add to
		 * the retired array, if anything (its generation is old). */
		atomic_fetch_add(&hits_gen, 1);
		if (nretired_hits < sizeof(retired_hits) / sizeof(retired_hits[0]))
			retired_hits[nretired_hits++] = hits;
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
	atomic_init(&hits[nhits].timed, 0);
	atomic_init(&hits[nhits].ns, 0);
	nhits++;
}

/* The profile's counters, one per traced function name, keeping what was
 * counted before (a new image was loaded: the ops is unregistered, so no
 * callback runs meanwhile). */
static void build_hits(void)
{
	struct hit *old = hits;
	size_t nold = nhits;

	atomic_fetch_add(&hits_gen, 1);	/* calls timed from now on: the new array */

	hits = NULL;
	nhits = caphits = 0;
	mcr_each_site_name(add_name, NULL);
	qsort(hits, nhits, sizeof(*hits), cmp_name);
	size_t u = 0;
	for (size_t i = 0; i < nhits; i++)
		if (!u || strcmp(hits[i].name, hits[u - 1].name))
			hits[u++] = hits[i];
	nhits = u;
	for (size_t i = 0; i < nold; i++) {
		struct hit *h = bsearch(&old[i], hits, nhits, sizeof(*hits), cmp_name);

		if (h) {
			atomic_store(&h->n, atomic_load(&old[i].n));
			atomic_store(&h->timed, atomic_load(&old[i].timed));
			atomic_store(&h->ns, atomic_load(&old[i].ns));
		}
	}
	if (old && nretired_hits < sizeof(retired_hits) / sizeof(retired_hits[0]))
		retired_hits[nretired_hits++] = old;	/* see retired_hits */
	/* (Past that many image loads, the oldest arrays leak.) */
}

/* Add each pattern of GLOBS with SET; how many matched something. */
static int add_patterns(struct mcloc_ops *ops, const char *globs,
			int (*set)(struct mcloc_ops *, const char *, int))
{
	char buf[sizeof(cur_filter)], *save = NULL;
	int ok = 0;

	snprintf(buf, sizeof(buf), "%s", globs);
	for (char *p = strtok_r(buf, ", \t\n", &save); p; p = strtok_r(NULL, ", \t\n", &save))
		ok += set(ops, p, 0) >= 0;
	return ok;
}

/* (Re)register the tracer's ops over every image known now. */
static int arm(void)
{
	if (started) {
		mcloc_unregister_ops(&tracer_ops);
		mcloc_ops_free(&tracer_ops);
		started = false;
	}
	/* The profile needs the stack pointer to time calls: registers. */
	tracer_ops = (struct mcloc_ops){ .func = kind == FUNCTION ? function_cb : profile_cb,
					 .flags = kind == PROFILE ? MCLOC_OPS_SAVE_REGS : 0 };
	/* Pattern by pattern: one may match only in a library loaded later.
	 * A filter none of whose patterns matches yet traces nothing (an
	 * empty filter would mean everything). */
	if (cur_filter[0] && add_patterns(&tracer_ops, cur_filter, mcloc_set_filter) == 0)
		return 0;
	if (cur_notrace[0])
		add_patterns(&tracer_ops, cur_notrace, mcloc_set_notrace);
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
	if (active) {
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
	active = ret == 0;
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

/* Start (or extend to a newly loaded image) the tracer MCLOC_TRACER asks
 * for: core calls it after every image registration. */
static void env_tracer_kick(void)
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
	if (from_env && active)
		arm();
	pthread_mutex_unlock(&api_lock);
}

__attribute__((constructor(101))) static void tracer_hook(void)
{
	mcr_hooks.image_added = env_tracer_kick;
}
