// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's ops: registering them, their filters, and the set the
 * dispatchers walk.
 *
 * The registered set is an array published with RCU (rcu.h, which needs
 * no per-thread registration call: any thread may run a traced function).
 * The trampolines call a dispatcher that walks the set inside a read-side
 * critical section; unregister removes the ops, waits for a grace period,
 * and only then returns, so the caller may free the ops.  Each ops carries
 * a bitmap over the records it covers; what its sites become is plan.c's.
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"
#include "rcu.h"
#include "plan.h"
#include "direct.h"
#include "ops.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static size_t words(void)
{
	return mcr_nrecords / 64 + 1;
}

/* OPS as its caller compiled it: see struct mcloc_ops's sz. */
static int ops_valid(const struct mcloc_ops *ops)
{
	if (!ops)
		return -EINVAL;
	for (size_t i = sizeof(*ops); i < ops->sz; i++)
		if (((const unsigned char *)ops)[i])
			return -E2BIG;
	return 0;
}

static int ensure_priv(struct mcloc_ops *ops)
{
	struct mcloc_ops_priv *p = ops->priv;
	int v = ops_valid(ops);

	if (v)
		return v;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
		ops->priv = p;
	}
	/* Bitmaps grow with the records (an image loaded since). */
	size_t w = words();
	if (!p->filter || p->nfilter < w) {
		uint64_t *f = realloc(p->filter, w * 8), *t = realloc(p->notrace, w * 8);

		if (f)
			p->filter = f;
		if (t)
			p->notrace = t;
		if (!f || !t)
			return -ENOMEM;
		memset(p->filter + p->nfilter, 0, (w - p->nfilter) * 8);
		memset(p->notrace + p->nfilter, 0, (w - p->nfilter) * 8);
		p->nfilter = w;
	}
	return 0;
}

/* With the lock held: OPS's filter bitmaps cover every record there is. */
static int prepare(struct mcloc_ops *ops)
{
	return ensure_priv(ops);
}

/* A copy of an ops's filters, to put back when a change cannot be
 * applied to its sites. */
struct filters {
	uint64_t *filter, *notrace;
};

static int save_filters(struct mcloc_ops *ops, struct filters *f)
{
	size_t bytes = ops->priv->nfilter * 8;

	f->filter = malloc(bytes + 8);
	f->notrace = malloc(bytes + 8);
	if (!f->filter || !f->notrace) {
		free(f->filter);
		free(f->notrace);
		return -ENOMEM;
	}
	memcpy(f->filter, ops->priv->filter, bytes);
	memcpy(f->notrace, ops->priv->notrace, bytes);
	return 0;
}

static void restore_filters(struct mcloc_ops *ops, struct filters *f)
{
	memcpy(ops->priv->filter, f->filter, ops->priv->nfilter * 8);
	memcpy(ops->priv->notrace, f->notrace, ops->priv->nfilter * 8);
	free(f->filter);
	free(f->notrace);
}

/* What OPS covers, word W: the filter (all when empty) minus notrace,
 * within the NCOVERED records that existed when it registered. */
static uint64_t covered_word(const struct mcloc_ops_priv *p, bool all, size_t w, size_t ncovered)
{
	uint64_t v = (all ? ~0ull : p->filter[w]) & ~p->notrace[w];

	if ((w + 1) * 64 > ncovered)
		v &= w * 64 >= ncovered ? 0 : (1ull << (ncovered - w * 64)) - 1;
	return v;
}

static bool filter_empty(const struct mcloc_ops_priv *p)
{
	for (size_t w = 0; w < p->nfilter; w++)
		if (p->filter[w])
			return false;
	return true;
}


/* Make OPS's bitmap word W hold TO: the records it gains and loses
 * change their counts, then the word the dispatcher reads changes. */
static void move_covers_word(struct mcloc_ops *ops, size_t w, uint64_t to)
{
	uint64_t *word = &ops->priv->covers[w];

	for (uint64_t d = *word ^ to; d; d &= d - 1) {
		size_t g = w * 64 + (size_t)__builtin_ctzll(d);

		mcr_rec_add(g, mcr_count_unit(ops, to >> (g % 64) & 1 ? +1 : -1));
	}
	__atomic_store_n(word, to, __ATOMIC_RELAXED);
}

