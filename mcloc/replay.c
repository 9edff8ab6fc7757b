// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The offline half: mcloc replay, report, graph, dump and info over a
 * recording (<mcloc/record.h>), made by mcloc record while the program
 * ran.  Each thread's file is mapped, checked once and read as data (a
 * recording may come from anyone); the threads' events, each file in
 * time order already, are merged by time with a heap and fed to the same
 * formatter as the live trace (format.c), or to the call-tree walker that
 * graph and the flame graph need.
 *
 * Filters, as uftrace's and ftrace's: -F GLOB keeps the calls of
 * matching functions and all they call (set_graph_function), -N GLOB
 * drops them and all they call, --depth, --threshold (a time under which
 * graph calls are hidden), --time-range and --tid.  A glob may be a
 * comma-separated list.
 */
#include "format.h"
#include "../base/grow.h"
#include "perfetto.h"

#include <mcloc/record.h>

#include "symbols.h"

#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- reading a recording ---------------------------------------------------- */

struct rthread {
	uint32_t tid;
	char comm[16];
	const uint64_t *ev;		/* mapped units, read as data */
	size_t n, at;			/* units, and the next one's index */
	struct decoder dec;
	struct event next;		/* the event at hand (type 0: none left) */
	void *map;
	size_t maplen;
	uint64_t lost, waits;
	/* the filters' state: the depth of the -F call it is inside, of
	 * the -N call it is under (-1: none) */
	int f_depth, n_depth;
	uint64_t end_ns;		/* its last event in the time range */
};

struct rproc {
	char key[32];			/* its files' prefix: PID or PID-GEN */
	struct mcloc_rec_info info;
	char *args;			/* argc_len bytes */
	struct rthread *th;
	size_t nth, cap_th;
	struct names sites, callers;
};

struct recording {
	const char *dir;
	struct rproc *procs;
	size_t nprocs, cap_procs;
};

/* What an offline command was asked for. */
struct ropts {
	const char *dir;
	const char *filter, *notrace;	/* -F, -N: comma-separated globs */
	int depth;			/* -D: events this deep and deeper hidden (0: none) */
	uint64_t threshold_ns;
	uint64_t from_ns, to_ns;	/* --time-range (to 0: no end) */
	uint32_t tid;
	bool json, per_thread, as_function, srcline;
	enum sort_key sort;
	const char *chrome, *flame, *perfetto;	/* dump: where ("-": stdout) */
};

static int cmp_rname(const void *a, const void *b)
{
	const struct name *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* FILE of a recording (in directory DFD) opened for reading, its status
 * in *ST; -1 with errno when it cannot be or is no regular file.  A
 * planted FIFO would block open(2) until a writer came, and a device
 * would be read without end: both are opened without blocking and
 * refused. */
static int open_data(int dfd, const char *file, struct stat *st)
{
	int fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* Why open_data or slurp failed, in words. */
static const char *data_error(int err)
{
	return err == EINVAL ? "not a regular file" :
	       err == ELOOP  ? "a symbolic link (not followed)" : strerror(err);
}

/* FILE (in directory DFD) read whole, at most MAX bytes: a malloc'd
 * buffer and its size in *LEN, or NULL with errno. */
static void *slurp(int dfd, const char *file, size_t max, size_t *len)
{
	struct stat st;
	int fd = open_data(dfd, file, &st);
	uint8_t *buf = NULL;

	if (fd < 0)
		return NULL;
	if ((uint64_t)st.st_size > max) {
		errno = EFBIG;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf && pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		buf = NULL;
		errno = EIO;
	}
	*len = (size_t)st.st_size;
out:
	close(fd);
	return buf;
}

static bool load_names(int dfd, struct rproc *p, const char *dir)
{
	char file[64];
	size_t len = 0;

	snprintf(file, sizeof(file), "%s.names", p->key);
	uint8_t *b = slurp(dfd, file, 1u << 30, &len);

	if (!b) {
		fail(dir, "%s: %s", file, data_error(errno));
		return false;
	}
	size_t at = 0;

	while (at + sizeof(struct mcloc_rec_name) <= len) {
		struct mcloc_rec_name e;

		memcpy(&e, b + at, sizeof(e));
		size_t whole = (sizeof(e) + (size_t)e.namelen + 1 + 7) & ~(size_t)7;

		if (e.namelen > len || at + sizeof(e) + e.namelen >= len ||
		    (e.kind != MCLOC_REC_SITE && e.kind != MCLOC_REC_CALLER)) {
			fail(dir, "%s: a broken entry at byte %zu", file, at);
			free(b);
			return false;
		}
		struct name *nm = name_add(e.kind == MCLOC_REC_SITE ? &p->sites : &p->callers, e.addr);

		if (!nm) {
			free(b);
			fail(dir, "out of memory");
			return false;
		}
		nm->off = e.off;
		nm->name = e.namelen ? strndup((const char *)b + at + sizeof(e), e.namelen) : NULL;
		if (nm->name)
			sym_clean(nm->name, strlen(nm->name));
		at += whole;
	}
	free(b);
	/* (Each entry is padded to 8 bytes: a file ends with one.) */
	if (at != len) {
		fail(dir, "%s: a broken entry at byte %zu", file, at);
		return false;
	}
	return true;
}

/* The limit of a KEY.maps (text lines of /proc/PID/maps). */
#define MAPS_MAX (64u << 20)

/* P's KEY.maps, looked at: it may be missing (the names fall back to
 * addresses), but anything else in its place is a broken recording. */
static bool check_maps(int dfd, const struct rproc *p, const char *dir)
{
	char file[64];
	struct stat st;

	snprintf(file, sizeof(file), "%s.maps", p->key);
	int fd = open_data(dfd, file, &st);

	if (fd < 0 && errno == ENOENT)
		return true;
	if (fd >= 0)
		close(fd);
	if (fd < 0 || (uint64_t)st.st_size > MAPS_MAX) {
		fail(dir, "%s: %s", file, data_error(fd < 0 ? errno : EFBIG));
		return false;
	}
	return true;
}

static bool load_thread(int dfd, struct rproc *p, const char *file, uint32_t tid, const char *dir)
{
	struct stat st;
	int fd = open_data(dfd, file, &st);
	struct mcloc_rec_thread h;

	if (fd < 0) {
		fail(dir, "%s: %s", file, data_error(errno));
		return false;
	}
	if ((uint64_t)st.st_size < sizeof(h) || pread(fd, &h, sizeof(h), 0) != sizeof(h) ||
	    h.magic != MCLOC_REC_THREAD_MAGIC || h.version != MCLOC_REC_VERSION ||
	    h.event_size != MCLOC_EV_UNIT || h.pid != p->info.pid || h.tid != tid) {
		fail(dir, "%s: not a thread file of this recording (or of another version)", file);
		close(fd);
		return false;
	}
	/* (Grown by doubling, here and for the processes: a recording of
	 * thousands of them moved its array once per process.) */
	struct rthread *v = mc_grown(p->th, &p->cap_th, p->nth, sizeof(*v), 4);

	if (!v) {
		close(fd);
		fail(dir, "out of memory");
		return false;
	}
	p->th = v;
	struct rthread *th = &v[p->nth++];
	/* (A file cut short mid-event keeps its whole events.) */
	size_t n = ((size_t)st.st_size - sizeof(h)) / MCLOC_EV_UNIT;

	*th = (struct rthread){ .tid = tid, .n = n, .lost = h.lost, .waits = h.waits,
				.f_depth = -1, .n_depth = -1 };
	memcpy(th->comm, h.comm, sizeof(th->comm) - 1);
	sym_clean(th->comm, strlen(th->comm));
	if (n) {
		th->maplen = (size_t)st.st_size;
		th->map = mmap(NULL, th->maplen, PROT_READ, MAP_PRIVATE, fd, 0);
		if (th->map == MAP_FAILED) {
			fail(dir, "%s: %s", file, strerror(errno));
			th->map = NULL;
			th->n = 0;
		} else {
			th->ev = (const uint64_t *)((const uint8_t *)th->map + sizeof(h));
		}
	}
	close(fd);
	return true;
}

static void recording_free(struct recording *r)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];

		for (size_t k = 0; k < p->nth; k++) {
			if (p->th[k].map)
				munmap(p->th[k].map, p->th[k].maplen);
			decoder_free(&p->th[k].dec);
		}
		free(p->th);
		free(p->args);
		for (size_t k = 0; k < p->sites.n; k++)
			free(p->sites.v[k].name);
		for (size_t k = 0; k < p->callers.n; k++)
			free(p->callers.v[k].name);
		free(p->sites.v);
		free(p->callers.v);
	}
	free(r->procs);
}

