// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ELF layer, changes in memory: patched bytes, new sections and
 * tables, section symbols, emptied and shortened sections; and finding a
 * place's label (mce_label_before(), mce_where()).  Every change marks what
 * it touched dirty, for mcelf-write.c.
 */
#include "mcelf.h"
#include "mcelf-priv.h"
#include "mcsort.h"
#include "diag.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
/* ---- changes ------------------------------------------------------------ */

int mce_patch(struct mce_file *f, struct mce_sec *s, uint64_t off,
	      const void *bytes, size_t len)
{
	Elf_Data *d = mce_sec_data(f, s);

	if (!d)
		return -1;
	if (d->d_type != ELF_T_BYTE || !d->d_buf || mce_add_overflows(off, len, d->d_size))
		return mce_fail(f, "cannot patch %zu bytes at %s+0x%llx", len, s->name,
			    (unsigned long long)off);
	memcpy((uint8_t *)d->d_buf + off, bytes, len);
	mce_sec_edited(f, s, off, len);
	return 0;
}

/* The gap between R and [LO, HI): 0 when they touch. */
static uint64_t gap(const struct mce_range *r, uint64_t lo, uint64_t hi)
{
	return hi < r->lo ? r->lo - hi : lo > r->hi ? lo - r->hi : 0;
}

int mce_sec_adopt(struct mce_file *f, struct mce_sec *s, const Elf_Data *old, void *buf,
		  size_t size)
{
	Elf_Data *nd = calloc(1, sizeof(*nd));

	if (!nd) {
		free(buf);
		return mce_fail(f, "out of memory");
	}
	/* (What pointed into the old bytes may go on reading them.) */
	if (s->owned && (mce_keep(f, s->owned) < 0 || mce_keep(f, s->data) < 0)) {
		free(buf);
		free(nd);
		return -1;
	}
	*nd = *old;
	nd->d_buf = buf;
	nd->d_size = size;
	nd->d_type = ELF_T_BYTE;
	s->data = nd;
	s->owned = buf;
	s->sh.sh_size = size;
	return 0;
}

int mce_sec_replace(struct mce_file *f, struct mce_sec *s, void *buf)
{
	Elf_Data *d = mce_sec_data(f, s);

	if (!d || d->d_type != ELF_T_BYTE || !d->d_buf || d->d_size != s->sh.sh_size) {
		free(buf);
		return d ? mce_fail(f, "cannot replace the contents of %s", s->name) : -1;
	}
	if (mce_sec_adopt(f, s, d, buf, d->d_size) < 0)
		return -1;
	mce_sec_edited(f, s, 0, s->sh.sh_size);
	return 0;
}

/*
 * A few ranges, not one: a kernel's .init.data has main_extable_sort_needed
 * and __mcount_loc 30 KB apart, with holes of the sparse file between
 * them, whose every page a read would make the kernel allocate and zero.
 */
void mce_sec_edited(struct mce_file *f, struct mce_sec *s, uint64_t off, uint64_t len)
{
	const unsigned max = sizeof(s->edits) / sizeof(s->edits[0]);
	uint64_t hi = off + len;
	unsigned best = 0;

	if (!s->dirty) {
		s->edit_known = true;
		s->nedits = 0;
	}
	s->dirty = f->dirty = true;
	if (!s->edit_known)
		return;
	for (unsigned k = 1; k < s->nedits; k++)
		if (gap(&s->edits[k], off, hi) < gap(&s->edits[best], off, hi))
			best = k;
	if (s->nedits == max || (s->nedits && !gap(&s->edits[best], off, hi))) {
		struct mce_range *r = &s->edits[best];

		r->lo = off < r->lo ? off : r->lo;
		r->hi = hi > r->hi ? hi : r->hi;
		return;
	}
	s->edits[s->nedits++] = (struct mce_range){ off, hi };
}

void mce_sec_rewritten(struct mce_file *f, struct mce_sec *s)
{
	s->edit_known = false;
	s->dirty = f->dirty = true;
}

int mce_reserve_sections(struct mce_file *f, size_t extra)
{
	if (f->shnum + extra > f->secs_cap && mce_grow_secs(f, f->shnum + extra) < 0)
		return mce_fail(f, "out of memory");
	return 0;
}

