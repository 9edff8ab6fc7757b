// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Tracing for a controller (control.c): binary events into per-thread
 * rings in a memfd the controller maps (<mcloc/control.h> lays it out),
 * as ftrace's per-CPU ring buffers feed trace_pipe.
 *
 * A traced thread takes a ring at its first event and then writes events
 * with plain stores and one release store of its head: no lock, no system
 * call, no allocation.  A full ring drops the event and counts it, and the
 * thread's next event says so; or, asked for, overwrites its oldest
 * events (the reader then tells what it could not read, by claim).
 * function writes one event per call; function_graph one at entry and
 * one when the call returns, through timing.c's return hook.  The
 * session is published under RCU: stopping unregisters the ops (no
 * callback runs after that), withdraws the session, waits for a grace
 * period, in which a hooked call returning late may still be writing, and
 * only then unmaps the rings.
 */
#include <mcloc/mcloc.h>
#include <mcloc/control.h>
#include "mcr.h"
#include "images.h"
#include "timing.h"
#include "rcu.h"
#include "trace.h"
#include "ops.h"
#include "args.h"
#include "../base/grow.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * What a session's patterns chose among the functions registered: the
 * sites of set_graph_function's functions (sorted; none: every call is
 * traced), the triggers and the arguments to capture, by site (sorted).
 * Made again, whole, when an image registers while the trace runs, and
 * published as one, so that a callback sees each table with its count;
 * the one it replaced is retired a grace period later (callbacks read it
 * inside the dispatcher's read-side section, and a hooked call's return
 * carries what it needs of its entry: graph_arg()).  Kept when the new
 * image changed nothing: a program that loads and unloads a library
 * which no pattern names makes no garbage.
 */
struct trig {
	uintptr_t site;
	unsigned actions;	/* MCLOC_TRIGGER_* bits */
};

struct named {
	uintptr_t *graph;
	size_t ngraph;
	struct trig *trig;
	size_t ntrig;
	struct mcloc_args_ent *args;
	size_t nargs;
};

/* The rings' geometry lives here, never read back from the shared
 * memory: the controller may write anything there, and what it writes is
 * data (heads, tails, a clock pair), never where the program stores. */
struct session {
	struct mcloc_ring_hdr *hdr;
	size_t size;
	size_t data_offset, ring_stride;
	uint32_t ring_size, rings;
	uint32_t next_ring;	/* rings handed out (the tick copies it out) */
	uint32_t clock_seq;	/* (hdr->clock_seq: a copy) */
	unsigned gen;
	uint32_t tracer, max_depth, tid;
	bool overwrite, wait, follow;
	/* Set (before its ops goes) when the trace stops: a writer waiting
	 * for room gives up, so that stopping never waits on the reader. */
	bool stopping;
	/* What its functions' names chose (struct named), published; and
	 * the patterns, applied again to each image that registers while
	 * the trace runs: the filter's and notrace's, set_graph_function's,
	 * the triggers', and the controller's argument globs (beside its
	 * entries by site, ARGS). */
	struct named *named;
	char *filter, *notrace, *graph, *triggers;
	struct mcr_args_glob *aglobs;
	size_t naglobs;
	struct mcloc_args_ent *args;
	size_t nargs;
	unsigned slot;		/* in sessions[], and in each thread's mine[] */
	int off;		/* a trigger turned tracing off (atomic) */
	/* Its callbacks' ops: a callback finds its session from it. */
	struct mcloc_ops ops;
};

/* The sessions, each a controller's, RCU-published while they trace (as
 * ftrace's instances, each with its own tracer, filters and rings). */
static struct session *sessions[MCLOC_SESSIONS_MAX];
static unsigned sess_gen;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

/* The calling thread's ring in the session of generation GEN. */
struct my_ring {
	unsigned gen;
	struct mcloc_ring *r;	/* NULL: none left for this thread */
	uint32_t cpu;		/* of its last event (~0: none yet) */
	unsigned inside;	/* graph: calls of set_graph_function entered */
	bool dropped;		/* events lost since the last one written */
	struct mcloc_ev_state st;	/* what the ring's reader knows */
};
static __thread struct my_ring mine[MCLOC_SESSIONS_MAX] __attribute__((tls_model("initial-exec")));
static __thread uint32_t mytid __attribute__((tls_model("initial-exec")));

/* The thread's id, asked once per thread (a fork()ed child asks again). */
static uint32_t my_tid(void)
{
	if (__builtin_expect(!mytid, 0))
		mytid = (uint32_t)syscall(SYS_gettid);
	return mytid;
}

static __attribute__((noinline, cold)) uint32_t my_cpu_slow(void)
{
	int c = sched_getcpu();

	return c >= 0 ? (uint32_t)c : 0;
}

/* The CPU the thread runs on: glibc keeps it in the thread's rseq area,
 * read in place; sched_getcpu() when the kernel or the C library has no
 * rseq (it is then a vDSO call). */
static inline uint32_t my_cpu(void)
{
	if (__builtin_expect(__rseq_size != 0, 1)) {
		const struct rseq *rs = (const struct rseq *)((const char *)
							      __builtin_thread_pointer() +
							      __rseq_offset);
		int32_t c = (int32_t)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);

		if (c >= 0)
			return (uint32_t)c;
	}
	return my_cpu_slow();
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct mcloc_ring *ring_at(const struct session *s, uint32_t i)
{
	return (struct mcloc_ring *)((uint8_t *)s->hdr + s->data_offset + (size_t)i * s->ring_stride);
}

/* The thread's ring, taken on its first event of the session (the only
 * system calls a thread makes, once per session).  That event may be in
 * a signal handler: atomics and system calls only (the thread's name
 * from prctl, 16 bytes with its NUL). */
