// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * MIPS (mips64el is the one Debian ships a kernel for; 32-bit works the
 * same way).  Three call forms reach _mcount:
 *   jal _mcount                         R_MIPS_26, then a delay slot
 *   lui v1,%hi(_mcount)                 R_MIPS_HI16   (-mlong-calls, the
 *   [d]addiu v1,v1,%lo(_mcount)         R_MIPS_LO16    kernel's modules)
 *   move at,ra; jalr v1; <delay slot>
 *   (64-bit addresses: lui/lui/daddiu/daddiu, R_MIPS_HIGHEST first)
 *   ld/lw t9,%call16(_mcount)(gp)       R_MIPS_CALL16  (PIC userspace)
 *   ... jalr t9                         R_MIPS_JALR (a hint)
 * The site starts at the first instruction of the sequence; the later
 * relocations of the same sequence are parts of it, never sites of their
 * own (the kernel's tool drops the LO16 by its distance of 4 bytes).
 * 64-bit objects use the three-type r_info that the ELF layer decodes.
 */
#include "../capstone.h"
#include <elf.h>

#include <stdio.h>
#include <string.h>

static const uint32_t relocs[] = {
	R_MIPS_26, R_MIPS_HI16, R_MIPS_LO16, R_MIPS_CALL16, R_MIPS_GOT_DISP,
	R_MIPS_JALR, R_MIPS_CALL_HI16, R_MIPS_CALL_LO16, R_MIPS_HIGHEST,
	R_MIPS_HIGHER, 0
};

static cs_mode mode_of(const struct mc_text *t)
{
	return t->elfclass == ELFCLASS64 ? CS_MODE_MIPS64 : CS_MODE_MIPS32;
}

/* Index of the "jalr REG" that ends a sequence starting at OFF, or 0. */
static uint64_t find_jalr(const struct mc_text *t, uint64_t off, unsigned reg)
{
	for (uint64_t o = off + 4; o + 4 <= t->size && o <= off + 32; o += 4) {
		uint32_t w = mc_load32(t, o);

		/* SPECIAL, funct 9 (jalr), rs = REG, rd = ra */
		if ((w >> 26) == 0 && (w & 0x3f) == 9 && ((w >> 21) & 31) == reg)
			return o;
	}
	return 0;
}

static int mips_decode(const struct mc_text *t, uint64_t r_offset, uint32_t r_type,
		       struct mc_site *s)
{
	unsigned len, id;
	uint64_t o = r_offset, j;

	memset(s, 0, sizeof(*s));
	id = mc_cs_decode(CS_ARCH_MIPS, mode_of(t), t, o, &len, s);
	if (!id)
		return -1;
	s->off = o;
	s->len = 4;
	s->verdict = MC_SITE_NOT_CALL;
	switch (r_type) {
	case R_MIPS_26:
		if (id == MIPS_INS_JAL) {
			s->verdict = MC_SITE_CALL;
			s->post = 4;	/* the delay slot */
			s->mode = 1;
		}
		break;
	case R_MIPS_HIGHEST:	/* 64-bit long call: highest, hi, higher, lo */
	case R_MIPS_HI16:
	case R_MIPS_CALL_HI16:
		if (id == MIPS_INS_LUI &&
		    (j = find_jalr(t, o, (mc_load32(t, o) >> 16) & 31))) {
			s->verdict = MC_SITE_CALL;
			s->len = (uint8_t)(j + 8 - o);	/* through the delay slot */
			s->mode = 2;
		}
		break;
	case R_MIPS_CALL16:
	case R_MIPS_GOT_DISP:
		if ((id == MIPS_INS_LD || id == MIPS_INS_LW) &&
		    (j = find_jalr(t, o, (mc_load32(t, o) >> 16) & 31))) {
			s->verdict = MC_SITE_CALL;
			s->len = (uint8_t)(j + 8 - o);
			s->mode = 2;
		}
		break;
	case R_MIPS_HIGHER:
	case R_MIPS_LO16:
	case R_MIPS_CALL_LO16:
	case R_MIPS_JALR:
		/* The rest of a sequence whose first relocation is the site. */
		s->verdict = MC_SITE_PART;
		break;
	}
	return 0;
}

static bool is_sp_adjust(uint32_t w)
{
	unsigned op = w >> 26, rs = (w >> 21) & 31, rt = (w >> 16) & 31;

	return (op == 9 || op == 25) && rs == 29 && rt == 29;	/* [d]addiu sp,sp,imm */
}

static int mips_make_nop(const struct mc_text *t, const struct mc_site *s,
			 uint8_t *out)
{
	if (s->pre)
		return -1;
	if (s->mode == 1) {
		/* jal: the delay slot still runs without the call, but an
		 * o32-style stack adjustment there is undone by _mcount, so it
		 * must go with the call. */
		uint32_t slot = mc_load32(t, s->off + 4);

		mc_store32(t, out, 0);
		mc_store32(t, out + 4, is_sp_adjust(slot) ? 0 : slot);
		return 0;
	}
	if (s->mode == 2) {
		/* One branch over the whole sequence, as the kernel's MIPS
		 * ftrace does for modules; the address load in its delay slot
		 * is harmless.  The rest keeps its bytes. */
		memcpy(out, t->buf + s->off, s->len);
		mc_store32(t, out, 0x10000000 | ((s->len - 4u) / 4u));	/* b +len */
		return 0;
	}
	return -1;
}

/* A jal became a NOP; a long-call sequence a branch over itself. */
static unsigned mips_is_nop(const struct mc_text *t, uint64_t off)
{
	if (off + 4 > t->size)
		return 0;
	uint32_t w = mc_load32(t, off);

	if (w == 0)
		return 4;
	if ((w & 0xffff0000) == 0x10000000 && (w & 0xffff) && (w & 0xffff) < MC_MAX_SITE / 4)
		return 4 * ((w & 0xffff) + 1);
	return 0;
}

const struct mc_arch mc_arch_mips64 = {
	.name = "mips64",
	.machine = EM_MIPS,
	.elfclass = ELFCLASS64,
	.table_reloc = R_MIPS_64,
	.none_reloc = R_MIPS_NONE,
	.kernel_pair_distance = 4,
	.call_relocs = relocs,
	.decode = mips_decode,
	.make_nop = mips_make_nop,
	.is_nop = mips_is_nop,
	.extable = MC_EXTABLE_ABS,
};

const struct mc_arch mc_arch_mips32 = {
	.name = "mips",
	.machine = EM_MIPS,
	.elfclass = ELFCLASS32,
	.table_reloc = R_MIPS_32,
	.none_reloc = R_MIPS_NONE,
	.kernel_pair_distance = 4,
	.call_relocs = relocs,
	.decode = mips_decode,
	.make_nop = mips_make_nop,
	.is_nop = mips_is_nop,
	.extable = MC_EXTABLE_ABS,
};
