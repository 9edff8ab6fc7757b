// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * s390x.  The profiling call is "brasl %r0,__fentry__" (-mfentry) or
 * "brasl %r14,_mcount" (-pg): six bytes, opcode c0x5, with the 32-bit
 * halfword-relative field (R_390_PLT32DBL) two bytes in.  The NOP of the
 * same length is "brcl 0,0" (c0 04 00 00 00 00), which is also what GCC's
 * -mnop-mcount writes.
 */
#include "../capstone.h"
#include <elf.h>

#include <string.h>

static const uint32_t relocs[] = { R_390_PLT32DBL, R_390_PC32DBL, 0 };

static int s390_decode(const struct mc_text *t, uint64_t r_offset, uint32_t r_type,
		       struct mc_site *s)
{
	(void)r_type;	/* the bytes alone tell the site */
	unsigned len, id;

	memset(s, 0, sizeof(*s));
	if (r_offset < 2)
		return -1;
	id = mc_cs_decode(CS_ARCH_SYSZ, 0, t, r_offset - 2, &len, s);
	if (!id)
		return -1;
	s->off = r_offset - 2;
	s->len = (uint8_t)len;
	s->verdict = id == SYSZ_INS_BRASL && len == 6 ? MC_SITE_CALL : MC_SITE_NOT_CALL;
	return 0;
}

static const struct mc_nop nops[] = {
	{ .len = 6, .bytes = { 0xc0, 0x04, 0, 0, 0, 0 } },	/* brcl 0,0 */
	{ 0 }
};

const struct mc_arch mc_arch_s390x = {
	.name = "s390x",
	.machine = EM_S390,
	.elfclass = ELFCLASS64,
	.table_reloc = R_390_64,
	.none_reloc = R_390_NONE,
	.call_relocs = relocs,
	.decode = s390_decode,
	.nops = nops,
	.relative_reloc = R_390_RELATIVE,
	.extable = MC_EXTABLE_REL_DATA,
};
