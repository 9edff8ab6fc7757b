// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Changing code other threads may be executing, the way the kernel's
 * text_poke_bp_batch() does it, in batches:
 *   1. a breakpoint over the first byte of every site, each checked to hold
 *      what the planner believes it does as it goes in, then sync all cores;
 *   2. every site's remaining bytes, then sync;
 *   3. every site's new first byte, then sync.
 * Step 2 writes only the tails that change, and is skipped with its sync
 * when none does, as the kernel skips it: a site that x86_64 parked
 * (arch/runtime.h) goes back to the same call by its first byte alone,
 * and so does a site being parked, so a batch that toggles sites between
 * the same targets writes each site twice and syncs twice.  Such a site
 * (a flip, patch.h) is armed while the planner decides it, not listed for a
 * pass of its own: a batch then reads each site's text once to decide and
 * arm it, and once more for its new first byte.  At most three
 * syncs per batch, whatever its size.  The sync is
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE): every running
 * thread of the process executes a core-serialising instruction before it
 * returns, so none can still run the old bytes from its pipeline.
 *
 * A thread that meets a breakpoint meanwhile gets SIGTRAP; the handler
 * finds its site in the published batch and emulates the new instruction
 * (pushing the return address for a call), just as the kernel's int3
 * handler does.  Traps that are not ours go to the handler that was there
 * before, so debuggers and other tools keep working.
 *
 * Where a site is one aligned 4-byte instruction (aarch64, riscv64: see
 * arch/runtime.h), none of that is needed, and a batch is:
 *   1. every ops slot that changes, one aligned 8-byte store each, then a
 *      sync, so that a thread that runs a site's new call reads the new
 *      slot (only batches that change slots pay it);
 *   2. every site, checked to hold what the core believes it does and
 *      changed with one aligned 4-byte store;
 *   3. instruction-cache maintenance over the changed text, then a sync.
 * Two architecture rules make step 2 safe while other threads run the
 * code.  Arm ARM (DDI 0487), B2.2.5 "Concurrent modification and execution
 * of instructions": a B, BL or NOP may be changed into another of them
 * while another PE executes it, which then executes either the old or the
 * new one, never a mix; our sites only toggle between NOP and BL.  RISC-V
 * profiles, extension Ziccif (mandatory in RVA20 and later): fetches of
 * naturally aligned instructions up to 32 bits from main memory are
 * atomic, so a hart fetches the whole old jalr/NOP or the whole new one.
 * Step 3: neither architecture keeps instruction fetch coherent with data
 * stores.  aarch64: __builtin___clear_cache cleans the data cache and
 * invalidates the instruction cache to the point of unification, by
 * broadcast to the inner-shareable domain; riscv64: __riscv_flush_icache()
 * with flags 0 makes the kernel fence.i every hart that runs this process.
 * What neither does is discard instructions another core has fetched
 * already: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) makes
 * every running thread execute a context-synchronising event (aarch64: an
 * exception return, ISB-equivalent; riscv64: fence.i) before it returns.
 * Without that command (older kernels) step 3 is the maintenance alone:
 * a thread may run a site's old instruction for a moment after the batch,
 * both forms being valid, so only that promptness is lost.  Step 1's
 * sync goes too: the fence after the slots and the dispatcher's acquire
 * load of the site (dispatch.c) still keep a new call from being seen
 * with an old slot, and an old call that runs late finds its site no
 * longer calling, so the current set decides.  mcr_init() says so.
 *
 * A process whose only thread is the batch's needs none of that: no
 * other thread runs a site while it changes, and with the thread's
 * signals held no handler does either (mcr_batch_begin()).
 *
 * Text is writable only during a batch: the pages' exact protections are
 * read from /proc/self/maps and restored.  Where the kernel refuses a
 * writable mapping of text, writes go through /proc/self/mem instead.
 */
#include "patch.h"
#include "signals.h"

#include "../arch/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#endif
#include <time.h>
#include <unistd.h>

struct mcr_stats mcr_stats;
static bool have_membarrier;
static long page_size;
static mcr_site_fn *site_of;	/* set once, by mcr_init() */

#if !MCR_ONE_STORE
/* The pokes of the batch under way, which the SIGTRAP handler consults;
 * published before the first breakpoint is written, withdrawn after the
 * last sync.  (Its flips are the caller's: site_of() finds them.) */
