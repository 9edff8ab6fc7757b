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
#include "format.h"
#include "argspec.h"
#include "../base/grow.h"
#include "recorder.h"
#include "symbols.h"

#include <mcloc/record.h>

#include <dirent.h>
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
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READ_MS 20

static volatile sig_atomic_t stop_now;
/* SIGUSR1s received: each asks a flight recorder for a snapshot. */
static volatile sig_atomic_t snap_asked;

static void on_snapshot(int sig)
{
	(void)sig;
	snap_asked++;
}

static void on_stop(int sig)
{
	(void)sig;
	stop_now = 1;
}

/* ---- names ---------------------------------------------------------------- */

/* Every site's name, asked before the trace starts (a short program may
 * be gone by the time its first events are read), and again when an
 * event names a site not known yet (an image loaded since). */
static void add_site_name(const struct mcloc_rep_site *s, const char *name, void *ctx)
{
	struct name *n = name_add(ctx, s->site);

	if (n)
		n->name = strdup(name);
	/* (A program's names are data: printed as safe text.) */
	if (n && n->name)
		sym_clean(n->name, strlen(n->name));
}

static int load_sites(struct tracing *t)
{
	/* (Into a list of their own, then added to those known: a site
	 * whose image has gone since, as at the program's exit, still names
	 * the events it had.) */
	struct names ns = { 0 };
	int ret = peer_sites(t->p, MCLOC_REQ_SITES, add_site_name, &ns);

	if (ret == 0)
		names_merge(&t->sites, &ns);
	for (size_t i = 0; i < ns.n; i++)
		free(ns.v[i].name);
	free(ns.v);
	return ret;
}

/* Ask the program for the names of the callers in EV[0..N) not known yet. */
static void resolve_callers(struct tracing *t, const struct event *ev, size_t n)
{
	uint64_t ask_v[(MCLOC_REQ_MAX - sizeof(struct mcloc_msg)) / 8];
	size_t k = 0;
	struct mcloc_msg m;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && ((ev[i].type & ~MCLOC_EV_LOST_BEFORE) == MCLOC_EV_CALL ||
			      (ev[i].type & ~MCLOC_EV_LOST_BEFORE) == MCLOC_EV_ENTRY) &&
		    !name_find(&t->callers, ev[i].parent)) {
			struct name *nm = name_add(&t->callers, ev[i].parent);

			/* (By the byte before it, in the call: caller_name()
			 * says why.) */
			if (nm && ev[i].parent)
				ask_v[k++] = ev[i].parent - 1;
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
				struct name *nm = name_find(&t->callers, a.addr + 1);

				if (nm && a.namelen && !nm->name) {
					nm->name = strndup((const char *)t->p->buf + at + sizeof(a),
							   a.namelen);
					if (nm->name)
						sym_clean(nm->name, strlen(nm->name));
					nm->off = a.off + 1;
				}
				at += (sizeof(a) + a.namelen + 1 + 7) & ~(size_t)7;
			}
			k = 0;
		}
	}
}

/* The callers of the calls in the units V[0..N), named (mcloc record of
 * the function tracer, whose replay prints them: its events are all
 * whole, so a decoder of its own reads them). */
static void record_callers(struct tracing *t, const uint64_t *v, size_t n)
{
	struct decoder d = { 0 };
	struct event *ev = malloc(n * sizeof(*ev));
	size_t k = 0;

	for (size_t i = 0; ev && i < n;) {
		size_t used = decode_event(&d, v + i, n - i, &ev[k]);

		if (!used)
			break;
		i += used;
		k += (ev[k].type & ~MCLOC_EV_LOST_BEFORE) == MCLOC_EV_CALL;
	}
	if (k)
		resolve_callers(t, ev, k);
	free(ev);
	decoder_free(&d);
}

/* A caller or site the program could not name (it may have exited
 * first): named from the files it mapped, as the trace last saw them. */
static const char *live_symbolize(struct tracing *t, uint64_t addr, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return sym_func(t->sym, addr);
}

static void refresh_maps(struct tracing *t)
{
	size_t len = 0;
	char *maps = sym_read_maps(t->pid, &len);

	if (maps)
		sym_set_maps(t->sym, maps, len);
	free(maps);
}

/* ---- the rings -------------------------------------------------------------- */

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

/* Read every ring, merge by time, format.  Returns the events read. */
static size_t drain(struct tracing *t)
{
	const struct mcloc_ring_hdr *h = t->h;
	uint32_t nr = rings_taken(t);
	struct item *v = t->items;
	size_t n = 0, cap = t->cap_items;

	double rate = clock_rate(t);
	if (rate > 0)
		t->rate = rate;
	else if (!t->rate && !__atomic_load_n(&h->done, __ATOMIC_ACQUIRE))
		return 0;	/* (wait for the program's clock pair) */
	for (uint32_t i = 0; i < nr; i++) {
		struct unread u;

		if (!ring_unread(t, i, true, &u))
			continue;
		const uint64_t *sl = (const uint64_t *)u.a;
		size_t ns = u.na / sizeof(*sl);

		/* Room for every event of what was copied (a unit each at
		 * most), else the ring waits for the next pass, unread: every
		 * event released is decoded, as the short ones after it are
		 * read against it. */
		if (n + ns > cap) {
			size_t ncap = cap ? 2 * cap : 4096;

			while (ncap < n + ns)
				ncap *= 2;
			struct item *nv = realloc(v, ncap * sizeof(*v));

			if (!nv)
				continue;
			v = t->items = nv;
			cap = t->cap_items = ncap;
		}
		struct thread *th = thread_of(t, u.tid, ring_at(t, i)->comm);

		ring_consume(t, i, u.head);
		bool mark = u.gap != 0;	/* the next event says what was lost */

		for (size_t k = 0, seq = 0; k < ns;) {
			struct event e;
			size_t used = decode_event(&t->decs[i], sl + k, ns - k, &e);

			if (!used)
				break;
			k += used;
			if (!e.type || !th)
				continue;
			if (mark)
				e.type |= MCLOC_EV_LOST_BEFORE;
			mark = false;
			/* (Its data outlives the decoder's turns in the arena,
			 * placed once the pass has it all.) */
			uint32_t at = (uint32_t)t->narena;

			while (e.ndata && t->cap_arena < t->narena + e.ndata) {
				uint8_t *a = mc_grown(t->arena, &t->cap_arena, t->cap_arena, 1, 4096);

				if (a)
					t->arena = a;
				else
					e.ndata = 0;	/* (shown without) */
			}
			if (e.ndata) {
				memcpy(t->arena + t->narena, e.data, e.ndata);
				t->narena += e.ndata;
			}
			v[n++] = (struct item){ .e = e, .tid = u.tid, .seq = (uint32_t)seq++,
						.data_at = at };
		}
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
				/* (An image loaded since the maps were read:
				 * what names its sites if the program cannot.) */
				if (!name_find(&t->sites, v[i].e.ip) && t->sym)
					refresh_maps(t);
				break;
			}
		if (t->mode == FUNCTION) {
			struct event *ev = malloc(n * sizeof(*ev));

			for (size_t i = 0; ev && i < n; i++)
				ev[i] = v[i].e;
			if (ev)
				resolve_callers(t, ev, n);
			free(ev);
		}
		for (size_t i = 0; i < n; i++) {
			if (v[i].e.ndata)
				v[i].e.data = t->arena + v[i].data_at;
			format_event(t, &v[i]);
		}
		fflush(stdout);
	}
	t->narena = 0;
	return n;
}

