// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * x86_64 and i386.  Call sites come in three shapes:
 *   e8 rel32            call __fentry__ / mcount      (PLT32 or PC32)
 *   ff 15 disp32        call *__fentry__@GOTPCREL(%rip)  (-fno-plt, and
 *                       Debian's default PIE userspace: GOTPCRELX)
 *   ff 93 disp32        call *__fentry__@GOT(%ebx)    (i386 PIC)
 * so the distance from the relocated field back to the first byte is not a
 * constant.  The kernel's recordmcount subtracts 1 unconditionally, which is
 * off by one for the ff 15 form.  We decode from a known instruction
 * boundary (the enclosing function's start) with Zydis and take the
 * instruction whose relative or displacement field the relocation patches.
 */
#include "../arch.h"
#include <elf.h>

extern const char mc_tramp_x86_64[];

#include "nops.h"

#include <Zydis/Zydis.h>
#include <stdio.h>
#include <string.h>

static const uint32_t relocs64[] = {
	R_X86_64_PC32, R_X86_64_PLT32, R_X86_64_GOTPCREL, R_X86_64_GOTPCRELX,
	R_X86_64_REX_GOTPCRELX, 0
};
static const uint32_t relocs32[] = {
	R_386_PC32, R_386_PLT32, R_386_GOT32, R_386_GOT32X, 0
};

static bool decode_at(const struct mc_text *t, uint64_t pos,
		      ZydisDecodedInstruction *insn)
{
	/* A decoder is configuration only (machine mode, stack width), the
	 * same for every file: set up once per thread and kept. */
	static _Thread_local ZydisDecoder dec64, dec32;
	static _Thread_local bool init64, init32;
	bool is64 = t->elfclass == ELFCLASS64;
	ZydisDecoder *d = is64 ? &dec64 : &dec32;
	bool *ready = is64 ? &init64 : &init32;

	if (!*ready) {
		ZydisDecoderInit(d, is64 ? ZYDIS_MACHINE_MODE_LONG_64 : ZYDIS_MACHINE_MODE_LEGACY_32,
				 is64 ? ZYDIS_STACK_WIDTH_64 : ZYDIS_STACK_WIDTH_32);
		/* Length, mnemonic and the raw fields are all we read; minimal
		 * mode skips the semantic analysis (about half a decode). */
		ZydisDecoderEnableMode(d, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
		*ready = true;
	}
	if (pos >= t->size)
		return false;
	return ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(d, NULL, t->buf + pos, t->size - pos, insn));
}

/* Does the relocated field at OFF belong to INSN decoded at START, as the
 * target of a call? */
static bool is_call_through(const ZydisDecodedInstruction *insn, uint64_t start,
			    uint64_t off)
{
	uint64_t field = off - start;

	if (insn->mnemonic != ZYDIS_MNEMONIC_CALL)
		return false;
	if (insn->raw.imm[0].size == 32 && insn->raw.imm[0].is_relative &&
	    insn->raw.imm[0].offset == field)
		return true;
	return insn->raw.disp.size == 32 && insn->raw.disp.offset == field;
}

static void describe(const ZydisDecodedInstruction *insn, const struct mc_text *t,
		     uint64_t start, struct mc_site *s)
{
	int n = snprintf(s->what, sizeof(s->what), "%s:", ZydisMnemonicGetString(insn->mnemonic));

	for (unsigned i = 0; i < insn->length && n < (int)sizeof(s->what) - 4; i++)
		n += snprintf(s->what + n, sizeof(s->what) - (size_t)n, " %02x",
			      t->buf[start + i]);
}

static int x86_decode(const struct mc_text *t, uint64_t r_offset, uint32_t r_type,
		      struct mc_site *s)
{
	(void)r_type;	/* the bytes alone tell the site */
	ZydisDecodedInstruction insn;
	uint64_t pos = t->boundary;

	memset(s, 0, sizeof(*s));
	/* Linear sweep from a known boundary to the instruction covering the
	 * relocation. */
	while (pos <= r_offset && decode_at(t, pos, &insn)) {
		if (pos + insn.length > r_offset) {
			s->off = pos;
			s->len = insn.length;
			s->verdict = is_call_through(&insn, pos, r_offset) ?
				MC_SITE_CALL : MC_SITE_NOT_CALL;
			if (t->describe || s->verdict != MC_SITE_CALL)
				describe(&insn, t, pos, s);
			return 0;
		}
		pos += insn.length;
	}
	/* The sweep went astray (data in text, or no symbol to start from):
	 * take the nearest start that decodes to a call through this field. */
	for (unsigned k = 1; k < 15 && k <= r_offset; k++) {
		uint64_t start = r_offset - k;

		if (decode_at(t, start, &insn) && start + insn.length > r_offset &&
		    is_call_through(&insn, start, r_offset)) {
			s->off = start;
			s->len = insn.length;
			s->verdict = MC_SITE_CALL;
			if (t->describe)
				describe(&insn, t, start, s);
			return 0;
		}
	}
	snprintf(s->what, sizeof(s->what), "no instruction decodes at the relocation");
	return -1;
}

/* -fcf-protection puts endbr64 (f3 0f 1e fa) or endbr32 (f3 0f 1e fb)
 * first, and -mfentry's call follows it. */
static unsigned x86_landing_pad(const struct mc_text *t, uint64_t off)
{
	static const uint8_t endbr[3] = { 0xf3, 0x0f, 0x1e };

	return off + 4 <= t->size && !memcmp(t->buf + off, endbr, 3) &&
	       (t->buf[off + 3] == 0xfa || t->buf[off + 3] == 0xfb) ? 4 : 0;
}

/*
 * mold relaxes call *__fentry__@GOTPCREL(%rip) (ff 15 disp32) to a direct
 * call when __fentry__ is defined in the image (link --runtime's
 * trampolines) as nop; call rel32, where ld.bfd, gold and lld write
 * addr32 call rel32: one 6-byte call all the same, and one site.  The
 * bytes of the nop at OFF, 1 when they start that pair, else 0.
 */
static unsigned x86_relaxed_got_call(const struct mc_text *t, uint64_t off)
{
	return off + 6 <= t->size && t->buf[off] == 0x90 && t->buf[off + 1] == 0xe8;
}

static int x86_insn(const struct mc_text *t, uint64_t off, uint64_t pc,
		    struct mc_insn *out)
{
	ZydisDecodedInstruction insn;
	unsigned pre = x86_relaxed_got_call(t, off);

	memset(out, 0, sizeof(*out));
	if (!decode_at(t, off + pre, &insn))
		return -1;
	pc += pre;
	out->len = pre + insn.length;
	out->call = insn.mnemonic == ZYDIS_MNEMONIC_CALL;
	if (insn.mnemonic != ZYDIS_MNEMONIC_CALL && insn.mnemonic != ZYDIS_MNEMONIC_JMP)
		return 0;
	if (insn.raw.imm[0].size && insn.raw.imm[0].is_relative) {
		out->has_target = true;
		out->target = pc + insn.length + (uint64_t)insn.raw.imm[0].value.s;
	} else if (t->elfclass == ELFCLASS64 && insn.raw.modrm.mod == 0 &&
		   insn.raw.modrm.rm == 5 && insn.raw.disp.size == 32) {
		/* call/jmp *disp32(%rip): through a GOT slot */
		out->has_target = out->via_slot = true;
		out->target = pc + insn.length + (uint64_t)insn.raw.disp.value;
	}
	if (t->elfclass == ELFCLASS32)
		out->target &= 0xffffffffu;
	return 0;
}

/* .plt, .plt.sec and .plt.got entries: [endbr64] [bnd] jmp *slot(%rip).
 * (i386 PLTs jump through %ebx, which only the caller knows.) */
static uint64_t x86_plt_slot(const struct mc_text *t, uint64_t off, uint64_t pc)
{
	struct mc_insn in;
	unsigned pad = x86_landing_pad(t, off);

	if (x86_insn(t, off + pad, pc + pad, &in) < 0 || in.call || !in.via_slot)
		return 0;
	return in.target;
}

/* One instruction per site: the long NOPs the kernel's ftrace uses on
 * x86_64 (P6 NOPL forms), by length. */
static const struct mc_nop nops64[] = {
	{ .len = 5, .bytes = { MC_X86_NOP5 } },
	{ .len = 6, .bytes = { MC_X86_NOP6 } },
	{ .len = 7, .bytes = { MC_X86_NOP7 } },
	{ 0 }
};
/* What -fpatchable-function-entry=N pads an entry with: GCC N of these,
 * clang long NOPs with a displacement; the filler after a site's NOP. */
static const struct mc_nop nop1 = { .len = 1, .bytes = { MC_X86_NOP1 } };

/* A site link --runtime parked (arch.h): 5 bytes, the first MC_X86_PARK,
 * whatever the displacement (which stub is the runtime's to judge). */
static unsigned x86_runtime_site_len(const struct mc_text *t, uint64_t off)
{
	return off + 5 <= t->size && t->buf[off] == MC_X86_PARK ? 5 : 0;
}

static uint64_t x86_parked_on(const struct mc_text *t, uint64_t off, uint64_t pc)
{
	if (!x86_runtime_site_len(t, off))
		return 0;
	return pc + 5 + (uint64_t)(int64_t)(int32_t)mc_load32(t, off + 1);
}

static int x86_park_site(const struct mc_text *t, uint64_t off, uint64_t pc, uint64_t stubs,
			 uint8_t out[8], unsigned *len)
{
	int64_t d = (int64_t)(stubs - (pc + 5));

	if (d < INT32_MIN || d > INT32_MAX)
		return -1;
	out[0] = MC_X86_PARK;
	mc_store32(t, out + 1, (uint32_t)(int32_t)d);
	out[5] = MC_X86_NOP1;
	*len = 0;
	for (const struct mc_nop *n = nops64; n->len && n->len <= 6; n++)
		if (off + n->len <= t->size && !memcmp(t->buf + off, n->bytes, n->len))
			*len = n->len;
	if (*len)
		return 0;
	return x86_parked_on(t, off, pc) == stubs ? 1 : -1;
}

static unsigned x86_any_nop(const struct mc_text *t, uint64_t off)
{
	ZydisDecodedInstruction insn;

	return decode_at(t, off, &insn) && insn.mnemonic == ZYDIS_MNEMONIC_NOP ? insn.length : 0;
}

/* i386 kernels may run on CPUs without NOPL, so 32-bit sites get the
 * lea-based NOPs the kernel uses there. */
static const struct mc_nop nops32[] = {
	{ .len = 5, .bytes = { 0x3e, 0x8d, 0x74, 0x26, 0x00 } },
	{ .len = 6, .bytes = { 0x8d, 0xb6, 0x00, 0x00, 0x00, 0x00 } },
	{ .len = 7, .bytes = { 0x8d, 0xb4, 0x26, 0x00, 0x00, 0x00, 0x00 } },
	{ 0 }
};

/*
 * The kernel's struct orc_entry, 6 bytes in both layouts: s16 sp_offset,
 * s16 bp_offset, then bit-fields, little-endian.  Up to 6.3: sp_reg:4,
 * bp_reg:4 (byte 4), type:2, end:1 (byte 5); a weak terminator has no sp
 * register (ORC_REG_UNDEFINED, 0) and does not end the stack.  From 6.4:
 * sp_reg:4, bp_reg:4, type:3, signal:1; a weak terminator is of type
 * ORC_TYPE_UNDEFINED (0), whatever its registers.
 */
static bool x86_orc_weak_6_1(const uint8_t *e)
{
	return (e[4] & 0xf) == 0 && !(e[5] & 0x4);
}

static bool x86_orc_weak_6_4(const uint8_t *e)
{
	return (e[5] & 0x7) == 0;
}

/* What scripts/orc_hash.sh makes of 6.12's orc_types.h (the ORC_REG_ and
 * ORC_TYPE_ defines and the struct, through sha1sum): an image whose
 * .orc_header holds anything else has a layout objpatch has not seen. */
static const uint8_t orc_hash_6_4[] = {
	0xfe, 0x5d, 0x32, 0xbf, 0x58, 0x1b, 0xd6, 0x3b, 0x2c, 0xa9,
	0xa5, 0xc6, 0x5b, 0xa5, 0xa6, 0x25, 0xea, 0xb3, 0xfe, 0x24,
};

static const struct mc_orc_layout x86_orc_layouts[] = {
	{ "Linux 4.14 to 6.3 (no .orc_header)", NULL, 0, x86_orc_weak_6_1 },
	{ "Linux 6.4 and later (.orc_header fe5d32bf...)", orc_hash_6_4, sizeof(orc_hash_6_4),
	  x86_orc_weak_6_4 },
	{ 0 }
};

const struct mc_arch mc_arch_x86_64 = {
	.name = "x86_64",
	.machine = EM_X86_64,
	.elfclass = ELFCLASS64,
	.table_reloc = R_X86_64_64,
	.none_reloc = R_X86_64_NONE,
	.call_relocs = relocs64,
	.kernel_nops_untraced = true,
	.variable_length = true,
	.landing_pad = x86_landing_pad,
	.decode = x86_decode,
	.nops = nops64,
	.any_nop = x86_any_nop,
	.entry_nop = &nop1,
	.relative_reloc = R_X86_64_RELATIVE,
	.extable = MC_EXTABLE_REL_DATA,
	.orc_entry_size = 6,
	.orc_layouts = x86_orc_layouts,
	.tramp_asm = mc_tramp_x86_64,
	.runtime_site_len = x86_runtime_site_len,
	.park_site = x86_park_site,
	.parked_on = x86_parked_on,
	.cross_prefix = "x86_64-linux-gnu-",
	.insn = x86_insn,
	.plt_slot = x86_plt_slot,
};

const struct mc_arch mc_arch_i386 = {
	.name = "i386",
	.machine = EM_386,
	.elfclass = ELFCLASS32,
	.table_reloc = R_386_32,
	.none_reloc = R_386_NONE,
	.call_relocs = relocs32,
	.kernel_nops_untraced = true,
	.variable_length = true,
	.landing_pad = x86_landing_pad,
	.decode = x86_decode,
	.nops = nops32,
	.any_nop = x86_any_nop,
	.entry_nop = &nop1,
	.relative_reloc = R_386_RELATIVE,
	.extable = MC_EXTABLE_REL_DATA,
	.insn = x86_insn,
	.plt_slot = x86_plt_slot,
};
