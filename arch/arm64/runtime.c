// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * aarch64 run-time sites.  objpatch link --runtime turns the NOPs of
 * -fpatchable-function-entry=2 into "mov x9, x30; nop", and of =4,2 into
 * "slot(8 bytes); mov x9, x30; nop" with the function's entry after the
 * slot; and of -pg's call to _mcount, after the prologue, into "add x9,
 * x30, #0; nop" (the same pair, told apart).  Only the second instruction
 * changes: NOP, or "bl" to the image's args or regs trampoline, which are
 * within a bl's 128 MiB.  The trampolines find the caller's return address
 * in x9 and resume at x30.
 */
#include "../runtime.h"

#include <mcloc/abi.h>

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define A64_NOP		0xd503201fu
#define A64_MOV_X9_X30	0xaa1e03e9u	/* orr x9, xzr, x30 */
#define A64_ADD_X9_X30	0x910003c9u	/* add x9, x30, #0: the same, at a -pg site */

static uint32_t word(uintptr_t a)
{
	uint32_t w;

	memcpy(&w, (const void *)a, 4);
	return w;
}

/* Are the bytes [A - 4, A) mapped?  Asked before reading the word before
 * a site, which may begin a mapping; only a page's first word costs a
 * system call. */
static bool before_mapped(uintptr_t a)
{
	unsigned char v;
	long pg = sysconf(_SC_PAGESIZE);

	if ((a & (uintptr_t)(pg - 1)) >= 4)
		return true;	/* (on A's own page) */
	return mincore((void *)((a - 4) & ~(uintptr_t)(pg - 1)), (size_t)pg, &v) == 0;
}

int mcr_encode(uintptr_t site, unsigned len, uintptr_t target, uint8_t *out)
{
	uint32_t w = A64_NOP;

	if (len != 4)
		return -1;
	if (target) {
		int64_t d = (int64_t)(target - site);

		if ((d & 3) || d < -(1ll << 27) || d >= (1ll << 27))
			return -1;
		w = 0x94000000u | (uint32_t)((d >> 2) & 0x03ffffff);	/* bl */
	}
	memcpy(out, &w, 4);
	return 0;
}

int mcr_encode_tramp(uintptr_t site, unsigned len, uintptr_t tramp, uint8_t *out)
{
	return mcr_encode(site, len, tramp, out);
}

/* Its compilers' patchable NOPs are the sites' own NOPs already; a -pg
 * site's call the link left is named. */
const char *mcr_site_refusal(uintptr_t entry)
{
	if (!(entry & 3) && (word(entry) & 0xfc000000u) == 0x94000000u)	/* bl */
		return "calls, not NOPs: link with objpatch link --nop (or run recordmcount --nop)";
	return NULL;
}

int mcr_site_find(uintptr_t entry, uintptr_t fentry, struct mcr_site *s)
{
	(void)fentry;
	*s = (struct mcr_site){ .len = 4 };
	if (entry & 3)
		return -1;
	if (word(entry) == A64_MOV_X9_X30)
		s->at = entry + 4;
	else if (!(entry & 7) && word(entry + 8) == A64_MOV_X9_X30)
		s->at = entry + 12, s->slot = true;
	else if (word(entry) == A64_NOP && before_mapped(entry) &&
		 word(entry - 4) == A64_ADD_X9_X30)
		s->at = entry;	/* a -pg site: the table names the call */
	else
		return -1;
	/* A fresh image's sites are all NOPs (objpatch link --nop). */
	return word(s->at) == A64_NOP ? 0 : -1;
}

int mcr_site_prepare(uintptr_t entry, uintptr_t args, uintptr_t regs, uint8_t out[8])
{
	uint32_t w[2] = { A64_MOV_X9_X30, A64_NOP };
	uint8_t b[4];

	if ((entry & 3) || word(entry) != A64_NOP || word(entry + 4) != A64_NOP ||
	    (word(entry + 8) == A64_NOP && word(entry + 12) == A64_NOP) ||
	    mcr_encode(entry + 4, 4, args, b) || mcr_encode(entry + 4, 4, regs, b))
		return -1;
	memcpy(out, w, 8);
	return 0;
}

