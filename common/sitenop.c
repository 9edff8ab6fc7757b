// SPDX-License-Identifier: GPL-2.0-or-later
#include "sitenop.h"

int mc_nop_site(struct mce_file *f, const struct mc_arch *a, struct mce_sec *tx,
		struct mce_sec *rs, const struct mc_site *site)
{
	Elf_Data *d = mce_sec_data(f, tx);
	uint8_t buf[MC_MAX_SITE * 2];
	size_t total = (size_t)site->pre + site->len + site->post;

	if (!d || !d->d_buf)
		return -1;
	struct mc_text t = { .buf = d->d_buf, .size = d->d_size, .msb = f->msb,
			     .elfclass = f->cls };

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