/* Processes in the order they were traced (then by pid and image). */
static int cmp_proc(const void *a, const void *b)
{
	const struct rproc *x = a, *y = b;

	if (x->info.realtime_ns != y->info.realtime_ns)
		return x->info.realtime_ns < y->info.realtime_ns ? -1 : 1;
	if (x->info.pid != y->info.pid)
		return x->info.pid < y->info.pid ? -1 : 1;
	return x->info.generation < y->info.generation ? -1 : x->info.generation > y->info.generation;
}

static int cmp_thread(const void *a, const void *b)
{
	const struct rthread *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* NAME's process key (PID or PID-GEN) into KEY, and what follows its
 * dot into *REST; false when NAME is no file of a recording's. */
static bool key_of_file(const char *name, char *key, size_t len, const char **rest)
{
	unsigned pid, gen = 0;
	int n = 0;

	if (sscanf(name, "%u%n", &pid, &n) != 1 || name[0] < '0' || name[0] > '9')
		return false;
	if (name[n] == '-') {
		int m = 0;

		if (sscanf(name + n + 1, "%u%n", &gen, &m) != 1 || !gen || name[n + 1] < '0' ||
		    name[n + 1] > '9')
			return false;
		n += 1 + m;
	}
	if (name[n] != '.' || (size_t)n >= len)
		return false;
	memcpy(key, name, (size_t)n);
	key[n] = 0;
	*rest = name + n + 1;
	return true;
}

/* The recording in DIR, whole; 0, or -1 with a message. */
static int recording_open(struct recording *r, const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dup(dfd)) : NULL;
	bool ok = true;

	*r = (struct recording){ .dir = dir };
	if (!d) {
		fail(dir, "%s", strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	/* The processes, by their info files. */
	for (struct dirent *e; ok && (e = readdir(d));) {
		char key[32];
		const char *rest;

		if (!key_of_file(e->d_name, key, sizeof(key), &rest) || strcmp(rest, "info"))
			continue;
		unsigned pid = (unsigned)strtoul(key, NULL, 10), gen = strchr(key, '-') ?
			       (unsigned)strtoul(strchr(key, '-') + 1, NULL, 10) : 0;
		size_t len = 0;
		uint8_t *b = slurp(dfd, e->d_name, 1u << 24, &len);
		struct mcloc_rec_info in;

		if (!b) {
			fail(dir, "%s: %s", e->d_name, data_error(errno));
			ok = false;
			break;
		}
		if (len >= sizeof(in))
			memcpy(&in, b, sizeof(in));
		if (len < sizeof(in) || in.magic != MCLOC_REC_MAGIC) {
			fail(dir, "%s: not a recording's info", e->d_name);
			ok = false;
		} else if (in.version != MCLOC_REC_VERSION) {
			fail(dir, "%s: a recording of version %u (this mcloc reads %u)", e->d_name,
			     in.version, MCLOC_REC_VERSION);
			ok = false;
		} else if (in.pid != pid || in.generation != gen || in.argc_len != len - sizeof(in) ||
			   (in.tracer != MCLOC_TRACE_FUNCTION && in.tracer != MCLOC_TRACE_GRAPH) ||
			   in.ticks > 1) {
			fail(dir, "%s: a broken info", e->d_name);
			ok = false;
		}
		struct rproc *v = ok ? mc_grown(r->procs, &r->cap_procs, r->nprocs, sizeof(*v), 16)
				     : NULL;

		if (ok && !v) {
			fail(dir, "out of memory");
			ok = false;
		}
		if (ok) {
			r->procs = v;
			struct rproc *p = &v[r->nprocs++];

			*p = (struct rproc){ .info = in };
			snprintf(p->key, sizeof(p->key), "%s", key);
			p->info.comm[sizeof(p->info.comm) - 1] = 0;
			sym_clean(p->info.comm, strlen(p->info.comm));
			p->args = malloc(in.argc_len + 1);
			if (p->args) {
				memcpy(p->args, b + sizeof(in), in.argc_len);
				p->args[in.argc_len] = 0;
				sym_clean(p->args, in.argc_len);
			}
		}
		free(b);
	}
	/* Their threads and names; a thread file of no process is a
	 * recording cut short. */
	rewinddir(d);
	for (struct dirent *e; ok && (e = readdir(d));) {
		unsigned tid, again;
		char key[32], tail[8];
		const char *rest;
		size_t i = 0;

		/* (TID-N: the Nth thread after the first that had the tid.) */
		if (!key_of_file(e->d_name, key, sizeof(key), &rest) ||
		    (sscanf(rest, "%u.%7s", &tid, tail) != 2 &&
		     sscanf(rest, "%u-%u.%7s", &tid, &again, tail) != 3) ||
		    strcmp(tail, "events"))
			continue;
		while (i < r->nprocs && strcmp(r->procs[i].key, key))
			i++;
		if (i == r->nprocs) {
			fail(dir, "%s: the recording of process %s was cut short (no %s.info)",
			     e->d_name, key, key);
			ok = false;
			break;
		}
		ok = load_thread(dfd, &r->procs[i], e->d_name, tid, dir);
	}
	for (size_t i = 0; ok && i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];

		ok = load_names(dfd, p, dir) && check_maps(dfd, p, dir);
		/* (The info, written last, counts the thread files made: one
		 * missing would be its thread's calls gone unsaid.) */
		if (ok && p->nth != p->info.threads) {
			fail(dir, "%s.info: %u thread file%s, but %zu found: the recording is "
				  "incomplete", p->key, p->info.threads,
			     p->info.threads == 1 ? "" : "s", p->nth);
			ok = false;
		}
		/* It counts their units too.  A file cut short is read as far
		 * as it goes, but said: the calls its cut leaves open would
		 * read as calls not returned when the trace ended. */
		uint64_t units = 0;

		for (size_t k = 0; ok && k < p->nth; k++)
			units += p->th[k].n;
		if (ok && units < p->info.units)
			fail(dir, "%s.info: %llu units of events, the thread files %llu: cut short, "
				  "read as far as they go", p->key,
			     (unsigned long long)p->info.units, (unsigned long long)units);
		if (p->sites.n)
			qsort(p->sites.v, p->sites.n, sizeof(*p->sites.v), cmp_rname);
		if (p->callers.n)
			qsort(p->callers.v, p->callers.n, sizeof(*p->callers.v), cmp_rname);
		p->sites.sorted = p->callers.sorted = true;
		if (p->nth)
			qsort(p->th, p->nth, sizeof(*p->th), cmp_thread);
	}
	if (ok && r->nprocs)
		qsort(r->procs, r->nprocs, sizeof(*r->procs), cmp_proc);
	if (ok && !r->nprocs) {
		fail(dir, "no recording here (mcloc record makes one)");
		ok = false;
	}
	closedir(d);
	close(dfd);
	if (!ok) {
		recording_free(r);
		return -1;
	}
	return 0;
}

/* ---- names from the files the program mapped ----------------------------------- */

static const char *symbolize(struct tracing *t, uint64_t addr, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return sym_func(t->sym, addr);
}

/* "file:line" of the site IP, or NULL. */
static const char *source_line(struct tracing *t, uint64_t ip, char *buf, size_t len)
{
	return sym_source(t->sym, ip, buf, len);
}

/* ---- the events in time order -------------------------------------------- */

/* A heap of the threads with events left, by their next event's time
 * (then tid): the threads' files merged. */
struct merge {
	struct rthread **h;
	size_t n;
};

static bool before(const struct rthread *a, const struct rthread *b)
{
	uint64_t x = a->next.time, y = b->next.time;

	return x != y ? x < y : a->tid < b->tid;
}

static void sift_down(struct merge *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, best = i;

		if (l < m->n && before(m->h[l], m->h[best]))
			best = l;
		if (r < m->n && before(m->h[r], m->h[best]))
			best = r;
		if (best == i)
			return;
		struct rthread *x = m->h[i];

		m->h[i] = m->h[best];
		m->h[best] = x;
		i = best;
	}
}

