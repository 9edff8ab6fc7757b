// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The writer's side of libmcloc's RCU, and reader registration (rcu.h
 * says why the scheme, and why our own).
 *
 * Reader slots come from pages mapped with mmap(), never freed, on a list
 * pushed with compare-and-swap: a thread's first section may be in a
 * signal handler, where malloc() and locks are not allowed.  A thread
 * that exits gives its slot back (a pthread key's destructor) for the
 * next new thread to take.
 *
 * Deferred work (mcr_defer()) is for callers that must not wait: an
 * image's constructor and destructor run under the dynamic loader's lock,
 * which a reader may be waiting for.  They queue what they retire, and
 * check with mcr_rcu_try_reclaim() whether a grace period is over
 * already; any mcr_synchronize_rcu() runs what was queued before it.
 */
#include "rcu.h"

#include <errno.h>
#include <stdlib.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread struct mcr_reader *mcr_rcu_self __attribute__((tls_model("initial-exec")));
unsigned long mcr_rcu_gp = 1;
bool mcr_rcu_fence;

static struct mcr_reader *readers;	/* the list of every slot */
/* Work for after the next grace period, pushed with compare-and-swap
 * (from under the loader's lock too, where no grace period is waited
 * for). */
struct deferred {
	struct deferred *next;
	void (*fn)(void *);
	void *p;
};
static struct deferred *deferred;
static pthread_mutex_t gp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;

static void reader_exit(void *slot)
{
	struct mcr_reader *r = slot;

	__atomic_store_n(&r->ctr, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&r->used, 0, __ATOMIC_RELEASE);
	mcr_rcu_self = NULL;
}

/* A page of fresh slots, all on the list, the first one ours. */
static struct mcr_reader *new_page(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = pg / sizeof(struct mcr_reader);
	struct mcr_reader *v = mmap(NULL, pg, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (v == MAP_FAILED)
		return NULL;
	v[0].used = 1;
	/* Chain the page, then push it whole. */
	for (size_t i = 0; i + 1 < n; i++)
		v[i].next = &v[i + 1];
	struct mcr_reader *head = __atomic_load_n(&readers, __ATOMIC_ACQUIRE);
	do
		v[n - 1].next = head;
	while (!__atomic_compare_exchange_n(&readers, &head, v, true, __ATOMIC_RELEASE,
					    __ATOMIC_ACQUIRE));
	return v;
}

struct mcr_reader *mcr_rcu_register(void)
{
	struct mcr_reader *r;

	for (r = __atomic_load_n(&readers, __ATOMIC_ACQUIRE); r; r = r->next) {
		int free_ = 0;

		if (!__atomic_load_n(&r->used, __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&r->used, &free_, 1, false, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
	}
	if (!r)
		r = new_page();
	if (!r) {
		/* No memory for even one page: this section cannot be
		 * tracked, so it must not run unprotected.  Abort is the
		 * honest answer; it has never been seen. */
		static const char msg[] = "libmcloc: cannot map a page for an RCU reader\n";
		ssize_t k = write(2, msg, sizeof(msg) - 1);

		(void)k;
		__builtin_trap();
	}
	mcr_rcu_self = r;
	pthread_setspecific(exit_key, r);
	return r;
}

static int membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

/* The writer's barrier on every running thread of the process. */
static void barrier_all(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!mcr_rcu_fence)
		membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* Readers order their sections with compiler barriers only if every
 * thread's barrier can be had from the kernel. */
static void use_membarrier(void)
{
	int cmds = membarrier(MEMBARRIER_CMD_QUERY);

	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) < 0)
		mcr_rcu_fence = true;
}

/* Is R inside a section begun before the last flip of the phase? */
static bool in_old_phase(const struct mcr_reader *r)
{
	unsigned long c = __atomic_load_n(&r->ctr, __ATOMIC_RELAXED);

	return (c & MCR_RCU_NEST_MASK) &&
	       ((c ^ __atomic_load_n(&mcr_rcu_gp, __ATOMIC_RELAXED)) & MCR_RCU_PHASE);
}

static void flip_and_wait(void)
{
	__atomic_store_n(&mcr_rcu_gp, mcr_rcu_gp ^ MCR_RCU_PHASE, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (struct mcr_reader *r = __atomic_load_n(&readers, __ATOMIC_ACQUIRE); r; r = r->next)
		for (unsigned spins = 0; in_old_phase(r); spins++) {
			if (spins < 100) {
				sched_yield();
			} else {
				struct timespec ts = { 0, 100000 };	/* 0.1 ms */

				nanosleep(&ts, NULL);
			}
		}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void push(struct deferred *d)
{
	d->next = __atomic_load_n(&deferred, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&deferred, &d->next, d, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

int mcr_defer(void (*fn)(void *), void *p)
{
	struct deferred *d = malloc(sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->fn = fn;
	d->p = p;
	push(d);
	return 0;
}

static void run_deferred(struct deferred *d)
{
	while (d) {
		struct deferred *next = d->next;

		d->fn(d->p);
		free(d);
		d = next;
	}
}

/* Back on the list: its grace period is not over. */
static void requeue(struct deferred *d)
{
	while (d) {
		struct deferred *next = d->next;

		push(d);
		d = next;
	}
}

/* flip_and_wait() that does not wait: false if a reader is still in a
 * section of the old phase.  Giving up half-way leaves nothing to undo:
 * a grace period is two flips in a row, whatever phase it starts in. */
static bool flip_and_check(void)
{
	__atomic_store_n(&mcr_rcu_gp, mcr_rcu_gp ^ MCR_RCU_PHASE, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (struct mcr_reader *r = __atomic_load_n(&readers, __ATOMIC_ACQUIRE); r; r = r->next)
		if (in_old_phase(r))
			return false;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return true;
}

void mcr_rcu_try_reclaim(void)
{
	if (!__atomic_load_n(&deferred, __ATOMIC_ACQUIRE) || pthread_mutex_trylock(&gp_lock))
		return;
	/* Taken before the flips: only work queued before them is due. */
	struct deferred *due = __atomic_exchange_n(&deferred, NULL, __ATOMIC_ACQUIRE);
	bool over;

	barrier_all();
	over = flip_and_check() && flip_and_check();
	barrier_all();
	pthread_mutex_unlock(&gp_lock);
	if (over)
		run_deferred(due);
	else
		requeue(due);
}

void mcr_synchronize_rcu(void)
{
	pthread_mutex_lock(&gp_lock);
	struct deferred *due = __atomic_exchange_n(&deferred, NULL, __ATOMIC_ACQUIRE);

	/* Every reader's stores before this call (its counter among them)
	 * are visible now, and none of its later loads can see anything
	 * from before the updates that preceded it. */
	barrier_all();
	/* Two flips: a reader that read the phase just before the first
	 * and stored it just after is caught by the second. */
	flip_and_wait();
	flip_and_wait();
	barrier_all();
	pthread_mutex_unlock(&gp_lock);
	run_deferred(due);
}

void mcr_rcu_before_fork(void)
{
	pthread_mutex_lock(&gp_lock);
}

void mcr_rcu_after_fork_parent(void)
{
	pthread_mutex_unlock(&gp_lock);
}

/* The child has one thread: every other slot is a thread that is not
 * there, whatever section it was in.  Registering for membarrier again
 * costs a system call and is safe whatever the kernel carries over; with
 * one thread, switching its readers to fences is safe too. */
void mcr_rcu_after_fork_child(void)
{
	use_membarrier();
	for (struct mcr_reader *r = readers; r; r = r->next)
		if (r != mcr_rcu_self) {
			r->ctr = 0;
			r->used = 0;
		}
	pthread_mutex_unlock(&gp_lock);
}

__attribute__((constructor(101))) static void rcu_init(void)
{
	pthread_key_create(&exit_key, reader_exit);
	use_membarrier();
}
