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
 *   MCLOC_OUTPUT=path      where (default: standard error); %p in it is
 *                          the process's pid, so that each process of a
 *                          pipeline keeps its own (a forked child's:
 *                          child_output())
 *
 * A value that cannot work (an unknown tracer, an output that cannot be
 * opened, a filter pattern that never matched a traced function) gets one
 * "libmcloc:" line on standard error.  Every output starts with the pid
 * and command it belongs to.
 *
 * Lines go to a buffer per thread, written out whole when it fills, when
 * the thread exits and at process exit: no lock and no system call per
 * call (the thread id is read once per thread; sched_getcpu and
 * clock_gettime read the vDSO and rseq).  A caller outside every traced
 * image is named when its line is written out, not in the callback,
 * which must not take the dynamic loader's lock (dladdr() does, and an
 * image's constructor holds it); a line written from a callback (its
 * buffer full) names it from the symbols read already, else by address.
 * A callback may run in a signal handler, even a thread's first: the
 * buffer comes from mmap(), the line is formatted by hand (fmt_*), and
 * nothing on that path takes a lock or calls malloc.  A process killed
 * by a signal whose default action ends it (SIGINT, SIGTERM, SIGSEGV...)
 * writes out what it recorded first, where the program left that signal
 * alone.
 *
 * The profile times a function by hooking its return, as the kernel's
 * function-graph tracer does (timing.c).  The time is inclusive (callees
 * count), as ftrace's function profiler shows it.  A call left by a
 * longjmp or an exception is counted, not timed, and so are calls
 * through mcount sites after a prologue.
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"
#include "timing.h"
#include "rcu.h"
#include "../arch/runtime.h"
#include "tracer.h"
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TBUF_SIZE (64 << 10)

struct tbuf {
	size_t len;
	atomic_int busy;		/* the owner is writing; exit waits */
	atomic_int free;		/* its thread exited: the next new one takes it */
	struct tbuf *next;
	long tid;
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
/* The output MCLOC_OUTPUT named: as given (empty: none, or the caller's
 * descriptor), whether it had a %p, and the path it named; what a
 * fork()ed child derives its own from. */
struct output_name {
	char name[1024], path[4096];
	bool per_pid;
};
static struct output_name out_named;
/* A process forked while the tracer ran shares this output with it: the
 * profile's table says whose it is. */
static bool out_shared;
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcloc_ops tracer_ops;
static pthread_key_t tkey;
static struct tbuf *all_bufs;	/* every buffer made, pushed with compare-and-swap */
static __thread struct tbuf *mybuf __attribute__((tls_model("initial-exec")));

/* profile: calls and time per function name */
struct hit {
	const char *name;
	atomic_ulong n;
	atomic_ulong timed, ns;		/* calls timed, and their total time (in
					 * stamp() units until written) */
};
/* The counters, by name; each stays where it is for the profile's life,
 * so that callbacks and returns add to it while a new image extends the
 * table (HITS then NHITS are published: a signal handler reads them). */
static struct hit **hits;
static size_t nhits;
/* Each site's hit, by the site's address (open addressing): one multiply
 * and, mostly, one cache line per call, where a search by name cost a
 * lookup of the site's record and a dozen string compares. */
struct site_hit {
	uintptr_t site;			/* 0: empty */
	struct hit *hit;
};
struct site_table {
	size_t mask;
	struct site_hit slot[];
};
static struct site_table *site_tab;
/* Counters that timed calls may still return into: kept, never freed, so
 * that a late return adds to memory that is still there (and is ignored,
 * its generation being old).  (The tables and indexes that find them are
 * read in read-side sections only, and freed a grace period after they
 * are replaced: drop().) */
static void *retired[64];
static size_t nretired;
static atomic_uint hits_gen;

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

/* ---- formatting by hand: what a signal handler may do ---------------- */

struct fmt {
	char *p;
	size_t len, cap;	/* one byte kept for a NUL */
};

static void fmt_chars(struct fmt *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n && f->len + 1 < f->cap; i++)
		f->p[f->len++] = s[i];
	f->p[f->len] = 0;
}

static void fmt_pad(struct fmt *f, size_t n)
{
	while (n--)
		fmt_chars(f, " ", 1);
}

/* S in WIDTH columns, right-aligned unless LEFT. */
static void fmt_str(struct fmt *f, const char *s, size_t width, bool left)
{
	size_t n = strlen(s);

	if (!left && n < width)
		fmt_pad(f, width - n);
	fmt_chars(f, s, n);
	if (left && n < width)
		fmt_pad(f, width - n);
}