/* For the sort: the tracing being printed (qsort passes no context). */
/* Why the geometry G does not describe rings in SIZE bytes, or NULL. */
static const char *bad_geometry(const struct mcloc_ring_hdr *g, uint64_t size)
{
	if (g->magic != MCLOC_RING_MAGIC)
		return "bad magic";
	if (g->version != MCLOC_RING_VERSION)
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
	if (g->flags & ~(uint32_t)MCLOC_RING_FLAGS || g->ticks > 1)
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
	t->decs = calloc(t->g.rings, sizeof(*t->decs));
	if (!t->tails || !t->decs)
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

enum cmd { TRACE, RUN, RECORD };

static void usage_trace_after(enum cmd cmd, const char *what)
{
	if (cmd == RECORD) {
		fail("record", "%susage: mcloc record [function|function_graph] [-d DIR] [--filter G] "
			       "[--notrace G] [--graph-function G] [--max-depth N] [--tid T] "
			       "[--duration S] [--buffer KIB] [--rings N] [--overwrite] "
			       "[--trigger FUNC:ACTION] [-A FUNC@ARGS] [-R FUNC@retval] [--auto-args] "
			       "[--no-follow] (-p PID | "
			       "[--preload LIB] -- PROG [ARGS])", what);
		return;
	}
	fail(cmd == RUN ? "run" : "trace", "%susage: mcloc %s function|function_graph|profile|nop [--filter G] "
		      "[--notrace G] [--graph-function G] [--max-depth N] [--tid T] "
		      "[--duration S] [-t USECS] [--per-thread] [--sort KEY] [--buffer KIB] "
		      "[--rings N] [--overwrite] [--trigger FUNC:ACTION] [-A FUNC@ARGS] "
		      "[-R FUNC@retval] [--auto-args] [--chrome FILE] [-o FILE] [-j]%s",
	     what, cmd == RUN ? "run" : "trace PID", cmd == RUN ? " [--preload LIB] -- PROG [ARGS]" : "");
}

static void usage_trace(enum cmd cmd)
{
	usage_trace_after(cmd, "");
}

static const char *cmd_name(enum cmd c)
{
	return c == RUN ? "run" : c == RECORD ? "record" : "trace";
}

/* What the trace, run and record subcommands were asked for. */
struct targs {
	const char *filter, *notrace, *graph, *chrome, *preload;
	const char *triggers;	/* --trigger FUNC:ACTION,... */
	const char *output;	/* -o: the trace's text (or JSON) there, not on stdout */
	struct mcloc_req_trace q;
	double duration;
	uint64_t threshold_ns;
	enum mode mode;
	bool nop;
	bool json;		/* -j after the subcommand, as before it */
	bool per_thread;	/* profile: a table per thread */
	enum sort_key sort;	/* profile: the order of its rows */
	const char *data;	/* record: the recording's directory */
	const char *pid;	/* record -p: the program to attach to */
	const char *args;	/* record: the command line, for the info */
	size_t args_len;
	bool follow;		/* record: children and the programs they exec too */
	struct argspecs argspecs;	/* -A, -R, --auto-args */
	enum cmd cmd;		/* which subcommand, for its messages */
};

/* Options of ARGV[0..ARGC) into A; the index of the first argument that is
 * not one, or -1 (a message printed). */
static int parse_targs(int argc, char **argv, struct targs *a, enum cmd cmd)
{
	static const struct option opts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "notrace", required_argument, NULL, 'n' },
		{ "graph-function", required_argument, NULL, 'g' },
		{ "max-depth", required_argument, NULL, 'D' },
		{ "tid", required_argument, NULL, 'T' },
		{ "duration", required_argument, NULL, 'U' },
		{ "threshold", required_argument, NULL, 't' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "rings", required_argument, NULL, 'r' },
		{ "overwrite", no_argument, NULL, 'O' },
		{ "chrome", required_argument, NULL, 'c' },
		{ "preload", required_argument, NULL, 'Q' },
		{ "json", no_argument, NULL, 'j' },
		{ "per-thread", no_argument, NULL, 'P' },
		{ "sort", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "data", required_argument, NULL, 'Z' },
		{ "pid", required_argument, NULL, 'I' },
		{ "no-follow", no_argument, NULL, 'W' },
		{ "trigger", required_argument, NULL, 'X' },
		{ "argument", required_argument, NULL, 'A' },
		{ "retval", required_argument, NULL, 'R' },
		{ "auto-args", no_argument, NULL, 'a' },
		{ 0 }
	};
	int o;
	const char *who = cmd_name(cmd);
	uint64_t v;
	double d;

	/* (record: rings for a reader that keeps up, so that threads
	 * seldom wait; lossless.) */
	*a = (struct targs){ .filter = "", .notrace = "", .graph = "", .triggers = "",
			     .q = { .ring_kib = cmd == RECORD ? 4096 : 1024,
				    .rings = cmd == RECORD ? 32 : 16,
				    .flags = cmd == RECORD ? MCLOC_TRACE_WAIT : 0 },
			     .data = MCLOC_REC_DEFAULT_DIR, .follow = cmd == RECORD, .cmd = cmd };
	char bad[160];

	optind = 0;	/* (a fresh scan, options anywhere after the subcommand) */
	opterr = 0;
	while ((o = getopt_long(argc, argv, cmd == RECORD ? "d:p:A:R:a" : "jt:o:A:R:a", opts,
				NULL)) != -1) {
		if (cmd == RECORD && o > 0 && strchr("jPscot", o)) {
			usage_trace(cmd);
			return -1;
		}
		switch (o) {
		case 'j': a->json = true; break;
		case 'P': a->per_thread = true; break;
		case 's':
			if (sort_key_of(optarg, &a->sort, cmd_name(cmd)) < 0)
				return -1;
			break;
		case 'f': a->filter = optarg; break;
		case 'n': a->notrace = optarg; break;
		case 'g': a->graph = optarg; break;
		case 'D':
		case 'T':
		case 'b':
		case 'r':
			if (opt_whole(who, o == 'D' ? "--max-depth" : o == 'T' ? "--tid" :
					   o == 'b' ? "--buffer" : "--rings",
				      optarg, o == 'T', UINT32_MAX, &v) < 0)
				return -1;
			*(o == 'D' ? &a->q.max_depth : o == 'T' ? &a->q.tid :
			  o == 'b' ? &a->q.ring_kib : &a->q.rings) = (uint32_t)v;
			break;
		case 'U':
		case 't':
			if (opt_real(who, o == 'U' ? "--duration" : "-t", optarg, &d) < 0)
				return -1;
			if (o == 'U')
				a->duration = d;
			else
				a->threshold_ns = saturate(d * 1000);
			break;
		case 'O':
			/* (record: a flight recorder, instead of lossless) */
			a->q.flags = (a->q.flags & ~(uint32_t)MCLOC_TRACE_WAIT) | MCLOC_TRACE_OVERWRITE;
			break;
		case 'd':
		case 'Z': a->data = optarg; break;
		case 'I': a->pid = optarg; break;
		case 'X':
			/* (Each --trigger adds to the others, as -A does.) */
			if (a->triggers[0]) {
				char *all = malloc(strlen(a->triggers) + strlen(optarg) + 2);

				if (!all) {
					fail(who, "out of memory");
					return -1;
				}
				sprintf(all, "%s,%s", a->triggers, optarg);
				a->triggers = all;	/* (kept to the end: never freed) */
			} else {
				a->triggers = optarg;
			}
			break;
		case 'A':
		case 'R':
			if (argspec_add(&a->argspecs, optarg, o == 'A' ? "-A" : "-R") < 0)
				return -1;
			break;
		case 'a': a->argspecs.autoargs = true; break;
		case 'W':
			if (cmd != RECORD) {
				usage_trace(cmd);
				return -1;
			}
			a->follow = false;
			break;
		case 'c': a->chrome = optarg; break;
		case 'o': a->output = optarg; break;
		case 'Q':
			if (cmd == TRACE) {
				usage_trace(cmd);
				return -1;
			}
			a->preload = optarg;
			break;
		case 'p':	/* (record's -p only) */
			a->pid = optarg;
			break;
		default:
			/* (getopt's own message would be a second line.) */
			bad_option(bad, sizeof(bad), argv[optind - 1]);
			usage_trace_after(cmd, bad);
			return -1;
		}
	}
	if (a->q.ring_kib < 4 || a->q.ring_kib > 65536 || (a->q.ring_kib & (a->q.ring_kib - 1)) ||
	    !a->q.rings || a->q.rings > 4096 ||
	    (uint64_t)a->q.rings * a->q.ring_kib > (uint64_t)MCLOC_RINGS_MAX_MIB << 10) {
		fail(cmd_name(cmd), "--buffer: a power of 2 from 4 to 65536 KiB; "
					    "--rings: 1 to 4096; --buffer times --rings: at most %u MiB",
		     MCLOC_RINGS_MAX_MIB);
		return -1;
	}
	/* (--chrome's file, written when the trace starts, can be written:
	 * checked before a program is started or held, as -o's is.) */
	if (a->chrome) {
		int fd = open(a->chrome, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);

		if (fd < 0) {
			fail(a->chrome, "%s", strerror(errno));
			return -1;
		}
		close(fd);
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

/* One traced process: its tracing, and where the loop stands with it. */
struct live {
	struct tracing t;
	char pid[16];
	const char *chrome;
	struct timespec checked;
	unsigned checks;
	bool begun, gone;
	int ret;
	unsigned gen;		/* record: the image of the pid (0, then each exec) */
	/* record --overwrite: the snapshots taken, as the program's count
	 * and ours of SIGUSR1 said */
	uint32_t snaps_program, snaps_signal;
	struct sock_id sid;	/* follow: the socket it was traced on */
};

static void on_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = on_snapshot;
	sigaction(SIGUSR1, &sa, NULL);
}

