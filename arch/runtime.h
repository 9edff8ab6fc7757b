/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the run-time patcher (libmcloc) needs to know about an instruction
 * set: the one-instruction encodings of a site's states, the breakpoint
 * used while a site changes, and how to emulate the new instruction for a
 * thread that hits the breakpoint (the kernel's int3 protocol).  Kept
 * apart from arch.h: libmcloc links none of the object-writing tools'
 * code.
 */
#ifndef MCLOC_ARCH_RUNTIME_H
#define MCLOC_ARCH_RUNTIME_H

#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include <mcloc/abi.h>
#if defined(__x86_64__)
#include "x86/nops.h"
#endif

/* The longest site the runtime rewrites (x86: 6; pokes are sized by it). */
#define MCR_MAX_SITE 6

/*
 * How a site changes.  x86_64: a call is 5 or 6 bytes, more than one
 * store can change atomically, hence the breakpoint protocol of patch.c.
 * aarch64 and riscv64: the site is one naturally aligned 4-byte
 * instruction after one that never changes (mov x9, x30; auipc t0), and
 * one store changes it: the architectures allow another core to execute
 * it while it changes, seeing the old or the new instruction (patch.c
 * cites the rules).
 */
#if defined(__x86_64__)
#define MCR_ONE_STORE 0
/*
 * x86_64 parks a site rather than NOP it: disabling a call keeps its
 * displacement and swaps its first byte for MCR_PARK, which makes it
 * "test $disp32, %eax", one instruction of the same length that changes
 * nothing but the flags (dead where a call was: no caller keeps a flag
 * live across one).  Enabling it again to the same target then changes
 * the first byte alone, so the breakpoint protocol has no tails to write
 * and no sync for them (patch.c).  A 6-byte site, once first enabled,
 * holds a 5-byte call and a 1-byte NOP after it for good: MCR_CALL_LEN.
 */
#define MCR_PARK MC_X86_PARK	/* (arch/x86/nops.h) */
#define MCR_CALL_LEN(len) 5u
/* A site that changes by its first byte alone (parked, and the call of
 * the same target) is this long, and its call's first byte is this. */
#define MCR_FLIP_LEN 5u
#define MCR_CALL 0xe8
/* Where the call at SITE, a site that flips, goes: parked, a call, or
 * either under a change's breakpoint (the displacement stays). */
static inline uintptr_t mcr_flip_dest(uintptr_t site)
{
	int32_t rel;

	__builtin_memcpy(&rel, (const void *)(site + 1), 4);
	return site + MCR_FLIP_LEN + (intptr_t)rel;
}
#else
#define MCR_CALL_LEN(len) (len)
#define MCR_ONE_STORE 1
/* The ops slot of a site that has one: 8 bytes, 8-aligned, this far
 * before the changing instruction (two instructions' worth of slot, then
 * the fixed first instruction). */
#define MCR_SLOT_BACK 12
#endif

/*
 * A cheap clock of constant rate, for timing calls: the x86 TSC, the
 * arm64 virtual counter, the riscv64 time CSR, read in a few cycles where
 * clock_gettime() costs tens of nanoseconds on a VM (kvm-clock).  Its
 * rate is not known here: a caller converts by the CLOCK_MONOTONIC time
 * elapsed over a span of ticks.  mcr_ticks_constant() says whether the
 * rate really is constant (x86: the CPU says constant_tsc and
 * nonstop_tsc); where it is not, a caller uses clock_gettime().
 */
static inline uint64_t mcr_ticks(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
#elif defined(__riscv)
	uint64_t v;

	__asm__ volatile("rdtime %0" : "=r"(v));
	return v;
#else
#error "mcr_ticks: no constant-rate counter known for this architecture"
#endif
}
#if defined(__x86_64__)
bool mcr_ticks_constant(void);
/*
 * Where the return address into a traced function's caller lies, found
 * from the argument frame ARGS that the args trampoline or the direct
 * trampoline saved (no registers are saved there): AFTER and PARENT are
 * the two return addresses the trampoline read, and are checked in place.
 * NULL when neither trampoline's layout fits.  What lets a tracer time a
 * call without the register-saving trampoline.
 */
#define MCR_ARGS_RETURN_SLOT 1
uintptr_t *mcr_args_return_slot(const void *args, uintptr_t after, uintptr_t parent);
#else
static inline bool mcr_ticks_constant(void)
{
	return true;	/* (architected counters of a fixed frequency) */
}
#endif

/*
 * The instruction for a site of LEN bytes at SITE: a call to TARGET, or
 * (TARGET 0) the NOP.  A return address never lands inside an
 * instruction: the call is the site's only one, or (x86_64, a 6-byte
 * site) a call of MCR_CALL_LEN() bytes and a 1-byte NOP after it.
 * Returns 0, or -1 when this length has no such encoding or TARGET is out
 * of range.
 */
int mcr_encode(uintptr_t site, unsigned len, uintptr_t target, uint8_t *out);

#ifdef MCR_PARK
/* The parked form of a site of LEN bytes whose call goes to TARGET: the
 * call with MCR_PARK for its first byte (LEN 5 only: -1 otherwise). */
int mcr_encode_parked(uintptr_t site, unsigned len, uintptr_t target, uint8_t *out);
#endif

/* The same, for TARGET one of an image's trampolines (or their stubs),
 * which riscv64 may reach through their mirror (arch/riscv/tramp.h). */
int mcr_encode_tramp(uintptr_t site, unsigned len, uintptr_t target, uint8_t *out);

/*
 * What a table entry ENTRY (the address the compiler recorded) holds, for
 * images linked with or without objpatch: the site that changes, its
 * length, whether it has an ops slot, and whether it is still the
 * compiler's call to FENTRY (directly, through a PLT entry or a GOT slot)
 * rather than a NOP.  Returns 0, or -1 when it is no site the runtime
 * can patch.
 */
struct mcr_site {
	uintptr_t at;
	unsigned len;
	bool is_call;
	bool slot;
	uintptr_t parked;	/* x86_64: a parked call's target (MCR_PARK), else 0 */
};
int mcr_site_find(uintptr_t entry, uintptr_t fentry, struct mcr_site *s);
/* Why ENTRY, which mcr_site_find() refused, is no site, when that is a
 * known form with a known remedy (one line's tail), else NULL. */
const char *mcr_site_refusal(uintptr_t entry);
/* Whether one of INFO's loaded segments holds all of [LO, HI). */
static inline bool mcr_segment_holds(const struct dl_phdr_info *info, uintptr_t lo,
				     uintptr_t hi)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t at = info->dlpi_addr + p->p_vaddr;

		if (p->p_type == PT_LOAD && lo >= at && hi >= lo && hi - at <= p->p_memsz)
			return true;
	}
	return false;
}

