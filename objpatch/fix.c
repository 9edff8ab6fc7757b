// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Cleaning and sorting a linked image's call-site table: what the kernel's
 * sorttable does for vmlinux, for any executable or shared object.
 *
 * An entry is dropped when it is zero (the linker resolved it against a
 * discarded section), when it points outside every executable section, or
 * when no function symbol contains it: the code of a weak definition that
 * a strong one replaced is still in .text, but no symbol names it any
 * more, which is how sorttable finds such entries too.  Duplicates go.
 *
 * The survivors are sorted and written to the front of the table, through
 * the ELF layer's word accessors, so that in a PIE or shared object the
 * R_*_RELATIVE addends in .rela.dyn move with them (the place itself may
 * hold 0, as aarch64 and riscv64 leave it) and under DT_RELR the bytes in
 * place stay the truth.  The freed tail is zeroed; the __stop_ symbols (and
 * the table's own section size) move down to exclude it, and a run-time
 * reader that sees the whole section skips entries equal to the load base
 * (what a zero becomes after relocation), just as ftrace skips zeros.
 */
#include "fix.h"

#include "../common/diag.h"
#include "../common/mcsort.h"
#include "../site/site.h"

#include <mcloc/abi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_bound(struct mce_file *f, long *sym, const char *name,
		     const struct op_table *t, uint64_t value, struct fix_stats *st)
{
	uint32_t shndx = (uint32_t)t->sec->idx;

	if (*sym > 0) {
		struct mce_sym m;

		if (mce_sym_peek(f, (size_t)*sym, &m) < 0)
			return -1;
		if (m.value == value && m.shndx == shndx)
			return 0;
		st->changed = true;
		return mce_sym_set(f, (size_t)*sym, shndx, value);
	}
	*sym = mce_add_global(f, name, shndx, value, 0, STB_GLOBAL, STT_NOTYPE, STV_HIDDEN);
	if (*sym < 0)
		return -1;
	st->symbols_added++;
	st->changed = true;
	return 0;
}

/* Symbols read per mce_funcs_next() call (a few KB of stack). */
#define FUNCS_BATCH 256

/* Set bits [FROM, TO) of W: one store per word touched. */
static void set_bits(uint64_t *w, uint64_t from, uint64_t to)
{
	while (from < to) {
		unsigned b = from % 64;
		uint64_t nbits = to - from < 64 - b ? to - from : 64 - b;

		w[from / 64] |= (nbits == 64 ? ~0ull : ((1ull << nbits) - 1)) << b;
		from += nbits;
	}
}

/*
 * Which of the sorted entries V[0..N) lie in some function's [start,
 * start + size): bit i of COVERED.  The functions are read straight from
 * the symbol table in whatever order ld left them (hash order, for
 * globals), and each marks its bytes in a bitmap of the executable
 * sections that hold entries, a bit per byte of code; then the entries are
 * looked up in it, in order.  That is a store per function into a bitmap
 * an eighth the size of the code, not a sort of a million symbols nor a
 * search per symbol: on the VMs we measure on, either of those took longer
 * than copying the image three times (a cache miss costs ~100 ns there,
 * and a binary search is a chain of them).  Sizeless functions (assembly
 * without .size) cover nothing here; settle_uncovered() applies their
 * rule to the entries still uncovered.
 */
static int mark_covered(struct mce_file *f, const uint64_t *v, size_t n, uint64_t *covered)
{
	uint64_t *base = calloc(f->shnum, sizeof(*base)), *code = NULL, bits = 0;
	struct mce_func fn[FUNCS_BATCH];
	int ret = -1;

	if (!base)
		return mce_fail(f, "out of memory");
	/* 1 + the first bit of each section holding entries (0: none). */
	for (size_t i = 0; i < n;) {
		const struct mce_sec *s = mce_sec_of_vaddr(f, v[i]);

		base[s->idx] = bits + 1;
		bits += s->sh.sh_size;
		while (i < n && v[i] - s->sh.sh_addr < s->sh.sh_size)
			i++;
	}
	code = calloc(bits / 64 + 1, sizeof(*code));
	if (!code) {
		mce_fail(f, "out of memory");
		goto out;
	}
	for (size_t at = 0;;) {
		long k = mce_funcs_next(f, &at, fn, FUNCS_BATCH);

		if (k < 0)
			goto out;
		if (!k)
			break;
		for (long j = 0; j < k; j++) {
			if (!base[fn[j].shndx] || !fn[j].size)
				continue;
			const struct mce_sec *s = &f->secs[fn[j].shndx];
			uint64_t from = fn[j].value - s->sh.sh_addr, to = from + fn[j].size;

			if (from >= s->sh.sh_size)
				continue;	/* (a symbol outside its section) */
			if (to > s->sh.sh_size || to < from)
				to = s->sh.sh_size;
			set_bits(code, base[fn[j].shndx] - 1 + from, base[fn[j].shndx] - 1 + to);
		}
	}
	const struct mce_sec *s = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!s || v[i] - s->sh.sh_addr >= s->sh.sh_size)
			s = mce_sec_of_vaddr(f, v[i]);
		uint64_t bit = base[s->idx] - 1 + (v[i] - s->sh.sh_addr);

		if (code[bit / 64] >> (bit % 64) & 1)
			covered[i / 64] |= 1ull << (i % 64);
	}
	ret = 0;
