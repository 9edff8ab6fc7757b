/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The control protocol between a program running libmcloc and a
 * controller (the mcloc(1) command): the one definition of its messages,
 * which both ends include.  man/mcloc.1 describes it in words.
 *
 * Transport: a Unix stream socket, one per process, named by the pid in a
 * directory only its owner may enter (mcloc_control_dir()).  Both ends
 * run on one host, so integers are in the host's byte order.
 *
 * Every message, request or reply, is a struct mcloc_msg followed by
 * len - sizeof(struct mcloc_msg) bytes of payload.  A request gets one or
 * more replies carrying its seq, the last of which is MCLOC_REP_END,
 * MCLOC_REP_ERROR, or the one reply its type has.  A request longer than
 * MCLOC_REQ_MAX, of an unknown type or version, or whose payload is not
 * what its type needs gets MCLOC_REP_ERROR, and the connection is closed.
 */
#ifndef MCLOC_CONTROL_H
#define MCLOC_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MCLOC_WIRE_VERSION 1
#define MCLOC_REQ_MAX 4096		/* bytes of a whole request */
#define MCLOC_REP_MAX (64 << 10)	/* bytes of a whole reply */

struct mcloc_msg {
	uint32_t len;		/* of the whole message, this header included */
	uint16_t type;		/* MCLOC_REQ_* or MCLOC_REP_* */
	uint16_t version;	/* MCLOC_WIRE_VERSION */
	uint32_t seq;		/* chosen by the controller, echoed in replies */
	uint32_t reserved;	/* 0 */
};

enum {
	/* No payload; one MCLOC_REP_HELLO. */
	MCLOC_REQ_HELLO = 1,
	/* Payload: a glob (fnmatch(3)), NUL-terminated, "" for all.
	 * MCLOC_REP_NAMES as needed, then MCLOC_REP_END. */
	MCLOC_REQ_FUNCS = 2,
	/* No payload.  MCLOC_REP_SITES as needed, then MCLOC_REP_END. */
	MCLOC_REQ_ENABLED = 3,
	/* No payload; one MCLOC_REP_STATS. */
	MCLOC_REQ_STATS = 4,
	/* struct mcloc_req_trace: start tracing into rings in shared memory.
	 * One MCLOC_REP_TRACE, with the memory's file descriptor attached
	 * (SCM_RIGHTS).  The connection is then a controller of the program,
	 * its session one of MCLOC_SESSIONS_MAX at most, until
	 * MCLOC_REQ_STOP or until it closes, which stops its session too: a
	 * controller that dies leaves no site enabled for it. */
	MCLOC_REQ_TRACE = 5,
	/* No payload: stop tracing; MCLOC_REP_END once every site the tracer
	 * enabled is a NOP again and no callback of it runs. */
	MCLOC_REQ_STOP = 6,
	/* Addresses (uint64_t each): one MCLOC_REP_ADDRS of the function
	 * each lies in, as far as the program knows (its traced images'
	 * symbols, then the dynamic linker's). */
	MCLOC_REQ_ADDRS = 7,
	/* No payload.  Every site of every image, as MCLOC_REQ_ENABLED lists
	 * those in use, and those of images that left while a trace ran
	 * (state 0): MCLOC_REP_SITES as needed, then MCLOC_REP_END (what
	 * a controller names events by, asked before the trace starts). */
	MCLOC_REQ_SITES = 8,
	/* No payload: end MCLOC_CONTROL=wait's hold now, from a controller
	 * that will not trace (mcloc run, when its trace failed or ended
	 * while the program runs on); MCLOC_REP_END. */
	MCLOC_REQ_RELEASE = 9,
	/* No payload: every session's rings are asked to be saved (their
	 * header's snapshots count goes up), as a flight recorder keeps
	 * them; MCLOC_REP_END, or MCLOC_REP_ERROR (ENOENT) when no session
	 * is a flight recorder (MCLOC_TRACE_OVERWRITE). */
	MCLOC_REQ_SNAPSHOT = 10,
	/* struct mcloc_args_ent entries: the arguments and return values
	 * the next MCLOC_REQ_TRACE of this connection captures, added to
	 * those sent before (several requests, when they do not fit one);
	 * MCLOC_REP_END.  MCLOC_ARGS_ENTS_MAX entries in all, one per site:
	 * the trace request is refused (EINVAL) when an entry is not valid
	 * or two name one site. */
	MCLOC_REQ_ARGS = 11,
	/* One struct mcloc_args_ent (site 0), then a glob, NUL-terminated:
	 * the next MCLOC_REQ_TRACE of this connection also captures what
	 * the entry says at every function the glob names where no
	 * MCLOC_REQ_ARGS entry names its site, in the images registered
	 * then and in those that register while it traces (the globs
	 * naming one function add up in the order sent:
	 * mcloc_args_merge()); MCLOC_REP_END.  MCLOC_ARGS_GLOBS_MAX in all. */
	MCLOC_REQ_ARGS_GLOB = 12,
};