static struct mcr_poke *volatile active_v;
static volatile size_t active_n;
/* The batch's context for site_of(), published for as long as it is. */
static const void *volatile active_ctx;
/* Set while a batch is being undone: a thread that meets one of its
 * breakpoints then runs the instruction the site is going back to. */
static volatile bool active_undo;
/* Handlers running now: the batch is not given back to its owner (who
 * frees it) until none that may have seen it is left. */
static int in_handlers;



#endif

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static int sync_cores(void)
{
	mcr_stats.syncs++;
	if (have_membarrier)
		return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) ? -errno : 0;
	return MCR_ONE_STORE ? 0 : -ENOSYS;
}

#if !MCR_ONE_STORE
static const struct mcr_poke *find_poke(uintptr_t site)
{
	struct mcr_poke *v = active_v;
	size_t lo = 0, hi = active_n;

	if (!v)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].addr < site)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < active_n && v[lo].addr == site ? &v[lo] : NULL;
}

void mcr_wait_handlers(void)
{
	while (__atomic_load_n(&in_handlers, __ATOMIC_SEQ_CST))
		sched_yield();
}

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t site = mcr_trap_site(uc);
	bool ours = false;

	/* A breakpoint's SIGTRAP is the kernel's; one sent by kill(),
	 * tgkill() or sigqueue() goes to the program whatever its address. */
	if (si->si_code != SI_KERNEL) {
		mcr_trap_forward(sig, si, ctx);
		return;
	}
	/* Counted before the batch is looked at (see mcr_patch()). */
	__atomic_add_fetch(&in_handlers, 1, __ATOMIC_SEQ_CST);
	const struct mcr_poke *p = find_poke(site);
	uint8_t insn[MCR_MAX_SITE];
	int known = p ? 0 : site_of(active_ctx, site, active_undo, insn);

	if (p) {
		mcr_emulate(uc, site, active_undo ? p->old_bytes : p->new_bytes, p->len);
		ours = true;
	} else if (known == 2) {
		/* A flip's tail stays: the new (or old) first byte and it. */
		memcpy(insn + 1, (const void *)(site + 1), MCR_FLIP_LEN - 1);
		mcr_emulate(uc, site, insn, MCR_FLIP_LEN);
		ours = true;
	} else if (known && *(volatile uint8_t *)site != mcr_breakpoint) {
		/* A site whose batch ended between the trap and now: run
		 * what is there now. */
		mcr_rewind(uc, site);
		ours = true;
	}
	__atomic_sub_fetch(&in_handlers, 1, __ATOMIC_SEQ_CST);
	if (!ours)
		mcr_trap_forward(sig, si, ctx);
}
#else
void mcr_wait_handlers(void)
{
	/* No handlers: nothing traps. */
}
#endif

/* A fork()ed child has one thread, in no SIGTRAP handler whatever the
 * parent's others were doing (one counted in in_handlers would make the
 * child's next unload wait forever).  Registering for the core-serialising syncs
 * again costs a system call, and holds whatever the kernel carries over. */
void mcr_patch_after_fork_child(void)
{
#if !MCR_ONE_STORE
	__atomic_store_n(&in_handlers, 0, __ATOMIC_SEQ_CST);
#endif
	if (have_membarrier)
		membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE);
}

int mcr_init(mcr_site_fn *site_fn, char *err, size_t errlen)
{
	site_of = site_fn;
	page_size = sysconf(_SC_PAGESIZE);
	int cmds = membarrier(MEMBARRIER_CMD_QUERY), e = 0;

	if (cmds < 0)
		e = errno;
	else if (!(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE))
		e = ENOSYS;	/* (before Linux 4.16, or not on this architecture) */
	else if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE) < 0)
		e = errno;
	if (!e) {
		have_membarrier = true;
	} else if (MCR_ONE_STORE) {
		/* Patching stays correct (see the top of this file), and the
		 * caller may say so: ERR set, 0 returned. */
		snprintf(err, errlen, "membarrier(PRIVATE_EXPEDITED_SYNC_CORE) is not available "
			 "(%s): sites change without it, and a thread may run a site's old "
			 "instruction for a moment after its batch", strerror(e));
		return 0;
	} else if (e == EPERM || e == EACCES) {
		/* (A seccomp filter, or a sandbox, that denies it.) */
		snprintf(err, errlen, "membarrier() is denied (%s): live patching is refused",
			 strerror(e));
		return -EPERM;
	} else {
		snprintf(err, errlen, "membarrier(PRIVATE_EXPEDITED_SYNC_CORE) is not "
			 "available: live patching is refused");
		return -ENOSYS;
	}