/* The arguments and return values A asks of the program PID, whose
 * sites T has, sent for the trace request that follows: 0, or -1 with a
 * message. */
static int send_args(struct tracing *t, const struct targs *a, const char *pid)
{
	const struct argspecs *as = &a->argspecs;
	struct symbols *sym = NULL;
	struct mcloc_args_ent *v;
	size_t n, len = 0;
	const char *who = cmd_name(a->cmd);

	if (!as->n && !as->autoargs)
		return 0;
	if (a->mode == PROFILE) {
		fail(who, "-A, -R and --auto-args show values in events: profile keeps none");
		return -1;
	}
	if (as->autoargs && (sym = sym_new())) {
		char *maps = sym_read_maps(t->pid, &len);

		if (maps)
			sym_set_maps(sym, maps, len);
		free(maps);
	}
	int ret = argspec_entries(as, &t->sites, sym, a->mode == GRAPH, who, &v, &n);

	sym_free(sym);
	if (ret < 0)
		return -1;
	/* (As many entries as a request holds, each answered.) */
	const size_t per = (MCLOC_REQ_MAX - sizeof(struct mcloc_msg)) / sizeof(*v);

	for (size_t i = 0; i < n && ret == 0; i += per) {
		struct mcloc_msg m;
		size_t k = n - i < per ? n - i : per;

		if (peer_send(t->p, MCLOC_REQ_ARGS, v + i, k * sizeof(*v)) < 0 ||
		    peer_recv(t->p, &m) < 0)
			ret = -1;
		else if (m.type != MCLOC_REP_END) {
			fail(pid, "an unexpected reply to the arguments request");
			ret = -1;
		}
	}
	free(v);
	/* The -A and -R globs, for the functions of images that register
	 * while the trace runs (DWARF's arguments are the controller's: not
	 * for those). */
	for (size_t k = 0; k < as->n && ret == 0; k++) {
		uint8_t buf[MCLOC_REQ_MAX - sizeof(struct mcloc_msg)];
		struct mcloc_args_ent e = argspec_ent(&as->v[k]);
		size_t lg = strlen(as->v[k].glob) + 1;
		struct mcloc_msg m;

		if (sizeof(e) + lg > sizeof(buf)) {
			fail(who, "'%s': the glob is too long", as->v[k].text);
			ret = -1;
			break;
		}
		memcpy(buf, &e, sizeof(e));
		memcpy(buf + sizeof(e), as->v[k].glob, lg);
		if (peer_send(t->p, MCLOC_REQ_ARGS_GLOB, buf, sizeof(e) + lg) < 0 ||
		    peer_recv(t->p, &m) < 0)
			ret = -1;
		else if (m.type != MCLOC_REP_END) {
			fail(pid, "an unexpected reply to the argument glob request");
			ret = -1;
		}
	}
	return ret;
}

