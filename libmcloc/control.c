// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The control channel: a running program answers a controller (the mcloc
 * command) over a Unix socket, as tracefs answers cat and echo.  Off
 * unless asked for, with MCLOC_CONTROL=1 (read with secure_getenv: never
 * in a setuid program) or mcloc_control_start().
 *
 * One thread, started with every signal blocked so that it takes none of
 * the program's, polls the listening socket and up to CONN_MAX
 * connections; the program's own threads never wait for it.  Each
 * connection is checked with SO_PEERCRED: the same user, or root, else it
 * is closed and the refusal written to standard error.  Requests are read
 * into a fixed buffer per connection; a message that is too long, of an
 * unknown type or version, or malformed gets an error reply and the
 * connection is closed, as is one that leaves a request unfinished for
 * STALL_MS, or sends none for as long while it is not the one tracing
 * (else 8 silent connections would lock every controller out).  Replies
 * are sent with a timeout, so a controller that stops reading cannot hold
 * the thread either.  The protocol: <mcloc/control.h>.
 */
#include <mcloc/mcloc.h>
#include <mcloc/control.h>
#include "mcr.h"
#include "images.h"
#include "tracer.h"
#include "trace.h"
#include "../base/grow.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CONN_MAX 8
#define STALL_MS 5000


struct conn {
	int fd;			/* -1: free */
	pid_t pid;		/* the peer's */
	int session;		/* its trace's session (trace.c), or -1 */
	char tracer[16];	/* ... which tracer */
	size_t have;		/* bytes of the request in buf */
	uint64_t since;		/* when its request's first byte came, or (none
				 * pending) its last request was answered or it
				 * connected, ms */
	/* MCLOC_REQ_ARGS's entries and MCLOC_REQ_ARGS_GLOB's globs, for its
	 * next trace request. */
	struct mcloc_args_ent *args;
	size_t nargs, cap_args;
	struct mcr_args_glob *aglobs;
	size_t naglobs, cap_aglobs;
	_Alignas(8) uint8_t buf[MCLOC_REQ_MAX];
};

static void drop_args(struct conn *c)
{
	free(c->args);
	c->args = NULL;
	c->nargs = c->cap_args = 0;
	for (size_t k = 0; k < c->naglobs; k++)
		free(c->aglobs[k].glob);
	free(c->aglobs);
	c->aglobs = NULL;
	c->naglobs = c->cap_aglobs = 0;
}

/* The one server of the process (there is one socket per process). */
static struct {
	pthread_mutex_t lock;	/* start and stop */
	bool running;
	int lfd, wake[2];
	pthread_t thread;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct conn conn[CONN_MAX];
	int controllers;	/* connections that trace */
} ctl = { .lock = PTHREAD_MUTEX_INITIALIZER, .lfd = -1, .wake = { -1, -1 } };

/* "pid A, pid B": the controllers tracing now, into BUF. */
static void controller_list(char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	for (int i = 0; i < CONN_MAX && at < len; i++)
		if (ctl.conn[i].fd >= 0 && ctl.conn[i].session >= 0) {
			int n = snprintf(buf + at, len - at, "%spid %d", at ? ", " : "",
					 (int)ctl.conn[i].pid);

			at += n > 0 ? (size_t)n : 0;
		}
}

/* One "libmcloc: control: ..." line on standard error. */
#define say(...) mcr_warn("control: " __VA_ARGS__)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* MCLOC_CONTROL=wait: the registration of the first image with sites
 * waits (WAIT_S at most) until a controller has asked for a trace, so that
 * mcloc run traces a program from main() on.  A trace refused (a filter
 * that matches nothing) releases it as well: no one is coming back. */
#define WAIT_S 10
static struct {
	pthread_mutex_t lock;
	pthread_cond_t traced_cond;
	pthread_cond_t held_cond;	/* holding set, or waiting ended */
	bool waiting, traced;
	bool holding;	/* the program waits at its hold now */
	int self;	/* mcr_main_registers_itself(), -1 until asked */
	void (*prev_hook)(void);
} first = { .lock = PTHREAD_MUTEX_INITIALIZER, .traced_cond = PTHREAD_COND_INITIALIZER,
	    .held_cond = PTHREAD_COND_INITIALIZER, .self = -1 };

static void first_image_added(void)
{
	if (first.prev_hook)
		first.prev_hook();
	pthread_mutex_lock(&first.lock);
	/* (An image without sites, such as the library's own, is not the
	 * program's: wait at the one that brings the first sites.  A traced
	 * library registers before a program linked with it: waiting for the
	 * program too, so that a controller's filters and arguments can name
	 * its functions.) */
	if (first.waiting && __atomic_load_n(&mcr_nrecords, __ATOMIC_RELAXED) &&
	    (mcr_main_registered() ||
	     !(first.self >= 0 ? first.self : (first.self = mcr_main_registers_itself())))) {
		struct timespec dl;

		first.holding = true;
		pthread_cond_broadcast(&first.held_cond);
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += WAIT_S;
		while (!first.traced &&
		       pthread_cond_timedwait(&first.traced_cond, &first.lock, &dl) == 0)
			;
		if (!first.traced)
			say("no controller started a trace within %d s; running on", WAIT_S);
		first.waiting = first.holding = false;
		pthread_cond_broadcast(&first.held_cond);
	}
	pthread_mutex_unlock(&first.lock);
}