#if MCR_ONE_STORE
/* After the stores of a batch and before its sync: make the instruction
 * caches of every core see [LO, HI). */
void mcr_flush_icache(uintptr_t lo, uintptr_t hi);

/*
 * For a program linked without objpatch (libmcloc/discover.c): the 8
 * bytes that turn the patchable entry's NOPs at ENTRY into a run-time
 * site whose calls reach the trampoline entries ARGS and REGS (the fixed
 * instruction, then the NOP that toggles), what objpatch link --runtime
 * writes.  -1 when ENTRY does not hold 8 bytes of NOPs, or holds 16 (an
 * ops slot's layout, -fpatchable-function-entry=4,2 and the like, which
 * cannot be told from two functions' NOPs without the symbols), or the
 * trampolines are out of reach.
 */
int mcr_site_prepare(uintptr_t entry, uintptr_t args, uintptr_t regs, uint8_t out[8]);
#else
/* The breakpoint written over a site's first byte while it changes. */
extern const uint8_t mcr_breakpoint;

/* The site whose breakpoint the thread of UC hit. */
uintptr_t mcr_trap_site(const ucontext_t *uc);

/* Make the thread of UC behave as if it had executed INSN (LEN bytes,
 * from mcr_encode) at SITE. */
void mcr_emulate(ucontext_t *uc, uintptr_t site, const uint8_t *insn, unsigned len);