static __attribute__((noinline, cold)) struct mcloc_ring *take_ring(const struct session *s)
{
	uint32_t i = __atomic_fetch_add((uint32_t *)&s->next_ring, 1, __ATOMIC_RELAXED);
	struct mcloc_ring *r = i < s->rings ? ring_at(s, i) : NULL;
	char comm[16] = "";

	mine[s->slot] = (struct my_ring){ .gen = s->gen, .r = r, .cpu = ~0u };
	if (r) {
		/* (Where the kernel has no MADV_POPULATE_WRITE, the pages
		 * come as the thread first writes them.) */
		madvise(r, s->ring_stride, MADV_POPULATE_WRITE);
		prctl(PR_GET_NAME, comm);
		comm[sizeof(comm) - 1] = 0;
		memcpy(r->comm, comm, sizeof(r->comm) < sizeof(comm) ? sizeof(r->comm) : sizeof(comm));
		r->comm[sizeof(r->comm) - 1] = 0;
		__atomic_store_n(&r->tid, my_tid(), __ATOMIC_RELEASE);
	}
	return r;
}

static inline struct mcloc_ring *my_ring(const struct session *s)
{
	if (__builtin_expect(mine[s->slot].gen == s->gen, 1))
		return mine[s->slot].r;
	return take_ring(s);
}

/*
 * MCLOC_TRACE_WAIT: the ring has no room for NEED bytes, so the thread
 * waits for the reader to make it (yielding its CPU: on a machine with
 * fewer CPUs than busy threads the reader runs only then), and sleeps
 * briefly once that has gone on a while.  True with *HEAD where the
 * event goes; false once the trace is stopping, and the event is dropped.
 * System calls only: a signal handler may be here.
 */
static __attribute__((noinline, cold)) bool wait_room(const struct session *s,
						       struct mcloc_ring *r, uint64_t *head,
						       uint32_t need)
{
	__atomic_store_n(&r->waits, r->waits + 1, __ATOMIC_RELAXED);
	for (unsigned tries = 0;; tries++) {
		if (__atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE))
			return false;
		uint64_t h = r->head & ~(uint64_t)(MCLOC_EV_UNIT - 1);

		if (h - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) + need <= s->ring_size) {
			*head = h;
			return true;
		}
		if (tries < 256)
			sched_yield();
		else
			nanosleep(&(struct timespec){ 0, 50000 }, NULL);
	}
}

