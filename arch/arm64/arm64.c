// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * aarch64: -pg emits "bl _mcount" (R_AARCH64_CALL26) after the frame
 * record is set up.  Instructions are 4 bytes and aligned, so the site is
 * the relocated word itself; capstone confirms it is a BL (a B to _mcount
 * is a tail call, not a profiling call).
 */
#include "../capstone.h"
#include <elf.h>

extern const char mc_tramp_aarch64[];

#include <string.h>

static const uint32_t relocs[] = { R_AARCH64_CALL26, R_AARCH64_JUMP26, 0 };

static int arm64_decode(const struct mc_text *t, uint64_t r_offset, uint32_t r_type,
			struct mc_site *s)
{
	(void)r_type;	/* the bytes alone tell the site */
	unsigned len, id;

	memset(s, 0, sizeof(*s));
	id = mc_cs_decode(CS_ARCH_ARM64, CS_MODE_ARM, t, r_offset, &len, s);
	if (!id)
		return -1;
	s->off = r_offset;
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

static int64_t sext(uint64_t v, unsigned bits)
{
	return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* Linked code: BL is found by its encoding and confirmed by capstone, so
 * a sweep over a whole image decodes only the candidates in full. */
static int arm64_decode_linked(const struct mc_text *t, uint64_t off, uint64_t pc,
		      struct mc_insn *out)
{
	unsigned len;
	uint32_t w;

	memset(out, 0, sizeof(*out));
	if (off + 4 > t->size)
		return -1;
	out->len = 4;
	w = mc_load32(t, off);
	if ((w & 0xfc000000) != 0x94000000)
		return 0;
	if (mc_cs_decode(CS_ARCH_ARM64, CS_MODE_ARM, t, off, &len, NULL) != ARM64_INS_BL)
		return 0;
	out->call = out->has_target = true;
	out->target = pc + (uint64_t)(sext(w & 0x03ffffff, 26) * 4);
	return 0;
}

/* A PLT entry: adrp x16, page; ldr x17, [x16, #lo]; add x16, x16, #lo;
 * br x17 (after a BTI under -mbranch-protection). */
static uint64_t arm64_plt_slot(const struct mc_text *t, uint64_t off, uint64_t pc)
{
	if (arm64_landing_pad(t, off)) {
		off += 4;
		pc += 4;
	}
	if (off + 16 > t->size)
		return 0;
	uint32_t adrp = mc_load32(t, off), ldr = mc_load32(t, off + 4);
	uint32_t br = mc_load32(t, off + 12);

	if ((adrp & 0x9f00001f) != 0x90000010 || (ldr & 0xffc003ff) != 0xf9400211 ||
	    br != 0xd61f0220)
		return 0;
	int64_t page = sext(((adrp >> 29) & 3) | ((adrp >> 3) & 0x1ffffc), 21) * 4096;

	return (pc & ~(uint64_t)0xfff) + (uint64_t)page + ((ldr >> 10) & 0xfff) * 8;
}

static const struct mc_nop nops[] = {
	{ .len = 4, .word = 4, .w = { 0xd503201f } },	/* nop (hint #0) */
	{ 0 }
};

/*
 * Run-time sites (libmcloc's arch/arm64/runtime.c): "mov x9, x30", which
 * keeps the caller's return address across the bl, then the NOP that
 * becomes "bl mcloc_tramp_*".  A -pg site, after the prologue, has the
 * same pair in another spelling, "add x9, x30, #0", written over GCC's
 * "mov x0, x30" (the argument to _mcount, which no longer runs): the
 * runtime tells the two apart by it, since only at the entry is x30 still
 * the return address the function will use.
 */
#define A64_NOP		0xd503201fu
#define A64_MOV_X9_X30	0xaa1e03e9u
#define A64_ADD_X9_X30	0x910003c9u
#define A64_MOV_X0_X30	0xaa1e03e0u

static unsigned arm64_runtime_site_len(const struct mc_text *t, uint64_t off)
{
	if (off + 8 > t->size)
		return 0;
	uint32_t f = mc_load32(t, off), w = mc_load32(t, off + 4);

	return (f == A64_MOV_X9_X30 || f == A64_ADD_X9_X30) &&
	       (w == A64_NOP || (w & 0xfc000000) == 0x94000000) ? 8 : 0;
}

/* The pair FIRST, NOP at OFF (address PC of the NOP: PC) into OUT, if
 * the trampolines are within a bl's reach of the NOP at PC. */
static int arm64_pair(uint32_t first, uint64_t pc, uint64_t targs, uint64_t tregs,
		      const struct mc_text *t, uint8_t out[8])
{
	const int64_t reach = 1ll << 27;	/* bl: +-128 MiB */
	int64_t da = (int64_t)(targs - pc), dr = (int64_t)(tregs - pc);

	if (da < -reach || da >= reach || dr < -reach || dr >= reach)
		return -1;
	mc_store32(t, out, first);
	mc_store32(t, out + 4, A64_NOP);
	return 0;
}

static int arm64_runtime_site(const struct mc_text *t, uint64_t off, uint64_t pc,
			      uint64_t targs, uint64_t tregs, uint8_t out[8])
{
	if (off + 8 > t->size || mc_load32(t, off) != A64_NOP || mc_load32(t, off + 4) != A64_NOP)
		return -1;
	return arm64_pair(A64_MOV_X9_X30, pc + 4, targs, tregs, t, out);
}

static int arm64_runtime_mcount_site(const struct mc_text *t, uint64_t off, uint64_t pc,
				     uint64_t targs, uint64_t tregs, uint64_t *at, uint8_t out[8])
{
	if (off < 4 || off + 4 > t->size)
		return -1;
	*at = off - 4;
	if (mc_load32(t, off - 4) == A64_ADD_X9_X30 && arm64_runtime_site_len(t, off - 4))
		return 1;
	if (mc_load32(t, off - 4) != A64_MOV_X0_X30 || mc_load32(t, off) != A64_NOP)
		return -1;
	return arm64_pair(A64_ADD_X9_X30, pc, targs, tregs, t, out);
}

const struct mc_arch mc_arch_aarch64 = {
	.name = "aarch64",
	.nm_mapping_letters = "dxmfp",
	.machine = EM_AARCH64,
	.elfclass = ELFCLASS64,
	.table_reloc = R_AARCH64_ABS64,
	.none_reloc = R_AARCH64_NONE,
	.call_relocs = relocs,
	.kernel_nops_untraced = true,
	.decode = arm64_decode,
	.nops = nops,
	.landing_pad = arm64_landing_pad,
	.relative_reloc = R_AARCH64_RELATIVE,
	.extable = MC_EXTABLE_REL_DATA,
	.kernel_mcount_addends = true,
	.kernel_mcount_before = 8,
	.tramp_asm = mc_tramp_aarch64,
	.cross_prefix = "aarch64-linux-gnu-",
	.insn = arm64_decode_linked,
	.plt_slot = arm64_plt_slot,
	.runtime_site = arm64_runtime_site,
	.runtime_site_len = arm64_runtime_site_len,
	.runtime_mcount_site = arm64_runtime_mcount_site,
};
