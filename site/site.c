// SPDX-License-Identifier: GPL-2.0-or-later
#include "site.h"

#include "../common/diag.h"

#include <stdlib.h>

struct mc_text mc_text_of(struct mce_file *f, struct mce_sec *s, uint64_t boundary)
{
	Elf_Data *d = mce_sec_data(f, s);
	struct mc_text t = { .msb = f->msb, .elfclass = f->cls, .boundary = boundary };

	if (d && d->d_buf) {
		t.buf = d->d_buf;
		t.size = d->d_size;
	}
	return t;
}

int mc_nop_site(struct mce_file *f, const struct mc_arch *a, struct mce_sec *tx,
		struct mce_sec *rs, const struct mc_site *site)
{
	struct mc_text t = mc_text_of(f, tx, 0);
	uint8_t buf[MC_MAX_SITE * 2];
	size_t total = (size_t)site->pre + site->len + site->post;

	if (!t.buf)
		return mce_fail(f, "section %s: no data", tx->name);
	if (total > sizeof(buf) || site->off < site->pre ||
	    mc_make_nop(a, &t, site, buf) < 0)
		return 1;
	uint64_t lo = site->off - site->pre, hi = site->off + site->len;

	if (mce_patch(f, tx, lo, buf, total) < 0)
		return -1;
	if (!rs)
		return 0;

	const size_t *at;
	long n = mce_rels_within(f, rs, lo, hi, &at);

	if (n < 0)
		return -1;
	for (long i = 0; i < n; i++)
		if (rs->rels[at[i]].type != a->none_reloc &&
		    mce_rel_retire(f, rs, at[i], a->none_reloc) < 0)
			return -1;
	return 0;
}

unsigned mc_nop_prefix(const struct mc_arch *a, const struct mc_text *t, uint64_t off,
		       unsigned min)
{
	unsigned total = 0, len = 1;

	while (a->any_nop && total < min && off + total < t->size && len)
		total += len = a->any_nop(t, off + total);
	return total >= min ? total : 0;
}

/* Relocation R, which marks no call to an mcount symbol: said with -v. */
static void note_not_call(struct mce_file *f, struct mce_sec *tx, const struct mce_rel *r,
			  uint64_t off, const char *what)
{
	char where[256];

	if (!mc_noting())
		return;
	mce_where(f, (uint32_t)tx->idx, off, where, sizeof(where));
	if (what)
		mc_note(f->path, "%s: %s is not a call to %s; not recorded", where, what,
			f->syms[r->sym].name);
	else
		mc_note(f->path, "%s: relocation type %u against %s is not a call; not recorded",
			where, r->type, f->syms[r->sym].name);
}

int mc_rel_sites(struct mce_file *f, const struct mc_arch *a, struct mce_sec *tx,
		 const struct mce_rel *pick, size_t n, const bool *skip, bool describe,
		 void (*push)(void *ctx, const struct mc_site *site), void *ctx)
{
	/* A linked image's relocations name addresses, a site its offset. */
	uint64_t base = mce_linked(f) ? tx->sh.sh_addr : 0, prev_end = 0;
	size_t *idx = malloc((n + 1) * sizeof(*idx));
	struct mc_text t = mc_text_of(f, tx, 0);
	bool have_prev = false;
	char where[256];
	int ret = -1;

	if (!idx) {
		mc_error(f->path, "out of memory");
		return -1;
	}
	if (!t.buf && tx->sh.sh_size) {
		mc_error(f->path, "%s", f->err[0] ? f->err : "section without data");
		goto out;
	}
	t.describe = describe;
	mce_rels_by_offset(pick, n, idx);
	for (size_t j = 0; j < n; j++) {
		const struct mce_rel *r = &pick[idx[j]];
		uint64_t off = r->offset - base;
		struct mc_site s;

		if ((skip && skip[idx[j]]) || r->offset < base)
			continue;
		if (have_prev && off < prev_end)
			continue;	/* inside the site just recorded */
		if (!mc_reloc_in(a->call_relocs, r->type)) {
			note_not_call(f, tx, r, off, NULL);
			continue;
		}
		t.boundary = 0;
		if (a->variable_length)
			mce_label_before(f, (uint32_t)tx->idx, off, &t.boundary);
		if (have_prev && prev_end <= off && prev_end > t.boundary)
			t.boundary = prev_end;
		if (a->decode(&t, off, r->type, &s) < 0) {
			mc_error(f->path, "%s: cannot decode the call to %s: %s",
				 mce_where(f, (uint32_t)tx->idx, off, where, sizeof(where)),
				 f->syms[r->sym].name, s.what);
			goto out;
		}
		if (s.verdict == MC_SITE_NOT_CALL)
			note_not_call(f, tx, r, off, s.what);
		if (s.verdict != MC_SITE_CALL || (have_prev && s.off < prev_end))
			continue;	/* (or another relocation of the same call) */
		prev_end = s.off + s.len;
		have_prev = true;
		push(ctx, &s);
	}
	ret = 0;
out:
	free(idx);
	return ret;
}