/* V in decimal, in WIDTH columns: right-aligned, with zeros if ZERO, or
 * left-aligned if LEFT. */
static void fmt_num(struct fmt *f, unsigned long v, size_t width, bool zero, bool left)
{
	char d[24];
	size_t n = 0;

	do
		d[sizeof(d) - ++n] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof(d));
	for (; !left && n < width; width--)
		fmt_chars(f, zero ? "0" : " ", 1);
	fmt_chars(f, d + sizeof(d) - n, n);
	if (left && n < width)
		fmt_pad(f, width - n);
}

static void fmt_hex(struct fmt *f, unsigned long v)
{
	char d[2 + 16];
	size_t n = 0;

	do
		d[sizeof(d) - ++n] = "0123456789abcdef"[v & 15];
	while ((v >>= 4) && n < 16);
	d[sizeof(d) - ++n] = 'x';
	d[sizeof(d) - ++n] = '0';
	fmt_chars(f, d + sizeof(d) - n, n);
}

/* A caller outside every traced image, in a buffered line: this byte,
 * then its address in 16 hex digits, named when the line is written. */
#define CALLER_MARK '\001'
#define CALLER_LEN 17
#define CALLER_NAME_MAX 400

/* The address a mark at P holds. */
static uintptr_t mark_addr(const char *p)
{
	uintptr_t a = 0;

	for (int i = 1; i < CALLER_LEN; i++)
		a = a << 4 | (uintptr_t)(p[i] <= '9' ? p[i] - '0' : p[i] - 'a' + 10);
	return a;
}

/* The caller whose call returns to A into F, by name where known: read
 * now if MAY_READ (not in a callback, nor a signal handler), else only
 * from what was read already.  Named by A - 1, in the call: the call of
 * a function that never returns may be its caller's last instruction,
 * and A then lies in the function after it. */
static void put_caller(struct fmt *f, uintptr_t a, bool may_read)
{
	const char *name = !a ? NULL : may_read ? mcr_symbolize(a - 1, NULL)
						: mcr_symbolize_known(a - 1, NULL);

	if (name)
		fmt_chars(f, name, strnlen(name, CALLER_NAME_MAX));
	else
		fmt_hex(f, a);
}

/* B's lines, their callers named (put_caller()), written whole in
 * chunks: other threads write theirs meanwhile. */
static void flush(struct tbuf *b, bool may_read)
{
	char out[4096];
	struct fmt f = { out, 0, sizeof(out) };
	const char *p = b->data, *end = b->data + b->len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl + 1 - p) : (size_t)(end - p);
		const char *m = memchr(p, CALLER_MARK, n);

		if (f.len + n + CALLER_NAME_MAX + 1 >= f.cap) {
			write_all(out, f.len);
			f.len = 0;
		}
		if (m && p + n - m >= CALLER_LEN && n + CALLER_NAME_MAX + 1 < f.cap) {
			fmt_chars(&f, p, (size_t)(m - p));
			put_caller(&f, mark_addr(m), may_read);
			fmt_chars(&f, m + CALLER_LEN, (size_t)(p + n - m - CALLER_LEN));
		} else if (n + CALLER_NAME_MAX + 1 < f.cap) {
			fmt_chars(&f, p, n);
		} else {
			write_all(p, n);	/* (a line longer than a chunk) */
		}
		p += n;
	}
	write_all(out, f.len);
	b->len = 0;
}

/* A thread exits: its lines out, its buffer for the next new thread. */
static void thread_gone(void *p)
{
	struct tbuf *b = p;

	atomic_store(&b->busy, 1);
	flush(b, true);
	atomic_store(&b->busy, 0);
	atomic_store(&b->free, 1);
}

/*
 * The thread's buffer, on its first call: one an exited thread gave back,
 * else a fresh mapping pushed on the list.  Only atomics and system calls
 * (mmap, gettid, prctl): the first call may be in a signal handler, which
 * may have interrupted malloc() or a lock holder.  (pthread_setspecific
 * with a key made at start-up only stores into the thread, as rcu.c
 * relies on too.)
 */
static struct tbuf *get_buf(void)
{
	struct tbuf *b = mybuf;

