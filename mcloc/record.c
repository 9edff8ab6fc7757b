// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mcloc record: the rings' bytes, copied to a recording's files as the
 * program writes them (<mcloc/record.h> lays the files out), formatting
 * nothing: a write(2) from the shared mapping per ring and pass.  The
 * trace runs lossless (MCLOC_TRACE_WAIT): a thread whose ring is full
 * waits for this reader, which reads without sleeping while there is
 * anything to read.
 *
 * The directory is the user's to name and may be in a shared /tmp: it is
 * made here (mode 0755 less the umask), or, when it exists already and
 * holds a recording and nothing else, that recording is moved to
 * DIR.old first (a DIR.old that holds a recording only is replaced);
 * a DIR or DIR.old of another user's is never written into.
 * Every file is made with O_EXCL under the directory's descriptor, so a
 * symlink planted in it is never followed.  Besides the events and names
 * of <mcloc/record.h>, a recording keeps PID.maps, the program's file
 * mappings (the lines of /proc/PID/maps): the offline commands name
 * callers and source lines from those files.
 */
#include "format.h"
#include "recorder.h"
#include "symbols.h"

#include <mcloc/record.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct rec_thread {
	uint32_t tid;
	int fd;			/* -1: not opened (or failed) */
	uint64_t units;
};

struct recorder {
	int dfd;
	unsigned gen;		/* the image of its pid: 0, then 1 for each exec */
	char key[32];		/* its files' prefix: PID, or PID-GEN after an exec */
	const char *dir;
	struct mcloc_rec_info info;
	const char *args;	/* the command line, NUL-separated */
	size_t args_len;
	struct rec_thread *th;	/* by ring */
	uint32_t nth;
	char **maps;		/* the program's file mappings, every one seen */
	size_t nmaps;
	bool failed;		/* a write failed: said once */
};

/* Whether NAME is a file a recording has: PID.info, PID.names, PID.maps
 * or PID.TID.events. */
static bool recording_file(const char *name)
{
	return !fnmatch("[0-9]*.info", name, 0) || !fnmatch("[0-9]*.names", name, 0) ||
	       !fnmatch("[0-9]*.maps", name, 0) || !fnmatch("[0-9]*.[0-9]*.events", name, 0);
}

/*
 * The files of the directory DFD: 1 when it holds a recording's files
 * and nothing else (REMOVE: they are unlinked), 0 when it is empty, -1
 * when it holds anything else or cannot be read.
 */
static int only_recording(int dfd, bool remove)
{
	int fd = dup(dfd), kind = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (struct dirent *e; kind >= 0 && (e = readdir(d));) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!recording_file(e->d_name) ||
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			kind = -1;
		else if (remove && unlinkat(dfd, e->d_name, 0) < 0)
			kind = -1;
		else
			kind = 1;
	}
	closedir(d);
	return kind;
}

/*
 * The directory DIR opened, not through a symlink: its descriptor, or -1
 * with errno.  One that belongs to another user is refused (EPERM): in a
 * shared /tmp, a DIR planted beforehand would be the planter's to read
 * and to change under the recording.
 */
static int open_own_dir(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (dfd >= 0 && (fstat(dfd, &st) < 0 || st.st_uid != geteuid())) {
		close(dfd);
		errno = EPERM;
		return -1;
	}
	return dfd;
}

/* DIR, made afresh, opened: its descriptor, or -1 with a message. */
static int make_dir(const char *dir)
{
	char old[4096];
	int dfd;

	if (mkdir(dir, 0755) == 0 || errno != EEXIST)
		goto open;
	dfd = open_own_dir(dir);
	if (dfd < 0 && errno == EPERM) {
		fail(dir, "belongs to another user: not written into");
		return -1;
	}
	int kind = dfd >= 0 ? only_recording(dfd, false) : -1;

	if (dfd >= 0)
		close(dfd);
	if (kind < 0) {
		fail(dir, "exists and is not a recording (or cannot be read): not written over");
		return -1;
	}
	if (kind == 0)
		goto open;
	if ((size_t)snprintf(old, sizeof(old), "%s.old", dir) >= sizeof(old)) {
		fail(dir, "name too long");
		return -1;
	}
	/* A DIR.old of recording files only is ours to replace. */
	int ofd = open_own_dir(old);

	if (ofd < 0 && errno == EPERM) {
		fail(old, "belongs to another user: %s is not moved there", dir);
		return -1;
	}
	if (ofd >= 0) {
		kind = only_recording(ofd, true);
		close(ofd);
		if (kind < 0 || rmdir(old) < 0) {
			fail(old, "holds more than a recording: %s is not moved there", dir);
			return -1;
		}
	}
	if (rename(dir, old) < 0) {
		fail(dir, "cannot be moved to %s: %s", old, strerror(errno));
		return -1;
	}
	if (mkdir(dir, 0755) < 0) {
		fail(dir, "%s", strerror(errno));
		return -1;
	}
open:
	/* (Again: the name may have been taken between the look and now.) */
	dfd = open_own_dir(dir);
	if (dfd < 0)
		fail(dir, "%s", errno == EPERM ? "belongs to another user: not written into" :
			  strerror(errno));
	return dfd;
}

