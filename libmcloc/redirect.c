// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Redirects, the seed's "live kernel patching": one SAVE_REGS ops per
 * redirected function, covering its site only, whose callback sets the
 * resume address to the replacement.  The replacement runs with the
 * original arguments and returns to the original caller.
 */
#include "mcloc.h"
#include "mcloc-abi.h"

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