/*
 * With the lock held, after OPS's filters changed: nothing for an ops that
 * is not registered (registering reads them).  For a registered one, its
 * sites follow now, as ftrace's follow a write to set_ftrace_filter while
 * tracing: the records it gains and loses change counts, the bitmap the
 * dispatcher reads changes word by word (a site in flight may see either
 * side of the change, never a half), and only the sites whose state
 * changes are patched, in one batch.  If the batch is refused, everything
 * goes back to SAVED and the error is returned.  Frees SAVED.
 */
static int retarget(struct mcloc_ops *ops, struct filters *saved)
{
	struct mcloc_ops_priv *p = ops->priv;
	size_t nw = (p->ncovered + 63) / 64;
	int ret = 0;

	if (!p->registered) {
		free(saved->filter);
		free(saved->notrace);
		return 0;
	}
	bool all = filter_empty(p);
	uint64_t *before = malloc(nw * 8 + 8);
	if (!before) {
		restore_filters(ops, saved);
		return -ENOMEM;
	}
	memcpy(before, p->covers, nw * 8);
	for (size_t w = 0; w < nw; w++)
		move_covers_word(ops, w, covered_word(p, all, w, p->ncovered));
	ret = mcr_update_sites();
	if (ret) {
		/* Back to what was, sites included. */
		for (size_t w = 0; w < nw; w++)
			move_covers_word(ops, w, before[w]);
		mcr_update_sites();
		restore_filters(ops, saved);
	} else {
		free(saved->filter);
		free(saved->notrace);
	}
	free(before);
	return ret;
}

static int set_globs(struct mcloc_ops *ops, const char *globs, int reset, bool notrace)
{
	int ret, count = 0;

	if (!ops || !globs)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	ret = prepare(ops);
	if (ret)
		goto out;
	struct filters saved;
	ret = save_filters(ops, &saved);
	if (ret)
		goto out;
	uint64_t *bits = notrace ? ops->priv->notrace : ops->priv->filter;
	if (reset)
		memset(bits, 0, ops->priv->nfilter * 8);
	char *dup = strdup(globs), *save = NULL;
	if (!dup) {
		restore_filters(ops, &saved);
		ret = -ENOMEM;
		goto out;
	}
	for (char *pat = strtok_r(dup, ", \t\n", &save); pat; pat = strtok_r(NULL, ", \t\n", &save)) {
		bool neg = pat[0] == '!', matched = false;

		for (size_t i = 0; i < mcr_nimages; i++)
			for (size_t r = 0; mcr_images[i] && r < mcr_images[i]->nrecs; r++) {
				const char *name = mcr_images[i]->names ? mcr_images[i]->names[r] : NULL;
				size_t g = mcr_images[i]->first + r;

				if (!name || fnmatch(pat + neg, name, 0))
					continue;
				matched = true;
				if (neg)
					bits[g / 64] &= ~(1ull << (g % 64));
				else
					bits[g / 64] |= 1ull << (g % 64);
			}
		/* As ftrace refuses a pattern that matches nothing: a filter
		 * left empty by it would mean every function. */
		if (!matched && !neg) {
			free(dup);
			restore_filters(ops, &saved);
			ret = -ENOENT;
			goto out;
		}
	}
	free(dup);
	ret = retarget(ops, &saved);
	if (ret)
		goto out;
	for (size_t w = 0; w < ops->priv->nfilter; w++)
		count += __builtin_popcountll(bits[w]);
	ret = count;
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

int mcloc_set_filter(struct mcloc_ops *ops, const char *globs, int reset)
{
	return set_globs(ops, globs, reset, false);
}

int mcloc_set_notrace(struct mcloc_ops *ops, const char *globs, int reset)
{
	return set_globs(ops, globs, reset, true);
}

int mcr_add_patterns(struct mcloc_ops *ops, const char *globs, bool notrace, uint64_t *matched)
{
	char *buf = strdup(globs), *save = NULL;
	int ok = 0;
	unsigned i = 0;

	if (!buf)
		return 0;
	for (char *p = strtok_r(buf, ", \t\n", &save); p; p = strtok_r(NULL, ", \t\n", &save), i++)
		if (set_globs(ops, p, 0, notrace) >= 0) {
			ok++;
			if (matched && i < 64)
				*matched |= 1ull << i;
		}
	free(buf);
	return ok;
}


int mcloc_set_filter_ip(struct mcloc_ops *ops, uintptr_t ip, int remove)
{
	int ret;

	if (!ops)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	struct filters saved = { 0 };
	ret = prepare(ops);
	if (!ret)
		ret = save_filters(ops, &saved);
	if (!ret) {
		struct image *im;
		long r = mcr_site_rec(ip, &im);

		ret = -ENOENT;
		if (r >= 0) {
			size_t g = im->first + (size_t)r;

			if (remove)
				ops->priv->filter[g / 64] &= ~(1ull << (g % 64));
			else
				ops->priv->filter[g / 64] |= 1ull << (g % 64);
			ret = 0;
		}
		ret = ret ? (restore_filters(ops, &saved), ret) : retarget(ops, &saved);
	}
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

/* free(P) after the next grace period (a set or bitmap a dispatcher may
 * still read); leaked rather than waited for when that cannot be queued. */
static void retire(void *p)
{
	if (p && mcr_defer(free, p))
		mcr_say(1, "a replaced set is leaked: no memory to retire it");
}

/* OPS's covers bitmap grown to every record there is, the records of the
 * images loaded since it last grew set where its filter (all when empty)
 * and not its notrace says, and their counts added: NULL when there are
 * none, or no memory.  (Every image loaded since, not only the one being
 * covered: two may register at once, and ncovered only grows.) */
static uint64_t *covers_grown(struct mcloc_ops *ops)
{
	struct mcloc_ops_priv *p = ops->priv;
	uint64_t *c;

	if (p->ncovered >= mcr_nrecords || ensure_priv(ops) || !(c = calloc(words(), 8)))
		return NULL;
	bool all = filter_empty(p);

	memcpy(c, p->covers, (p->ncovered + 63) / 64 * 8);
	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];

		for (size_t r = 0; im && im->first >= p->ncovered && r < im->nrecs; r++) {
			size_t g = im->first + r;

			if ((all || mcr_bit_of(p->filter, g)) && !mcr_bit_of(p->notrace, g)) {
				c[g / 64] |= 1ull << (g % 64);
				im->recs[r].state += mcr_count_unit(ops, +1);
			}
		}
	}
	return c;
}