/* Resume the thread of UC at SITE (to run what is now there). */
void mcr_rewind(ucontext_t *uc, uintptr_t site);
#endif

/* A jump to TARGET from anywhere, in MCR_STUB_SIZE bytes at BUF: what a
 * page placed near such an image holds, so that its sites' rel32 calls
 * reach the library's own trampolines. */
#define MCR_STUB_SIZE 32
void mcr_jump_stub(uint8_t *buf, uintptr_t target);

/* A page of such stubs for an image without trampolines of its own: the
 * args trampoline's at PAGE, the regs one's MCR_STUB_SIZE on, laid out as
 * the architecture's sites expect (riscv64: mirrored, arch/riscv/tramp.h). */
void mcr_tramp_stubs(uint8_t *page, uintptr_t args, uintptr_t regs);

/*
 * One ops alone on a site: the kernel's per-ops trampoline, without
 * writing code at run time.  Such a site calls a stub on a page of stubs
 * in its image (version 4, include/mcloc/abi.h) or mapped near it
 * (MCR_DIRECT_PAGE bytes: MCR_DIRECT_SLOTS slots for each call length the
 * ISA has, mcr_direct_len[]).  A stub jumps to
 * mcr_direct_tramp with its own address in a scratch register; the
 * trampoline saves what the callback may clobber and calls
 * mcr_direct_hook(AFTER, PARENT, STUB, ARGS, SLOT), where AFTER is the
 * address just past the site, ARGS the argument frame it saved and SLOT
 * the stack word PARENT was read from (the caller's return address, if
 * the site is at an entry: what a callback that times the call hooks,
 * without looking for it).  Stubs are written once, when the page is
 * made or linked, and never change: a thread stopped inside one finds the
 * same stub when it resumes.
 */
#define MCR_DIRECT_STUB MCLOC_DIRECT_STUB	/* (include/mcloc/abi.h) */
#define MCR_DIRECT_PAGE MCLOC_DIRECT_PAGE
#define MCR_DIRECT_LENS 1
#define MCR_DIRECT_SLOTS (MCR_DIRECT_PAGE / MCR_DIRECT_STUB / MCR_DIRECT_LENS)
extern const uint8_t mcr_direct_len[MCR_DIRECT_LENS];
void mcr_direct_stub(uint8_t *buf, uintptr_t tramp);
/* Whether PAGE (readable, MCR_DIRECT_PAGE bytes) holds an image's linked
 * stubs, each jumping through the word at THROUGH: a descriptor is the
 * image's own data, and what it names is called. */
bool mcr_direct_stubs_linked(const uint8_t *page, uintptr_t through);
void mcr_direct_tramp(void);
/* Defined by the library. */
void mcr_direct_hook(uintptr_t after, uintptr_t parent, uintptr_t stub, void *args,
		     uintptr_t *slot);

/* Where the call of LEN bytes that ends at AFTER goes, also while its
 * first byte is the breakpoint of a change in progress; 0 if it is not a
 * call of ours (a NOP, say). */
uintptr_t mcr_call_dest(uintptr_t after, unsigned len);

/*
 * Timing a function needs its return: the function-graph tracer's way.  At
 * the function's entry (a site's callback with registers), the return
 * address is swapped for mcr_return_tramp; when the function returns there,
 * the trampoline keeps the return value, calls mcr_return_hook(SP) with the
 * stack pointer as the caller will see it, and goes on to the address the
 * hook returns (the real one, which the library kept).
 *
 * mcr_return_slot() finds where the return address of a function lies
 * whose site SITE ran with the registers REGS and whose caller is PARENT:
 * on the stack (x86_64), or in REGS, which the regs trampoline restores
 * (aarch64's x30, riscv64's ra).  NULL when it is not where an entry site
 * (fentry, patchable entry) leaves it, for example at an mcount site
 * after the prologue; such calls are not timed.  *KEY is the stack
 * pointer mcr_return_hook() will be given when the function returns.
 */
struct mcloc_regs;
uintptr_t *mcr_return_slot(struct mcloc_regs *regs, uintptr_t site, uintptr_t parent,
			   uintptr_t *key);

