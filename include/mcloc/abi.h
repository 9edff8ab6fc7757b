/* SPDX-License-Identifier: MIT */
/*
 * The binary interface between an image's static trampolines (emitted by
 * `objpatch tramp`, linked into the image by `objpatch link --runtime`)
 * and the runtime library that patches sites to call them.
 *
 * A patched site calls one of two trampolines:
 *   mcloc_tramp_args  saves the argument and return-value registers, calls
 *                     desc->args_handler(after, parent, desc, args), and
 *                     resumes the function;
 *   mcloc_tramp_regs  saves every general register, the flags and the
 *                     argument vector registers into struct mcloc_regs,
 *                     calls desc->regs_handler(after, parent, desc, regs),
 *                     restores them all from the struct (so the handler may
 *                     change any) and resumes at regs->pc: setting pc to
 *                     another function's address redirects the call.
 * AFTER is the address just past the site (the runtime maps it to its
 * record), PARENT the return address of the traced function's caller.
 * A NULL handler makes the trampoline return at once.  A handler returns
 * 0, or (version 3) the address of a direct trampoline that the
 * trampoline then enters instead of resuming the function, with every
 * register and the stack as the site's call left them (the regs one with
 * regs->pc as where it returns): mcloc_register_direct() through the
 * list.  The scratch register it jumps through: x86_64 %r11, aarch64 x17,
 * riscv64 t1.
 *
 * Site forms, at the function's entry:
 *   x86_64   call mcloc_tramp_* or a direct stub (5 bytes; __fentry__
 *            sites), parked (below) when disabled
 *   aarch64  mov x9, x30; bl mcloc_tramp_*   (-fpatchable-function-entry=2)
 *   riscv64  auipc t0, hi; jalr t0, lo(t0)   (-fpatchable-function-entry=4
 *            with compressed NOPs, =2 without)
 * On aarch64 and riscv64, objpatch link --runtime writes the first
 * instruction (mov, auipc), and only the second toggles with a NOP at run
 * time, with one aligned 4-byte store.  With twice the NOPs, half of them
 * before the entry (=4,2 on aarch64; =8,4 or =4,2 on riscv64) and
 * functions aligned to 8 bytes, the 8 bytes before the entry are the
 * site's ops slot (the kernel's DYNAMIC_FTRACE_WITH_CALL_OPS): the
 * runtime stores there the one ops that covers the site, or its list ops,
 * and the args trampoline's handler calls it without a lookup.
 */
#ifndef MCLOC_ABI_H
#define MCLOC_ABI_H

#include <stddef.h>
#include <stdint.h>

#define MCLOC_IMAGE_MAGIC 0x636c636d	/* "mclc" (no suffix: assemblers read it too) */
#define MCLOC_IMAGE_VERSION 4	/* 3: handlers may name a direct trampoline;
				   4: the image holds its own direct stubs */

/*
 * The byte offsets of struct mcloc_image, the same on every 64-bit target
 * (the runtime supports no other).  They are the one source of the layout
 * for everything that cannot see the struct: the trampolines' assembler
 * text, the descriptor below, and objpatch, which writes images of any
 * target from any host.  The static asserts after the struct tie them to
 * it wherever it is compiled for a 64-bit target.
 */
#define MCLOC_IMAGE_OFF_MAGIC		0
#define MCLOC_IMAGE_OFF_VERSION		4
#define MCLOC_IMAGE_OFF_MCOUNT_START	8
#define MCLOC_IMAGE_OFF_MCOUNT_STOP	16
#define MCLOC_IMAGE_OFF_PATCHABLE_START	24
#define MCLOC_IMAGE_OFF_PATCHABLE_STOP	32
#define MCLOC_IMAGE_OFF_TRAMP_ARGS	40
#define MCLOC_IMAGE_OFF_TRAMP_REGS	48
#define MCLOC_IMAGE_OFF_BASE		56
#define MCLOC_IMAGE_OFF_ARGS_HANDLER	64
#define MCLOC_IMAGE_OFF_REGS_HANDLER	72
#define MCLOC_IMAGE_OFF_LIB		80
#define MCLOC_IMAGE_OFF_DIRECT_STUBS	88
#define MCLOC_IMAGE_OFF_DIRECT_TRAMP	96
#define MCLOC_IMAGE_SIZE		104
#define MCLOC_IMAGE_SIZE_V3		88	/* (versions 2 and 3 end at lib) */

/* One per image, in its writable data, named __mcloc_image (hidden).
 * objpatch sort keeps mcount_stop in step with the cleaned table. */