/*
 * A controller asking for the sites, or for a trace, while the program is
 * to be held but has not reached its hold (its images still register: a
 * traced library's comes before the program's own) is answered once it
 * has, WAIT_S at most: what the controller names by them, and the trace's
 * filters, find the program's functions.  Not before any image has sites
 * (a controller asks until one has), nor once traced or released.
 */
static void wait_for_hold(void)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WAIT_S;
	pthread_mutex_lock(&first.lock);
	/* (Nor before a program that registers itself has: control starts
	 * in libmcloc's constructor, before the program's, so a controller
	 * that finds a program it follows, one a descendant execs, may ask
	 * first; a trace started then finds none of the functions that its
	 * --graph-function and --trigger must match.) */
	while (first.waiting && !first.holding && !first.traced &&
	       (__atomic_load_n(&mcr_nrecords, __ATOMIC_RELAXED) ||
		(first.self >= 0 ? first.self : (first.self = mcr_main_registers_itself()))) &&
	       pthread_cond_timedwait(&first.held_cond, &first.lock, &dl) == 0)
		;
	pthread_mutex_unlock(&first.lock);
}

/* A child forked under a session that follows children: held until a
 * controller traces it (or releases it), MCLOC_FOLLOW_WAIT_MS at most, so
 * that its recording starts at its first call. */
static void hold_child(void)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += MCLOC_FOLLOW_WAIT_MS / 1000;
	pthread_mutex_lock(&first.lock);
	while (!first.traced &&
	       pthread_cond_timedwait(&first.traced_cond, &first.lock, &dl) == 0)
		;
	pthread_mutex_unlock(&first.lock);
}

static void first_traced(void)
{
	pthread_mutex_lock(&first.lock);
	first.traced = true;
	pthread_cond_broadcast(&first.traced_cond);
	pthread_mutex_unlock(&first.lock);
}

/* ---- replies -------------------------------------------------------------- */

/* A reply being built: header, then payload, up to MCLOC_REP_MAX. */
struct reply {
	int fd;
	uint32_t seq;
	uint16_t type;
	size_t len;
	bool failed;		/* the peer went away or stalled */
	_Alignas(8) uint8_t buf[MCLOC_REP_MAX];
};

static void send_all(struct reply *r, const void *p, size_t n)
{
	while (n && !r->failed) {
		ssize_t w = send(r->fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r->failed = true;
			return;
		}
		p = (const uint8_t *)p + w;
		n -= (size_t)w;
	}
}

static void reply_begin(struct reply *r, uint16_t type)
{
	r->type = type;
	r->len = sizeof(struct mcloc_msg);
}

static void reply_send(struct reply *r)
{
	struct mcloc_msg m = { .len = (uint32_t)r->len, .type = r->type,
			       .version = MCLOC_WIRE_VERSION, .seq = r->seq };

	memcpy(r->buf, &m, sizeof(m));
	send_all(r, r->buf, r->len);
	r->len = sizeof(struct mcloc_msg);
}

/* Append LEN bytes (8-byte aligned when ALIGN) to R, sending the message
 * so far first when they would not fit. */
static void reply_add(struct reply *r, const void *p, size_t len, bool align)
{
	size_t pad = align ? (8 - r->len % 8) % 8 : 0;

	if (r->len + pad + len > sizeof(r->buf)) {
		reply_send(r);
		pad = 0;
	}
	if (r->len + pad + len > sizeof(r->buf))
		return;		/* (longer than any reply: dropped) */
	memset(r->buf + r->len, 0, pad);
	if (len)	/* (P may be NULL then) */
		memcpy(r->buf + r->len + pad, p, len);
	r->len += pad + len;
}

static void reply_one(struct reply *r, uint16_t type, const void *p, size_t len)
{
	reply_begin(r, type);
	reply_add(r, p, len, false);
	reply_send(r);
}