enum {
	MCLOC_REP_HELLO = 0x101,	/* struct mcloc_rep_hello */
	MCLOC_REP_NAMES = 0x102,	/* names, each NUL-terminated */
	MCLOC_REP_SITES = 0x103,	/* struct mcloc_rep_site entries */
	MCLOC_REP_STATS = 0x104,	/* struct mcloc_rep_stats */
	MCLOC_REP_TRACE = 0x105,	/* struct mcloc_rep_trace, and a descriptor */
	MCLOC_REP_ADDRS = 0x106,	/* struct mcloc_rep_addr entries */
	MCLOC_REP_END = 0x1fe,		/* no payload: the request is answered */
	MCLOC_REP_ERROR = 0x1ff,	/* struct mcloc_rep_error */
};

struct mcloc_rep_hello {
	uint32_t pid;
	uint32_t images;
	uint64_t records;	/* call sites */
	uint64_t functions;	/* distinct traced functions */
	uint64_t enabled;	/* sites calling a trampoline now */
	char comm[16];		/* the process's name, NUL-terminated */
	char tracer[16];	/* "nop" or the running tracer's name */
	char controller[32];	/* "" or who controls it: "pid N" */
};

/* One site of MCLOC_REQ_ENABLED's answer, 8-byte aligned, followed by its
 * function's name (namelen bytes and a NUL), padded to 8 bytes. */
struct mcloc_rep_site {
	uint64_t site;		/* the call site's address */
	uint32_t flags;		/* MCLOC_SITE_* */
	uint16_t ops;		/* ops covering it */
	uint16_t namelen;
};

enum {
	MCLOC_SITE_ENABLED = 1 << 0,	/* calls a trampoline */
	MCLOC_SITE_REGS = 1 << 1,	/* ... the one that saves registers */
	MCLOC_SITE_DIRECT = 1 << 2,	/* ... one ops's, directly */
	MCLOC_SITE_PARKED = 1 << 3,	/* disabled, its call parked (x86_64) */
	MCLOC_SITE_REFUSED = 1 << 4,	/* not what the table said: left alone */
};

struct mcloc_rep_stats {
	uint64_t images, records, enabled, refused;
	uint64_t batches, sites_patched, syncs;
	uint64_t last_batch_us;
	uint64_t list_calls;
};

/* ---- tracing into shared memory ------------------------------------------- */

enum {
	MCLOC_TRACE_FUNCTION = 1,	/* an event per call */
	MCLOC_TRACE_GRAPH = 2,		/* an event at entry and one at exit */
};

/* The most shared memory a trace may ask for: it is allocated and
 * populated when the trace starts. */
#define MCLOC_RINGS_MAX_MIB 1024
/* Controllers that may trace one program at once, each its own session
 * with its own tracer, filters and rings (as ftrace's instances). */
#define MCLOC_SESSIONS_MAX 4

struct mcloc_req_trace {
	uint32_t tracer;	/* MCLOC_TRACE_* */
	uint32_t ring_kib;	/* each thread's ring: a power of 2, 4 to 65536 */
	uint32_t rings;		/* threads that get one: 1 to 4096; all of
				 * them at most MCLOC_RINGS_MAX_MIB */
	uint32_t max_depth;	/* graph: no events deeper than this (0: any) */
	uint32_t tid;		/* only this thread (0: every thread) */
	uint32_t flags;		/* MCLOC_TRACE_*: no other bit set */
	/* Then three NUL-terminated globs, each possibly empty: the filter,
	 * notrace, and (graph) the functions whose calls alone are traced,
	 * with all they call (ftrace's set_graph_function); and, if the
	 * request goes on, the triggers, NUL-terminated: GLOB:ACTION items
	 * separated by commas, ACTION one of MCLOC_TRIGGER_NAMES, as ftrace's
	 * set_ftrace_filter commands.  A session with a trace_on trigger
	 * starts with its tracing off. */
	char globs[];
};

