// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libmcloc's control channel as a controller meets it: the harness
 * starts the real server (mcloc_control_start(), its socket in this
 * harness's own directory), connects, sends the input as it is (any
 * number of requests, whole or not), closes its sending side and reads
 * every reply until the program closes the connection.  Descriptors a
 * reply passes (a trace's shared memory) are closed.  The program must
 * answer, never crash, and leave no trace running.
 */
#include "harness.h"
#include <mcloc/mcloc.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un addr;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	/* The socket goes in $XDG_RUNTIME_DIR/mcloc/PID. */
	setenv("XDG_RUNTIME_DIR", fz_path(""), 1);
	int r = mcloc_control_start();

	if (r < 0)
		fz_fail("mcloc_control_start: %s", strerror(-r));
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/mcloc/%d", fz_path(""),
		 (int)getpid());
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint8_t buf[65536];

	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		fz_fail("%s: %s", addr.sun_path, strerror(errno));
	/* (A request the program is still waiting the rest of, or that it
	 * answers at length, must not block the send: both ends poll.) */
	size_t sent = 0;
	bool wr = true;

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN | (wr ? POLLOUT : 0) };

		if (wr && sent == size) {
			shutdown(fd, SHUT_WR);
			wr = false;
			continue;
		}
		/* A program that answers nothing for 20 s hangs: a bug.  (A
		 * trace may ask for 1 GiB of rings, which the program fills
		 * with pages before it answers: seconds on a loaded machine.) */
		if (poll(&pf, 1, 20000) != 1)
			fz_fail("fuzz-control: no answer in 20 s (%zu of %zu bytes sent)", sent, size);
		if (pf.revents & POLLOUT) {
			ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n > 0)
				sent += (size_t)n;
			else
				wr = false;	/* (closed on us: an error reply came) */
		}
		if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
			char cbuf[CMSG_SPACE(4 * sizeof(int))];
			struct iovec iov = { buf, sizeof(buf) };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
					     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
			ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n > 0 && c;
			     c = CMSG_NXTHDR(&mh, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
					for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++)
						close(((int *)CMSG_DATA(c))[k]);
			if (n <= 0)
				break;
		}
	}
	close(fd);
	return 0;
}