#if !MCR_ONE_STORE
	if (mcr_trap_install(on_trap) < 0) {
		snprintf(err, errlen, "cannot install the SIGTRAP handler: %s", strerror(errno));
		return -errno;
	}
#endif
	return 0;
}

/* The mappings, from /proc/self/maps: the protections to restore. */
static struct mcr_span *read_maps(size_t *n)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t cap = 1 << 16, len = 0, nm = 0;
	char *buf = malloc(cap + 1);
	struct mcr_span *m = NULL;
	ssize_t k;

	if (fd < 0 || !buf)
		goto out;
	while ((k = read(fd, buf + len, cap - len)) > 0) {
		len += (size_t)k;
		if (len == cap) {
			char *nb = realloc(buf, 2 * cap + 1);
			if (!nb)
				goto out;
			buf = nb;
			cap *= 2;
		}
	}
	buf[len] = 0;
	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += buf[i] == '\n';
	m = malloc((lines + 1) * sizeof(*m));
	if (!m)
		goto out;
	/* "lo-hi rwxp ...": strtoul, since sscanf cost more than the
	 * kernel took to write the lines. */
	for (char *l = buf; l && *l;) {
		char *e;
		unsigned long lo = strtoul(l, &e, 16), hi = 0;

		if (*e == '-')
			hi = strtoul(e + 1, &e, 16);
		if (hi > lo && e[0] == ' ' && e[1] && e[2] && e[3])
			m[nm++] = (struct mcr_span){ lo, hi,
				(e[1] == 'r' ? PROT_READ : 0) | (e[2] == 'w' ? PROT_WRITE : 0) |
				(e[3] == 'x' ? PROT_EXEC : 0) };
		l = strchr(l, '\n');
		if (l)
			l++;
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	*n = nm;
	return m;
}

