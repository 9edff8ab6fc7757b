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

#include <stdint.h>
#include <stdio.h>

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
};

enum {
	MCLOC_REP_HELLO = 0x101,	/* struct mcloc_rep_hello */
	MCLOC_REP_NAMES = 0x102,	/* names, each NUL-terminated */
	MCLOC_REP_SITES = 0x103,	/* struct mcloc_rep_site entries */
	MCLOC_REP_STATS = 0x104,	/* struct mcloc_rep_stats */
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
	char controller[32];	/* "" or who controls it: "pid N (comm)" */
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

struct mcloc_rep_error {
	int32_t err;		/* an errno value */
	char msg[];		/* NUL-terminated */
};

/*
 * The directory of the control sockets, into BUF: $XDG_RUNTIME_DIR/mcloc
 * where XDG is set (the user's runtime directory, which only the user may
 * enter), else /tmp/mcloc-UID.  The library creates it with mode 0700 and
 * refuses one that someone else owns or others may enter.  NULL when it
 * does not fit.  A process's socket is DIR/PID.
 */
static inline const char *mcloc_control_dir(char *buf, size_t len, const char *xdg,
					    unsigned uid)
{
	int n = xdg && xdg[0] == '/' ? snprintf(buf, len, "%s/mcloc", xdg)
				     : snprintf(buf, len, "/tmp/mcloc-%u", uid);

	return n > 0 && (size_t)n < len ? buf : NULL;
}

#endif