out:
	free(base);
	free(code);
	return ret;
}

/*
 * For the few uncovered entries U[0..K) (sorted): the function starting
 * last at or before each (PRED, 0 if none, with PRED_SIZELESS if any
 * function starting there has no size) and the first function starting
 * after each (NEXT, UINT64_MAX if none).  One more pass over the symbols,
 * each placed among the K by binary search.
 */
static void place_function(const struct mce_func *m, const uint64_t *u, size_t k,
			   uint64_t *pred, bool *pred_sizeless, bool *has_pred, uint64_t *next)
{
	size_t lo = 0, hi = k;	/* the first uncovered entry >= start */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (u[mid] < m->value)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < k) {
		if (!has_pred[lo] || m->value > pred[lo]) {
			has_pred[lo] = true;
			pred[lo] = m->value;
			pred_sizeless[lo] = !m->size;
		} else if (m->value == pred[lo]) {
			pred_sizeless[lo] |= !m->size;
		}
	}
	if (lo > 0 && m->value < next[lo - 1])
		next[lo - 1] = m->value;
}

static int neighbours(struct mce_file *f, const uint64_t *u, size_t k, uint64_t *pred,
		      bool *pred_sizeless, bool *has_pred, uint64_t *next)
{
	struct mce_func fn[FUNCS_BATCH];

	for (size_t i = 0; i < k; i++) {
		has_pred[i] = pred_sizeless[i] = false;
		next[i] = UINT64_MAX;
	}
	for (size_t at = 0;;) {
		long n = mce_funcs_next(f, &at, fn, FUNCS_BATCH);

		if (n < 0)
			return -1;
		if (!n)
			break;
		for (long j = 0; j < n; j++)
			place_function(&fn[j], u, k, pred, pred_sizeless, has_pred, next);
	}
	/* A function placed at entry i precedes every later entry too, and
	 * one after entry i follows every earlier one. */
	for (size_t i = 1; i < k; i++)
		if (!has_pred[i] && has_pred[i - 1]) {
			has_pred[i] = true;
			pred[i] = pred[i - 1];
			pred_sizeless[i] = pred_sizeless[i - 1];
		}
	for (size_t i = k - 1; i-- > 0;)
		if (next[i + 1] < next[i])
			next[i] = next[i + 1];
	return 0;
}

/*
 * Decide for the uncovered entries of V[0..N): one is still inside when the
 * function before it has no size, or when it is a patchable NOP run that
 * reaches the next function's start (-fpatchable-function-entry=N,M puts
 * M NOPs before the symbol).  The others are stale: their bit in STALE.
 */
