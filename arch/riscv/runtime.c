// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * riscv64 run-time sites.  objpatch link --runtime turns the 8 bytes of
 * NOPs at a function's entry (-fpatchable-function-entry=4 with compressed
 * NOPs, =2 without) into "auipc t0, hi; nop", and with 8 bytes more before
 * the entry (=8,4 or =4,2, functions aligned to 8) those become the site's
 * ops slot.  The auipc never changes: its window holds one of the pairs
 * of the image's trampoline entries (tramp.h), so that a jalr's 12-bit
 * offset reaches both the args and the regs trampoline.  Any other target
 * (a direct trampoline) is reached only if it happens to lie in the
 * window.
 * Only the nop changes, into "jalr t0, lo(t0)": t0 links, ra still holds
 * the caller's return address, as the trampolines expect.  A -pg site,
 * after the prologue, is "auipc t1, hi; nop/jalr t0, lo(t1)" (riscv.c):
 * the same call, told apart by the auipc's register.
 */
#include "../runtime.h"
#include "tramp.h"

#include <mcloc/abi.h>

#include <stddef.h>
#include <string.h>
#include <sys/cachectl.h>

#define RV_NOP		0x00000013u	/* addi x0, x0, 0 */
#define RV_T0		5u
#define RV_T1		6u

static uint32_t word(uintptr_t a)
{
	uint32_t w;

	memcpy(&w, (const void *)a, 4);
	return w;
}

static bool is_auipc_t0(uint32_t w)
{
	return (w & 0xfff) == (RV_T0 << 7 | 0x17);
}

/* "auipc t1": a -pg site's, after the prologue (riscv.c). */
static bool is_auipc_t1(uint32_t w)
{
	return (w & 0xfff) == (RV_T1 << 7 | 0x17);
}

int mcr_encode(uintptr_t site, unsigned len, uintptr_t target, uint8_t *out)
{
	uint32_t w = RV_NOP, auipc = word(site - 4);

	if (len != 4 || (!is_auipc_t0(auipc) && !is_auipc_t1(auipc)))
		return -1;
	if (target) {
		/* The auipc put site - 4 + (its upper 20 bits) in its
		 * register; the target, or its mirror, is within a 12-bit
		 * offset of that.  The link is always t0. */
		uintptr_t base = site - 4 + (uintptr_t)(int64_t)(int32_t)(auipc & 0xfffff000u);
		int64_t lo = (int64_t)(target - base);
		uint32_t rs1 = (auipc >> 7) & 31;

		if (lo < -2048 || lo > 2047)
			return -1;
		w = (uint32_t)lo << 20 | rs1 << 15 | RV_T0 << 7 | 0x67;	/* jalr t0, lo(rs1) */
	}
	memcpy(out, &w, 4);
	return 0;
}

/* The image's trampolines: the first pair of entries, or its mirror. */
int mcr_encode_tramp(uintptr_t site, unsigned len, uintptr_t tramp, uint8_t *out)
{
	if (!mcr_encode(site, len, tramp, out))
		return 0;
	return tramp ? mcr_encode(site, len, tramp + MC_RV_TRAMP_MIRROR, out) : -1;
}

/* Its compilers' patchable NOPs are the sites' own NOPs already. */
const char *mcr_site_refusal(uintptr_t entry)
{
	(void)entry;
	return NULL;
}

int mcr_site_find(uintptr_t entry, uintptr_t fentry, struct mcr_site *s)
{
	(void)fentry;
	*s = (struct mcr_site){ .len = 4 };
	if (entry & 3)
		return -1;
	if (is_auipc_t0(word(entry)) || is_auipc_t1(word(entry)))
		s->at = entry + 4;
	else if (!(entry & 7) && is_auipc_t0(word(entry + 8)))
		s->at = entry + 12, s->slot = true;
	else
		return -1;
	/* A fresh image's sites are all NOPs (objpatch link --nop). */
	return word(s->at) == RV_NOP ? 0 : -1;
}

/* 8 bytes of NOPs at A, of either size? */
static bool nops8(uintptr_t a)
{
	for (uintptr_t i = 0; i < 8;) {
		uint16_t h;

		memcpy(&h, (const void *)(a + i), 2);
		if (h == 0x0001)		/* c.nop */
			i += 2;
		else if (i <= 4 && word(a + i) == RV_NOP)
			i += 4;
		else
			return false;
	}
	return true;
}

