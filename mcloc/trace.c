// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mcloc trace: start a tracer in a running program and stream what it
 * records, as `cat trace_pipe` does, until Ctrl-C or --duration; then stop
 * it, which leaves every site a NOP again.
 *
 * The program writes binary events into per-thread rings in shared memory
 * (<mcloc/control.h>); this side maps them, reads them every READ_MS,
 * merges them by time and formats them: ftrace's function and
 * function_graph text, JSON lines, the Chrome Trace Event format, or (for
 * profile, which runs function_graph underneath) a table per function
 * when it stops.  Names come from the program: the traced sites' names
 * once, then each caller address the first time it is seen.
 */
#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READ_MS 20

enum mode { FUNCTION, GRAPH, PROFILE };

struct name {
	uint64_t addr, off;
	char *name;		/* NULL: unknown */
};

struct names {
	struct name *v;
	size_t n, cap;
	bool sorted;
};

/* One thread's state for the formatting. */
#define STACK 256
struct thread {
	uint32_t tid;
	char comm[16];
	bool pending;			/* graph: an entry not printed yet */
	struct mcloc_event entry;	/* ... which */
	unsigned opened;		/* graph: "{" printed, "}" not yet */
	unsigned open;			/* chrome: begun, not ended */
	uint64_t last_ns;
	uint32_t cpu;			/* of its last event */
	/* profile: the calls the thread is inside, with the time their
	 * callees took */
	unsigned depth;
	struct open_call {
		uint64_t ip, child_ns;
	} stack[STACK];
};

struct hit {
	uint64_t ip, calls, total_ns, self_ns, untimed;
	uint32_t tid;		/* --per-thread: whose (else 0) */
};

enum sort_key { BY_TOTAL, BY_SELF, BY_CALLS, BY_AVG, BY_NAME };

struct tracing {
	enum mode mode;
	bool json;
	FILE *chrome;
	bool chrome_first;
	uint64_t threshold_ns;		/* graph: hide calls shorter */
	struct peer *p;
	/* The shared memory, which the program (or anyone posing as it) may
	 * write at any time: only data is read from it.  Its geometry was
	 * checked once and copied into g, which alone says where to read. */
	const struct mcloc_ring_hdr *h;
	size_t size;
	struct mcloc_ring_hdr g;
	uint64_t *tails;		/* each ring's read position: ours */
	uint64_t skipped;		/* events a head too far ahead skipped */
	struct names sites, callers;
	struct thread *threads;
	size_t nthreads;
	struct hit *hits;
	size_t nhits, cap_hits;
	size_t *hit_index;		/* open addressing: index + 1, or 0 */
	size_t index_mask;
	bool per_thread;
	enum sort_key sort;
	uint32_t last_tid;		/* graph: the thread of the last line */
	uint64_t events;
	uint64_t overwritten;		/* events the program wrote over unread */
	struct item *items;		/* drain()'s, kept: a new array per pass
					 * faulted its pages in every time */
	size_t cap_items;
	double rate;			/* ns per time unit */
	uint32_t pid;
};

static volatile sig_atomic_t stop_now;

static void on_stop(int sig)
{
	(void)sig;
	stop_now = 1;
}

/* ---- names ---------------------------------------------------------------- */

static struct name *name_add(struct names *ns, uint64_t addr)
{
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 256;
		struct name *v = realloc(ns->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		ns->v = v;
		ns->cap = cap;
	}
	ns->sorted = false;
	ns->v[ns->n] = (struct name){ .addr = addr };
	return &ns->v[ns->n++];
}

static int cmp_name(const void *a, const void *b)
{
	const struct name *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static struct name *name_find(struct names *ns, uint64_t addr)
{
	if (!ns->sorted) {
		if (ns->n)
			qsort(ns->v, ns->n, sizeof(*ns->v), cmp_name);
		ns->sorted = true;
	}
	size_t lo = 0, hi = ns->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ns->v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ns->n && ns->v[lo].addr == addr ? &ns->v[lo] : NULL;
}

/* Every site's name, asked before the trace starts (a short program may
 * be gone by the time its first events are read), and again when an
 * event names a site not known yet (an image loaded since). */
static void add_site_name(const struct mcloc_rep_site *s, const char *name, void *ctx)
{
	struct name *n = name_add(ctx, s->site);

	if (n)
		n->name = strdup(name);
}

static int load_sites(struct tracing *t)
{
	for (size_t i = 0; i < t->sites.n; i++)
		free(t->sites.v[i].name);
	t->sites.n = 0;
	return peer_sites(t->p, MCLOC_REQ_SITES, add_site_name, &t->sites);
}

/* Ask the program for the names of the callers in EV[0..N) not known yet. */
static void resolve_callers(struct tracing *t, const struct mcloc_event *ev, size_t n)
{
	uint64_t ask_v[(MCLOC_REQ_MAX - sizeof(struct mcloc_msg)) / 8];
	size_t k = 0;
	struct mcloc_msg m;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && ((ev[i].type & ~MCLOC_EV_LOST_BEFORE) == MCLOC_EV_CALL ||
			      (ev[i].type & ~MCLOC_EV_LOST_BEFORE) == MCLOC_EV_ENTRY) &&
		    !name_find(&t->callers, ev[i].parent)) {
			struct name *nm = name_add(&t->callers, ev[i].parent);

			if (nm)
				ask_v[k++] = ev[i].parent;
		}
		if (k && (k == sizeof(ask_v) / 8 || i == n)) {
			/* (Unanswered, as when the program has just exited,
			 * the callers print as addresses.) */
			bool quiet = t->p->quiet;

			t->p->quiet = true;
			int r = peer_send(t->p, MCLOC_REQ_ADDRS, ask_v, k * 8) < 0 ||
				peer_recv(t->p, &m) < 0 || m.type != MCLOC_REP_ADDRS;
			t->p->quiet = quiet;
			if (r)
				return;
			for (size_t at = sizeof(m); at + sizeof(struct mcloc_rep_addr) <= m.len;) {
				struct mcloc_rep_addr a;

				memcpy(&a, t->p->buf + at, sizeof(a));
				if (at + sizeof(a) + a.namelen + 1 > m.len)
					break;
				struct name *nm = name_find(&t->callers, a.addr);

				if (nm && a.namelen && !nm->name) {
					nm->name = strndup((const char *)t->p->buf + at + sizeof(a),
							   a.namelen);
					nm->off = a.off;
				}
				at += (sizeof(a) + a.namelen + 1 + 7) & ~(size_t)7;
			}
			k = 0;
		}
	}
}