static void reply_error(struct reply *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void reply_error(struct reply *r, int err, const char *fmt, ...)
{
	struct {
		int32_t err;
		char msg[256];
	} e = { .err = err };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	reply_one(r, MCLOC_REP_ERROR, &e, sizeof(e.err) + strlen(e.msg) + 1);
}

/* ---- requests ---------------------------------------------------------- */

/* The distinct function names, sorted: names are interned per image, so
 * equal names of two images are two pointers, compared as strings. */
struct names {
	const char **v;
	size_t n, cap;
	bool failed;
};

static void collect_name(uintptr_t site, const char *name, uint32_t state, void *arg)
{
	struct names *ns = arg;

	(void)site;
	(void)state;
	if (ns->n && ns->v[ns->n - 1] == name)
		return;		/* (a function's second site) */
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 1024;
		const char **v = realloc(ns->v, cap * sizeof(*v));

		if (!v) {
			ns->failed = true;
			return;
		}
		ns->v = v;
		ns->cap = cap;
	}
	ns->v[ns->n++] = name;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int sorted_names(struct names *ns)
{
	*ns = (struct names){ 0 };
	mcr_each_site_name(collect_name, ns);
	if (ns->failed) {
		free(ns->v);
		return -ENOMEM;
	}
	if (ns->n)
		qsort(ns->v, ns->n, sizeof(*ns->v), cmp_str);
	size_t u = 0;
	for (size_t i = 0; i < ns->n; i++)
		if (!u || strcmp(ns->v[i], ns->v[u - 1]))
			ns->v[u++] = ns->v[i];
	ns->n = u;
	return 0;
}

static void do_hello(struct reply *r)
{
	struct mcloc_rep_hello h = { .pid = (uint32_t)getpid() };
	struct mcloc_stats st = { .sz = sizeof(st) };
	struct names ns;

	if (mcloc_get_stats(&st) == 0) {
		h.images = (uint32_t)st.images;
		h.records = st.records;
		h.enabled = st.enabled;
	}
	if (sorted_names(&ns) == 0) {
		h.functions = ns.n;
		free(ns.v);
	}
	mcr_comm(h.comm, sizeof(h.comm));
	if (ctl.controllers) {
		/* (The first controller's tracer; all of them are listed.) */
		for (int i = CONN_MAX; i-- > 0;)
			if (ctl.conn[i].fd >= 0 && ctl.conn[i].session >= 0)
				snprintf(h.tracer, sizeof(h.tracer), "%s", ctl.conn[i].tracer);
		controller_list(h.controller, sizeof(h.controller));
	} else {
		snprintf(h.tracer, sizeof(h.tracer), "%s", mcr_tracer_name());
	}
	reply_one(r, MCLOC_REP_HELLO, &h, sizeof(h));
}

static void do_funcs(struct reply *r, const char *glob)
{
	struct names ns;
	int err = sorted_names(&ns);

	if (err) {
		reply_error(r, -err, "out of memory");
		return;
	}
	reply_begin(r, MCLOC_REP_NAMES);
	for (size_t i = 0; i < ns.n; i++)
		if (!glob[0] || fnmatch(glob, ns.v[i], 0) == 0)
			reply_add(r, ns.v[i], strlen(ns.v[i]) + 1, false);
	if (r->len > sizeof(struct mcloc_msg))
		reply_send(r);
	free(ns.v);
	reply_one(r, MCLOC_REP_END, NULL, 0);
}

static void add_any_site(uintptr_t site, const char *name, uint32_t state, void *arg);

/* (A parked site is disabled: not in use, as after a trace stops.) */
static void add_site(uintptr_t site, const char *name, uint32_t state, void *arg)
{
	if (state & (REC_ENABLED | REC_REF_MASK | REC_REFUSED))
		add_any_site(site, name, state, arg);
}

static void add_any_site(uintptr_t site, const char *name, uint32_t state, void *arg)
{
	struct reply *r = arg;
	size_t nl = strlen(name);
	struct {
		struct mcloc_rep_site s;
		char name[256];
	} e;

	if (nl >= sizeof(e.name))
		nl = sizeof(e.name) - 1;
	e.s = (struct mcloc_rep_site){
		.site = site, .ops = (uint16_t)(state & REC_REF_MASK), .namelen = (uint16_t)nl,
		.flags = (state & REC_ENABLED ? MCLOC_SITE_ENABLED : 0) |
			 (state & REC_ENABLED_REGS ? MCLOC_SITE_REGS : 0) |
			 (state & REC_ENABLED_DIRECT ? MCLOC_SITE_DIRECT : 0) |
			 (state & REC_PARKED ? MCLOC_SITE_PARKED : 0) |
			 (state & REC_REFUSED ? MCLOC_SITE_REFUSED : 0),
	};
	memcpy(e.name, name, nl);
	e.name[nl] = 0;
	reply_add(r, &e, sizeof(e.s) + nl + 1, true);
}

static void do_sites(struct reply *r, bool all)
{
	/* (Under mcr_lock, which a batch holds too: a consistent picture.
	 * The sends have a timeout.) */
	if (all)
		wait_for_hold();
	reply_begin(r, MCLOC_REP_SITES);
	if (all)
		mcr_each_departed_site(add_any_site, r);
	mcr_each_site_name(all ? add_any_site : add_site, r);
	if (r->len > sizeof(struct mcloc_msg))
		reply_send(r);
	reply_one(r, MCLOC_REP_END, NULL, 0);
}

/* The rings' memfd to the controller, with its reply (SCM_RIGHTS). */
static void send_fd(struct reply *r, const struct mcloc_rep_trace *t, int fd)
{
	struct mcloc_msg m = { .len = sizeof(m) + sizeof(*t), .type = MCLOC_REP_TRACE,
			       .version = MCLOC_WIRE_VERSION, .seq = r->seq };
	uint8_t buf[sizeof(m) + sizeof(*t)];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} u = { 0 };
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.space,
			     .msg_controllen = sizeof(u.space) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	memcpy(buf, &m, sizeof(m));
	memcpy(buf + sizeof(m), t, sizeof(*t));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(r->fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(buf))
		r->failed = true;
}

/* A trace request of PLEN payload bytes at P from connection I: false
 * when it was malformed (the connection closes). */
/* Set by the server when it ended the trace at exit: no other starts. */
static bool exiting;