long mce_add_section(struct mce_file *f, const char *name, GElf_Word type,
		     GElf_Xword flags, GElf_Xword align, GElf_Xword entsize,
		     GElf_Word link, GElf_Word info, Elf_Type dtype,
		     const void *data, size_t size)
{
	struct mce_sec *s = mce_new_sec(f);

	if (!s)
		return mce_fail(f, "out of memory");
	s->is_new = true;
	s->name = strdup(name);
	s->data = calloc(1, sizeof(*s->data));
	s->owned = malloc(size ? size : 1);
	if (!s->name || !s->data || !s->owned)
		return mce_fail(f, "out of memory");
	if (size)
		memcpy(s->owned, data, size);
	s->data->d_buf = s->owned;
	s->data->d_size = size;
	s->data->d_type = dtype;
	s->data->d_version = EV_CURRENT;
	s->data->d_align = align;
	s->sh = (GElf_Shdr){ .sh_type = type, .sh_flags = flags, .sh_size = size,
			     .sh_link = link, .sh_info = info, .sh_addralign = align,
			     .sh_entsize = entsize };
	s->is_rela = type == SHT_RELA;
	mce_sec_rewritten(f, s);
	if ((type == SHT_REL || type == SHT_RELA) && info < f->shnum &&
	    !f->secs[info].rela)
		f->secs[info].rela = s;
	return (long)s->idx;
}

/* Section symbols by section, so that asking for many is not quadratic. */
static int index_section_symbols(struct mce_file *f)
{
	/* Built once: sections this layer adds later have no symbols. */
	if (f->secsym)
		return 0;
	if (mce_syms_need(f) < 0)
		return -1;
	f->nsecsym = f->shnum;
	f->secsym = calloc(f->nsecsym + 1, sizeof(*f->secsym));
	if (!f->secsym)
		return mce_fail(f, "out of memory");
	for (size_t i = f->nsyms; i-- > 1;)	/* the first one wins */
		if (f->syms[i].type == STT_SECTION && f->syms[i].shndx < f->nsecsym)
			f->secsym[f->syms[i].shndx] = (uint32_t)i;
	return 0;
}

long mce_find_section_symbol(struct mce_file *f, uint32_t shndx)
{
	if (!f->symtab)
		return mce_fail(f, "no symbol table");
	if (index_section_symbols(f) < 0)
		return -1;
	return shndx < f->nsecsym ? f->secsym[shndx] : 0;
}

long mce_section_symbol(struct mce_file *f, uint32_t shndx)
{
	long found = mce_find_section_symbol(f, shndx);

	if (found)
		return found;

	struct mce_sym *n = realloc(f->syms, (f->nsyms + 1) * sizeof(*n));
	if (!n)
		return mce_fail(f, "out of memory");
	f->syms = n;

	size_t first_global = f->symtab->sh.sh_info;
	size_t moved_to = f->nsyms;
	struct mce_sym sec = { .name = "", .bind = STB_LOCAL, .type = STT_SECTION,
			       .shndx = shndx,
			       .raw_shndx = shndx >= SHN_LORESERVE ? SHN_XINDEX : shndx };

	if (shndx >= SHN_LORESERVE && !f->symtab_shndx)
		return mce_fail(f, "section index %u needs a SHT_SYMTAB_SHNDX table", shndx);
	/*
	 * Locals must precede globals (sh_info is the first global), so a new
	 * local takes the first global's slot and that global moves to the end.
	 * Every relocation and group naming the moved symbol is renumbered.
	 */
	f->syms[moved_to] = f->syms[first_global < f->nsyms ? first_global : moved_to];
	f->syms[first_global] = sec;
	f->nsyms++;
	f->symtab->sh.sh_info = (GElf_Word)first_global + 1;
	f->syms_dirty = f->dirty = true;
	if (shndx < f->nsecsym)
		f->secsym[shndx] = (uint32_t)first_global;
	if (first_global == moved_to)
		return (long)first_global;

	for (size_t i = 1; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];

		if ((s->sh.sh_type == SHT_REL || s->sh.sh_type == SHT_RELA) &&
		    s->sh.sh_link == f->symtab->idx) {
			if (mce_load_rels(f, s) < 0)
				return -1;
			for (size_t k = 0; k < s->nrels; k++)
				if (s->rels[k].sym == first_global) {
					s->rels[k].sym = (uint32_t)moved_to;
					if (mce_store_rel(f, s, k) < 0)
						return -1;
				}
		} else if (s->sh.sh_type == SHT_GROUP && s->sh.sh_link == f->symtab->idx &&
			   s->sh.sh_info == first_global) {
			s->sh.sh_info = (GElf_Word)moved_to;
			mce_sec_rewritten(f, s);
		}
	}
	return (long)first_global;
}

