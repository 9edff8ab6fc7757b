/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * timing.c's interface, for the tracers that time calls (tracer.c's
 * profile, trace.c's function_graph): apart from mcr.h, because its inline
 * parts reach into timing.c, and timing.c into the images.
 */
#ifndef MCLOC_TIMING_H
#define MCLOC_TIMING_H

#include "mcr.h"

/* A timestamp: the CPU's constant-rate counter, or (where the CPU's is
 * not constant) CLOCK_MONOTONIC nanoseconds, as mcr_stamp_is_tick() says. */
bool mcr_stamp_is_tick(void);
uint64_t mcr_stamp_slow(void);
extern int mcr_tick_clock;	/* 0: not decided yet; 1: mcr_ticks(); -1: ns */
/* (Inline: a traced call takes two, and the counter costs less than a
 * call to read it on the fast path.) */
static inline uint64_t mcr_stamp(void)
{
	if (__builtin_expect(__atomic_load_n(&mcr_tick_clock, __ATOMIC_RELAXED) > 0, 1))
		return mcr_ticks();
	return mcr_stamp_slow();
}

/* What runs when a hooked call at IP returns (RR: its result registers,
 * at stamp T1), or when it was found to have been left by a longjmp or an
 * exception (RR NULL; T1 is when that was found).  DEPTH: its place on the
 * thread's stack of hooked calls, 0 the outermost. */
typedef void (*mcr_ret_fn)(uintptr_t ip, void *arg, unsigned gen, uint64_t t0, uint64_t t1,
			   unsigned depth, const struct mcr_retregs *rr);
/* Hook the return of the call at IP, entered at T0, from a callback's
 * REGS: DONE(ip, ARG, GEN, t0, t1, depth, returned) runs when it returns.  Its
 * depth, or -1 when it cannot be hooked (no REGS, a site after the
 * prologue, 128 hooked calls deep). */
int mcr_hook_return(struct mcloc_regs *regs, uintptr_t ip, uintptr_t parent, mcr_ret_fn done,
		    void *arg, unsigned gen, uint64_t t0);
/* The same from a callback without registers, where the call came
 * through an argument frame that says where its return address is
 * (MCR_ARGS_RETURN_SLOT: x86_64); -1 elsewhere. */
int mcr_hook_return_args(uintptr_t ip, uintptr_t parent, mcr_ret_fn done, void *arg,
			 unsigned gen, uint64_t t0);
/* Whether the call whose callbacks run (at site IP) came from a site at
 * its function's entry, where its stack arguments are where the calling
 * convention says. */
bool mcr_call_from_entry(uintptr_t ip);
/* The depth a hook by DONE of GEN of the call at IP returning to PARENT
 * takes: how many hooked calls the thread is inside, less the call itself
 * where another user hooked it already. */
unsigned mcr_hook_depth(uintptr_t ip, uintptr_t parent, mcr_ret_fn done, unsigned gen);
/* The ops flags a tracer that hooks returns needs: the register-saving
 * trampoline, except where the argument frame says where the return
 * address is (x86_64), which spares saving every register and lets the
 * site call the tracer's one ops directly. */
#ifdef MCR_ARGS_RETURN_SLOT
#define MCR_HOOK_OPS_FLAGS 0u
#else
#define MCR_HOOK_OPS_FLAGS ((unsigned)MCLOC_OPS_SAVE_REGS)
#endif
/* Hook the return of a callback's call, by REGS or else by its argument
 * frame (the two above). */
static inline int mcr_hook_call(struct mcloc_regs *regs, uintptr_t ip, uintptr_t parent,
				mcr_ret_fn done, void *arg, unsigned gen, uint64_t t0)
{
	return regs ? mcr_hook_return(regs, ip, parent, done, arg, gen, t0)
		    : mcr_hook_return_args(ip, parent, done, arg, gen, t0);
}

#endif