static __attribute__((noinline, cold)) void count_lost(const struct session *s,
							struct mcloc_ring *r)
{
	if (!r) {
		__atomic_fetch_add(&s->hdr->no_ring, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&r->lost, r->lost + 1, __ATOMIC_RELAXED);
	if (!mine[s->slot].dropped) {
		mine[s->slot].dropped = true;
		__atomic_store_n(&r->lost_open, 1, __ATOMIC_RELAXED);
	}
}

/* The slot {WORD, TIME} at HEAD of the ring DATA of SIZE bytes: where it
 * ends.  (Each unit masked on its own: a slot may wrap.) */
static inline uint64_t put_slot(uint8_t *data, uint32_t size, uint64_t head, uint64_t word,
				uint64_t time)
{
	*(uint64_t *)(data + (head & (size - 1))) = word;
	*(uint64_t *)(data + ((head + MCLOC_EV_UNIT) & (size - 1))) = time;
	return head + sizeof(struct mcloc_event);
}

/* The DATA event of NDATA bytes at DATA, from HEAD on (<mcloc/control.h>
 * lays it out): where it ends. */
static __attribute__((noinline)) uint64_t put_data(uint8_t *ring, uint32_t size, uint64_t head,
						    uint64_t time, unsigned depth,
						    const uint8_t *data, uint32_t ndata)
{
	head = put_slot(ring, size, head, mcloc_ev_word(MCLOC_EV_DATA, depth, ndata), time);
	for (uint32_t at = 0; at < ndata; at += MCLOC_EV_DATA_SLOT) {
		struct mcloc_event ev = mcloc_ev_data_pack(data + at, ndata - at);

		head = put_slot(ring, size, head, ev.word, ev.time);
	}
	return head;
}

/*
 * One event: TYPE at TIME, with PAYLOAD (a site, or EXIT's duration) and
 * DEPTH, and for CALL the caller's return address EXTRA, in units of
 * <mcloc/control.h> (one, a short event, where the ring's reader can infer
 * the rest); a CPU slot first when the thread has moved; and when NITEMS,
 * a DATA event of the NITEMS bytes at ITEMS after it, in the same
 * publication.  (Inlined into the tracers: its slow paths are calls of
 * their own, so the common one saves no registers.)
 */
static inline __attribute__((always_inline)) void
put_event(const struct session *s, unsigned type, uint64_t time, uint64_t payload, uint64_t extra,
	  unsigned depth, const uint8_t *items, uint32_t nitems)
{
	struct mcloc_ring *r = my_ring(s);

	if (!r || (type != MCLOC_EV_EXIT && payload > MCLOC_EV_PAYLOAD_MAX)) {
		count_lost(s, r);
		return;
	}
	uint32_t cpu = my_cpu();
	/* (A CALL carries its CPU in its second slot.) */
	struct my_ring *m = &mine[s->slot];
	bool moved = cpu != m->cpu && type != MCLOC_EV_CALL;
	/* The short form where it fits: never after a loss or a move (their
	 * slots say so), nor in an overwriting ring (read from anywhere). */
	uint64_t word = 0;

	if ((type == MCLOC_EV_ENTRY || type == MCLOC_EV_EXIT) && !moved && !m->dropped &&
	    !s->overwrite)
		word = type == MCLOC_EV_ENTRY ? mcloc_ev_sentry(&m->st, time, payload, depth)
					      : mcloc_ev_sexit(&m->st, time, payload, depth);
	uint32_t need = (word ? 1 : mcloc_ev_units(mcloc_ev_word(type, 0, 0))) * MCLOC_EV_UNIT +
			(moved + (nitems ? 1 + mcloc_ev_data_slots(nitems) : 0)) *
				sizeof(struct mcloc_event);
	/* (HEAD may be anything the controller wrote: masked by the
	 * program's own size, the event still lands inside the ring.) */
	uint64_t head = r->head & ~(uint64_t)(MCLOC_EV_UNIT - 1);
	uint32_t size = s->ring_size;

	if (s->overwrite) {
		/* (The reader discards what claim says may be half-written:
		 * the fence orders claim before the event's stores.) */
		__atomic_store_n(&r->claim, head + need, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
	} else if (head - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) + need > size &&
		   (!s->wait || !wait_room(s, r, &head, need))) {
		count_lost(s, r);
		return;
	}
	uint8_t *data = (uint8_t *)(r + 1);
	unsigned sdepth = depth > MCLOC_EV_DEPTH_MAX ? MCLOC_EV_DEPTH_MAX : depth;

	mcloc_ev_advance(&m->st, type, sdepth, time, payload);
	if (word) {
		*(uint64_t *)(data + (head & (size - 1))) = word;
		head += MCLOC_EV_UNIT;
	} else {
		unsigned lost = 0;

		if (__builtin_expect(m->dropped, 0)) {
			lost = MCLOC_EV_LOST_BEFORE;
			m->dropped = false;
			__atomic_store_n(&r->lost_open, 0, __ATOMIC_RELAXED);
		}
		if (moved) {
			m->cpu = cpu;
			head = put_slot(data, size, head, mcloc_ev_word(MCLOC_EV_CPU | lost, 0, cpu),
					time);
			lost = 0;
		}
		if (type == MCLOC_EV_EXIT && payload > MCLOC_EV_PAYLOAD_MAX)
			payload = MCLOC_EV_PAYLOAD_MAX;
		head = put_slot(data, size, head, mcloc_ev_word(type | lost, depth, payload), time);
		if (type == MCLOC_EV_CALL)
			head = put_slot(data, size, head, cpu, extra);
	}
	if (nitems)
		head = put_data(data, size, head, time, depth, items, nitems);
	__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
}

/* A callback's session, by the ops it is called for: the session lives
 * until its ops is unregistered and a grace period has passed. */
static inline const struct session *session_of(const struct mcloc_ops *ops)
{
	return (const struct session *)((const char *)ops - offsetof(struct session, ops));
}

static bool wanted_thread(const struct session *s)
{
	return !s->tid || my_tid() == s->tid;
}

/* The tracers' callbacks run inside the dispatcher's read-side section
 * (every caller of an ops's func holds one): the session they read stays
 * until it ends, without a section of their own. */
/* Where IP is, or would go, among the N entries at BASE (STRIDE bytes
 * apart, each starting with a site), sorted by site. */
static size_t site_index(const void *base, size_t n, size_t stride, uintptr_t ip)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (*(const uintptr_t *)((const char *)base + mid * stride) < ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The triggers of the site IP (MCLOC_TRIGGER_* bits), and trace_on's
 * effect, which comes before the call is traced. */
static __attribute__((noinline)) unsigned triggers_at(const struct session *s,
						     const struct named *nm, uintptr_t ip)
{
	size_t lo = site_index(nm->trig, nm->ntrig, sizeof(*nm->trig), ip);
	unsigned tr = lo < nm->ntrig && nm->trig[lo].site == ip ? nm->trig[lo].actions : 0;

	if (tr & MCLOC_TRIGGER_ON)
		__atomic_store_n((int *)&s->off, 0, __ATOMIC_RELAXED);
	return tr;
}

static inline bool tracing_off(const struct session *s)
{
	return __atomic_load_n(&s->off, __ATOMIC_RELAXED);
}

/* What the triggers TR do after the call's event (at depth DEPTH). */
static void triggers_after(const struct session *s, unsigned tr, uint64_t t, unsigned depth)
{
	if (tr & MCLOC_TRIGGER_BACKTRACE)
		put_event(s, MCLOC_EV_MARK, t, MCLOC_MARK_BACKTRACE, 0, depth, NULL, 0);
	if (tr & MCLOC_TRIGGER_SNAPSHOT) {
		put_event(s, MCLOC_EV_MARK, t, MCLOC_MARK_SNAPSHOT, 0, depth, NULL, 0);
		__atomic_fetch_add(&s->hdr->snapshots, 1, __ATOMIC_RELEASE);
	}
	if (tr & MCLOC_TRIGGER_OFF)
		__atomic_store_n((int *)&s->off, 1, __ATOMIC_RELAXED);
}

/* The arguments and return value NM says to capture at site IP, or NULL. */
static inline const struct mcloc_args_ent *args_at(const struct named *nm, uintptr_t ip)
{
	if (__builtin_expect(!nm->nargs, 1))
		return NULL;
	size_t i = site_index(nm->args, nm->nargs, sizeof(*nm->args), ip);

	return i < nm->nargs && nm->args[i].site == ip ? &nm->args[i] : NULL;
}

/* The items of A's arguments of the call at IP (from PARENT, REGS) into
 * ITEMS (MCLOC_EV_DATA_MAX bytes): their length. */
static size_t args_items(uintptr_t ip, uintptr_t parent, struct mcloc_regs *regs,
			 const struct mcloc_args_ent *a, uint8_t *items)
{
	struct mcr_argregs ar;
	const struct mcr_entry_args *e = &mcr_entry_args;
	/* (A framed site's stack arguments lie above its return slot, as an
	 * entry's above the stack pointer.) */
	const uintptr_t *fs = mcr_call_framed;
	bool have = mcr_call_argregs(regs, e->args, fs ? fs : regs ? NULL : e->slot, e->after,
				     parent, fs || mcr_call_from_entry(ip), &ar);

	return a->nargs ? mcr_args_capture(a, have ? &ar : NULL, items) : 0;
}

/* An event with the arguments A says (apart: the common event keeps its
 * small frame). */
static __attribute__((noinline)) void put_with_args(const struct session *s, unsigned type,
						    uint64_t t, uintptr_t ip, uintptr_t parent,
						    unsigned depth, struct mcloc_regs *regs,
						    const struct mcloc_args_ent *a)
{
	uint8_t items[MCLOC_EV_DATA_MAX];
	size_t n = args_items(ip, parent, regs, a, items);

	put_event(s, type, t, ip, parent, depth, items, (uint32_t)n);
}

static void function_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
			struct mcloc_regs *regs)
{
	const struct session *s = session_of(ops);

