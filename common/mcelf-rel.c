// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ELF layer, relocations: r_info in every class (MIPS64's three
 * types included), REL and RELA sections read in place or decoded, the
 * picks and windows the tools search, and writing one back.
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
/* ---- relocation info ---------------------------------------------------- */

/*
 * MIPS64 does not use the ELF64_R_SYM/ELF64_R_TYPE split: r_info is a
 * 32-bit symbol index followed by four bytes (ssym, type3, type2, type) in
 * file order.  libelf hands us r_info as a 64-bit integer read in the
 * object's byte order, so the fields land in different bits for LE and BE.
 */
static void decode_info(const struct mce_file *f, uint64_t info,
			struct mce_rel *r)
{
	r->type2 = r->type3 = 0;
	if (f->mips64 && !f->msb) {
		r->sym = (uint32_t)info;
		r->type3 = (uint8_t)(info >> 40);
		r->type2 = (uint8_t)(info >> 48);
		r->type = (uint8_t)(info >> 56);
	} else if (f->mips64) {
		r->sym = (uint32_t)(info >> 32);
		r->type3 = (uint8_t)(info >> 16);
		r->type2 = (uint8_t)(info >> 8);
		r->type = (uint8_t)info;
	} else {
		/* gelf widens a 32-bit r_info to the 64-bit layout. */
		r->sym = (uint32_t)GELF_R_SYM(info);
		r->type = (uint32_t)GELF_R_TYPE(info);
	}
}

static uint64_t encode_info(const struct mce_file *f, const struct mce_rel *r)
{
	if (f->mips64 && !f->msb)
		return (uint64_t)r->sym | (uint64_t)r->type3 << 40 |
		       (uint64_t)r->type2 << 48 | (uint64_t)(r->type & 0xff) << 56;
	if (f->mips64)
		return (uint64_t)r->sym << 32 | (uint64_t)r->type3 << 16 |
		       (uint64_t)r->type2 << 8 | (r->type & 0xff);
	return GELF_R_INFO(r->sym, r->type);
}

/* r_info as stored in the object's own structures (not gelf's). */
uint64_t mce_raw_info(const struct mce_file *f, const struct mce_rel *r)
{
	if (f->cls == ELFCLASS32)
		return ELF32_R_INFO(r->sym, r->type);
	return encode_info(f, r);
}

void mce_rel_to_gelf(const struct mce_file *f, const struct mce_rel *r,
		     GElf_Rela *out)
{
	out->r_offset = r->offset;
	out->r_info = encode_info(f, r);
	out->r_addend = r->addend;
}

static size_t rel_size(const struct mce_file *f, bool rela)
{
	if (f->cls == ELFCLASS64)
		return rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
	return rela ? sizeof(Elf32_Rela) : sizeof(Elf32_Rel);
}

/* Whether D holds RS's entries in this host's layout, N of them at least. */
static bool rels_in_place(const struct mce_file *f, const struct mce_sec *rs,
			  const Elf_Data *d, size_t n)
{
	return d->d_type == (rs->is_rela ? ELF_T_RELA : ELF_T_REL) &&
	       n <= d->d_size / rel_size(f, rs->is_rela);
}

/*
 * Relocation I of RS (data D), decoded and checked.  libelf has already
 * put D in this host's layout, so the usual classes are read in place:
 * gelf_getrela()'s checks and copies per entry were a third of the time
 * of a scan of a large .rela.text.
 */
