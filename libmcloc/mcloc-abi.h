/* SPDX-License-Identifier: GPL-2.0-or-later */
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
 * A NULL handler makes the trampoline return at once.
 *
 * Site forms, at the function's entry:
 *   x86_64   call mcloc_tramp_*              (5 bytes; __fentry__ sites)
 *   aarch64  mov x9, x30; bl mcloc_tramp_*   (-fpatchable-function-entry=2)
 *   riscv64  auipc t0, hi; jalr t0, lo(t0)   (the auipc is written at build
 *            time; only the jalr toggles with a NOP at run time)
 */
#ifndef MCLOC_ABI_H
#define MCLOC_ABI_H

#include <stdint.h>

#define MCLOC_IMAGE_MAGIC 0x636c636du	/* "mclc" */
#define MCLOC_IMAGE_VERSION 2

/* One per image, in its writable data, named __mcloc_image (hidden).
 * objpatch sort keeps mcount_stop in step with the cleaned table. */
struct mcloc_image {
	uint32_t magic, version;
	uintptr_t mcount_start, mcount_stop;		/* __mcount_loc */
	uintptr_t patchable_start, patchable_stop;	/* __patchable_function_entries */
	uintptr_t tramp_args, tramp_regs;
	uintptr_t base;					/* __ehdr_start: the load address */
	void (*args_handler)(uintptr_t after, uintptr_t parent,
			     struct mcloc_image *img, void *args);
	void (*regs_handler)(uintptr_t after, uintptr_t parent,
			     struct mcloc_image *img, void *regs);
	void *lib;	/* the library's own record of the image (v2) */
};

/* Byte offsets the trampolines use. */
#define MCLOC_IMAGE_MCOUNT_STOP 16
#define MCLOC_IMAGE_PATCHABLE_STOP 32
#define MCLOC_IMAGE_ARGS_HANDLER 64
#define MCLOC_IMAGE_REGS_HANDLER 72

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
	uint64_t x[32];	/* x[0] holds pc: where the function resumes */
	uint64_t fa[8];
};
#endif

/* Weak in every image: present only when the runtime library is. */
int mcloc_register_image(struct mcloc_image *img)
	__attribute__((weak, visibility("default")));
void mcloc_unregister_image(struct mcloc_image *img)
	__attribute__((weak, visibility("default")));

#endif
