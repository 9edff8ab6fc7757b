// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Which arguments and return values to capture, in uftrace's words:
 *
 *   -A 'FUNC@arg1,arg2/s,fparg1'   -R 'FUNC@retval/x'   --auto-args
 *
 * argN is the Nth integer or pointer argument, fpargN the Nth float or
 * double, each counted in its own class as the calling conventions of
 * x86_64, aarch64 and riscv64 pass scalars; the runtime knows the
 * registers.  A format after a slash: d or i (signed), u, x, p (a
 * pointer, in hex), s (a string), c (a character), f (floating point),
 * with a size in bits (8, 16, 32, 64; f: 32 or 64).  --auto-args asks
 * the functions' DWARF (common/mclines.c) for their parameters' types.
 */
#include "argspec.h"
#include "format.h"
#include "peer.h"
#include "symbols.h"
#include "mclines.h"
#include "../base/grow.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ITEM ("arg2/s") into *A, with *IS_RET set for retval: 0, or -1 with a
 * message for WHO about TEXT. */
static int parse_item(const char *item, struct mcloc_arg *a, bool *is_ret, const char *who,
		      const char *text)
{
	const char *fmt = strchr(item, '/');
	size_t head = fmt ? (size_t)(fmt - item) : strlen(item);
	unsigned long index = 0;
	char *end;

	*is_ret = false;
	if (head == 6 && !strncmp(item, "retval", 6)) {
		*a = (struct mcloc_arg){ MCLOC_ARG_AUTO, 8, MCLOC_ARG_IN_INT, 0 };
		*is_ret = true;
	} else if (!strncmp(item, "fparg", 5) && head > 5) {
		index = strtoul(item + 5, &end, 10);
		if (end != item + head || !index || index > 8)
			goto bad;
		*a = (struct mcloc_arg){ MCLOC_ARG_FLOAT, 8, MCLOC_ARG_IN_FP, (uint8_t)index };
	} else if (!strncmp(item, "arg", 3) && head > 3) {
		index = strtoul(item + 3, &end, 10);
		if (end != item + head || !index || index > 32)
			goto bad;
		*a = (struct mcloc_arg){ MCLOC_ARG_AUTO, 8, MCLOC_ARG_IN_INT, (uint8_t)index };
	} else {
		goto bad;
	}
	if (!fmt)
		return 0;
	static const char letters[] = "diuxpscf";
	static const uint8_t fmts[] = { MCLOC_ARG_INT, MCLOC_ARG_INT, MCLOC_ARG_UINT,
					MCLOC_ARG_HEX, MCLOC_ARG_HEX, MCLOC_ARG_STR,
					MCLOC_ARG_CHAR, MCLOC_ARG_FLOAT };
	const char *l = fmt[1] ? strchr(letters, fmt[1]) : NULL;

	if (!l)
		goto bad;
	a->fmt = fmts[l - letters];
	unsigned long bits = 64;

	if (fmt[2]) {
		bits = strtoul(fmt + 2, &end, 10);
		if (*end || (bits != 8 && bits != 16 && bits != 32 && bits != 64))
			goto bad;
	}
	a->size = (uint8_t)(bits / 8);
	if (a->fmt == MCLOC_ARG_CHAR && !fmt[2])
		a->size = 1;
	/* A float is in the FP registers, as an argument (fpargN) or a
	 * result (retval/f); those hold nothing but floating point. */
	if (a->fmt == MCLOC_ARG_FLOAT) {
		if (a->in == MCLOC_ARG_IN_INT && !*is_ret) {
			fail(who, "'%s': '%s': a floating-point argument is fpargN", text, item);
			return -1;
		}
		a->in = MCLOC_ARG_IN_FP;
		if (a->size != 4 && a->size != 8)
			goto bad;
	} else if (a->in == MCLOC_ARG_IN_FP) {
		goto bad;
	}
	if (a->fmt == MCLOC_ARG_STR || a->fmt == MCLOC_ARG_HEX) {
		if (fmt[2] && a->fmt == MCLOC_ARG_STR)
			goto bad;
		if (a->fmt == MCLOC_ARG_STR || fmt[1] == 'p')
			a->size = 8;
	}
	return 0;
bad:
	fail(who, "'%s': '%s' is not argN, fpargN or retval with an optional /FORMAT "
		  "(d, i, u, x, p, s, c, f, and 8, 16, 32 or 64 bits)", text, item);
	return -1;
}

