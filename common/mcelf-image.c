// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ELF layer, linked images (ET_EXEC, ET_DYN) by address: which
 * section holds an address, which dynamic relocation applies there, and
 * what word the loaded image will see.  Sorting a table of a
 * position-independent image goes through these, so that the bytes in
 * place, RELA addends and DT_RELR all keep agreeing.
 */
#include "mcelf.h"
#include "mcelf-priv.h"
#include "prefault.h"

#include <stdlib.h>
#include <string.h>

#ifndef SHT_RELR
#define SHT_RELR 19
#endif

/* ---- linked images: addresses -------------------------------------------- */

static int cmp_addr(const void *a, const void *b)
{
	const struct mce_sec *x = *(struct mce_sec *const *)a, *y = *(struct mce_sec *const *)b;

	return x->sh.sh_addr < y->sh.sh_addr ? -1 : x->sh.sh_addr > y->sh.sh_addr;
}

struct mce_sec *mce_sec_of_vaddr(struct mce_file *f, uint64_t va)
{
	if (!f->byaddr) {
		f->byaddr = malloc(f->shnum * sizeof(*f->byaddr));
		if (!f->byaddr)
			return NULL;
		for (size_t i = 1; i < f->shnum; i++) {
			const GElf_Shdr *sh = &f->secs[i].sh;

			if ((sh->sh_flags & SHF_ALLOC) && sh->sh_type != SHT_NOBITS && sh->sh_size)
				f->byaddr[f->nbyaddr++] = &f->secs[i];
		}
		qsort(f->byaddr, f->nbyaddr, sizeof(*f->byaddr), cmp_addr);
	}
	size_t lo = 0, hi = f->nbyaddr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->byaddr[mid]->sh.sh_addr <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Sections do not overlap in a linked image, but TLS templates and
	 * empty ones may share an address: look back a little. */
	for (size_t k = lo; k-- > 0 && lo - k <= 4;) {
		struct mce_sec *s = f->byaddr[k];

		if (va - s->sh.sh_addr < s->sh.sh_size)
			return s;
	}
	return NULL;
}

/* ---- linked images: dynamic relocations ----------------------------------- */

static int push_dynrel(struct mce_file *f, size_t *cap, const struct mce_dynrel *d)
{
	if (f->ndynrels == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		struct mce_dynrel *n = realloc(f->dynrels, nc * sizeof(*n));

		if (!n)
			return mce_fail(f, "out of memory");
		f->dynrels = n;
		*cap = nc;
	}
	f->dynrels[f->ndynrels++] = *d;
	return 0;
}

/* DT_RELR: an address word (even) relocates one place and sets the base;
 * a bitmap word (odd) relocates each set bit's place after the base. */
static int load_relr(struct mce_file *f, struct mce_sec *s, size_t *cap)
{
	unsigned w = f->addrsize;
	uint64_t base = 0;

	if (s->sh.sh_entsize && s->sh.sh_entsize != w)
		return mce_fail(f, "%s: bad entry size %llu", s->name,
				(unsigned long long)s->sh.sh_entsize);
	for (uint64_t o = 0; o + w <= s->sh.sh_size; o += w) {
		uint64_t v = mce_get_addr(f, f->map + s->sh.sh_offset + o);
		struct mce_dynrel d = { .type = f->relative_type };

		if (!(v & 1)) {
			d.where = v;
			if (push_dynrel(f, cap, &d) < 0)
				return -1;
			base = v + w;
			continue;
		}
		for (unsigned b = 1; b < 8 * w; b++)
			if ((v >> b) & 1) {
				d.where = base + (b - 1) * (uint64_t)w;
				if (push_dynrel(f, cap, &d) < 0)
					return -1;
			}
		base += (8 * w - 1) * (uint64_t)w;
	}
	return 0;
}

static int cmp_dynrel(const void *a, const void *b)
{
	const struct mce_dynrel *x = a, *y = b;

	return x->where < y->where ? -1 : x->where > y->where;
}

