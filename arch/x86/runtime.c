// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * x86_64 run-time site states.  A site is 5 bytes (call rel32 to
 * __fentry__, NOPed to the 5-byte NOPL) or 6 (Debian's PIE form, call
 * *__fentry__@GOTPCREL(%rip), NOPed at link time to the 6-byte NOPW).
 * Enabled, a site holds "call rel32" (e8), and a 6-byte site that call
 * and a 1-byte NOP after it: from then on it is a 5-byte site.  Disabled
 * again, it is parked (arch/runtime.h): "test $rel32, %eax" (a9) with the
 * call's own displacement, so that only the first byte ever changes
 * between the two.  The breakpoint is int3; after it, %rip is the next
 * byte, as for the kernel's poke_int3_handler().
 */
#include "../runtime.h"
#include "args-frame.h"
#include "nops.h"

#include <mcloc/abi.h>

#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

const uint8_t mcr_breakpoint = 0xcc;

static const uint8_t nop5[5] = { MC_X86_NOP5 };
static const uint8_t nop6[6] = { MC_X86_NOP6 };

int mcr_encode(uintptr_t site, unsigned len, uintptr_t target, uint8_t *out)
{
	if (len != 5 && len != 6)
		return -1;
	if (!target) {
		/* (Constant sizes: a batch encodes 100,000 of these.) */
		if (len == 5)
			memcpy(out, nop5, 5);
		else
			memcpy(out, nop6, 6);
		return 0;
	}
	int64_t rel = (int64_t)(target - (site + 5));
	if (rel != (int32_t)rel)
		return -1;
	int32_t r32 = (int32_t)rel;
	out[0] = 0xe8;
	memcpy(out + 1, &r32, 4);
	if (len == 6)
		out[5] = 0x90;
	return 0;
}

int mcr_encode_parked(uintptr_t site, unsigned len, uintptr_t target, uint8_t *out)
{
	if (len != 5 || !target || mcr_encode(site, len, target, out))
		return -1;
	out[0] = MCR_PARK;
	return 0;
}

uintptr_t mcr_trap_site(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP] - 1;
}

void mcr_emulate(ucontext_t *uc, uintptr_t site, const uint8_t *insn, unsigned len)
{
	greg_t *g = ((ucontext_t *)uc)->uc_mcontext.gregs;

	if (insn[0] == 0xe8) {
		int32_t rel;
		uintptr_t sp = (uintptr_t)g[REG_RSP] - 8;

		memcpy(&rel, insn + 1, 4);
		/* Push the return address on the interrupted stack: the
		 * kernel put the signal frame below its red zone.  It is
		 * past the whole site: a 6-byte site that becomes a call
		 * and a NOP may still hold its old tail, which a return to
		 * the NOP's place would run from its middle. */
		*(uintptr_t *)sp = site + len;
		g[REG_RSP] = (greg_t)sp;
		g[REG_RIP] = (greg_t)(site + 5 + (intptr_t)rel);
	} else {
		g[REG_RIP] = (greg_t)(site + len);
	}
}

void mcr_rewind(ucontext_t *uc, uintptr_t site)
{
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)site;
}

/* Where a call through memory at SLOT lands: the slot's contents. */
static uintptr_t through(uintptr_t slot)
{
	uintptr_t v;

	memcpy(&v, (const void *)slot, sizeof(v));
	return v;
}

struct mapped_ctx {
	uintptr_t lo, hi;
	bool found;
};

static int find_mapped(struct dl_phdr_info *info, size_t size, void *data)
{
	struct mapped_ctx *c = data;

	(void)size;
	return c->found = mcr_segment_holds(info, c->lo, c->hi);
}

/* Whether [ADDR, ADDR + LEN) lies in a segment of a loaded object, so
 * that it can be read: a call site's target, which a corrupt table may
 * make anything. */