/*
 * An image just loaded, with the lock held: as ftrace enables a new
 * module's functions for an ops whose filter is empty, every registered
 * ops covers the new records that its filter (everything, when empty)
 * and not its notrace name (a hook may have just extended them to the
 * image).  The bitmaps the dispatchers read cannot grow in place: each
 * ops gets a new one, published in a new set; the old ones are retired,
 * and the sites change in one batch, which waits for no reader: this
 * runs under the loader's lock.  On failure the image is simply not
 * covered, as before an ops registers again.
 */
void mcr_cover_new_image(void)
{
	const struct ops_set *old = mcr_cur_set;
	size_t n = old ? old->n : 0, grown = 0;
	struct ops_set *set = malloc(sizeof(*set) + (n + 1) * sizeof(set->v[0]));
	uint64_t **gone = calloc(n + 1, sizeof(*gone));

	if (!set || !gone || !n)
		goto out;
	set->n = n;
	for (size_t i = 0; i < n; i++) {
		struct mcloc_ops *ops = old->v[i].ops;
		uint64_t *c = covers_grown(ops);

		set->v[i] = old->v[i];
		if (!c)
			continue;
		gone[grown++] = ops->priv->covers;
		ops->priv->covers = c;
		set->v[i].covers = c;
		ops->priv->ncovered = mcr_nrecords;
	}
	if (!grown)
		goto out;
	mcr_rcu_assign(mcr_cur_set, set);
	set = NULL;
	if (mcr_update_sites())
		mcr_say(1, "a new image's sites stay off: the batch was refused");
	retire((void *)old);
	for (size_t i = 0; i < grown; i++)
		retire(gone[i]);
out:
	free(set);
	free(gone);
}