/* ADDR's name in NS, or ADDR in hex in BUF. */
static const char *name_or_addr(struct names *ns, uint64_t addr, char *buf, size_t len)
{
	struct name *n = name_find(ns, addr);

	if (n && n->name)
		return n->name;
	snprintf(buf, len, "%#llx", (unsigned long long)addr);
	return buf;
}

static const char *site_name(struct tracing *t, uint64_t ip, char *buf, size_t len)
{
	return name_or_addr(&t->sites, ip, buf, len);
}

static const char *caller_name(struct tracing *t, uint64_t addr, char *buf, size_t len)
{
	return name_or_addr(&t->callers, addr, buf, len);
}

/* ---- the rings -------------------------------------------------------------- */

struct item {
	struct mcloc_event e;
	uint32_t tid;
	uint32_t seq;		/* order within its ring, for a stable sort */
};

static int cmp_item(const void *a, const void *b)
{
	const struct item *x = a, *y = b;

	if (x->e.time != y->e.time)
		return x->e.time < y->e.time ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Whether V needs no sort: one thread's events come in order. */
static bool in_order(const struct item *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (cmp_item(&v[i - 1], &v[i]) > 0)
			return false;
	return true;
}

static const struct mcloc_ring *ring(const struct tracing *t, uint32_t i)
{
	return (const struct mcloc_ring *)((const uint8_t *)t->h + t->g.data_offset +
					   (size_t)i * t->g.ring_stride);
}

/* The nanoseconds per time unit, from the program's latest clock pair; 0
 * when there is none yet, or none that makes sense (a clock pair is data:
 * a peer that keeps clock_seq odd gets a few tries, not a loop). */
static double clock_rate(const struct tracing *t)
{
	const struct mcloc_ring_hdr *h = t->h;
	uint64_t ns, tm;
	uint32_t s1, s2;
	int tries = 1000;

	if (!t->g.ticks)
		return 1;
	do {
		if (!tries--)
			return 0;
		s1 = __atomic_load_n(&h->clock_seq, __ATOMIC_ACQUIRE);
		ns = __atomic_load_n(&h->now_ns, __ATOMIC_RELAXED);
		tm = __atomic_load_n(&h->now_time, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&h->clock_seq, __ATOMIC_RELAXED);
	} while (s1 != s2 || (s1 & 1));
	if (tm <= t->g.start_time || ns <= t->g.start_ns)
		return 0;	/* (not measured yet) */
	double rate = (double)(ns - t->g.start_ns) / (double)(tm - t->g.start_time);

	return isfinite(rate) && rate > 0 && rate < 1e6 ? rate : 0;
}

/* V as a count of nanoseconds: saturated, as a double out of range has
 * no integer value. */
static uint64_t saturate(double v)
{
	return !(v > 0) ? 0 : v >= 0x1p64 ? UINT64_MAX : (uint64_t)v;
}

static uint64_t scaled(const struct tracing *t, uint64_t units)
{
	return saturate((double)units * t->rate);
}

static uint64_t to_ns(const struct tracing *t, uint64_t time)
{
	if (!t->g.ticks)
		return time;
	double d = (double)(int64_t)(time - t->g.start_time) * t->rate;

	return d < 0 ? t->g.start_ns - saturate(-d) : t->g.start_ns + saturate(d);
}

static struct thread *thread_of(struct tracing *t, uint32_t tid, uint32_t ringno)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return &t->threads[i];
	struct thread *v = realloc(t->threads, (t->nthreads + 1) * sizeof(*v));

	if (!v)
		return NULL;
	t->threads = v;
	struct thread *th = &v[t->nthreads++];

	memset(th, 0, sizeof(*th));
	th->tid = tid;
	if (ringno < t->g.rings)
		memcpy(th->comm, ring(t, ringno)->comm, sizeof(th->comm) - 1);
	return th;
}

/* ---- formatting ------------------------------------------------------------- */

static void print_time(uint64_t ns)
{
	printf("%5llu.%06llu", (unsigned long long)(ns / 1000000000u),
	       (unsigned long long)(ns / 1000 % 1000000));
}

/* ftrace's duration column: a mark for long calls, then microseconds. */
static void print_duration(uint64_t ns)
{
	char mark = ns > 1000000000 ? '$' : ns > 100000000 ? '@' : ns > 10000000 ? '*' :
		    ns > 1000000 ? '#' : ns > 100000 ? '!' : ns > 10000 ? '+' : ' ';

	printf("%c %7llu.%03llu us |", mark, (unsigned long long)(ns / 1000),
	       (unsigned long long)(ns % 1000));
}

static void graph_prefix(struct tracing *t, const struct thread *th, const struct mcloc_event *e)
{
	if (t->last_tid && t->last_tid != th->tid)
		printf(" ------------------------------------------\n"
		       " %3u) %s-%u => %s-%u\n"
		       " ------------------------------------------\n\n", e->cpu,
		       thread_of(t, t->last_tid, ~0u)->comm, t->last_tid, th->comm, th->tid);
	t->last_tid = th->tid;
	printf(" %3u) ", e->cpu);
}

static void json_event(struct tracing *t, const struct thread *th, const struct mcloc_event *e,
		       const char *type, uint64_t dur)
{
	char b1[32], b2[32];

	printf("{\"time_ns\":%llu,\"pid\":%u,\"tid\":%u,\"cpu\":%u,", (unsigned long long)to_ns(t, e->time),
	       t->pid, th->tid, e->cpu);
	json_str("type", type, false);
	json_str("function", site_name(t, e->ip, b1, sizeof(b1)), false);
	if (e->type == MCLOC_EV_CALL || e->type == MCLOC_EV_ENTRY)
		json_str("parent", caller_name(t, e->parent, b2, sizeof(b2)), false);
	if (e->type == MCLOC_EV_EXIT)
		printf("\"duration_ns\":%llu,", (unsigned long long)dur);
	printf("\"depth\":%u}\n", e->depth);
}