/* End the hold (MCLOC_CONTROL=wait) of the program P is connected to:
 * whether it answered. */
static bool ask_release(struct peer *p)
{
	struct mcloc_msg m;

	return peer_send(p, MCLOC_REQ_RELEASE, NULL, 0) == 0 && peer_recv(p, &m) == 0 &&
	       m.type == MCLOC_REP_END;
}

/* Start A's trace in the program PID into L (into REC, a recording, if
 * not NULL: L owns it from here).  0, or 1 with a message. */
static int session_begin(struct live *l, const struct targs *a, const char *pid, bool json,
			 struct recorder *rec)
{
	const char *filter = a->filter, *notrace = a->notrace, *graph = a->graph;
	const char *triggers = a->triggers;
	struct mcloc_req_trace q = a->q;
	struct tracing *t = &l->t;

	*l = (struct live){ .ret = 1, .chrome = a->chrome };
	*t = (struct tracing){ .json = json, .chrome_first = true, .mode = a->mode,
			       .threshold_ns = a->threshold_ns, .per_thread = a->per_thread,
			       .sort = a->sort, .rec = rec };
	snprintf(l->pid, sizeof(l->pid), "%s", pid);
	if (l->chrome && !(t->chrome = fopen(l->chrome, "w"))) {
		fail(l->chrome, "%s", strerror(errno));
		return 1;
	}
	t->p = malloc(sizeof(*t->p));
	if (!t->p || peer_open(t->p, pid, false) < 0)
		return 1;
	t->pid = (uint32_t)strtoul(pid, NULL, 10);

	/* The request: its fields, then the three globs, then the triggers
	 * if there are any. */
	uint8_t req[MCLOC_REQ_MAX - sizeof(struct mcloc_msg)];
	size_t len = sizeof(q), lf = strlen(filter) + 1, ln = strlen(notrace) + 1,
	       lg = strlen(graph) + 1, lt = triggers[0] ? strlen(triggers) + 1 : 0;
	if (len + lf + ln + lg + lt > sizeof(req)) {
		fail("trace", "the globs are too long");
		return 1;
	}
	memcpy(req, &q, sizeof(q));
	memcpy(req + len, filter, lf);
	memcpy(req + len + lf, notrace, ln);
	memcpy(req + len + lf + ln, graph, lg);
	memcpy(req + len + lf + ln + lg, triggers, lt);
	len += lf + ln + lg + lt;

	struct mcloc_msg m;
	struct mcloc_rep_trace rt;
	if (load_sites(t) < 0)
		return 1;
	/* (Arguments that cannot be served fail before the trace request,
	 * whose refusal would have released a program MCLOC_CONTROL=wait
	 * holds: released here, or it waits out its 10 s for nothing.) */
	if (send_args(t, a, pid) < 0) {
		t->p->quiet = true;
		ask_release(t->p);
		return 1;
	}
	if (peer_send(t->p, MCLOC_REQ_TRACE, req, len) < 0 || peer_recv(t->p, &m) < 0)
		return 1;
	if (m.type != MCLOC_REP_TRACE || m.len < sizeof(m) + sizeof(rt) || t->p->passed_fd < 0) {
		fail(pid, "an unexpected reply to the trace request");
		return 1;
	}
	memcpy(&rt, t->p->buf + sizeof(m), sizeof(rt));
	const char *why = map_rings(t, t->p->passed_fd, rt.size);

	close(t->p->passed_fd);
	t->p->passed_fd = -1;
	if (why) {
		fail(pid, "the trace's shared memory: %s", why);
		return 1;
	}
	l->begun = true;
	if (!t->rec)
		print_header(t);
	fflush(stdout);
	if (t->chrome)
		fprintf(t->chrome, "{\"traceEvents\":[");
	clock_gettime(CLOCK_MONOTONIC, &l->checked);
	if (t->rec)
		rec_maps(t);
	else if ((t->sym = sym_new()))
		t->symbolize = live_symbolize, refresh_maps(t);
	return 0;
}

/* One pass over L's rings: the bytes (recording) or events read.  A
 * flight recorder's (record --overwrite) are read only for a snapshot:
 * asked by the program (MCLOC_REQ_SNAPSHOT, a trigger), by SIGUSR1, or
 * (FINAL) at the end. */
