// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * aarch64: -pg emits "bl _mcount" (R_AARCH64_CALL26) after the frame
 * record is set up.  Instructions are 4 bytes and aligned, so the site is
 * the relocated word itself; capstone confirms it is a BL (a B to _mcount
 * is a tail call, not a profiling call).
 */
#include "../capstone.h"
#include "../../common/mcelf.h"

#include <string.h>

static const uint32_t relocs[] = { R_AARCH64_CALL26, R_AARCH64_JUMP26, 0 };

static int arm64_decode(const struct mc_text *t, const struct mce_rel *r,
			struct mc_site *s)
{
	unsigned len, id;

	memset(s, 0, sizeof(*s));
	id = mc_cs_decode(CS_ARCH_ARM64, CS_MODE_ARM, t, r->offset, &len, s);
	if (!id)
		return -1;
	s->off = r->offset;
	s->len = 4;
	s->verdict = id == ARM64_INS_BL ? MC_SITE_CALL : MC_SITE_NOT_CALL;
	return 0;
}

/* BTI c/j/jc (hint #34, #36, #38) may open a function before its
 * patchable NOPs. */
static unsigned arm64_landing_pad(const struct mc_text *t, uint64_t off)
{
	uint32_t w;

	if (off + 4 > t->size)
		return 0;
	w = mc_load32(t, off);
	return w == 0xd503245f || w == 0xd503249f || w == 0xd50324df ? 4 : 0;
}

static const struct mc_nop nops[] = {
	{ .len = 4, .word = 4, .w = { 0xd503201f } },	/* nop (hint #0) */
	{ 0 }
};

const struct mc_arch mc_arch_aarch64 = {
	.name = "aarch64",
	.machine = EM_AARCH64,
	.elfclass = ELFCLASS64,
	.table_reloc = R_AARCH64_ABS64,
	.none_reloc = R_AARCH64_NONE,
	.call_relocs = relocs,
	.kernel_nops_untraced = true,
	.decode = arm64_decode,
	.nops = nops,
	.landing_pad = arm64_landing_pad,
};