	regs = regs ? regs : mcr_entry_regs;	/* (another ops's, at a shared site) */

	if (!wanted_thread(s))
		return;
	const struct named *nm = __atomic_load_n(&s->named, __ATOMIC_ACQUIRE);
	unsigned tr = nm->ntrig ? triggers_at(s, nm, ip) : 0;

	if (!tracing_off(s)) {
		uint64_t t = mcr_stamp();
		const struct mcloc_args_ent *a = args_at(nm, ip);

		if (a)
			put_with_args(s, MCLOC_EV_CALL, t, ip, parent, 0, regs, a);
		else
			put_event(s, MCLOC_EV_CALL, t, ip, parent, 0, NULL, 0);
		if (tr)
			triggers_after(s, tr, t, 0);
	}
}

static bool in_graph_set(const struct named *nm, uintptr_t ip)
{
	size_t i = site_index(nm->graph, nm->ngraph, sizeof(*nm->graph), ip);

	return i < nm->ngraph && nm->graph[i] == ip;
}

/* What a hooked call of the graph carries to its return, in the hook's
 * word: whether it entered set_graph_function, and the return value its
 * site's arguments entry asks for, copied (the tables are replaced while
 * a call runs, and retired a grace period later: struct named). */
#define GRAPH_ENTERING 1u
#define GRAPH_RET 2u

static inline uintptr_t graph_arg(const struct mcloc_args_ent *a, bool entering)
{
	uintptr_t arg = entering ? GRAPH_ENTERING : 0;

	if (a && a->has_ret)
		arg |= GRAPH_RET | (uintptr_t)a->ret.fmt << 8 | (uintptr_t)a->ret.size << 16 |
		       (uintptr_t)a->ret.in << 24 | (uintptr_t)a->ret.index << 32;
	return arg;
}

/* A traced call of the graph returned (RR: its result registers, at T1),
 * or a longjmp or an exception left it. */
static void graph_done(uintptr_t ip, void *arg, unsigned gen, uint64_t t0, uint64_t t1,
		       unsigned depth, const struct mcr_retregs *rr)
{
	mcr_read_lock();
	const struct session *s = NULL;

	for (unsigned k = 0; k < MCLOC_SESSIONS_MAX && !s; k++) {
		const struct session *x = mcr_rcu_deref(sessions[k]);

		s = x && x->gen == gen ? x : NULL;
	}
	if (s) {
		uintptr_t w = (uintptr_t)arg;
		const struct mcloc_arg ret = { (uint8_t)(w >> 8), (uint8_t)(w >> 16),
					       (uint8_t)(w >> 24), (uint8_t)(w >> 32) };
		uint8_t items[2 + MCLOC_ARG_STR_MAX];
		size_t n = (w & GRAPH_RET) && rr ? mcr_ret_capture(&ret, rr, items) : 0;

		put_event(s, rr ? MCLOC_EV_EXIT : MCLOC_EV_LEFT, t1, rr ? t1 - t0 : ip, 0, depth,
			  items, (uint32_t)n);
		struct my_ring *m = &mine[s->slot];

		if (((uintptr_t)arg & GRAPH_ENTERING) && m->gen == gen && m->inside)
			m->inside--;
	}
	mcr_read_unlock();
}

/* graph_cb's hook and event of a call whose arguments A are captured
 * (ARG: the hook's): what mcr_hook_call() said.  The arguments are read
 * before the hook, which overwrites the caller's return address, by which
 * the args trampoline's frame says where the stack arguments are. */
static __attribute__((noinline)) int hook_with_args(const struct session *s, uint64_t t,
						    uintptr_t ip, uintptr_t parent, unsigned depth,
						    struct mcloc_regs *regs,
						    const struct mcloc_args_ent *a, uintptr_t arg)
{
	uint8_t items[MCLOC_EV_DATA_MAX];
	size_t n = args_items(ip, parent, regs, a, items);
	int d = mcr_hook_call(regs, ip, parent, graph_done, (void *)arg, s->gen, t);

	put_event(s, d >= 0 ? MCLOC_EV_ENTRY : MCLOC_EV_UNTIMED, t, ip, parent,
		  d >= 0 ? (unsigned)d : depth, items, (uint32_t)n);
	return d;
}

static void graph_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
		     struct mcloc_regs *regs)
{
	const struct session *s = session_of(ops);

	regs = regs ? regs : mcr_entry_regs;	/* (another ops's, at a shared site) */

	if (!wanted_thread(s))
		return;
	bool entering = false;
	const struct named *nm = __atomic_load_n(&s->named, __ATOMIC_ACQUIRE);

	if (nm->ngraph) {
		if (mine[s->slot].gen != s->gen)
			my_ring(s);
		entering = in_graph_set(nm, ip);
		if (!entering && !mine[s->slot].inside)
			return;	/* not under set_graph_function */
	}
	unsigned depth = mcr_hook_depth(ip, parent, graph_done, s->gen);

	if (s->max_depth && depth >= s->max_depth)
		return;
	unsigned tr = nm->ntrig ? triggers_at(s, nm, ip) : 0;

	/* (Off: no call is hooked, so that none ends unseen; the returns
	 * of those hooked before still come.) */
	if (tracing_off(s))
		return;
	uint64_t t = mcr_stamp();
	const struct mcloc_args_ent *a = args_at(nm, ip);
	uintptr_t arg = graph_arg(a, entering);
	bool with_args = a && a->nargs;
	int d = with_args ? hook_with_args(s, t, ip, parent, depth, regs, a, arg)
			  : mcr_hook_call(regs, ip, parent, graph_done, (void *)arg, s->gen, t);

	if (!with_args)
		put_event(s, d >= 0 ? MCLOC_EV_ENTRY : MCLOC_EV_UNTIMED, t, ip, parent,
			  d >= 0 ? (unsigned)d : depth, NULL, 0);
	if (entering && d >= 0)
		mine[s->slot].inside++;
	if (tr)
		triggers_after(s, tr, t, d >= 0 ? (unsigned)d : depth);
}

