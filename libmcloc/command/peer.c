// SPDX-License-Identifier: GPL-2.0-or-later
/* mcloc's connection to one program: the client half of <mcloc/control.h>. */
#include "peer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void fail(const char *who, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mcloc: %s%s", who ? who : "", who ? ": " : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A failure of P: its message kept in p->error, and on stderr unless
 * p->quiet. */
static void pfail(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pfail(struct peer *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->error, sizeof(p->error), fmt, ap);
	va_end(ap);
	if (!p->quiet)
		fail(p->name, "%s", p->error);
}

const char *control_dir(char *buf, size_t len)
{
	return mcloc_control_dir(buf, len, getenv("XDG_RUNTIME_DIR"), (unsigned)geteuid());
}

/* Connect to the program PID; -1 with a message (unless QUIET). */
int peer_open(struct peer *p, const char *pid, bool quiet)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	char dir[sizeof(sa.sun_path)];
	char *end;

	p->name = pid;
	p->seq = 0;
	p->passed_fd = -1;
	p->quiet = false;
	p->error[0] = 0;
	if (strtol(pid, &end, 10) <= 0 || *end) {
		fail(pid, "not a process id");
		return -1;
	}
	if (!control_dir(dir, sizeof(dir) - 12)) {
		fail(NULL, "the control directory's name is too long");
		return -1;
	}
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, pid) >=
	    sizeof(sa.sun_path)) {
		fail(pid, "the socket's name is too long");
		return -1;
	}
	p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0 || connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		if (!quiet)
			fail(pid, "%s (is it running with MCLOC_CONTROL=1, as this user?)",
			     strerror(e));
		if (p->fd >= 0)
			close(p->fd);
		errno = e;
		return -1;
	}
	setsockopt(p->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
}

int peer_send(struct peer *p, uint16_t type, const void *payload, size_t len)
{
	struct mcloc_msg m = { .len = (uint32_t)(sizeof(m) + len), .type = type,
			       .version = MCLOC_WIRE_VERSION, .seq = ++p->seq };
	uint8_t buf[MCLOC_REQ_MAX];

	if (sizeof(m) + len > sizeof(buf)) {
		pfail(p, "request too long");
		return -1;
	}
	memcpy(buf, &m, sizeof(m));
	if (len)	/* (PAYLOAD may be NULL then) */
		memcpy(buf + sizeof(m), payload, len);
	if (send(p->fd, buf, sizeof(m) + len, MSG_NOSIGNAL) != (ssize_t)(sizeof(m) + len)) {
		/* (A program that refuses us closes the connection at once.) */
		if (errno == EPIPE || errno == ECONNRESET)
			pfail(p, "the program closed the connection");
		else
			pfail(p, "cannot send: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static bool read_full(int fd, void *buf, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, buf, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		buf = (uint8_t *)buf + r;
		n -= (size_t)r;
	}
	return true;
}

/* The next reply into p->buf: its header in *M, its payload after it.
 * -1 with a message on a broken reply or an error reply. */
int peer_recv(struct peer *p, struct mcloc_msg *m)
{
	/* The header with recvmsg(): a descriptor comes with its first byte. */
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.space,
			     .msg_controllen = sizeof(u.space) };
	ssize_t n;

	do
		n = recvmsg(p->fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&p->passed_fd, CMSG_DATA(c), sizeof(int));
	if (n <= 0 || (n < (ssize_t)sizeof(*m) &&
		       !read_full(p->fd, (uint8_t *)m + n, sizeof(*m) - (size_t)n))) {
		pfail(p, "the program closed the connection");
		return -1;
	}
	if (m->len < sizeof(*m) || m->len > MCLOC_REP_MAX || m->version != MCLOC_WIRE_VERSION) {
		pfail(p, "a malformed reply (%u bytes, version %u)", m->len, m->version);
		return -1;
	}
	memcpy(p->buf, m, sizeof(*m));
	if (!read_full(p->fd, p->buf + sizeof(*m), m->len - sizeof(*m))) {
		pfail(p, "the program closed the connection");
		return -1;
	}
	if (m->type == MCLOC_REP_ERROR) {
		const struct mcloc_rep_error *e = (const void *)(p->buf + sizeof(*m));

		p->buf[m->len - 1] = 0;
		pfail(p, "%s", m->len > sizeof(*m) + sizeof(*e) ? e->msg : "error");
		return -1;
	}
	return 0;
}

/* One request with a single reply of TYPE, at least SIZE bytes, copied
 * into OUT. */
int ask(struct peer *p, uint16_t req, uint16_t type, void *out, size_t size)
{
	struct mcloc_msg m;

	if (peer_send(p, req, NULL, 0) < 0 || peer_recv(p, &m) < 0)
		return -1;
	if (m.type != type || m.len - sizeof(m) < size) {
		pfail(p, "an unexpected reply (type %#x, %u bytes)", m.type, m.len);
		return -1;
	}
	memcpy(out, p->buf + sizeof(m), size);
	return 0;
}

void json_str(const char *key, const char *s, bool last)
{
	printf("\"%s\":\"", key);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	printf("\"%s", last ? "" : ",");
}

/* ---- the subcommands ----------------------------------------------------- */


int peer_sites(struct peer *p, uint16_t req,
	       void (*fn)(const struct mcloc_rep_site *s, const char *name, void *ctx), void *ctx)
{
	struct mcloc_msg m;

	if (peer_send(p, req, NULL, 0) < 0)
		return -1;
	while (peer_recv(p, &m) == 0) {
		if (m.type == MCLOC_REP_END)
			return 0;
		if (m.type != MCLOC_REP_SITES) {
			pfail(p, "an unexpected reply (type %#x)", m.type);
			return -1;
		}
		/* 8-byte aligned entries, each followed by its name. */
		for (size_t at = sizeof(m); at + sizeof(struct mcloc_rep_site) <= m.len;) {
			struct mcloc_rep_site s;

			memcpy(&s, p->buf + at, sizeof(s));
			const char *name = (const char *)p->buf + at + sizeof(s);

			if (at + sizeof(s) + s.namelen + 1 > m.len || name[s.namelen]) {
				pfail(p, "a malformed site entry");
				return -1;
			}
			fn(&s, name, ctx);
			at += (sizeof(s) + s.namelen + 1 + 7) & ~(size_t)7;
		}
	}
	return -1;
}