static size_t session_read(struct live *l, bool final)
{
	struct tracing *t = &l->t;

	if (t->rec && (t->g.flags & MCLOC_RING_OVERWRITE) && !final) {
		uint32_t asked = __atomic_load_n(&t->h->snapshots, __ATOMIC_ACQUIRE);
		uint32_t signalled = (uint32_t)snap_asked;

		if (asked == l->snaps_program && signalled == l->snaps_signal)
			return 0;
		l->snaps_program = asked;
		l->snaps_signal = signalled;
		rec_snapshot(t);
	}
	return t->rec ? rec_drain(t, t->mode == FUNCTION ? record_callers : NULL) : drain(t);
}

/* What L's loop checks every READ_MS: true when its trace is over (the
 * program exited or is exiting). */
static bool session_check(struct live *l, const struct timespec *now)
{
	struct tracing *t = &l->t;

	if ((now->tv_sec - l->checked.tv_sec) * 1000 +
		    (now->tv_nsec - l->checked.tv_nsec) / 1000000 < READ_MS)
		return false;
	l->checked = *now;
	/* (The maps again about every second: it may load more.) */
	if (++l->checks % 50 == 0)
		t->rec ? rec_maps(t) : refresh_maps(t);
	/* A program that exits ends its trace: what it left in the rings is
	 * read at the end.  One that is exiting waits for us: the names it
	 * alone knows are asked first. */
	if (__atomic_load_n(&t->h->exiting, __ATOMIC_ACQUIRE)) {
		bool quiet = t->p->quiet;

		t->p->quiet = true;
		load_sites(t);
		t->rec ? rec_maps(t) : refresh_maps(t);
		for (int k = 0; k < 64 && session_read(l, false); k++)
			;
		t->p->quiet = quiet;
		return true;
	}
	if (program_gone(t)) {
		l->gone = true;
		return true;
	}
	return false;
}

/* L's trace stopped (every site a NOP again) and read to its end, its
 * output or recording finished, and L freed: 0, or 1 said. */
static int session_end(struct live *l)
{
	struct tracing *t = &l->t;
	struct mcloc_msg m;

	if (!l->begun)
		goto out;
	/* Stop: every site a NOP again; then what is left in the rings.  (A
	 * program that exits meanwhile has nothing left to stop.) */
	t->p->quiet = true;
	if (l->gone || (peer_send(t->p, MCLOC_REQ_STOP, NULL, 0) == 0 &&
			peer_recv(t->p, &m) == 0 && m.type == MCLOC_REP_END))
		l->ret = 0;
	else if (program_gone(t))
		l->ret = 0;
	else
		fail(l->pid, "the tracer may not have stopped: %s", t->p->error);
	/* (The stopped program writes no more: one pass reads it all, a few
	 * if memory ran short.  A peer that writes on is not followed.  A
	 * flight recorder's last snapshot is this one, however the program
	 * ended.) */
	if (t->rec && (t->g.flags & MCLOC_RING_OVERWRITE))
		rec_snapshot(t);
	for (int k = 0; k < 8 && session_read(l, true); k++)
		;
	/* Events lost at a thread's end, with none after them to say so. */
	for (uint32_t i = 0; i < t->g.rings; i++) {
		const struct mcloc_ring *r = ring_at(t, i);
		struct thread *th = r->tid && __atomic_load_n(&r->lost_open, __ATOMIC_ACQUIRE) ?
					    thread_of(t, r->tid, r->comm) : NULL;

		if (th && !t->rec)
			thread_lost(t, th, &(struct event){ .cpu = th->cpu });
	}
	if (!t->rec)
		finish_output(t);
	uint64_t lost = t->h->no_ring + t->skipped;
	/* (A recording's one line says its losses: nothing more on stderr,
	 * and nothing on stdout, which may be the program's own.) */
	bool recording = t->rec != NULL;

	for (uint32_t i = 0; i < t->g.rings; i++)
		lost += ring_at(t, i)->lost;
	if (t->rec) {
		double rate = clock_rate(t);

		if (!l->gone)
			rec_maps(t);
		t->rate = rate > 0 ? rate : t->rate;
		if (rec_close(t, lost))
			l->ret = 1;
	}
	if (t->overwritten)
		fprintf(stderr, "mcloc: %s: %llu event%s overwritten before they were read "
				"(--overwrite)\n", l->pid, (unsigned long long)t->overwritten,
			t->overwritten == 1 ? "" : "s");
	if (lost && !recording)
		fprintf(stderr, "mcloc: %s: %llu event%s lost (rings full, or more threads than "
				"--rings)\n", l->pid, (unsigned long long)lost, lost == 1 ? "" : "s");
	/* (Said in the trace too, which may be read apart from stderr.) */
	if (lost && !recording && !t->chrome)
		printf(t->json ? "{\"pid\":%s,\"type\":\"lost_total\",\"events\":%llu}\n" :
				 "# %s: %llu events lost: the rings were full, or threads more than "
				 "--rings (mcloc record keeps every one)\n",
		       l->pid, (unsigned long long)lost);
	fflush(stdout);
out:
	rec_abort(t->rec);
	t->rec = NULL;
	sym_free(t->sym);
	t->sym = NULL;
	if (t->h)
		munmap((void *)t->h, t->size);
	if (t->chrome && fclose(t->chrome) != 0) {
		fail(l->chrome, "%s", strerror(errno));
		l->ret = 1;
	}
	if (t->p && t->p->fd >= 0)
		close(t->p->fd);
	free(t->p);
	tracing_free(t);
	*t = (struct tracing){ 0 };
	return l->ret;
}

/* Trace the program PID as A says, until the program exits, Ctrl-C or
 * the duration.  0, or 1 with a message. */
static int trace_session(const struct targs *a, const char *pid, bool json,
			 struct recorder *rec)
{
	struct live *l = malloc(sizeof(*l));
	struct timespec t0, now;

