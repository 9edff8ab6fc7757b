/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * format.c: what the live trace and the offline tools share: the names of
 * sites and callers, each thread's state, and the formatting of events
 * into ftrace's text, JSON lines, the Chrome Trace Event format or a
 * profile table.
 */
#ifndef MCLOC_COMMAND_FORMAT_H
#define MCLOC_COMMAND_FORMAT_H

#include "peer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum mode { FUNCTION, GRAPH, PROFILE };

/* An event as the formatter sees it, decoded from the slots of
 * <mcloc/control.h> by a thread's decoder. */
struct event {
	uint64_t time;
	uint64_t ip;		/* the function's site */
	uint64_t parent;	/* CALL: the return address; EXIT: the duration */
	uint16_t type;		/* MCLOC_EV_*, LOST_BEFORE or'ed in */
	uint16_t depth;
	uint32_t cpu;
	/* ENTRY: the site of the call it is inside (0: none seen), what a
	 * graph recording shown as the function tracer names as parent */
	uint64_t caller_site;
	/* The items of the DATA event that came with it (arguments, or a
	 * return value; NDATA 0: none), in its decoder's buffer until its
	 * next event but one. */
	const uint8_t *data;
	uint32_t ndata;
};

/* A thread's decoding state: its CPU, what its short events are read
 * against, and the site of the call open at each depth (an EXIT names no
 * site of its own). */
struct decoder {
	uint32_t cpu;
	struct mcloc_ev_state st;
	bool lost;		/* a CPU slot said events were lost */
	uint64_t *site_at;	/* the site entered at each depth, or NULL */
	uint32_t nsite;		/* ... up to this one (grown as entries go deeper) */
	/* DATA events' items gathered, in turns: an event stays whole while
	 * the next one is decoded (a merge looks one event ahead). */
	unsigned turn;
	uint8_t *data;		/* two of MCLOC_EV_DATA_MAX, made at the first */
};

/*
 * The event whose first unit is V[0] (N units there at most) into *E: the
 * units it takes, or 0 when it is not whole.  *E's type is 0 for what is
 * no event to show (a CPU slot, or a slot no event starts with: a reader
 * that starts mid-event skips it), and MCLOC_EV_LOST_BEFORE alone for
 * events lost at a thread's end.  A thread's events are decoded in order,
 * by one decoder: short events are read against the ones before.
 */
size_t decode_event(struct decoder *d, const uint64_t *v, size_t n, struct event *e);
void decoder_free(struct decoder *d);

struct name {
	uint64_t addr, off;
	char *name;		/* NULL: unknown */
};

#define NAME_CACHE 1024
struct names {
	struct name *v;
	size_t n, cap;
	bool sorted;
	/* The last name found at each hash of an address: an event's
	 * lookup is mostly one compare, where a search took a dozen. */
	uint32_t cache[NAME_CACHE];	/* index + 1, 0: none */
};

/* One thread's state for the formatting. */
#define STACK 256
struct thread {
	uint32_t tid;
	char comm[16];
	bool pending;			/* graph: an entry not printed yet */
	struct event entry;	/* ... which */
	/* ... its data (entry.data is stale): MCLOC_EV_DATA_MAX bytes, made
	 * at the first entry with any (a recording may hold many thousand
	 * threads, most without) */
	uint8_t *entry_data;
	unsigned opened;		/* graph: "{" printed, "}" not yet */
	uint64_t open_at[STACK / 64];	/* ... a bit per depth where one is */
	unsigned open;			/* chrome: begun, not ended */
	uint64_t live[STACK / 64];	/* graph: a bit per depth a call is in,
					 * shown or not */
	uint64_t last_ns;		/* of its last event shown */
	uint64_t end_ns;		/* of its last event, shown or not (0:
					 * as last_ns) */
	uint32_t cpu;			/* of its last event */
	/* The calls the thread is inside, when each began, and (profile)
	 * the time their callees took: in a profile, DEPTH of them; else the
	 * call open at each depth of the events, for a backtrace mark and
	 * for one still open when the events end. */
	unsigned depth;
	struct open_call {
		uint64_t ip, child_ns, t0;
	} stack[STACK];
};

