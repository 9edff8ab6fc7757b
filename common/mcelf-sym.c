// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ELF layer, symbols: looking them up by name, and adding and changing
 * them (and the .strtab names they need) in an object or a linked image.
 */
#include "mcelf.h"
#include "mcelf-priv.h"
#include "prefault.h"

#include <stdlib.h>
#include <string.h>

#ifndef SHT_RELR
#define SHT_RELR 19
#endif

int mce_keep(struct mce_file *f, void *p)
{
	void **n = realloc(f->garbage, (f->ngarbage + 1) * sizeof(*n));

	if (!n) {
		free(p);
		return mce_fail(f, "out of memory");
	}
	f->garbage = n;
	f->garbage[f->ngarbage++] = p;
	return 0;
}

/* ---- symbols ------------------------------------------------------------ */

/* Symbol I's name without reading the rest, or NULL for a symbol of a
 * type in SKIP (a bit per STT_ value) or with a bad name (lookups pass
 * over it; whoever reads the symbol reports it). */
static const char *name_of(const struct mce_file *f, size_t i, unsigned skip)
{
	const Elf_Data *sd = f->strdata;
	uint32_t off;
	unsigned type;

	if (!f->syms_lazy)
		return skip >> f->syms[i].type & 1 ? NULL : f->syms[i].name;
	if (f->cls == ELFCLASS64) {
		const Elf64_Sym *y = (const Elf64_Sym *)f->symdata->d_buf + i;

		off = y->st_name;
		type = ELF64_ST_TYPE(y->st_info);
	} else {
		const Elf32_Sym *y = (const Elf32_Sym *)f->symdata->d_buf + i;

		off = y->st_name;
		type = ELF32_ST_TYPE(y->st_info);
	}
	if (skip >> type & 1 || off >= sd->d_size ||
	    (!f->strtab_ends && !memchr((const char *)sd->d_buf + off, 0, sd->d_size - off)))
		return NULL;
	return (const char *)sd->d_buf + off;
}

long mce_sym_lookup(const struct mce_file *f, const char *name)
{
	long found;

	mce_sym_lookup_many(f, &name, 1, &found, 0);
	return found;
}

void mce_sym_lookup_many(const struct mce_file *f, const char *const *names, size_t n,
			 long *found, unsigned skip_types)
{
	size_t left = n;

	for (size_t k = 0; k < n; k++)
		found[k] = -1;
	for (size_t i = 1; i < f->nsyms && left; i++) {
		const char *name = name_of(f, i, skip_types | 1u << STT_SECTION);

		if (!name)
			continue;
		for (size_t k = 0; k < n; k++)
			if (found[k] < 0 && name[0] == names[k][0] && !strcmp(name, names[k])) {
				found[k] = (long)i;
				left--;
			}
	}
}

static void symbols_changed(struct mce_file *f)
{
	f->syms_dirty = f->dirty = true;
	free(f->bounds);
	f->bounds = NULL;
	f->nbounds = 0;
}

static int set_shndx(struct mce_file *f, struct mce_sym *m, uint32_t shndx)
{
	m->shndx = shndx;
	if (shndx < SHN_LORESERVE || (shndx >= SHN_LORESERVE && shndx <= SHN_HIRESERVE &&
				      shndx >= f->shnum)) {
		m->raw_shndx = (uint16_t)shndx;
		return 0;
	}
	if (!f->symtab_shndx)
		return mce_fail(f, "section index %u needs a SHT_SYMTAB_SHNDX table", shndx);
	m->raw_shndx = SHN_XINDEX;
	return 0;
}

int mce_sym_set(struct mce_file *f, size_t i, uint32_t shndx, uint64_t value)
{
	if (mce_syms_need(f) < 0)
		return -1;
	if (i >= f->nsyms)
		return mce_fail(f, "no symbol %zu", i);
	if (set_shndx(f, &f->syms[i], shndx) < 0)
		return -1;
	f->syms[i].value = value;
	symbols_changed(f);
	return 0;
}

/*
 * Append NAMES (N strings, each NUL-terminated) to .strtab in one copy;
 * OFFS receives their offsets.  The old buffer stays alive, since every
 * existing symbol name points into it.
 */
