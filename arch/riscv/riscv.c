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
#include "tramp.h"
#include <elf.h>

extern const char mc_tramp_riscv64[];

#include <stdio.h>
#include <string.h>

#ifndef R_RISCV_CALL_PLT
#define R_RISCV_CALL_PLT 19
#endif

static const uint32_t relocs[] = { R_RISCV_CALL, R_RISCV_CALL_PLT, 0 };

static int riscv_decode(const struct mc_text *t, uint64_t r_offset, uint32_t r_type,
			struct mc_site *s)
{
	(void)r_type;	/* the bytes alone tell the site */
	uint64_t o = r_offset;

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

static int64_t sext(uint64_t v, unsigned bits)
{
	return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* Linked code: auipc+jalr through the same register is one call; jal
 * with a link register is a call (the relaxed form).  Compressed
 * instructions are 2 bytes. */
static int riscv_insn(const struct mc_text *t, uint64_t off, uint64_t pc,
		      struct mc_insn *out)
{
	memset(out, 0, sizeof(*out));
	if (off + 2 > t->size)
		return -1;
	if ((mc_load16(t, off) & 3) != 3) {
		out->len = 2;
		return 0;
	}
	if (off + 4 > t->size)
		return -1;
	uint32_t w = mc_load32(t, off);

	out->len = 4;
	if ((w & 0x7f) == 0x6f && ((w >> 7) & 31)) {	/* jal rd!=0 */
		uint64_t imm = ((w >> 31) & 1) << 20 | ((w >> 12) & 0xff) << 12 |
			       ((w >> 20) & 1) << 11 | ((w >> 21) & 0x3ff) << 1;
		out->call = out->has_target = true;
		out->target = pc + (uint64_t)sext(imm, 21);
		return 0;
	}
	if ((w & 0x7f) != 0x17 || off + 8 > t->size)
		return 0;
	uint32_t j = mc_load32(t, off + 4);
	unsigned rd = (w >> 7) & 31;

	if ((j & 0x7f) == 0x67 && ((j >> 12) & 7) == 0 && ((j >> 15) & 31) == rd &&
	    ((j >> 7) & 31)) {
		out->len = 8;
		out->call = out->has_target = true;
		out->target = pc + (uint64_t)sext(w & 0xfffff000, 32) +
			      (uint64_t)sext(j >> 20, 12);
	}
	return 0;
}

/* A PLT entry: auipc t3, hi; ld t3, lo(t3); jalr t1, t3; nop. */
static uint64_t riscv_plt_slot(const struct mc_text *t, uint64_t off, uint64_t pc)
{
	if (off + 12 > t->size)
		return 0;
	uint32_t au = mc_load32(t, off), ld = mc_load32(t, off + 4);
	uint32_t jr = mc_load32(t, off + 8);

	if ((au & 0xfff) != 0xe17 || (ld & 0xfffff) != 0xe3e03 || (jr & 0xfffff) != 0xe0367)
		return 0;
	return pc + (uint64_t)sext(au & 0xfffff000, 32) + (uint64_t)sext(ld >> 20, 12);
}

static const struct mc_nop nops[] = {
	{ .len = 8, .word = 4, .w = { 0x00000013, 0x00000013 } },	/* 2 x addi x0,x0,0 */
	{ .len = 4, .word = 4, .w = { 0x00000013 } },
	{ .len = 2, .word = 2, .w = { 0x0001 } },			/* c.nop */
	{ 0 }
};

/*
 * Run-time sites (libmcloc's arch/riscv/runtime.c): "auipc t0, hi", then
 * the NOP that becomes "jalr t0, lo(t0)".  One auipc reaches a 4 KiB
 * window, which may split the pair of trampoline entries (args, regs);
 * the pair repeats MC_RV_TRAMP_MIRROR bytes on (tramp.c), so that every
 * window holds one whole pair, and HI picks it.  The 8 bytes were NOPs of
 * either size (compressed or not).
 */
#define RV_NOP 0x00000013u

static unsigned riscv_runtime_site_len(const struct mc_text *t, uint64_t off)
{
	if (off + 8 > t->size)
		return 0;
	uint32_t au = mc_load32(t, off), j = mc_load32(t, off + 4);

	/* auipc t0, then a NOP or jalr t0, lo(t0); at a -pg site, auipc t1
	 * and jalr t0, lo(t1). */
	return ((au & 0xfff) == 0x297 && (j == RV_NOP || (j & 0xfffff) == 0x282e7)) ||
	       ((au & 0xfff) == 0x317 && (j == RV_NOP || (j & 0xfffff) == 0x302e7)) ? 8 : 0;
}

static int riscv_runtime_site(const struct mc_text *t, uint64_t off, uint64_t pc,
			      uint64_t targs, uint64_t tregs, uint8_t out[8])
{
	if (off + 8 > t->size)
		return -1;
	for (uint64_t i = 0; i < 8;) {
		if (mc_load16(t, off + i) == 0x0001)
			i += 2;
		else if (i + 4 <= 8 && mc_load32(t, off + i) == RV_NOP)
			i += 4;
		else
			return -1;
	}
	int64_t hi;

	if (!mc_rv_tramp_window(pc, targs, tregs, &hi))
		return -1;
	mc_store32(t, out, (uint32_t)hi << 12 | 5u << 7 | 0x17);	/* auipc t0, hi */
	mc_store32(t, out + 4, RV_NOP);
	return 0;
}

/*
 * A -pg site: the 8 bytes of NOPs recordmcount --nop left of "call
 * _mcount" (the linker cannot relax a call it no longer sees) become
 * "auipc t1, hi; nop".  The jalr the runtime toggles in links through t0
 * all the same; t1, which the trampolines do not read, marks the site as
 * one after the prologue.
 */
static int riscv_runtime_mcount_site(const struct mc_text *t, uint64_t off, uint64_t pc,
				     uint64_t targs, uint64_t tregs, uint64_t *at, uint8_t out[8])
{
	int64_t hi;

	*at = off;
	if (off + 8 > t->size)
		return -1;
	uint32_t au = mc_load32(t, off), j = mc_load32(t, off + 4);
	if ((au & 0xfff) == 0x317 && riscv_runtime_site_len(t, off))
		return 1;
	if (au != RV_NOP || j != RV_NOP || !mc_rv_tramp_window(pc, targs, tregs, &hi))
		return -1;
	mc_store32(t, out, (uint32_t)hi << 12 | 6u << 7 | 0x17);	/* auipc t1, hi */
	mc_store32(t, out + 4, RV_NOP);
	return 0;
}

const struct mc_arch mc_arch_riscv64 = {
	.name = "riscv64",
	.nm_mapping_letters = "dx",
	.machine = EM_RISCV,
	.elfclass = ELFCLASS64,
	.table_reloc = R_RISCV_64,
	.none_reloc = R_RISCV_NONE,
	.call_relocs = relocs,
	.decode = riscv_decode,
	.nops = nops,
	.site_align = 4,
	.relax_reloc = R_RISCV_RELAX,
	.relative_reloc = R_RISCV_RELATIVE,
	.extable = MC_EXTABLE_REL_DATA,
	/* (-fpatchable-function-entry=8,4, where the kernel builds riscv so;
	 * 6.12 does not, nor sort its table at build time: its sorttable
	 * would zero every such entry.) */
	.kernel_mcount_before = 8,
	.nm_hides_empty_names = true,
	.tramp_asm = mc_tramp_riscv64,
	.cross_prefix = "riscv64-linux-gnu-",
	.insn = riscv_insn,
	.plt_slot = riscv_plt_slot,
	.runtime_site = riscv_runtime_site,
	.runtime_site_len = riscv_runtime_site_len,
	.runtime_mcount_site = riscv_runtime_mcount_site,
};