struct mcloc_image {
	uint32_t magic, version;
	uintptr_t mcount_start, mcount_stop;		/* __mcount_loc */
	uintptr_t patchable_start, patchable_stop;	/* __patchable_function_entries */
	uintptr_t tramp_args, tramp_regs;
	uintptr_t base;					/* __ehdr_start: the load address */
	uintptr_t (*args_handler)(uintptr_t after, uintptr_t parent,
				  struct mcloc_image *img, void *args);
	uintptr_t (*regs_handler)(uintptr_t after, uintptr_t parent,
				  struct mcloc_image *img, void *regs);
	void *lib;	/* the library's own record of the image (v2) */
	/* Version 4.  The page of direct stubs (below), or 0 where the
	 * architecture has none; and what they jump through, which the
	 * library sets when it registers the image. */
	uintptr_t direct_stubs;
	uintptr_t direct_tramp;
};

/*
 * Direct stubs (x86_64): one ops alone on a site calls a stub of its own,
 * which reaches the library's direct trampoline with the stub's address
 * in %r11 and no lookup: a page of MCLOC_DIRECT_STUBS stubs of
 * MCLOC_DIRECT_STUB bytes, page-aligned, stub K for the ops in the
 * library's direct slot K.  Version 4 images carry the page in their own
 * text (objpatch tramp), so that objpatch link --runtime can leave every
 * 5-byte site parked on stub 0 ("test $disp32, %eax" with the call's
 * displacement, arch/x86/nops.h): the first ops then enables a site by
 * its first byte alone, as every later toggle does.  Older images get a
 * page mapped near them at run time.
 */
#define MCLOC_DIRECT_STUB	32
#define MCLOC_DIRECT_PAGE	4096
#define MCLOC_DIRECT_STUBS	(MCLOC_DIRECT_PAGE / MCLOC_DIRECT_STUB)