/* ---- starting, refreshing, stopping --------------------------------------- */

struct collect {
	const char *glob;
	uintptr_t *v;
	size_t n, cap;
	bool failed;
};

static void collect_site(uintptr_t site, const char *name, uint32_t state, void *arg)
{
	struct collect *c = arg;

	(void)state;
	if (fnmatch(c->glob, name, 0))
		return;
	uintptr_t *v = mc_grown(c->v, &c->cap, c->n, sizeof(*v), 64);

	if (!v) {
		c->failed = true;
		return;
	}
	c->v = v;
	c->v[c->n++] = site;
}

static int cmp_uptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* SPEC's triggers (GLOB:ACTION,...) into NM, by site, one entry each:
 * 0, or -errno with ERR.  At the start (!LATE) each glob must match a
 * function; remade for an image that registers later, they extend to
 * its functions. */
static int named_triggers(struct named *nm, const char *spec, bool late, int *off,
			  char *err, size_t errlen)
{
	static const char *const names[] = MCLOC_TRIGGER_NAMES;
	char *buf = strdup(spec), *save = NULL;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (char *it = strtok_r(buf, ",", &save); it && !ret; it = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(it, ':');
		unsigned bit = 0;

		for (unsigned k = 0; colon && k < sizeof(names) / sizeof(names[0]); k++)
			if (!strcmp(colon + 1, names[k]))
				bit = 1u << k;
		if (!colon || colon == it || !bit) {
			snprintf(err, errlen, "--trigger '%s': not FUNC:ACTION, ACTION one of "
					      "trace_on, trace_off, backtrace, snapshot", it);
			ret = -EINVAL;
			break;
		}
		*colon = 0;
		struct collect c = { .glob = it };

		mcr_each_site_name(collect_site, &c);
		struct trig *v = c.n ? realloc(nm->trig, (nm->ntrig + c.n) * sizeof(*v)) : NULL;

		if (c.failed || (c.n && !v)) {
			ret = -ENOMEM;
			snprintf(err, errlen, "out of memory");
		} else if (!c.n && !late) {
			ret = -ENOENT;
			snprintf(err, errlen, "--trigger '%s': matches no traced function", it);
		} else if (c.n) {
			nm->trig = v;
			for (size_t i = 0; i < c.n; i++)
				nm->trig[nm->ntrig++] = (struct trig){ c.v[i], bit };
			if (bit == MCLOC_TRIGGER_ON && off)
				*off = 1;	/* (on when one of them is hit) */
		}
		free(c.v);
	}
	free(buf);
	if (ret || !nm->ntrig)
		return ret;
	qsort(nm->trig, nm->ntrig, sizeof(*nm->trig), cmp_uptr);
	size_t k = 0;

	for (size_t i = 0; i < nm->ntrig; i++) {
		if (k && nm->trig[k - 1].site == nm->trig[i].site)
			nm->trig[k - 1].actions |= nm->trig[i].actions;
		else
			nm->trig[k++] = nm->trig[i];
	}
	nm->ntrig = k;
	return 0;
}

/* Is E an entry this library can capture? */
static bool args_ent_valid(const struct mcloc_args_ent *e)
{
	bool ok = e->nargs <= MCLOC_ARGS_MAX && e->has_ret <= 1 &&
		  !memcmp(e->reserved, (uint8_t[6]){ 0 }, 6) &&
		  (!e->has_ret || mcr_arg_valid(&e->ret, true));

	for (unsigned k = 0; ok && k < e->nargs; k++)
		ok = mcr_arg_valid(&e->args[k], false);
	return ok;
}

/* The N entries at V checked, and copied into *OUT by site: 0, or -errno
 * with ERR (-EINVAL: one is not valid, or two name one site). */
static int take_args(const struct mcloc_args_ent *v, size_t n, struct mcloc_args_ent **out,
		     char *err, size_t errlen)
{
	*out = NULL;
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!args_ent_valid(&v[i])) {
			snprintf(err, errlen, "argument entry %zu (site %#llx) is not one this "
					      "library knows", i, (unsigned long long)v[i].site);
			return -EINVAL;
		}
	if (!(*out = malloc(n * sizeof(**out)))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memcpy(*out, v, n * sizeof(**out));
	qsort(*out, n, sizeof(**out), cmp_uptr);
	for (size_t i = 1; i < n; i++)
		if ((*out)[i].site == (*out)[i - 1].site) {
			snprintf(err, errlen, "site %#llx has two argument entries",
				 (unsigned long long)(*out)[i].site);
			return -EINVAL;
		}
	return 0;
}

/* mcr_each_site_name()'s walk for argument globs: each site of a
 * function some glob matches, unless the controller named it (ARGS), gets
 * the entry the globs make, in their order. */
struct glob_args {
	const struct session *s;
	struct mcloc_args_ent *v;
	size_t n, cap;
	bool failed;
};

static void collect_args(uintptr_t site, const char *name, uint32_t state, void *arg)
{
	struct glob_args *g = arg;
	const struct session *s = g->s;
	struct mcloc_args_ent e = { .site = site };
	bool any = false, replaced = false;

	(void)state;
	size_t i = site_index(s->args, s->nargs, sizeof(*s->args), site);
	if (i < s->nargs && s->args[i].site == site)
		return;
	for (size_t k = 0; k < s->naglobs; k++)
		if (!fnmatch(s->aglobs[k].glob, name, 0)) {
			mcloc_args_merge(&e, &s->aglobs[k].e, &replaced);
			any = true;
		}
	struct mcloc_args_ent *v = any ? mc_grown(g->v, &g->cap, g->n, sizeof(*v), 64) : NULL;

	if (any && !v)
		g->failed = true;
	else if (any) {
		g->v = v;
		g->v[g->n++] = e;
	}
}

static void named_free(struct named *nm)
{
	if (!nm)
		return;
	free(nm->graph);
	free(nm->trig);
	free(nm->args);
	free(nm);
}

