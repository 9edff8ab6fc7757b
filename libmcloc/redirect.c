// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * mcloc_redirect(): live patching the way the kernel's livepatch rides on
 * ftrace.  Each redirect is an MCLOC_OPS_SAVE_REGS ops whose filter is
 * FROM's site alone and whose callback sets regs->pc to TO: the regs
 * trampoline then resumes in TO with FROM's arguments intact, and TO
 * returns straight to FROM's caller.  The redirects are listed, under a
 * lock, only so that mcloc_unredirect() can find FROM's ops; once
 * mcloc_unregister_ops() returns no thread is in the callback, so the ops
 * is freed at once.
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct redirect {
	struct mcloc_ops ops;
	void *from;
	struct redirect *next;
};

static pthread_mutex_t rlock = PTHREAD_MUTEX_INITIALIZER;
static struct redirect *redirects;

static void redirect_cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops,
			struct mcloc_regs *regs)
{
	(void)ip;
	(void)parent;
	if (regs)
		regs->pc = (uintptr_t)ops->private;
}

int mcloc_redirect(void *from, void *to)
{
	struct redirect *r;
	int ret;

	if (!from || !to)
		return -EINVAL;
	pthread_mutex_lock(&rlock);
	for (r = redirects; r; r = r->next)
		if (r->from == from) {
			ret = -EEXIST;
			goto out;
		}
	r = calloc(1, sizeof(*r));
	if (!r) {
		ret = -ENOMEM;
		goto out;
	}
	uintptr_t site = mcr_site_of_func((uintptr_t)from);
	if (site && !mcr_site_at_entry(site, (uintptr_t)from)) {
		/* (-pg: FROM's frame is built before its site runs.) */
		free(r);
		ret = -EOPNOTSUPP;
		goto out;
	}
	r->from = from;
	r->ops = (struct mcloc_ops){ .func = redirect_cb, .flags = MCLOC_OPS_SAVE_REGS,
				     .private = to };
	ret = mcloc_set_filter_ip(&r->ops, (uintptr_t)from, 0);
	if (!ret)
		ret = mcloc_register_ops(&r->ops);
	if (ret) {
		mcloc_ops_free(&r->ops);
		free(r);
		goto out;
	}
	r->next = redirects;
	redirects = r;
out:
	pthread_mutex_unlock(&rlock);
	return ret;
}

int mcloc_unredirect(void *from)
{
	struct redirect **p, *r;
	int ret = -ENOENT;

	pthread_mutex_lock(&rlock);
	for (p = &redirects; (r = *p); p = &r->next)
		if (r->from == from) {
			ret = mcloc_unregister_ops(&r->ops);
			*p = r->next;
			mcloc_ops_free(&r->ops);
			free(r);
			break;
		}
	pthread_mutex_unlock(&rlock);
	return ret;
}

/* fork() (fork.c): the child keeps the redirects, and their list whole. */
void mcr_redirect_fork(enum mcr_fork stage)
{
	mcr_fork_lock(&rlock, stage);
}