void mcr_tramp_stubs(uint8_t *page, uintptr_t args, uintptr_t regs)
{
	mcr_jump_stub(page, args);
	mcr_jump_stub(page + MCR_STUB_SIZE, regs);
}

void mcr_flush_icache(uintptr_t lo, uintptr_t hi)
{
	__builtin___clear_cache((char *)lo, (char *)hi);
}

void mcr_jump_stub(uint8_t *buf, uintptr_t target)
{
	static const uint32_t code[2] = {
		0x58000050u,	/* ldr x16, .+8 */
		0xd61f0200u,	/* br x16 */
	};

	memcpy(buf, code, 8);
	memcpy(buf + 8, &target, 8);
}

uintptr_t *mcr_return_slot(struct mcloc_regs *regs, uintptr_t site, uintptr_t parent,
			   uintptr_t *key)
{
	/* At an entry site the function has not touched the stack, and its
	 * return address is in x9, which the regs trampoline saved as the
	 * x30 it restores.  A -pg site's prologue has saved x30 already, and
	 * the function returns through the saved copy. */
	*key = regs->sp;
	if (!mcr_site_at_entry(site, 0))
		return NULL;
	return regs->x[30] == parent ? (uintptr_t *)&regs->x[30] : NULL;
}

bool mcr_site_at_entry(uintptr_t site, uintptr_t fn)
{
	(void)fn;
	return word(site - 4) != A64_ADD_X9_X30;
}

/* (What the return trampoline below stores where.) */
_Static_assert(offsetof(struct mcr_retregs, fp) == 32, "the return trampoline's layout");

bool mcr_call_argregs(const struct mcloc_regs *regs, const void *args, const uintptr_t *slot,
		      uintptr_t after, uintptr_t parent, bool at_entry, struct mcr_argregs *out)
{
	(void)args, (void)slot, (void)after, (void)parent;
	if (!regs)
		return false;	/* (the args trampoline's frame is not read here) */
	memcpy(out->i, regs->x, 8 * sizeof(uint64_t));
	out->ni = 8;
	out->fp = regs->q[0];
	out->fp_stride = 16;
	/* (At the entry the caller's stack arguments start at sp.) */
	out->stack = at_entry ? (const uint64_t *)regs->sp : NULL;
	return true;
}

/*
 * Reached by the timed function's ret, with the caller's stack pointer.
 * Kept across the hook, and given it (struct mcr_retregs): the result
 * registers (x0, x1; x8 for a large result's address; q0-q3 for a
 * floating-point aggregate).  The hook
 * returns where to go; "ret x16" goes there without a BTI check, as the
 * trampolines do.
 */
__asm__(
"	.text\n"
"	.p2align 2\n"
"	.globl	mcr_return_tramp\n"
"	.hidden	mcr_return_tramp\n"
"	.type	mcr_return_tramp, %function\n"
"mcr_return_tramp:\n"
"	stp	x29, x30, [sp, #-112]!\n"
"	mov	x29, sp\n"
"	stp	x0, x1, [sp, #16]\n"
"	str	x8, [sp, #32]\n"
"	stp	q0, q1, [sp, #48]\n"
"	stp	q2, q3, [sp, #80]\n"
"	add	x0, sp, #112\n"
"	add	x1, sp, #16\n"
"	bl	mcr_return_hook\n"
"	mov	x16, x0\n"
"	ldp	x0, x1, [sp, #16]\n"
"	ldr	x8, [sp, #32]\n"
"	ldp	q0, q1, [sp, #48]\n"
"	ldp	q2, q3, [sp, #80]\n"
"	ldp	x29, x30, [sp], #112\n"
"	mov	x30, x16\n"
"	ret	x16\n"
"	.size	mcr_return_tramp, .-mcr_return_tramp\n"
);