/* TH's next event to show into th->next (type 0: none left). */
static void advance(struct rthread *th)
{
	while (th->at < th->n) {
		size_t used = decode_event(&th->dec, th->ev + th->at, th->n - th->at, &th->next);

		if (!used)
			break;	/* (an event cut short at the file's end) */
		th->at += used;
		if (th->next.type)
			return;
	}
	th->next.type = 0;
}

/* Whether NAME matches one of the comma-separated GLOBS. */
static bool matches(const char *globs, const char *name)
{
	char one[512];

	for (const char *s = globs; *s;) {
		size_t n = strcspn(s, ",");

		if (n < sizeof(one)) {
			memcpy(one, s, n);
			one[n] = 0;
			if (n && !fnmatch(one, name, 0))
				return true;
		}
		s += n + (s[n] == ',');
	}
	return false;
}

/* Per site: whether -F (1) or -N (2) names it, worked out once. */
struct site_marks {
	uint8_t *mark;		/* by index in p->sites */
};

static uint8_t site_mark(const struct ropts *o, const struct rproc *p, const struct site_marks *sm,
			 uint64_t ip)
{
	size_t i = name_index(p->sites.v, p->sites.n, ip);

	(void)o;
	return i < p->sites.n && p->sites.v[i].addr == ip ? sm->mark[i] : 0;
}

/* Whether event E of TH passes the filters -F, -N and --depth (graph
 * events keep their pairs: an entry and its exit go or stay together).
 * Under -F, depths count from the -F call's (*BASE), as set_graph_function
 * and uftrace's -F with -D count them. */
static bool keep(const struct ropts *o, const struct rproc *p, const struct site_marks *sm,
		 struct rthread *th, const struct event *e, uint16_t type, int *base)
{
	int d = e->depth;
	bool graph = type != MCLOC_EV_CALL;
	uint8_t mark = (o->filter || o->notrace) ? site_mark(o, p, sm, e->ip) : 0;

	if (!graph)
		return (!o->filter || (mark & 1)) && !(mark & 2);
	bool enter = type == MCLOC_EV_ENTRY || type == MCLOC_EV_UNTIMED;
	bool leave = type == MCLOC_EV_EXIT || type == MCLOC_EV_LEFT || type == MCLOC_EV_UNTIMED;
	bool k = true;

	if (th->n_depth >= 0) {
		k = false;
	} else if (mark & 2) {
		k = false;
		if (enter && type != MCLOC_EV_UNTIMED)
			th->n_depth = d;
	}
	if (th->n_depth >= 0 && leave && th->n_depth == d && type != MCLOC_EV_UNTIMED)
		th->n_depth = -1;
	if (o->filter) {
		if (th->f_depth < 0 && (mark & 1) && enter && type != MCLOC_EV_UNTIMED)
			th->f_depth = d;
		bool inside = th->f_depth >= 0 || ((mark & 1) && type == MCLOC_EV_UNTIMED);

		*base = th->f_depth >= 0 ? th->f_depth : d;
		if (!inside)
			k = false;
		if (th->f_depth == d && leave && type != MCLOC_EV_UNTIMED)
			th->f_depth = -1;
	}
	if (o->depth && d - *base >= o->depth)
		k = false;
	return k;
}

/* What walks the events: a formatter (format.c's), or an analysis. */
struct walker {
	void (*event)(struct walker *w, struct tracing *t, struct item *it);
};

static void to_format(struct walker *w, struct tracing *t, struct item *it)
{
	(void)w;
	format_event(t, it);
}

/* The tracing that formats process P's events: its clock, names and
 * threads. */
static void tracing_of(struct tracing *t, struct rproc *p, const struct recording *r,
		       const struct ropts *o)
{
	struct symbols *c = sym_new();
	char path[4096];
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/%s.maps", r->dir, p->key);
	char *maps = c ? slurp(AT_FDCWD, path, MAPS_MAX, &len) : NULL;

	if (maps) {
		sym_set_maps(c, maps, len);
		free(maps);
	}
	if (c) {
		t->sym = c;
		t->symbolize = symbolize;
		if (o->srcline)
			t->source = source_line;
	}
	t->pid = p->info.pid;
	t->range_end = o->to_ns != 0;
	t->g.ticks = p->info.ticks;
	t->g.start_ns = p->info.start_ns;
	t->g.start_time = p->info.start_time;
	t->rate = 1;
	if (p->info.ticks) {
		double rate = p->info.end_time > p->info.start_time &&
					      p->info.end_ns > p->info.start_ns ?
				      (double)(p->info.end_ns - p->info.start_ns) /
					      (double)(p->info.end_time - p->info.start_time) :
				      0;

		t->rate = rate > 0 && rate < 1e6 ? rate : 1;
	}
	/* (The names move over for the formatting, and back after.) */
	t->sites = p->sites;
	t->callers = p->callers;
	/* (Each thread's events are found by its entry: without one they
	 * would be left out without a word.) */
	for (size_t i = 0; i < p->nth; i++)
		if (!thread_of(t, p->th[i].tid, p->th[i].comm)) {
			fail(r->dir, "out of memory for the %zu threads of process %u", p->nth,
			     p->info.pid);
			exit(1);
		}
}