static bool mapped(uintptr_t addr, size_t len)
{
	struct mapped_ctx c = { addr, addr + len, false };

	if (c.hi < c.lo)
		return false;
	dl_iterate_phdr(find_mapped, &c);
	return c.found;
}

/* A PLT entry at P: [endbr64] [bnd] jmp *disp32(%rip); its slot, or 0. */
static uintptr_t plt_slot(uintptr_t p)
{
	const uint8_t *b = (const uint8_t *)p;
	int32_t d;

	if (b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa)
		b += 4;
	if (b[0] == 0xf2)
		b++;
	if (b[0] != 0xff || b[1] != 0x25)
		return 0;
	memcpy(&d, b + 2, 4);
	return (uintptr_t)(b + 6) + (intptr_t)d;
}

static unsigned site_len(uintptr_t site, uintptr_t fentry, bool *is_call)
{
	const uint8_t *b = (const uint8_t *)site;
	int32_t d;

	*is_call = false;
	if (!memcmp(b, nop5, 5))
		return 5;
	if (b[0] == MCR_PARK)
		return 5;	/* (its target is the caller's to judge) */
	if (!memcmp(b, nop6, 6))
		return 6;
	*is_call = true;
	/* A call: only a call to __fentry__ is a site, and only what the
	 * caller names as __fentry__ can say so.  Its target and GOT slot
	 * are read only where something is mapped. */
	if (!fentry)
		return 0;
	if (b[0] == 0xff && b[1] == 0x15) {		/* call *__fentry__@GOTPCREL(%rip) */
		memcpy(&d, b + 2, 4);
		uintptr_t slot = site + 6 + (intptr_t)d;

		return mapped(slot, 8) && through(slot) == fentry ? 6 : 0;
	}
	if (b[0] == 0xe8 || (b[0] == 0x67 && b[1] == 0xe8)) {	/* call rel32 */
		unsigned len = b[0] == 0x67 ? 6 : 5;
		memcpy(&d, b + len - 4, 4);
		uintptr_t t = site + len + (intptr_t)d, slot;

		/* Directly, or through a PLT entry whose GOT slot holds
		 * __fentry__, or still points back into that PLT entry
		 * (lazy binding, not resolved before its first call). */
		if (t == fentry || (mapped(t, 16) && (slot = plt_slot(t)) &&
				    mapped(slot, 8) &&
				    (through(slot) == fentry || through(slot) - t < 16)))
			return len;
	}
	return 0;
}

/* x86_64 sites are where the compiler recorded them, and have no slot. */
int mcr_encode_tramp(uintptr_t site, unsigned len, uintptr_t tramp, uint8_t *out)
{
	return mcr_encode(site, len, tramp, out);
}

/*
 * -fpatchable-function-entry=N (N >= 5) pads an entry with the compiler's
 * NOPs: GCC's N one-byte NOPs, clang's long NOP with a displacement
 * (0f 1f and a ModRM, other than the site NOPs).  Turning several
 * instructions into a call is not safe while threads run (a thread may
 * stand between two), and a long NOP of another length or form is not
 * what the patch protocol writes back, so only the tools convert them,
 * before the program runs.
 */
const char *mcr_site_refusal(uintptr_t entry)
{
	static const uint8_t raw[5] = { MC_X86_NOP1, MC_X86_NOP1, MC_X86_NOP1, MC_X86_NOP1,
					MC_X86_NOP1 };
	const uint8_t *b = (const uint8_t *)entry;

	if (!memcmp(b, raw, sizeof(raw)))
		return "5 single-byte NOPs (GCC's -fpatchable-function-entry): link with "
		       "objpatch link --nop";
	if (b[0] == 0x0f && b[1] == 0x1f)
		return "long NOPs not of the site's form (clang's -fpatchable-function-entry): "
		       "link with objpatch link --nop";
	/* (A call to __fentry__ or mcount the link left: --runtime alone
	 * does not NOP the sites.) */
	if (b[0] == 0xe8 || (b[0] == 0x67 && b[1] == 0xe8) || (b[0] == 0xff && b[1] == 0x15))
		return "calls, not NOPs: link with objpatch link --nop (or run recordmcount --nop)";
	/* (What it would call, the library cannot know.) */
	if (b[0] == MCR_PARK)
		return "parked (0xa9) but not on the image's first direct stub: a damaged site";
	return NULL;
}