static void chrome_event(struct tracing *t, const struct thread *th, const char *ph,
			 const char *name, uint64_t ns)
{
	if (!t->chrome)
		return;
	fprintf(t->chrome, "%s\n{\"name\":\"", t->chrome_first ? "" : ",");
	for (const char *s = name; *s; s++)
		fprintf(t->chrome, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
	fprintf(t->chrome, "\",\"ph\":\"%s\",\"ts\":%llu.%03llu,\"pid\":%u,\"tid\":%u}", ph,
		(unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000), t->pid, th->tid);
	t->chrome_first = false;
}

/* Print TH's pending graph entry as an opening line. */
static void graph_flush_pending(struct tracing *t, struct thread *th)
{
	char b[32];

	if (!th->pending)
		return;
	th->pending = false;
	if (t->json || t->chrome || t->mode != GRAPH)
		return;	/* (--chrome: the file instead of the text) */
	graph_prefix(t, th, &th->entry);
	printf("%16s|  %*s%s() {\n", "", 2 * th->entry.depth, "",
	       site_name(t, th->entry.ip, b, sizeof(b)));
	th->opened++;
}

static size_t hit_hash(uint64_t ip, uint32_t tid, size_t mask)
{
	return (size_t)(((ip ^ (uint64_t)tid << 40) * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

/* The counters of the function at IP (of thread TID with --per-thread):
 * found through a hash of them, as a profile sees an event per call. */
static struct hit *hit_of(struct tracing *t, uint64_t ip, uint32_t tid)
{
	if (!t->per_thread)
		tid = 0;
	for (size_t i = t->hit_index ? hit_hash(ip, tid, t->index_mask) : 0;
	     t->hit_index && t->hit_index[i]; i = (i + 1) & t->index_mask) {
		struct hit *h = &t->hits[t->hit_index[i] - 1];

		if (h->ip == ip && h->tid == tid)
			return h;
	}
	if (t->nhits == t->cap_hits) {
		size_t cap = t->cap_hits ? 2 * t->cap_hits : 256;
		struct hit *v = realloc(t->hits, cap * sizeof(*v));
		size_t *ix = calloc(2 * cap, sizeof(*ix));

		if (!v || !ix) {
			free(ix);
			if (v)
				t->hits = v;
			return NULL;
		}
		t->hits = v;
		t->cap_hits = cap;
		free(t->hit_index);
		t->hit_index = ix;
		t->index_mask = 2 * cap - 1;
		for (size_t k = 0; k < t->nhits; k++) {
			size_t i = hit_hash(t->hits[k].ip, t->hits[k].tid, t->index_mask);

			while (ix[i])
				i = (i + 1) & t->index_mask;
			ix[i] = k + 1;
		}
	}
	size_t i = hit_hash(ip, tid, t->index_mask);

	while (t->hit_index[i])
		i = (i + 1) & t->index_mask;
	t->hits[t->nhits] = (struct hit){ .ip = ip, .tid = tid };
	t->hit_index[i] = ++t->nhits;
	return &t->hits[t->nhits - 1];
}

static void profile_event(struct tracing *t, struct thread *th, const struct mcloc_event *e)
{
	struct hit *h = hit_of(t, e->ip, th->tid);

	if (!h)
		return;
	if (e->type == MCLOC_EV_ENTRY) {
		h->calls++;
		if (th->depth < STACK)
			th->stack[th->depth] = (struct open_call){ e->ip, 0 };
		th->depth++;
	} else if (e->type == MCLOC_EV_UNTIMED) {
		h->calls++;
		h->untimed++;
	} else if (th->depth && (e->type == MCLOC_EV_EXIT || e->type == MCLOC_EV_LEFT)) {
		th->depth--;
		if (e->type == MCLOC_EV_LEFT || th->depth >= STACK) {
			h->untimed++;
			return;
		}
		uint64_t dur = scaled(t, e->parent);

		h->total_ns += dur;
		h->self_ns += dur > th->stack[th->depth].child_ns ? dur - th->stack[th->depth].child_ns
								  : 0;
		if (th->depth && th->depth - 1 < STACK)
			th->stack[th->depth - 1].child_ns += dur;
	}
}

/* Events of TH were lost before its next one (at NS): say so where the
 * gap is, as trace_pipe does, and forget the calls it was inside, whose
 * ends may be among them. */
static void thread_lost(struct tracing *t, struct thread *th, const struct mcloc_event *e)
{
	graph_flush_pending(t, th);
	while (th->open) {
		chrome_event(t, th, "E", "", th->last_ns);
		th->open--;
	}
	th->opened = 0;
	th->depth = 0;
	if (t->json)
		printf("{\"pid\":%u,\"tid\":%u,\"type\":\"lost\"}\n", t->pid, th->tid);
	else if (t->mode == GRAPH && !t->chrome)
		printf(" %3u) %s-%u [LOST EVENTS]\n", e->cpu, th->comm, th->tid);
	else if (t->mode == FUNCTION && !t->chrome)
		printf("%16s-%-7u [%03u] [LOST EVENTS]\n", th->comm, th->tid, e->cpu);
}

static void format_event(struct tracing *t, struct item *it)
{
	struct mcloc_event *e = &it->e;
	struct thread *th = thread_of(t, it->tid, ~0u);
	uint64_t ns = to_ns(t, e->time);
	char b1[32], b2[32];

	if (!th)
		return;
	if (e->type & MCLOC_EV_LOST_BEFORE) {
		e->type &= (uint16_t)~MCLOC_EV_LOST_BEFORE;
		thread_lost(t, th, e);
	}
	t->events++;
	th->last_ns = ns;
	th->cpu = e->cpu;
	if (t->mode == PROFILE) {
		profile_event(t, th, e);
		return;
	}
	if (e->type == MCLOC_EV_CALL) {
		const char *fn = site_name(t, e->ip, b1, sizeof(b1));

		chrome_event(t, th, "i", fn, ns);
		if (t->json) {
			json_event(t, th, e, "call", 0);
		} else if (!t->chrome) {
			printf("%16s-%-7u [%03u] ", th->comm, th->tid, e->cpu);
			print_time(ns);
			printf(": %s <-%s\n", fn, caller_name(t, e->parent, b2, sizeof(b2)));
		}
		return;
	}
	/* function_graph */
	const char *fn = site_name(t, e->ip, b1, sizeof(b1));
	uint64_t dur = e->type == MCLOC_EV_EXIT ? scaled(t, e->parent) : 0;

	if (e->type == MCLOC_EV_ENTRY) {
		chrome_event(t, th, "B", fn, ns);
		th->open++;
		if (t->json)
			json_event(t, th, e, "entry", 0);
		graph_flush_pending(t, th);
		th->pending = true;
		th->entry = *e;
		return;
	}
	if (e->type == MCLOC_EV_EXIT || e->type == MCLOC_EV_LEFT) {
		if (th->open) {
			chrome_event(t, th, "E", fn, ns);
			th->open--;
		}
		if (t->json) {
			json_event(t, th, e, e->type == MCLOC_EV_EXIT ? "exit" : "left", dur);
			th->pending = false;
			return;
		}
		if (t->chrome)
			return;
		bool leaf = th->pending && th->entry.ip == e->ip && th->entry.depth == e->depth;

		if (leaf) {
			th->pending = false;
			if (e->type == MCLOC_EV_EXIT && dur < t->threshold_ns)
				return;
			graph_prefix(t, th, e);
			if (e->type == MCLOC_EV_LEFT)
				printf("%16s|  %*s%s(); /* left early (an exception or longjmp): not timed */\n", "",
				       2 * e->depth, "", fn);
			else {
				print_duration(dur);
				printf("  %*s%s();\n", 2 * e->depth, "", fn);
			}
			return;
		}
		graph_flush_pending(t, th);
		if (e->type == MCLOC_EV_EXIT && dur < t->threshold_ns)
			return;
		graph_prefix(t, th, e);
		/* "}" closes the "{" above; a call begun before the trace
		 * closes with its name, as ftrace writes it. */
		bool named = !th->opened;

		th->opened -= !named;
		if (e->type == MCLOC_EV_LEFT)
			printf("%16s|  %*s} /* %s: left early (an exception or longjmp) */\n", "", 2 * e->depth, "", fn);
		else if (print_duration(dur), named)
			printf("  %*s} /* %s */\n", 2 * e->depth, "", fn);
		else
			printf("  %*s}\n", 2 * e->depth, "");
		return;
	}
	if (e->type == MCLOC_EV_UNTIMED) {
		if (t->json) {
			json_event(t, th, e, "untimed", 0);
			return;
		}
		chrome_event(t, th, "i", fn, ns);
		if (t->chrome)
			return;
		graph_flush_pending(t, th);
		graph_prefix(t, th, e);
		printf("%16s|  %*s%s(); /* its return cannot be hooked: not timed */\n", "",
		       2 * e->depth, "", fn);
	}
}

/* Read every ring, merge by time, format.  Returns the events read. */
static size_t drain(struct tracing *t)
{
	const struct mcloc_ring_hdr *h = t->h;
	uint32_t nr = __atomic_load_n(&h->next_ring, __ATOMIC_ACQUIRE);
	uint32_t size = t->g.ring_size;
	bool overwrite = t->g.flags & MCLOC_RING_OVERWRITE;
	struct item *v = t->items;
	size_t n = 0, cap = t->cap_items;

	if (nr > t->g.rings)
		nr = t->g.rings;
	double rate = clock_rate(t);
	if (rate > 0)
		t->rate = rate;
	else if (!t->rate && !__atomic_load_n(&h->done, __ATOMIC_ACQUIRE))
		return 0;	/* (wait for the program's clock pair) */
	for (uint32_t i = 0; i < nr; i++) {
		struct mcloc_ring *r = (struct mcloc_ring *)ring(t, i);
		uint32_t tid = __atomic_load_n(&r->tid, __ATOMIC_ACQUIRE);
		/* (Whole events only: the tail stays a multiple of an event,
		 * so every copy lies inside the ring.) */
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) &
				~(uint64_t)(sizeof(struct mcloc_event) - 1);
		uint64_t tail = t->tails[i];

		if (!tid)
			continue;
		thread_of(t, tid, i);
		/* Overwrite: start at the oldest event still there.  (Without
		 * it, a head that far ahead is no program's: skipped all the
		 * same, so that a pass reads a ringful at most.) */
		uint64_t gap = 0, from = n;

		if (head - tail > size) {
			gap = head - size - tail;
			tail = head - size;
			if (!overwrite) {
				t->skipped += gap / sizeof(struct mcloc_event);
				gap = 0;
			}
		}
		uint64_t first = tail;

		for (uint32_t seq = 0; tail < head; tail += sizeof(struct mcloc_event), seq++) {
			if (n == cap) {
				size_t ncap = cap ? 2 * cap : 4096;
				struct item *nv = realloc(v, ncap * sizeof(*v));

				if (!nv)
					break;	/* (the rest stays for the next pass) */
				v = t->items = nv;
				cap = t->cap_items = ncap;
			}
			memcpy(&v[n].e, (const uint8_t *)(r + 1) + (tail & (size - 1)), sizeof(v[n].e));
			v[n].tid = tid;
			v[n++].seq = seq;
		}
		if (overwrite) {
			/* What the writer may have overwritten as it was copied. */
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			uint64_t claim = __atomic_load_n(&r->claim, __ATOMIC_RELAXED);
			uint64_t torn = claim > size + first ? (claim - size - first) : 0;

			torn = torn < tail - first ? torn : tail - first;
			gap += torn;
			torn /= sizeof(struct mcloc_event);
			memmove(&v[from], &v[from + torn], (n - from - torn) * sizeof(*v));
			n -= torn;
			if (gap) {
				t->overwritten += gap / sizeof(struct mcloc_event);
				if (n > from)
					v[from].e.type |= MCLOC_EV_LOST_BEFORE;
			}
		}
		t->tails[i] = tail;
		__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
	}
	if (!t->rate)
		t->rate = 1;
	if (n) {
		if (!in_order(v, n))
			qsort(v, n, sizeof(*v), cmp_item);
		for (size_t i = 0; i < n; i++)
			if (!name_find(&t->sites, v[i].e.ip)) {
				bool quiet = t->p->quiet;

				t->p->quiet = true;
				load_sites(t);
				t->p->quiet = quiet;
				break;
			}
		if (t->mode == FUNCTION) {
			struct mcloc_event *ev = malloc(n * sizeof(*ev));

			for (size_t i = 0; ev && i < n; i++)
				ev[i] = v[i].e;
			if (ev)
				resolve_callers(t, ev, n);
			free(ev);
		}
		for (size_t i = 0; i < n; i++)
			format_event(t, &v[i]);
		fflush(stdout);
	}
	return n;
}

/* For the sort: the tracing being printed (qsort passes no context). */
static struct tracing *sorting;

static uint64_t avg_ns(const struct hit *h)
{
	uint64_t timed = h->calls - h->untimed;

	return timed ? h->total_ns / timed : 0;
}

/* By thread (--per-thread), then by the --sort key, most first (names in
 * order); ties by calls, then name. */
static int cmp_hit(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	char b1[32], b2[32];
	uint64_t u, v;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	switch (sorting->sort) {
	case BY_SELF: u = x->self_ns, v = y->self_ns; break;
	case BY_CALLS: u = x->calls, v = y->calls; break;
	case BY_AVG: u = avg_ns(x), v = avg_ns(y); break;
	case BY_NAME: u = v = 0; break;
	default: u = x->total_ns, v = y->total_ns; break;
	}
	if (u != v)
		return u < v ? 1 : -1;
	if (sorting->sort != BY_NAME && x->calls != y->calls)
		return x->calls < y->calls ? 1 : -1;
	return strcmp(site_name(sorting, x->ip, b1, sizeof(b1)),
		      site_name(sorting, y->ip, b2, sizeof(b2)));
}

static void print_profile(struct tracing *t)
{
	char b[32];

	sorting = t;
	if (t->nhits)
		qsort(t->hits, t->nhits, sizeof(*t->hits), cmp_hit);
	for (size_t i = 0; i < t->nhits; i++) {
		const struct hit *h = &t->hits[i];
		uint64_t timed = h->calls - h->untimed;
		const char *fn = site_name(t, h->ip, b, sizeof(b));

		if (!t->json && (i == 0 || h->tid != t->hits[i - 1].tid)) {
			if (t->per_thread) {
				struct thread *th = thread_of(t, h->tid, ~0u);

				printf("%s# thread %u (%s)\n", i ? "\n" : "", h->tid,
				       th ? th->comm : "?");
			}
			printf("%-40s %12s %14s %12s %14s\n%-40s %12s %14s %12s %14s\n", "Function",
			       "Hit", "Time (us)", "Avg (us)", "Self (us)", "--------", "---",
			       "---------", "--------", "---------");
		}
		if (t->json) {
			putchar('{');
			json_str("function", fn, false);
			if (t->per_thread)
				printf("\"tid\":%u,", h->tid);
			printf("\"calls\":%llu,\"timed\":%llu,\"total_ns\":%llu,\"self_ns\":%llu}\n",
			       (unsigned long long)h->calls, (unsigned long long)timed,
			       (unsigned long long)h->total_ns, (unsigned long long)h->self_ns);
		} else if (timed) {
			printf("%-40s %12llu %14.3f %12.3f %14.3f\n", fn,
			       (unsigned long long)h->calls, h->total_ns / 1e3,
			       h->total_ns / 1e3 / (double)timed, h->self_ns / 1e3);
		} else {
			printf("%-40s %12llu %14s %12s %14s\n", fn, (unsigned long long)h->calls,
			       "-", "-", "-");
		}
	}
}

/* Why the geometry G does not describe rings in SIZE bytes, or NULL. */
static const char *bad_geometry(const struct mcloc_ring_hdr *g, uint64_t size)
{
	if (g->magic != MCLOC_RING_MAGIC)
		return "bad magic";
	if (g->version != MCLOC_WIRE_VERSION)
		return "another version";
	if (!g->rings || g->rings > 4096)
		return "not 1 to 4096 rings";
	if (g->ring_size < 4096 || g->ring_size > 64u << 20 || (g->ring_size & (g->ring_size - 1)))
		return "a ring size that is not a power of 2 from 4 KiB to 64 MiB";
	if ((uint64_t)g->rings * g->ring_size > (uint64_t)MCLOC_RINGS_MAX_MIB << 20)
		return "rings larger than the most a trace may ask for";
	if (g->data_offset < sizeof(*g) || g->data_offset % 8)
		return "rings that overlap the header, or are misaligned";
	if (g->ring_stride < sizeof(struct mcloc_ring) + (uint64_t)g->ring_size ||
	    g->ring_stride % 8)
		return "rings that overlap each other, or are misaligned";
	if (g->data_offset + (uint64_t)g->rings * g->ring_stride > size)
		return "rings past its end";
	if (g->flags & ~(uint32_t)MCLOC_RING_OVERWRITE || g->ticks > 1)
		return "unknown flags";
	return NULL;
}

/* Map the rings the program passed as FD (SIZE bytes, it says), checked
 * once: a memfd sealed against shrinking (else it could shrink under the
 * mapping, and a read past its end fault), as large as said, with a header
 * whose geometry fits; the geometry is copied into t->g, and the memory
 * read as data only from then on.  NULL, or why not. */
static const char *map_rings(struct tracing *t, int fd, uint64_t size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || seals < 0)
		return "not a memfd";
	if (!(seals & F_SEAL_SHRINK))
		return "not sealed against shrinking";
	if (size < sizeof(t->g) || size > (uint64_t)st.st_size || size > SIZE_MAX)
		return "a size larger than the memfd's, or too small for a header";
	if (pread(fd, &t->g, sizeof(t->g), 0) != (ssize_t)sizeof(t->g))
		return "its header cannot be read";
	const char *why = bad_geometry(&t->g, size);

	if (why)
		return why;
	/* (Only what the rings span is mapped.) */
	t->size = t->g.data_offset + (size_t)t->g.rings * t->g.ring_stride;
	t->tails = calloc(t->g.rings, sizeof(*t->tails));
	if (!t->tails)
		return "out of memory";
	void *h = mmap(NULL, t->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (h == MAP_FAILED)
		return strerror(errno);
	t->h = h;
	return NULL;
}

/* Whether the traced program has exited: gone, a zombie, or its end of
 * the connection closed. */
static bool program_gone(struct tracing *t)
{
	char path[64], buf[256];
	struct pollfd pf = { .fd = t->p->fd, .events = POLLRDHUP };

	if (kill((pid_t)t->pid, 0) < 0 && errno == ESRCH)
		return true;
	if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP)))
		return true;
	snprintf(path, sizeof(path), "/proc/%u/stat", t->pid);
	FILE *f = fopen(path, "r");
	char *close_paren = NULL;

	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);

		buf[n] = 0;
		fclose(f);
		close_paren = strrchr(buf, ')');
	}
	return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