static void tracing_done(struct tracing *t, struct rproc *p)
{
	sym_free(t->sym);
	t->sym = NULL;
	p->sites = t->sites;
	p->callers = t->callers;
	t->sites = t->callers = (struct names){ 0 };
	tracing_free(t);
}

/* Every event of P that passes O's filters, in time order, to W. */
static int walk(const struct ropts *o, struct rproc *p, struct tracing *t, struct walker *w)
{
	struct merge m = { .h = calloc(p->nth + 1, sizeof(*m.h)) };
	struct site_marks sm = { .mark = calloc(p->sites.n + 1, 1) };

	if (!m.h || !sm.mark) {
		free(m.h);
		free(sm.mark);
		fail(NULL, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < p->sites.n; i++) {
		const char *nm = p->sites.v[i].name;

		if (nm && o->filter && matches(o->filter, nm))
			sm.mark[i] |= 1;
		if (nm && o->notrace && matches(o->notrace, nm))
			sm.mark[i] |= 2;
	}
	for (size_t i = 0; i < p->nth; i++) {
		struct rthread *th = &p->th[i];

		th->at = 0;
		th->f_depth = th->n_depth = -1;
		decoder_free(&th->dec);
		th->dec = (struct decoder){ 0 };
		if (o->tid && th->tid != o->tid)
			continue;
		advance(th);
		if (th->next.type)
			m.h[m.n++] = th;
	}
	for (size_t i = m.n; i-- > 0;)
		sift_down(&m, i);
	while (m.n) {
		struct rthread *th = m.h[0];
		struct item it = { .e = th->next, .tid = th->tid, .seq = (uint32_t)th->at };
		uint16_t type = it.e.type & (uint16_t)~MCLOC_EV_LOST_BEFORE;

		advance(th);
		if (!th->next.type)
			m.h[0] = m.h[--m.n];
		sift_down(&m, 0);
		if (it.e.type & MCLOC_EV_LOST_BEFORE)
			th->f_depth = th->n_depth = -1;
		if (type == 0 && (it.e.type & MCLOC_EV_LOST_BEFORE)) {
			/* (lost at the thread's end) */
			struct thread *ft = thread_of(t, th->tid, NULL);

			if (ft && w->event == to_format)
				thread_lost(t, ft, &it.e);
			continue;
		}
		if (type < MCLOC_EV_CALL || type > MCLOC_EV_MARK || type == MCLOC_EV_CPU)
			continue;	/* (not an event of this version: data) */
		uint64_t ns = to_ns(t, it.e.time);

		if (ns < o->from_ns || (o->to_ns && ns > o->to_ns))
			continue;
		th->end_ns = ns;
		int base = 0;

		if ((o->filter || o->notrace || o->depth) && !keep(o, p, &sm, th, &it.e, type, &base))
			continue;
		it.e.depth = (uint16_t)(it.e.depth - base);
		if (o->as_function) {
			if (type != MCLOC_EV_ENTRY && type != MCLOC_EV_UNTIMED)
				continue;
			it.e.type = (uint16_t)((it.e.type & MCLOC_EV_LOST_BEFORE) | MCLOC_EV_CALL);
		}
		w->event(w, t, &it);
	}
	/* Where each thread's events end, filters or not (thread_end()). */
	for (size_t i = 0; i < p->nth; i++) {
		struct thread *ft = i < t->nthreads && t->threads[i].tid == p->th[i].tid ?
					    &t->threads[i] : thread_of(t, p->th[i].tid, NULL);

		if (ft && p->th[i].end_ns > ft->end_ns)
			ft->end_ns = p->th[i].end_ns;
	}
	free(m.h);
	free(sm.mark);
	return 0;
}

/* ---- the call tree: graph FUNC and the flame graph ------------------------ */

/* A node of the call tree: a function called from its parent node. */
struct node {
	uint64_t ip;
	uint32_t parent;	/* index, 0 for the roots' parent */
	uint64_t calls, total_ns, self_ns;
	uint64_t untimed;	/* calls with no end to time: left, not hooked */
	uint64_t unreturned;	/* calls open at the end, timed to it */
};

struct frame {
	uint32_t node;
	uint64_t ip, child_ns, t0;
};

struct tstack {
	uint32_t tid;
	struct frame *f;
	size_t n, cap;
	uint64_t last_ns;	/* the thread's last event */
};

struct tree {
	struct walker w;
	struct node *nodes;	/* [0] is the root above every thread's calls */
	size_t n, cap;
	uint32_t *index;	/* open addressing over (parent, ip): node + 1 */
	size_t mask;
	struct tstack *stacks;
	size_t nstacks;
	bool failed;
};

static size_t node_hash(uint32_t parent, uint64_t ip, size_t mask)
{
	return (size_t)(((ip ^ (uint64_t)parent << 44) * 0x9e3779b97f4a7c15ull) >> 29) & mask;
}

static uint32_t child_of(struct tree *tr, uint32_t parent, uint64_t ip)
{
	size_t i;

	if (tr->index)
		for (i = node_hash(parent, ip, tr->mask); tr->index[i]; i = (i + 1) & tr->mask) {
			struct node *nd = &tr->nodes[tr->index[i] - 1];

			if (nd->ip == ip && nd->parent == parent)
				return tr->index[i] - 1;
		}
	if (tr->n == tr->cap || tr->n >= UINT32_MAX - 1) {
		size_t cap = tr->cap ? 2 * tr->cap : 1024;
		struct node *v = realloc(tr->nodes, cap * sizeof(*v));
		uint32_t *ix = calloc(2 * cap, sizeof(*ix));

		if (!v || !ix || tr->n >= UINT32_MAX - 1) {
			free(ix);
			if (v)
				tr->nodes = v;
			tr->failed = true;
			return 0;
		}
		tr->nodes = v;
		tr->cap = cap;
		free(tr->index);
		tr->index = ix;
		tr->mask = 2 * cap - 1;
		for (size_t k = 1; k < tr->n; k++) {
			i = node_hash(v[k].parent, v[k].ip, tr->mask);
			while (ix[i])
				i = (i + 1) & tr->mask;
			ix[i] = (uint32_t)k + 1;
		}
		if (!tr->n)
			v[tr->n++] = (struct node){ 0 };
	}
	i = node_hash(parent, ip, tr->mask);
	while (tr->index[i])
		i = (i + 1) & tr->mask;
	tr->nodes[tr->n] = (struct node){ .ip = ip, .parent = parent };
	tr->index[i] = (uint32_t)++tr->n;
	return (uint32_t)tr->n - 1;
}

static struct tstack *stack_of(struct tree *tr, uint32_t tid)
{
	for (size_t i = 0; i < tr->nstacks; i++)
		if (tr->stacks[i].tid == tid)
			return &tr->stacks[i];
	struct tstack *v = realloc(tr->stacks, (tr->nstacks + 1) * sizeof(*v));

	if (!v) {
		tr->failed = true;
		return NULL;
	}
	tr->stacks = v;
	v[tr->nstacks] = (struct tstack){ .tid = tid };
	return &v[tr->nstacks++];
}

/* An entry pushes its node; an exit pops it, with its time and its own
 * (its callees' taken off).  A call left by a longjmp is counted, not
 * timed; a thread's lost events empty its stack, as their returns may
 * be among them. */
/* Call F, just taken off S, took DUR. */
static void tree_end(struct tree *tr, struct tstack *s, const struct frame *f, uint64_t dur)
{
	struct node *nd = &tr->nodes[f->node];

	nd->total_ns += dur;
	nd->self_ns += dur > f->child_ns ? dur - f->child_ns : 0;
	if (s->n)
		s->f[s->n - 1].child_ns += dur;
}

static void tree_event(struct walker *w, struct tracing *t, struct item *it)
{
	struct tree *tr = (struct tree *)w;
	struct tstack *s = stack_of(tr, it->tid);
	uint16_t type = it->e.type & (uint16_t)~MCLOC_EV_LOST_BEFORE;

	if (!s || type == MCLOC_EV_MARK)
		return;
	s->last_ns = to_ns(t, it->e.time);
	if (it->e.type & MCLOC_EV_LOST_BEFORE)
		s->n = 0;
	uint32_t top = s->n ? s->f[s->n - 1].node : 0;

	if (type == MCLOC_EV_ENTRY || type == MCLOC_EV_CALL || type == MCLOC_EV_UNTIMED) {
		uint32_t nd = child_of(tr, top, it->e.ip);

		if (tr->failed)
			return;
		tr->nodes[nd].calls++;
		tr->nodes[nd].untimed += type == MCLOC_EV_UNTIMED;
		if (type != MCLOC_EV_ENTRY)
			return;	/* (no return to wait for) */
		/* The runtime hooks returns 128 calls deep at most, and an
		 * event's depth cannot say more than this: entries without
		 * end past it are a forged file's, and each would make the
		 * tree a level deeper, the folded stacks and graph's walks up
		 * quadratic in them.  Counted, not timed. */
		if (s->n > MCLOC_EV_DEPTH_MAX)
			return;
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 64;
			struct frame *f = realloc(s->f, cap * sizeof(*f));

			if (!f) {
				tr->failed = true;
				return;
			}
			s->f = f;
			s->cap = cap;
		}
		s->f[s->n++] = (struct frame){ .node = nd, .ip = it->e.ip, .t0 = s->last_ns };
		return;
	}
	/* An exit: of the top call, or (a call begun before the recording
	 * or whose entry was lost) of none we saw. */
	if (!s->n || s->f[s->n - 1].ip != it->e.ip)
		return;
	struct frame f = s->f[--s->n];

	if (type != MCLOC_EV_EXIT) {
		tr->nodes[f.node].untimed++;
		return;
	}
	tree_end(tr, s, &f, scaled(t, it->e.parent));
}