static const struct mcr_span *mapping_of(const struct mcr_span *m, size_t n, uintptr_t a)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {	/* /proc/self/maps is in address order */
		size_t mid = lo + (hi - lo) / 2;

		if (m[mid].hi <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && m[lo].lo <= a ? &m[lo] : NULL;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* How much text one mprotect() opens at most: a batch over a large image
 * makes a few calls, a batch of one site does not open the whole image. */
#define SPAN_MAX ((uintptr_t)1 << 20)

#if !MCR_ONE_STORE
/* Whether this thread is its process's only one: glibc's word first (it
 * counts what pthread_create() made), then the kernel's list (a raw
 * clone()'s thread, which glibc does not count).  A process that shares
 * its memory with another through clone(CLONE_VM) without CLONE_THREAD
 * is counted by neither, and glibc's own locking goes wrong there too. */
static bool alone_in_process(void)
{
	struct dent {
		uint64_t ino;
		int64_t off;
		unsigned short reclen;
		unsigned char type;
		char name[];
	};
	union {
		char c[1024];
		struct dent align;
	} buf;
	long got;
	int tasks = 0;

#if __has_include(<sys/single_threaded.h>)
	if (!__libc_single_threaded)
		return false;
#endif
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;	/* (no /proc: not known) */
	while ((got = syscall(SYS_getdents64, fd, buf.c, sizeof(buf.c))) > 0)
		for (long at = 0; at < got;) {
			const struct dent *d = (const struct dent *)(buf.c + at);

			tasks += d->name[0] != '.';
			at += d->reclen;
		}
	close(fd);
	return !got && tasks == 1;
}
#endif

/*
 * A batch alone in its process (patch.h) holds its thread's signals, so
 * that no handler runs code being changed: it then needs no breakpoint,
 * no sync and no second pass, as the kernel's text_poke_early() writes
 * text while one CPU runs.  A process's first enable is often made so:
 * a program that enables tracing before it starts threads.  (Under a
 * controller, the control channel's thread is a second one.)
 */
void mcr_batch_begin(struct mcr_batch *b, mcr_flips_fn *flips, void *ctx)
{
	*b = (struct mcr_batch){ .flips = flips, .ctx = ctx, .memfd = -1, .t0 = now_ms() };
#if !MCR_ONE_STORE
	__atomic_store_n(&active_undo, false, __ATOMIC_SEQ_CST);
	__atomic_store_n(&active_ctx, ctx, __ATOMIC_SEQ_CST);
#if __has_include(<sys/single_threaded.h>)
	if (!__libc_single_threaded)
		return;
#endif
	sigset_t all;

	sigfillset(&all);
	if (mcr_sigmask(SIG_SETMASK, &all, &b->oldmask))
		return;
	b->alone = alone_in_process();
	if (!b->alone)
		mcr_sigmask(SIG_SETMASK, &b->oldmask, NULL);
#endif
}

/* The end of batch B, however it ended: its thread's signals back. */
static void batch_end(struct mcr_batch *b)
{
	if (b->alone)
		mcr_sigmask(SIG_SETMASK, &b->oldmask, NULL);
	b->alone = false;
}

#if !MCR_ONE_STORE
/* Sync the cores for batch B (none where it is alone). */
static int sync_batch(const struct mcr_batch *b)
{
	return b->alone ? 0 : sync_cores();
}
#endif

/*
 * Make [AT, AT + LEN) writable for batch B, unless it is already: the
 * pages from AT's up to HINT (rounded up, at most SPAN_MAX on, within
 * AT's mapping) become one more span, with the protection /proc/self/maps
 * gives them, read once a batch.  Where the kernel refuses a writable
 * mapping of text (a hardened kernel, an LSM), writes go through
 * /proc/self/mem from then on, which the kernel allows.
 */
static int make_writable(struct mcr_batch *b, uintptr_t at, size_t len, uintptr_t hint,
			 char *err, size_t errlen)
{
	uintptr_t pg = (uintptr_t)page_size;

	for (uintptr_t a = at; a < at + len && b->memfd < 0;) {
		const struct mcr_span *s = NULL;

		for (size_t i = b->nspans; i-- > 0 && !s;)
			if (a >= b->spans[i].lo && a < b->spans[i].hi)
				s = &b->spans[i];
		if (s) {
			b->wlo = s->lo;
			b->whi = s->hi;
			a = s->hi;
			continue;
		}
		if (!b->maps && !(b->maps = read_maps(&b->nmaps))) {
			snprintf(err, errlen, "cannot read /proc/self/maps");
			return -EIO;
		}
		const struct mcr_span *m = mapping_of(b->maps, b->nmaps, a);
		if (!m) {
			snprintf(err, errlen, "site %#lx is not mapped", (unsigned long)at);
			return -EFAULT;
		}
		uintptr_t lo = a & ~(pg - 1), hi = (hint > a + 1 ? hint : a + 1) + pg - 1;

		hi &= ~(pg - 1);
		hi = hi > lo + SPAN_MAX ? lo + SPAN_MAX : hi;
		hi = hi > m->hi ? m->hi : hi;
		if (b->nspans == b->cap) {
			size_t nc = b->cap ? 2 * b->cap : 16;
			struct mcr_span *ns = realloc(b->spans, nc * sizeof(*ns));

			if (!ns) {
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			b->spans = ns;
			b->cap = nc;
		}
		if (mprotect((void *)lo, hi - lo, m->prot | PROT_WRITE) < 0) {
			int e = errno;

			b->wlo = b->whi = 0;
			b->memfd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
			if (b->memfd < 0) {
				snprintf(err, errlen, "text is not writable (mprotect: %s) and "
					 "/proc/self/mem cannot be opened: %s", strerror(e),
					 strerror(errno));
				return -EPERM;
			}
			break;
		}
		/* The copy-on-write faults of the span's first writes, taken
		 * in one call: a quarter of their cost is the traps (a VM's
		 * most of all).  A kernel before 5.14 refuses, and the pages
		 * fault in as written. */
		if (b->prefault)
			madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
		b->spans[b->nspans++] = (struct mcr_span){ lo, hi, m->prot };
		b->wlo = lo;
		b->whi = hi;
		a = hi;
	}
	return 0;
}

/* Give the text its protection back: spans that meet and share one are
 * given it in one call. */
static int close_text(struct mcr_batch *b)
{
	int ret = 0;

	for (size_t i = 0; i < b->nspans;) {
		size_t j = i + 1;

		while (j < b->nspans && b->spans[j].lo == b->spans[j - 1].hi &&
		       b->spans[j].prot == b->spans[i].prot)
			j++;
		if (mprotect((void *)b->spans[i].lo, b->spans[j - 1].hi - b->spans[i].lo,
			     b->spans[i].prot) < 0)
			ret = -errno;
		i = j;
	}
	if (b->memfd >= 0)
		close(b->memfd);
	free(b->spans);
	free(b->maps);
	b->spans = b->maps = NULL;
	b->nspans = b->cap = 0;
	b->wlo = b->whi = 0;
	b->memfd = -1;
	return ret;
}

#if !MCR_ONE_STORE
/* LEN bytes at P and Q equal?  Constant sizes, so that a hundred thousand
 * sites cost a load each, not a library call each. */
static inline __attribute__((always_inline)) bool same_bytes(const void *p, const void *q,
							      size_t len)
{
	switch (len) {
	case 1: return !memcmp(p, q, 1);
	case 4: return !memcmp(p, q, 4);
	case 5: return !memcmp(p, q, 5);
	case 6: return !memcmp(p, q, 6);
	default: return !memcmp(p, q, len);
	}
}

#endif

/* Why a write of text failed, said with the way it was written. */
static void write_failed(const struct mcr_batch *b, char *err, size_t errlen, int ret)
{
	snprintf(err, errlen, b->memfd >= 0 ? "writing text through /proc/self/mem (mprotect "
					      "refused) failed: %s" : "writing text failed: %s",
		 strerror(-ret));
}

/* One write through /proc/self/mem. */
static int poke(struct mcr_batch *w, uintptr_t addr, const uint8_t *bytes, size_t len)
{
	return pwrite(w->memfd, bytes, len, (off_t)addr) == (ssize_t)len ? 0 : -errno;
}

int mcr_batch_poke(struct mcr_batch *b, uintptr_t site, uint8_t byte)
{
	return poke(b, site, &byte, 1);
}

#if !MCR_ONE_STORE
/* What a step writes over every site: the breakpoint on the first byte,
 * or the new (or, undoing, the old) instruction's tail or first byte. */
enum step { BREAKPOINT, NEW_TAIL, NEW_FIRST, OLD_TAIL, OLD_FIRST };

/* The tail of a LEN-byte instruction from SRC to DST (as same_bytes()). */
static inline __attribute__((always_inline)) void copy_tail(uint8_t *dst, const uint8_t *src,
							    unsigned len)
{
	switch (len) {
	case 5: memcpy(dst + 1, src + 1, 4); break;
	case 6: memcpy(dst + 1, src + 1, 5); break;
	default: memcpy(dst + 1, src + 1, len - 1u); break;
	}
}

/* Old and new tails of P equal (or a 1-byte site: no tail)?  As
 * arm_step() found. */
static bool same_tail(const struct mcr_poke *p)
{
	return !(p->flags & MCR_POKE_TAIL);
}

/* The instruction bytes STEP writes at P (of which the first or the tail). */
static const uint8_t *step_bytes(const struct mcr_poke *p, enum step step)
{
	return step == BREAKPOINT ? &mcr_breakpoint
	       : step == NEW_TAIL || step == NEW_FIRST ? p->new_bytes : p->old_bytes;
}

/*
 * One step of the protocol over every site of the batch.  Through memory,
 * each site is a store or two of constant size (a batch writes a hundred
 * thousand sites three times: a library call or a branch on the writer
 * per site was a third of the batch).  Through /proc/self/mem, a write
 * each; one that fails does not stop the others (an undo must reach every
 * site), and the first error is returned.
 */
static int write_step(struct mcr_batch *w, const struct mcr_poke *v, size_t n, enum step step)
{
	bool first = step == BREAKPOINT || step == NEW_FIRST || step == OLD_FIRST;

	if (w->memfd >= 0) {
		int ret = 0;

		for (size_t i = 0; i < n; i++) {
			const uint8_t *b = step_bytes(&v[i], step);
			int r = first ? poke(w, v[i].addr, b, 1)
				: !same_tail(&v[i]) ? poke(w, v[i].addr + 1, b + 1, v[i].len - 1u) : 0;

			if (r && !ret)
				ret = r;
		}
		return ret;
	}
	if (first) {
		for (size_t i = 0; i < n; i++)
			*(uint8_t *)v[i].addr = *step_bytes(&v[i], step);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t *at = (uint8_t *)v[i].addr + 1;
		const uint8_t *b = step_bytes(&v[i], step) + 1;

		if (same_tail(&v[i]))
			continue;

		switch (v[i].len) {	/* (as in same_bytes()) */
		case 1: break;
		case 4: memcpy(at, b, 3); break;
		case 5: memcpy(at, b, 4); break;
		case 6: memcpy(at, b, 5); break;
		default: memcpy(at, b, v[i].len - 1u); break;
		}
	}
	return 0;
}

/*
 * Step 1 with the check folded in: a site gets its breakpoint only once it
 * is seen to hold what we believe it does.  A separate check before any
 * write was one more pass over a hundred thousand cold cache lines, a
 * third of a batch.  Returns how many sites, from the first, now hold a
 * breakpoint: fewer than N when site [return] holds something else (or
 * could not be written, *ERR), and nothing was written over that one.
 */
static size_t arm_step(struct mcr_batch *w, struct mcr_poke *v, size_t n, int *err, size_t *tails)
{
	*err = 0;
	*tails = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].flags & (MCR_POKE_OLD_TAIL | MCR_POKE_SAME_TAIL)) {
			/* The first byte checked, the tail taken as it is
			 * (before the breakpoint that makes the handler read
			 * it).  Not compared back: a load over the bytes just
			 * stored would wait for them. */
			if (*(const uint8_t *)v[i].addr != v[i].old_bytes[0])
				return i;
			copy_tail(v[i].old_bytes, (const uint8_t *)v[i].addr, v[i].len);
			if (v[i].flags & MCR_POKE_SAME_TAIL)
				copy_tail(v[i].new_bytes, (const uint8_t *)v[i].addr, v[i].len);
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
		} else if (!same_bytes((void *)v[i].addr, v[i].old_bytes, v[i].len)) {
			return i;
		}
		/* Whether step 2 has a tail to write here, told while the
		 * poke is at hand. */
		if (!(v[i].flags & MCR_POKE_SAME_TAIL) && v[i].len > 1 &&
		    !same_bytes(v[i].old_bytes + 1, v[i].new_bytes + 1, v[i].len - 1u)) {
			v[i].flags |= MCR_POKE_TAIL;
			(*tails)++;
		}
		if (w->memfd < 0)
			*(uint8_t *)v[i].addr = mcr_breakpoint;
		else if ((*err = poke(w, v[i].addr, &mcr_breakpoint, 1)))
			return i;
	}
	return n;
}