int mcr_site_find(uintptr_t entry, uintptr_t fentry, struct mcr_site *s)
{
	*s = (struct mcr_site){ .at = entry };
	s->len = site_len(entry, fentry, &s->is_call);
	if (s->len && *(const uint8_t *)entry == MCR_PARK)
		s->parked = mcr_flip_dest(entry);
	return s->len ? 0 : -1;
}

void mcr_jump_stub(uint8_t *buf, uintptr_t target)
{
	static const uint8_t jmp[6] = { 0xff, 0x25, 0, 0, 0, 0 };	/* jmp *0(%rip) */

	memcpy(buf, jmp, 6);
	memcpy(buf + 6, &target, 8);
	buf[14] = buf[15] = 0xcc;
}

void mcr_tramp_stubs(uint8_t *page, uintptr_t args, uintptr_t regs)
{
	mcr_jump_stub(page, args);
	mcr_jump_stub(page + MCR_STUB_SIZE, regs);
}

const uint8_t mcr_direct_len[MCR_DIRECT_LENS] = { 5 };

uintptr_t mcr_call_dest(uintptr_t after, unsigned len)
{
	/* e8 rel32, or the breakpoint in place of the e8 while it changes
	 * (the tail is written first). */
	const uint8_t *op = (const uint8_t *)after - 5;
	int32_t rel;

	if (len != 5 || (op[0] != 0xe8 && op[0] != mcr_breakpoint))
		return 0;
	memcpy(&rel, op + 1, 4);
	return after + (intptr_t)rel;
}

/* A direct stub: its own address into %r11, then a jump through a word
 * (just after it in a mapped page; the descriptor's in a linked one). */
static const uint8_t stub_code[13] = {
	0x4c, 0x8d, 0x1d, 0xf9, 0xff, 0xff, 0xff,	/* lea -7(%rip), %r11 */
	0xff, 0x25, 0, 0, 0, 0,				/* jmp *0(%rip) */
};

void mcr_direct_stub(uint8_t *buf, uintptr_t tramp)
{
	memcpy(buf, stub_code, sizeof(stub_code));
	memcpy(buf + sizeof(stub_code), &tramp, 8);
	memset(buf + sizeof(stub_code) + 8, 0xcc, MCR_DIRECT_STUB - sizeof(stub_code) - 8);
}

bool mcr_direct_stubs_linked(const uint8_t *page, uintptr_t through)
{
	for (size_t k = 0; k < MCR_DIRECT_PAGE; k += MCR_DIRECT_STUB) {
		const uint8_t *s = page + k;
		int32_t rel;

		memcpy(&rel, s + 9, 4);
		if (memcmp(s, stub_code, 9) ||
		    (uintptr_t)s + sizeof(stub_code) + (uintptr_t)(intptr_t)rel != through)
			return false;
	}
	return true;
}

/*
 * From a direct stub, with %r11 the stub's address.  The stack holds the
 * return address into the traced function and above it (at an entry
 * site) its caller's.  Saved: the argument frame of args-frame.h, as in
 * objpatch's args trampoline.
 */
__asm__(
"	.text\n"
"	.p2align 4\n"
"	.globl	mcr_direct_tramp\n"
"	.hidden	mcr_direct_tramp\n"
"	.type	mcr_direct_tramp, @function\n"
"mcr_direct_tramp:\n"
MC_X86_ENTER_ARGS
"	movq	%r11, %rdx\n"
"	movq	%rsp, %rcx\n"
"	leaq	16(%rbp), %r8\n"
"	call	mcr_direct_hook\n"
MC_X86_RESTORE_ARGS
MC_X86_LEAVE
"	.size	mcr_direct_tramp, .-mcr_direct_tramp\n"
);