enum {
	/* A full ring overwrites its oldest events (a flight recorder, as
	 * ftrace's overwrite option) rather than dropping new ones. */
	MCLOC_TRACE_OVERWRITE = 1 << 0,
	/* Lossless (mcloc record): a thread whose ring is full waits for the
	 * reader to make room, rather than dropping the event.  It waits
	 * while the trace runs; once the trace stops (the controller asked,
	 * or its connection closed), what no longer fits is dropped and
	 * counted, so that a reader that dies never hangs the program.  Not
	 * with MCLOC_TRACE_OVERWRITE. */
	MCLOC_TRACE_WAIT = 1 << 1,
	/* A child the program forks while this trace runs holds at its start
	 * (MCLOC_FOLLOW_WAIT_MS at most) until a controller traces it, or
	 * releases it: mcloc record follows children into recordings of
	 * their own, from their first call. */
	MCLOC_TRACE_FOLLOW = 1 << 2,
	MCLOC_TRACE_FLAGS = MCLOC_TRACE_OVERWRITE | MCLOC_TRACE_WAIT | MCLOC_TRACE_FOLLOW,
};

/*
 * Arguments and return values (MCLOC_REQ_ARGS): what to capture, per
 * site.  An argument is named by its class and its place among the
 * arguments of that class, as the calling conventions pass scalars:
 * MCLOC_ARG_IN_INT N is the Nth integer or pointer argument (x86_64: in
 * %rdi, %rsi, %rdx, %rcx, %r8, %r9, then on the stack; aarch64: x0-x7;
 * riscv64: a0-a7, then on the stack), MCLOC_ARG_IN_FP N the Nth float or
 * double (xmm0-7, v0-7, fa0-7).  N 0 is the return value in that
 * class's register.  Where the value comes from and how it is shown are
 * apart: the program stores SIZE bytes of the register (or the stack
 * word), and for MCLOC_ARG_STR the string the pointer points at.
 */
#define MCLOC_ARGS_MAX 12		/* arguments of one site */
#define MCLOC_ARGS_ENTS_MAX 65536	/* sites of one session */
#define MCLOC_ARG_STR_MAX 64		/* bytes of a string kept */

enum {
	MCLOC_ARG_INT = 1,	/* signed decimal */
	MCLOC_ARG_UINT = 2,	/* unsigned decimal */
	MCLOC_ARG_HEX = 3,	/* hexadecimal (pointers) */
	MCLOC_ARG_CHAR = 4,	/* a character */
	MCLOC_ARG_FLOAT = 5,	/* float (SIZE 4) or double (SIZE 8) */
	MCLOC_ARG_STR = 6,	/* the NUL-terminated string it points at */
	MCLOC_ARG_AUTO = 7,	/* decimal when small, else hex (as uftrace's default) */
	MCLOC_ARG_FMT_MAX = 7,
};
enum { MCLOC_ARG_IN_INT = 1, MCLOC_ARG_IN_FP = 2 };

struct mcloc_arg {
	uint8_t fmt;		/* MCLOC_ARG_INT ... _STR */
	uint8_t size;		/* bytes: 1, 2, 4 or 8 (FLOAT 4 or 8, STR 8) */
	uint8_t in;		/* MCLOC_ARG_IN_INT or _IN_FP (FLOAT only) */
	uint8_t index;		/* 1-based among its class; 0: the return value */
};

struct mcloc_args_ent {
	uint64_t site;		/* a traced site (others are ignored) */
	uint8_t nargs;		/* args[0..nargs) at entry, at most MCLOC_ARGS_MAX */
	uint8_t has_ret;	/* 1: ret at the return (function_graph) */
	uint8_t reserved[6];	/* 0 */
	struct mcloc_arg args[MCLOC_ARGS_MAX];
	struct mcloc_arg ret;	/* index 0 */
};
_Static_assert(sizeof(struct mcloc_args_ent) == 72, "struct mcloc_args_ent is 72 bytes on the wire");
#define MCLOC_ARGS_GLOBS_MAX 256	/* MCLOC_REQ_ARGS_GLOB requests of one session */