#endif

static int cmp_poke(const void *a, const void *b)
{
	const struct mcr_poke *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

#if !MCR_ONE_STORE
/* STEP over B's flips, if it has any. */
static int write_flips(struct mcr_batch *b, enum mcr_flip_step step)
{
	return b->nflips ? b->flips(b, step) : 0;
}

int mcr_flip_slow(struct mcr_batch *b, uintptr_t site, const struct mcr_flip_to *to,
		  uintptr_t hint, char *err, size_t errlen)
{
	int ret = make_writable(b, site, MCR_FLIP_LEN, hint, err, errlen);
	if (ret)
		return ret;
	if (*(volatile const uint8_t *)site != to->old) {
		snprintf(err, errlen, "site %#lx does not hold the expected instruction; refused",
			 (unsigned long)site);
		return -EILSEQ;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);	/* (as in mcr_arm()) */
	if ((ret = mcr_batch_store(b, site, b->alone ? to->new_byte : mcr_breakpoint)))
		write_failed(b, err, errlen, ret);
	return ret;
}

/* Withdraw batch B from the SIGTRAP handler: after this no handler reads
 * it or its pokes. */
static void withdraw(struct mcr_batch *b)
{
	(void)b;
	__atomic_store_n(&active_v, NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&active_ctx, NULL, __ATOMIC_SEQ_CST);
	/* A handler that found the batch before it was withdrawn may still
	 * be reading it. */
	mcr_wait_handlers();
	active_n = 0;
}

/*
 * The breakpoint protocol (top of the file) for B's pokes V, over the
 * flips it has armed already.  The flips' tails never change: they take
 * part in the syncs and the first-byte step only.
 */
static int patch_breakpoints(struct mcr_batch *b, struct mcr_poke *v, size_t n,
			     char *err, size_t errlen)
{
	int ret = 0;

	active_n = n;
	__atomic_store_n(&active_v, v, __ATOMIC_SEQ_CST);

	/* Every site must hold what we believe it does, or the whole batch
	 * is refused and no site is left changed.  The tails are still the
	 * old ones, so the armed sites take their old first byte back
	 * without a sync in between. */
	int werr = 0;
	size_t tails = 0, armed = n ? arm_step(b, v, n, &werr, &tails) : 0;
	if (armed < n) {
		__atomic_store_n(&active_undo, true, __ATOMIC_SEQ_CST);
		write_step(b, v, armed, OLD_FIRST);
		write_flips(b, MCR_FLIPS_OLD);
		sync_batch(b);
		if (!werr)
			snprintf(err, errlen, "site %#lx does not hold the expected "
				 "instruction; refused", (unsigned long)v[armed].addr);
		ret = werr ? werr : -EILSEQ;
		goto out;
	}
	ret = sync_batch(b);
	if (!ret && tails) {
		ret = write_step(b, v, n, NEW_TAIL);
		if (!ret)
			ret = sync_batch(b);
	}
	if (!ret)
		ret = write_step(b, v, n, NEW_FIRST);
	if (!ret)
		ret = write_flips(b, MCR_FLIPS_NEW);
	/* Every site holds its new instruction now; the last sync only makes
	 * sure no core still runs a breakpoint, and one that does traps into
	 * a handler that finds the site no longer armed and runs what is
	 * there, or a flip's mark that says the same.  So its failure (the
	 * kernel out of memory for a cpumask) undoes nothing. */
	if (!ret)
		sync_batch(b);

	if (ret) {
		/* A failure after the first breakpoint: put every site back
		 * to its old instruction, in the same order, so that nothing
		 * stays half-written. */
		__atomic_store_n(&active_undo, true, __ATOMIC_SEQ_CST);
		write_step(b, v, n, BREAKPOINT);
		write_flips(b, MCR_FLIPS_BREAKPOINT);
		sync_batch(b);
		write_step(b, v, n, OLD_TAIL);
		sync_batch(b);
		write_step(b, v, n, OLD_FIRST);
		write_flips(b, MCR_FLIPS_OLD);
		sync_batch(b);
	}
out:
	if (ret && ret != -EILSEQ)	/* (a refusal is worded where it was found) */
		write_failed(b, err, errlen, ret);
	withdraw(b);
	mcr_stats.insn_stores += ret ? 0 : n + b->nflips;
	return ret;
}

void mcr_batch_abort(struct mcr_batch *b)
{
	if (b->nflips) {
		__atomic_store_n(&active_undo, true, __ATOMIC_SEQ_CST);
		write_flips(b, MCR_FLIPS_OLD);
		sync_batch(b);
	}
	withdraw(b);
	close_text(b);
	batch_end(b);
}
#else
void mcr_batch_abort(struct mcr_batch *b)
{
	close_text(b);	/* (no flips: nothing was written) */
	batch_end(b);
}

/* Store the 4-byte instruction INSN at A. */
static int store_insn(struct mcr_batch *w, uintptr_t a, const uint8_t *insn)
{
	uint32_t x;

	memcpy(&x, insn, 4);
	if (w->memfd >= 0)
		return poke(w, a, insn, 4);
	__atomic_store_n((uint32_t *)a, x, __ATOMIC_RELAXED);
	return 0;
}

/* Release: a dispatcher that loads the slot with acquire (dispatch.c)
 * sees the ops it names as its owner filled it in, also where the site's
 * call is older than the slot (a batch that changes only slots). */
static int store_slot(struct mcr_batch *w, uintptr_t a, uintptr_t v)
{
	if (w->memfd >= 0)
		return poke(w, a, (const uint8_t *)&v, 8);
	__atomic_store_n((uintptr_t *)a, v, __ATOMIC_RELEASE);
	return 0;
}

/* Instruction-cache maintenance over the written text: per span of
 * pages, or (through /proc/self/mem, no spans) from the first site to
 * the last. */
static void flush_written(const struct mcr_batch *w, const struct mcr_poke *v, size_t n)
{
	if (!w->nspans) {
		mcr_flush_icache(v[0].addr, v[n - 1].addr + 4);
		return;
	}
	for (size_t i = 0; i < w->nspans; i++)
		mcr_flush_icache(w->spans[i].lo, w->spans[i].hi);
}

/* One store per site (top of the file), over text W has opened. */
static int patch_one_store(struct mcr_batch *w, struct mcr_poke *v, size_t n,
			   const struct mcr_slot_write *sl, size_t ns, char *err, size_t errlen)
{
	int ret = 0;
	size_t done = 0;

	for (size_t i = 0; i < ns && !ret; i++) {
		ret = store_slot(w, sl[i].at, sl[i].val);
		mcr_stats.slot_stores += !ret;
	}
	/* The slots before the sites: a dispatcher that loads a site's new
	 * call with acquire then reads its new slot (dispatch.c says why it
	 * must, also with membarrier).  Also in a batch that writes no slot,
	 * for the slots of earlier batches, which the lock orders before
	 * this fence: one barrier per batch. */
	if (!ret && n)
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!ret && ns && n)
		ret = sync_cores();
	/* Each site is checked just before its store: a site that holds
	 * something else stops the batch, and those already written go
	 * back. */
	for (; !ret && done < n; done++) {
		uint32_t have;

		memcpy(&have, (const void *)v[done].addr, 4);
		if (memcmp(&have, v[done].old_bytes, 4)) {
			snprintf(err, errlen, "site %#lx does not hold the expected "
				 "instruction; refused", (unsigned long)v[done].addr);
			ret = -EILSEQ;
			break;
		}
		ret = store_insn(w, v[done].addr, v[done].new_bytes);
	}
	if (ret) {
		for (size_t i = 0; i < done; i++)
			store_insn(w, v[i].addr, v[i].old_bytes);
		if (ret != -EILSEQ)
			write_failed(w, err, errlen, ret);
	}
	if (n) {
		flush_written(w, v, n);
		int r = sync_cores();
		if (!ret && r) {
			snprintf(err, errlen, "membarrier: %s", strerror(-r));
			ret = r;
		}
	}
	mcr_stats.insn_stores += ret ? 0 : n;
	return ret;
}
#endif

