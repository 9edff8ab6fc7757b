/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libmcloc's read-copy-update: what lets a traced call walk the published
 * ops set, and a dispatcher read an ops slot, without a lock or an atomic
 * read-modify-write, while unregister waits until no thread can still be
 * using what it withdrew.
 *
 * The scheme is the one of Desnoyers et al., "User-Level Implementations
 * of Read-Copy Update" (IEEE TPDS 2012), in its membarrier flavour: a
 * reader stores the current grace-period phase in its own counter and
 * orders that with nothing but a compiler barrier; the writer makes every
 * running thread execute a full barrier with membarrier(PRIVATE_EXPEDITED)
 * instead, then flips the phase twice, each time waiting until no reader
 * is still inside a section begun in the old phase.
 *
 * Why our own rather than liburcu's urcu-bp, which earlier versions used:
 * Debian 12 builds no liburcu for riscv64, one of the runtime's three
 * architectures, and urcu-bp's registry lock could be inherited held by a
 * fork() child (the BUGS entry it cost).  Here readers register without a
 * lock (a compare-and-swap on a list that only grows), and the child of a
 * fork forgets every reader but its own thread.
 */
#ifndef MCLOC_RCU_H
#define MCLOC_RCU_H

#include <stdbool.h>

/* One thread's reader state, on a cache line of its own: the writer reads
 * every one of them, the thread writes only its own. */
struct mcr_reader {
	unsigned long ctr;	/* 0 outside a section; else phase | nesting */
	struct mcr_reader *next;	/* every reader slot ever made */
	int used;		/* held by a live thread */
} __attribute__((aligned(64)));

#define MCR_RCU_NEST_MASK ((1ul << (sizeof(long) * 4)) - 1)
#define MCR_RCU_PHASE (1ul << (sizeof(long) * 4))

extern __thread struct mcr_reader *mcr_rcu_self;
extern unsigned long mcr_rcu_gp;	/* the phase, and a nesting of 1 */
extern bool mcr_rcu_fence;		/* no membarrier: readers fence */

/* The calling thread's slot, taken on its first section. */
struct mcr_reader *mcr_rcu_register(void);

/* The reader's half of a barrier the writer's membarrier completes: a
 * compiler barrier, unless the kernel has no membarrier. */
static inline void mcr_rcu_reader_barrier(void)
{
	if (__builtin_expect(__atomic_load_n(&mcr_rcu_fence, __ATOMIC_RELAXED), 0))
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Sections nest, and may be entered from a signal handler. */
static inline void mcr_read_lock(void)
{
	struct mcr_reader *r = mcr_rcu_self;

	if (__builtin_expect(!r, 0))
		r = mcr_rcu_register();
	unsigned long c = __atomic_load_n(&r->ctr, __ATOMIC_RELAXED);

	if (!(c & MCR_RCU_NEST_MASK)) {
		__atomic_store_n(&r->ctr, __atomic_load_n(&mcr_rcu_gp, __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
		mcr_rcu_reader_barrier();
	} else {
		__atomic_store_n(&r->ctr, c + 1, __ATOMIC_RELAXED);
	}
}

static inline void mcr_read_unlock(void)
{
	struct mcr_reader *r = mcr_rcu_self;
	unsigned long c = __atomic_load_n(&r->ctr, __ATOMIC_RELAXED);

	if ((c & MCR_RCU_NEST_MASK) == 1)
		mcr_rcu_reader_barrier();
	__atomic_store_n(&r->ctr, c - 1, __ATOMIC_RELAXED);
}

/* Inside a section: P's target stays valid until the section ends. */
#define mcr_rcu_deref(p) __atomic_load_n(&(p), __ATOMIC_CONSUME)
/* Publish V (initialised before) at P. */
#define mcr_rcu_assign(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)

/* Return once every section that was running when it was called has
 * ended, having run every mcr_defer() made before it.  Not from inside a
 * section, and never under the dynamic loader's lock (an image's
 * constructor or destructor): a reader may be waiting for that lock. */
void mcr_synchronize_rcu(void);

/* Run FN(P) once every section running now has ended: at the end of the
 * next grace period, whoever waits for it (mcr_synchronize_rcu(), or a
 * mcr_rcu_try_reclaim() that finds one over).  What may run under the
 * loader's lock retires memory this way, never waiting.  -ENOMEM: not
 * queued (the caller leaks P rather than wait). */
int mcr_defer(void (*fn)(void *), void *p);

/* Without waiting for anything: if no section that was running when the
 * deferred work was queued is still running, run that work; else leave
 * it for the next grace period. */
void mcr_rcu_try_reclaim(void);

/* fork(): plan.c's part of the fork handlers (fork.c), inside mcr_lock. */
void mcr_rcu_before_fork(void);
void mcr_rcu_after_fork_parent(void);
void mcr_rcu_after_fork_child(void);

#endif