static void named_retire(void *nm)
{
	named_free(nm);
}

/* Do A and B choose the same?  (Not the same bytes, where padding may
 * differ, says only that they are made again.) */
static bool named_same(const struct named *a, const struct named *b)
{
	if (a->ngraph != b->ngraph || a->ntrig != b->ntrig || a->nargs != b->nargs ||
	    (a->ngraph && memcmp(a->graph, b->graph, a->ngraph * sizeof(*a->graph))) ||
	    (a->nargs && memcmp(a->args, b->args, a->nargs * sizeof(*a->args))))
		return false;
	for (size_t i = 0; i < a->ntrig; i++)
		if (a->trig[i].site != b->trig[i].site || a->trig[i].actions != b->trig[i].actions)
			return false;
	return true;
}

/*
 * What S's patterns choose among the functions registered now (LATE: made
 * again for an image that registered later, where a glob matching nothing
 * is no error): NULL with ERR on failure (*RET: -errno).
 */
static struct named *named_make(struct session *s, bool late, int *ret, char *err, size_t errlen)
{
	struct named *nm = calloc(1, sizeof(*nm));

	*ret = -ENOMEM;
	snprintf(err, errlen, "out of memory");
	if (!nm)
		return NULL;
	if (s->graph) {
		/* Comma-separated, as the filter's: at the start (!LATE) each
		 * pattern must match a function. */
		struct collect c = { 0 };
		char *buf = strdup(s->graph), *save = NULL;
		const char *unmatched = NULL;

		c.failed = !buf;
		for (char *p = buf ? strtok_r(buf, ", \t\n", &save) : NULL; p && !c.failed;
		     p = strtok_r(NULL, ", \t\n", &save)) {
			size_t before = c.n;

			c.glob = p;
			mcr_each_site_name(collect_site, &c);
			if (c.n == before && !late) {
				unmatched = p;
				break;
			}
		}
		if (c.failed || unmatched) {
			*ret = c.failed ? -ENOMEM : -ENOENT;
			if (c.failed)
				snprintf(err, errlen, "out of memory");
			else
				snprintf(err, errlen, "--graph-function '%s': matches no traced function",
					 unmatched);
			free(c.v);
			free(buf);
			goto fail;
		}
		free(buf);
		qsort(c.v, c.n, sizeof(*c.v), cmp_uptr);
		size_t k = 0;

		for (size_t i = 0; i < c.n; i++)	/* a site two patterns match, once */
			if (!k || c.v[k - 1] != c.v[i])
				c.v[k++] = c.v[i];
		nm->graph = c.v;
		nm->ngraph = k;
	}
	if (s->triggers && (*ret = named_triggers(nm, s->triggers, late, late ? NULL : &s->off,
						  err, errlen)) < 0)
		goto fail;
	/* The controller's entries, then those of the argument globs at
	 * the sites it did not name (the functions of images registered
	 * since it looked), by site. */
	struct glob_args g = { .s = s };

	if (s->naglobs)
		mcr_each_site_name(collect_args, &g);
	if (g.failed || !(nm->args = malloc((s->nargs + g.n + 1) * sizeof(*nm->args)))) {
		*ret = -ENOMEM;
		free(g.v);
		goto fail;
	}
	/* (memcpy of no bytes from NULL is still undefined.) */
	if (s->nargs)
		memcpy(nm->args, s->args, s->nargs * sizeof(*nm->args));
	if (g.n)
		memcpy(nm->args + s->nargs, g.v, g.n * sizeof(*nm->args));
	free(g.v);
	nm->nargs = s->nargs + g.n;
	qsort(nm->args, nm->nargs, sizeof(*nm->args), cmp_uptr);
	*ret = 0;
	return nm;
fail:
	named_free(nm);
	return NULL;
}

static void session_free(struct session *s)
{
	if (!s)
		return;
	named_free(s->named);
	free(s->args);
	for (size_t k = 0; k < s->naglobs; k++)
		free(s->aglobs[k].glob);
	free(s->aglobs);
	if (s->hdr)
		munmap(s->hdr, s->size);
	free(s->filter);
	free(s->notrace);
	free(s->graph);
	free(s->triggers);
	free(s);
}

bool mcr_trace_active(void)
{
	for (unsigned k = 0; k < MCLOC_SESSIONS_MAX; k++)
		if (__atomic_load_n(&sessions[k], __ATOMIC_RELAXED))
			return true;
	return false;
}