	if (b)
		return b;
	for (b = __atomic_load_n(&all_bufs, __ATOMIC_ACQUIRE); b; b = b->next) {
		int was = 1;

		if (atomic_load_explicit(&b->free, memory_order_relaxed) &&
		    atomic_compare_exchange_strong(&b->free, &was, 0))
			break;
	}
	if (!b) {
		b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (b == MAP_FAILED)
			return NULL;
		b->next = __atomic_load_n(&all_bufs, __ATOMIC_RELAXED);
		while (!__atomic_compare_exchange_n(&all_bufs, &b->next, b, true,
						    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	}
	b->len = 0;
	b->tid = (long)syscall(SYS_gettid);
	memset(b->comm, 0, sizeof(b->comm));
	prctl(PR_GET_NAME, b->comm);	/* (this thread's name: 16 bytes) */
	pthread_setspecific(tkey, b);
	mybuf = b;
	return b;
}

/* The line of a call into B: ftrace's "%16s-%-7ld [%03d] %5ld.%06ld: %s <-%s". */
static void put_line(struct tbuf *b, const struct timespec *ts, const char *fn, const char *pn,
		     uintptr_t parent)
{
	struct fmt f = { b->data + b->len, 0, TBUF_SIZE - b->len };
	int cpu = sched_getcpu();

	fmt_str(&f, b->comm, 16, false);
	fmt_chars(&f, "-", 1);
	fmt_num(&f, (unsigned long)b->tid, 7, false, true);
	fmt_chars(&f, " [", 2);
	fmt_num(&f, cpu > 0 ? (unsigned long)cpu : 0, 3, true, false);
	fmt_chars(&f, "] ", 2);
	fmt_num(&f, (unsigned long)ts->tv_sec, 5, false, false);
	fmt_chars(&f, ".", 1);
	fmt_num(&f, (unsigned long)ts->tv_nsec / 1000, 6, true, false);
	fmt_chars(&f, ": ", 2);
	fmt_str(&f, fn ? fn : "?", 0, false);
	fmt_chars(&f, " <-", 3);
	if (pn) {
		fmt_str(&f, pn, 0, false);
	} else {
		char mark[CALLER_LEN];

		mark[0] = CALLER_MARK;
		for (int i = 1; i < CALLER_LEN; i++)
			mark[i] = "0123456789abcdef"[(uint64_t)parent >> (4 * (CALLER_LEN - 1 - i)) & 15];
		fmt_chars(&f, mark, CALLER_LEN);
	}
	fmt_chars(&f, "\n", 1);
	b->len += f.len;
}

static void function_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
			struct mcloc_regs *regs)
{
	struct tbuf *b = get_buf();
	struct timespec ts;
	/* (Lookups without a lock: the traced images' own symbols.) */
	const char *fn = mcloc_site_name(ip);
	const char *pn = parent ? mcloc_addr_name(parent - 1, NULL) : NULL;	/* (put_caller()) */