/*
 * What one specification SP of arguments and a return value (an entry
 * whose site is not read) adds to E, the entry of a function it names,
 * as uftrace's -A and -R options add up: an argument named again takes
 * the later format, and the first that lists arguments replaces E's
 * (*REPLACED: one did already; false for a fresh E, or one that DWARF
 * made).  One definition for the controller, which makes the entries of
 * the functions it sees, and the library, which makes those of images
 * that register later.
 */
static inline void mcloc_args_merge(struct mcloc_args_ent *e, const struct mcloc_args_ent *sp,
				    bool *replaced)
{
	if (sp->nargs && !*replaced) {
		e->nargs = 0;
		*replaced = true;
	}
	for (unsigned j = 0; j < sp->nargs && j < MCLOC_ARGS_MAX; j++) {
		unsigned k = 0;

		while (k < e->nargs && (e->args[k].in != sp->args[j].in ||
					e->args[k].index != sp->args[j].index))
			k++;
		if (k < e->nargs)
			e->args[k] = sp->args[j];
		else if (e->nargs < MCLOC_ARGS_MAX)
			e->args[e->nargs++] = sp->args[j];
	}
	if (sp->has_ret) {
		e->ret = sp->ret;
		e->has_ret = 1;
	}
}

/* What a trigger does when a call of its function is traced:
 *   trace_on   the session's tracing on, from this call on
 *   trace_off  off, after this call's entry (its return is kept)
 *   backtrace  an MCLOC_EV_MARK of MCLOC_MARK_BACKTRACE after its entry:
 *              a reader shows the calls it is inside
 *   snapshot   an MCLOC_EV_MARK of MCLOC_MARK_SNAPSHOT: a flight
 *              recorder's reader saves what the rings hold */
#define MCLOC_TRIGGER_NAMES { "trace_on", "trace_off", "backtrace", "snapshot" }
enum {
	MCLOC_TRIGGER_ON = 1 << 0,
	MCLOC_TRIGGER_OFF = 1 << 1,
	MCLOC_TRIGGER_BACKTRACE = 1 << 2,
	MCLOC_TRIGGER_SNAPSHOT = 1 << 3,
};
enum { MCLOC_MARK_BACKTRACE = 1, MCLOC_MARK_SNAPSHOT = 2 };

struct mcloc_rep_trace {
	uint64_t size;		/* bytes of the shared memory to map */
};

/*
 * The shared memory: a memfd sealed against shrinking and growing (a
 * controller refuses one that is not, as a file that shrinks under its
 * mapping faults it), a header, then RINGS rings of RING_STRIDE bytes
 * each.  Either side may write anything there: the program never reads
 * the geometry (rings, ring_size, ring_stride, data_offset) back, and a
 * controller checks it once, copies it, and reads the rest as data.  A thread takes the next free ring at its first event (threads
 * beyond the last count in no_ring).  A ring has one writer, the thread,
 * and one reader, the controller: the writer puts an event at head (mod
 * size), if head - tail leaves room, else counts it lost, and then
 * advances head with release order; the reader reads up to head (acquire)
 * and advances tail.  The first event written after some were lost has
 * MCLOC_EV_LOST_BEFORE in its type.  With MCLOC_RING_WAIT in flags, a
 * full ring makes the writer wait until the reader advances tail (it
 * counts in waits), and drop events only once the trace has stopped.  The traced thread makes no system
 * call and takes no lock for an event.
 *
 * With MCLOC_RING_OVERWRITE in flags, the writer never looks at tail: it
 * first advances claim past the event it is about to write (then a
 * release fence), writes it, and advances head.  The reader starts at
 * head - size if tail is further behind, copies up to head, and then
 * (after an acquire fence) reads claim: what lies before claim - size may
 * have been overwritten while it copied, and is discarded as lost.
 */
/* The rings' layout and events (3: events in 8-byte units, the common
 * graph events in one). */