	if (!l) {
		rec_abort(rec);
		fail(pid, "out of memory");
		return 1;
	}
	on_signals();
	if (session_begin(l, a, pid, json, rec) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!stop_now) {
			/* A recording reads again at once while a pass finds
			 * a ring a quarter full, and else after 1 ms: a
			 * thread that fills its ring waits for this loop. */
			if (!l->t.rec)
				nanosleep(&(struct timespec){ 0, READ_MS * 1000000L }, NULL);
			if (session_read(l, false) < l->t.g.ring_size / 4 && l->t.rec)
				nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (a->duration > 0 && (now.tv_sec - t0.tv_sec) +
							(now.tv_nsec - t0.tv_nsec) / 1e9 >= a->duration)
				break;
			if (session_check(l, &now))
				break;
		}
	}
	int ret = session_end(l);

	free(l);
	return ret;
}

/* ---- following a program's children (mcloc record) ------------------------ */

static bool running(pid_t child);


/* Whether PID is ROOT or descends from it. */
static bool descends(uint32_t pid, uint32_t root)
{
	for (int depth = 0; depth < 256 && pid > 1; depth++, pid = proc_parent(pid))
		if (pid == root)
			return true;
	return false;
}

/* PID's command line (its arguments, each NUL-terminated), malloc'd, its
 * length in *LEN; NULL when it cannot be read. */
static char *cmdline_of(uint32_t pid, size_t *len)
{
	char path[64];
	size_t n = 0;
	char *buf = malloc(4096);
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/cmdline", pid);
	if (buf && (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		ssize_t k = read(fd, buf, 4095);

		n = k > 0 ? (size_t)k : 0;
		close(fd);
	}
	if (buf && n && buf[n - 1])
		buf[n++] = 0;	/* (cut short: the last one ended) */
	*len = n;
	return buf;
}

struct follow {
	struct live **v;	/* every process traced, ended or not */
	size_t n;
	char **args;		/* their command lines, kept to the end */
	uint32_t root;
	struct recorder *dir;	/* the directory's, for each new process */
};

/* A new process to record: PID's socket in the control directory DFD,
 * not one traced before, below the root.  (A child holds at its fork
 * until it is traced, a program it execs at its first image: MCLOC_CONTROL
 * =wait.) */
static void follow_new(struct follow *fw, const struct targs *a, int dfd)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d);	/* (a dup shares the offset the last scan left at the end) */
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		unsigned long pid = strtoul(e->d_name, &end, 10);
		struct stat sb;
		unsigned gen = 0;
		bool seen = false;

		if (*end || !pid || pid > UINT32_MAX || !descends((uint32_t)pid, fw->root) ||
		    fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISSOCK(sb.st_mode))
			continue;
		/* (A pid traced before is traced again when it has exec'd:
		 * its libmcloc made a new socket.) */
		for (size_t i = 0; i < fw->n; i++)
			if (!strcmp(fw->v[i]->pid, e->d_name)) {
				seen |= same_sock(fw->v[i]->sid, sock_id(&sb));
				gen++;
			}
		if (seen)
			continue;
		struct live **v = realloc(fw->v, (fw->n + 1) * sizeof(*v));
		char **args = realloc(fw->args, (fw->n + 1) * sizeof(*args));

		if (args)
			fw->args = args;
		if (!v || !args) {
			if (v)
				fw->v = v;
			continue;
		}
		fw->v = v;
		size_t len = 0;
		char *line = cmdline_of((uint32_t)pid, &len);
		struct recorder *rec = line ? rec_another(fw->dir, gen, line, len) : NULL;
		struct live *l = malloc(sizeof(*l));

		fw->args[fw->n] = line;
		if (!l || !rec) {
			free(l);
			rec_abort(rec);
			continue;
		}
		fw->v[fw->n++] = l;
		/* (A process that cannot be traced is said, and left.) */
		if (session_begin(l, a, e->d_name, false, rec))
			session_end(l);
		l->sid = sock_id(&sb);
	}
	closedir(d);
}

/* Does a process below ROOT, not ROOT itself, offer control in the
 * directory DFD?  (Then ROOT, which offers none, is a wrapper, a shell
 * script say, of programs that do.) */
static bool below_offers(int dfd, uint32_t root)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	bool found = false;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	rewinddir(d);
	for (struct dirent *e; !found && (e = readdir(d));) {
		char *end;
		unsigned long pid = strtoul(e->d_name, &end, 10);

		found = !*end && pid && pid != root && pid <= UINT32_MAX &&
			descends((uint32_t)pid, root);
	}
	closedir(d);
	return found;
}

/*
 * Does mcloc have a child left other than CHILD (a wrapper's orphan:
 * record makes itself their subreaper)?  Those that have exited are
 * reaped here, CHILD never (run_program() waits for it).
 */
static bool orphans_left(pid_t child)
{
	DIR *d = opendir("/proc");
	uint32_t me = (uint32_t)getpid();
	bool left = false;

	for (struct dirent *e; d && (e = readdir(d));) {
		char *end;
		unsigned long pid = strtoul(e->d_name, &end, 10);

		if (*end || !pid || pid > UINT32_MAX || (pid_t)pid == child ||
		    proc_parent((uint32_t)pid) != me)
			continue;
		/* (One that has exited is reaped: else it stays a child.) */
		if (waitpid((pid_t)pid, NULL, WNOHANG) != (pid_t)pid)
			left = true;
	}
	if (d)
		closedir(d);
	return left;
}

/*
 * mcloc record's loop over a program and its children: ROOT (a pid, the
 * process CHILD when mcloc started it, else 0) traced into REC (unless it
 * offers no control, !ROOT_UP: a wrapper), and each process that descends
 * from it and offers control in CD's directory traced into a recording of
 * its own, until all have ended (and CHILD exited), Ctrl-C or the
 * duration.  0, or 1 said.
 */
