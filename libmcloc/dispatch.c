// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's dispatch: what a trampoline's call runs.  The dispatcher
 * finds the site's record, and walks the published set of ops inside an
 * RCU read-side critical section, calling each one that covers the site
 * (ftrace's list function).
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"
#include "patch.h"

#include "rcu.h"
#include "dispatch.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- dispatch ------------------------------------------------------------------ */

/* Record R of IM is a framed site (mcr_site_framed()): its callbacks get
 * the real parent, and a tracer that times the call hooks the slot it
 * lies in. */
static inline bool framed(const struct image *im, long r)
{
	return im->framed && (im->framed[r / 64] >> (r % 64) & 1);
}

/* The return slot of a framed site's function, called with the
 * registers RG, else from the thread's argument frame for the call that
 * ends at AFTER: NULL when it cannot be told.  The parent the callbacks
 * are given, and mcr_entry_args's, is the word there. */
static uintptr_t *framed_slot(const struct mcloc_regs *rg, uintptr_t after, uintptr_t *parent)
{
	const struct mcr_entry_args *e = &mcr_entry_args;
	const uintptr_t *t = NULL;
	uintptr_t *slot;

#ifdef MCR_ARGS_RETURN_SLOT
	if (!rg && e->args && e->after == after)
		t = e->slot ? e->slot : mcr_args_return_slot(e->args, after, e->parent);
#endif
	if (!(slot = mcr_framed_slot(rg, t)))
		return NULL;
	*parent = *slot;
	if (e->args && e->after == after)
		mcr_entry_args.parent = *parent;
	return slot;
}

/* The set's callbacks for the site that ends at AFTER (unless CALLBACKS
 * is false: a callback's own traced call), in the thread's mcr_in_tracer
 * section; returns the site's direct trampoline, or 0. */
static uintptr_t walk(uintptr_t after, uintptr_t parent, struct mcloc_image *img, void *regs,
		      bool callbacks)
{
	const struct image *im = NULL;
	uintptr_t direct = 0;
	long r;

	mcr_read_lock();
	/* The image of the descriptor the trampoline passed, else by
	 * address: the library's own trampolines serve images without any.
	 * (An image's record is freed a grace period after it is unloaded.) */
	if (img)
		im = __atomic_load_n((struct image **)&img->lib, __ATOMIC_ACQUIRE);
	r = im && im->nrecs ? mcr_rec_before(im, after) : -1;
	if (r < 0 && (im = mcr_image_of(after - 1)))
		r = mcr_rec_before(im, after);
	if (r >= 0) {
		uintptr_t ip = im->base + im->recs[r].off;
		size_t g = im->first + (size_t)r;
		struct ops_set *set = mcr_rcu_deref(mcr_cur_set);

		if (callbacks) {
			struct mcloc_regs *rg = regs;
			uintptr_t pc = rg ? rg->pc : 0;

			mcr_call_at_entry = im->at_entry && (im->at_entry[r / 64] >> (r % 64) & 1);
			mcr_call_framed = !mcr_call_at_entry && framed(im, r) ?
					  framed_slot(rg, after, &parent) : NULL;
			__atomic_fetch_add(&mcr_list_calls, 1, __ATOMIC_RELAXED);
			mcr_entry_regs = rg;
			for (size_t i = 0; set && i < set->n; i++) {
				const struct set_ent *e = &set->v[i];

				if (mcr_bit_of(e->covers, g))
					e->func(ip, parent, e->ops, e->regs ? regs : NULL);
			}
			mcr_entry_regs = NULL;
			mcr_call_framed = NULL;
			/* A function is moved only from its entry: after the
			 * prologue (-pg) its frame is built, and the target
			 * would return with it still on the stack. */
			if (rg && rg->pc != pc) {
				const struct fsym *fn = mcr_func_at(im, ip);

				if (!mcr_site_at_entry(ip, fn ? fn->lo : 0))
					rg->pc = pc;
			}
		}
		/* After the callbacks, as the kernel's ftrace_regs_caller
		 * enters a direct trampoline that shares a site. */
		if (__atomic_load_n(&im->recs[r].state, __ATOMIC_RELAXED) & REC_HAS_DIRECT)
			direct = mcr_direct_of(mcr_rcu_deref(mcr_directs), g);
	}
	mcr_read_unlock();
	return direct;
}

/* A callback that calls a traced function gets no callbacks for it (each
 * thread skips them while inside one); a direct trampoline is entered
 * all the same, since the function's own behaviour may rest on it. */
static uintptr_t dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
			  void *regs)
{
	if (mcr_in_tracer)
		return walk(after, parent, img, regs, false);
	mcr_in_tracer = 1;
	uintptr_t direct = walk(after, parent, img, regs, true);
	mcr_in_tracer = 0;
	return direct;
}

struct mcloc_ops mcr_list_ops;

