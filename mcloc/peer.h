/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mcloc's connection to one program over its control socket: the client
 * half of <mcloc/control.h>, shared by the subcommands.
 */
#ifndef MCLOC_COMMAND_PEER_H
#define MCLOC_COMMAND_PEER_H

#include <mcloc/control.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct peer {
	int fd;
	const char *name;	/* its pid, as given: for messages */
	uint32_t seq;
	int passed_fd;		/* a descriptor the last reply carried, or -1 */
	bool quiet;		/* failures only in error, not on stderr */
	char error[256];	/* the last failure */
	_Alignas(8) uint8_t buf[MCLOC_REP_MAX];
};

/* "mcloc: WHO: message" on standard error (WHO may be NULL). */
void fail(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The control directory (<mcloc/control.h> names it), made first when
 * MAKE, opened without following a symlink, and verified: a directory of
 * this user's that no one else may enter.  0 with its descriptor in
 * d->fd; -1 with errno ENOENT when there is none (no message), else -1
 * with a message.  Nothing in a directory not verified is trusted. */
struct cdir {
	int fd;
	char name[108];
};
int cdir_open(struct cdir *d, bool make);
/* connect(2) socket SFD to NAME in the directory DFD; -1 with errno. */
int connect_at(int sfd, int dfd, const char *name);

/* Connect to the program PID (a string of digits) in the verified
 * control directory, if its server runs as this user or root; -1 with a
 * message (none when QUIET). */
int peer_open(struct peer *p, const char *pid, bool quiet);
/* Send one request of TYPE with LEN bytes of PAYLOAD; -1 with a message. */
int peer_send(struct peer *p, uint16_t type, const void *payload, size_t len);
/* The next reply into p->buf (its header in *M, the payload after it),
 * and any descriptor it carried in p->passed_fd; -1 with a message on a
 * broken reply or an error reply. */
int peer_recv(struct peer *p, struct mcloc_msg *m);
/* One request with one reply of TYPE, at least SIZE bytes, into OUT. */
int ask(struct peer *p, uint16_t req, uint16_t type, void *out, size_t size);

/* Send REQ (MCLOC_REQ_ENABLED or MCLOC_REQ_SITES) and call FN for each
 * site of the MCLOC_REP_SITES replies, with its NUL-terminated name,
 * until MCLOC_REP_END.  0, or -1 with a message on a broken reply. */
int peer_sites(struct peer *p, uint16_t req,
	       void (*fn)(const struct mcloc_rep_site *s, const char *name, void *ctx), void *ctx);

/* "KEY":"S", JSON-escaped, and a comma unless LAST. */
void json_str(const char *key, const char *s, bool last);

/* trace.c: mcloc trace PID TRACER [OPTIONS] (ARGV[0] is "trace"), and
 * mcloc run TRACER [OPTIONS] -- PROG [ARGS]. */
int cmd_trace(int argc, char **argv, bool json);
int cmd_run(int argc, char **argv, bool json);
int cmd_record(int argc, char **argv, bool json);
/* replay.c: mcloc replay, report, graph, dump and info (ARGV[0]). */
int cmd_offline(int argc, char **argv, bool json);

#endif
