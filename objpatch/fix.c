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
#include "../common/sitenop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FUNC symbols of a linked image by address: key the start, val the size. */
static struct mc_kv *functions(struct mce_file *f, size_t *n)
{
	struct mc_kv *v = malloc((f->nsyms + 1) * sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 1; i < f->nsyms; i++)
		if (f->syms[i].type == STT_FUNC && f->syms[i].shndx &&
		    f->syms[i].shndx < f->shnum)
			v[(*n)++] = (struct mc_kv){ f->syms[i].value, f->syms[i].size };
	if (mc_sort_kv(v, *n) < 0) {
		free(v);
		return NULL;
	}
	return v;
}

static int set_bound(struct mce_file *f, long *sym, const char *name,
		     const struct op_table *t, uint64_t value, struct fix_stats *st)
{
	uint32_t shndx = (uint32_t)t->sec->idx;

	if (*sym > 0) {
		if (f->syms[*sym].value == value && f->syms[*sym].shndx == shndx)
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

static int fix_table(struct mce_file *f, const struct mc_arch *a, struct op_sites *s,
		     struct op_table *t, size_t first, size_t n, bool kernel_names,
		     struct fix_stats *st)
{
	struct mc_kv *c = malloc((n + 1) * sizeof(*c)), *fn = NULL;
	uint64_t *v = malloc((n + 1) * sizeof(*v));
	size_t kept = 0, nc = 0, nfn = 0;
	bool have_symbols = f->symtab && f->nsyms > 1;

	if (!v || !c || (have_symbols && !(fn = functions(f, &nfn)))) {
		free(c);
		free(v);
		return mce_fail(f, "out of memory");
	}
	for (size_t i = first; i < first + n; i++) {
		const struct op_entry *e = &s->v[i];

		if (!e->addr)
			st->zero++;
		else if (!e->resolved || !mce_sec_exec(&f->secs[e->shndx]))
			st->outside++;
		else
			c[nc++] = (struct mc_kv){ e->addr, i };
	}
	if (mc_sort_kv(c, nc) < 0) {
		mce_fail(f, "out of memory");
		goto fail;
	}
	/*
	 * Merge the sorted entries with the sorted functions: an entry is
	 * inside when the last function starting at or before it has no
	 * size (assembly without .size) or some function reaches past it.
	 * A patchable NOP run may begin before its function's symbol
	 * (-fpatchable-function-entry=N,M): it counts if the run reaches the
	 * next function's start.
	 */
	uint64_t reach = 0;
	size_t fi = 0;
	for (size_t k = 0; k < nc; k++) {
		uint64_t addr = c[k].key;
		struct op_entry *e = &s->v[c[k].val];

		while (fi < nfn && fn[fi].key <= addr) {
			if (fn[fi].key + fn[fi].val > reach)
				reach = fn[fi].key + fn[fi].val;
			fi++;
		}
		bool inside = !have_symbols || (fi && (!fn[fi - 1].val || addr < reach));
		if (!inside) {
			if (!e->classified)
				op_classify(f, a, e->shndx, e->off, e);
			inside = e->state == OP_PATCHABLE && fi < nfn && fn[fi].key < addr + e->len;
		}
		if (!inside) {
			st->stale++;
			if (mc_noting())
				mc_note(f->path, "%s entry %u (0x%llx) lies in no function; "
					"dropped (a replaced weak definition?)", t->name, e->idx,
					(unsigned long long)addr);
			continue;
		}
		if (kept && v[kept - 1] == addr) {
			st->duplicate++;
			continue;
		}
		v[kept++] = addr;
	}
	st->entries += n;
	st->kept += kept;

	/* Write only what differs: a second run changes nothing. */
	for (size_t i = 0; i < n; i++) {
		uint64_t want = i < kept ? v[i] : 0, have = s->v[first + i].addr;

		if (want != have) {
			st->changed = true;
			if (mce_word_write(f, t->start + i * f->addrsize, want) < 0)
				goto fail;
		}
	}
	uint64_t stop = t->start + kept * f->addrsize;
	char b[64], e[64];

	snprintf(b, sizeof(b), "__start_%s", t->name);
	snprintf(e, sizeof(e), "__stop_%s", t->name);
	if (t->own_section || t->bound[0] > 0) {
		if (set_bound(f, &t->bound[0], b, t, t->start, st) < 0 ||
		    set_bound(f, &t->bound[1], e, t, stop, st) < 0)
			goto fail;
	}
	if (kernel_names || t->bound[2] > 0) {
		if (set_bound(f, &t->bound[2], "__start_mcount_loc", t, t->start, st) < 0 ||
		    set_bound(f, &t->bound[3], "__stop_mcount_loc", t, stop, st) < 0)
			goto fail;
	}
	/* The runtime descriptor of objpatch link --runtime holds the
	 * bounds as the linker resolved them: keep its end in step. */
	long img = mce_sym_lookup(f, "__mcloc_image");
	if (img > 0 && f->addrsize == 8) {
		uint64_t at = f->syms[img].value, have_start, have_stop;
		unsigned field = strcmp(t->name, "__mcount_loc") ? 24 : 8;

		if (mce_word_read(f, at + field, &have_start) == 0 && have_start == t->start &&
		    mce_word_read(f, at + field + 8, &have_stop) == 0 && have_stop != stop) {
			st->changed = true;
			if (mce_word_write(f, at + field + 8, stop) < 0)
				goto fail;
		}
	}
	if (t->own_section && t->sec->sh.sh_size != stop - t->start) {
		/* Loading follows the program headers; the section header
		 * only tells readers where the entries end. */
		t->sec->sh.sh_size = stop - t->start;
		t->sec->dirty = f->dirty = st->changed = true;
	}
	free(v);
	free(c);
	free(fn);
	return 0;
fail:
	free(v);
	free(c);
	free(fn);
	return -1;
}

static int nop_sites(struct mce_file *f, const struct mc_arch *a, const struct op_sites *s,
		     struct fix_stats *st)
{
	char where[256];

	for (size_t i = 0; i < s->n; i++) {
		const struct op_entry *e = &s->v[i];
		struct mce_sec *tx;
		struct mc_site site = { .off = e->off, .len = e->len };

		if (e->state != OP_CALL)
			continue;
		tx = &f->secs[e->shndx];
		if (!mce_linked(f)) {
			/* Decode again for the whole site (ARM's push, MIPS's
			 * delay slot), from the relocation that names it. */
			struct mce_sec *rs = tx->rela;
			Elf_Data *d = mce_sec_data(f, tx);
			struct mc_text t = { .buf = d->d_buf, .size = d->d_size, .msb = f->msb,
					     .elfclass = f->cls };
			bool found = false;

			for (size_t k = 0; rs && k < rs->nrels && !found; k++) {
				const struct mce_rel *r = &rs->rels[k];

				if (r->offset < e->off || r->offset >= e->off + e->len ||
				    r->type == a->none_reloc)
					continue;
				if (a->variable_length)
					mce_label_before(f, e->shndx, r->offset, &t.boundary);
				if (a->decode(&t, r, &site) == 0 && site.verdict == MC_SITE_CALL &&
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

int op_fix(struct mce_file *f, const struct mc_arch *a, struct op_sites *s,
	   const struct fix_opts *o, struct fix_stats *st)
{
	/* (NOPs first: the sort below moves entries, not code.) */
	memset(st, 0, sizeof(*st));
	if (o->nop && nop_sites(f, a, s, st) < 0)
		return -1;
	if (!o->sort || !mce_linked(f))
		return 0;
	for (size_t k = 0, first = 0; k < s->ntables; k++) {
		struct op_table *t = &s->tables[k];
		size_t n = (t->end - t->start) / f->addrsize;

		if (fix_table(f, a, s, t, first, n, k == 0, st) < 0) {
			mc_error(f->path, "%s", f->err);
			return -1;
		}
		first += n;
	}
	return 0;
}

int op_fix_file(const char *path, const struct fix_opts *o, struct fix_stats *st)
{
	struct mce_file f;
	struct op_sites s = { 0 };
	const struct mc_arch *a = op_open(&f, path);
	int ret = -1;

	memset(st, 0, sizeof(*st));
	if (!a)
		goto out;
	if (o->sort && !mce_linked(&f)) {
		mc_error(path, "not a linked image: tables are sorted after the link");
		goto out;
	}
	/* Sorting needs only addresses; NOPing needs every site decoded. */
	if ((o->nop ? op_sites_load(&f, a, &s) : op_sites_load_lazy(&f, a, &s)) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	if (!s.ntables) {
		if (o->missing_ok) {
			if (mc_noting())
				mc_note(path, "no call-site table: left as it is");
			ret = 0;
		} else {
			mc_error(path, "no __mcount_loc or __patchable_function_entries table");
		}
		goto out;
	}
	if (op_fix(&f, a, &s, o, st) < 0)
		goto out;
	if (st->changed && mce_write(&f, NULL) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	ret = 0;
out:
	op_sites_free(&s);
	mce_close(&f);
	return ret;
}