static bool do_trace(struct reply *r, int i, const uint8_t *p, size_t plen)
{
	struct mcloc_req_trace q;
	const char *g[4] = { NULL, NULL, NULL, "" };
	size_t at = sizeof(q);
	char err[300];
	int fd;
	uint64_t size;

	if (plen < sizeof(q) + 3) {
		reply_error(r, EINVAL, "a trace request needs its fields and three globs");
		return false;
	}
	memcpy(&q, p, sizeof(q));
	/* (The triggers, a fourth string, may be left out.) */
	for (int k = 0; k < 4 && (k < 3 || at < plen); k++) {
		const char *z = memchr(p + at, 0, plen - at);

		if (!z) {
			reply_error(r, EINVAL, "a trace request's globs are not NUL-terminated");
			return false;
		}
		g[k] = (const char *)p + at;
		at = (size_t)((const uint8_t *)z - p) + 1;
	}
	if (at != plen || (q.flags & ~(uint32_t)MCLOC_TRACE_FLAGS)) {
		reply_error(r, EINVAL, "a trace request with bytes past its globs, or unknown flags");
		return false;
	}
	if (__atomic_load_n(&exiting, __ATOMIC_ACQUIRE)) {
		reply_error(r, ESHUTDOWN, "the program is exiting");
		return true;
	}
	if (ctl.conn[i].session >= 0) {
		reply_error(r, EBUSY, "this connection traces already");
		return true;
	}
	if (ctl.controllers >= MCLOC_SESSIONS_MAX) {
		char who[96];

		controller_list(who, sizeof(who));
		reply_error(r, EBUSY, "%s trace this program already (%d at most)", who,
			    MCLOC_SESSIONS_MAX);
		return true;
	}
	wait_for_hold();
	int ret = mcr_trace_start(&q, g[0], g[1], g[2], g[3], ctl.conn[i].args,
				  ctl.conn[i].nargs, ctl.conn[i].aglobs, ctl.conn[i].naglobs,
				  &fd, &size, err, sizeof(err));

	drop_args(&ctl.conn[i]);
	if (ret < 0) {
		reply_error(r, -ret, "%s", err);
		first_traced();
		return true;
	}
	send_fd(r, &(struct mcloc_rep_trace){ .size = size }, fd);
	close(fd);
	ctl.conn[i].session = ret;
	ctl.controllers++;
	first_traced();
	snprintf(ctl.conn[i].tracer, sizeof(ctl.conn[i].tracer), "%s",
		 q.tracer == MCLOC_TRACE_GRAPH ? "function_graph" : "function");
	return !r->failed;
}

/* Argument entries for C's next trace: false when malformed. */
static bool do_args(struct reply *r, struct conn *c, const uint8_t *p, size_t plen)
{
	size_t n = plen / sizeof(struct mcloc_args_ent);

	if (!plen || plen % sizeof(struct mcloc_args_ent)) {
		reply_error(r, EINVAL, "an argument request needs whole entries of %zu bytes",
			    sizeof(struct mcloc_args_ent));
		return false;
	}
	if (c->session >= 0) {
		reply_error(r, EBUSY, "this connection traces already");
		return true;
	}
	if (c->nargs + n > MCLOC_ARGS_ENTS_MAX) {
		reply_error(r, E2BIG, "more than %d argument entries", MCLOC_ARGS_ENTS_MAX);
		return true;
	}
	while (c->cap_args < c->nargs + n) {
		struct mcloc_args_ent *v = mc_grown(c->args, &c->cap_args, c->cap_args,
						    sizeof(*v), 64);
		if (!v) {
			reply_error(r, ENOMEM, "out of memory");
			return true;
		}
		c->args = v;
	}
	memcpy(c->args + c->nargs, p, plen);
	c->nargs += n;
	reply_one(r, MCLOC_REP_END, NULL, 0);
	return !r->failed;
}

/* An argument glob for C's next trace: false when malformed.  (The
 * entry is checked with the trace request's, as MCLOC_REQ_ARGS's.) */
static bool do_args_glob(struct reply *r, struct conn *c, const uint8_t *p, size_t plen)
{
	struct mcloc_args_ent e;
	const size_t at = sizeof(e);

	if (plen < at + 2 || p[plen - 1] || memchr(p + at, 0, plen - at) != p + plen - 1) {
		reply_error(r, EINVAL, "an argument glob request needs an entry of %zu bytes "
				       "and one NUL-terminated glob", sizeof(e));
		return false;
	}
	memcpy(&e, p, sizeof(e));
	if (c->session >= 0) {
		reply_error(r, EBUSY, "this connection traces already");
		return true;
	}
	if (e.site) {
		reply_error(r, EINVAL, "an argument glob's entry names a site");
		return true;
	}
	if (c->naglobs >= MCLOC_ARGS_GLOBS_MAX) {
		reply_error(r, E2BIG, "more than %d argument globs", MCLOC_ARGS_GLOBS_MAX);
		return true;
	}
	struct mcr_args_glob *v = mc_grown(c->aglobs, &c->cap_aglobs, c->naglobs, sizeof(*v), 8);
	char *glob = strdup((const char *)p + at);

	if (v)
		c->aglobs = v;
	if (!v || !glob) {
		free(glob);
		reply_error(r, ENOMEM, "out of memory");
		return true;
	}
	c->aglobs[c->naglobs++] = (struct mcr_args_glob){ e, glob };
	reply_one(r, MCLOC_REP_END, NULL, 0);
	return !r->failed;
}