static bool write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p = (const uint8_t *)p + w;
		n -= (size_t)w;
	}
	return true;
}

static void write_failed(struct recorder *r, const char *what)
{
	if (!r->failed)
		fail(r->dir, "%s: %s", what, strerror(errno ? errno : ENOSPC));
	r->failed = true;
}

/* A new file NAME in the recording: a descriptor, or -1 (said). */
static int new_file(struct recorder *r, const char *name)
{
	int fd = openat(r->dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		write_failed(r, name);
	return fd;
}

struct recorder *rec_open(const char *dir, const char *args, size_t args_len)
{
	struct recorder *r = calloc(1, sizeof(*r));
	struct timespec rt;

	if (!r) {
		fail(dir, "out of memory");
		return NULL;
	}
	r->dir = dir;
	r->args = args;
	r->args_len = args_len;
	r->dfd = make_dir(dir);
	if (r->dfd < 0) {
		free(r);
		return NULL;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	r->info = (struct mcloc_rec_info){
		.magic = MCLOC_REC_MAGIC, .version = MCLOC_REC_VERSION,
		.realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec,
	};
	return r;
}

struct recorder *rec_another(const struct recorder *root, unsigned gen, const char *args,
			     size_t args_len)
{
	struct recorder *r = calloc(1, sizeof(*r));

	if (!r || (r->dfd = fcntl(root->dfd, F_DUPFD_CLOEXEC, 0)) < 0) {
		fail(root->dir, "%s", r ? strerror(errno) : "out of memory");
		free(r);
		return NULL;
	}
	r->dir = root->dir;
	r->gen = gen;
	r->args = args;
	r->args_len = args_len;
	r->info = (struct mcloc_rec_info){ .magic = MCLOC_REC_MAGIC, .version = MCLOC_REC_VERSION,
					   .realtime_ns = root->info.realtime_ns };
	struct timespec rt;

	if (clock_gettime(CLOCK_REALTIME, &rt) == 0)
		r->info.realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	return r;
}

/* R's files' prefix, for the process T traces. */
static const char *key_of(struct recorder *r, const struct tracing *t)
{
	if (!r->key[0]) {
		if (r->gen)
			snprintf(r->key, sizeof(r->key), "%u-%u", t->pid, r->gen);
		else
			snprintf(r->key, sizeof(r->key), "%u", t->pid);
	}
	return r->key;
}

void rec_abort(struct recorder *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nmaps; i++)
		free(r->maps[i]);
	free(r->maps);
	for (uint32_t i = 0; i < r->nth; i++)
		if (r->th[i].fd >= 0)
			close(r->th[i].fd);
	close(r->dfd);
	free(r->th);
	free(r);
}

/* Ring I's thread file, opened at its first event. */
static struct rec_thread *thread_file(struct tracing *t, uint32_t i, uint32_t tid,
				      const char *comm)
{
	struct recorder *r = t->rec;

	if (i >= r->nth) {
		struct rec_thread *v = realloc(r->th, (i + 1) * sizeof(*v));

		if (!v)
			return NULL;
		for (uint32_t k = r->nth; k <= i; k++)
			v[k] = (struct rec_thread){ .fd = -1 };
		r->th = v;
		r->nth = i + 1;
	}
	struct rec_thread *th = &r->th[i];

	if (th->tid)
		return th->fd >= 0 ? th : NULL;
	char name[64];
	struct mcloc_rec_thread h = { .magic = MCLOC_REC_THREAD_MAGIC, .version = MCLOC_REC_VERSION,
				      .event_size = MCLOC_EV_UNIT, .pid = t->pid,
				      .tid = tid };

	memcpy(h.comm, comm, sizeof(h.comm) - 1);
	th->tid = tid;
	/* A thread that took an exited one's tid has a ring, and a file, of
	 * its own: TID-N for the Nth after the first. */
	unsigned again = 0;

	for (uint32_t k = 0; k < r->nth; k++)
		again += k != i && r->th[k].tid == tid;
	if (again)
		snprintf(name, sizeof(name), "%s.%u-%u.events", key_of(r, t), tid, again);
	else
		snprintf(name, sizeof(name), "%s.%u.events", key_of(r, t), tid);
	th->fd = new_file(r, name);
	if (th->fd >= 0 && !write_all(th->fd, &h, sizeof(h))) {
		write_failed(r, name);
		close(th->fd);
		th->fd = -1;
	}
	r->info.threads += th->fd >= 0;
	return th->fd >= 0 ? th : NULL;
}

/*
 * One pass over the rings: what each holds, written to its thread's file
 * and released.  The bytes written; a ring that cannot be written is
 * still released (its events are counted lost), so that its thread does
 * not wait for a reader that cannot keep them.
 */
size_t rec_drain(struct tracing *t,
		 void (*seen)(struct tracing *t, const uint64_t *ev, size_t n))
{
	struct recorder *r = t->rec;
	uint32_t nr = rings_taken(t);
	size_t done = 0;

	for (uint32_t i = 0; i < nr; i++) {
		struct unread u;

		/* (A copy only where it must be: the callers seen need
		 * whole events, which may span the ring's end.) */
		if (!ring_unread(t, i, seen != NULL, &u))
			continue;
		char comm[16];

		memcpy(comm, ring_at(t, i)->comm, sizeof(comm));
		comm[15] = 0;
		struct rec_thread *th = thread_file(t, i, u.tid, comm);
		uint64_t n = u.na + u.nb;

		if (seen)
			seen(t, (const uint64_t *)u.a, u.na / MCLOC_EV_UNIT);
		if (th && (!write_all(th->fd, u.a, u.na) || !write_all(th->fd, u.b, u.nb))) {
			write_failed(r, "a thread's events");
			close(th->fd);
			th->fd = -1;
			th = NULL;
		}
		if (th)
			th->units += n / MCLOC_EV_UNIT;
		else
			t->skipped += n / MCLOC_EV_UNIT;	/* (at most: a unit each) */
		done += n;
		ring_consume(t, i, u.head);
	}
	return done;
}


void rec_maps(struct tracing *t)
{
	struct recorder *r = t->rec;
	size_t len = 0;
	char *text = r ? sym_read_maps(t->pid, &len) : NULL;

	if (r && !r->info.ppid)
		if (!r->info.ppid)
		r->info.ppid = proc_parent(t->pid);
	if (r && !r->info.comm[0]) {
		/* (The process's name while it lives, for a process whose
		 * threads take no ring.) */
		char path[64];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%u/comm", t->pid);
		if ((f = fopen(path, "re"))) {
			if (fgets(r->info.comm, sizeof(r->info.comm), f))
				r->info.comm[strcspn(r->info.comm, "\n")] = 0;
			fclose(f);
		}
	}

	for (char *line = text, *end; line && *line; line = end) {
		end = strchr(line, '\n');
		end = end ? end + 1 : line + strlen(line);
		/* (File-backed lines only, each once: all of a file's, as a
		 * reader works out where it was loaded from them.) */
		char save = *end;

		*end = 0;
		size_t i = 0;

		if (strstr(line, " /"))
			while (i < r->nmaps && strcmp(r->maps[i], line))
				i++;
		if (strstr(line, " /") && i == r->nmaps && r->nmaps < 1u << 16) {
			char **v = realloc(r->maps, (r->nmaps + 1) * sizeof(*v));

			if (v) {
				r->maps = v;
				if ((v[r->nmaps] = strdup(line)))
					r->nmaps++;
			}
		}
		*end = save;
	}
	free(text);
}

void rec_snapshot(struct tracing *t)
{
	if (t->rec)
		t->rec->info.snapshots++;
}

static bool put_names(struct recorder *r, int fd, const struct names *ns, uint32_t kind)
{
	for (size_t i = 0; i < ns->n; i++) {
		const struct name *nm = &ns->v[i];
		size_t len = nm->name ? strlen(nm->name) : 0;
		struct mcloc_rec_name e = { .addr = nm->addr, .off = nm->off, .kind = kind,
					    .namelen = (uint32_t)len };
		char pad[8] = { 0 };
		size_t padn = 8 - (len + 1) % 8;

		if (len > UINT32_MAX / 2 || !write_all(fd, &e, sizeof(e)) ||
		    (len && !write_all(fd, nm->name, len)) ||
		    !write_all(fd, pad, 1 + (padn == 8 ? 0 : padn))) {
			write_failed(r, "names");
			return false;
		}
	}
	return true;
}

/*
 * The end of the recording: each thread's header completed, the names,
 * and last the info, which says the recording is whole.  0, or 1 when
 * anything could not be written (said).
 */
int rec_close(struct tracing *t, uint64_t lost)
{
	struct recorder *r = t->rec;
	char name[64];
	int fd, ret;

	if (!r)
		return 0;
	r->info.pid = t->pid;
	r->info.generation = r->gen;
	if (!r->info.ppid)
		r->info.ppid = proc_parent(t->pid);
	r->info.tracer = t->mode == FUNCTION ? MCLOC_TRACE_FUNCTION : MCLOC_TRACE_GRAPH;
	r->info.ticks = t->g.ticks;
	r->info.ring_flags = t->g.flags;
	r->info.start_ns = t->g.start_ns;
	r->info.start_time = t->g.start_time;
	r->info.end_ns = __atomic_load_n(&t->h->now_ns, __ATOMIC_RELAXED);
	r->info.end_time = __atomic_load_n(&t->h->now_time, __ATOMIC_RELAXED);
	if (t->rate > 0 && t->g.ticks) {
		/* (The pair the reader trusted: a peer's last pair is data.) */
		r->info.end_time = t->g.start_time + 1000000000u;
		r->info.end_ns = t->g.start_ns + saturate(1e9 * t->rate);
	}
	r->info.lost = lost;
	for (uint32_t i = 0; i < r->nth; i++) {
		struct rec_thread *th = &r->th[i];
		const struct mcloc_ring *ring =
			ring_at(t, i);
		uint64_t l = __atomic_load_n(&ring->lost, __ATOMIC_RELAXED);
		uint64_t w = __atomic_load_n(&ring->waits, __ATOMIC_RELAXED);

		r->info.units += th->units;
		r->info.waits += w;
		if (th->fd < 0)
			continue;
		if (__atomic_load_n(&ring->lost_open, __ATOMIC_ACQUIRE)) {
			struct mcloc_event e = { .word = mcloc_ev_word(MCLOC_EV_LOST_BEFORE, 0, 0) };

			if (!write_all(th->fd, &e, sizeof(e)))
				write_failed(r, "a thread's events");
		}
		if (pwrite(th->fd, &l, 8, offsetof(struct mcloc_rec_thread, lost)) != 8 ||
		    pwrite(th->fd, &w, 8, offsetof(struct mcloc_rec_thread, waits)) != 8 ||
		    close(th->fd) < 0)
			write_failed(r, "a thread's header");
		th->fd = -1;
	}
	snprintf(name, sizeof(name), "%s.names", key_of(r, t));
	if ((fd = new_file(r, name)) >= 0) {
		if (put_names(r, fd, &t->sites, MCLOC_REC_SITE))
			put_names(r, fd, &t->callers, MCLOC_REC_CALLER);
		if (close(fd) < 0)
			write_failed(r, name);
	}
	snprintf(name, sizeof(name), "%s.maps", key_of(r, t));
	if (r->nmaps && (fd = new_file(r, name)) >= 0) {
		for (size_t i = 0; i < r->nmaps; i++)
			if (!write_all(fd, r->maps[i], strlen(r->maps[i]))) {
				write_failed(r, name);
				break;
			}
		if (close(fd) < 0)
			write_failed(r, name);
	}
	snprintf(name, sizeof(name), "%s.info", key_of(r, t));
	r->info.argc_len = (uint32_t)r->args_len;
	if (t->g.rings && ring_at(t, 0)->comm[0])	/* (the first thread's name) */
		memcpy(r->info.comm, ring_at(t, 0)->comm, sizeof(r->info.comm) - 1);
	if (!r->failed && (fd = new_file(r, name)) >= 0) {
		if (!write_all(fd, &r->info, sizeof(r->info)) ||
		    !write_all(fd, r->args, r->args_len) || close(fd) < 0)
			write_failed(r, name);
	}
	ret = r->failed;
	/* (Under a MiB, in KiB: "0 MiB" read as nothing.) */
	uint64_t bytes = r->info.units * MCLOC_EV_UNIT;
	bool mib = bytes >= 1u << 20;

	if (!ret)
		fprintf(stderr, "mcloc: %s: %s (%s): %u thread%s, %llu %s of events, %llu lost\n",
			r->dir, key_of(r, t), r->info.comm, r->info.threads, r->info.threads == 1 ? "" : "s",
			(unsigned long long)(mib ? bytes >> 20 : (bytes + 1023) >> 10),
			mib ? "MiB" : "KiB", (unsigned long long)lost);
	rec_abort(r);
	t->rec = NULL;
	return ret;
}