#define MCLOC_RING_VERSION 3
#define MCLOC_RING_MAGIC 0x676e6972636c636dull	/* "mclcring" */

struct mcloc_ring_hdr {
	uint64_t magic;
	uint32_t version;	/* MCLOC_RING_VERSION */
	uint32_t rings;
	uint32_t ring_size;	/* bytes of events per ring (a power of 2) */
	uint32_t ring_stride;	/* bytes from one struct mcloc_ring to the next */
	uint32_t data_offset;	/* where the first ring starts */
	uint32_t ticks;		/* 1: times are CPU ticks (convert by the pairs
				 * below), 0: CLOCK_MONOTONIC nanoseconds */
	uint32_t next_ring;	/* rings handed out (may pass rings) */
	uint32_t done;		/* 1: the tracer has stopped */
	uint64_t no_ring;	/* events of threads that found no ring */
	/* Clock pairs (CLOCK_MONOTONIC ns, time), at the start and lately
	 * (the program refreshes it while tracing, under clock_seq: odd while
	 * it writes). */
	uint64_t start_ns, start_time;
	uint32_t clock_seq, flags;	/* flags: MCLOC_RING_* */
	uint64_t now_ns, now_time;
	/* 1: the program is exiting.  It goes on answering requests and
	 * waits for MCLOC_REQ_STOP (MCLOC_EXIT_WAIT_MS at most, or until
	 * the controller's connection closes) before it ends the trace, so
	 * that the controller can ask names (sites of images loaded late,
	 * callers) while the program still has them. */
	uint32_t exiting;
	/* Snapshots asked (MCLOC_REQ_SNAPSHOT, a snapshot trigger): a
	 * flight recorder's reader saves what the rings hold each time it
	 * changes. */
	uint32_t snapshots;
};

#define MCLOC_EXIT_WAIT_MS 2000
#define MCLOC_FOLLOW_WAIT_MS 5000

enum {
	MCLOC_RING_OVERWRITE = 1 << 0,
	MCLOC_RING_WAIT = 1 << 1,	/* MCLOC_TRACE_WAIT: writers wait for room */
	MCLOC_RING_FLAGS = MCLOC_RING_OVERWRITE | MCLOC_RING_WAIT,
};

struct mcloc_ring {
	uint64_t head;		/* bytes written, by the thread */
	uint64_t claim;		/* overwrite: bytes being written */
	uint64_t pad0[6];
	uint64_t tail;		/* bytes read, by the controller */
	uint64_t pad1[7];
	uint64_t lost;		/* events dropped: no room (not overwrite) */
	uint32_t tid;		/* 0 until a thread takes the ring */
	uint32_t lost_open;	/* 1: events lost since the last one written */
	char comm[16];
	uint64_t waits;		/* MCLOC_RING_WAIT: times the ring was full and
				 * the thread waited for room */
	uint64_t pad2[3];
	/* Then ring_size bytes of events. */
};