/* Connection C's session stopped. */
static void stop_trace(struct conn *c)
{
	if (c->fd < 0 || c->session < 0)
		return;
	mcr_trace_stop(c->session);
	c->session = -1;
	ctl.controllers--;
}

/* Names of the addresses at P (PLEN bytes of uint64_t). */
static void do_addrs(struct reply *r, const uint8_t *p, size_t plen)
{
	reply_begin(r, MCLOC_REP_ADDRS);
	for (size_t at = 0; at + 8 <= plen; at += 8) {
		uint64_t a;
		uintptr_t off = 0;
		Dl_info di;
		struct {
			struct mcloc_rep_addr a;
			char name[256];
		} e = { 0 };

		memcpy(&a, p + at, 8);
		const char *name = mcloc_addr_name((uintptr_t)a, &off);
		if (!name)
			name = mcr_symbolize((uintptr_t)a, &off);
		if (!name && dladdr((void *)(uintptr_t)a, &di) && di.dli_sname) {
			name = di.dli_sname;
			off = (uintptr_t)a - (uintptr_t)di.dli_saddr;
		}
		size_t nl = name ? strlen(name) : 0;

		if (nl >= sizeof(e.name))
			nl = sizeof(e.name) - 1;
		e.a = (struct mcloc_rep_addr){ .addr = a, .off = off, .namelen = (uint32_t)nl };
		memcpy(e.name, name ? name : "", nl);
		reply_add(r, &e, sizeof(e.a) + nl + 1, true);
	}
	reply_send(r);
}

static void do_stats(struct reply *r)
{
	struct mcloc_stats st = { .sz = sizeof(st) };
	struct mcloc_rep_stats s = { 0 };

	if (mcloc_get_stats(&st) == 0)
		s = (struct mcloc_rep_stats){
			.images = st.images, .records = st.records, .enabled = st.enabled,
			.refused = st.refused, .batches = st.batches,
			.sites_patched = st.sites_patched, .syncs = st.syncs,
			.last_batch_us = (uint64_t)(st.last_batch_ms * 1000),
			.list_calls = st.list_calls,
		};
	reply_one(r, MCLOC_REP_STATS, &s, sizeof(s));
}

/* Answer the request in C's buffer (whole: LEN bytes).  False when the
 * connection must close. */
static bool handle(struct conn *c, const struct mcloc_msg *m, struct reply *r)
{
	int i = (int)(c - ctl.conn);
	const uint8_t *p = c->buf + sizeof(*m);
	size_t plen = m->len - sizeof(*m);

	r->seq = m->seq;
	if (m->version != MCLOC_WIRE_VERSION) {
		reply_error(r, EPROTONOSUPPORT, "protocol version %u; this program speaks %u",
			    m->version, MCLOC_WIRE_VERSION);
		return false;
	}
	if (m->reserved) {
		reply_error(r, EINVAL, "reserved field not 0");
		return false;
	}
	switch (m->type) {
	case MCLOC_REQ_HELLO:
	case MCLOC_REQ_ENABLED:
	case MCLOC_REQ_SITES:
	case MCLOC_REQ_STATS:
	case MCLOC_REQ_RELEASE:
	case MCLOC_REQ_SNAPSHOT:
		if (plen) {
			reply_error(r, EINVAL, "request type %u takes no payload", m->type);
			return false;
		}
		if (m->type == MCLOC_REQ_HELLO) {
			do_hello(r);
		} else if (m->type == MCLOC_REQ_STATS) {
			do_stats(r);
		} else if (m->type == MCLOC_REQ_RELEASE) {
			first_traced();
			reply_one(r, MCLOC_REP_END, NULL, 0);
		} else if (m->type == MCLOC_REQ_SNAPSHOT) {
			/* (Asked of no flight recorder, it saves nothing:
			 * said, not answered as done.) */
			if (mcr_trace_snapshot())
				reply_one(r, MCLOC_REP_END, NULL, 0);
			else
				reply_error(r, ENOENT, "no flight recorder (mcloc record --overwrite) "
						       "traces this program");
		} else {
			do_sites(r, m->type == MCLOC_REQ_SITES);
		}
		return !r->failed;
	case MCLOC_REQ_TRACE:
		return do_trace(r, i, p, plen);
	case MCLOC_REQ_ARGS:
		return do_args(r, &ctl.conn[i], p, plen);
	case MCLOC_REQ_ARGS_GLOB:
		return do_args_glob(r, &ctl.conn[i], p, plen);
	case MCLOC_REQ_STOP:
		if (plen) {
			reply_error(r, EINVAL, "request type %u takes no payload", m->type);
			return false;
		}
		if (ctl.conn[i].session < 0) {
			reply_error(r, EPERM, "this connection is not tracing");
			return true;
		}
		stop_trace(&ctl.conn[i]);
		reply_one(r, MCLOC_REP_END, NULL, 0);
		return !r->failed;
	case MCLOC_REQ_ADDRS:
		if (!plen || plen % 8) {
			reply_error(r, EINVAL, "an address request needs whole 8-byte addresses");
			return false;
		}
		do_addrs(r, p, plen);
		return !r->failed;
	case MCLOC_REQ_FUNCS:
		if (!plen || p[plen - 1] || memchr(p, 0, plen) != p + plen - 1) {
			reply_error(r, EINVAL, "a glob request needs one NUL-terminated string");
			return false;
		}
		do_funcs(r, (const char *)p);
		return !r->failed;
	default:
		reply_error(r, EOPNOTSUPP, "unknown request type %u", m->type);
		return false;
	}
}