int argspec_add(struct argspecs *s, const char *text, const char *who)
{
	const char *at = strrchr(text, '@');
	struct argspec sp = { .text = text };

	if (!at || at == text || !at[1]) {
		fail(who, "'%s': not FUNC@ITEM[,ITEM...]", text);
		return -1;
	}
	char *items = strdup(at + 1), *save = NULL;

	sp.glob = strndup(text, (size_t)(at - text));
	if (!items || !sp.glob) {
		free(items);
		free(sp.glob);
		fail(who, "out of memory");
		return -1;
	}
	for (char *it = strtok_r(items, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		struct mcloc_arg a;
		bool is_ret;

		if (parse_item(it, &a, &is_ret, who, text) < 0)
			goto fail;
		if (is_ret) {
			sp.ret = a;
			sp.has_ret = true;
		} else if (sp.nargs == MCLOC_ARGS_MAX) {
			fail(who, "'%s': at most %d arguments", text, MCLOC_ARGS_MAX);
			goto fail;
		} else {
			sp.args[sp.nargs++] = a;
			sp.has_args = true;
		}
	}
	free(items);
	if (!strcmp(who, "-R") && sp.has_args) {
		fail(who, "'%s': -R takes FUNC@retval[/FORMAT] (arguments are -A's)", text);
		free(sp.glob);
		return -1;
	}
	struct argspec *v = mc_grown(s->v, &s->cap, s->n, sizeof(*v), 8);

	if (!v) {
		fail(who, "out of memory");
		free(sp.glob);
		return -1;
	}
	s->v = v;
	s->v[s->n++] = sp;
	return 0;
fail:
	free(items);
	free(sp.glob);
	return -1;
}

/* The argument of class KIND P as --auto-args captures it, the next of
 * its class (*NI, *NF counted); false where the rest cannot be placed. */
static bool auto_arg(const struct mc_param *p, struct mcloc_arg *a, unsigned *ni, unsigned *nf)
{
	switch (p->kind) {
	case MC_P_SIGNED:
	case MC_P_UNSIGNED:
		*a = (struct mcloc_arg){ p->kind == MC_P_SIGNED ? MCLOC_ARG_INT : MCLOC_ARG_UINT,
					 (uint8_t)p->size, MCLOC_ARG_IN_INT, (uint8_t)++*ni };
		return p->size == 1 || p->size == 2 || p->size == 4 || p->size == 8;
	case MC_P_CHAR:
		*a = (struct mcloc_arg){ MCLOC_ARG_CHAR, 1, MCLOC_ARG_IN_INT, (uint8_t)++*ni };
		return true;
	case MC_P_POINTER:
	case MC_P_STRING:
		*a = (struct mcloc_arg){ p->kind == MC_P_STRING ? MCLOC_ARG_STR : MCLOC_ARG_HEX, 8,
					 MCLOC_ARG_IN_INT, (uint8_t)++*ni };
		return true;
	case MC_P_FLOAT:
		*a = (struct mcloc_arg){ MCLOC_ARG_FLOAT, (uint8_t)p->size, MCLOC_ARG_IN_FP,
					 (uint8_t)++*nf };
		return *nf <= 8;
	default:
		return false;
	}
}

/* How far before its function's code a site may lie: a patchable entry's
 * NOPs before the entry (-fpatchable-function-entry=N,M's M). */
#define SITE_BEFORE_CODE 16

/* --auto-args's entry for the function NAME at SITE, from its DWARF: false
 * when it has none. */
static bool auto_entry(struct symbols *sym, const char *name, uint64_t site, bool retvals,
		       struct mcloc_args_ent *e)
{
	struct mc_param p[MCLOC_ARGS_MAX], ret;
	int n = -1;
	unsigned ni = 0, nf = 0;

	/* (The function's code holds the site, or starts just after it,
	 * where its name says it is.) */
	for (uint64_t at = site; n < 0 && at <= site + SITE_BEFORE_CODE; at += 4) {
		const char *fn = sym_func(sym, at);

		if (fn && !strcmp(fn, name))
			n = sym_params(sym, at, p, MCLOC_ARGS_MAX, &ret);
	}
	if (n < 0)
		return false;
	*e = (struct mcloc_args_ent){ .site = site };
	/* (A result that is no scalar, a struct above all, may come back
	 * through memory whose address the caller passes in the first
	 * integer argument's register, by the ABI's rules for aggregates:
	 * then every argument is one further on.  Not guessed; a small one
	 * DWARF says is returned in registers moves nothing.) */
	if (ret.kind == MC_P_OTHER)
		n = 0;
	for (int k = 0; k < n && k < MCLOC_ARGS_MAX; k++) {
		struct mcloc_arg a;

		if (!auto_arg(&p[k], &a, &ni, &nf) || a.index > 32)
			break;
		e->args[e->nargs++] = a;
	}
	if (retvals && ret.kind != MC_P_NONE && ret.kind != MC_P_OTHER) {
		unsigned zi = 0, zf = 0;

		if (auto_arg(&ret, &e->ret, &zi, &zf)) {
			e->ret.index = 0;
			e->has_ret = 1;
		}
	}
	return e->nargs || e->has_ret;
}

struct mcloc_args_ent argspec_ent(const struct argspec *sp)
{
	struct mcloc_args_ent e = { .nargs = (uint8_t)sp->nargs, .has_ret = sp->has_ret,
				    .ret = sp->ret };

	memcpy(e.args, sp->args, sp->nargs * sizeof(*e.args));
	return e;
}

static int cmp_ent(const void *a, const void *b)
{
	uint64_t x = ((const struct mcloc_args_ent *)a)->site;
	uint64_t y = ((const struct mcloc_args_ent *)b)->site;

	return x < y ? -1 : x > y;
}

int argspec_entries(const struct argspecs *s, const struct names *sites, struct symbols *sym,
		    bool retvals, const char *who, struct mcloc_args_ent **out, size_t *nout)
{
	struct mcloc_args_ent *v = NULL;
	size_t n = 0, cap = 0;
	bool *used = calloc(s->n + 1, sizeof(*used));

	*out = NULL;
	*nout = 0;
	if (!used) {
		fail(who, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < s->n; k++)
		if (s->v[k].has_ret && !retvals) {
			fail(who, "'%s': a return value needs function_graph", s->v[k].text);
			free(used);
			return -1;
		}
	for (size_t i = 0; i < sites->n; i++) {
		const struct name *nm = &sites->v[i];
		struct mcloc_args_ent e = { .site = nm->addr };
		bool any = false;

		if (!nm->name)
			continue;
		/* (An IPA clone, name.isra.0 and the like, may take other
		 * arguments than its DWARF's declaration says.) */
		if (s->autoargs && sym && !strchr(nm->name, '.'))
			any = auto_entry(sym, nm->name, nm->addr, retvals, &e);
		bool replaced = false;

		for (size_t k = 0; k < s->n; k++) {
			const struct argspec *sp = &s->v[k];

			if (fnmatch(sp->glob, nm->name, 0))
				continue;
			used[k] = any = true;
			/* The -A options naming a function add up, as
			 * uftrace's do, and replace what DWARF said. */
			struct mcloc_args_ent spe = argspec_ent(sp);

			mcloc_args_merge(&e, &spe, &replaced);
		}
		if (!any)
			continue;
		struct mcloc_args_ent *nv = mc_grown(v, &cap, n, sizeof(*v), 64);

		if (!nv) {
			fail(who, "out of memory");
			free(v);
			free(used);
			return -1;
		}
		v = nv;
		v[n++] = e;
	}
	/* A glob may name functions of images that register later (the
	 * program has the globs too): one that matches none now is said,
	 * and kept.  (Unlike a filter, which would trace everything if it
	 * matched nothing, it changes nothing of what is traced.) */
	for (size_t k = 0; k < s->n; k++)
		if (!used[k])
			fprintf(stderr, "mcloc: %s: '%s': matches no traced function yet: kept for "
					"images that register later\n", who, s->v[k].text);
	free(used);
	if (s->autoargs && !n)
		fprintf(stderr, "mcloc: %s: --auto-args: no traced function has DWARF that describes "
				"it (build with -g)\n", who);
	/* (One entry per site: the program refuses a site twice.) */
	qsort(v, n, sizeof(*v), cmp_ent);
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (!k || v[k - 1].site != v[i].site)
			v[k++] = v[i];
	*out = v;
	*nout = k;
	return 0;
}

void argspecs_free(struct argspecs *s)
{
	for (size_t k = 0; k < s->n; k++)
		free(s->v[k].glob);
	free(s->v);
	*s = (struct argspecs){ 0 };
}