int mce_dynrels_load(struct mce_file *f, uint32_t relative)
{
	size_t cap = 0;

	if (f->dynrels_loaded)
		return 0;
	f->relative_type = relative;
	for (size_t i = 1; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];

		if (!(s->sh.sh_flags & SHF_ALLOC))
			continue;
		if (s->sh.sh_type == SHT_RELR) {
			if (load_relr(f, s, &cap) < 0)
				return -1;
			continue;
		}
		if (s->sh.sh_type != SHT_REL && s->sh.sh_type != SHT_RELA)
			continue;
		if (mce_load_rels(f, s) < 0)
			return -1;
		for (size_t k = 0; k < s->nrels; k++) {
			const struct mce_rel *r = &s->rels[k];
			struct mce_dynrel d = { .where = r->offset, .rs = s, .i = k,
						.type = r->type, .sym = r->sym,
						.addend = r->addend };

			if (push_dynrel(f, &cap, &d) < 0)
				return -1;
		}
	}
	/* ld writes them in address order (-z combreloc) mostly. */
	bool sorted = true;
	for (size_t i = 1; i < f->ndynrels && sorted; i++)
		sorted = f->dynrels[i - 1].where <= f->dynrels[i].where;
	if (!sorted)
		qsort(f->dynrels, f->ndynrels, sizeof(*f->dynrels), cmp_dynrel);
	f->dynrels_loaded = true;
	return 0;
}

/* The first dynamic relocation at or after VA. */
static size_t dynrel_lower(const struct mce_file *f, uint64_t va)
{
	size_t lo = 0, hi = f->ndynrels;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->dynrels[mid].where < va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct mce_dynrel *mce_dynrel_at(struct mce_file *f, uint64_t va)
{
	size_t h = f->dynrel_hint;

	/* Tables are walked in order: try where the last lookup ended. */
	for (size_t k = h; k < h + 2 && k < f->ndynrels; k++)
		if (f->dynrels[k].where == va) {
			f->dynrel_hint = k + 1;
			return &f->dynrels[k];
		}

	size_t lo = dynrel_lower(f, va);
	if (lo < f->ndynrels && f->dynrels[lo].where == va) {
		f->dynrel_hint = lo + 1;
		return &f->dynrels[lo];
	}
	return NULL;
}

const char *mce_dynrel_name(struct mce_file *f, const struct mce_dynrel *d)
{
	GElf_Sym sym;
	struct mce_sec *ds;
	Elf_Data *data;
	const char *name;

	if (!d->rs || !d->sym || d->rs->sh.sh_link >= f->shnum)
		return "";
	ds = &f->secs[d->rs->sh.sh_link];
	if (ds == f->symtab && !f->syms_lazy)
		return d->sym < f->nsyms ? f->syms[d->sym].name : "";
	data = mce_sec_data(f, ds);
	if (!data || !gelf_getsym(data, (int)d->sym, &sym))
		return "";
	name = elf_strptr(f->elf, ds->sh.sh_link, sym.st_name);
	return name ? name : "";
}

static uint8_t *place(struct mce_file *f, uint64_t va, struct mce_sec **sp)
{
	struct mce_sec *s = mce_sec_of_vaddr(f, va);
	Elf_Data *d;

	if (!s || va - s->sh.sh_addr + f->addrsize > s->sh.sh_size)
		return NULL;
	d = mce_sec_data(f, s);
	/* (A table shrunk by mce_sec_shrink keeps its bytes past the end.) */
	if (!d || !d->d_buf || d->d_type != ELF_T_BYTE || d->d_size < s->sh.sh_size)
		return NULL;
	*sp = s;
	return (uint8_t *)d->d_buf + (va - s->sh.sh_addr);
}

int mce_word_read(struct mce_file *f, uint64_t va, uint64_t *value)
{
	struct mce_sec *s;
	uint8_t *p = place(f, va, &s);
	const struct mce_dynrel *d;

	if (!p)
		return mce_fail(f, "no contents at address 0x%llx", (unsigned long long)va);
	d = f->dynrels_loaded ? mce_dynrel_at(f, va) : NULL;
	if (d && d->rs && d->rs->is_rela && d->type == f->relative_type)
		*value = (uint64_t)d->addend;
	else
		*value = mce_get_addr(f, p);
	if (f->addrsize == 4)
		*value &= 0xffffffffu;
	return 0;
}

int mce_word_write(struct mce_file *f, uint64_t va, uint64_t value)
{
	struct mce_sec *s;
	uint8_t *p = place(f, va, &s);
	struct mce_dynrel *d;

	if (!p)
		return mce_fail(f, "no contents at address 0x%llx", (unsigned long long)va);
	mce_put_addr(f, p, value);
	mce_sec_edited(f, s, (uint64_t)(p - (uint8_t *)s->data->d_buf), f->addrsize);
	d = f->dynrels_loaded ? (struct mce_dynrel *)mce_dynrel_at(f, va) : NULL;
	if (d && d->rs && d->rs->is_rela) {
		d->addend = (int64_t)value;
		d->rs->rels[d->i].addend = (int64_t)value;
		return mce_store_rel(f, d->rs, d->i);
	}
	return 0;
}

int mce_dynrel_set_addend(struct mce_file *f, const struct mce_dynrel *d, int64_t addend)
{
	struct mce_dynrel *m = (struct mce_dynrel *)d;

	if (!m->rs || !m->rs->is_rela)
		return mce_fail(f, "the relocation at 0x%llx has no addend to set",
				(unsigned long long)m->where);
	m->addend = addend;
	m->rs->rels[m->i].addend = addend;
	return mce_store_rel(f, m->rs, m->i);
}

/* N words at VA inside one section's loaded data, or NULL. */
static uint8_t *place_words(struct mce_file *f, uint64_t va, size_t n, struct mce_sec **sp)
{
	uint8_t *p = n ? place(f, va, sp) : NULL;

	if (!p || n > ((*sp)->sh.sh_size - (va - (*sp)->sh.sh_addr)) / f->addrsize)
		return NULL;
	return p;
}

bool mce_dynrels_within(const struct mce_file *f, uint64_t va, uint64_t end)
{
	size_t lo = f->dynrels_loaded ? dynrel_lower(f, va) : f->ndynrels;

	return lo < f->ndynrels && f->dynrels[lo].where < end;
}

const uint64_t *mce_words_view(struct mce_file *f, uint64_t va, size_t n)
{
	struct mce_sec *s;
	uint8_t *p = place_words(f, va, n, &s);

	if (!p || f->addrsize != 8 || f->msb != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__) ||
	    (uintptr_t)p % _Alignof(uint64_t) || mce_dynrels_within(f, va, va + n * 8))
		return NULL;
	return (const uint64_t *)p;
}