static void conn_close(struct conn *c)
{
	/* A controller that goes, by STOP or by dying, stops its trace: no
	 * site stays enabled for nobody. */
	stop_trace(c);
	close(c->fd);
	c->fd = -1;
	c->have = 0;
	drop_args(c);
}

/* Read what C's peer sent; answer each whole request. */
static void conn_read(struct conn *c, struct reply *r)
{
	ssize_t n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		conn_close(c);	/* the controller went away */
		return;
	}
	if (!c->have)
		c->since = now_ms();
	c->have += (size_t)n;
	r->fd = c->fd;
	r->failed = false;
	while (c->have >= sizeof(struct mcloc_msg)) {
		struct mcloc_msg m;

		memcpy(&m, c->buf, sizeof(m));
		if (m.len < sizeof(m) || m.len > MCLOC_REQ_MAX) {
			r->seq = m.seq;
			reply_error(r, m.len < sizeof(m) ? EINVAL : EMSGSIZE,
				    "request of %u bytes (%zu to %u allowed)", m.len, sizeof(m),
				    MCLOC_REQ_MAX);
			conn_close(c);
			return;
		}
		if (c->have < m.len)
			return;		/* the rest is coming */
		if (!handle(c, &m, r)) {
			conn_close(c);
			return;
		}
		memmove(c->buf, c->buf + m.len, c->have - m.len);
		c->have -= m.len;
		c->since = now_ms();
	}
}

static void conn_accept(struct reply *r)
{
	int fd = accept4(ctl.lfd, NULL, NULL, SOCK_CLOEXEC);
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	struct timeval tv = { .tv_sec = 2 };

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		close(fd);
		return;
	}
	if (cr.uid != geteuid() && cr.uid != 0) {
		say("refused a connection from uid %u (pid %d): not this program's user",
		    (unsigned)cr.uid, (int)cr.pid);
		close(fd);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (int i = 0; i < CONN_MAX; i++)
		if (ctl.conn[i].fd < 0) {
			ctl.conn[i].fd = fd;
			ctl.conn[i].pid = cr.pid;
			ctl.conn[i].session = -1;
			ctl.conn[i].have = 0;
			ctl.conn[i].since = now_ms();
			return;
		}
	r->fd = fd;
	r->failed = false;
	r->seq = 0;
	reply_error(r, EBUSY, "%d controllers are connected already", CONN_MAX);
	close(fd);
}

/* At exit the trace ends on the server thread, the only one that starts,
 * ticks and stops it: the exiting thread freeing the session while the
 * server ticked it was a use after free.  The server then answers on
 * (the names a controller asks for the last events) until the process
 * ends. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
} at_exit_end = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };

/* The trace ended for the exit: no trace starts from now on, and the
 * exiting thread goes on. */
static void finish_exit(void)
{
	for (int i = 0; i < CONN_MAX; i++)
		stop_trace(&ctl.conn[i]);
	mcr_trace_stop_all();
	__atomic_store_n(&exiting, true, __ATOMIC_RELEASE);
	pthread_mutex_lock(&at_exit_end.lock);
	at_exit_end.done = true;
	pthread_cond_broadcast(&at_exit_end.cond);
	pthread_mutex_unlock(&at_exit_end.lock);
}

/* When the exit's wait for the controller ends (ms; 0: none). */
static uint64_t exit_deadline;

/*
 * At exit, with a controller tracing: the rings say the program is
 * exiting, and the server goes on answering until the controller stops
 * the trace (it asks the names it lacks first: a library loaded late, a
 * caller), closes, or MCLOC_EXIT_WAIT_MS pass.  Else at once.
 */
static void end_for_exit(void)
{
	if (mcr_trace_active() && ctl.controllers) {
		mcr_trace_exiting();
		exit_deadline = now_ms() + MCLOC_EXIT_WAIT_MS;
		return;
	}
	finish_exit();
}