	(void)ops;
	(void)regs;
	if (!b)
		return;
	atomic_store(&b->busy, 1);
	if (b->len > TBUF_SIZE - 512)
		flush(b, false);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	put_line(b, &ts, fn, pn, parent);
	atomic_store(&b->busy, 0);
}

static size_t site_hash(uintptr_t site, size_t mask)
{
	return (size_t)(((uint64_t)site * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

static struct hit *site_hit(uintptr_t site)
{
	const struct site_table *t = __atomic_load_n(&site_tab, __ATOMIC_ACQUIRE);

	if (!t)
		return NULL;
	for (size_t i = site_hash(site, t->mask);; i = (i + 1) & t->mask) {
		if (t->slot[i].site == site)
			return t->slot[i].hit;
		if (!t->slot[i].site)
			return NULL;
	}
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The profile's times are in mcr_stamp() units (timing.c), converted to
 * nanoseconds when it is written, by the rate measured over the whole
 * profile: CLOCK_MONOTONIC and stamps at its start and end.
 */
static uint64_t span_ns, span_stamp;	/* at the profile's start */

static void stamp_start(void)
{
	span_ns = now_ns();
	span_stamp = mcr_stamp();
}

/* Nanoseconds per stamp, as NUM / DEN, measured up to now (what a signal
 * handler may call: clock_gettime is async-signal-safe). */
struct rate {
	uint64_t num, den;
};
static struct rate stamp_rate(void)
{
	uint64_t t = now_ns(), k = mcr_stamp();

	if (!mcr_stamp_is_tick() || t <= span_ns || k <= span_stamp)
		return (struct rate){ 1, 1 };
	return (struct rate){ t - span_ns, k - span_stamp };
}

static uint64_t to_ns(uint64_t v, struct rate r)
{
	return (uint64_t)((unsigned __int128)v * r.num / r.den);
}

/* A timed call of the profile returned (at T1), or was left by a longjmp
 * or an exception (not timed). */
static void profile_done(uintptr_t ip, void *arg, unsigned gen, uint64_t t0, uint64_t t1,
			 unsigned depth, const struct mcr_retregs *rr)
{
	struct hit *h = arg;

	(void)ip;
	(void)depth;
	if (!rr || gen != atomic_load_explicit(&hits_gen, memory_order_relaxed))
		return;		/* (an old profile's: its array is retired) */
	atomic_fetch_add_explicit(&h->timed, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->ns, t1 - t0, memory_order_relaxed);
}

static void profile_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
		       struct mcloc_regs *regs)
{
	struct hit *h = site_hit(ip);

	(void)ops;
	if (!h)
		return;
	atomic_fetch_add_explicit(&h->n, 1, memory_order_relaxed);
	/* (Counted even where it cannot be timed.) */
	mcr_hook_call(regs, ip, parent, profile_done, h,
		      atomic_load_explicit(&hits_gen, memory_order_relaxed), mcr_stamp());
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

/* The first lines of an output: whose it is, and (function) ftrace's
 * column header. */
static void write_header(void)
{
	char comm[20], line[400];
	int n;

	mcr_comm(comm, sizeof(comm));
	if (kind == FUNCTION)
		n = snprintf(line, sizeof(line), "# tracer: function\n# pid %ld (%s)\n#\n"
			     "#            TASK-PID     CPU#     TIMESTAMP  FUNCTION\n"
			     "#               | |         |          |         |\n",
			     (long)getpid(), comm);
	else
		n = snprintf(line, sizeof(line), "# tracer: profile\n# pid %ld (%s)\n",
			     (long)getpid(), comm);
	write_all(line, (size_t)n);
}

/* The profile's table, most time first. */
static void write_profile(void)
{
	char line[512];

	/* Sorted in a copy: a timed call still running in another thread
	 * adds to the array it started with. */
	struct hit *v = malloc((nhits + 1) * sizeof(*v));
	struct rate r = stamp_rate();
	if (!v)
		return;
	for (size_t i = 0; i < nhits; i++) {
		v[i].name = hits[i]->name;
		atomic_init(&v[i].n, atomic_load(&hits[i]->n));
		atomic_init(&v[i].timed, atomic_load(&hits[i]->timed));
		atomic_init(&v[i].ns, to_ns(atomic_load(&hits[i]->ns), r));
	}
	qsort(v, nhits, sizeof(*v), cmp_hits);
	int n;
	if (out_shared) {	/* (whose table this is, among the others) */
		char comm[20];

		mcr_comm(comm, sizeof(comm));
		n = snprintf(line, sizeof(line), "# pid %ld (%s)\n", (long)getpid(), comm);
		write_all(line, (size_t)n);
	}
	n = snprintf(line, sizeof(line), "%-40s %12s %14s %12s\n", "Function", "Hit", "Time (us)",
		     "Avg (us)");
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
}

static void retire(void *p)
{
	/* (Past that many profiles or loads with new names, they leak.) */
	if (p && nretired < sizeof(retired) / sizeof(retired[0]))
		retired[nretired++] = p;
}

/* P, a table or index that callbacks or the fatal signal's flush may be
 * reading, freed once none can be (leaked if that cannot be queued: this
 * may run under the loader's lock, which must not wait). */
static void drop(void *p)
{
	if (p && mcr_defer(free, p))
		mcr_say(1, "a profile's table is leaked: no memory to retire it");
}

/* Set once the output is written: a fatal signal during exit, or exit
 * from inside a signal's flush, writes nothing twice. */
static atomic_bool written;
/* A tracer from the environment, and which of its filter's patterns ever
 * matched a traced function (bit i: the i-th pattern). */
static bool from_env, ever_armed;
static uint64_t patterns_matched;

/* Stop the tracer and write out what it holds. */
static void finish(void)
{
	bool was_active = active;

	active = false;
	if (was_active && from_env && cur_filter[0]) {
		char buf[sizeof(cur_filter)], *save = NULL;
		unsigned i = 0;

		snprintf(buf, sizeof(buf), "%s", cur_filter);
		for (char *p = strtok_r(buf, ", \t\n", &save); p;
		     p = strtok_r(NULL, ", \t\n", &save), i++)
			if (i < 64 && !(patterns_matched >> i & 1))
				mcr_warn("MCLOC_FILTER: '%s' matched no traced function%s", p,
					 ever_armed ? "" : "; nothing was traced");
	}
	if (!started)
		return;
	mcloc_unregister_ops(&tracer_ops);
	mcloc_ops_free(&tracer_ops);
	started = false;
	if (atomic_exchange(&written, true))
		return;
	if (kind == FUNCTION) {
		for (struct tbuf *b = __atomic_load_n(&all_bufs, __ATOMIC_ACQUIRE); b; b = b->next) {
			while (atomic_load(&b->busy))
				sched_yield();
			flush(b, true);
		}
	} else if (kind == PROFILE) {
		write_profile();
		/* A later start counts afresh; returns still in flight add to
		 * the retired counters, if anything (their generation is old). */
		atomic_fetch_add(&hits_gen, 1);
		__atomic_store_n(&nhits, 0, __ATOMIC_RELEASE);
		drop(hits);
		drop(site_tab);
		__atomic_store_n(&site_tab, NULL, __ATOMIC_RELEASE);
		hits = NULL;
	}
}

static void at_exit(void)
{
	pthread_mutex_lock(&api_lock);
	finish();
	pthread_mutex_unlock(&api_lock);
}

/* ---- a fatal signal ----------------------------------------------------
 *
 * What was recorded is written before the process dies, for the signals
 * whose default action ends it and which the program has not taken over.
 * Only what a signal handler may do: write(2) from memory as it is, with
 * no lock, no allocation and no floating point: another thread may be
 * half-way through a line (its buffer is written as far as it got), and
 * the profile is written unsorted, in microseconds. */

static const int fatal_signals[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
				     SIGPIPE, SIGALRM, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

/* One profile line of H as the fatal signal's flush writes it: unsorted,
 * in microseconds to the nanosecond, by hand (fmt_*). */
static void write_fatal_hit(const struct hit *h, struct rate rt)
{
	char line[256];
	struct fmt f = { line, 0, sizeof(line) };
	unsigned long c = atomic_load(&h->n), t = atomic_load(&h->timed);
	unsigned long ns = to_ns(atomic_load(&h->ns), rt);

	if (!c)
		return;
	fmt_str(&f, h->name, 40, true);
	fmt_chars(&f, " ", 1);
	fmt_num(&f, c, 12, false, false);
	fmt_chars(&f, " ", 1);
	if (t) {
		fmt_num(&f, ns / 1000000, 10, false, false);
		fmt_chars(&f, ".", 1);
		fmt_num(&f, ns / 1000 % 1000, 3, true, false);
		fmt_chars(&f, " ", 1);
		fmt_num(&f, ns / t / 1000, 8, false, false);
		fmt_chars(&f, ".", 1);
		fmt_num(&f, ns / t % 1000, 3, true, false);
	} else {
		fmt_str(&f, "-", 14, false);
		fmt_chars(&f, " ", 1);
		fmt_str(&f, "-", 12, false);
	}
	fmt_chars(&f, "\n", 1);
	write_all(line, f.len);
}

static void on_fatal_signal(int sig)
{
	int saved = errno;

	if (!atomic_exchange(&written, true)) {
		mcr_read_lock();	/* (the index stays while it is read) */
		size_t n = __atomic_load_n(&nhits, __ATOMIC_ACQUIRE);
		struct hit **v = hits;

		if (kind == FUNCTION) {
			for (struct tbuf *b = __atomic_load_n(&all_bufs, __ATOMIC_ACQUIRE); b;
			     b = b->next)
				flush(b, false);
		} else if (kind == PROFILE && v) {
			struct rate rt = stamp_rate();
			char line[256];
			struct fmt f = { line, 0, sizeof(line) };

			fmt_str(&f, "# killed by signal ", 0, false);
			fmt_num(&f, (unsigned long)sig, 0, false, false);
			fmt_str(&f, ": unsorted\n", 0, false);
			fmt_str(&f, "Function", 40, true);
			fmt_str(&f, "Hit", 13, false);
			fmt_str(&f, "Time (us)", 15, false);
			fmt_str(&f, "Avg (us)", 13, false);
			fmt_chars(&f, "\n", 1);
			write_all(line, f.len);
			for (size_t i = 0; i < n; i++)
				write_fatal_hit(v[i], rt);
		}
		mcr_read_unlock();
	}
	/* Die of it as the program would have. */
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig);
}

static void catch_fatal_signals(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
		struct sigaction old, sa = { .sa_handler = on_fatal_signal,
					     .sa_flags = SA_RESETHAND | SA_NODEFER };

		if (sigaction(fatal_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
		    !(old.sa_flags & SA_SIGINFO))
			sigaction(fatal_signals[i], &sa, NULL);
	}
}

/* ---- the profile's counters ------------------------------------------- */

/* Every named site, as mcr_each_site_name() gives them. */
struct named {
	struct named_site {
		uintptr_t site;
		const char *name;
	} *v;
	size_t n, cap;
};

static void add_named(uintptr_t site, const char *name, uint32_t state, void *arg)
{
	struct named *ns = arg;

	(void)state;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 1024;
		struct named_site *v = realloc(ns->v, cap * sizeof(*v));

		if (!v)
			return;
		ns->v = v;
		ns->cap = cap;
	}
	ns->v[ns->n++] = (struct named_site){ site, name };
}

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named_site *)a)->name, ((const struct named_site *)b)->name);
}