/* The calls still open when the events end (a program that left through
 * exit(), a thread still running when a recording stopped): each ends
 * when its thread's events end (thread_end()), as replay and report end
 * them. */
static void tree_finish(struct tree *tr, struct tracing *t)
{
	for (size_t i = 0; i < tr->nstacks; i++) {
		struct tstack *s = &tr->stacks[i];
		const struct thread *ft = s->n ? thread_of(t, s->tid, NULL) : NULL;
		uint64_t end = ft && thread_end(ft) > s->last_ns ? thread_end(ft) : s->last_ns;

		while (s->n) {
			struct frame f = s->f[--s->n];

			tr->nodes[f.node].unreturned++;
			tree_end(tr, s, &f, end > f.t0 ? end - f.t0 : 0);
		}
	}
}

static void tree_free(struct tree *tr)
{
	for (size_t i = 0; i < tr->nstacks; i++)
		free(tr->stacks[i].f);
	free(tr->stacks);
	free(tr->nodes);
	free(tr->index);
}

/* ---- the commands ----------------------------------------------------------- */

static int parse_time_range(const char *s, struct ropts *o)
{
	char *end;
	double a = strtod(s, &end), b = 0;

	if (end == s || (*end && *end != '~') || !(a >= 0))
		return -1;
	if (*end && end[1]) {
		b = strtod(end + 1, &end);
		if (*end || b < a)
			return -1;
	}
	o->from_ns = a > 0 ? saturate(a * 1e9) : 0;
	o->to_ns = b > 0 ? saturate(b * 1e9) : 0;
	return 0;
}

static void usage_offline_after(const char *cmd, const char *what);

static void usage_offline(const char *cmd)
{
	usage_offline_after(cmd, "");
}

/* The usage, after WHAT (a bad option's say, or ""): one line. */
static void usage_offline_after(const char *cmd, const char *what)
{
	if (!strcmp(cmd, "replay"))
		fail(cmd, "%susage: mcloc replay [-d DIR] [-F GLOB] [-N GLOB] [--depth N] "
			  "[-t USECS] [--time-range S~S] [--tid T] [--function] [--srcline] [-j]", what);
	else if (!strcmp(cmd, "report"))
		fail(cmd, "%susage: mcloc report [-d DIR] [--sort total|self|calls|avg|name] "
			  "[--per-thread] [-F GLOB] [-N GLOB] [--depth N] [--time-range S~S] "
			  "[--tid T] [-j]", what);
	else if (!strcmp(cmd, "graph"))
		fail(cmd, "%susage: mcloc graph [-d DIR] [--time-range S~S] [--tid T] FUNC", what);
	else if (!strcmp(cmd, "dump"))
		fail(cmd, "%susage: mcloc dump [-d DIR] (--chrome FILE | --flame-graph FILE | "
			  "--perfetto FILE) [-F GLOB] [-N GLOB] [--depth N] [--time-range S~S] "
			  "[--tid T]   (FILE - is standard output)", what);
	else
		fail(cmd, "%susage: mcloc info [-d DIR]", what);
}

/* Options of ARGV[0..ARGC) into O; the index of the first other
 * argument, or -1 (said). */
static int parse_ropts(int argc, char **argv, struct ropts *o)
{
	static const struct option opts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "filter", required_argument, NULL, 'F' },
		{ "notrace", required_argument, NULL, 'N' },
		{ "depth", required_argument, NULL, 'D' },
		{ "threshold", required_argument, NULL, 't' },
		{ "time-range", required_argument, NULL, 'R' },
		{ "tid", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "per-thread", no_argument, NULL, 'P' },
		{ "sort", required_argument, NULL, 's' },
		{ "function", no_argument, NULL, 'f' },
		{ "srcline", no_argument, NULL, 'L' },
		{ "chrome", required_argument, NULL, 'c' },
		{ "flame-graph", required_argument, NULL, 'g' },
		{ "perfetto", required_argument, NULL, 'p' },
		{ 0 }
	};
	const char *cmd = argv[0];
	int c;
	char *end;
	uint64_t v;
	double d;

	char bad[160];

	*o = (struct ropts){ .dir = MCLOC_REC_DEFAULT_DIR };
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "d:F:N:D:t:j", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o->dir = optarg; break;
		case 'F': o->filter = optarg; break;
		case 'N': o->notrace = optarg; break;
		case 'D':
			o->depth = (int)strtol(optarg, &end, 10);
			if (*end || o->depth < 1) {
				fail(cmd, "--depth: a number from 1");
				return -1;
			}
			break;
		case 't':
			if (opt_real(cmd, "-t", optarg, &d) < 0)
				return -1;
			o->threshold_ns = saturate(d * 1000);
			break;
		case 'R':
			if (parse_time_range(optarg, o) < 0) {
				fail(cmd, "--time-range: START~END in seconds, as replay prints "
					  "them (END may be left out)");
				return -1;
			}
			break;
		case 'T':
			if (opt_whole(cmd, "--tid", optarg, 1, UINT32_MAX, &v) < 0)
				return -1;
			o->tid = (uint32_t)v;
			break;
		case 'j': o->json = true; break;
		case 'P': o->per_thread = true; break;
		case 'f': o->as_function = true; break;
		case 'L': o->srcline = true; break;
		case 'c': o->chrome = optarg; break;
		case 'g': o->flame = optarg; break;
		case 'p': o->perfetto = optarg; break;
		case 's':
			if (sort_key_of(optarg, &o->sort, cmd) < 0)
				return -1;
			break;
		default:
			/* (getopt's own message would be a second line.) */
			bad_option(bad, sizeof(bad), argv[optind - 1]);
			usage_offline_after(cmd, bad);
			return -1;
		}
	}
	return optind;
}

