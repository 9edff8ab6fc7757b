// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ppc64 (ELFv2 little-endian and ELFv1 big-endian).  -mprofile-kernel
 * emits "mflr r0; bl _mcount" right after the global entry point's TOC
 * setup; plain -pg emits "bl _mcount" after the frame is built.  Either
 * way the site is the BL (R_PPC64_REL24) and its NOP is "ori 0,0,0".
 * ELFv1 objects may name the entry "._mcount".
 */
#include "../capstone.h"
#include <elf.h>

#include <string.h>

#ifndef R_PPC64_REL24_NOTOC
#define R_PPC64_REL24_NOTOC 116
#endif

static const uint32_t relocs[] = { R_PPC64_REL24, R_PPC64_REL24_NOTOC, 0 };

static int ppc64_decode(const struct mc_text *t, uint64_t r_offset, uint32_t r_type,
			struct mc_site *s)
{
	(void)r_type;	/* the bytes alone tell the site */
	unsigned len;
	uint32_t insn;

	memset(s, 0, sizeof(*s));
	if (!mc_cs_decode(CS_ARCH_PPC, CS_MODE_64, t, r_offset, &len, s))
		return -1;
	insn = mc_load32(t, r_offset);
	s->off = r_offset;
	s->len = 4;
	/* I-form branch with LK=1, AA=0: opcode 18. */
	s->verdict = (insn >> 26) == 18 && (insn & 3) == 1 ?
		MC_SITE_CALL : MC_SITE_NOT_CALL;
	return 0;
}

static const struct mc_nop nops[] = {
	{ .len = 4, .word = 4, .w = { 0x60000000 } },	/* ori 0,0,0 */
	{ 0 }
};

const struct mc_arch mc_arch_ppc64 = {
	.name = "ppc64",
	.machine = EM_PPC64,
	.elfclass = ELFCLASS64,
	.table_reloc = R_PPC64_ADDR64,
	.none_reloc = R_PPC64_NONE,
	.call_relocs = relocs,
	.decode = ppc64_decode,
	.nops = nops,
	.relative_reloc = R_PPC64_RELATIVE,
	.extable = MC_EXTABLE_REL,
};