/*
 * An event: a 16-byte slot (two 8-byte units: WORD, then TIME), two slots,
 * or, for the graph's common events, one unit alone (a short event).
 * WORD packs a 48-bit payload, the depth and the type; a user-space
 * address fits 48 bits on every architecture mcloc runs on (an event
 * whose address does not is counted lost).  What the payload is, by type:
 *
 *   CALL     the site; a second slot follows: { cpu, parent }, the CPU it
 *            ran on and the return address in the caller (so that the
 *            function tracer's events are all of two slots)
 *   ENTRY    the site
 *   EXIT     the call's duration, in time units (saturated at 2^48 - 1):
 *            its site is that of the ENTRY of the same depth before it
 *   LEFT     the site (a longjmp or an exception left the call)
 *   UNTIMED  the site (a call whose return cannot be hooked)
 *   MARK     what a trigger marks here (MCLOC_MARK_*), at the depth of
 *            the call that fired it
 *   CPU      the CPU the thread runs on from here on: written before the
 *            thread's first graph event and whenever its CPU changes
 *            (TIME is the next event's)
 *   DATA     the captured arguments of the CALL or ENTRY just before it,
 *            or the return value of the EXIT just before it, written with
 *            that event: payload bytes of items, in mcloc_ev_data_slots()
 *            slots after this one, each packed by mcloc_ev_data_pack()
 *            (the high 16 bits of a slot's first unit are 0, so that a
 *            reader that starts inside an event skips the slot as no
 *            event).  An item is a byte of MCLOC_ARG_* format
 *            (MCLOC_DATA_RET or'ed in for a return value), a byte of
 *            length, then that many bytes: the value's SIZE low bytes
 *            (little-endian, as on every architecture mcloc runs on), or a
 *            string's bytes without its NUL.  A string item's format may
 *            carry MCLOC_DATA_NULL (a null pointer, no bytes),
 *            MCLOC_DATA_BAD (not readable: the pointer's 8 bytes) or
 *            MCLOC_DATA_CUT (longer than what was kept).
 *
 * Short events say what a reader can infer from the events before them in
 * the same ring, as state that writer and reader both keep from every
 * event (struct mcloc_ev_state): the last event's time, the last ENTRY's
 * site, and the depth the next ENTRY takes.  Their bit 63 is 0 (they are
 * never the first event after a loss):
 *
 *   SENTRY   an ENTRY at depth open: bits 58..27 the time's advance on
 *            the last event's, bits 26..0 the site's distance from the
 *            last ENTRY's (signed)
 *   SEXIT    an EXIT at depth open - 1: bits 58..29 the time's advance,
 *            bits 28..0 the duration
 *
 * A writer uses them only where each field fits, the depth is below
 * MCLOC_EV_DEPTH_MAX, and never in an overwriting ring (whose reader
 * starts anywhere: there every event stays a whole number of slots, and
 * the ring's data a sequence of slots).
 *
 * The bytes written are a recording's cost: a graph event takes 8 of
 * them where a naive layout takes 32.
 */
struct mcloc_event {
	uint64_t word;
	uint64_t time;
};

#define MCLOC_EV_UNIT 8		/* bytes: events are whole units */
#define MCLOC_EV_PAYLOAD_BITS 48
#define MCLOC_EV_PAYLOAD_MAX ((1ull << MCLOC_EV_PAYLOAD_BITS) - 1)
#define MCLOC_EV_DEPTH_MAX 0x7ffu

enum {
	MCLOC_EV_CALL = 1,	/* function: a call */
	MCLOC_EV_ENTRY = 2,	/* graph: a call begins */
	MCLOC_EV_EXIT = 3,	/* graph: it returns */
	MCLOC_EV_LEFT = 4,	/* graph: a longjmp left it (no return) */
	MCLOC_EV_UNTIMED = 5,	/* graph: a call whose return cannot be hooked */
	MCLOC_EV_CPU = 6,	/* the thread's CPU from here on */
	MCLOC_EV_MARK = 7,	/* a trigger's mark: payload MCLOC_MARK_* */
	MCLOC_EV_DATA = 8,	/* arguments or a return value: payload bytes */
	MCLOC_EV_SENTRY = 9,	/* a short ENTRY: one unit */
	MCLOC_EV_SEXIT = 10,	/* a short EXIT: one unit */
	/* Or'ed into type: events of this thread were lost just before. */
	MCLOC_EV_LOST_BEFORE = 0x8000,
};

/* WORD of an event of TYPE (an MCLOC_EV_* type, LOST_BEFORE or'ed in or
 * not), DEPTH (saturated) and PAYLOAD (masked to 48 bits). */
static inline uint64_t mcloc_ev_word(unsigned type, unsigned depth, uint64_t payload)
{
	return (uint64_t)(type & MCLOC_EV_LOST_BEFORE ? 1 : 0) << 63 |
	       (uint64_t)(type & 0xf) << 59 |
	       (uint64_t)(depth > MCLOC_EV_DEPTH_MAX ? MCLOC_EV_DEPTH_MAX : depth) << 48 |
	       (payload & MCLOC_EV_PAYLOAD_MAX);
}

/* An event's type (LOST_BEFORE or'ed in), depth and payload. */
static inline unsigned mcloc_ev_type(uint64_t word)
{
	return (unsigned)(word >> 59 & 0xf) | (word >> 63 ? MCLOC_EV_LOST_BEFORE : 0);
}

static inline unsigned mcloc_ev_depth(uint64_t word)
{
	return (unsigned)(word >> 48 & MCLOC_EV_DEPTH_MAX);
}