static int settle_uncovered(struct mce_file *f, const struct mc_arch *a, const uint64_t *v,
			    size_t n, const uint64_t *covered, uint64_t *stale)
{
	size_t k = 0, at = 0;

	for (size_t i = 0; i < n; i++)
		k += !(covered[i / 64] >> (i % 64) & 1);
	if (!k)
		return 0;
	uint64_t *u = malloc(k * sizeof(*u) * 3);
	size_t *idx = malloc(k * sizeof(*idx));
	bool *flags = malloc(k * 2 * sizeof(*flags));
	int ret = -1;

	if (!u || !idx || !flags) {
		mce_fail(f, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (!(covered[i / 64] >> (i % 64) & 1)) {
			idx[at] = i;
			u[at++] = v[i];
		}
	uint64_t *pred = u + k, *next = u + 2 * k;
	bool *sizeless = flags, *has_pred = flags + k;

	if (neighbours(f, u, k, pred, sizeless, has_pred, next) < 0)
		goto out;
	struct op_callee_memo memo = { 0 };

	for (size_t i = 0; i < k; i++) {
		if (has_pred[i] && sizeless[i])
			continue;
		if (!a->insn) {
			/* (No decoder of linked code: a patchable run before
			 * its function cannot be told apart.) */
			stale[idx[i] / 64] |= 1ull << (idx[i] % 64);
			continue;
		}
		struct mce_sec *s = mce_sec_of_vaddr(f, u[i]);
		struct op_entry e = { 0 };

		if (!s) {	/* (in no section at all: nothing to keep) */
			stale[idx[i] / 64] |= 1ull << (idx[i] % 64);
			continue;
		}
		op_classify(f, a, (uint32_t)s->idx, u[i] - s->sh.sh_addr, &e, &memo);
		if (e.state == OP_PATCHABLE && next[i] < u[i] + e.len)
			continue;
		stale[idx[i] / 64] |= 1ull << (idx[i] % 64);
	}
	ret = 0;
out:
	free(u);
	free(idx);
	free(flags);
	return ret;
}

/* The executable section ADDR lies in, or NULL; LAST holds the two
 * sections seen last, as two interleave most often. */
static const struct mce_sec *exec_section(struct mce_file *f, uint64_t addr,
					  const struct mce_sec **last)
{
	const struct mce_sec *s;

	if (last[0] && addr - last[0]->sh.sh_addr < last[0]->sh.sh_size)
		return last[0];
	if (last[1] && addr - last[1]->sh.sh_addr < last[1]->sh.sh_size) {
		s = last[1];
	} else {
		s = mce_sec_of_vaddr(f, addr);
		if (!s || !mce_sec_exec(s))
			return NULL;
	}
	last[1] = last[0];
	last[0] = s;
	return s;
}

/*
 * The entries of SRC[0..N) that lie in executable sections, sorted into
 * V: *M of them.  Zeros and entries outside executable code are counted
 * in ST and left out.  Sorting by address groups the entries by section
 * too, and a linked table is a few ascending sequences interleaved (one
 * per input-section kind: .text.hot, .text, .init.text), which
 * mc_sort_u64_into() merges in two streaming reads of the table.
 */
static int sort_entries(struct mce_file *f, const uint64_t *src, size_t n, uint64_t *v,
			size_t *m, bool keep_all, struct fix_stats *st)
{
	uint64_t *skip = calloc(n / 64 + 1, sizeof(*skip));
	const struct mce_sec *last[2] = { NULL, NULL };
	long kept;

	if (!skip)
		return mce_fail(f, "out of memory");
	for (size_t i = 0; i < n; i++) {
		bool zero = !keep_all && !src[i];
		bool out = !keep_all && !zero && !exec_section(f, src[i], last);

		st->zero += zero;
		st->outside += out;
		skip[i / 64] |= (uint64_t)(zero | out) << (i % 64);
	}
	kept = mc_sort_u64_into(src, n, skip, v);
	free(skip);
	if (kept < 0)
		return mce_fail(f, "out of memory");
	*m = (size_t)kept;
	return 0;
}

/*
 * Clean and sort table T (N words).  Entries are read in place when they
 * can be (mce_words_view), sorted into one new array (a merge, for the
 * two or so ascending runs a linked table is made of), filtered, and
 * written back through the word accessors, which keep RELA addends and
 * DT_RELR in step.  Only the words that differ are written: a second run
 * changes nothing.
 */
static int fix_table(struct mce_file *f, const struct mc_arch *a, struct op_table *t,
		     bool kernel_names, bool keep_all, struct fix_stats *st)
{
	size_t n = (t->end - t->start) / f->addrsize, m = 0, kept = 0;
	uint64_t *own = NULL, *v = malloc((n + 1) * sizeof(*v)), *bits = NULL;
	const uint64_t *src = op_table_words(f, a, t, &own);
	bool have_symbols = f->symtab && f->nsyms > 1;
	int ret = -1;

	if (!src)
		goto out;
	if (!v) {
		mce_fail(f, "out of memory");
		goto out;
	}
	if (sort_entries(f, src, n, v, &m, keep_all, st) < 0)
		goto out;
	free(own);
	own = NULL;

	size_t words = (m + 63) / 64;
	bits = calloc(2 * words + 1, sizeof(*bits));
	uint64_t *covered = bits, *stale = bits + words;
	if (!bits) {
		mce_fail(f, "out of memory");
		goto out;
	}
	if (have_symbols && m && !keep_all) {
		if (mark_covered(f, v, m, covered) < 0 ||
		    settle_uncovered(f, a, v, m, covered, stale) < 0)
			goto out;
	}
	for (size_t i = 0; i < m; i++) {
		if (stale[i / 64] >> (i % 64) & 1) {
			st->stale++;
			if (mc_noting())
				mc_note(f->path, "%s entry 0x%llx lies in no function; "
					"dropped (a replaced weak definition?)", t->name,
					(unsigned long long)v[i]);
			continue;
		}
		if (kept && v[kept - 1] == v[i] && !keep_all) {
			st->duplicate++;
			continue;
		}
		v[kept++] = v[i];
	}
	st->entries += n;
	st->kept += kept;
	memset(v + kept, 0, (n - kept) * sizeof(*v));

	long changed = mce_words_write(f, t->start, n, v);
	if (changed < 0)
		goto out;
	if (changed)
		st->changed = true;

	uint64_t stop = t->start + kept * f->addrsize;
	char b[64], e[64];

	if (keep_all) {		/* (every entry kept: the bounds stand) */
		ret = 0;
		goto out;
	}

	snprintf(b, sizeof(b), "__start_%s", t->name);
	snprintf(e, sizeof(e), "__stop_%s", t->name);
	/* The GNU pair always (a vmlinux's table, inside .init.data, has
	 * only the kernel's); the kernel's where that is the first table. */
	if (set_bound(f, &t->bound[0], b, t, t->start, st) < 0 ||
	    set_bound(f, &t->bound[1], e, t, stop, st) < 0)
		goto out;
	if (kernel_names || t->bound[2] > 0) {
		if (set_bound(f, &t->bound[2], "__start_mcount_loc", t, t->start, st) < 0 ||
		    set_bound(f, &t->bound[3], "__stop_mcount_loc", t, stop, st) < 0)
			goto out;
	}
	t->end = stop;	/* (what the descriptor's bounds follow) */
	if (t->own_section && t->sec->sh.sh_size != stop - t->start) {
		/* Loading follows the program headers; the section header
		 * only tells readers where the entries end. */
		if (mce_sec_shrink(f, t->sec, stop - t->start) < 0)
			goto out;
		st->changed = true;
	}
	ret = 0;
out:
	free(own);
	free(v);
	free(bits);
	return ret;
}

/*
 * A patchable entry still in the raw (-fpatchable-function-entry=N on
 * x86: GCC's N one-byte NOPs, clang's long NOP): the whole NOPs that
 * cover the site's length become the architecture's site NOP, the one
 * instruction the runtime turns into a call, then one-byte NOPs.  The
 * rest of the run stays as it was.
 */
static int convert_raw_entry(struct mce_file *f, const struct mc_arch *a,
			     const struct op_entry *e, struct fix_stats *st)
{
	struct mce_sec *tx = &f->secs[e->shndx];
	struct mc_text t = mc_text_of(f, tx, 0);
	unsigned k = mc_nop_prefix(a, &t, e->off, a->nops[0].len);
	uint8_t buf[2 * MC_MAX_SITE];
	char why[256];

	/* (Converting from a place before the entry would leave a NOP
	 * that every call to the function lands inside.) */
	if (op_entry_misplaced(f, a, e, why, sizeof(why)))
		return mce_fail(f, "%s", why);
	if (!k || k > sizeof(buf) || !a->entry_nop)
		return mce_fail(f, "no %u-byte NOP for a patchable entry", a->nops[0].len);
	memcpy(buf, a->nops[0].bytes, a->nops[0].len);
	for (unsigned i = a->nops[0].len; i < k; i += a->entry_nop->len)
		memcpy(buf + i, a->entry_nop->bytes, a->entry_nop->len);
	if (mce_patch(f, tx, e->off, buf, k) < 0)
		return -1;
	st->converted++;
	st->changed = true;
	return 0;
}

static int nop_sites(struct mce_file *f, const struct mc_arch *a, const struct op_sites *s,
		     struct fix_stats *st)
{
	char where[256];

	for (size_t i = 0; i < s->n; i++) {
		const struct op_entry *e = &s->v[i];
		struct mce_sec *tx;
		struct mc_site site = { .off = e->off, .len = e->len };

		if (e->state == OP_OTHER && op_entry_misplaced(f, a, e, f->err, sizeof(f->err))) {
			mc_error(f->path, "%s: %s", mce_where(f, e->shndx, e->off, where,
							       sizeof(where)), f->err);
			return -1;
		}
		if (e->state == OP_PATCHABLE && e->raw && convert_raw_entry(f, a, e, st) < 0) {
			mc_error(f->path, "%s: %s", mce_where(f, e->shndx, e->off, where,
							       sizeof(where)), f->err);
			return -1;
		}
		if (e->state != OP_CALL)
			continue;
		tx = &f->secs[e->shndx];
		if (!mce_linked(f)) {
			/* Decode again for the whole site (ARM's push, MIPS's
			 * delay slot), from the relocation that names it. */
			struct mce_sec *rs = tx->rela;
			struct mc_text t = mc_text_of(f, tx, 0);
			bool found = false;

			for (size_t k = 0; rs && k < rs->nrels && !found; k++) {
				const struct mce_rel *r = &rs->rels[k];

				if (r->offset < e->off || r->offset >= e->off + e->len ||
				    r->type == a->none_reloc)
					continue;
				if (a->variable_length)
					mce_label_before(f, e->shndx, r->offset, &t.boundary);
				if (a->decode(&t, r->offset, r->type, &site) == 0 && site.verdict == MC_SITE_CALL &&
				    site.off == e->off)
					found = true;
			}
			if (!found)
				continue;
		}
		int r = mc_nop_site(f, a, tx, mce_linked(f) ? NULL : tx->rela, &site);
		if (r < 0) {
			mc_error(f->path, "%s", f->err);
			return -1;
		}
		if (r > 0) {
			mc_error(f->path, "%s: no NOP for this %u-byte call to %s",
				 mce_where(f, e->shndx, e->off, where, sizeof(where)), e->len,
				 e->target);
			return -1;
		}
		st->nopped++;
		st->changed = true;
	}
	return 0;
}

/* .mcloc_names (its format: <mcloc/abi.h>), read by libmcloc's images.c. */

static int add_names(struct mce_file *f, const struct mc_arch *a, const struct op_sites *s,
		     struct fix_stats *st)
{
	if (f->addrsize != 8 || mce_sec_by_name(f, MCLOC_NAMES_SECTION))
		return 0;	/* (64-bit images only, as libmcloc; once) */
	size_t cap = 0, n = 0, slen = 0, scap = 0;
	struct mcloc_name_ent *v = NULL;
	char *str = NULL;
	int ret = -1;

	for (size_t k = 0; k < s->ntables; k++) {
		const struct op_table *t = &s->tables[k];
		size_t words = (t->end - t->start) / 8;
		uint64_t *own;
		const uint64_t *e = op_table_words(f, a, t, &own);

		if (!e)
			goto out;
		for (size_t i = 0; i < words; i++) {
			struct mce_sec *sec = e[i] ? mce_sec_of_vaddr(f, e[i]) : NULL;
			uint64_t start;
			long sym;

			if (!sec || !mce_sec_exec(sec) ||
			    (sym = mce_label_before(f, (uint32_t)sec->idx, e[i] - sec->sh.sh_addr,
						    &start)) <= 0)
				continue;
			const struct mce_sym *m = &f->syms[sym];
			if (n && v[n - 1].start == m->value)
				continue;	/* (the table is sorted: one per function) */
			size_t len = strlen(m->name) + 1;
			if (n == cap || slen + len > scap) {
				cap = cap ? 2 * cap : 1024;
				scap = (scap ? 2 * scap : 16384) + len;
				struct mcloc_name_ent *nv = realloc(v, cap * sizeof(*v));
				char *ns = nv ? realloc(str, scap) : NULL;

				if (nv)
					v = nv;
				if (!nv || !ns) {
					free(own);
					mce_fail(f, "out of memory");
					goto out;
				}
				str = ns;
			}
			v[n++] = (struct mcloc_name_ent){ .start = m->value, .size = m->size,
							 .name = (uint32_t)slen };
			memcpy(str + slen, m->name, len);
			slen += len;
		}
		free(own);
	}
	if (!n) {
		ret = 0;
		goto out;
	}
	/* Bytes in the image's order, built whole. */
	const size_t hsz = sizeof(struct mcloc_names_hdr), esz = sizeof(*v);
	size_t size = hsz + n * esz + slen;
	uint8_t *b = calloc(1, size);
	if (!b) {
		mce_fail(f, "out of memory");
		goto out;
	}
	memcpy(b + offsetof(struct mcloc_names_hdr, magic), MCLOC_NAMES_MAGIC, 8);
	mce_put_addr(f, b + offsetof(struct mcloc_names_hdr, count), n);
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = b + hsz + i * esz;

		mce_put_addr(f, p + offsetof(struct mcloc_name_ent, start), v[i].start);
		mce_put_addr(f, p + offsetof(struct mcloc_name_ent, size), v[i].size);
		mce_put32(f, p + offsetof(struct mcloc_name_ent, name), v[i].name);
	}
	memcpy(b + hsz + n * esz, str, slen);
	if (mce_add_section(f, MCLOC_NAMES_SECTION, SHT_PROGBITS, 0, 8, 0, 0, 0, ELF_T_BYTE, b,
			    size) < 0) {
		free(b);
		goto out;
	}
	free(b);
	st->names = n;
	st->changed = true;
	ret = 0;
out:
	free(v);
	free(str);
	return ret;
}

struct left_call {
	struct mce_file *f;
	size_t n;
	char first[256];
	const char *callee;
};

static void note_left_call(void *ctx, uint32_t shndx, uint64_t off, const char *callee)
{
	struct left_call *c = ctx;

	if (c->n++ == 0) {
		mce_where(c->f, shndx, off, c->first, sizeof(c->first));
		c->callee = callee;
	}
}

/*
 * link --nop promises an image that calls no mcount symbol.  A call that
 * no table names (its object never went through recordmcount) cannot be
 * NOPed safely after the link, so it fails the link, naming the first.
 */
static int no_call_left(struct mce_file *f, const struct mc_arch *a)
{
	struct left_call c = { .f = f };

	if (mce_syms_need(f) < 0)
		return -1;
	op_mcount_calls(f, a, note_left_call, &c);
	if (!c.n)
		return 0;
	return mce_fail(f, "%zu call%s to %s in no call-site table (the first at %s): "
			"run recordmcount on every object compiled with -pg (with "
			"--gc-sections, recordmcount -g: else ld.bfd and lld drop the tables)", c.n,
			c.n == 1 ? "" : "s", c.callee, c.first);
}

/*
 * The table bounds in the __mcloc_image descriptor of objpatch link
 * --runtime.  Right after the link (FILL) they are placeholders, set here
 * to each table's start and (cleaned) end; later, a bound pair that
 * already names a table's start follows its end, as the __stop_ symbols
 * do.  Written through the word accessors, so that in a PIE the
 * R_*_RELATIVE addends change with them.
 */
static int set_image_bounds(struct mce_file *f, const struct op_sites *s, bool fill,
			    struct fix_stats *st)
{
	struct mce_sym img;

	if (s->image_sym <= 0 || f->addrsize != 8)
		return 0;	/* (the runtime's images are 64-bit) */
	if (mce_sym_peek(f, (size_t)s->image_sym, &img) < 0)
		return -1;
	for (size_t k = 0; k < s->ntables; k++) {
		const struct op_table *t = &s->tables[k];
		bool mcount = !strcmp(t->name, "__mcount_loc");
		uint64_t start = img.value + (mcount ? MCLOC_IMAGE_OFF_MCOUNT_START :
						       MCLOC_IMAGE_OFF_PATCHABLE_START);
		uint64_t stop = img.value + (mcount ? MCLOC_IMAGE_OFF_MCOUNT_STOP :
						      MCLOC_IMAGE_OFF_PATCHABLE_STOP);
		uint64_t have[2];

		if (mce_word_read(f, start, &have[0]) < 0 || mce_word_read(f, stop, &have[1]) < 0)
			return -1;
		if (!fill && have[0] != t->start)
			continue;
		if (have[0] == t->start && have[1] == t->end)
			continue;
		st->changed = true;
		if (mce_word_write(f, start, t->start) < 0 || mce_word_write(f, stop, t->end) < 0)
			return -1;
	}
	return 0;
}

/*
 * A -pg site of E's table (aarch64, riscv64): the NOPed call to _mcount
 * after the prologue becomes a pair like an entry's, spelt apart (arch.h).
 * Returns 1 when it cannot (the site stays a plain NOP, which the runtime
 * leaves alone), 0, or -1 on an error.
 */
static int prep_mcount_site(struct mce_file *f, const struct mc_arch *a, const struct op_entry *e,
			    uint64_t targs, uint64_t tregs, struct fix_stats *st)
{
	if (!a->runtime_mcount_site || e->off < 4)
		return 0;
	struct mce_sec *tx = &f->secs[e->shndx];
	struct mc_text t = mc_text_of(f, tx, 0);
	uint64_t at;
	uint8_t out[8];
	int r = a->runtime_mcount_site(&t, e->off, tx->sh.sh_addr + e->off, targs, tregs, &at, out);

	if (r)
		return r < 0;	/* (1: prepared already) */
	if (mce_patch(f, tx, at, out, 8) < 0)
		return -1;
	st->prepared++;
	st->changed = true;
	return 0;
}

/*
 * link --runtime on x86_64: each site's NOP parked on the image's direct
 * stub 0 (include/mcloc/abi.h), so that the first ops to take direct slot
 * 0 enables a site as every later toggle does, by its first byte, with no
 * tail to write and no sync for it.  A site that is not the NOP (a call
 * left, or one the runtime will refuse) stays as it is; so does every
 * site of an image whose trampolines predate the stubs.
 */
static int park_sites(struct mce_file *f, const struct mc_arch *a, const struct op_sites *s,
		      struct fix_stats *st)
{
	uint64_t stubs;
	int have = op_direct_stubs(f, &stubs);

	if (have <= 0)
		return have;
	for (size_t i = 0; i < s->n; i++) {
		const struct op_entry *e = &s->v[i];

		if (!e->resolved)
			continue;
		struct mce_sec *tx = &f->secs[e->shndx];
		struct mc_text t = mc_text_of(f, tx, 0);
		uint8_t out[8];
		unsigned len;

		if (a->park_site(&t, e->off, tx->sh.sh_addr + e->off, stubs, out, &len))
			continue;
		if (mce_patch(f, tx, e->off, out, len) < 0)
			return -1;
		st->prepared++;
		st->changed = true;
	}
	return 0;
}

/*
 * link --runtime's sites (x86_64: park_sites()).  On aarch64 and riscv64,
 * each patchable entry's fixed first instruction (mov x9, x30; auipc t0),
 * so that the runtime changes a site with one store (the kernel writes
 * it at boot, in ftrace_init_nop(); an image has no boot).  The entry's
 * NOPs are either all at the function's entry (=2; riscv64 with
 * compressed NOPs =4), or as many again before it (=4,2; =8,4), where
 * they become the site's ops slot; any other layout is refused, since the
 * runtime would not find the site.
 */
static int prep_runtime_sites(struct mce_file *f, const struct mc_arch *a,
			      const struct op_sites *s, struct fix_stats *st)
{
	if (a->park_site)
		return park_sites(f, a, s, st);
	static const char *const names[] = { "mcloc_tramp_args", "mcloc_tramp_regs" };
	long found[2];
	struct mce_sym sa, sr;
	char where[256];

	if (!a->runtime_site)
		return 0;
	mce_sym_lookup_many(f, names, 2, found, 0);
	if (found[0] <= 0 || found[1] <= 0)
		return 0;	/* (not a runtime image) */
	if (mce_sym_peek(f, (size_t)found[0], &sa) < 0 || mce_sym_peek(f, (size_t)found[1], &sr) < 0)
		return -1;
	size_t late = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct op_entry *e = &s->v[i];

		if (!e->resolved)
			continue;
		if (!strcmp(e->table, "__mcount_loc")) {
			int r = prep_mcount_site(f, a, e, sa.value, sr.value, st);

			if (r < 0)
				return -1;
			late += r;
			continue;
		}
		if (strcmp(e->table, "__patchable_function_entries"))
			continue;
		struct mce_sec *tx = &f->secs[e->shndx];
		struct mc_text t = mc_text_of(f, tx, 0);
		uint64_t start, pre = 0;
		long fn = mce_label_before(f, e->shndx, e->off + 8, &start);
		uint8_t out[8];

		if (fn >= 0 && start >= e->off)
			pre = start - e->off;
		if (pre != 0 && pre != 8)
			return mce_fail(f, "%s: %llu bytes of NOPs before the function's entry; "
					"the runtime needs none, or 8 for an ops slot",
					mce_where(f, e->shndx, e->off, where, sizeof(where)),
					(unsigned long long)pre);
		uint64_t entry = e->off + pre;
		if (a->runtime_site_len(&t, entry))
			continue;
		if (a->runtime_site(&t, entry, tx->sh.sh_addr + entry, sa.value, sr.value, out) < 0)
			return mce_fail(f, "%s: not 8 bytes of NOPs at the function's entry, or the "
					"trampolines are out of reach",
					mce_where(f, e->shndx, entry, where, sizeof(where)));
		if (mce_patch(f, tx, entry, out, 8) < 0)
			return -1;
		st->prepared++;
		st->changed = true;
	}
	if (late)
		mc_warn(f->path, "%zu -pg site%s cannot be made run-time sites and stay%s "
			"plain NOP%s, which the runtime leaves alone (aarch64: no \"mov x0, x30\" "
			"right before the call; riscv64: the call was relaxed to 4 bytes: run "
			"recordmcount --nop on the objects)", late, late == 1 ? "" : "s",
			late == 1 ? "s a" : "", late == 1 ? "" : "s");
	return 0;
}