struct hit {
	uint64_t ip, calls, total_ns, self_ns, untimed;
	uint64_t unreturned;	/* of the timed: open at the end, timed to it */
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
	/* The live trace's decoder of each ring: by ring, not by thread,
	 * as a ring's short events are read against its own events (a
	 * thread that reuses an exited one's tid takes a ring of its own). */
	struct decoder *decs;
	uint64_t skipped;		/* events a head too far ahead skipped */
	struct names sites, callers;
	struct thread *threads;
	size_t nthreads, cap_threads;
	struct hit *hits;
	size_t nhits, cap_hits;
	size_t *hit_index;		/* open addressing: index + 1, or 0 */
	size_t index_mask;
	bool per_thread;
	bool range_end;			/* replay --time-range with an end */
	enum sort_key sort;
	uint32_t last_tid;		/* graph: the thread of the last line */
	uint64_t events;
	uint64_t overwritten;		/* events the program wrote over unread */
	struct item *items;		/* drain()'s, kept: a new array per pass
					 * faulted its pages in every time */
	size_t cap_items;
	uint64_t *raw;			/* drain()'s copy of a ring's units */
	size_t cap_raw;
	uint8_t *arena;			/* drain()'s events' data, for a pass */
	size_t narena, cap_arena;
	double rate;			/* ns per time unit */
	uint32_t pid;
	struct recorder *rec;		/* mcloc record: the recording */
	/* What names an address that the names lack (replay: the files
	 * the program mapped), or NULL. */
	const char *(*symbolize)(struct tracing *t, uint64_t addr, char *buf, size_t len);
	/* replay --srcline: "file:line" of a site, or NULL */
	const char *(*source)(struct tracing *t, uint64_t ip, char *buf, size_t len);
	void *sym;
};

struct item {
	struct event e;
	uint32_t tid;
	uint32_t seq;		/* order within its ring, for a stable sort */
	uint32_t data_at;	/* drain(): where e's data is in the arena */
};

/* The items of a DATA event, one at a time: what an argument or return
 * value says. */
struct arg_item {
	unsigned fmt;		/* MCLOC_ARG_* */
	unsigned flags;		/* MCLOC_DATA_* */
	const uint8_t *v;
	unsigned len;
};
/* The item at D (N bytes left) into *IT: its bytes, 0 when none is whole. */
size_t next_arg_item(const uint8_t *d, size_t n, struct arg_item *it);
/* An item's value, as every output shows it: unreadable (NONE), a null
 * string pointer, a signed or unsigned number, one shown in hex (a
 * pointer, mostly), a character, a floating-point number (SINGLE: a
 * float) or a string (S, LEN; CUT: cut to what was kept). */
struct arg_value {
	enum { VAL_NONE, VAL_NULLPTR, VAL_INT, VAL_UINT, VAL_HEX, VAL_CHAR, VAL_DOUBLE,
	       VAL_STR } kind;
	int64_t i;
	uint64_t u;		/* UINT, HEX, CHAR */
	double d;
	bool single, cut;
	const uint8_t *s;
	unsigned len;
};
void arg_value_of(const struct arg_item *it, struct arg_value *v);
/* The arguments among the N bytes of items at D on F: text "1, \"abc\""
 * or (JSON) the values of an array; the return value alone with RET. */
void put_arg_items(FILE *f, const uint8_t *d, size_t n, bool json, bool ret);

/* Ring I of the rings t->g describes, and how many a thread has taken:
 * what the program published, and any taken since (a program that
 * exits, or execs, before it publishes again has them all the same). */
struct mcloc_ring *ring_at(const struct tracing *t, uint32_t i);
uint32_t rings_taken(const struct tracing *t);