static int read_rel(struct mce_file *f, const struct mce_sec *rs, const Elf_Data *d,
		    size_t i, const struct mce_sec *tgt, struct mce_rel *r)
{
	uint64_t info;
	bool rela = rs->is_rela;
	bool in_place = rels_in_place(f, rs, d, i + 1) &&
			(uintptr_t)d->d_buf % (f->cls == ELFCLASS64 ? _Alignof(Elf64_Rela)
								    : _Alignof(Elf32_Rela)) == 0;

	/* Entry I as the in-memory types REL_T/RELA_T, into R and INFO. */
#define READ_IN_PLACE(REL_T, RELA_T, INFO)					\
	do {									\
		if (rela) {							\
			const RELA_T *e_ = (const RELA_T *)d->d_buf + i;	\
			r->offset = e_->r_offset;				\
			(INFO) = e_->r_info;					\
			r->addend = e_->r_addend;				\
		} else {							\
			const REL_T *e_ = (const REL_T *)d->d_buf + i;		\
			r->offset = e_->r_offset;				\
			(INFO) = e_->r_info;					\
		}								\
	} while (0)

	r->addend = 0;
	if (in_place && f->cls == ELFCLASS64) {
		READ_IN_PLACE(Elf64_Rel, Elf64_Rela, info);
	} else if (in_place) {
		Elf32_Word w;

		READ_IN_PLACE(Elf32_Rel, Elf32_Rela, w);
		/* As gelf widens it. */
		info = GELF_R_INFO(ELF32_R_SYM(w), ELF32_R_TYPE(w));
	} else {
		GElf_Rela ra;
		GElf_Rel rl;

		if (rela ? !gelf_getrela((Elf_Data *)d, (int)i, &ra) :
			   !gelf_getrel((Elf_Data *)d, (int)i, &rl))
			return mce_fail(f, "%s: cannot read relocation %zu", rs->name, i);
		r->offset = rela ? ra.r_offset : rl.r_offset;
		info = rela ? ra.r_info : rl.r_info;
		if (rela)
			r->addend = ra.r_addend;
	}
#undef READ_IN_PLACE
	decode_info(f, info, r);
	if (f->symtab && rs->sh.sh_link == f->symtab->idx && r->sym >= f->nsyms)
		return mce_fail(f, "%s: relocation %zu: symbol index %u out of range",
			    rs->name, i, r->sym);
	/* In a linked image (ld --emit-relocs keeps them, as an x86 kernel
	 * with KASLR is linked) an offset is an address in the section.  An
	 * all-zero entry (R_*_NONE is 0 everywhere) applies nothing: the
	 * kernel's sorttable leaves those of the tables it sorted. */
	bool zero = !r->type && !r->sym && !r->offset && !r->addend;

	if (tgt && tgt->sh.sh_type != SHT_NOBITS && !zero &&
	    r->offset - (mce_linked(f) ? tgt->sh.sh_addr : 0) >= tgt->sh.sh_size)
		return mce_fail(f, "%s: relocation %zu: offset 0x%llx outside %s (%s0x%llx)",
			    rs->name, i, (unsigned long long)r->offset, tgt->name,
			    mce_linked(f) ? "ending at " : "size ",
			    (unsigned long long)(tgt->sh.sh_size +
						 (mce_linked(f) ? tgt->sh.sh_addr : 0)));
	return 0;
}

/* The section RS's offsets are in, when they are offsets into one. */
static const struct mce_sec *rel_target(const struct mce_file *f, const struct mce_sec *rs)
{
	return rs->sh.sh_info && !(rs->sh.sh_flags & SHF_ALLOC) ? &f->secs[rs->sh.sh_info] : NULL;
}

int mce_load_rels(struct mce_file *f, struct mce_sec *rs)
{
	Elf_Data *d;
	const struct mce_sec *tgt = rel_target(f, rs);

	if (rs->rels_loaded)
		return 0;
	d = mce_sec_data(f, rs);
	if (!d)
		return -1;
	rs->nrels = rs->sh.sh_size / rs->sh.sh_entsize;
	rs->rels = calloc(rs->nrels ? rs->nrels : 1, sizeof(*rs->rels));
	if (!rs->rels)
		return mce_fail(f, "out of memory");
	for (size_t i = 0; i < rs->nrels; i++)
		if (read_rel(f, rs, d, i, tgt, &rs->rels[i]) < 0)
			return -1;
	rs->rels_loaded = true;
	return 0;
}

/*
 * The symbol index and offset of entry P of a REL/RELA section in this
 * host's layout: all that the scan for mcount calls needs, read without
 * decoding the rest.
 */
static uint32_t raw_sym_off(const struct mce_file *f, const uint8_t *p, uint64_t *off)
{
	if (f->cls == ELFCLASS64) {
		uint64_t o, info;

		memcpy(&o, p, sizeof(o));
		memcpy(&info, p + sizeof(o), sizeof(info));
		*off = o;
		return (uint32_t)(f->mips64 && !f->msb ? info : info >> 32);
	}
	uint32_t o, info;

	memcpy(&o, p, sizeof(o));
	memcpy(&info, p + sizeof(o), sizeof(info));
	*off = o;
	return info >> 8;
}

long mce_rels_pick(struct mce_file *f, struct mce_sec *rs, const bool *want,
		   struct mce_rel **out)
{
	const struct mce_sec *tgt = rel_target(f, rs);
	struct mce_rel *v;
	size_t n = 0, nrels = rs->nrels;
	Elf_Data *d = NULL;

	*out = NULL;
	if (!f->symtab || rs->sh.sh_link != f->symtab->idx)
		return mce_fail(f, "%s: relocations not against the symbol table", rs->name);
	if (!rs->rels_loaded) {
		if (!(d = mce_sec_data(f, rs)))
			return -1;
		nrels = rs->sh.sh_size / rs->sh.sh_entsize;
		/* Not in this host's layout: decode them all the usual way. */
		if (!rels_in_place(f, rs, d, nrels)) {
			if (mce_load_rels(f, rs) < 0)
				return -1;
			d = NULL;
		}
	}