static inline uint64_t mcloc_ev_payload(uint64_t word)
{
	return word & MCLOC_EV_PAYLOAD_MAX;
}

/* ---- short events ---- */
#define MCLOC_SENTRY_TIME_BITS 32
#define MCLOC_SENTRY_SITE_BITS 27
#define MCLOC_SEXIT_TIME_BITS 30
#define MCLOC_SEXIT_DUR_BITS 29

/* What both sides of a ring know from its events so far (all 0 at its
 * start): the state a short event is read against. */
struct mcloc_ev_state {
	uint64_t time;		/* the last event's */
	uint64_t site;		/* the last ENTRY's */
	unsigned open;		/* the depth of the next ENTRY */
};

/* STATE after an event of TYPE (a base type, short or not) at DEPTH (as
 * its word says it: saturated), at TIME, of SITE (ENTRY). */
static inline void mcloc_ev_advance(struct mcloc_ev_state *st, unsigned type, unsigned depth,
				    uint64_t time, uint64_t site)
{
	st->time = time;
	if (type == MCLOC_EV_ENTRY || type == MCLOC_EV_SENTRY) {
		st->site = site;
		st->open = depth + 1;
	} else if (type == MCLOC_EV_EXIT || type == MCLOC_EV_SEXIT || type == MCLOC_EV_LEFT) {
		st->open = depth;
	}
}

/* The short ENTRY at TIME of SITE at DEPTH, or 0 when it cannot be one. */
static inline uint64_t mcloc_ev_sentry(const struct mcloc_ev_state *st, uint64_t time,
				       uint64_t site, unsigned depth)
{
	uint64_t dt = time - st->time, ds = site - st->site + (1ull << (MCLOC_SENTRY_SITE_BITS - 1));

	if (depth != st->open || depth >= MCLOC_EV_DEPTH_MAX || time < st->time ||
	    dt >> MCLOC_SENTRY_TIME_BITS || ds >> MCLOC_SENTRY_SITE_BITS)
		return 0;
	return (uint64_t)MCLOC_EV_SENTRY << 59 | dt << MCLOC_SENTRY_SITE_BITS |
	       ((site - st->site) & ((1ull << MCLOC_SENTRY_SITE_BITS) - 1));
}

/* The short EXIT at TIME after DUR at DEPTH, or 0 when it cannot be one. */
static inline uint64_t mcloc_ev_sexit(const struct mcloc_ev_state *st, uint64_t time,
				      uint64_t dur, unsigned depth)
{
	uint64_t dt = time - st->time;

	if (depth + 1 != st->open || depth >= MCLOC_EV_DEPTH_MAX || time < st->time ||
	    dt >> MCLOC_SEXIT_TIME_BITS || dur >> MCLOC_SEXIT_DUR_BITS)
		return 0;
	return (uint64_t)MCLOC_EV_SEXIT << 59 | dt << MCLOC_SEXIT_DUR_BITS | dur;
}

/* A short event WORD read against STATE: its time, depth and site (ENTRY)
 * or duration (EXIT).  False when the state cannot have a short event of
 * WORD's type (a ring read from its middle, or hostile data). */
static inline bool mcloc_ev_short(const struct mcloc_ev_state *st, uint64_t word,
				  uint64_t *time, unsigned *depth, uint64_t *pay)
{
	if ((word >> 59 & 0xf) == MCLOC_EV_SENTRY) {
		uint64_t d = word & ((1ull << MCLOC_SENTRY_SITE_BITS) - 1);

		*time = st->time + (word >> MCLOC_SENTRY_SITE_BITS &
				    ((1ull << MCLOC_SENTRY_TIME_BITS) - 1));
		*pay = (st->site + d - (d >> (MCLOC_SENTRY_SITE_BITS - 1) << MCLOC_SENTRY_SITE_BITS)) &
		       MCLOC_EV_PAYLOAD_MAX;
		*depth = st->open;
		return st->open < MCLOC_EV_DEPTH_MAX;
	}
	*time = st->time + (word >> MCLOC_SEXIT_DUR_BITS & ((1ull << MCLOC_SEXIT_TIME_BITS) - 1));
	*pay = word & ((1ull << MCLOC_SEXIT_DUR_BITS) - 1);
	*depth = st->open - 1;
	return st->open > 0 && st->open <= MCLOC_EV_DEPTH_MAX;
}