int mcr_patch_batch(struct mcr_batch *b, struct mcr_poke *v, size_t n,
		    const struct mcr_slot_write *sl, size_t ns, char *err, size_t errlen)
{
	int ret = 0;

	if (!n && !ns && !b->nflips) {
		mcr_batch_abort(b);	/* (nothing armed: only withdrawn) */
		return 0;
	}
	/* plan.c hands sites over in address order, image by image. */
	for (size_t i = 1; i < n; i++)
		if (v[i - 1].addr > v[i].addr) {
			qsort(v, n, sizeof(*v), cmp_poke);
			break;
		}
	uintptr_t hint = n ? v[n - 1].addr + v[n - 1].len : 0;
	for (size_t i = 0; i < n && !ret; i++)
		if (v[i].addr < b->wlo || v[i].addr + v[i].len > b->whi) {
			b->prefault = v[i].flags & MCR_POKE_PREFAULT;
			ret = make_writable(b, v[i].addr, v[i].len, hint, err, errlen);
		}
	b->prefault = false;
	for (size_t i = 0; i < ns && !ret; i++)
		ret = make_writable(b, sl[i].at, 8, sl[i].at + 8, err, errlen);
	if (ret) {
		mcr_batch_abort(b);
		return ret;
	}
#if MCR_ONE_STORE
	ret = patch_one_store(b, v, n, sl, ns, err, errlen);
#else
	(void)sl;
	size_t nflips = b->nflips;
	ret = patch_breakpoints(b, v, n, err, errlen);
#endif
	b->changed = !ret;
	int r2 = close_text(b);
	batch_end(b);
	if (!ret && r2) {
		snprintf(err, errlen, "cannot restore the text's protection: %s", strerror(-r2));
		ret = r2;
	}
	mcr_stats.batches++;
#if MCR_ONE_STORE
	mcr_stats.sites += ret ? 0 : n;
#else
	mcr_stats.sites += ret ? 0 : n + nflips;
#endif
	mcr_stats.last_batch_ms = now_ms() - b->t0;
	return ret;
}

int mcr_patch(struct mcr_poke *v, size_t n, const struct mcr_slot_write *sl, size_t ns,
	      char *err, size_t errlen)
{
	struct mcr_batch b;

	mcr_batch_begin(&b, NULL, NULL);
	return mcr_patch_batch(&b, v, n, sl, ns, err, errlen);
}