int mcr_trace_start(const struct mcloc_req_trace *q, const char *filter, const char *notrace,
		    const char *graph, const char *triggers, const struct mcloc_args_ent *args,
		    size_t nargs, const struct mcr_args_glob *aglobs, size_t naglobs,
		    int *fd_out, uint64_t *size_out, char *err, size_t errlen)
{
	struct session *s = NULL;
	int fd = -1, ret;
	uint32_t ring_size = q->ring_kib << 10;
	size_t stride = (sizeof(struct mcloc_ring) + ring_size + 63) & ~(size_t)63;
	size_t off = (sizeof(struct mcloc_ring_hdr) + 63) & ~(size_t)63;

	unsigned slot = 0;

	pthread_mutex_lock(&trace_lock);
	while (slot < MCLOC_SESSIONS_MAX && sessions[slot])
		slot++;
	if (slot == MCLOC_SESSIONS_MAX) {
		snprintf(err, errlen, "%d traces run already", MCLOC_SESSIONS_MAX);
		ret = -EBUSY;
		goto out;
	}
	if ((q->tracer != MCLOC_TRACE_FUNCTION && q->tracer != MCLOC_TRACE_GRAPH) ||
	    q->ring_kib < 4 || q->ring_kib > 65536 || (q->ring_kib & (q->ring_kib - 1)) ||
	    !q->rings || q->rings > 4096 || (q->flags & ~(uint32_t)MCLOC_TRACE_FLAGS) ||
	    (uint64_t)q->rings * q->ring_kib > (uint64_t)MCLOC_RINGS_MAX_MIB << 10) {
		snprintf(err, errlen, "bad trace request (tracer %u, %u KiB rings, %u rings: "
			 "at most %u MiB in all)", q->tracer, q->ring_kib, q->rings,
			 MCLOC_RINGS_MAX_MIB);
		ret = -EINVAL;
		goto out;
	}
	if ((ret = mcloc_init()) < 0) {
		snprintf(err, errlen, "the runtime cannot start: %s", strerror(-ret));
		goto out;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	s->size = off + (size_t)q->rings * stride;
	s->data_offset = off;
	s->ring_stride = stride;
	s->ring_size = ring_size;
	s->rings = q->rings;
	s->tracer = q->tracer;
	s->max_depth = q->max_depth;
	s->tid = q->tid;
	s->overwrite = q->flags & MCLOC_TRACE_OVERWRITE;
	s->wait = !s->overwrite && (q->flags & MCLOC_TRACE_WAIT);
	s->follow = q->flags & MCLOC_TRACE_FOLLOW;
	s->gen = ++sess_gen;
	s->slot = slot;
	if ((graph[0] && !(s->graph = strdup(graph))) ||
	    (triggers[0] && !(s->triggers = strdup(triggers))) ||
	    (naglobs && !(s->aglobs = calloc(naglobs, sizeof(*s->aglobs))))) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (; s->naglobs < naglobs; s->naglobs++) {
		if (!args_ent_valid(&aglobs[s->naglobs].e)) {
			ret = -EINVAL;
			snprintf(err, errlen, "the entry of argument glob '%s' is not one this "
					      "library knows", aglobs[s->naglobs].glob);
			goto out;
		}
		s->aglobs[s->naglobs].e = aglobs[s->naglobs].e;
		if (!(s->aglobs[s->naglobs].glob = strdup(aglobs[s->naglobs].glob))) {
			ret = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	if ((ret = take_args(args, nargs, &s->args, err, errlen)) < 0)
		goto out;
	s->nargs = nargs;
	if (!(s->named = named_make(s, false, &ret, err, errlen)))
		goto out;
	/* (Sealed at its size: the controller checks the seals, as a memfd
	 * that may shrink under its mapping would fault it.) */
	fd = memfd_create("mcloc-trace", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)s->size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
	    /* (A ring's pages are populated when a thread takes it, in one
	     * call: else its first lap takes a page fault per 256 events in
	     * the traced thread.  Rings no thread takes cost nothing.) */
	    (s->hdr = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
		    MAP_FAILED) {
		ret = -errno;
		s->hdr = NULL;
		snprintf(err, errlen, "shared memory of %zu bytes: %s", s->size, strerror(-ret));
		goto out;
	}
	*s->hdr = (struct mcloc_ring_hdr){
		.magic = MCLOC_RING_MAGIC, .version = MCLOC_RING_VERSION, .rings = q->rings,
		.ring_size = ring_size, .ring_stride = (uint32_t)stride,
		.data_offset = (uint32_t)off, .ticks = mcr_stamp_is_tick(),
		.start_ns = now_ns(), .start_time = mcr_stamp(),
		.flags = s->overwrite ? MCLOC_RING_OVERWRITE : s->wait ? MCLOC_RING_WAIT : 0,
	};
	/* A first clock pair a millisecond on, before the controller has
	 * the rings: a program that ends before the first tick, or without
	 * its destructors (_exit, exec, a fatal signal), leaves a pair to
	 * time its events by, which the controller waited for in vain. */
	if (s->hdr->ticks)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	s->hdr->now_ns = now_ns();
	s->hdr->now_time = mcr_stamp();

	/* (Arguments come from the same registers a return hook needs: the
	 * argument frame where it is read, else every register.) */
	s->ops = (struct mcloc_ops){ .sz = sizeof(s->ops),
					.func = q->tracer == MCLOC_TRACE_GRAPH ? graph_cb : function_cb,
					.flags = q->tracer == MCLOC_TRACE_GRAPH || s->nargs ||
							 s->naglobs ?
						 MCR_HOOK_OPS_FLAGS : 0 };
	const char *failed = NULL;	/* the globs refused */

	/* Pattern by pattern: one may name functions of an image that
	 * registers later (image_added()); refused only when none of them
	 * matches a function now, as ftrace refuses a filter that matches
	 * nothing (an empty filter would mean everything). */
	if (filter[0] && mcr_add_patterns(&s->ops, filter, false, NULL) == 0)
		failed = filter;
	else if (notrace[0] && mcr_add_patterns(&s->ops, notrace, true, NULL) == 0)
		failed = notrace;
	if (failed) {
		ret = -ENOENT;
		snprintf(err, errlen, "%s '%s': matches no traced function",
			 failed == filter ? "--filter" : "--notrace", failed);
		mcloc_ops_free(&s->ops);
		goto out;
	}
	if ((filter[0] && !(s->filter = strdup(filter))) ||
	    (notrace[0] && !(s->notrace = strdup(notrace)))) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		mcloc_ops_free(&s->ops);
		goto out;
	}
	mcr_rcu_assign(sessions[slot], s);
	if ((ret = mcloc_register_ops(&s->ops)) < 0) {
		mcr_rcu_assign(sessions[slot], NULL);
		mcr_synchronize_rcu();
		mcloc_ops_free(&s->ops);
		if (ret == -EILSEQ)	/* (strerror's words would say nothing) */
			snprintf(err, errlen, "cannot enable the sites: one does not hold what "
				 "libmcloc left there (a debugger's breakpoint on it, or another "
				 "tool's code), so none was changed");
		else
			snprintf(err, errlen, "cannot enable the sites: %s", strerror(-ret));
		goto out;
	}
	*fd_out = fd;
	*size_out = s->size;
	fd = -1;
	s = NULL;
	ret = (int)slot;
out:
	if (fd >= 0)
		close(fd);
	session_free(s);
	pthread_mutex_unlock(&trace_lock);
	return ret;
}

/* A fresh clock pair and the count of rings taken, for the reader: the
 * program writes them from its own copies, whatever the header holds. */
static void publish(struct session *s)
{
	struct mcloc_ring_hdr *h = s->hdr;
	uint32_t taken = __atomic_load_n(&s->next_ring, __ATOMIC_RELAXED);

	__atomic_store_n(&h->next_ring, taken < s->rings ? taken : s->rings, __ATOMIC_RELEASE);
	__atomic_store_n(&h->clock_seq, ++s->clock_seq, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	h->now_ns = now_ns();
	h->now_time = mcr_stamp();
	__atomic_store_n(&h->clock_seq, ++s->clock_seq, __ATOMIC_RELEASE);
}

void mcr_trace_tick(void)
{
	/* (Only the control thread starts, ticks and stops.) */
	for (unsigned k = 0; k < MCLOC_SESSIONS_MAX; k++) {
		struct session *s = __atomic_load_n(&sessions[k], __ATOMIC_ACQUIRE);

		if (s)
			publish(s);
	}
}

unsigned mcr_trace_snapshot(void)
{
	unsigned n = 0;

	for (unsigned k = 0; k < MCLOC_SESSIONS_MAX; k++) {
		struct session *s = __atomic_load_n(&sessions[k], __ATOMIC_ACQUIRE);

		if (s)
			__atomic_fetch_add(&s->hdr->snapshots, 1, __ATOMIC_RELEASE);
		n += s && s->overwrite;
	}
	return n;
}

void mcr_trace_exiting(void)
{
	for (unsigned k = 0; k < MCLOC_SESSIONS_MAX; k++) {
		struct session *s = __atomic_load_n(&sessions[k], __ATOMIC_ACQUIRE);

		if (s)
			__atomic_store_n(&s->hdr->exiting, 1, __ATOMIC_RELEASE);
	}
}

void mcr_trace_stop(int id)
{
	pthread_mutex_lock(&trace_lock);
	struct session *s = id >= 0 && id < MCLOC_SESSIONS_MAX ? sessions[id] : NULL;

	if (s) {
		publish(s);
		/* (A writer waiting for room must not hold up the grace
		 * periods below: it drops its event instead.) */
		__atomic_store_n(&s->stopping, true, __ATOMIC_RELEASE);
		mcloc_unregister_ops(&s->ops);	/* every site a NOP, no callback */
		mcloc_ops_free(&s->ops);
		mcr_rcu_assign(sessions[id], NULL);
		mcr_synchronize_rcu();			/* late returns are done */
		publish(s);				/* every ring taken */
		__atomic_store_n(&s->hdr->done, 1, __ATOMIC_RELEASE);
		session_free(s);
	}
	pthread_mutex_unlock(&trace_lock);
}

void mcr_trace_stop_all(void)
{
	for (int k = 0; k < MCLOC_SESSIONS_MAX; k++)
		mcr_trace_stop(k);
}

/* S's patterns over the functions registered now, published in place of
 * what they chose before (retired: struct named).  Out of memory, the
 * earlier choice stays, and a line says so. */
static void renamed(struct session *s)
{
	char err[256];
	int ret;
	struct named *nm = named_make(s, true, &ret, err, sizeof(err));

	if (!nm) {
		mcr_warn("trace: the patterns of a session do not extend to a new image: %s", err);
		return;
	}
	struct named *old = s->named;

	if (named_same(nm, old)) {
		named_free(nm);
		return;
	}
	__atomic_store_n(&s->named, nm, __ATOMIC_RELEASE);
	/* (Not waited for: this may run under the dynamic loader's lock.) */
	if (mcr_defer(named_retire, old))
		mcr_say(1, "trace: a replaced table is leaked: no memory to retire it");
}

/*
 * A new image registered (registry.c, before its sites are covered): the
 * running trace's patterns extend to its functions.  Not when it
 * registers from inside a start or stop, which covers it already, nor
 * waiting for one: this may run under the dynamic loader's lock.
 */
static void (*prev_image_added)(void);

static void image_added(void)
{
	if (prev_image_added)
		prev_image_added();
	if (pthread_mutex_trylock(&trace_lock))
		return;
	for (unsigned k = 0; k < MCLOC_SESSIONS_MAX; k++) {
		struct session *s = sessions[k];

		if (s && s->filter)
			mcr_add_patterns(&s->ops, s->filter, false, NULL);
		if (s && s->notrace)
			mcr_add_patterns(&s->ops, s->notrace, true, NULL);
		if (s && (s->graph || s->triggers || s->naglobs))
			renamed(s);
	}
	pthread_mutex_unlock(&trace_lock);
}

__attribute__((constructor(103))) static void trace_hook(void)
{
	prev_image_added = mcr_hooks.image_added;
	mcr_hooks.image_added = image_added;
	mcr_hooks.keep_departed = mcr_trace_active;
}

/*
 * fork() (fork.c): the sessions are the parent's, as are their rings and
 * controllers.  The child withdraws them and unregisters their ops, so
 * that its sites are what the program's own ops and the environment's
 * tracer make them, and unmaps its view of the rings (without marking
 * them done: the parent still writes them).  Its thread asks its id
 * again.
 */
/* Set in a child forked while a session that follows children ran: it
 * holds until a controller traces it (control.c). */
static bool forked_followed;

bool mcr_trace_forked_followed(void)
{
	bool f = forked_followed;

	forked_followed = false;
	return f;
}

void mcr_trace_fork(enum mcr_fork stage)
{
	if (stage == MCR_FORK_CHILD) {
		mytid = 0;
		memset(mine, 0, sizeof(mine));
		for (unsigned k = 0; k < MCLOC_SESSIONS_MAX; k++) {
			struct session *s = sessions[k];

			if (!s)
				continue;
			forked_followed |= s->follow;
			mcr_rcu_assign(sessions[k], NULL);
			mcloc_unregister_ops(&s->ops);
			mcloc_ops_free(&s->ops);
			session_free(s);
		}
	}
	mcr_fork_lock(&trace_lock, stage);
}