static int cmd_replay_report(struct recording *r, const struct ropts *o, bool report)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];
		struct tracing t = { .json = o->json, .threshold_ns = o->threshold_ns,
				     .per_thread = o->per_thread, .sort = o->sort };
		struct walker w = { to_format };

		t.mode = report ? PROFILE :
			 p->info.tracer == MCLOC_TRACE_FUNCTION || o->as_function ? FUNCTION : GRAPH;
		if (report && p->info.tracer == MCLOC_TRACE_FUNCTION) {
			fail(r->dir, "process %u was recorded with the function tracer: no times "
				     "to report (record function_graph)", p->info.pid);
			return 1;
		}
		tracing_of(&t, p, r, o);
		if (r->nprocs > 1 && !o->json)
			printf("%s# process %s (%s)\n", i ? "\n" : "", p->key, p->info.comm);
		print_header(&t);
		walk(o, p, &t, &w);
		finish_output(&t);
		tracing_done(&t, p);
	}
	return 0;
}

/* The name of node K's function, or its address. */
static const char *node_name(struct tracing *t, const struct tree *tr, uint32_t k, char *b,
			     size_t len)
{
	return site_name(t, tr->nodes[k].ip, b, len);
}

struct edge {
	uint64_t ip, calls, total_ns;
};

static void add_edge(struct edge **v, size_t *n, uint64_t ip, uint64_t calls, uint64_t ns)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].ip == ip) {
			(*v)[i].calls += calls;
			(*v)[i].total_ns += ns;
			return;
		}
	struct edge *nv = realloc(*v, (*n + 1) * sizeof(**v));

	if (!nv)
		return;
	*v = nv;
	nv[(*n)++] = (struct edge){ ip, calls, ns };
}

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	if (x->calls != y->calls)
		return x->calls < y->calls ? 1 : -1;
	return x->ip < y->ip ? -1 : x->ip > y->ip;
}

static void print_edges(struct tracing *t, const char *title, struct edge *v, size_t n)
{
	char b[32];

	printf("\n%s:\n%12s %14s  %s\n", title, "Calls", "Time (us)", "Function");
	if (n)
		qsort(v, n, sizeof(*v), cmp_edge);
	for (size_t i = 0; i < n; i++)
		printf("%12llu %14.3f  %s\n", (unsigned long long)v[i].calls, v[i].total_ns / 1e3,
		       v[i].ip ? site_name(t, v[i].ip, b, sizeof(b)) : "(the thread's start)");
	if (!n)
		printf("%12s %14s  (none)\n", "", "");
}

/* mcloc graph FUNC: its calls, time and own time, whom it was called by
 * and whom it called, each with the calls and the time spent in them. */
static int cmd_graph(struct recording *r, const struct ropts *o, const char *func)
{
	bool found = false;

	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];
		struct tracing t = { .mode = GRAPH };
		struct tree tr = { .w = { tree_event } };
		struct edge *callers = NULL, *callees = NULL;
		size_t ncallers = 0, ncallees = 0;
		uint64_t calls = 0, total = 0, self = 0, untimed = 0, unreturned = 0;
		char b[32];

		if (p->info.tracer != MCLOC_TRACE_GRAPH) {
			fail(r->dir, "process %u was recorded with the function tracer: no calls' "
				     "ends to graph (record function_graph)", p->info.pid);
			return 1;
		}
		tracing_of(&t, p, r, o);
		walk(o, p, &t, &tr.w);
		tree_finish(&tr, &t);
		for (size_t k = 1; k < tr.n; k++) {
			const struct node *nd = &tr.nodes[k];

			if (strcmp(node_name(&t, &tr, (uint32_t)k, b, sizeof(b)), func))
				continue;
			calls += nd->calls;
			untimed += nd->untimed;
			unreturned += nd->unreturned;
			/* (Recursion: the time of its outermost calls only.) */
			bool outer = true;

			for (uint32_t up = nd->parent; up && outer; up = tr.nodes[up].parent)
				outer = strcmp(node_name(&t, &tr, up, b, sizeof(b)), func) != 0;
			if (outer)
				total += nd->total_ns;
			self += nd->self_ns;
			add_edge(&callers, &ncallers, nd->parent ? tr.nodes[nd->parent].ip : 0,
				 nd->calls, nd->total_ns);
		}
		for (size_t k = 1; k < tr.n; k++) {
			const struct node *nd = &tr.nodes[k];

			if (nd->parent && !strcmp(node_name(&t, &tr, nd->parent, b, sizeof(b)), func))
				add_edge(&callees, &ncallees, nd->ip, nd->calls, nd->total_ns);
		}
		if (calls) {
			found = true;
			if (r->nprocs > 1)
				printf("# process %s (%s)\n", p->key, p->info.comm);
			printf("%s: %llu call%s", func, (unsigned long long)calls, calls == 1 ? "" : "s");
			/* (Their times are not in those below.) */
			if (untimed)
				printf(" (%llu not timed: left early, or not hooked)",
				       (unsigned long long)untimed);
			if (unreturned)
				printf(" (%llu not returned when the trace ended: timed to %s "
				       "thread's last event)", (unsigned long long)unreturned,
				       unreturned == 1 ? "its" : "their");
			printf(", %.3f us, %.3f us of its own\n", total / 1e3, self / 1e3);
			print_edges(&t, "Called by", callers, ncallers);
			print_edges(&t, "Calls", callees, ncallees);
		}
		free(callers);
		free(callees);
		tree_free(&tr);
		tracing_done(&t, p);
	}
	if (!found) {
		fail(r->dir, "no call of %s recorded", func);
		return 1;
	}
	return 0;
}

/* FILE for writing ("-": standard output); NULL said. */
static FILE *out_file(const char *file)
{
	FILE *f = strcmp(file, "-") ? fopen(file, "w") : stdout;

	if (!f)
		fail(file, "%s", strerror(errno));
	return f;
}

static int close_out(FILE *f, const char *file)
{
	if (f == stdout ? fflush(f) != 0 || ferror(f) : fclose(f) != 0) {
		fail(file, "%s", strerror(errno ? errno : EIO));
		return 1;
	}
	return 0;
}

/* The path of node K, root first, joined by ';', into F. */
static void put_path(FILE *f, struct tracing *t, const struct tree *tr, uint32_t k)
{
	char b[32];

	if (tr->nodes[k].parent) {
		put_path(f, t, tr, tr->nodes[k].parent);
		fputc(';', f);
	}
	const char *nm = node_name(t, tr, k, b, sizeof(b));

	/* (A name with a ';' or a space would split its line.) */
	for (; *nm; nm++)
		fputc(*nm == ';' || *nm == ' ' ? '_' : *nm, f);
}