/* The counter named NAME in V (N of them, by name), or NULL. */
static struct hit *hit_named(struct hit **v, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(v[mid]->name, name);

		if (!c)
			return v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The table that finds each site's counter, from NS. */
static struct site_table *site_table(const struct named *ns, struct hit **v, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * ns->n)
		cap *= 2;
	struct site_table *t = calloc(1, sizeof(*t) + cap * sizeof(t->slot[0]));
	if (!t)
		return NULL;
	t->mask = cap - 1;
	for (size_t k = 0; k < ns->n; k++) {
		struct hit *h = hit_named(v, n, ns->v[k].name);
		size_t i = site_hash(ns->v[k].site, t->mask);

		while (t->slot[i].site && t->slot[i].site != ns->v[k].site)
			i = (i + 1) & t->mask;
		t->slot[i] = (struct site_hit){ ns->v[k].site, h };
	}
	return t;
}

/*
 * The profile's counters, one per traced function name, and the table of
 * sites that finds them.  A counter that exists already stays where it
 * is: a new image extends the profile while its callbacks run (under the
 * loader's lock, where the ops cannot leave for a grace period), so the
 * old table and index are retired, never the counters.
 */
static void build_hits(void)
{
	struct named ns = { 0 };

	mcr_each_site_name(add_named, &ns);
	if (ns.n)
		qsort(ns.v, ns.n, sizeof(*ns.v), cmp_named);
	struct hit **v = malloc((ns.n + 1) * sizeof(*v));
	struct hit *fresh = calloc(ns.n + 1, sizeof(*fresh));
	size_t n = 0, nfresh = 0;

	if (!v || !fresh) {
		free(v);
		free(fresh);
		free(ns.v);
		return;
	}
	for (size_t k = 0; k < ns.n; k++) {
		if (n && !strcmp(v[n - 1]->name, ns.v[k].name))
			continue;
		struct hit *h = hit_named(hits, nhits, ns.v[k].name);

		if (!h) {
			h = &fresh[nfresh++];
			h->name = ns.v[k].name;
		}
		v[n++] = h;
	}
	struct site_table *t = site_table(&ns, v, n);

	free(ns.v);
	retire(nfresh ? fresh : NULL);	/* see retired (and the counters' life) */
	if (!nfresh)
		free(fresh);
	drop(hits);
	__atomic_store_n(&hits, v, __ATOMIC_RELEASE);
	__atomic_store_n(&nhits, n, __ATOMIC_RELEASE);
	drop(site_tab);
	__atomic_store_n(&site_tab, t, __ATOMIC_RELEASE);
}