static int strtab_add(struct mce_file *f, const char *const *names, size_t n,
		      uint32_t *offs)
{
	struct mce_sec *st = f->strtab;
	Elf_Data *d;
	size_t add = 0;

	if (!st)
		return mce_fail(f, "no string table for the symbol table");
	d = mce_sec_data(f, st);
	if (!d)
		return -1;
	for (size_t i = 0; i < n; i++)
		add += strlen(names[i]) + 1;
	if (d->d_size + add > UINT32_MAX)
		return mce_fail(f, "%s: too large", st->name);
	char *buf = malloc(d->d_size + add + 1);
	if (!buf)
		return mce_fail(f, "out of memory");
	if (d->d_size)
		memcpy(buf, d->d_buf, d->d_size);
	size_t at = d->d_size;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(names[i]) + 1;

		memcpy(buf + at, names[i], l);
		offs[i] = (uint32_t)at;
		at += l;
	}
	if (mce_sec_adopt(f, st, d, buf, at) < 0)
		return -1;
	mce_sec_rewritten(f, st);
	return 0;
}

long mce_add_global(struct mce_file *f, const char *name, uint32_t shndx,
		    uint64_t value, uint64_t size, uint8_t bind, uint8_t type,
		    uint8_t other)
{
	uint32_t off;
	struct mce_sym *n;

	if (!f->symtab)
		return mce_fail(f, "no symbol table");
	if (mce_syms_need(f) < 0)
		return -1;
	n = realloc(f->syms, (f->nsyms + 1) * sizeof(*n));
	if (!n)
		return mce_fail(f, "out of memory");
	f->syms = n;
	if (strtab_add(f, &name, 1, &off) < 0)
		return -1;
	struct mce_sym *m = &f->syms[f->nsyms];
	*m = (struct mce_sym){ .name = (char *)f->strtab->owned + off, .value = value,
			       .size = size, .bind = bind, .type = type, .other = other,
			       .st_name = off };
	if (set_shndx(f, m, shndx) < 0)
		return -1;
	symbols_changed(f);
	return (long)f->nsyms++;
}

long mce_add_locals(struct mce_file *f, const struct mce_sym *syms, size_t n)
{
	size_t first = f->symtab ? f->symtab->sh.sh_info : 0;
	const char **names = NULL;
	uint32_t *offs = NULL;
	struct mce_sym *v;
	long ret = -1;

	if (!f->symtab)
		return mce_fail(f, "no symbol table");
	if (mce_syms_need(f) < 0)
		return -1;
	if (!n)
		return (long)first;
	names = malloc(n * sizeof(*names));
	offs = malloc(n * sizeof(*offs));
	v = realloc(f->syms, (f->nsyms + n) * sizeof(*v));
	if (!names || !offs || !v) {
		mce_fail(f, "out of memory");
		goto out;
	}
	f->syms = v;
	for (size_t i = 0; i < n; i++)
		names[i] = syms[i].name;
	if (strtab_add(f, names, n, offs) < 0)
		goto out;
	/* Locals precede globals: the globals move up by N. */
	memmove(v + first + n, v + first, (f->nsyms - first) * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		v[first + i] = syms[i];
		v[first + i].bind = STB_LOCAL;
		v[first + i].name = (char *)f->strtab->owned + offs[i];
		v[first + i].st_name = offs[i];
		if (set_shndx(f, &v[first + i], syms[i].shndx) < 0)
			goto out;
	}
	f->nsyms += n;
	f->symtab->sh.sh_info = (GElf_Word)(first + n);
	symbols_changed(f);
	free(f->secsym);	/* rebuilt on next use */
	f->secsym = NULL;

	for (size_t i = 1; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];

		if ((s->sh.sh_type == SHT_REL || s->sh.sh_type == SHT_RELA) &&
		    s->sh.sh_link == f->symtab->idx) {
			if (mce_load_rels(f, s) < 0)
				goto out;
			for (size_t k = 0; k < s->nrels; k++)
				if (s->rels[k].sym >= first) {
					s->rels[k].sym += (uint32_t)n;
					if (mce_store_rel(f, s, k) < 0)
						goto out;
				}
		} else if (s->sh.sh_type == SHT_GROUP && s->sh.sh_link == f->symtab->idx &&
			   s->sh.sh_info >= first) {
			s->sh.sh_info += (GElf_Word)n;
			mce_sec_rewritten(f, s);
		}
	}
	ret = (long)first;
out:
	free(names);
	free(offs);
	return ret;
}