static void usage_trace(void)
{
	fail("trace", "usage: mcloc trace PID function|function_graph|profile|nop [--filter G] "
		      "[--notrace G] [--graph-function G] [--max-depth N] [--tid T] "
		      "[--duration S] [-t USECS] [--per-thread] [--sort KEY] [--buffer KIB] "
		      "[--rings N] [--overwrite] [--chrome FILE] [-o FILE] [-j]");
}

/* What the trace and run subcommands were asked for. */
struct targs {
	const char *filter, *notrace, *graph, *chrome, *preload;
	const char *output;	/* -o: the trace's text (or JSON) there, not on stdout */
	struct mcloc_req_trace q;
	double duration;
	uint64_t threshold_ns;
	enum mode mode;
	bool nop;
	bool json;		/* -j after the subcommand, as before it */
	bool per_thread;	/* profile: a table per thread */
	enum sort_key sort;	/* profile: the order of its rows */
};

/* Options of ARGV[0..ARGC) into A; the index of the first argument that is
 * not one, or -1 (a message printed). */
static int parse_targs(int argc, char **argv, struct targs *a, bool run)
{
	static const struct option opts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "notrace", required_argument, NULL, 'n' },
		{ "graph-function", required_argument, NULL, 'g' },
		{ "max-depth", required_argument, NULL, 'D' },
		{ "tid", required_argument, NULL, 'T' },
		{ "duration", required_argument, NULL, 'd' },
		{ "threshold", required_argument, NULL, 't' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "rings", required_argument, NULL, 'r' },
		{ "overwrite", no_argument, NULL, 'O' },
		{ "chrome", required_argument, NULL, 'c' },
		{ "preload", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "per-thread", no_argument, NULL, 'P' },
		{ "sort", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ 0 }
	};
	int o;

	*a = (struct targs){ .filter = "", .notrace = "", .graph = "",
			     .q = { .ring_kib = 1024, .rings = 16 } };
	optind = 0;	/* (a fresh scan, options anywhere after the subcommand) */
	while ((o = getopt_long(argc, argv, "jt:o:", opts, NULL)) != -1) {
		switch (o) {
		case 'j': a->json = true; break;
		case 'P': a->per_thread = true; break;
		case 's': {
			static const char *const keys[] = { "total", "self", "calls", "avg", "name" };
			size_t k = 0;

			while (k < 5 && strcmp(optarg, keys[k]))
				k++;
			if (k == 5) {
				fail(run ? "run" : "trace", "--sort: total, self, calls, avg or name");
				return -1;
			}
			a->sort = (enum sort_key)k;
			break;
		}
		case 'f': a->filter = optarg; break;
		case 'n': a->notrace = optarg; break;
		case 'g': a->graph = optarg; break;
		case 'D': a->q.max_depth = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'T': a->q.tid = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'd': a->duration = strtod(optarg, NULL); break;
		case 't': a->threshold_ns = (uint64_t)(strtod(optarg, NULL) * 1000); break;
		case 'b': a->q.ring_kib = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'r': a->q.rings = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'O': a->q.flags |= MCLOC_TRACE_OVERWRITE; break;
		case 'c': a->chrome = optarg; break;
		case 'o': a->output = optarg; break;
		case 'p':
			if (run) {
				a->preload = optarg;
				break;
			}
			/* fall through */
		default: usage_trace(); return -1;
		}
	}
	if (a->q.ring_kib < 4 || a->q.ring_kib > 65536 || (a->q.ring_kib & (a->q.ring_kib - 1)) ||
	    !a->q.rings || a->q.rings > 4096 ||
	    (uint64_t)a->q.rings * a->q.ring_kib > (uint64_t)MCLOC_RINGS_MAX_MIB << 10) {
		fail(run ? "run" : "trace", "--buffer: a power of 2 from 4 to 65536 KiB; "
					    "--rings: 1 to 4096; --buffer times --rings: at most %u MiB",
		     MCLOC_RINGS_MAX_MIB);
		return -1;
	}
	return optind;
}