/* (Re)register the tracer's ops over every image known now. */
static int arm(void)
{
	if (started) {
		mcloc_unregister_ops(&tracer_ops);
		mcloc_ops_free(&tracer_ops);
		started = false;
	}
	/* The profile hooks returns: registers where the ISA needs them. */
	tracer_ops = (struct mcloc_ops){ .func = kind == FUNCTION ? function_cb : profile_cb,
					 .flags = kind == PROFILE ? MCR_HOOK_OPS_FLAGS : 0 };
	/* Pattern by pattern: one may match only in a library loaded later.
	 * A filter none of whose patterns matches yet traces nothing (an
	 * empty filter would mean everything). */
	if (cur_filter[0] &&
	    mcr_add_patterns(&tracer_ops, cur_filter, false, &patterns_matched) == 0)
		return 0;
	if (cur_notrace[0])
		mcr_add_patterns(&tracer_ops, cur_notrace, true, NULL);
	if (kind == PROFILE)
		build_hits();
	int ret = mcloc_register_ops(&tracer_ops);
	started = ret == 0;
	ever_armed |= started;
	return ret;
}

/*
 * A new image was published, its sites not yet covered (ops.c covers
 * them after this, for every registered ops): the running tracer's
 * patterns are applied to its functions too, and the profile gets their
 * counters.  This runs under the dynamic loader's lock, while callbacks
 * run: nothing here waits for them.  A tracer not registered yet (its
 * filter matched nothing before) registers, which does not wait either.
 */
