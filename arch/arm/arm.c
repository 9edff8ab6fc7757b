// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * 32-bit ARM, ARM and Thumb-2.  The EABI profiling call is
 *     push {lr}              e52de004      (Thumb: b500, or f84d ed04)
 *     bl   __gnu_mcount_nc   R_ARM_CALL    (Thumb: R_ARM_THM_CALL)
 * and __gnu_mcount_nc pops the pushed lr on return.  The table entry is the
 * BL, as in the kernel, but NOPing only the BL would leave the push behind
 * and unbalance the stack, so the push is part of the site for --nop and
 * each of the two instructions becomes a NOP of its own width.
 */
#include "../capstone.h"
#include <elf.h>

#include <string.h>

/* glibc knows 10 by its pre-EABI name, R_ARM_THM_PC22. */
#ifndef R_ARM_THM_CALL
#define R_ARM_THM_CALL 10
#endif

static const uint32_t relocs[] = {
	R_ARM_CALL, R_ARM_PC24, R_ARM_THM_CALL, R_ARM_JUMP24, R_ARM_THM_JUMP24, 0
};

static bool is_thumb_reloc(uint32_t type)
{
	return type == R_ARM_THM_CALL || type == R_ARM_THM_JUMP24;
}

static int arm_decode(const struct mc_text *t, uint64_t r_offset, uint32_t r_type,
		      struct mc_site *s)
{
	bool thumb = is_thumb_reloc(r_type);
	unsigned len, id;
	uint64_t o = r_offset;

	memset(s, 0, sizeof(*s));
	id = mc_cs_decode(CS_ARCH_ARM, thumb ? CS_MODE_THUMB : CS_MODE_ARM, t, o,
			  &len, s);
	if (!id)
		return -1;
	s->off = o;
	s->len = (uint8_t)len;
	s->mode = thumb;
	s->verdict = (id == ARM_INS_BL || id == ARM_INS_BLX) && len == 4 ?
		MC_SITE_CALL : MC_SITE_NOT_CALL;
	if (s->verdict != MC_SITE_CALL)
		return 0;
	/* The push {lr} that __gnu_mcount_nc expects, if it is right there. */
	if (!thumb && o >= 4 && mc_load32(t, o - 4) == 0xe52de004)
		s->pre = 4;
	else if (thumb && o >= 4 && mc_load16(t, o - 4) == 0xf84d &&
		 mc_load16(t, o - 2) == 0xed04)
		s->pre = 4;
	else if (thumb && o >= 2 && mc_load16(t, o - 2) == 0xb500)
		s->pre = 2;
	return 0;
}

static void thumb_nop(const struct mc_text *t, uint8_t *out, unsigned len)
{
	if (len == 2) {
		mc_store16(t, out, 0xbf00);		/* nop */
	} else {
		mc_store16(t, out, 0xf3af);		/* nop.w */
		mc_store16(t, out + 2, 0x8000);
	}
}

static int arm_make_nop(const struct mc_text *t, const struct mc_site *s,
			uint8_t *out)
{
	if (s->len != 4 || s->post)
		return -1;
	if (!s->mode) {
		for (unsigned i = 0; i < (unsigned)s->pre + 4u; i += 4)
			mc_store32(t, out + i, 0xe1a00000);	/* mov r0, r0 */
		return 0;
	}
	if (s->pre)
		thumb_nop(t, out, s->pre);
	thumb_nop(t, out + s->pre, 4);
	return 0;
}

/* The entry is the BL: "mov r0, r0" in ARM code, "nop.w" in Thumb. */
static unsigned arm_is_nop(const struct mc_text *t, uint64_t off)
{
	if (off + 4 > t->size)
		return 0;
	if (mc_load32(t, off) == 0xe1a00000 ||
	    (mc_load16(t, off) == 0xf3af && mc_load16(t, off + 2) == 0x8000))
		return 4;
	return 0;
}

const struct mc_arch mc_arch_arm = {
	.name = "arm",
	.nm_mapping_letters = "abcdefghijklmnopqrstuvwxyz",
	.machine = EM_ARM,
	.elfclass = ELFCLASS32,
	.table_reloc = R_ARM_ABS32,
	.none_reloc = R_ARM_NONE,
	.call_relocs = relocs,
	.kernel_nops_untraced = true,
	.base_avoid_func = true,
	.decode = arm_decode,
	.make_nop = arm_make_nop,
	.is_nop = arm_is_nop,
	.relative_reloc = R_ARM_RELATIVE,
	.extable = MC_EXTABLE_ABS,
};