static void *serve(void *arg)
{
	/* (Static: 64 KiB is more than a thread's stack should carry.) */
	static struct reply r;

	(void)arg;
	for (;;) {
		struct pollfd pf[2 + CONN_MAX];
		int n = 0;

		pf[n++] = (struct pollfd){ .fd = ctl.wake[0], .events = POLLIN };
		pf[n++] = (struct pollfd){ .fd = ctl.lfd, .events = POLLIN };
		for (int i = 0; i < CONN_MAX; i++)
			pf[n++] = (struct pollfd){ .fd = ctl.conn[i].fd, .events = POLLIN };
		/* (Tracing: the rings' clock pair is refreshed every 10 ms,
		 * so that a controller can convert times soon after the
		 * start, and a controller's death is seen as soon.) */
		if (poll(pf, (nfds_t)n, ctl.controllers ? 10 : 1000) < 0 && errno != EINTR)
			break;
		if (ctl.controllers)
			mcr_trace_tick();
		if (pf[0].revents) {
			char c = 0;

			if (read(ctl.wake[0], &c, 1) == 1 && c == 'x') {
				end_for_exit();
				continue;
			}
			break;
		}
		if (pf[1].revents & POLLIN)
			conn_accept(&r);
		for (int i = 0; i < CONN_MAX; i++) {
			struct conn *c = &ctl.conn[i];

			if (c->fd >= 0 && pf[2 + i].revents)
				conn_read(c, &r);
			/* (The time after the read, which may have set since:
			 * one taken before would make it seem in the future.) */
			if (c->fd >= 0 && (c->have || c->session < 0) &&
			    now_ms() - c->since > STALL_MS) {
				r.fd = c->fd;
				r.failed = false;
				r.seq = 0;
				reply_error(&r, ETIMEDOUT, c->have ? "a request left unfinished for %d ms"
								   : "no request for %d ms",
					    STALL_MS);
				conn_close(c);
			}
		}
		if (exit_deadline && (!mcr_trace_active() || now_ms() >= exit_deadline)) {
			exit_deadline = 0;
			finish_exit();
		}
	}
	for (int i = 0; i < CONN_MAX; i++)
		if (ctl.conn[i].fd >= 0)
			conn_close(&ctl.conn[i]);
	return NULL;
}

/* ---- starting and stopping --------------------------------------------- */

/* DIR, made if missing, must be a directory of ours that no one else may
 * enter: else anyone could put a socket of theirs in our program's name. */
static int own_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		say("%s: not a directory of this user's that only it may enter; no control",
		    dir);
		return -EPERM;
	}
	return 0;
}

static void unlink_socket(void)
{
	if (ctl.path[0])
		unlink(ctl.path);
}

/* Ask the server thread to end the trace (end_for_exit()) and wait for it
 * (5 s at most: past that the trace is left as it is, which the
 * controller sees as the program's end, rather than freed under a server
 * that may still tick it).  False: there is no server. */
static bool server_ends_trace(void)
{
	struct timespec dl;
	bool asked = false;

	pthread_mutex_lock(&ctl.lock);
	if (ctl.running && !pthread_equal(ctl.thread, pthread_self()))
		asked = write(ctl.wake[1], "x", 1) == 1;
	pthread_mutex_unlock(&ctl.lock);
	if (!asked)
		return false;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(&at_exit_end.lock);
	while (!at_exit_end.done &&
	       pthread_cond_timedwait(&at_exit_end.cond, &at_exit_end.lock, &dl) == 0)
		;
	pthread_mutex_unlock(&at_exit_end.lock);
	return true;
}

/* At exit: a trace still running ends, its rings marked done with a last
 * clock pair, so that the controller reads every event the program wrote
 * however short its life; then the socket goes. */
static void at_exit_control(void)
{
	if (!server_ends_trace() && mcr_trace_active())
		mcr_trace_stop_all();
	unlink_socket();
}

/* The child's copy of the parent's server: no thread serves it, and its
 * connections and socket are the parent's. */
static void forget_server(void)
{
	/* The connections hold descriptors only while a server listens:
	 * before the first start their fds are the static initializer's
	 * zeroes, which a child must not take for its standard input. */
	bool listening = ctl.lfd >= 0;

	ctl.running = false;
	ctl.controllers = 0;
	for (int i = 0; i < CONN_MAX; i++)
		ctl.conn[i].session = -1;
	ctl.path[0] = 0;
	for (int i = 0; i < CONN_MAX; i++) {
		if (listening && ctl.conn[i].fd >= 0)
			close(ctl.conn[i].fd), ctl.conn[i].fd = -1;
		drop_args(&ctl.conn[i]);
	}
	if (ctl.lfd >= 0)
		close(ctl.lfd), ctl.lfd = -1;
	for (int i = 0; i < 2; i++)
		if (ctl.wake[i] >= 0)
			close(ctl.wake[i]), ctl.wake[i] = -1;
}

/*
 * fork() (fork.c): a child of a controllable process is controllable
 * itself, on a socket of its own pid, with a server thread of its own
 * (trace.c's part has withdrawn the parent's session by then).  It waits
 * for no controller (MCLOC_CONTROL=wait is its parent's start), and a
 * waiter of the parent's is none of its business: the condition variable
 * starts afresh.
 */
void mcr_control_fork(enum mcr_fork stage)
{
	bool served;
	int ret;

	switch (stage) {
	case MCR_FORK_PREPARE:
		pthread_mutex_lock(&ctl.lock);
		pthread_mutex_lock(&first.lock);
		return;
	case MCR_FORK_PARENT:
		pthread_mutex_unlock(&first.lock);
		pthread_mutex_unlock(&ctl.lock);
		return;
	case MCR_FORK_CHILD:
		served = ctl.running;
		forget_server();
		first.waiting = first.holding = false;
		pthread_cond_init(&first.traced_cond, NULL);
		pthread_cond_init(&first.held_cond, NULL);
		pthread_mutex_unlock(&first.lock);
		pthread_mutex_unlock(&ctl.lock);
		first.traced = false;
		ret = served ? mcloc_control_start() : 0;
		if (ret < 0 && ret != -EPERM)	/* (-EPERM: said) */
			say("pid %d: cannot start: %s", (int)getpid(), strerror(-ret));
		/* (Last of the child's handlers: every lock of the runtime
		 * is free for the controller that comes.) */
		if (mcr_trace_forked_followed() && ret == 0 && served)
			hold_child();
		return;
	}
}

