// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * riscv64.  "call _mcount" is the pair
 *     auipc ra, 0            R_RISCV_CALL_PLT (+ R_RISCV_RELAX)
 *     jalr  ra, 0(ra)
 * with the relocation on the auipc.  Debian 12's capstone predates RISC-V,
 * so the two instructions are checked by hand: opcode, rd of the auipc,
 * and a jalr through that same register.  The kernel's recordmcount does
 * not know RISC-V at all.
 */
#include "../arch.h"
#include "../../common/mcelf.h"

#include <stdio.h>
#include <string.h>

#ifndef R_RISCV_CALL_PLT
#define R_RISCV_CALL_PLT 19
#endif

static const uint32_t relocs[] = { R_RISCV_CALL, R_RISCV_CALL_PLT, 0 };

static int riscv_decode(const struct mc_text *t, const struct mce_rel *r,
			struct mc_site *s)
{
	uint64_t o = r->offset;

	memset(s, 0, sizeof(*s));
	if (o + 8 > t->size) {
		snprintf(s->what, sizeof(s->what), "call pair runs past the section");
		return -1;
	}
	uint32_t auipc = mc_load32(t, o), jalr = mc_load32(t, o + 4);
	unsigned rd = (auipc >> 7) & 31;

	s->off = o;
	s->len = 8;
	snprintf(s->what, sizeof(s->what), "%08x %08x", auipc, jalr);
	bool is_auipc = (auipc & 0x7f) == 0x17;
	bool is_jalr = (jalr & 0x7f) == 0x67 && ((jalr >> 12) & 7) == 0 &&
		       ((jalr >> 15) & 31) == rd;
	/* A call links (rd != x0); "tail" uses jalr x0 and is not a call. */
	s->verdict = is_auipc && is_jalr && ((jalr >> 7) & 31) != 0 ?
		MC_SITE_CALL : MC_SITE_NOT_CALL;
	return 0;
}

static const struct mc_nop nops[] = {
	{ .len = 8, .word = 4, .w = { 0x00000013, 0x00000013 } },	/* 2 x addi x0,x0,0 */
	{ 0 }
};

const struct mc_arch mc_arch_riscv64 = {
	.name = "riscv64",
	.machine = EM_RISCV,
	.elfclass = ELFCLASS64,
	.table_reloc = R_RISCV_64,
	.none_reloc = R_RISCV_NONE,
	.call_relocs = relocs,
	.decode = riscv_decode,
	.nops = nops,
	.site_align = 4,
};
