// SPDX-License-Identifier: GPL-2.0-or-later
#include "site.h"

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