/*
 * Is SITE, a registered site, at its function's entry (fentry, a
 * patchable entry), rather than after the prologue (-pg's mcount call)?
 * Only at the entry may a callback move the function (regs->pc: the
 * function's frame is not built yet) or time it by its return address.
 * FN is where the function begins, 0 if unknown: aarch64 and riscv64 tell
 * by the site's fixed instruction, x86_64 only by FN (a site at the
 * function's first byte, or after its endbr64), and says yes without it.
 */
bool mcr_site_at_entry(uintptr_t site, uintptr_t fn);
void mcr_return_tramp(void);

/*
 * An x86_64 mcount site after a prologue (-pg without -mfentry) is called
 * with the function's frame built: its caller's return address lies at
 * 8(%rbp), where the word the trampolines read as the parent is any word
 * of the new frame.  mcr_site_framed() says whether SITE, inside the
 * function at FN, is such a site of a function that begins (after an
 * endbr64) with the frame -pg forces, push %rbp; mov %rsp,%rbp: not one
 * that realigns its stack first, whose 8(%rbp) is a copy.
 * mcr_framed_slot() is that return slot, from the frame pointer the
 * site's call left, in REGS (the regs trampoline's), else saved by the
 * args or direct trampoline just below the two return addresses it read
 * (TSLOT: where it read the parent, mcr_args_return_slot()): NULL unless
 * it lies a frame's size above the stack pointer of the site's call.
 * Elsewhere (aarch64, riscv64: mcr_return_slot() tells by the code) no
 * site is framed.
 */
struct mcloc_regs;
#if defined(__x86_64__)
bool mcr_site_framed(uintptr_t site, uintptr_t fn);
uintptr_t *mcr_framed_slot(const struct mcloc_regs *regs, const uintptr_t *tslot);
#else
static inline bool mcr_site_framed(uintptr_t site, uintptr_t fn)
{
	(void)site, (void)fn;
	return false;
}
static inline uintptr_t *mcr_framed_slot(const struct mcloc_regs *regs, const uintptr_t *tslot)
{
	(void)regs, (void)tslot;
	return NULL;
}
#endif

/*
 * What mcr_return_tramp kept of a returning call, which it hands the hook
 * (it restores them after): the integer result registers, then the
 * floating-point ones, whose first holds a float or double result in its
 * low bytes (x86_64 %rax, %rdx, %xmm0, %xmm1; aarch64 x0, x1, x8, q0-q3;
 * riscv64 a0, a1, fa0, fa1).
 */
struct mcr_retregs {
	uint64_t i[2];
#if defined(__x86_64__)
	uint8_t fp[2][16];
#elif defined(__aarch64__)
	uint64_t x8, pad;
	uint8_t fp[4][16];
#else
	uint64_t fp[2];
#endif
};
/* Defined by the library. */
uintptr_t mcr_return_hook(uintptr_t sp, const struct mcr_retregs *rr);

/*
 * A traced call's argument registers as the calling convention passes
 * scalars: the integer ones in order (NI of them: 6 on x86_64, 8
 * elsewhere), the floating-point ones (FP: the first's low bytes, each
 * FP_STRIDE bytes on), and where the first argument passed on the stack
 * lies (NULL: unknown).  From the registers the regs trampoline saved
 * (REGS), else (x86_64) from the args or direct trampoline's argument
 * frame ARGS, with SLOT where the caller's return address lies (or NULL:
 * found from AFTER and PARENT, or for REGS at their stack pointer; a
 * framed site's is mcr_framed_slot()).  AT_ENTRY: the site is at its function's
 * entry, the only place where the stack arguments are where the
 * convention puts them.  False when neither source is there.
 */
struct mcr_argregs {
	uint64_t i[8];
	unsigned ni;
	unsigned fp_stride;
	const uint8_t *fp;
	const uint64_t *stack;
};
bool mcr_call_argregs(const struct mcloc_regs *regs, const void *args, const uintptr_t *slot,
		      uintptr_t after, uintptr_t parent, bool at_entry, struct mcr_argregs *out);

#endif