#if UINTPTR_MAX == 0xffffffffffffffffu
#define MCLOC_ABI_AT_(field, OFF) \
	_Static_assert(offsetof(struct mcloc_image, field) == MCLOC_IMAGE_OFF_##OFF, \
		       "MCLOC_IMAGE_OFF_" #OFF " is not where the struct has " #field)
MCLOC_ABI_AT_(magic, MAGIC);
MCLOC_ABI_AT_(version, VERSION);
MCLOC_ABI_AT_(mcount_start, MCOUNT_START);
MCLOC_ABI_AT_(mcount_stop, MCOUNT_STOP);
MCLOC_ABI_AT_(patchable_start, PATCHABLE_START);
MCLOC_ABI_AT_(patchable_stop, PATCHABLE_STOP);
MCLOC_ABI_AT_(tramp_args, TRAMP_ARGS);
MCLOC_ABI_AT_(tramp_regs, TRAMP_REGS);
MCLOC_ABI_AT_(base, BASE);
MCLOC_ABI_AT_(args_handler, ARGS_HANDLER);
MCLOC_ABI_AT_(regs_handler, REGS_HANDLER);
MCLOC_ABI_AT_(lib, LIB);
MCLOC_ABI_AT_(direct_stubs, DIRECT_STUBS);
MCLOC_ABI_AT_(direct_tramp, DIRECT_TRAMP);
_Static_assert(sizeof(struct mcloc_image) == MCLOC_IMAGE_SIZE,
	       "MCLOC_IMAGE_SIZE is not the struct's size");
#undef MCLOC_ABI_AT_
#endif

/*
 * .mcloc_names: the names of the functions that hold call sites, which
 * objpatch link --runtime adds so that libmcloc can name the functions of
 * a stripped image (kallsyms' job in a kernel).  A non-allocated section,
 * which strip(1) keeps while it drops .symtab, in the image's byte order:
 * a header, COUNT entries sorted by start, then the NUL-terminated names
 * (each entry's NAME is an offset from the first).
 */
#define MCLOC_NAMES_SECTION	".mcloc_names"
#define MCLOC_NAMES_MAGIC	"MCLNAME1"	/* 8 bytes, no NUL */

struct mcloc_names_hdr {
	char magic[8];
	uint64_t count;
};

struct mcloc_name_ent {
	uint64_t start;		/* link-time address */
	uint64_t size;
	uint32_t name;
	uint32_t reserved;	/* 0 */
};

_Static_assert(sizeof(struct mcloc_names_hdr) == 16, "the .mcloc_names header is 16 bytes");
_Static_assert(sizeof(struct mcloc_name_ent) == 24, "a .mcloc_names entry is 24 bytes");

#define MCLOC_STR_(x) #x
#define MCLOC_STR(x) MCLOC_STR_(x)

/*
 * The descriptor and its registration, as assembler text for a 64-bit
 * target (GNU as), laid out by the offsets above with .org so that any
 * disagreement is an assembler error, not a wrong image.  MSTART, MSTOP,
 * PSTART and PSTOP are the table bounds: the GNU __start_/__stop_ symbols
 * where the linker is to resolve them, or a placeholder that objpatch
 * link fills in after the link (a __start_ reference keeps every table
 * section alive, which would defeat ld --gc-sections).  The trampolines
 * and __mcloc_ctor/__mcloc_dtor come from the architecture's text.
 */
#define MCLOC_IMAGE_ASM(MSTART, MSTOP, PSTART, PSTOP)				\
	"	.section .data.rel.local.__mcloc_image, \"aw\"\n"		\
	"	.p2align 3\n"							\
	"	.globl	__mcloc_image\n"					\
	"	.hidden	__mcloc_image\n"					\
	"	.type	__mcloc_image, %object\n"				\
	"__mcloc_image:\n"							\
	"	.long	" MCLOC_STR(MCLOC_IMAGE_MAGIC) "\n"			\
	"	.long	" MCLOC_STR(MCLOC_IMAGE_VERSION) "\n"			\
	"	.org	__mcloc_image + " MCLOC_STR(MCLOC_IMAGE_OFF_MCOUNT_START) "\n" \
	"	.quad	" MSTART ", " MSTOP "\n"				\
	"	.org	__mcloc_image + " MCLOC_STR(MCLOC_IMAGE_OFF_PATCHABLE_START) "\n" \
	"	.quad	" PSTART ", " PSTOP "\n"				\
	"	.org	__mcloc_image + " MCLOC_STR(MCLOC_IMAGE_OFF_TRAMP_ARGS) "\n" \
	"	.quad	mcloc_tramp_args, mcloc_tramp_regs\n"			\
	"	.org	__mcloc_image + " MCLOC_STR(MCLOC_IMAGE_OFF_BASE) "\n"	\
	"	.quad	__ehdr_start\n"						\
	"	.org	__mcloc_image + " MCLOC_STR(MCLOC_IMAGE_OFF_DIRECT_STUBS) "\n" \
	"	.quad	mcloc_direct_stubs\n"					\
	"	.org	__mcloc_image + " MCLOC_STR(MCLOC_IMAGE_SIZE) "\n"	\
	"	.size	__mcloc_image, .-__mcloc_image\n"			\
	"	.weak	__start___mcount_loc, __stop___mcount_loc\n"		\
	"	.hidden	__start___mcount_loc, __stop___mcount_loc\n"		\
	"	.weak	__start___patchable_function_entries, __stop___patchable_function_entries\n" \
	"	.hidden	__start___patchable_function_entries, __stop___patchable_function_entries\n" \
	"	.weak	__ehdr_start\n"						\
	"	.hidden	__ehdr_start\n"						\
	"	.weak	mcloc_direct_stubs\n"					\
	"	.hidden	mcloc_direct_stubs\n"					\
	"	.weak	mcloc_register_image, mcloc_unregister_image\n"	\
	"	.section .init_array, \"aw\"\n"				\
	"	.p2align 3\n"							\
	"	.quad	__mcloc_ctor\n"						\
	"	.section .fini_array, \"aw\"\n"				\
	"	.p2align 3\n"							\
	"	.quad	__mcloc_dtor\n"						\
	"	.section .note.GNU-stack, \"\", %progbits\n"

/* The bounds as the linker resolves them. */
#define MCLOC_IMAGE_ASM_LINKED							\
	MCLOC_IMAGE_ASM("__start___mcount_loc", "__stop___mcount_loc",		\
			"__start___patchable_function_entries",			\
			"__stop___patchable_function_entries")
/* The bounds left to objpatch link: every one the descriptor itself, an
 * address that yields an empty table until they are filled in. */
#define MCLOC_IMAGE_ASM_PLACEHOLDER						\
	MCLOC_IMAGE_ASM("__mcloc_image", "__mcloc_image", "__mcloc_image", "__mcloc_image")

#if defined(__x86_64__)
struct mcloc_args {
	uint64_t rdi, rsi, rdx, rcx, r8, r9, rax, r10;
	uint8_t xmm[8][16];
};
struct mcloc_regs {
	uint64_t r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
	uint64_t rax, rcx, rdx, rsi, rdi, flags;
	uint64_t pc;	/* where the function resumes */
	uint64_t sp;	/* the stack pointer at the site (read-only) */
	uint8_t xmm[8][16];
};
#elif defined(__aarch64__)
struct mcloc_args {
	uint64_t x[9];	/* x0-x7, x8 (indirect result) */
	uint64_t lr;	/* the caller's return address (x9 at the site) */
	uint8_t q[8][16];
};
struct mcloc_regs {
	uint64_t x[31];	/* x30 is the function's own return address */
	uint64_t sp;	/* read-only */
	uint64_t pc;
	uint64_t nzcv;
	uint8_t q[8][16];
};
#elif defined(__riscv) && __riscv_xlen == 64
struct mcloc_args {
	uint64_t a[8];
	uint64_t ra;
	uint64_t pad;
	uint64_t fa[8];
};
struct mcloc_regs {
	union {
		uint64_t x[32];	/* x[0] holds pc: where the function resumes */
		uint64_t pc;
	};
	uint64_t fa[8];
};
#endif

/* Weak in every image: present only when the runtime library is. */
int mcloc_register_image(struct mcloc_image *img)
	__attribute__((weak, visibility("default")));
void mcloc_unregister_image(struct mcloc_image *img)
	__attribute__((weak, visibility("default")));

#endif
