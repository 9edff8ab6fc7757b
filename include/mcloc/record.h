/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A recording of mcloc record(1): the one definition of its files, which
 * the recorder writes and the offline tools (mcloc replay, report, graph,
 * dump, info) read.  man/mcloc-record.5 describes it in words.
 *
 * A recording is a directory (mcloc.data by default).  Each traced
 * process has its files in it, named by its KEY: its pid, or PID-GEN for
 * the GENth program the pid exec'd while followed (mcloc record follows
 * forked children and the programs they exec):
 *
 *   KEY.info        struct mcloc_rec_info, then the command line: argc_len
 *                   bytes, each argument NUL-terminated.  Written last, when
 *                   the process's recording ends: a recording without it
 *                   was cut short, and the tools say so.
 *   KEY.names       struct mcloc_rec_name entries to its end: the function
 *                   of each traced site and of each caller seen.
 *   KEY.maps        text: the lines of /proc/PID/maps that map files, every
 *                   one seen while the program ran; what names the callers
 *                   and sites PID.names does not, and source lines, from
 *                   those files (as they are when read).
 *   KEY.TID.events  one per thread that was traced (KEY.TID-N.events for
 *                   the Nth thread after the first that had that tid, an
 *                   exited one's): struct mcloc_rec_thread,
 *                   then its events, in 8-byte units (<mcloc/control.h>
 *                   says how an event takes one, two or more)
 *                   to its end, in the order the thread wrote them, which
 *                   is time order.
 *                   These are the rings' bytes, copied as they were written:
 *                   nothing is formatted while the program runs.
 *
 * An event's type may carry MCLOC_EV_LOST_BEFORE: events of the thread were
 * lost just before it.  A last slot whose type is MCLOC_EV_LOST_BEFORE
 * alone says that events were lost at the thread's end.  Integers are in
 * the byte order of the host that recorded (the magic tells it); times are
 * in the unit info's ticks says, converted to CLOCK_MONOTONIC nanoseconds
 * by its two clock pairs.
 *
 * A reader refuses a version it does not know, and treats every field as
 * data: a recording may come from anywhere.
 */
#ifndef MCLOC_RECORD_H
#define MCLOC_RECORD_H

#include <mcloc/control.h>

#include <stdint.h>

#define MCLOC_REC_VERSION 2
#define MCLOC_REC_MAGIC 0x636572636f6c636dull	/* "mclocrec" */
#define MCLOC_REC_THREAD_MAGIC 0x646874636f6c636dull	/* "mclocthd" */
#define MCLOC_REC_DEFAULT_DIR "mcloc.data"

struct mcloc_rec_info {
	uint64_t magic;		/* MCLOC_REC_MAGIC */
	uint32_t version;	/* MCLOC_REC_VERSION */
	uint32_t tracer;	/* MCLOC_TRACE_* */
	uint32_t ring_flags;	/* MCLOC_RING_* of the trace's rings */
	uint32_t pid;
	uint32_t ticks;		/* 1: times are CPU ticks, else nanoseconds */
	uint32_t argc_len;	/* bytes of the command line after this */
	/* Clock pairs (CLOCK_MONOTONIC ns, time) at the trace's start and
	 * end: a tick's length is their ratio. */
	uint64_t start_ns, start_time;
	uint64_t end_ns, end_time;
	uint64_t realtime_ns;	/* CLOCK_REALTIME at the start: the date */
	uint64_t units;		/* 8-byte units of events in the thread files */
	uint64_t lost;		/* events lost (threads without a ring included) */
	uint64_t waits;		/* times a thread waited for room (lossless) */
	uint32_t threads;	/* thread files */
	uint32_t generation;	/* 0; 1 on for programs the pid exec'd later */
	uint32_t ppid;		/* its parent when traced (0: unknown) */
	uint32_t snapshots;	/* ring_flags MCLOC_RING_OVERWRITE (a flight
				 * recorder): the snapshots saved, the last at
				 * the end; a gap between two is marked lost */
	char comm[16];		/* the process's name, NUL-terminated */
};

/* A thread file's header: lost and waits are written when it closes. */
struct mcloc_rec_thread {
	uint64_t magic;		/* MCLOC_REC_THREAD_MAGIC */
	uint32_t version;	/* MCLOC_REC_VERSION */
	uint32_t event_size;	/* MCLOC_EV_UNIT: events are whole units */
	uint32_t pid, tid;
	char comm[16];		/* the thread's name, NUL-terminated */
	uint64_t lost, waits;
};

/* One name: followed by namelen bytes and a NUL, padded to 8 bytes. */
struct mcloc_rec_name {
	uint64_t addr;		/* a site, or a return address in a caller */
	uint64_t off;		/* CALLER: from its function's start */
	uint32_t kind;		/* MCLOC_REC_SITE or MCLOC_REC_CALLER */
	uint32_t namelen;	/* 0: unknown */
};

enum { MCLOC_REC_SITE = 1, MCLOC_REC_CALLER = 2 };

#endif