bool mcr_site_at_entry(uintptr_t site, uintptr_t fn)
{
	/* -pg without -mfentry calls mcount after the frame -pg forces and
	 * whatever registers the function saves: at least 4 bytes in, like a
	 * site after endbr64, which the bytes before tell apart. */
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };

	return !fn || site == fn ||
	       (site == fn + 4 && !memcmp((const void *)fn, endbr64, 4));
}

bool mcr_site_framed(uintptr_t site, uintptr_t fn)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	static const uint8_t frame[4] = { 0x55, 0x48, 0x89, 0xe5 };	/* push %rbp; mov %rsp,%rbp */

	/* (An mcount call comes a few instructions in; a function that
	 * begins further below, as a symbol may say, is not read.) */
	if (!fn || site - fn > 128 || mcr_site_at_entry(site, fn))
		return false;
	if (!memcmp((const void *)fn, endbr64, 4))
		fn += 4;
	return site >= fn + 4 && !memcmp((const void *)fn, frame, 4);
}

/* (A frame of more than this below its frame pointer, before the site's
 * call, is taken for a frame pointer that is not one.) */
#define FRAMED_MAX (1u << 20)

uintptr_t *mcr_framed_slot(const struct mcloc_regs *regs, const uintptr_t *tslot)
{
	/* (The trampolines' own frame pointer is saved at TSLOT[-2]: their
	 * "pushq %rbp" came right after the site's call.) */
	uintptr_t rbp = regs ? regs->rbp : tslot ? tslot[-2] : 0;
	uintptr_t sp = regs ? regs->sp : (uintptr_t)tslot;

	return rbp && !(rbp & 7) && rbp >= sp && rbp - sp < FRAMED_MAX ? (uintptr_t *)rbp + 1
								      : NULL;
}

uintptr_t *mcr_return_slot(struct mcloc_regs *regs, uintptr_t site, uintptr_t parent,
			   uintptr_t *key)
{
	(void)site;
	/* At an entry site, the call into the function has just pushed its
	 * return address: the stack pointer points at it, and its ret will
	 * pop it. */
	uintptr_t *slot = (uintptr_t *)regs->sp;

	*key = regs->sp + sizeof(uintptr_t);
	return regs->sp && *slot == parent ? slot : NULL;
}

/* (What the return trampoline below stores where.) */
_Static_assert(offsetof(struct mcr_retregs, fp) == 16, "the return trampoline's layout");

bool mcr_call_argregs(const struct mcloc_regs *regs, const void *args, const uintptr_t *slot,
		      uintptr_t after, uintptr_t parent, bool at_entry, struct mcr_argregs *out)
{
	const uintptr_t *ret = NULL;	/* where the caller's return address is */

	if (regs) {
		const uint64_t i[6] = { regs->rdi, regs->rsi, regs->rdx, regs->rcx, regs->r8,
					regs->r9 };

		memcpy(out->i, i, sizeof(i));
		out->fp = regs->xmm[0];
		ret = slot ? slot : (const uintptr_t *)regs->sp;
	} else if (args) {
		const struct mcloc_args *a = args;

		memcpy(out->i, &a->rdi, 6 * sizeof(uint64_t));
		out->fp = a->xmm[0];
		ret = slot ? slot : mcr_args_return_slot(args, after, parent);
	} else {
		return false;
	}
	out->ni = 6;
	out->fp_stride = 16;
	/* (Arguments 7 on lie above the caller's return address.) */
	out->stack = at_entry && ret ? (const uint64_t *)(ret + 1) : NULL;
	return true;
}