/*
 * Sort table T as O asks.  Under 6.12's kernel conventions the table the
 * kernel's names bound is 6.12's sorttable's (kmcount.h); any other, and
 * every table under 6.1's, keeps its entries as 6.1's sorttable does.
 */
static int sort_one(struct mce_file *f, const struct mc_arch *a, struct op_table *t,
		    bool first, const struct fix_opts *o, struct fix_stats *st)
{
	struct km_stats ks;

	if (!o->kernel || st->kversion != KM_6_12 || t->bound[2] <= 0)
		return fix_table(f, a, t, first, o->kernel, st);
	if (km_sort(f, a, t->start, t->end, &o->km, &ks) < 0)
		return -1;
	st->entries += ks.entries;
	st->kept += ks.entries;
	st->weak_zeroed += ks.zeroed;
	st->addends |= ks.addends;
	st->changed |= ks.changed;
	return 0;
}

int op_fix(struct mce_file *f, const struct mc_arch *a, struct op_sites *s,
	   const struct fix_opts *o, struct fix_stats *st)
{
	/* (NOPs first: the sort below moves entries, not code.) */
	memset(st, 0, sizeof(*st));
	if (o->kernel)
		st->kversion = o->kversion ? o->kversion : km_detect(f);
	if (o->nop && nop_sites(f, a, s, st) < 0)
		return -1;
	if (!mce_linked(f))
		return 0;
	if (o->nop && o->no_call_left && no_call_left(f, a) < 0)
		goto fail;
	for (size_t k = 0; o->sort && k < s->ntables; k++)
		if (sort_one(f, a, &s->tables[k], k == 0, o, st) < 0)
			goto fail;
	if (set_image_bounds(f, s, o->runtime, st) < 0)
		goto fail;
	if (o->runtime && prep_runtime_sites(f, a, s, st) < 0)
		goto fail;
	if (o->sort && o->runtime && add_names(f, a, s, st) < 0)
		goto fail;
	return 0;
fail:
	mc_error(f->path, "%s", f->err);
	return -1;
}

