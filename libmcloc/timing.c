// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Timing traced calls, for the tracers that need a call's end as well as
 * its start (profile, function_graph): the clock they share, and the
 * return hook.
 *
 * The clock is the CPU's constant-rate counter where it is one
 * (mcr_ticks(): TSC, cntvct_el0, rdtime; two of them cost less than one
 * clock_gettime() on a VM's kvm-clock), else CLOCK_MONOTONIC in
 * nanoseconds; mcr_stamp_is_tick() says which, and a reader converts
 * ticks by the rate it measures over a span.
 *
 * A call is timed by hijacking its return address, as the kernel's
 * function-graph tracer does: the callback (with registers) swaps the
 * address for arch's return trampoline and keeps the real one on a
 * per-thread shadow stack with what to call when it returns; the
 * trampoline's hook pops it, calls that, and returns to the real address.
 * A longjmp past hooked calls leaves their entries behind: the hook finds
 * its own entry by the stack slot, and tells each one above it that it was
 * left.  Calls whose return address is not at the entry's stack
 * pointer (mcount sites after a prologue) cannot be hooked.
 *
 * An exception (C++'s throw, or a forced unwind: pthread_exit,
 * cancellation) walks the stack by its return addresses, and would find
 * the trampoline's where a hooked call's caller should be.  So the
 * unwinder's two entry points are interposed: before unwinding starts,
 * every hooked call live on the thread's stack gets its real return
 * address back and is told it was left.  They are defined under the
 * version the unwinder's callers ask for (libmcloc.map), else the
 * dynamic linker would not let them stand in.
 */
#include "mcr.h"
#include "images.h"
#include "timing.h"
#include "../arch/runtime.h"
#include <mcloc/control.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unwind.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int mcr_tick_clock;

bool mcr_stamp_is_tick(void)
{
	int c = __atomic_load_n(&mcr_tick_clock, __ATOMIC_RELAXED);

	if (!c) {
		c = mcr_ticks_constant() ? 1 : -1;
		__atomic_store_n(&mcr_tick_clock, c, __ATOMIC_RELAXED);
	}
	return c > 0;
}

uint64_t mcr_stamp_slow(void)
{
	struct timespec ts;

	if (mcr_stamp_is_tick())
		return mcr_ticks();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the shadow stack -------------------------------------------------------- */

#define SHADOW_DEPTH 128
/* Callbacks that may time one call: each controller's session and the
 * library's own tracer, as the kernel's fgraph has several users of one
 * return hook. */
#define FRAME_USERS (MCLOC_SESSIONS_MAX + 1)

/* Who is told of a hooked call's return, and its start. */
struct frame_user {
	mcr_ret_fn done;
	void *arg;
	unsigned gen;
	uint64_t t0;
};

/* A hooked call: one cache line with its first user, who hooked it (the
 * others, who joined, are rare: kept apart, in the shadow's ALSO, so that
 * a call's hook writes no more than it did with one user). */
struct frame {
	uintptr_t key;		/* the stack pointer after its return */
	uintptr_t *slot;	/* where its return address is */
	uintptr_t ret;		/* its return address */
	uintptr_t ip;		/* its site */
	mcr_ret_fn done;
	void *arg;
	unsigned gen;
	unsigned more;		/* users who joined, in also[] */
	uint64_t t0;
};

_Static_assert(sizeof(struct frame) == 64, "a frame is a cache line");

struct shadow {
	unsigned depth;
	/* (A frame a line: the shadow is mapped page-aligned.) */
	struct frame f[SHADOW_DEPTH] __attribute__((aligned(64)));
	struct frame_user also[SHADOW_DEPTH][FRAME_USERS - 1];
};

static pthread_key_t shadow_key;
static __thread struct shadow *myshadow __attribute__((tls_model("initial-exec")));

static void shadow_gone(void *sh)
{
	munmap(sh, sizeof(struct shadow));
}

/* Made at start-up, not on a first call: that may be in a signal
 * handler, where pthread_key_create's lock may be held. */
__attribute__((constructor(101))) static void shadow_key_make(void)
{
	pthread_key_create(&shadow_key, shadow_gone);
}

/* A thread's first hooked call, maybe in a signal handler that
 * interrupted malloc(): its stack from mmap() (pthread_setspecific with a
 * key made at start-up only stores into the thread, as rcu.c relies on). */
static __attribute__((noinline, cold)) struct shadow *new_shadow(void)
{
	struct shadow *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (sh == MAP_FAILED)
		return NULL;
	pthread_setspecific(shadow_key, sh);
	myshadow = sh;
	return sh;
}

static inline struct shadow *get_shadow(void)
{
	struct shadow *sh = myshadow;

	return __builtin_expect(sh != NULL, 1) ? sh : new_shadow();
}

/*
 * The thread's newest frame, if the user DONE of GEN may join it: the call
 * at IP whose return address was PARENT when the callbacks began (read
 * before any of them ran), which another user hooked already (hook_slot()
 * checks its slot).  A tail call from a hooked function finds our
 * trampoline's address there, as the call it replaced did if that was a
 * tail call too: a frame this user is in already is that of another call
 * (a function's tail call of itself), not joined.  NULL: a frame of its
 * own.
 */
static inline struct frame *joinable(const struct shadow *sh, uintptr_t ip, uintptr_t parent,
				     mcr_ret_fn done, unsigned gen)
{
	struct frame *f = sh && sh->depth ? (struct frame *)&sh->f[sh->depth - 1] : NULL;

	if (!f || f->ip != ip || f->ret != parent || (f->done == done && f->gen == gen))
		return NULL;
	const struct frame_user *u = sh->also[sh->depth - 1];

	for (unsigned i = 0; i < f->more && i < FRAME_USERS - 1; i++)
		if (u[i].done == done && u[i].gen == gen)
			return NULL;
	return f;
}

unsigned mcr_hook_depth(uintptr_t ip, uintptr_t parent, mcr_ret_fn done, unsigned gen)
{
	const struct shadow *sh = myshadow;

	return !sh ? 0 : joinable(sh, ip, parent, done, gen) ? sh->depth - 1 : sh->depth;
}

/* Whether the call whose callbacks run came from a site at its function's
 * entry: known for a call through the list, else asked of the thread's
 * memo, else looked up. */
static inline bool at_entry(void)
{
	if (mcr_call_at_entry >= 0)
		return mcr_call_at_entry > 0;
	if (mcr_entry_args.after && mcr_entry_args.after == mcr_entry_memo.after &&
	    __atomic_load_n(&mcr_images_gen, __ATOMIC_ACQUIRE) == mcr_entry_memo.gen) {
		mcr_call_at_entry = mcr_entry_memo.at;
		return mcr_entry_memo.at;
	}
	return mcr_at_entry_lookup();
}

/* The call of SH's frame K ended at T (RR: its result registers, or NULL
 * when it was left): each user told. */
static inline __attribute__((always_inline)) void
frame_done(const struct shadow *sh, unsigned k, uint64_t t,
		       const struct mcr_retregs *rr)
{
	const struct frame *f = &sh->f[k];

	f->done(f->ip, f->arg, f->gen, f->t0, t, k, rr);
	for (unsigned i = 0; i < f->more && i < FRAME_USERS - 1; i++) {
		const struct frame_user *u = &sh->also[k][i];

		u->done(f->ip, u->arg, u->gen, u->t0, t, k, rr);
	}
}

/*
 * Frames a longjmp left, found at the next hooked call on the thread
 * (KEY: its stack pointer at the return, SLOT its return address's
 * place): when the newest frame is not above it in the stack, the newest
 * frame of a call that began at this one's place, if our trampoline is
 * not in its slot (this call's own return address replaced it: that call
 * is over, where a tail call would have left the trampoline there), and
 * every newer one, which it was inside or which began deeper in the
 * stack (past those the search does not go).  They end as left, as at
 * the return of an older call (mcr_return_hook()), but now: a loop that
 * recovers by longjmp (Lua's errors, an interpreter's) piled them up
 * until every call was drawn inside them, and past SHADOW_DEPTH none was
 * timed.  A frame is never dropped only for lying deeper in the stack
 * than the new call: a coroutine's live frames do, on a stack of its own
 * (ucontext's, an array in a caller's frame or a mapping below a
 * thread's), as do a handler's on a signal's alternate stack; nor on
 * that stack.  (Coroutines are not told apart at a return.)
 */
static inline bool left_behind(const struct frame *f, uintptr_t key, const uintptr_t *slot)
{
	return f->key < key || (f->key == key && *slot != (uintptr_t)mcr_return_tramp);
}

static __attribute__((noinline)) void drop_left(struct shadow *sh, uintptr_t key,
						const uintptr_t *slot, uint64_t t)
{
	unsigned k = sh->depth;
	stack_t ss;

	while (k && sh->f[k - 1].key < key)
		k--;
	if (!k || sh->f[k - 1].key != key || *slot == (uintptr_t)mcr_return_tramp)
		return;
	k--;
	/* (A signal handler on an alternate stack: asked here, as this is
	 * rare.) */
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
		return;
	for (unsigned j = sh->depth; j-- > k;)
		frame_done(sh, j, t, NULL);
	__atomic_store_n(&sh->depth, k, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Hook the return whose address is at SLOT (KEY: the stack pointer
 * after it); SURE: SLOT is the function's return slot whatever its site
 * (a framed site's), else only if the site is at the entry.  (Inlined:
 * it is most of a timed call's entry.) */
static inline __attribute__((always_inline)) int
hook_slot(uintptr_t *slot, uintptr_t sp, uintptr_t ip, uintptr_t parent, mcr_ret_fn done,
	  void *arg, unsigned gen, uint64_t t0, bool sure)
{
	struct shadow *sh = get_shadow();
	unsigned d;

	if (!sh || !slot)
		return -1;
	if (sh->depth && __builtin_expect(left_behind(&sh->f[sh->depth - 1], sp, slot), 0))
		drop_left(sh, sp, slot, t0);
	/* Hooked already, by another user at the same call (its callbacks
	 * run one after another): one more on the same frame, at the same
	 * depth, where a second frame would nest the call in itself.  Else
	 * a tail call from a hooked function, as its parent says, takes a
	 * frame of its own, whose return goes through the trampoline again
	 * to the frame of the call it replaced. */
	if (*slot == (uintptr_t)mcr_return_tramp) {
		struct frame *f = joinable(sh, ip, parent, done, gen);

		if (f && f->slot == slot && f->key == sp) {
			if (f->more == FRAME_USERS - 1)
				return -1;
			sh->also[sh->depth - 1][f->more] = (struct frame_user){ done, arg, gen, t0 };
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			f->more++;
			return (int)(sh->depth - 1);
		}
		if (parent != (uintptr_t)mcr_return_tramp)
			return -1;	/* (hooked, but by no frame of ours that fits) */
	}
	if (sh->depth == SHADOW_DEPTH)
		return -1;
#if !MCR_ONE_STORE
	/* x86_64: a site after a prologue (-pg without -mfentry) has the
	 * saved frame pointer where an entry's caller's return address would
	 * be, the same value the trampoline read as the parent: hooking that
	 * slot corrupted the function.  Only sites the symbols put at an
	 * entry are hooked, and framed ones by the slot the frame pointer
	 * says (mcr_call_framed).  (aarch64 and riscv64 tell the two by the
	 * code before the site, in mcr_return_slot().) */
	if (!sure && !at_entry())
		return -1;
#else
	(void)sure;
#endif
	d = sh->depth;
	struct frame *f = &sh->f[d];

	*f = (struct frame){ sp, slot, *slot, ip, done, arg, gen, 0, t0 };
	/* The entry first: a signal arriving between the two finds it. */
	__atomic_store_n(&sh->depth, d + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	*slot = (uintptr_t)mcr_return_tramp;
	return (int)d;
}

int mcr_hook_return(struct mcloc_regs *regs, uintptr_t ip, uintptr_t parent, mcr_ret_fn done,
		    void *arg, unsigned gen, uint64_t t0)
{
	uintptr_t sp = 0, *slot = mcr_call_framed;

	if (slot)
		return hook_slot(slot, (uintptr_t)(slot + 1), ip, parent, done, arg, gen, t0, true);
	/* (Hooked by another user, the slot holds the trampoline.) */
	if (regs && joinable(myshadow, ip, parent, done, gen))
		slot = mcr_return_slot(regs, ip, (uintptr_t)mcr_return_tramp, &sp);
	if (regs && !slot)
		slot = mcr_return_slot(regs, ip, parent, &sp);
	return hook_slot(slot, sp, ip, parent, done, arg, gen, t0, false);
}

int mcr_hook_return_args(uintptr_t ip, uintptr_t parent, mcr_ret_fn done, void *arg,
			 unsigned gen, uint64_t t0)
{
#ifdef MCR_ARGS_RETURN_SLOT
	const struct mcr_entry_args *e = &mcr_entry_args;
	uintptr_t *slot;

	if (mcr_call_framed)
		return hook_slot(mcr_call_framed, (uintptr_t)(mcr_call_framed + 1), ip, parent,
				 done, arg, gen, t0, true);
	if (!e->args || e->parent != parent)
		return -1;
	/* The direct trampoline says where the parent lies; the args
	 * trampoline's frame has it at one of a few places.  (At an mcount
	 * site after a prologue that word is no return address: hook_slot()
	 * refuses the site, as the symbols do not put it at an entry, unless
	 * it is framed, above.) */
	slot = e->slot;
	if (!slot && joinable(myshadow, ip, parent, done, gen))
		slot = mcr_args_return_slot(e->args, e->after, (uintptr_t)mcr_return_tramp);
	if (!slot)
		slot = mcr_args_return_slot(e->args, e->after, e->parent);
	if (!slot)
		return -1;
	return hook_slot(slot, (uintptr_t)(slot + 1), ip, parent, done, arg, gen, t0, false);
#else
	(void)ip, (void)parent, (void)done, (void)arg, (void)gen, (void)t0;
	return -1;
#endif
}

bool mcr_call_from_entry(uintptr_t ip)
{
#if MCR_ONE_STORE
	return mcr_site_at_entry(ip, 0);
#else
	(void)ip;
	return at_entry();
#endif
}

__attribute__((used)) uintptr_t mcr_return_hook(uintptr_t sp, const struct mcr_retregs *rr)
{
	struct shadow *sh = myshadow;
	uint64_t t = mcr_stamp();

	/* The returning call's entry is the newest that returns to SP;
	 * newer ones were left by a longjmp past them. */
	for (unsigned k = sh ? sh->depth : 0; k-- > 0;) {
		struct frame *f = &sh->f[k];

		if (f->key != sp)
			continue;
		uintptr_t ret = f->ret;
		/* (The callbacks write events as a callback at an entry
		 * does: a signal handler's traced calls meanwhile are not
		 * traced, or they would write into the thread's ring under
		 * an event half written.) */
		int in_tracer = mcr_in_tracer;

		mcr_in_tracer = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		for (unsigned j = sh->depth; j-- > k + 1;)
			frame_done(sh, j, t, NULL);
		frame_done(sh, k, t, rr);
		/* (The frames gone before tracing is back on: a signal
		 * between the two would have its handler's calls drawn
		 * inside the call that just ended.) */
		__atomic_store_n(&sh->depth, k, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		mcr_in_tracer = in_tracer;
		return ret;
	}
	/* Nowhere to return to: the shadow stack no longer matches the
	 * real one.  Say so rather than jump somewhere. */
	static const char msg[] = "libmcloc: a timed function returned with no record of its "
				  "caller; aborting\n";
	if (write(2, msg, sizeof(msg) - 1) < 0)
		abort();
	abort();
}

/* ---- exceptions ------------------------------------------------------------- */

/* Give every hooked call live on the thread's stack its return address
 * back, and tell it it was left: an unwinder is about to walk them.
 * (An entry a longjmp left behind has its slot below the stack pointer,
 * in memory that is no longer its: not touched.) */
static void unhook_thread(void)
{
	struct shadow *sh = myshadow;
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	uint64_t t = mcr_stamp();

	if (!sh)
		return;
	/* (As in mcr_return_hook(): a signal handler's traced calls while
	 * the callbacks write are not traced.) */
	int in_tracer = mcr_in_tracer;

	mcr_in_tracer = 1;
	for (unsigned k = sh->depth; k-- > 0;) {
		struct frame *f = &sh->f[k];

		if ((uintptr_t)f->slot > sp && *f->slot == (uintptr_t)mcr_return_tramp)
			*f->slot = f->ret;
		frame_done(sh, k, t, NULL);
	}
	__atomic_store_n(&sh->depth, 0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	mcr_in_tracer = in_tracer;
}

/* The real entry point NAME of the unwinder (libgcc_s), once. */
static void *unwinder(void **cache, const char *name)
{
	void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);

	if (!f) {
		f = dlvsym(RTLD_NEXT, name, "GCC_3.0");
		if (!f)
			f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(cache, f, __ATOMIC_RELEASE);
	}
	return f;
}

__attribute__((visibility("default"))) _Unwind_Reason_Code
_Unwind_RaiseException(struct _Unwind_Exception *e)
{
	static void *real;
	_Unwind_Reason_Code (*fn)(struct _Unwind_Exception *) =
		(_Unwind_Reason_Code (*)(struct _Unwind_Exception *))unwinder(&real,
									 "_Unwind_RaiseException");

	unhook_thread();
	return fn ? fn(e) : _URC_FATAL_PHASE1_ERROR;
}

__attribute__((visibility("default"))) _Unwind_Reason_Code
_Unwind_ForcedUnwind(struct _Unwind_Exception *e, _Unwind_Stop_Fn stop, void *arg)
{
	static void *real;
	_Unwind_Reason_Code (*fn)(struct _Unwind_Exception *, _Unwind_Stop_Fn, void *) =
		(_Unwind_Reason_Code (*)(struct _Unwind_Exception *, _Unwind_Stop_Fn, void *))
			unwinder(&real, "_Unwind_ForcedUnwind");

	unhook_thread();
	return fn ? fn(e, stop, arg) : _URC_FATAL_PHASE1_ERROR;
}
