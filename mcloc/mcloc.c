// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mcloc: talk to running programs that have libmcloc's control channel
 * on (MCLOC_CONTROL=1), as one reads and writes tracefs: which programs
 * accept control, their traceable functions, the sites enabled now and
 * the patcher's counters.  The protocol is <mcloc/control.h>; this file
 * is its client.  It has a top-level directory of its own (mcloc/),
 * beside the tools, is built wherever the runtime it speaks to is, and
 * links nothing of that runtime or of the tools.
 */
#include "peer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static bool json;

static int cmd_list(int argc, char **argv)
{
	struct cdir cd;
	DIR *d = NULL;

	(void)argv;
	if (argc > 1) {
		fail("list", "takes no arguments");
		return 2;
	}
	if (cdir_open(&cd, false) < 0 && errno != ENOENT)
		return 1;	/* (said: a directory not to trust) */
	if (cd.fd >= 0 && !(d = fdopendir(cd.fd))) {
		fail(cd.name, "%s", strerror(errno));
		close(cd.fd);
		return 1;
	}
	if (!json)
		printf("%-8s %-16s %6s %9s %8s %s\n", "PID", "COMMAND", "IMAGES", "FUNCTIONS",
		       "ENABLED", "TRACER");
	if (!d)
		return 0;	/* (no program has started control yet) */
	for (struct dirent *e; (e = readdir(d));) {
		struct peer *p = malloc(sizeof(*p));
		struct mcloc_rep_hello h;
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (!p)
			break;
		if (pid <= 0 || *end || peer_open(p, e->d_name, true) < 0) {
			/* A socket whose process is gone: ours to tidy, in the
			 * directory verified, and a socket only. */
			struct stat st;

			if (pid > 0 && !*end && kill((pid_t)pid, 0) < 0 && errno == ESRCH &&
			    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISSOCK(st.st_mode))
				unlinkat(dirfd(d), e->d_name, 0);
			free(p);
			continue;
		}
		if (ask(p, MCLOC_REQ_HELLO, MCLOC_REP_HELLO, &h, sizeof(h)) == 0) {
			h.comm[sizeof(h.comm) - 1] = h.tracer[sizeof(h.tracer) - 1] = 0;
			if (json) {
				printf("{\"pid\":%u,", h.pid);
				json_str("command", h.comm, false);
				printf("\"images\":%u,\"functions\":%llu,\"enabled\":%llu,", h.images,
				       (unsigned long long)h.functions,
				       (unsigned long long)h.enabled);
				h.controller[sizeof(h.controller) - 1] = 0;
				json_str("controller", h.controller, false);
				json_str("tracer", h.tracer, true);
				printf("}\n");
			} else {
				printf("%-8u %-16s %6u %9llu %8llu %s\n", h.pid, h.comm, h.images,
				       (unsigned long long)h.functions,
				       (unsigned long long)h.enabled, h.tracer);
			}
		}
		close(p->fd);
		free(p);
	}
	closedir(d);
	return 0;
}

static int cmd_funcs(int argc, char **argv)
{
	struct peer *p;
	struct mcloc_msg m;
	const char *glob = argc > 2 ? argv[2] : "";
	int ret = 1;

	if (argc < 2 || argc > 3) {
		fail("funcs", "usage: mcloc funcs PID [GLOB]");
		return 2;
	}
	if (!(p = malloc(sizeof(*p))) || peer_open(p, argv[1], false) < 0) {
		free(p);
		return 1;
	}
	if (peer_send(p, MCLOC_REQ_FUNCS, glob, strlen(glob) + 1) < 0)
		goto out;
	while (peer_recv(p, &m) == 0) {
		if (m.type == MCLOC_REP_END) {
			ret = 0;
			break;
		}
		if (m.type != MCLOC_REP_NAMES || p->buf[m.len - 1]) {
			fail(p->name, "an unexpected reply (type %#x)", m.type);
			break;
		}
		for (size_t at = sizeof(m); at < m.len;) {
			const char *name = (const char *)p->buf + at;

			if (json) {
				putchar('{');
				json_str("function", name, true);
				printf("}\n");
			} else {
				puts(name);
			}
			at += strlen(name) + 1;
		}
	}
out:
	close(p->fd);
	free(p);
	return ret;
}

static void print_site(const struct mcloc_rep_site *s, const char *name, void *ctx)
{
	const char *state = s->flags & MCLOC_SITE_REFUSED ? "refused" :
			    s->flags & MCLOC_SITE_ENABLED ? "enabled" :
			    s->flags & MCLOC_SITE_PARKED ? "parked" : "nop";

	(void)ctx;
	if (json) {
		printf("{\"site\":%llu,", (unsigned long long)s->site);
		json_str("function", name, false);
		printf("\"ops\":%u,\"regs\":%s,\"direct\":%s,", s->ops,
		       s->flags & MCLOC_SITE_REGS ? "true" : "false",
		       s->flags & MCLOC_SITE_DIRECT ? "true" : "false");
		json_str("state", state, true);
		printf("}\n");
	} else {
		/* As ftrace's enabled_functions: name (ops) flags. */
		printf("%s (%u)%s%s\t%#llx %s\n", name, s->ops,
		       s->flags & MCLOC_SITE_REGS ? " R" : "",
		       s->flags & MCLOC_SITE_DIRECT ? " D" : "",
		       (unsigned long long)s->site, state);
	}
}

