// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's direct calls: the direct slots an ops's lone sites call
 * (x86_64), and the sites of mcloc_register_direct(), which call a
 * trampoline of the program's own.
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"
#include "rcu.h"
#include "plan.h"
#include "direct.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* A direct slot for OPS (+1; 0 when all are taken: its lone sites then
 * go through the list).  Set before any site can call the slot's stubs. */
int mcr_direct_take(struct mcloc_ops *ops)
{
	if ((ops->flags & MCLOC_OPS_SAVE_REGS) || MCR_ONE_STORE)
		return 0;
	for (int k = 0; k < MCR_DIRECT_SLOTS; k++)
		if (!mcr_direct[k].func) {
			mcr_direct[k] = (struct direct){ ops->func, ops };
			return k + 1;
		}
	return 0;
}

static void ignore(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops, struct mcloc_regs *regs)
{
	(void)ip, (void)parent, (void)ops, (void)regs;
}

/*
 * After OPS left the set (a grace period later): its slot is free again,
 * if SITES_OK says no site calls its stubs any more.  Otherwise a site
 * that could not be patched back still does, and the slot stays taken,
 * calling nothing: the caller may free OPS.
 */
void mcr_direct_release(struct mcloc_ops *ops, bool sites_ok)
{
	struct mcloc_ops_priv *p = ops->priv;

	if (!p->slot)
		return;
	mcr_direct[p->slot - 1] = sites_ok ? (struct direct){ 0 } : (struct direct){ ignore, NULL };
	p->slot = 0;
}

/* A copy of the published direct set with G's entry added (TRAMP) or
 * removed (0), published; the old one is freed a grace period later. */
static int publish_directs(size_t g, uintptr_t tramp)
{
	struct direct_set *old = mcr_directs;
	size_t n = old ? old->n : 0, k = 0;
	struct direct_set *set = malloc(sizeof(*set) + (n + 1) * sizeof(set->v[0]));

	if (!set)
		return -ENOMEM;
	bool placed = !tramp;

	for (size_t i = 0; i < n; i++) {
		if (!placed && old->v[i].g > g) {
			set->v[k++] = (struct direct_ent){ g, tramp };
			placed = true;
		}
		if (old->v[i].g != g)
			set->v[k++] = old->v[i];
	}
	if (!placed)
		set->v[k++] = (struct direct_ent){ g, tramp };
	set->n = k;
	mcr_rcu_assign(mcr_directs, set);
	mcr_synchronize_rcu();
	free(old);
	return 0;
}

/*
 * The kernel's register_ftrace_direct(): the site at IP (or of the
 * function at IP) calls TRAMP itself when nothing else covers it and TRAMP
 * is within the site's reach; otherwise the image's trampoline enters
 * TRAMP after the other ops's callbacks, with the registers as the site
 * left them.  Either way no code of ours runs between the site and TRAMP
 * in the first case, and TRAMP sees the same state in both.
 */
int mcloc_register_direct(uintptr_t ip, void *tramp)
{
	int ret = mcloc_init();
	struct image *im;

	if (ret)
		return ret;
	if (!tramp)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	long r = mcr_site_rec(ip, &im);
	if (r < 0) {
		ret = -ENOENT;
		goto out;
	}
	uint32_t *st = &im->recs[r].state;
	size_t g = im->first + (size_t)r;
	if (*st & REC_HAS_DIRECT) {
		ret = -EEXIST;
		goto out;
	}
	if (im->version < 3 || (*st & REC_REFUSED)) {
		ret = im->version < 3 ? -EOPNOTSUPP : -EILSEQ;
		goto out;
	}
	/* In the set before any site can need it. */
	ret = publish_directs(g, (uintptr_t)tramp);
	if (ret)
		goto out;
	*st += 1;
	*st |= REC_HAS_DIRECT;
	ret = mcr_update_sites();
	if (ret) {
		*st -= 1;
		*st &= ~REC_HAS_DIRECT;
		mcr_update_sites();
		publish_directs(g, 0);
	}
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

/* When it returns, no call that starts after it enters TRAMP; one already
 * past the site may still be on its way in (keep TRAMP's code mapped, as
 * the kernel frees its trampolines only after an RCU-tasks grace period). */
int mcloc_unregister_direct(uintptr_t ip, void *tramp)
{
	struct image *im;
	int ret = 0;

	pthread_mutex_lock(&mcr_lock);
	long r = mcr_site_rec(ip, &im);
	size_t g = r >= 0 ? im->first + (size_t)r : 0;
	if (r < 0 || !(im->recs[r].state & REC_HAS_DIRECT) ||
	    mcr_direct_of(mcr_directs, g) != (uintptr_t)tramp) {
		ret = -ENOENT;
		goto out;
	}
	im->recs[r].state -= 1;
	im->recs[r].state &= ~REC_HAS_DIRECT;
	/* (Its entry stays while the site still calls TRAMP.) */
	ret = mcr_update_sites();
	if (ret) {
		im->recs[r].state += 1;
		im->recs[r].state |= REC_HAS_DIRECT;
		goto out;
	}
	ret = publish_directs(g, 0);
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}