enum {
	MCLOC_DATA_RET = 0x80,	/* the return value */
	MCLOC_DATA_NULL = 0x40,	/* STR: a null pointer */
	MCLOC_DATA_BAD = 0x20,	/* STR: unreadable; the pointer follows */
	MCLOC_DATA_CUT = 0x10,	/* STR: cut to what was kept */
	MCLOC_DATA_FMT = 0x0f,	/* the MCLOC_ARG_* format */
};
/* The most bytes one DATA event carries: every argument a string. */
#define MCLOC_EV_DATA_MAX ((MCLOC_ARGS_MAX + 1) * (2 + MCLOC_ARG_STR_MAX))
#define MCLOC_EV_DATA_SLOT 14	/* bytes of a DATA event per slot after the first */

static inline unsigned mcloc_ev_data_slots(uint64_t bytes)
{
	return (unsigned)((bytes + MCLOC_EV_DATA_SLOT - 1) / MCLOC_EV_DATA_SLOT);
}

/* A DATA slot of the N (up to 14) bytes at P: 6 in the first unit's low
 * 48 bits, 8 in the second. */
static inline struct mcloc_event mcloc_ev_data_pack(const uint8_t *p, size_t n)
{
	uint8_t b[16] = { 0 };
	struct mcloc_event ev;

	memcpy(b, p, n < 6 ? n : 6);
	if (n > 6)
		memcpy(b + 8, p + 6, n - 6 < 8 ? n - 6 : 8);
	memcpy(&ev, b, sizeof(ev));
	return ev;
}

/* The N (up to 14) bytes of a DATA slot at V, into P. */
static inline void mcloc_ev_data_unpack(const uint64_t *v, uint8_t *p, size_t n)
{
	uint8_t b[16];

	memcpy(b, v, sizeof(b));
	memcpy(p, b, n < 6 ? n : 6);
	if (n > 6)
		memcpy(p + 6, b + 8, n - 6 < 8 ? n - 6 : 8);
}

/* The units of the event whose first unit is WORD. */
static inline unsigned mcloc_ev_units(uint64_t word)
{
	unsigned type = mcloc_ev_type(word) & 0xf;

	/* (A DATA event longer than any writer makes is one slot, which a
	 * reader skips: its count cannot wrap.  What no event starts with
	 * is skipped a slot at a time, as the slots of a ring read from
	 * its middle lie.) */
	return type == MCLOC_EV_SENTRY || type == MCLOC_EV_SEXIT ? 1 :
	       type == MCLOC_EV_CALL ? 4 :
	       type == MCLOC_EV_DATA && mcloc_ev_payload(word) <= MCLOC_EV_DATA_MAX ?
	       2 + 2 * mcloc_ev_data_slots(mcloc_ev_payload(word)) : 2;
}

/* One address of MCLOC_REQ_ADDRS's answer, followed by its function's name
 * (namelen bytes and a NUL; namelen 0: unknown), padded to 8 bytes. */
struct mcloc_rep_addr {
	uint64_t addr;
	uint64_t off;		/* from the function's start */
	uint32_t namelen;
	uint32_t reserved;
};

struct mcloc_rep_error {
	int32_t err;		/* an errno value */
	char msg[];		/* NUL-terminated */
};

/*
 * The directory of the control sockets, into BUF: $XDG_RUNTIME_DIR/mcloc
 * where XDG is set (the user's runtime directory, which only the user may
 * enter), else /tmp/mcloc-UID.  The library creates it with mode 0700 and
 * refuses one that someone else owns or others may enter; a controller
 * trusts it only under the same conditions, opened without following a
 * symlink, and checks each server's SO_PEERCRED.  NULL when it does not
 * fit.  A process's socket is DIR/PID.
 */
static inline const char *mcloc_control_dir(char *buf, size_t len, const char *xdg,
					    unsigned uid)
{
	int n = xdg && xdg[0] == '/' ? snprintf(buf, len, "%s/mcloc", xdg)
				     : snprintf(buf, len, "/tmp/mcloc-%u", uid);

	return n > 0 && (size_t)n < len ? buf : NULL;
}

#endif