/*
 * Folded stacks, as flamegraph.pl and speedscope read them: a line per
 * call path, "main;parse;lex 1234", with the nanoseconds spent in the
 * path's last function itself.  Untimed calls (whose return could not be
 * hooked, or left by a longjmp) add no time; calls still open at the end
 * run to their thread's last event.
 */
static int dump_flame(struct recording *r, const struct ropts *o, FILE *f)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];
		struct tracing t = { .mode = GRAPH };
		struct tree tr = { .w = { tree_event } };

		tracing_of(&t, p, r, o);
		walk(o, p, &t, &tr.w);
		tree_finish(&tr, &t);
		for (size_t k = 1; k < tr.n; k++) {
			if (!tr.nodes[k].self_ns)
				continue;
			put_path(f, &t, &tr, (uint32_t)k);
			fprintf(f, " %llu\n", (unsigned long long)tr.nodes[k].self_ns);
		}
		if (tr.failed)
			fail(r->dir, "out of memory: the flame graph is not whole");
		tree_free(&tr);
		tracing_done(&t, p);
	}
	return 0;
}

static int dump_chrome(struct recording *r, const struct ropts *o, FILE *f)
{
	bool first = true;

	fprintf(f, "{\"traceEvents\":[");
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];
		struct tracing t = { .chrome = f, .chrome_first = first };
		struct walker w = { to_format };

		t.mode = p->info.tracer == MCLOC_TRACE_FUNCTION ? FUNCTION : GRAPH;
		tracing_of(&t, p, r, o);
		walk(o, p, &t, &w);
		chrome_end_process(&t);
		first = t.chrome_first;
		t.chrome = NULL;
		tracing_done(&t, p);
	}
	fprintf(f, "\n],\"displayTimeUnit\":\"ns\"}\n");
	return 0;
}

/* Perfetto's tracks and slices: a walker over each process's events. */
struct pf_walk {
	struct walker w;
	struct perfetto *pf;
	struct tstack *open;	/* per thread: calls begun, not ended */
};

/* The arguments (RET: the return value) of E as the next Perfetto event's
 * annotations, named as JSON lines name them: args[0], args[1], ... and
 * retval; cut strings listed in "cut" (retval_cut).  A string's bytes
 * that are not UTF-8 go as \xXX (a protobuf string is UTF-8). */
static void pf_args(struct perfetto *pf, const struct event *e, bool ret)
{
	struct arg_item it;
	unsigned k = 0;
	char cut[64] = "";
	size_t ncut = 0;

	for (size_t used, n = e->ndata; (used = next_arg_item(e->data + e->ndata - n, n, &it));
	     n -= used) {
		if (!(it.flags & MCLOC_DATA_RET) != !ret)
			continue;
		char name[24], str[4 * 255 + 1];
		struct arg_value v;
		size_t m = 0;

		snprintf(name, sizeof(name), ret ? "retval" : "args[%u]", k);
		arg_value_of(&it, &v);
		switch (v.kind) {
		case VAL_NONE:
			pf_arg_str(pf, name, "?", 1);
			break;
		case VAL_NULLPTR:
			pf_arg_uint(pf, name, 0, true);
			break;
		case VAL_INT:
			pf_arg_int(pf, name, v.i);
			break;
		case VAL_UINT:
			pf_arg_uint(pf, name, v.u, false);
			break;
		case VAL_HEX:
			pf_arg_uint(pf, name, v.u, true);
			break;
		case VAL_DOUBLE:
			pf_arg_double(pf, name, v.d);
			break;
		case VAL_CHAR:
		case VAL_STR: {
			uint8_t c = (uint8_t)v.u;
			const uint8_t *b = v.kind == VAL_CHAR ? &c : v.s;
			size_t len = v.kind == VAL_CHAR ? 1 : v.len;

			for (size_t j = 0; j < len; j++) {
				size_t u = b[j] >= 0x80 ? sym_utf8_len(b + j, len - j) : 0;

				if (u) {
					memcpy(str + m, b + j, u);
					m += u;
					j += u - 1;
				} else if (b[j] >= 0x20 && b[j] < 0x7f) {
					str[m++] = (char)b[j];
				} else {
					m += (size_t)sprintf(str + m, "\\x%02x", b[j]);
				}
			}
			pf_arg_str(pf, name, str, m);
			break;
		}
		}
		if (v.cut && ret)
			pf_arg_bool(pf, "retval_cut", true);
		else if (v.cut && ncut < sizeof(cut) - 12)
			ncut += (size_t)snprintf(cut + ncut, sizeof(cut) - ncut, ncut ? ",%u" : "%u", k);
		if (ret)
			break;
		k++;
	}
	if (ncut)
		pf_arg_str(pf, "cut", cut, ncut);
}

static void pf_walk_event(struct walker *w, struct tracing *t, struct item *it)
{
	struct pf_walk *pw = (struct pf_walk *)w;
	struct thread *th = thread_of(t, it->tid, NULL);
	uint16_t type = it->e.type & (uint16_t)~MCLOC_EV_LOST_BEFORE;
	uint64_t ns = to_ns(t, it->e.time), track = (uint64_t)t->pid << 32 | it->tid;
	char b[32];

	if (!th)
		return;
	th->last_ns = ns;
	if (it->e.type & MCLOC_EV_LOST_BEFORE)
		for (; th->open; th->open--)
			pf_event(pw->pf, ns, track, PF_END, 0, NULL);
	/* (Arguments with a slice's begin, the return value with its end,
	 * as dump --chrome has them.) */
	if (type == MCLOC_EV_ENTRY) {
		th->open++;
		if (it->e.ndata)
			pf_args(pw->pf, &it->e, false);
		pf_event(pw->pf, ns, track, PF_BEGIN, it->e.ip, site_name(t, it->e.ip, b, sizeof(b)));
	} else if ((type == MCLOC_EV_EXIT || type == MCLOC_EV_LEFT) && th->open) {
		th->open--;
		if (type == MCLOC_EV_EXIT && it->e.ndata)
			pf_args(pw->pf, &it->e, true);
		pf_event(pw->pf, ns, track, PF_END, 0, NULL);
	} else if (type == MCLOC_EV_CALL || type == MCLOC_EV_UNTIMED) {
		if (it->e.ndata)
			pf_args(pw->pf, &it->e, false);
		pf_event(pw->pf, ns, track, PF_INSTANT, it->e.ip,
			 site_name(t, it->e.ip, b, sizeof(b)));
	}
}

static int dump_perfetto(struct recording *r, const struct ropts *o, FILE *f)
{
	struct pf_walk pw = { .w = { pf_walk_event }, .pf = pf_open(f) };

	if (!pw.pf) {
		fail(NULL, "out of memory");
		return 1;
	}
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];
		struct tracing t = { .mode = GRAPH };

		tracing_of(&t, p, r, o);
		pf_sequence(pw.pf);
		/* (A process's track is its pid; a thread's, pid:tid.) */
		pf_track(pw.pf, (uint64_t)p->info.pid << 32, p->info.pid, 0, p->info.comm, 0);
		for (size_t k = 0; k < p->nth; k++)
			pf_track(pw.pf, (uint64_t)p->info.pid << 32 | p->th[k].tid, p->info.pid,
				 p->th[k].tid, p->th[k].comm, (uint64_t)p->info.pid << 32);
		walk(o, p, &t, &pw.w);
		/* Calls still running at the end end there. */
		for (size_t k = 0; k < t.nthreads; k++)
			for (; t.threads[k].open; t.threads[k].open--)
				pf_event(pw.pf, thread_end(&t.threads[k]),
					 (uint64_t)p->info.pid << 32 | t.threads[k].tid, PF_END, 0, NULL);
		tracing_done(&t, p);
	}
	if (pf_close(pw.pf) < 0) {
		fail(NULL, "the Perfetto trace could not be written whole");
		return 1;
	}
	return 0;
}