int mcr_site_prepare(uintptr_t entry, uintptr_t args, uintptr_t regs, uint8_t out[8])
{
	uint32_t w[2] = { 0, RV_NOP };
	int64_t hi;

	if ((entry & 3) || !nops8(entry) || nops8(entry + 8) ||
	    !mc_rv_tramp_window(entry, args, regs, &hi))
		return -1;
	w[0] = (uint32_t)hi << 12 | RV_T0 << 7 | 0x17;	/* auipc t0, hi */
	memcpy(out, w, 8);
	return 0;
}

void mcr_tramp_stubs(uint8_t *page, uintptr_t args, uintptr_t regs)
{
	for (size_t m = 0; m <= MC_RV_TRAMP_MIRROR; m += MC_RV_TRAMP_MIRROR) {
		mcr_jump_stub(page + m, args);
		mcr_jump_stub(page + m + MCR_STUB_SIZE, regs);
	}
}

void mcr_flush_icache(uintptr_t lo, uintptr_t hi)
{
	/* Flags 0: every hart that runs this process, not only this one. */
	__riscv_flush_icache((void *)lo, (void *)hi, 0);
}

void mcr_jump_stub(uint8_t *buf, uintptr_t target)
{
	static const uint32_t code[4] = {
		0x00000317u,	/* auipc t1, 0 */
		0x01033303u,	/* ld t1, 16(t1) */
		0x00030067u,	/* jr t1 */
		RV_NOP,
	};

	memcpy(buf, code, 16);
	memcpy(buf + 16, &target, 8);
}

bool mcr_site_at_entry(uintptr_t site, uintptr_t fn)
{
	(void)fn;
	return !is_auipc_t1(word(site - 4));
}

uintptr_t *mcr_return_slot(struct mcloc_regs *regs, uintptr_t site, uintptr_t parent,
			   uintptr_t *key)
{
	if (!mcr_site_at_entry(site, 0))
		return NULL;	/* (a -pg site: ra is saved in the frame already) */
	/* At the site the function has not touched the stack, and its
	 * return address is in ra, which the regs trampoline restores. */
	*key = regs->x[2];
	return regs->x[1] == parent ? (uintptr_t *)&regs->x[1] : NULL;
}

/* (What the return trampoline below stores where.) */
_Static_assert(offsetof(struct mcr_retregs, fp) == 16, "the return trampoline's layout");

bool mcr_call_argregs(const struct mcloc_regs *regs, const void *args, const uintptr_t *slot,
		      uintptr_t after, uintptr_t parent, bool at_entry, struct mcr_argregs *out)
{
	(void)args, (void)slot, (void)after, (void)parent;
	if (!regs)
		return false;	/* (the args trampoline's frame is not read here) */
	memcpy(out->i, &regs->x[10], 8 * sizeof(uint64_t));	/* a0-a7 */
	out->ni = 8;
	out->fp = (const uint8_t *)regs->fa;
	out->fp_stride = 8;
	out->stack = at_entry ? (const uint64_t *)regs->x[2] : NULL;	/* sp */
	return true;
}

/*
 * Reached by the timed function's ret, with the caller's stack pointer.
 * Kept across the hook, and given it (struct mcr_retregs): the result
 * registers a0, a1, fa0, fa1.
 */
__asm__(
"	.text\n"
"	.p2align 2\n"
"	.globl	mcr_return_tramp\n"
"	.hidden	mcr_return_tramp\n"
"	.type	mcr_return_tramp, @function\n"
"mcr_return_tramp:\n"
"	addi	sp, sp, -32\n"
"	sd	a0, 0(sp)\n"
"	sd	a1, 8(sp)\n"
"	fsd	fa0, 16(sp)\n"
"	fsd	fa1, 24(sp)\n"
"	addi	a0, sp, 32\n"
"	mv	a1, sp\n"
"	call	mcr_return_hook\n"
"	mv	ra, a0\n"
"	ld	a0, 0(sp)\n"
"	ld	a1, 8(sp)\n"
"	fld	fa0, 16(sp)\n"
"	fld	fa1, 24(sp)\n"
"	addi	sp, sp, 32\n"
"	ret\n"
"	.size	mcr_return_tramp, .-mcr_return_tramp\n"
);