int mcloc_control_start(void)
{
	static bool hooks_set;
	char dir[sizeof(ctl.path)];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	sigset_t all, old;
	int ret = 0;

	pthread_mutex_lock(&ctl.lock);
	if (ctl.running)
		goto out;
	if (!mcloc_control_dir(dir, sizeof(dir) - 12, secure_getenv("XDG_RUNTIME_DIR"),
			       (unsigned)geteuid())) {
		ret = -ENAMETOOLONG;
		goto out;
	}
	if ((ret = own_dir(dir)) < 0)
		goto out;
	/* The socket is made under a hidden name and given its own once it
	 * listens: bind() makes the file, and a client that found it before
	 * listen() was refused (mcloc run, which waits for the file, lost
	 * its program that way).  (dir left room for the pid and the dot;
	 * checked all the same.) */
	char path[sizeof(sa.sun_path)];
	if (snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid()) >= (int)sizeof(path) ||
	    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/.%d", dir, (int)getpid()) >=
		    (int)sizeof(sa.sun_path)) {
		ret = -ENAMETOOLONG;
		goto out;
	}
	ctl.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ctl.lfd < 0 || pipe2(ctl.wake, O_CLOEXEC) < 0) {
		ret = -errno;
		goto fail;
	}
	unlink(sa.sun_path);	/* (sockets a dead process of this pid left) */
	unlink(path);
	if (bind(ctl.lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ctl.lfd, 8) < 0 ||
	    chmod(sa.sun_path, 0600) < 0 || rename(sa.sun_path, path) < 0) {
		ret = -errno;
		unlink(sa.sun_path);
		goto fail;
	}
	memcpy(ctl.path, path, sizeof(ctl.path));
	for (int i = 0; i < CONN_MAX; i++) {
		ctl.conn[i].fd = -1;
		ctl.conn[i].session = -1;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&ctl.thread, NULL, serve, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		goto fail;
	pthread_setname_np(ctl.thread, "mcloc-control");
	ctl.running = true;
	if (!hooks_set) {
		hooks_set = true;
		atexit(at_exit_control);
	}
	goto out;
fail:
	if (ctl.path[0])
		unlink(ctl.path);
	ctl.path[0] = 0;
	if (ctl.lfd >= 0)
		close(ctl.lfd);
	if (ctl.wake[0] >= 0) {
		close(ctl.wake[0]);
		close(ctl.wake[1]);
	}
	ctl.lfd = ctl.wake[0] = ctl.wake[1] = -1;
out:
	pthread_mutex_unlock(&ctl.lock);
	return ret;
}

void mcloc_control_stop(void)
{
	pthread_mutex_lock(&ctl.lock);
	if (ctl.running) {
		if (write(ctl.wake[1], "", 1) == 1)
			pthread_join(ctl.thread, NULL);
		unlink_socket();
		ctl.path[0] = 0;
		close(ctl.lfd);
		close(ctl.wake[0]);
		close(ctl.wake[1]);
		ctl.lfd = ctl.wake[0] = ctl.wake[1] = -1;
		ctl.running = false;
	}
	pthread_mutex_unlock(&ctl.lock);
}

__attribute__((constructor(102))) static void control_from_env(void)
{
	const char *c = secure_getenv("MCLOC_CONTROL");
	char *end = NULL;
	int ret;

	if (!c || !*c || !strcmp(c, "0"))
		return;
	/* (wait=PID: mcloc run's, which holds the process it started alone,
	 * not one that a wrapper starts in turn, which it never sees.) */
	bool wait = !strcmp(c, "wait") ||
		    (!strncmp(c, "wait=", 5) && strtol(c + 5, &end, 10) > 0 && !*end);

	if (strcmp(c, "1") && !wait) {
		say("MCLOC_CONTROL=%.32s: 1, wait or 0; no control", c);
		return;
	}
	bool hold = wait && (!end || strtol(c + 5, NULL, 10) == getpid());

	/* (Waiting before the socket has its name: a controller that finds
	 * it at once, as record finds a program a descendant execs, must
	 * find it held, its trace answered at the hold, not before the
	 * program's own image has registered.) */
	if (hold) {
		pthread_mutex_lock(&first.lock);
		first.waiting = true;
		pthread_mutex_unlock(&first.lock);
	}
	if ((ret = mcloc_control_start()) < 0) {
		if (ret != -EPERM)	/* (-EPERM: said) */
			say("cannot start: %s", strerror(-ret));
		first.waiting = false;
		return;		/* (and no waiting for a controller who cannot come) */
	}
	if (hold) {
		first.prev_hook = mcr_hooks.image_added;
		mcr_hooks.image_added = first_image_added;
		/* A program not linked with libmcloc (given it by LD_PRELOAD)
		 * registers no image of its own: discovery finds its table,
		 * which would wait for the trace's start, by which time a
		 * short program is gone.  Discovered now, it is held here,
		 * before its constructors and main() run.  (A program linked
		 * with libmcloc is left to register itself, and held then.) */
		mcloc_init();
	}
}