/* WHICH into A's mode and tracer; -1 with a message. */
static int pick_tracer(struct targs *a, const char *which)
{
	if (!strcmp(which, "function"))
		a->mode = FUNCTION, a->q.tracer = MCLOC_TRACE_FUNCTION;
	else if (!strcmp(which, "function_graph"))
		a->mode = GRAPH, a->q.tracer = MCLOC_TRACE_GRAPH;
	else if (!strcmp(which, "profile"))
		a->mode = PROFILE, a->q.tracer = MCLOC_TRACE_GRAPH;
	else if (!strcmp(which, "nop"))
		a->nop = true;
	else {
		fail("trace", "no tracer '%s' (function, function_graph, profile, nop)", which);
		return -1;
	}
	return 0;
}

/* Trace the program PID as A says, until the program exits, Ctrl-C or
 * the duration.  0, or 1 with a message. */
static int trace_session(const struct targs *a, const char *pid, bool json)
{
	const char *filter = a->filter, *notrace = a->notrace, *graph = a->graph;
	const char *chrome = a->chrome;
	struct mcloc_req_trace q = a->q;
	double duration = a->duration;
	struct tracing t = { .json = json, .chrome_first = true, .mode = a->mode,
			     .threshold_ns = a->threshold_ns, .per_thread = a->per_thread,
			     .sort = a->sort };
	int ret = 1;

	if (chrome && !(t.chrome = fopen(chrome, "w"))) {
		fail(chrome, "%s", strerror(errno));
		return 1;
	}
	t.p = malloc(sizeof(*t.p));
	if (!t.p || peer_open(t.p, pid, false) < 0)
		goto out;
	t.pid = (uint32_t)strtoul(pid, NULL, 10);

	/* The request: its fields, then the three globs. */
	uint8_t req[MCLOC_REQ_MAX - sizeof(struct mcloc_msg)];
	size_t len = sizeof(q), lf = strlen(filter) + 1, ln = strlen(notrace) + 1,
	       lg = strlen(graph) + 1;
	if (len + lf + ln + lg > sizeof(req)) {
		fail("trace", "the globs are too long");
		goto out;
	}
	memcpy(req, &q, sizeof(q));
	memcpy(req + len, filter, lf);
	memcpy(req + len + lf, notrace, ln);
	memcpy(req + len + lf + ln, graph, lg);
	len += lf + ln + lg;

	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);

	struct mcloc_msg m;
	struct mcloc_rep_trace rt;
	if (load_sites(&t) < 0)
		goto out;
	if (peer_send(t.p, MCLOC_REQ_TRACE, req, len) < 0 || peer_recv(t.p, &m) < 0)
		goto out;
	if (m.type != MCLOC_REP_TRACE || m.len < sizeof(m) + sizeof(rt) || t.p->passed_fd < 0) {
		fail(pid, "an unexpected reply to the trace request");
		goto out;
	}
	memcpy(&rt, t.p->buf + sizeof(m), sizeof(rt));
	const char *why = map_rings(&t, t.p->passed_fd, rt.size);

	close(t.p->passed_fd);
	t.p->passed_fd = -1;
	if (why) {
		fail(pid, "the trace's shared memory: %s", why);
		goto out;
	}
	if (!json && !chrome) {
		if (t.mode == FUNCTION)
			printf("# tracer: function\n#\n"
			       "#            TASK-PID     CPU#     TIMESTAMP  FUNCTION\n"
			       "#               | |         |          |         |\n");
		else if (t.mode == GRAPH)
			printf("# tracer: function_graph\n#\n"
			       "# CPU  DURATION                  FUNCTION CALLS\n"
			       "# |     |   |                     |   |   |   |\n");
		fflush(stdout);
	}
	if (t.chrome)
		fprintf(t.chrome, "{\"traceEvents\":[");

	struct timespec t0;
	bool gone = false;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!stop_now) {
		struct timespec d = { 0, READ_MS * 1000000L }, now;

		nanosleep(&d, NULL);
		drain(&t);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (duration > 0 && (now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >=
					    duration)
			break;
		/* A program that exits ends its trace: what it left in the
		 * rings is read below. */
		if (program_gone(&t)) {
			gone = true;
			break;
		}
	}
	/* Stop: every site a NOP again; then what is left in the rings.  (A
	 * program that exits meanwhile has nothing left to stop.) */
	t.p->quiet = true;
	if (gone || (peer_send(t.p, MCLOC_REQ_STOP, NULL, 0) == 0 && peer_recv(t.p, &m) == 0 &&
		     m.type == MCLOC_REP_END))
		ret = 0;
	else if (program_gone(&t))
		ret = 0;
	else
		fail(pid, "the tracer may not have stopped: %s", t.p->error);
	/* (The stopped program writes no more: one pass reads it all, a few
	 * if memory ran short.  A peer that writes on is not followed.) */
	for (int k = 0; k < 8 && drain(&t); k++)
		;
	/* Events lost at a thread's end, with none after them to say so. */
	for (uint32_t i = 0; i < t.g.rings; i++) {
		const struct mcloc_ring *r = ring(&t, i);
		struct thread *th = r->tid && __atomic_load_n(&r->lost_open, __ATOMIC_ACQUIRE) ?
					    thread_of(&t, r->tid, i) : NULL;

		if (th)
			thread_lost(&t, th, &(struct mcloc_event){ .cpu = th->cpu });
	}
	for (size_t i = 0; i < t.nthreads; i++)
		graph_flush_pending(&t, &t.threads[i]);
	if (t.mode == PROFILE)
		print_profile(&t);
	if (t.chrome) {
		/* Every call begun ends: those still running at the stop end
		 * there. */
		for (size_t i = 0; i < t.nthreads; i++)
			while (t.threads[i].open--)
				chrome_event(&t, &t.threads[i], "E", "", t.threads[i].last_ns);
		fprintf(t.chrome, "\n],\"displayTimeUnit\":\"ns\"}\n");
	}
	uint64_t lost = t.h->no_ring + t.skipped;
	for (uint32_t i = 0; i < t.g.rings; i++)
		lost += ring(&t, i)->lost;
	if (t.overwritten)
		fprintf(stderr, "mcloc: %s: %llu event%s overwritten before they were read "
				"(--overwrite)\n", pid, (unsigned long long)t.overwritten,
			t.overwritten == 1 ? "" : "s");
	if (lost)
		fprintf(stderr, "mcloc: %s: %llu event%s lost (rings full, or more threads than "
				"--rings)\n", pid, (unsigned long long)lost, lost == 1 ? "" : "s");
	fflush(stdout);
out:
	if (t.h)
		munmap((void *)t.h, t.size);
	free(t.tails);
	if (t.chrome && fclose(t.chrome) != 0) {
		fail(chrome, "%s", strerror(errno));
		ret = 1;
	}
	if (t.p && t.p->fd >= 0)
		close(t.p->fd);
	free(t.p);
	for (size_t i = 0; i < t.sites.n; i++)
		free(t.sites.v[i].name);
	for (size_t i = 0; i < t.callers.n; i++)
		free(t.callers.v[i].name);
	free(t.sites.v);
	free(t.callers.v);
	free(t.threads);
	free(t.hits);
	free(t.items);
	free(t.hit_index);
	return ret;
}