/* The peer of a subcommand that takes one argument, the PID (ARGV[1]):
 * NULL with *RET the exit status (2 on a usage error) when there is
 * none. */
static struct peer *peer_of_pid(int argc, char **argv, int *ret)
{
	struct peer *p;

	if (argc != 2) {
		fail(argv[0], "usage: mcloc %s PID", argv[0]);
		*ret = 2;
		return NULL;
	}
	if (!(p = malloc(sizeof(*p))) || peer_open(p, argv[1], false) < 0) {
		free(p);
		*ret = 1;
		return NULL;
	}
	return p;
}

static int cmd_enabled(int argc, char **argv)
{
	int ret;
	struct peer *p = peer_of_pid(argc, argv, &ret);

	if (!p)
		return ret;
	ret = peer_sites(p, MCLOC_REQ_ENABLED, print_site, NULL) < 0;
	close(p->fd);
	free(p);
	return ret;
}

static int cmd_stats(int argc, char **argv)
{
	struct mcloc_rep_stats s;
	int ret = 1;
	struct peer *p = peer_of_pid(argc, argv, &ret);

	if (!p)
		return ret;
	if (ask(p, MCLOC_REQ_STATS, MCLOC_REP_STATS, &s, sizeof(s)) == 0) {
		static const char *const names[] = { "images", "records", "enabled", "refused",
						     "batches", "sites_patched", "syncs",
						     "last_batch_us", "list_calls" };
		const uint64_t v[] = { s.images, s.records, s.enabled, s.refused, s.batches,
				       s.sites_patched, s.syncs, s.last_batch_us, s.list_calls };

		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			if (json)
				printf("%s\"%s\":%llu%s", i ? "" : "{", names[i],
				       (unsigned long long)v[i], i + 1 < sizeof(v) / sizeof(v[0]) ? "," : "}\n");
			else
				printf("%-14s %llu\n", names[i], (unsigned long long)v[i]);
		ret = 0;
	}
	close(p->fd);
	free(p);
	return ret;
}

/* mcloc snapshot PID: ask the program's flight recorders (mcloc record
 * --overwrite) to save what their rings hold now. */
static int cmd_snapshot(int argc, char **argv)
{
	struct mcloc_msg m;
	int ret = 1;
	struct peer *p = peer_of_pid(argc, argv, &ret);

	if (!p)
		return ret;
	if (peer_send(p, MCLOC_REQ_SNAPSHOT, NULL, 0) == 0 && peer_recv(p, &m) == 0) {
		if (m.type == MCLOC_REP_END)
			ret = 0;
		else
			fail(argv[1], "an unexpected reply (type %#x)", m.type);
	}
	close(p->fd);
	free(p);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mcloc [-j] COMMAND [ARGS]\n"
		   "  list                  programs that accept control (MCLOC_CONTROL=1)\n"
		   "  funcs PID [GLOB]      their traceable functions (available_filter_functions)\n"
		   "  enabled PID           the sites in use, with their ops (enabled_functions)\n"
		   "  stats PID             the patcher's counters\n"
		   "  trace PID TRACER [OPTIONS]\n"
		   "                        function, function_graph or profile, streamed\n"
		   "                        until Ctrl-C or --duration (see mcloc(1))\n"
		   "  run TRACER [OPTIONS] [--preload LIB] [-o FILE] -- PROG [ARGS]\n"
		   "                        start PROG and trace it from main() on\n"
		   "  record [TRACER] [OPTIONS] (-p PID | -- PROG [ARGS])\n"
		   "                        every event into a directory (-d DIR, mcloc.data)\n"
		   "  replay [OPTIONS]      a recording as ftrace's text\n"
		   "  report [OPTIONS]      its calls and times per function\n"
		   "  graph [OPTIONS] FUNC  a function's callers and callees, with times\n"
		   "  dump (--chrome|--flame-graph|--perfetto) FILE\n"
		   "                        a recording for a viewer\n"
		   "  info [-d DIR]         what a recording holds\n"
		   "  snapshot PID          a flight recorder (record --overwrite) saves its rings\n"
		   "  -j, --json            JSON lines\n"
		   "See mcloc(1).\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int o;

	while ((o = getopt_long(argc, argv, "+jh", opts, NULL)) != -1) {
		if (o == 'j') {
			json = true;
		} else if (o == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		usage(stderr);
		return 2;
	}
	/* (mcloc COMMAND --help: the commands are all on one page.) */
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[0], "list"))
		return cmd_list(argc, argv);
	if (!strcmp(argv[0], "funcs"))
		return cmd_funcs(argc, argv);
	if (!strcmp(argv[0], "enabled"))
		return cmd_enabled(argc, argv);
	if (!strcmp(argv[0], "stats"))
		return cmd_stats(argc, argv);
	if (!strcmp(argv[0], "trace"))
		return cmd_trace(argc, argv, json);
	if (!strcmp(argv[0], "run"))
		return cmd_run(argc, argv, json);
	if (!strcmp(argv[0], "record"))
		return cmd_record(argc, argv, json);
	if (!strcmp(argv[0], "snapshot"))
		return cmd_snapshot(argc, argv);
	for (const char *const *c = (const char *const[]){ "replay", "report", "graph", "dump",
							    "info", NULL }; *c; c++)
		if (!strcmp(argv[0], *c))
			return cmd_offline(argc, argv, json);
	fail(NULL, "unknown command '%s' (list, funcs, enabled, stats, trace, run, record, replay, report, graph, dump, info, snapshot)", argv[0]);
	return 2;
}