static int publish(struct mcloc_ops *add, struct mcloc_ops *remove)
{
	struct ops_set *old = mcr_cur_set;
	size_t n = old ? old->n : 0;
	struct ops_set *set = malloc(sizeof(*set) + (n + 1) * sizeof(set->v[0]));

	if (!set)
		return -ENOMEM;
	set->n = 0;
	for (size_t i = 0; i < n; i++)
		if (old->v[i].ops != remove)
			set->v[set->n++] = old->v[i];
	if (add)
		set->v[set->n++] = (struct set_ent){ add, add->func, add->priv->covers,
						     add->flags & MCLOC_OPS_SAVE_REGS };
	mcr_rcu_assign(mcr_cur_set, set);
	/* An addition needs no grace period before returning (and may run
	 * under the loader's lock, from the environment's tracer): only the
	 * old array must outlive its readers.  A removal must wait: after
	 * it, no thread may be in the removed ops's callback. */
	retire(old);
	if (remove)
		mcr_synchronize_rcu();
	return 0;
}

int mcloc_register_ops(struct mcloc_ops *ops)
{
	int ret = mcloc_init();

	if (ret)
		return ret;
	if (!ops || !ops->func)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	ret = prepare(ops);
	if (ret)
		goto out;
	struct mcloc_ops_priv *p = ops->priv;
	if (p->registered) {
		ret = -EBUSY;
		goto out;
	}
	/* A site counts the ops that need registers in 7 bits. */
	size_t nregs = 0;
	for (size_t i = 0; mcr_cur_set && i < mcr_cur_set->n; i++)
		nregs += mcr_cur_set->v[i].regs;
	if ((ops->flags & MCLOC_OPS_SAVE_REGS) && nregs >= REC_REGS_MAX) {
		ret = -ENOSPC;
		goto out;
	}
	/* A site counts the ops that cover it, and a direct, in 16 bits. */
	if (mcr_cur_set && mcr_cur_set->n >= REC_REF_MAX - 1) {
		ret = -ENOSPC;
		goto out;
	}
	bool all = filter_empty(p);
	free(p->covers);
	p->covers = calloc(p->nfilter, 8);
	if (!p->covers) {
		ret = -ENOMEM;
		goto out;
	}
	/* The records that exist now; an image loaded later is covered
	 * only if the filter is empty (mcr_cover_new_image()), or once the ops
	 * registers again. */
	p->ncovered = mcr_nrecords;
	for (size_t w = 0; w < p->nfilter; w++)
		p->covers[w] = covered_word(p, all, w, p->ncovered);
	p->leaving = false;
	p->slot = mcr_direct_take(ops);
	/* Visible to the dispatcher before any site calls it. */
	ret = publish(ops, NULL);
	if (ret) {
		mcr_direct_release(ops, true);
		goto out;
	}
	ret = mcr_update_sites_with(ops, +1);	/* (counted, then patched) */
	if (ret) {
		p->leaving = true;
		bool back = !mcr_update_sites_with(ops, -1);
		publish(NULL, ops);
		mcr_direct_release(ops, back);
		goto out;
	}
	p->registered = true;
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

int mcloc_unregister_ops(struct mcloc_ops *ops)
{
	int ret = 0;

	if (!ops || !ops->priv)
		return -EINVAL;
	pthread_mutex_lock(&mcr_lock);
	if (!ops->priv->registered) {
		ret = -ENOENT;
		goto out;
	}
	ops->priv->leaving = true;
	ret = mcr_update_sites_with(ops, -1);
	if (ret)
		mcr_say(0, "unregister: sites stay enabled; the ops is removed anyway");
	/* Out of the set, then a grace period: after it, no thread is in
	 * OPS's callback or can reach it. */
	publish(NULL, ops);
	mcr_direct_release(ops, !ret);
	ops->priv->registered = false;
out:
	pthread_mutex_unlock(&mcr_lock);
	return ret;
}

void mcloc_ops_free(struct mcloc_ops *ops)
{
	if (!ops || !ops->priv || ops->priv->registered)
		return;
	free(ops->priv->filter);
	free(ops->priv->notrace);
	free(ops->priv->covers);
	free(ops->priv);
	ops->priv = NULL;
}