long mce_add_addr_table(struct mce_file *f, const char *name, GElf_Xword flags,
			GElf_Word link, uint32_t rtype, bool rela,
			const uint32_t *syms, const int64_t *addends, size_t n)
{
	bool c64 = f->cls == ELFCLASS64;
	size_t asz = c64 ? sizeof(Elf64_Addr) : sizeof(Elf32_Addr);
	size_t rsz = c64 ? (rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel))
			 : (rela ? sizeof(Elf32_Rela) : sizeof(Elf32_Rel));
	uint8_t *tab = calloc(n ? n : 1, asz), *rel = calloc(n ? n : 1, rsz);
	long idx = -1, ridx;
	char *rname = NULL;

	if (!tab || !rel || asprintf(&rname, "%s%s", rela ? ".rela" : ".rel", name) < 0) {
		rname = NULL;
		mce_fail(f, "out of memory");
		goto out;
	}
	if (!f->symtab) {
		mce_fail(f, "no symbol table");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct mce_rel r = { .offset = i * asz, .sym = syms[i], .type = rtype,
				     .addend = rela ? addends[i] : 0 };
		uint64_t info = mce_raw_info(f, &r);
		uint64_t inplace = rela ? 0 : (uint64_t)addends[i];

		if (c64) {
			((Elf64_Addr *)tab)[i] = inplace;
			if (rela)
				((Elf64_Rela *)rel)[i] = (Elf64_Rela){ r.offset, info, r.addend };
			else
				((Elf64_Rel *)rel)[i] = (Elf64_Rel){ r.offset, info };
		} else {
			((Elf32_Addr *)tab)[i] = (Elf32_Addr)inplace;
			if (rela)
				((Elf32_Rela *)rel)[i] = (Elf32_Rela){ (Elf32_Addr)r.offset,
					(Elf32_Word)info, (Elf32_Sword)r.addend };
			else
				((Elf32_Rel *)rel)[i] = (Elf32_Rel){ (Elf32_Addr)r.offset,
					(Elf32_Word)info };
		}
	}
	idx = mce_add_section(f, name, SHT_PROGBITS, SHF_ALLOC | flags, asz, asz,
			      link, 0, ELF_T_ADDR, tab, n * asz);
	if (idx < 0)
		goto out;
	/* SHF_INFO_LINK, as GNU as marks relocations of allocated sections. */
	ridx = mce_add_section(f, rname, rela ? SHT_RELA : SHT_REL, SHF_INFO_LINK,
			       asz, rsz, (GElf_Word)f->symtab->idx, (GElf_Word)idx,
			       rela ? ELF_T_RELA : ELF_T_REL, rel, n * rsz);
	if (ridx < 0)
		idx = -1;
out:
	free(tab);
	free(rel);
	free(rname);
	return idx;
}

int mce_sec_empty(struct mce_file *f, struct mce_sec *s)
{
	Elf_Data *d = mce_sec_data(f, s);

	if (!d)
		return -1;
	d->d_size = 0;
	s->sh.sh_size = 0;
	s->sh.sh_flags &= ~(GElf_Xword)SHF_ALLOC;
	s->nrels = 0;
	free(s->byoff);
	s->byoff = NULL;
	mce_sec_rewritten(f, s);
	return 0;
}

int mce_sec_shrink(struct mce_file *f, struct mce_sec *s, uint64_t size)
{
	if (size > s->sh.sh_size)
		return mce_fail(f, "section %s: cannot grow it to 0x%llx bytes by shrinking",
				s->name, (unsigned long long)size);
	if (size != s->sh.sh_size) {
		s->sh.sh_size = size;
		mce_sec_rewritten(f, s);
	}
	return 0;
}