/*
 * Reached by the traced function's `ret`, with the caller's stack pointer
 * (aligned to 16 only if everyone kept the ABI: realigned here).  The
 * return value may be in %rax/%rdx and %xmm0/%xmm1; those are kept across
 * the hook (and given it: struct mcr_retregs), which returns where to go; the jump there goes through %rcx,
 * which no caller expects to survive a call.  (x87 and the upper vector
 * halves are not kept: the hook is plain C that does not touch them.)  No
 * CFI unwinds through here: an exception never meets it, as libmcloc's
 * timing.c gives hooked calls their return addresses back before the
 * unwinder starts.
 */
__asm__(
"	.text\n"
"	.p2align 4\n"
"	.globl	mcr_return_tramp\n"
"	.hidden	mcr_return_tramp\n"
"	.type	mcr_return_tramp, @function\n"
"mcr_return_tramp:\n"
"	pushq	%rbp\n"
"	movq	%rsp, %rbp\n"
"	andq	$-16, %rsp\n"
"	subq	$48, %rsp\n"
"	movq	%rax, 0(%rsp)\n"
"	movq	%rdx, 8(%rsp)\n"
"	movups	%xmm0, 16(%rsp)\n"
"	movups	%xmm1, 32(%rsp)\n"
"	leaq	8(%rbp), %rdi\n"
"	movq	%rsp, %rsi\n"
"	call	mcr_return_hook\n"
"	movq	%rax, %rcx\n"
"	movq	0(%rsp), %rax\n"
"	movq	8(%rsp), %rdx\n"
"	movups	16(%rsp), %xmm0\n"
"	movups	32(%rsp), %xmm1\n"
"	movq	%rbp, %rsp\n"
"	popq	%rbp\n"
"	jmpq	*%rcx\n"
"	.size	mcr_return_tramp, .-mcr_return_tramp\n"
);

/* The TSC ticks at one rate through frequency changes and deep sleep
 * where the CPU says so (Linux's constant_tsc and nonstop_tsc flags). */
bool mcr_ticks_constant(void)
{
	static int known;	/* 0: not read yet, 1: constant, -1: not */
	char buf[8192];

	if (__atomic_load_n(&known, __ATOMIC_RELAXED))
		return known > 0;
	int fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	/* (The first CPU's flags line; every CPU has the same.) */
	char *flags = strstr(buf, "\nflags");
	char *end = flags ? strchr(flags + 1, '\n') : NULL;

	if (end)
		*end = 0;
	bool ok = flags && strstr(flags, " constant_tsc") && strstr(flags, " nonstop_tsc");
	__atomic_store_n(&known, ok ? 1 : -1, __ATOMIC_RELAXED);
	return ok;
}

/*
 * Both trampolines that save the argument frame (objpatch's
 * mcloc_tramp_args, libmcloc's mcr_direct_tramp) open it the same way:
 * at entry %rsp = S points at the return address into the function
 * (AFTER), S + 8 at its caller's (PARENT); "pushq %rbp; movq %rsp, %rbp",
 * then the args trampoline steps over the red zone (128), both align to
 * 16 and take the frame below.  So S + 8 lies 144 or 152 bytes above the
 * frame's end (args trampoline, by S's parity), or 16 or 24 (direct).
 * The candidate whose two words are AFTER and PARENT is the slot.  (The
 * other candidates are words of the stack that may lie in a sanitizer's
 * redzone: read as an unwinder reads a stack, unchecked.)
 */
__attribute__((no_sanitize_address))
uintptr_t *mcr_args_return_slot(const void *args, uintptr_t after, uintptr_t parent)
{
	static const unsigned above[] = { 144, 152, 16, 24 };
	uintptr_t end = (uintptr_t)args + MC_X86_ARGS_FRAME_BYTES;

	for (unsigned i = 0; i < sizeof(above) / sizeof(above[0]); i++) {
		uintptr_t *slot = (uintptr_t *)(end + above[i]);

		if (slot[0] == parent && slot[-1] == after)
			return slot;
	}
	return NULL;
}
