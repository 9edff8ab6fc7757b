// SPDX-License-Identifier: GPL-2.0-or-later
#include "sites.h"

#include "../common/diag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const op_state_name[] = { "call", "nop", "patchable", "other" };

static const char *const table_names[] = { "__mcount_loc", "__patchable_function_entries" };

const struct mc_arch *op_open(struct mce_file *f, const char *path)
{
	const struct mc_arch *a;

	if (mce_open(f, path) < 0) {
		mc_error(path, "%s", f->err);
		return NULL;
	}
	if (f->eh.e_type != ET_REL) {
		mc_error(path, "only relocatable objects are supported so far (ELF type %u)",
			 f->eh.e_type);
		return NULL;
	}
	a = mc_arch_find(f->eh.e_machine, f->cls);
	if (!a) {
		mc_error(path, "unsupported machine %u", f->eh.e_machine);
		return NULL;
	}
	/* Validate every relocation up front: a bad one is an error here,
	 * never something a later pass silently skips. */
	for (size_t i = 1; i < f->shnum; i++)
		if ((f->secs[i].sh.sh_type == SHT_REL || f->secs[i].sh.sh_type == SHT_RELA) &&
		    mce_load_rels(f, &f->secs[i]) < 0) {
			mc_error(path, "%s", f->err);
			return NULL;
		}
	return a;
}

static bool is_mcount_target(const struct mce_file *f, uint32_t sym)
{
	return sym < f->nsyms && mc_is_mcount_name(f->syms[sym].name);
}

void op_classify(struct mce_file *f, const struct mc_arch *a, uint32_t shndx,
		 uint64_t off, struct op_entry *e)
{
	struct mce_sec *tx = &f->secs[shndx];
	Elf_Data *d = mce_sec_data(f, tx);
	struct mc_text t = { .msb = f->msb, .elfclass = f->cls, .boundary = off };

	e->state = OP_OTHER;
	e->len = 0;
	e->target = NULL;
	e->bytes[0] = 0;
	if (!d || !d->d_buf || off >= d->d_size)
		return;
	t.buf = d->d_buf;
	t.size = d->d_size;

	/* A call: a relocation against an mcount symbol inside the first
	 * instruction(s) at OFF, that decodes as a call starting at OFF. */
	if (tx->rela && mce_load_rels(f, tx->rela) == 0) {
		struct mce_sec *rs = tx->rela;

		for (size_t i = 0; i < rs->nrels; i++) {
			const struct mce_rel *r = &rs->rels[i];
			struct mc_site s;

			if (r->offset < off || r->offset >= off + MC_MAX_SITE ||
			    !is_mcount_target(f, r->sym) || !mc_reloc_in(a->call_relocs, r->type))
				continue;
			if (a->decode(&t, r, &s) == 0 && s.verdict == MC_SITE_CALL && s.off == off) {
				e->state = OP_CALL;
				e->len = s.len;
				e->target = f->syms[r->sym].name;
				return;
			}
		}
	}
	/* NOPs from the architecture's table; repeats of the shortest are a
	 * patchable-entry run. */
	for (const struct mc_nop *n = a->nops; n && n->len; n++) {
		uint8_t want[MC_MAX_SITE];
		struct mc_site s = { .off = off, .len = n->len };

		if (off + n->len > t.size || mc_make_nop(a, &t, &s, want) < 0 ||
		    memcmp(want, t.buf + off, n->len))
			continue;
		unsigned k = 1;
		while (n == a->nops && off + (k + 1) * n->len <= t.size &&
		       !memcmp(want, t.buf + off + k * n->len, n->len))
			k++;
		e->state = k > 1 ? OP_PATCHABLE : OP_NOP;
		e->len = (uint8_t)(k * n->len > 255 ? 255 : k * n->len);
		return;
	}
	size_t m = t.size - off < 8 ? t.size - off : 8;
	for (size_t i = 0, at = 0; i < m; i++)
		at += (size_t)snprintf(e->bytes + at, sizeof(e->bytes) - at, "%s%02x",
				       i ? " " : "", t.buf[off + i]);
}

static int push(struct op_sites *s, const struct op_entry *e)
{
	struct op_entry *n = realloc(s->v, (s->n + 1) * sizeof(*n));

	if (!n)
		return -1;
	s->v = n;
	s->v[s->n++] = *e;
	return 0;
}

int op_sites_load(struct mce_file *f, const struct mc_arch *a, struct op_sites *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t k = 1; k < f->shnum; k++) {
		struct mce_sec *tab = &f->secs[k];
		const char *name = NULL;

		for (size_t j = 0; j < sizeof(table_names) / sizeof(table_names[0]); j++)
			if (!strcmp(tab->name, table_names[j]))
				name = table_names[j];
		if (!name || tab->sh.sh_type != SHT_PROGBITS)
			continue;
		s->ntables++;
		Elf_Data *d = mce_sec_data(f, tab);
		if (!d)
			return -1;
		size_t n = tab->sh.sh_size / f->addrsize;
		bool *seen = calloc(n + 1, sizeof(*seen));
		size_t first = s->n;

		if (!seen)
			return -1;
		for (size_t i = 0; i < n; i++) {
			struct op_entry e = { .idx = i, .table = name };

			if (push(s, &e) < 0) {
				free(seen);
				return -1;
			}
		}
		if (tab->rela) {
			struct mce_sec *rs = tab->rela;

			if (mce_load_rels(f, rs) < 0) {
				free(seen);
				return -1;
			}
			for (size_t i = 0; i < rs->nrels; i++) {
				const struct mce_rel *r = &rs->rels[i];
				size_t at = r->offset / f->addrsize;

				if (r->type == a->none_reloc || at >= n || r->sym >= f->nsyms)
					continue;
				const struct mce_sym *m = &f->syms[r->sym];
				int64_t add = rs->is_rela ? r->addend : 0;

				if (!rs->is_rela) {
					/* REL: the addend is the entry itself (sign-extended). */
					uint64_t v = mce_get_addr(f, (uint8_t *)d->d_buf + at * f->addrsize);
					add = f->addrsize == 4 ? (int32_t)v : (int64_t)v;
				}
				struct op_entry *e = &s->v[first + at];
				e->resolved = m->shndx && m->shndx < f->shnum;
				e->shndx = m->shndx;
				e->off = m->value + (uint64_t)add;
				seen[at] = true;
			}
		}
		free(seen);
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].resolved && mce_sec_exec(&f->secs[s->v[i].shndx]))
			op_classify(f, a, s->v[i].shndx, s->v[i].off, &s->v[i]);
	return 0;
}

void op_sites_free(struct op_sites *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}