long mce_label_before(struct mce_file *f, uint32_t shndx, uint64_t off,
		      uint64_t *start)
{
	if (!f->bounds) {
		if (mce_syms_need(f) < 0)
			return -1;
		struct mc_kv *kv = malloc((f->nsyms + 1) * sizeof(*kv));
		size_t n = 0;

		f->bounds = malloc((f->nsyms + 1) * sizeof(*f->bounds));
		if (!f->bounds || !kv) {
			free(kv);
			free(f->bounds);
			f->bounds = NULL;
			return -1;
		}
		for (size_t i = 0; i < f->nsyms; i++) {
			const struct mce_sym *m = &f->syms[i];

			/* Functions, and untyped named labels (assembly). */
			if ((m->type == STT_FUNC || (m->type == STT_NOTYPE && m->name[0] &&
						     m->name[0] != '$' &&
						     strncmp(m->name, ".L", 2))) &&
			    m->shndx && m->shndx < f->shnum) {
				uint64_t rel = m->value - mce_sec_base(f, m->shndx);

				/* Key: section, then offset (offsets past 2^40 do
				 * not exist in a section); ties keep symbol order. */
				kv[n++] = (struct mc_kv){ (uint64_t)m->shndx << 40 |
							  (rel & ((1ull << 40) - 1)), i };
			}
		}
		if (mc_sort_kv(kv, n) < 0) {
			free(kv);
			free(f->bounds);
			f->bounds = NULL;
			return -1;
		}
		for (size_t k = 0; k < n; k++) {
			const struct mce_sym *m = &f->syms[kv[k].val];

			f->bounds[k] = (struct mce_bound){ m->shndx, m->value - mce_sec_base(f, m->shndx),
							   (uint32_t)kv[k].val };
		}
		f->nbounds = n;
		free(kv);
	}
	/* LO: the number of labels at or before the place.  Callers walk a
	 * section's call sites in order, one or two per function, so the
	 * answer is usually at or a few past the last one: step from there,
	 * and search only when that does not reach it. */
#define AT_OR_BEFORE(b) ((b)->shndx < shndx || ((b)->shndx == shndx && (b)->value <= off))
	size_t lo = f->bounds_hint, hi = f->nbounds;

	if (lo > hi || (lo && !AT_OR_BEFORE(&f->bounds[lo - 1])))
		lo = 0;
	for (int step = 0; lo < hi && AT_OR_BEFORE(&f->bounds[lo]); step++) {
		if (step == 4) {
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (AT_OR_BEFORE(&f->bounds[mid]))
					lo = mid + 1;
				else
					hi = mid;
			}
			break;
		}
		lo++;
	}
#undef AT_OR_BEFORE
	f->bounds_hint = lo;
	if (!lo || f->bounds[lo - 1].shndx != shndx)
		return -1;
	*start = f->bounds[lo - 1].value;
	return f->bounds[lo - 1].sym;
}

const char *mce_where(struct mce_file *f, uint32_t shndx, uint64_t off,
		      char *buf, size_t len)
{
	const struct mce_sym *best = NULL;
	uint64_t start;
	long fn = mce_label_before(f, shndx, off, &start);

	if (f->syms_lazy) {	/* (the symbols could not be read) */
		snprintf(buf, len, "%s+0x%llx", f->secs[shndx].name, (unsigned long long)off);
		return buf;
	}

	/* The common case, a place inside a function, from the index; only
	 * places outside every function scan all symbols. */
	if (fn > 0 && f->syms[fn].type == STT_FUNC && off - start < f->syms[fn].size) {
		snprintf(buf, len, "%s+0x%llx", f->syms[fn].name,
			 (unsigned long long)(off - start));
		return buf;
	}

	/* Symbol values of a linked image are addresses. */
	off += mce_sec_base(f, shndx);
	for (size_t i = 0; i < f->nsyms; i++) {
		const struct mce_sym *m = &f->syms[i];

		if (m->shndx != shndx || m->type == STT_SECTION || !m->name[0] ||
		    m->name[0] == '$' || !strncmp(m->name, ".L", 2) || m->value > off)
			continue;
		/* Prefer the function that contains OFF, then the closest. */
		bool inside = off < m->value + m->size;
		bool best_inside = best && off < best->value + best->size;
		if (!best || (inside && !best_inside) ||
		    (inside == best_inside && m->value > best->value))
			best = m;
	}
	if (best)
		snprintf(buf, len, "%s+0x%llx", best->name,
			 (unsigned long long)(off - best->value));
	else if (mce_sec_base(f, shndx))
		snprintf(buf, len, "%s+0x%llx", f->secs[shndx].name,
			 (unsigned long long)(off - mce_sec_base(f, shndx)));
	else
		snprintf(buf, len, "%s+0x%llx", shndx < f->shnum ? f->secs[shndx].name : "?",
			 (unsigned long long)off);
	return buf;
}