static int cmd_dump(struct recording *r, const struct ropts *o)
{
	const char *file = o->chrome ? o->chrome : o->flame ? o->flame : o->perfetto;

	if (!!o->chrome + !!o->flame + !!o->perfetto != 1) {
		usage_offline("dump");
		return 2;
	}
	/* (Said before the file is made, as report and graph say it.) */
	for (size_t i = 0; o->flame && i < r->nprocs; i++)
		if (r->procs[i].info.tracer != MCLOC_TRACE_GRAPH) {
			fail(r->dir, "process %u was recorded with the function tracer: no times "
				     "to fold (record function_graph)", r->procs[i].info.pid);
			return 1;
		}
	FILE *f = out_file(file);

	if (!f)
		return 1;
	int ret = o->chrome ? dump_chrome(r, o, f) : o->flame ? dump_flame(r, o, f) :
			      dump_perfetto(r, o, f);

	return close_out(f, file) || ret;
}

static int cmd_info(struct recording *r)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct rproc *p = &r->procs[i];
		const struct mcloc_rec_info *in = &p->info;
		time_t when = (time_t)(in->realtime_ns / 1000000000u);
		char date[64] = "?";
		struct tm tm;
		double secs = in->ticks ? 0 : 0;

		if (localtime_r(&when, &tm))
			strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", &tm);
		printf("%s# process %s\n", i ? "\n" : "", p->key);
		if (in->ppid)
			printf("%-14s %u\n", "parent:", in->ppid);
		if (in->generation)
			printf("%-14s %u (exec'd by pid %u)\n", "image:", in->generation, in->pid);
		printf("%-14s %s\n", "recorded:", date);
		printf("%-14s", "command:");
		for (size_t k = 0; k < in->argc_len; k += strlen(p->args + k) + 1)
			printf(" %s", p->args + k);
		printf("\n%-14s %s\n", "name:", in->comm);
		printf("%-14s %s\n", "tracer:",
		       in->tracer == MCLOC_TRACE_FUNCTION ? "function" : "function_graph");
		if (in->ring_flags & MCLOC_RING_OVERWRITE)
			printf("%-14s flight recorder, %u snapshot%s\n", "kept:", in->snapshots,
			       in->snapshots == 1 ? "" : "s");
		printf("%-14s %s\n", "clock:", in->ticks ? "CPU ticks, converted to ns" :
							  "CLOCK_MONOTONIC ns");
		(void)secs;
		printf("%-14s %llu (of 8 bytes: an event takes one, two or more)\n%-14s %llu\n"
		       "%-14s %llu\n", "units:", (unsigned long long)in->units, "lost:", (unsigned long long)in->lost,
		       "waits:", (unsigned long long)in->waits);
		printf("%-14s %zu\n", "threads:", p->nth);
		for (size_t k = 0; k < p->nth; k++)
			printf("  %-8u %-16s %12zu units  %llu lost  %llu waits\n", p->th[k].tid,
			       p->th[k].comm, p->th[k].n, (unsigned long long)p->th[k].lost,
			       (unsigned long long)p->th[k].waits);
	}
	return 0;
}

/*
 * The thread files are mapped: one that its owner cuts short while it is
 * read would end the command with SIGBUS at the first page past its new
 * end.  The guard turns that into one line and exit 1.  (Process-wide,
 * as a signal handler must find it; set only while a command reads.)
 */
static sigjmp_buf *bus_guard;

static void on_bus(int sig)
{
	if (bus_guard)
		siglongjmp(*bus_guard, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* mcloc replay|report|graph|dump|info [OPTIONS] [FUNC] */
int cmd_offline(int argc, char **argv, bool json)
{
	struct ropts o;
	struct recording r;
	const char *cmd = argv[0];
	int at = parse_ropts(argc, argv, &o), ret;
	bool graph = !strcmp(cmd, "graph");

	if (at < 0)
		return 2;
	o.json = o.json || json;
	if (argc - at != graph) {
		usage_offline(cmd);
		return 2;
	}
	if (recording_open(&r, o.dir) < 0)
		return 1;
	/* -F that names no function of the recording: said, as graph says
	 * a function it has no call of (it printed the headers alone). */
	bool named = !o.filter || graph;

	for (size_t i = 0; i < r.nprocs && !named; i++)
		for (size_t k = 0; k < r.procs[i].sites.n && !named; k++)
			named = r.procs[i].sites.v[k].name &&
				matches(o.filter, r.procs[i].sites.v[k].name);
	if (!named) {
		fail(o.dir, "-F '%s': matches no function of the recording", o.filter);
		recording_free(&r);
		return 1;
	}
	/* (A --tid of no thread printed nothing and exited 0, as if the
	 * thread had made no call.) */
	bool has_tid = !o.tid;

	for (size_t i = 0; i < r.nprocs && !has_tid; i++)
		for (size_t k = 0; k < r.procs[i].nth && !has_tid; k++)
			has_tid = r.procs[i].th[k].tid == o.tid;
	if (!has_tid) {
		fail(o.dir, "--tid %u: no thread of the recording", (unsigned)o.tid);
		recording_free(&r);
		return 1;
	}
	/* (A replay writes a great deal: in large blocks.) */
	char *buf = malloc(1 << 16);
	sigjmp_buf jb;
	struct sigaction sa = { .sa_handler = on_bus }, old;

	if (buf)
		setvbuf(stdout, buf, _IOFBF, 1 << 16);
	/* (Installed before the jump point: nothing it restores changes
	 * after it.) */
	sigaction(SIGBUS, &sa, &old);
	if (sigsetjmp(jb, 1)) {
		/* (What was read is out; the rest of the state is not to
		 * be trusted, so nothing more is freed: the command ends.) */
		bus_guard = NULL;
		sigaction(SIGBUS, &old, NULL);
		fflush(stdout);
		fail(o.dir, "a file of the recording was cut short while it was read");
		return 1;
	}
	bus_guard = &jb;
	if (!strcmp(cmd, "replay"))
		ret = cmd_replay_report(&r, &o, false);
	else if (!strcmp(cmd, "report"))
		ret = cmd_replay_report(&r, &o, true);
	else if (graph)
		ret = cmd_graph(&r, &o, argv[at]);
	else if (!strcmp(cmd, "dump"))
		ret = cmd_dump(&r, &o);
	else
		ret = cmd_info(&r);
	bus_guard = NULL;
	sigaction(SIGBUS, &old, NULL);
	recording_free(&r);
	if (fflush(stdout) != 0 && !ret) {
		fail(cmd, "standard output: %s", strerror(errno));
		ret = 1;
	}
	setvbuf(stdout, NULL, _IOFBF, BUFSIZ);
	free(buf);
	return ret;
}