int op_fix_file(const char *path, const struct fix_opts *o, struct fix_stats *st)
{
	struct mce_file f;
	struct op_sites s = { 0 };
	/* Sorting alone reads each symbol once, in place (no f->syms). */
	const char *name = o->name ? o->name : path;
	const struct mc_arch *a = op_open_as(&f, path, name,
					     (o->nop || o->runtime ? 0 : MCE_OPEN_LAZY_SYMS) |
					     (o->in_place ? MCE_OPEN_WRITABLE : 0));
	int ret = -1;

	struct kt_tables kt = { 0 };

	memset(st, 0, sizeof(*st));
	if (!a)
		goto out;
	if (o->sort && !mce_linked(&f)) {
		mc_error(name, "not a linked image: tables are sorted after the link");
		goto out;
	}
	if (!a->insn && (o->nop || o->runtime)) {
		mc_error(name, "linked %s images can be sorted, not changed otherwise yet",
			 a->name);
		goto out;
	}
	/* Sorting reads the tables' words itself; NOPing needs every site
	 * decoded.  Every table is checked before anything changes. */
	if ((o->nop ? op_sites_load(&f, a, &s) : op_tables_find(&f, &s)) < 0 ||
	    (o->sort && kt_find(&f, a, &kt) < 0)) {
		mc_error(name, "%s", f.err);
		goto out;
	}
	if (!s.ntables && !kt_any(&kt)) {
		if (o->nop && o->no_call_left && no_call_left(&f, a) < 0) {
			mc_error(name, "%s", f.err);
			goto out;
		}
		if (o->missing_ok) {
			if (mc_noting())
				mc_note(name, "no call-site table: left as it is");
			ret = 0;
		} else {
			mc_error(name, o->sort ? "no table to sort (__mcount_loc, "
				 "__patchable_function_entries, __ex_table, ORC)" :
				 "no __mcount_loc or __patchable_function_entries table");
		}
		goto out;
	}
	if (op_fix(&f, a, &s, o, st) < 0)
		goto out;
	st->tables = s.ntables != 0;
	if (o->sort && kt_any(&kt)) {
		if (kt_sort(&f, a, &kt, o->kernel, o->kernel && st->kversion == KM_6_12, &st->kt) < 0) {
			mc_error(name, "%s", f.err);
			goto out;
		}
		if (st->kt.ex_moved || st->kt.orc_moved || st->kt.rels_cleared ||
		    st->kt.flag_cleared)
			st->changed = true;
	}
	/* (f.path is NAME: the file written is PATH.) */
	if (st->changed && (o->in_place ? mce_write_over(&f) : mce_write(&f, o->name ? path : NULL)) < 0) {
		mc_error(name, "%s", f.err);
		goto out;
	}
	if (!st->changed)
		mce_unstage(path);	/* (what a killed run may have left) */
	ret = 0;
out:
	op_sites_free(&s);
	mce_close(&f);
	return ret;
}
