// SPDX-License-Identifier: GPL-2.0-or-later
/* mcloc's connection to one program: the client half of <mcloc/control.h>. */
#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

void fail(const char *who, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	/* (One write: the traced program's output, on the same terminal, does
	 * not land in the middle of the line.) */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "mcloc: %s%s%s\n", who ? who : "", who ? ": " : "", msg);
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

int cdir_open(struct cdir *d, bool make)
{
	struct stat st;

	d->fd = -1;
	if (!mcloc_control_dir(d->name, sizeof(d->name), getenv("XDG_RUNTIME_DIR"),
			       (unsigned)geteuid())) {
		fail(NULL, "the control directory's name is too long");
		return -1;
	}
	if (make && mkdir(d->name, 0700) < 0 && errno != EEXIST) {
		fail(d->name, "%s", strerror(errno));
		return -1;
	}
	/* (O_NOFOLLOW: a symlink in its place fails here, ELOOP.) */
	d->fd = open(d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d->fd < 0 && errno == ENOENT)
		return -1;	/* (no program has started control yet) */
	if (d->fd < 0 || fstat(d->fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077)) {
		fail(d->name, "not a directory of this user's that only it may enter; not trusted");
		if (d->fd >= 0)
			close(d->fd);
		d->fd = -1;
		errno = EPERM;
		return -1;
	}
	return 0;
}

int connect_at(int sfd, int dfd, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC), r = -1, e;

	/* Sockets connect by path: NAME is looked up from inside the
	 * directory that was verified, by its descriptor, so that no one can
	 * swap another in its place in between.  (Not through /proc, which a
	 * container may lack.) */
	if (cwd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", name);
	if (fchdir(dfd) == 0)
		r = connect(sfd, (struct sockaddr *)&sa, sizeof(sa));
	e = errno;
	if (fchdir(cwd) < 0) {
		fail(NULL, "cannot return to the working directory: %s", strerror(errno));
		r = -1;
		e = EIO;
	}
	close(cwd);
	errno = e;
	return r;
}

/* Whether the server at the other end of FD runs as this user or root:
 * anyone else's is not the program it says it is. */
static bool trusted_server(struct peer *p, int fd)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		pfail(p, "SO_PEERCRED: %s", strerror(errno));
		return false;
	}
	if (cr.uid != geteuid() && cr.uid != 0) {
		pfail(p, "its socket's server runs as uid %u, not this user or root: refused",
		      (unsigned)cr.uid);
		return false;
	}
	return true;
}

/* Connect to the program PID; -1 with a message (unless QUIET). */
int peer_open(struct peer *p, const char *pid, bool quiet)
{
	struct timeval tv = { .tv_sec = 5 };
	struct cdir d;
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
	if (cdir_open(&d, false) < 0 && errno != ENOENT)
		return -1;	/* (said) */
	p->fd = d.fd < 0 ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0 || connect_at(p->fd, d.fd, pid) < 0) {
		int e = d.fd < 0 ? ENOENT : errno;

		if (!quiet)
			fail(pid, "%s (is it running with MCLOC_CONTROL=1, as this user?)",
			     strerror(e));
		if (p->fd >= 0)
			close(p->fd);
		if (d.fd >= 0)
			close(d.fd);
		errno = e;
		return -1;
	}
	close(d.fd);
	p->quiet = quiet;
	if (!trusted_server(p, p->fd)) {
		close(p->fd);
		p->fd = -1;
		errno = EPERM;
		return -1;
	}
	p->quiet = false;
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
		char space[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.space,
			     .msg_controllen = sizeof(u.space) };
	ssize_t n;

	/* (A descriptor an earlier reply carried and no one took.) */
	if (p->passed_fd >= 0)
		close(p->passed_fd);
	p->passed_fd = -1;
	do
		n = recvmsg(p->fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	/* The first descriptor is the reply's; any other a peer sends is
	 * closed. */
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
				int fd;

				memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
				if (p->passed_fd < 0)
					p->passed_fd = fd;
				else
					close(fd);
			}
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