#if MCR_ONE_STORE
/*
 * A site with an ops slot, through the args trampoline: the slot names the
 * one ops that covers it, so the call needs no lookup, no list and no
 * per-function trampoline (the kernel's DYNAMIC_FTRACE_WITH_CALL_OPS).
 * A site that stopped calling keeps its old slot (plan.c), whose ops may
 * be gone, so the slot is trusted only if, inside the read-side section,
 * the site still calls the args trampoline.  Otherwise the site changed
 * under the call, and the set decides, as for any call in flight.
 *
 * The order of the two loads is what makes that check worth anything.
 * The patcher (patch.c) stores a batch's slots, then a full fence, then
 * its sites.  Having executed the new call orders nothing: an instruction
 * fetch is not a load, and aarch64 and riscv64 let a later load of the
 * slot be satisfied before an earlier plain load of the site word, and
 * the compiler may swap them too.  So the site word is loaded with
 * acquire: if it is the call a batch wrote, it synchronises with that
 * batch's fence, and the slot load after it reads that batch's slot or a
 * later one.  If the call is older (a batch changed only the slot), the
 * slot is one of the live ops that held the site since; each was stored
 * with release and the slot is loaded with acquire, for the ops's fields.
 * The kernel's trampoline loads its literal without looking at the site:
 * arm64 changes text under stop_machine(), with every other CPU held,
 * and points a disabled site's literal at a harmless ops.  Here other
 * threads run on.  The patcher's membarrier between the slots and the
 * sites orders every thread's loads as stop_machine() would, but only
 * where the kernel has SYNC_CORE; without it the fence alone is left,
 * and nothing ever orders what the compiler does with two plain loads.
 */
static bool slot_call(const struct image *im, uintptr_t after, uintptr_t parent)
{
	uintptr_t site = after - 4;
	uint8_t call[4];
	uint32_t have = __atomic_load_n((const uint32_t *)site, __ATOMIC_ACQUIRE);

	if (mcr_encode_tramp(site, 4, im->desc->tramp_args, call) || memcmp(&have, call, 4))
		return false;
	struct mcloc_ops *ops = __atomic_load_n((struct mcloc_ops **)(site - MCR_SLOT_BACK),
						__ATOMIC_ACQUIRE);
	if (!ops || ops == &mcr_list_ops)
		return false;
	ops->func(site, parent, ops, NULL);
	return true;
}
#endif

#if !MCR_ONE_STORE
/*
 * A site alone in one ops's hands, through its stub.  The stub says which
 * slot, but a thread may have been stopped between the site and here for
 * any time, long enough for the slot's ops to go and another to take it.
 * So the slot is trusted only if, inside the read-side section, the site
 * still calls this stub: then its ops is the one registered now, and it
 * cannot go before the section ends.  Otherwise the site changed under
 * the call, and the set decides, as for any call in flight.
 */
__attribute__((used)) void mcr_direct_hook(uintptr_t after, uintptr_t parent, uintptr_t stub,
					  void *args, uintptr_t *slot)
{
	size_t i = (stub & (MCR_DIRECT_PAGE - 1)) / MCR_DIRECT_STUB;
	unsigned len = mcr_direct_len[i / MCR_DIRECT_SLOTS];

	if (mcr_in_tracer)
		return;
	mcr_in_tracer = 1;
	mcr_entry_args = (struct mcr_entry_args){ args, after, parent, slot };
	mcr_read_lock();
	if (mcr_call_dest(after, len) == stub) {
		const struct direct *d = &mcr_direct[i % MCR_DIRECT_SLOTS];
		/* Read once: a thread can reach here after its site stopped
		 * calling the stub (preempted between the call and the read
		 * section above; a parked site keeps the call's displacement,
		 * which is all mcr_call_dest() reads), and the slot may have
		 * been released meanwhile, emptied. */
		mcloc_func_t func = __atomic_load_n(&d->func, __ATOMIC_RELAXED);
		struct mcloc_ops *ops = __atomic_load_n(&d->ops, __ATOMIC_RELAXED);

		if (func) {
			mcr_call_at_entry = -1;
			/* (Only in a process with framed sites is the record
			 * looked up for it.) */
			if (__atomic_load_n(&mcr_framed_images, __ATOMIC_RELAXED)) {
				const struct image *im = mcr_image_of(after - 1);
				long r = im ? mcr_rec_before(im, after) : -1;

				if (r >= 0 && framed(im, r)) {
					mcr_call_at_entry = 0;
					mcr_call_framed = framed_slot(NULL, after, &parent);
				}
			}
			func(after - len, parent, ops, NULL);
			mcr_call_framed = NULL;
		}
	} else {
		walk(after, parent, NULL, NULL, true);
	}
	mcr_read_unlock();
	mcr_entry_args.args = NULL;
	mcr_in_tracer = 0;
}
#endif

uintptr_t mcr_args_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
			     void *args)
{
#if MCR_ONE_STORE
	(void)args;
	uintptr_t direct = 0;

	if (mcr_in_tracer)
		return walk(after, parent, img, NULL, false);
	mcr_in_tracer = 1;
	mcr_read_lock();
	const struct image *im = __atomic_load_n((struct image **)&img->lib, __ATOMIC_ACQUIRE);
	if (!im || !im->slots || !slot_call(im, after, parent))
		direct = walk(after, parent, img, NULL, true);
	mcr_read_unlock();
	mcr_in_tracer = 0;
	return direct;
#else
	if (mcr_in_tracer)
		return walk(after, parent, img, NULL, false);
	/* (For a callback that times the call: mcr_hook_return_args().) */
	mcr_entry_args = (struct mcr_entry_args){ args, after, parent, NULL };
	uintptr_t direct = dispatch(after, parent, img, NULL);
	mcr_entry_args.args = NULL;
	return direct;
#endif
}

uintptr_t mcr_regs_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img,
			     void *regs)
{
	return dispatch(after, parent, img, regs);
}