static int record_follow(const struct targs *a, const char *root, struct recorder *rec,
			 pid_t child, const struct cdir *cd, bool root_up)
{
	/* (A program mcloc started: what descends from mcloc, its subreaper,
	 * the orphans of a wrapper that exits early included.) */
	struct follow fw = { .root = child ? (uint32_t)getpid() : (uint32_t)strtoul(root, NULL, 10) };
	struct timespec t0, now, scanned;
	struct live *first = malloc(sizeof(*first));
	struct stat sb;
	int ret = 0;

	fw.dir = rec ? rec_another(rec, 0, NULL, 0) : NULL;
	if (!first || !fw.dir || !(fw.v = malloc(sizeof(*fw.v))) ||
	    !(fw.args = calloc(1, sizeof(*fw.args)))) {
		fail(root, "out of memory");
		free(first);
		rec_abort(rec);
		rec_abort(fw.dir);
		free(fw.v);
		return 1;
	}
	on_signals();
	if (root_up) {
		fw.v[fw.n++] = first;
		if (session_begin(first, a, root, false, rec))
			ret |= session_end(first);
		if (fstatat(cd->fd, root, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			first->sid = sock_id(&sb);
	} else {
		free(first);
		rec_abort(rec);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	scanned = t0;
	/* A socket appearing in the directory (renamed to its pid once it
	 * listens) is a child waiting at its start to be traced: looked for
	 * at once, not at the next scan, which a program that forks often
	 * would wait for every time.  (Watched through the descriptor the
	 * directory was verified by; without inotify, the scans alone.) */
	char self[64];
	int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);

	snprintf(self, sizeof(self), "/proc/self/fd/%d", cd->fd);
	if (ino >= 0 && inotify_add_watch(ino, self, IN_MOVED_TO | IN_CREATE) < 0) {
		close(ino);
		ino = -1;
	}
	while (!stop_now) {
		size_t got = 0, active = 0;

		for (size_t i = 0; i < fw.n; i++)
			if (fw.v[i]->t.p) {
				got += session_read(fw.v[i], false);
				active++;
			}
		if (got < a->q.ring_kib * 256u)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (a->duration > 0 &&
		    (now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >= a->duration)
			break;
		for (size_t i = 0; i < fw.n; i++)
			if (fw.v[i]->t.p && session_check(fw.v[i], &now))
				ret |= session_end(fw.v[i]);
		bool news = false;

		for (char buf[4096]; ino >= 0 && read(ino, buf, sizeof(buf)) > 0;)
			news = true;
		if (!news && (now.tv_sec - scanned.tv_sec) * 1000 +
					     (now.tv_nsec - scanned.tv_nsec) / 1000000 < READ_MS)
			continue;
		scanned = now;
		follow_new(&fw, a, cd->fd);
		/* Over when nothing is traced and the program mcloc started
		 * has exited (its children may outlive it: followed on), and,
		 * for a wrapper, none of the programs it left running is. */
		if (!active && (!child || !running(child)) &&
		    !(child && !root_up && orphans_left(child)))
			break;
	}
	size_t begun = 0;

	for (size_t i = 0; i < fw.n; i++) {
		begun += fw.v[i]->begun;
		if (fw.v[i]->t.p)
			ret |= session_end(fw.v[i]);
		free(fw.v[i]);
		free(fw.args[i]);
	}
	/* (Each trace refused was said; that none began is said too.) */
	if (!root_up && !begun) {
		fail(root, "nothing recorded: no program it started %s",
		     fw.n ? "could be traced" : "offered control");
		ret = 1;
	}
	free(fw.v);
	free(fw.args);
	rec_abort(fw.dir);
	if (ino >= 0)
		close(ino);
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
	int at = parse_targs(argc, argv, &a, TRACE);

	if (at < 0)
		return 2;
	if (argc - at != 2) {
		usage_trace(TRACE);
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
	return trace_session(&a, argv[at], json || a.json, NULL);
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
	bool done = false;

	for (int i = 0; p && i < 200 && !done && running(child); i++) {
		if (peer_open(p, pid, true) == 0) {
			p->quiet = true;
			done = ask_release(p);
			close(p->fd);
		}
		if (!done)
			nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	free(p);
	return done;
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
 * Start PROG (ARGV, NULL-terminated) with MCLOC_CONTROL=wait, which holds
 * it at its first image's registration until a trace starts (10 s at
 * most), so that the trace sees it from main() on; trace it as A says
 * (into REC, if not NULL) until it exits or Ctrl-C; return as it exited.
 * OUT: from open_output().
 */
static int run_program(const struct targs *a, char **argv, bool json, struct recorder *rec,
		       int out)
{
	char pid[16];
	struct cdir cd;

	/* The directory the program's socket will be in, made and verified
	 * first: where control cannot start, the program is not started to
	 * wait for it. */
	if (cdir_open(&cd, true) < 0) {
		if (out >= 0)
			close(out);
		rec_abort(rec);
		return 1;
	}
	/* (The child's exec failure comes back through this pipe, which
	 * its exec closes: said once, here, not twice.) */
	int ex[2];

	if (pipe2(ex, O_CLOEXEC) < 0)
		ex[0] = ex[1] = -1;
	/* (Following: the orphans of a wrapper that exits before the
	 * programs it started are mcloc's, and still followed.) */
	if (rec && a->follow)
		prctl(PR_SET_CHILD_SUBREAPER, 1);
	pid_t child = fork();

	if (child < 0) {
		fail(cmd_name(rec ? RECORD : RUN), "fork: %s", strerror(errno));
		if (ex[0] >= 0) {
			close(ex[0]);
			close(ex[1]);
		}
		close(cd.fd);
		if (out >= 0)
			close(out);
		rec_abort(rec);
		return 1;
	}
	if (!child) {
		char wait[32];

		snprintf(wait, sizeof(wait), "wait=%d", (int)getpid());
		/* (Following, every program it starts that carries the
		 * runtime waits to be traced too.) */
		setenv("MCLOC_CONTROL", a->nop ? "1" : rec && a->follow ? "wait" : wait, 1);
		if (a->preload)
			add_preload(a->preload);
		execvp(argv[0], argv);
		int err = errno;

		if (ex[1] < 0 || write(ex[1], &err, sizeof(err)) != sizeof(err))
			fail(argv[0], "%s", strerror(err));
		_exit(err == ENOENT ? 127 : 126);
	}
	if (ex[1] >= 0) {
		int err;
		ssize_t got;

		close(ex[1]);
		while ((got = read(ex[0], &err, sizeof(err))) < 0 && errno == EINTR)
			;
		close(ex[0]);
		if (got == sizeof(err)) {
			fail(argv[0], "%s", strerror(err));
			waitpid(child, NULL, 0);
			close(cd.fd);
			if (out >= 0)
				close(out);
			rec_abort(rec);
			return err == ENOENT ? 127 : 126;
		}
	}
	output_to(out);	/* (the program keeps the terminal) */
	snprintf(pid, sizeof(pid), "%d", (int)child);
	/* The program's socket, made when libmcloc loads. */
	int st, ret = 0;
	bool up = false, reaped = false;

	/* (Following, a program it started that offers control tells a
	 * root that offers none, a wrapper: not waited for further.) */
	bool follow = rec && a->follow, wrapper = false;

	for (int i = 0; i < 1000 && !up && !wrapper; i++) {
		struct stat sb;

		up = fstatat(cd.fd, pid, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(sb.st_mode);
		wrapper = !up && follow && below_offers(cd.fd, (uint32_t)getpid());
		if (up || wrapper)
			break;
		if (waitpid(child, &st, WNOHANG) == child) {
			/* A wrapper that exited leaving programs running (its
			 * orphans, now mcloc's): they are followed. */
			if (follow && orphans_left(child)) {
				reaped = wrapper = true;
				break;
			}
			close(cd.fd);
			rec_abort(rec);
			/* (With --preload, ld.so said above whether it loaded.) */
			if (a->preload)
				fail(argv[0], "exited before it offered control (could ld.so load "
					      "--preload %s? a name it does not find needs a path)",
				     a->preload);
			else
				fail(argv[0], "exited before it offered control (is it linked with "
					      "libmcloc, or given --preload?)");
			return WIFEXITED(st) ? (WEXITSTATUS(st) ? WEXITSTATUS(st) : 1) : 1;
		}
		nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	if (!up && follow && !a->nop) {
		/* (What it starts, waiting at its start, is recorded.) */
		fail(argv[0], "%s no control (is it linked with libmcloc, or given --preload?); "
			      "recording the programs it starts that do",
		     wrapper ? "offers" : "offered within 5 s");
		ret = record_follow(a, pid, rec, child, &cd, false);
		rec = NULL;
	} else if (!up) {
		fail(argv[0], "offered no control within 5 s (is it linked with libmcloc, "
			      "or given --preload?); running it untraced");
		ret = rec ? 1 : 0;
	} else if (!a->nop) {
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
		if (rec && a->follow) {
			ret = record_follow(a, pid, rec, child, &cd, true);
			rec = NULL;
		} else {
			ret = trace_session(a, pid, json, rec);
			rec = NULL;
			wait_releasing(&cd, pid, child, &st, argv[0]);
			reaped = true;
		}
	}
	if (rec)
		rec_abort(rec);
	close(cd.fd);
	while (!reaped && waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (ret)
		return ret;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* mcloc run TRACER [OPTIONS] -- PROG [ARGS]: PROG traced from its start. */
int cmd_run(int argc, char **argv, bool json)
{
	struct targs a;
	int dd = 1;

	while (dd < argc && strcmp(argv[dd], "--"))
		dd++;
	int at = parse_targs(dd, argv, &a, RUN);

	if (at < 0)
		return 2;
	if (dd - at != 1 || dd + 1 >= argc) {
		fail("run", "usage: mcloc run TRACER [OPTIONS] [--preload LIB] [-o FILE] -- PROG [ARGS]");
		return 2;
	}
	if (pick_tracer(&a, argv[at]) < 0)
		return 2;
	int out = open_output(&a);

	if (out == -1)
		return 1;
	return run_program(&a, argv + dd + 1, json || a.json, NULL, out);
}

/*
 * mcloc record [TRACER] [OPTIONS] (-p PID | -- PROG [ARGS]): a recording
 * of every event into a directory (record.c), function_graph unless said.
 */
int cmd_record(int argc, char **argv, bool json)
{
	struct targs a;
	int dd = 1;

	(void)json;
	while (dd < argc && strcmp(argv[dd], "--"))
		dd++;
	int at = parse_targs(dd, argv, &a, RECORD);

	if (at < 0)
		return 2;
	if (dd - at > 1 || (!a.pid == (dd + 1 >= argc))) {
		usage_trace(RECORD);
		return 2;
	}
	if (pick_tracer(&a, at < dd ? argv[at] : "function_graph") < 0)
		return 2;
	if (a.mode == PROFILE || a.nop) {
		fail("record", "records function or function_graph (mcloc report makes the profile)");
		return 2;
	}
	if (a.follow)
		a.q.flags |= MCLOC_TRACE_FOLLOW;
	/* The command line, for the info: the program's, or the pid's. */
	size_t len = 0;
	char **args = a.pid ? (char *[]){ (char *)a.pid, NULL } : argv + dd + 1;

	for (char **v = args; *v; v++)
		len += strlen(*v) + 1;
	char *line = malloc(len + 1), *at_line = line;

	if (!line) {
		fail("record", "out of memory");
		return 1;
	}
	for (char **v = args; *v; v++)
		at_line = stpcpy(at_line, *v) + 1;
	/* (-p: the process's own command line, where it can be read.) */
	char *cmdline = NULL;
	size_t clen = 0;

	if (a.pid && strtoul(a.pid, NULL, 10) <= UINT32_MAX &&
	    (cmdline = cmdline_of((uint32_t)strtoul(a.pid, NULL, 10), &clen)) && clen) {
		free(line);
		line = cmdline;
		len = clen;
	} else {
		free(cmdline);
	}
	struct recorder *rec = rec_open(a.data, line, len);
	int ret;

	struct cdir cd = { .fd = -1 };

	if (!rec)
		ret = 1;
	else if (a.pid && a.follow && cdir_open(&cd, false) == 0)
		ret = record_follow(&a, a.pid, rec, 0, &cd, true);
	else if (a.pid)
		ret = trace_session(&a, a.pid, false, rec);
	else
		ret = run_program(&a, argv + dd + 1, false, rec, -2);
	if (cd.fd >= 0)
		close(cd.fd);
	free(line);
	return ret;
}