static void extend(void)
{
	if (!started) {
		arm();
		return;
	}
	if (cur_filter[0])
		mcr_add_patterns(&tracer_ops, cur_filter, false, &patterns_matched);
	if (cur_notrace[0])
		mcr_add_patterns(&tracer_ops, cur_notrace, true, NULL);
	if (kind == PROFILE)
		build_hits();
}

static bool at_exit_set;

/* mcloc_tracer_start(), writing to FD, which NAMED names (NULL: the
 * caller's own descriptor). */
static int start(const char *which, const char *filter, const char *notrace, int fd,
		 const struct output_name *named)
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
	if (named)
		out_named = *named;
	else
		out_named.name[0] = 0, out_named.per_pid = false;
	out_shared = false;
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
	patterns_matched = 0;
	ever_armed = false;
	atomic_store(&written, false);
	if (kind == PROFILE)
		stamp_start();	/* (and mcr_stamp() decides its clock) */
	else
		mcr_symbolize_all();	/* (what names callers from a full buffer) */
	write_header();
	ret = arm();
	active = ret == 0;
	if (active)
		catch_fatal_signals();
out:
	pthread_mutex_unlock(&api_lock);
	return ret;
}

int mcloc_tracer_start(const char *which, const char *filter, const char *notrace, int fd)
{
	return start(which, filter, notrace, fd, NULL);
}

const char *mcr_tracer_name(void)
{
	return !active ? "nop" : kind == FUNCTION ? "function" : "profile";
}

void mcloc_tracer_stop(void)
{
	pthread_mutex_lock(&api_lock);
	finish();
	pthread_mutex_unlock(&api_lock);
}

/* MCLOC_OUTPUT with each %p made the pid (%% a %): PATH, or NULL when
 * it does not fit.  *PER_PID: whether it had a %p. */
static char *output_path(const char *o, char *path, size_t len, bool *per_pid)
{
	size_t n = 0;

	*per_pid = false;
	for (; *o; o++) {
		char num[24];
		const char *add = num;

		if (o[0] == '%' && o[1] == 'p') {
			snprintf(num, sizeof(num), "%ld", (long)getpid());
			*per_pid = true;
			o++;
		} else if (o[0] == '%' && o[1] == '%') {
			num[0] = '%', num[1] = 0;
			o++;
		} else {
			num[0] = *o, num[1] = 0;
		}
		size_t k = strlen(add);
		if (n + k >= len)
			return NULL;
		memcpy(path + n, add, k);
		n += k;
	}
	path[n] = 0;
	return path;
}

static int open_output(const char *path)
{
	return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
}

/*
 * A fork()ed child's output, which must be its own: where MCLOC_OUTPUT has
 * a %p, the file it names for the child's pid; else, where it names a
 * regular file (not a device, a pipe or a link), that name and ".PID", as
 * strace -ff names each process's file.  Otherwise (standard error, a
 * device, the descriptor mcloc_tracer_start() was given) the parent's,
 * shared.  Either way the child's output starts with its own header, as
 * any process's does.
 */
static bool child_shares(void)
{
	struct stat named, opened;

	return !out_named.per_pid &&
	       (!out_named.name[0] || lstat(out_named.path, &named) || !S_ISREG(named.st_mode) ||
		fstat(out_fd, &opened) || named.st_ino != opened.st_ino ||
		named.st_dev != opened.st_dev);
}

static int child_path(char *path, size_t len)
{
	bool per_pid;

	if (out_named.per_pid)
		return output_path(out_named.name, path, len, &per_pid) ? 0 : -ENAMETOOLONG;
	if (child_shares())
		return -ENOENT;
	return snprintf(path, len, "%s.%ld", out_named.path, (long)getpid()) < (int)len ? 0
										   : -ENAMETOOLONG;
}

/*
 * The child's NAME.PID, which anyone who may write the directory could
 * have made first (the name is easy to guess): made anew and never
 * through a link; a file already there is reused only if it is this
 * user's own regular file (one an earlier process of this pid left).
 */
static int open_derived(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
	struct stat st;

	if (fd >= 0 || errno != EEXIST)
		return fd;
	fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    ftruncate(fd, 0)) {
		close(fd);
		errno = EEXIST;
		return -1;
	}
	return fd;
}