/*
 * What ring I holds unread, for either reader, from the oldest slot still
 * there to the head: in two pieces in place (A, then B), or (COPY, and
 * always in overwrite mode) in one copied into t->raw, what the writer
 * went over meanwhile dropped (by claim), the first slot kept marked
 * lost after a gap.  GAP: the bytes lost before them (overwritten, and
 * counted in t->overwritten).  False when there is nothing, or no room
 * for the copy yet; ring_consume() then gives the ring back up to HEAD.
 */
struct unread {
	uint32_t tid;
	const uint8_t *a, *b;
	uint64_t na, nb, gap, head;
};
bool ring_unread(struct tracing *t, uint32_t i, bool copy, struct unread *u);
void ring_consume(struct tracing *t, uint32_t i, uint64_t head);

/* NS's entry for ADDR, added (unnamed) or found; NULL: out of memory, or
 * none. */
struct name *name_add(struct names *ns, uint64_t addr);
struct name *name_find(struct names *ns, uint64_t addr);
/* Where ADDR is, or would go, among the N names at V, sorted. */
size_t name_index(const struct name *v, size_t n, uint64_t addr);
/* FROM's names added to INTO where INTO has none for their address;
 * FROM's names are moved or freed (FROM keeps its array). */
void names_merge(struct names *into, struct names *from);
/* The function of the site IP, or of the caller ADDR, or the address in
 * hex in BUF. */
const char *site_name(struct tracing *t, uint64_t ip, char *buf, size_t len);
const char *caller_name(struct tracing *t, uint64_t addr, char *buf, size_t len);
/* When TH's events end: its last one, shown or left out by a filter,
 * within the time range. */
uint64_t thread_end(const struct thread *th);

/* Items by time, then thread, then their order in it (qsort). */
int cmp_item(const void *a, const void *b);
bool in_order(const struct item *v, size_t n);

/* A count of time units as nanoseconds; a time as nanoseconds of
 * CLOCK_MONOTONIC (t->g says which clock, t->rate its scale). */
uint64_t saturate(double v);
uint64_t scaled(const struct tracing *t, uint64_t units);
uint64_t to_ns(const struct tracing *t, uint64_t time);

/* The thread TID's state, made at its first event (named COMM, if not
 * NULL); NULL when out of memory. */
struct thread *thread_of(struct tracing *t, uint32_t tid, const char *comm);

/* A Chrome Trace Event of phase PH; E (or NULL) gives its arguments or
 * return value. */
void chrome_event(struct tracing *t, const struct thread *th, const char *ph,
		  const char *name, uint64_t ns, const struct event *e);
void graph_flush_pending(struct tracing *t, struct thread *th);
/* Events of TH were lost just before E: said where the gap is. */
void thread_lost(struct tracing *t, struct thread *th, const struct event *e);
/* The next event, in time order. */
void format_event(struct tracing *t, struct item *it);
/* The tracer's header lines (text output only). */
void print_header(const struct tracing *t);
/* The end of the stream: entries still pending, the profile's table,
 * the Chrome file's close. */
void finish_output(struct tracing *t);
/* The Chrome file's end of T's process: its calls still begun end, and
 * its process and threads are named. */
void chrome_end_process(struct tracing *t);
void print_profile(struct tracing *t);
/* --sort's KEY into *KEY (the order of enum sort_key); -1 said for WHO. */
int sort_key_of(const char *s, enum sort_key *key, const char *who);
/* Option OPT's value S, all of it, as a whole number from LO to HI into
 * *V, or a number from 0 (seconds, microseconds) into *D: 0, or -1 said
 * in one line for WHO. */
int opt_whole(const char *who, const char *opt, const char *s, uint64_t lo, uint64_t hi,
	      uint64_t *v);
int opt_real(const char *who, const char *opt, const char *s, double *d);
/* What is said of ARG, an option getopt did not take (unknown, or its
 * value missing), before the usage on the same line: into BUF. */
void bad_option(char *buf, size_t len, const char *arg);
/* What t holds, freed (not t itself). */
void tracing_free(struct tracing *t);

#endif