	/*
	 * Room for every entry, filled by one pass.  Only the pages the
	 * picked few touch are ever faulted in (a block this size is fresh
	 * memory, from the tools' allocator as from glibc's), and a second,
	 * counting pass over the data would cost more than the address space.
	 */
	v = malloc((nrels ? nrels : 1) * sizeof(*v));
	if (!v)
		return mce_fail(f, "out of memory");
	if (!d) {
		for (size_t i = 0; i < nrels; i++)
			if (want[rs->rels[i].sym])
				v[n++] = rs->rels[i];
		*out = v;
		return (long)n;
	}

	/* The scan the kernel's recordmcount does: a load and a compare per
	 * entry, checked as mce_load_rels() checks it; only picks are decoded. */
	uint64_t limit = tgt && tgt->sh.sh_type != SHT_NOBITS ? tgt->sh.sh_size : UINT64_MAX;
	size_t stride = rel_size(f, rs->is_rela);
	const uint8_t *p = d->d_buf;

	for (size_t i = 0; i < nrels; i++, p += stride) {
		uint64_t off;
		uint32_t sym = raw_sym_off(f, p, &off);

		if (sym >= f->nsyms || off >= limit || want[sym]) {
			/* read_rel() says what is wrong with a bad one. */
			if (read_rel(f, rs, d, i, tgt, &v[n]) < 0) {
				free(v);
				return -1;
			}
			n += want[v[n].sym];
		}
	}
	*out = v;
	return (long)n;
}

static int cmp_rel_off(const void *a, const void *b, void *arg)
{
	const struct mce_rel *r = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (r[x].offset != r[y].offset)
		return r[x].offset < r[y].offset ? -1 : 1;
	return x < y ? -1 : x > y;
}

void mce_rels_by_offset(const struct mce_rel *r, size_t n, size_t *idx)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	/* An assembler emits them in offset order: a pass to see it. */
	mc_sort_nearly(idx, n, sizeof(*idx), cmp_rel_off, (void *)r);
}

long mce_rels_within(struct mce_file *f, struct mce_sec *rs, uint64_t lo,
		     uint64_t hi, const size_t **idx)
{
	if (mce_load_rels(f, rs) < 0)
		return -1;
	if (!rs->byoff) {
		rs->byoff = malloc((rs->nrels ? rs->nrels : 1) * sizeof(*rs->byoff));
		if (!rs->byoff)
			return mce_fail(f, "out of memory");
		mce_rels_by_offset(rs->rels, rs->nrels, rs->byoff);
	}
	size_t a = 0, b = rs->nrels;

	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (rs->rels[rs->byoff[mid]].offset < lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (b = a; b < rs->nrels && rs->rels[rs->byoff[b]].offset < hi; b++)
		;
	*idx = rs->byoff + a;
	return (long)(b - a);
}

int mce_store_rel(struct mce_file *f, struct mce_sec *rs, size_t i)
{
	Elf_Data *d = mce_sec_data(f, rs);
	GElf_Rela ra;

	if (!d)
		return -1;
	mce_rel_to_gelf(f, &rs->rels[i], &ra);
	if (rs->is_rela) {
		if (!gelf_update_rela(d, (int)i, &ra))
			return mce_fail(f, "%s: cannot update relocation %zu", rs->name, i);
	} else {
		GElf_Rel rl = { .r_offset = ra.r_offset, .r_info = ra.r_info };

		if (!gelf_update_rel(d, (int)i, &rl))
			return mce_fail(f, "%s: cannot update relocation %zu", rs->name, i);
	}
	/* (Relocation I's bytes in the file: I entries in.) */
	size_t sz = gelf_fsize(f->elf, rs->is_rela ? ELF_T_RELA : ELF_T_REL, 1, EV_CURRENT);

	if (sz)
		mce_sec_edited(f, rs, i * sz, sz);
	else
		mce_sec_rewritten(f, rs);
	return 0;
}

int mce_rel_retire(struct mce_file *f, struct mce_sec *rs, size_t i,
		   uint32_t none)
{
	if (mce_load_rels(f, rs) < 0)
		return -1;
	if (i >= rs->nrels)
		return mce_fail(f, "%s: no relocation %zu", rs->name, i);
	rs->rels[i] = (struct mce_rel){ .offset = rs->rels[i].offset, .type = none };
	return mce_store_rel(f, rs, i);
}

long mce_rels_clear(struct mce_file *f, struct mce_sec *rs)
{
	Elf_Data *d;
	size_t live = 0;

	if (mce_load_rels(f, rs) < 0 || !(d = mce_sec_data(f, rs)))
		return -1;
	for (size_t i = 0; i < rs->nrels; i++)
		live += rs->rels[i].offset || rs->rels[i].type || rs->rels[i].sym ||
			rs->rels[i].addend;
	if (!live)
		return 0;
	/* Zero in memory is zero in the file, in either byte order. */
	memset(d->d_buf, 0, d->d_size);
	memset(rs->rels, 0, rs->nrels * sizeof(*rs->rels));
	free(rs->byoff);
	rs->byoff = NULL;
	mce_sec_rewritten(f, rs);
	return (long)live;
}