int mce_words_read(struct mce_file *f, uint64_t va, size_t n, uint64_t *out)
{
	struct mce_sec *s;

	if (!n)
		return 0;
	if (!place_words(f, va, n, &s))
		return mce_fail(f, "no contents for %zu words at address 0x%llx", n,
				(unsigned long long)va);
	for (size_t i = 0; i < n; i++)
		if (mce_word_read(f, va + i * f->addrsize, &out[i]) < 0)
			return -1;
	return 0;
}

long mce_words_write(struct mce_file *f, uint64_t va, size_t n, const uint64_t *vals)
{
	struct mce_sec *s;
	uint8_t *p = n ? place_words(f, va, n, &s) : NULL;
	long changed = 0;

	if (!n)
		return 0;
	if (!p)
		return mce_fail(f, "no contents for %zu words at address 0x%llx", n,
				(unsigned long long)va);
	if (!mce_dynrels_within(f, va, va + n * f->addrsize)) {
		/* Nothing to keep in step: store straight into the data,
		 * skipping the runs that are the same already. */
		uint64_t at = (uint64_t)(p - (uint8_t *)s->data->d_buf);

		if (f->addrsize == 8 && f->msb == (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)) {
			for (size_t i = 0; i < n; i += 512) {
				size_t len = (n - i < 512 ? n - i : 512) * 8;

				if (memcmp(p + i * 8, vals + i, len)) {
					if (!changed)
						mc_prefault_write(p + i * 8, (n - i) * 8);
					memcpy(p + i * 8, vals + i, len);
					mce_sec_edited(f, s, at + i * 8, len);
					changed++;
				}
			}
			return changed;
		}
		for (size_t i = 0; i < n; i++, p += f->addrsize) {
			uint64_t want = f->addrsize == 4 ? vals[i] & 0xffffffffu : vals[i];

			if (mce_get_addr(f, p) != want) {
				mce_put_addr(f, p, want);
				mce_sec_edited(f, s, at + i * f->addrsize, f->addrsize);
				changed++;
			}
		}
		return changed;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t have;

		if (mce_word_read(f, va + i * f->addrsize, &have) < 0)
			return -1;
		if (have != (f->addrsize == 4 ? vals[i] & 0xffffffffu : vals[i])) {
			if (mce_word_write(f, va + i * f->addrsize, vals[i]) < 0)
				return -1;
			changed++;
		}
	}
	return changed;
}