static void child_output(void)
{
	char path[sizeof(out_named.path) + 24];
	int ret = child_path(path, sizeof(path));
	int fd = ret ? -1 : out_named.per_pid ? open_output(path) : open_derived(path);

	out_shared = fd < 0;
	if (fd < 0 && ret != -ENOENT)
		mcr_warn("MCLOC_OUTPUT: %.256s: %s; pid %ld writes to its parent's output",
			 ret ? out_named.name : path, strerror(ret ? -ret : errno), (long)getpid());
	if (fd >= 0) {
		close(out_fd);
		out_fd = fd;
		/* (Its own children's are named after its file.) */
		if (!out_named.per_pid && strlen(path) < sizeof(out_named.path))
			memcpy(out_named.path, path, strlen(path) + 1);
		else if (!out_named.per_pid)
			out_named.name[0] = 0;
	}
	write_header();
}

/*
 * fork() (fork.c), api_lock's part: a tracer that runs goes on in the
 * child (its ops stays registered), into the child's own output
 * (child_output()), counting from zero: what the parent counted is the
 * parent's to write.  A call timed across the fork is the parent's too:
 * the new generation drops its return.
 */
void mcr_tracer_fork(enum mcr_fork stage)
{
	if (stage == MCR_FORK_PARENT && active && child_shares())
		out_shared = true;
	if (stage == MCR_FORK_CHILD && active) {
		atomic_store(&written, false);
		if (kind == PROFILE && hits) {
			atomic_fetch_add(&hits_gen, 1);
			for (size_t i = 0; i < nhits; i++) {
				atomic_store(&hits[i]->n, 0);
				atomic_store(&hits[i]->timed, 0);
				atomic_store(&hits[i]->ns, 0);
			}
			stamp_start();
		}
		child_output();
	}
	mcr_fork_lock(&api_lock, stage);
}

/* fork() (fork.c), the buffers' part: the child's one thread has an id
 * of its own, and the buffered lines it inherited are its parent's to
 * write.  The list takes no lock (a callback pushes onto it), so there is
 * nothing to hold across the fork: every buffer is just free again. */
void mcr_tracer_bufs_fork(enum mcr_fork stage)
{
	if (stage != MCR_FORK_CHILD)
		return;
	for (struct tbuf *b = all_bufs; b; b = b->next) {
		b->len = 0;
		atomic_store(&b->busy, 0);
		atomic_store(&b->free, 1);
	}
	if (mybuf && key_made)
		pthread_setspecific(tkey, NULL);
	mybuf = NULL;
}

/* Start (or extend to a newly loaded image) the tracer MCLOC_TRACER asks
 * for: registry.c calls it after every image registration. */
static void env_tracer_kick(void)
{
	static bool read_env;

	if (!read_env) {
		read_env = true;
		const char *t = secure_getenv("MCLOC_TRACER");
		const char *o = secure_getenv("MCLOC_OUTPUT");
		struct output_name named = { .per_pid = false };

		if (!t || !*t)
			return;
		if (strcmp(t, "function") && strcmp(t, "profile")) {
			mcr_warn("MCLOC_TRACER=%.64s: no such tracer (function, profile); not "
				 "tracing", t);
			return;
		}
		int fd = 2;
		if (o && *o) {
			if (strlen(o) >= sizeof(named.name) ||
			    !output_path(o, named.path, sizeof(named.path), &named.per_pid)) {
				mcr_warn("MCLOC_OUTPUT: too long; not tracing");
				return;
			}
			fd = open_output(named.path);
			if (fd < 0) {
				mcr_warn("MCLOC_OUTPUT=%.256s: %s; not tracing", named.path,
					 strerror(errno));
				return;
			}
			memcpy(named.name, o, strlen(o) + 1);
		}
		from_env = true;
		int ret = start(t, secure_getenv("MCLOC_FILTER"), secure_getenv("MCLOC_NOTRACE"), fd,
				&named);
		if (ret)
			mcr_warn("MCLOC_TRACER=%s: %s; not tracing", t, strerror(-ret));
		from_env = ret == 0;
		if (fd != 2)
			close(fd);
		return;
	}
	/* A new image: extend the tracer started from the environment (not
	 * when the image registers from inside a start, which covers it). */
	if (pthread_mutex_trylock(&api_lock))
		return;
	if (from_env && active)
		extend();
	pthread_mutex_unlock(&api_lock);
}

__attribute__((constructor(101))) static void tracer_hook(void)
{
	mcr_hooks.image_added = env_tracer_kick;
}