/*
 * A's -o FILE opened for the trace: a descriptor, -2 when there is none
 * to open, -1 with a message.  Opened before anything starts, so that a
 * file that cannot be written stops the command before a program is
 * started or held.
 */
static int open_output(const struct targs *a)
{
	int fd;

	if (!a->output)
		return -2;
	fd = open(a->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		fail(a->output, "%s", strerror(errno));
	return fd;
}

/* The trace's standard output becomes FD (from open_output(); -2: it
 * stays): what a program started by mcloc run prints stays on the
 * terminal, apart from the trace. */
static void output_to(int fd)
{
	if (fd < 0)
		return;
	fflush(stdout);
	dup2(fd, STDOUT_FILENO);
	close(fd);
}

int cmd_trace(int argc, char **argv, bool json)
{
	struct targs a;
	int at = parse_targs(argc, argv, &a, false);

	if (at < 0)
		return 2;
	if (argc - at != 2) {
		usage_trace();
		return 2;
	}
	if (pick_tracer(&a, argv[at + 1]) < 0)
		return 2;
	if (a.nop)
		return 0;	/* (nothing runs for this controller to stop) */
	int out = open_output(&a);

	if (out == -1)
		return 1;
	output_to(out);
	return trace_session(&a, argv[at], json || a.json);
}

/* Whether CHILD has not exited (it is left to be reaped). */
static bool running(pid_t child)
{
	siginfo_t si = { 0 };

	return waitid(P_PID, (id_t)child, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && !si.si_pid;
}

/* End MCLOC_CONTROL=wait's hold of the program PID, which CHILD is, as
 * soon as it answers (1 s at most, while it lives).  Whether it did. */
static bool release(const char *pid, pid_t child)
{
	struct peer *p = malloc(sizeof(*p));
	struct mcloc_msg m;
	bool done = false;

	for (int i = 0; p && i < 200 && !done && running(child); i++) {
		if (peer_open(p, pid, true) == 0) {
			p->quiet = true;
			done = peer_send(p, MCLOC_REQ_RELEASE, NULL, 0) == 0 &&
			       peer_recv(p, &m) == 0 && m.type == MCLOC_REP_END;
			close(p->fd);
		}
		if (!done)
			nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	free(p);
	return done;
}

/* Which socket file a name is: its inode number alone is not enough, as
 * a file system such as ext4 gives the number of the socket that an
 * exec'd program's libmcloc removed to the one it binds next; the change
 * time tells them apart. */
struct sock_id {
	ino_t ino;
	struct timespec ctime;
};

static struct sock_id sock_id(const struct stat *sb)
{
	return (struct sock_id){ sb->st_ino, sb->st_ctim };
}

static bool same_sock(struct sock_id a, struct sock_id b)
{
	return a.ino == b.ino && a.ctime.tv_sec == b.ctime.tv_sec &&
	       a.ctime.tv_nsec == b.ctime.tv_nsec;
}

/* Wait for CHILD (pid PID), its status into *ST, once its trace is over:
 * the image that ran it is released now if it still holds (a failed
 * trace), and each image it execs later (its socket made anew in CD: a
 * wrapper's sh -c 'exec PROG' traced before the exec) at once, with one
 * line: no trace is coming for it. */
static void wait_releasing(const struct cdir *cd, const char *pid, pid_t child, int *st,
			   const char *prog)
{
	struct stat sb;
	struct sock_id seen = { 0 };
	bool said = false;

	if (fstatat(cd->fd, pid, &sb, AT_SYMLINK_NOFOLLOW) == 0)
		seen = sock_id(&sb);
	if (running(child))
		release(pid, child);
	while (waitpid(child, st, WNOHANG) == 0) {
		if (fstatat(cd->fd, pid, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(sb.st_mode) &&
		    !same_sock(sock_id(&sb), seen) && release(pid, child)) {
			seen = sock_id(&sb);
			if (!said)
				fail(prog, "exec'd another program, which runs untraced");
			said = true;
		}
		nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
	}
}

/*
 * LIB added to the program's LD_PRELOAD, after what the user preloads
 * there: that stays (a sanitizer's runtime must even stay first, and a
 * preloaded allocator or shim is the user's business), where it used to
 * be replaced.  Called in the child, before exec.
 */
static void add_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	size_t n = (old ? strlen(old) : 0) + strlen(lib) + 2;
	char *v = old && *old ? malloc(n) : NULL;

	if (v) {
		snprintf(v, n, "%s:%s", old, lib);
		setenv("LD_PRELOAD", v, 1);
		free(v);
	} else {
		setenv("LD_PRELOAD", lib, 1);
	}
}

/*
 * mcloc run TRACER [OPTIONS] -- PROG [ARGS]: start PROG with
 * MCLOC_CONTROL=wait, which holds it at its first image's registration
 * until a trace starts (10 s at most), so that the trace sees it from
 * main() on; trace it until it exits or Ctrl-C; exit as it did.
 */
int cmd_run(int argc, char **argv, bool json)
{
	struct targs a;
	int dd = 1;

	while (dd < argc && strcmp(argv[dd], "--"))
		dd++;
	int at = parse_targs(dd, argv, &a, true);

	if (at < 0)
		return 2;
	if (dd - at != 1 || dd + 1 >= argc) {
		fail("run", "usage: mcloc run TRACER [OPTIONS] [--preload LIB] [-o FILE] -- PROG [ARGS]");
		return 2;
	}
	if (pick_tracer(&a, argv[at]) < 0)
		return 2;
	char pid[16];
	struct cdir cd;
	int out = open_output(&a);

	if (out == -1)
		return 1;

	/* The directory the program's socket will be in, made and verified
	 * first: where control cannot start, the program is not started to
	 * wait for it. */
	if (cdir_open(&cd, true) < 0) {
		if (out >= 0)
			close(out);
		return 1;
	}
	pid_t child = fork();

	if (child < 0) {
		fail("run", "fork: %s", strerror(errno));
		close(cd.fd);
		if (out >= 0)
			close(out);
		return 1;
	}
	if (!child) {
		char wait[32];

		snprintf(wait, sizeof(wait), "wait=%d", (int)getpid());
		setenv("MCLOC_CONTROL", a.nop ? "1" : wait, 1);
		if (a.preload)
			add_preload(a.preload);
		execvp(argv[dd + 1], argv + dd + 1);
		fail(argv[dd + 1], "%s", strerror(errno));
		_exit(127);
	}
	output_to(out);	/* (the program keeps the terminal) */
	snprintf(pid, sizeof(pid), "%d", (int)child);
	/* The program's socket, made when libmcloc loads. */
	int st, ret = 0;
	bool up = false, reaped = false;

	for (int i = 0; i < 1000 && !up; i++) {
		struct stat sb;

		if (waitpid(child, &st, WNOHANG) == child) {
			close(cd.fd);
			fail(argv[dd + 1], "exited before it offered control (is it linked with "
					   "libmcloc, or given --preload?)");
			return WIFEXITED(st) ? (WEXITSTATUS(st) ? WEXITSTATUS(st) : 1) : 1;
		}
		up = fstatat(cd.fd, pid, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(sb.st_mode);
		if (!up)
			nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	if (!up) {
		fail(argv[dd + 1], "offered no control within 5 s (is it linked with libmcloc, "
				   "or given --preload?); running it untraced");
	} else if (!a.nop) {
		/* Control starts when libmcloc loads, before the program's
		 * image registers (and waits, MCLOC_CONTROL=wait): ask until
		 * it has call sites (2 s at most: a program found by
		 * discovery registers only when the trace starts).  A
		 * wrapper given --preload has none, and may exec the program
		 * meanwhile, which answers under the same pid: asked again
		 * while it lives. */
		struct peer *p = malloc(sizeof(*p));
		struct mcloc_rep_hello h = { 0 };

		for (int i = 0; p && i < 400 && running(child); i++) {
			int r = peer_open(p, pid, true);

			if (r == 0) {
				p->quiet = true;
				r = ask(p, MCLOC_REQ_HELLO, MCLOC_REP_HELLO, &h, sizeof(h));
				close(p->fd);
			}
			if (r == 0 && h.records)
				break;
			nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
		}
		free(p);
		ret = trace_session(&a, pid, json || a.json);
		wait_releasing(&cd, pid, child, &st, argv[dd + 1]);
		reaped = true;
	}
	close(cd.fd);
	while (!reaped && waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (ret)
		return ret;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}
