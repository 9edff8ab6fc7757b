/* SPDX-License-Identifier: MIT */
/*
 * The x86_64 struct mcloc_args frame (include/mcloc/abi.h), as assembler
 * text: what a trampoline that calls C from a function's entry saves
 * around the call, at 0(%rsp) of a 16-byte aligned area of
 * MC_X86_ARGS_FRAME bytes.  The integer argument registers, %rax (vector
 * count of varargs, a return value), %r10 (static chain) and %xmm0-7;
 * %rdx/%xmm1 cover a second return value.  Shared by objpatch's static
 * args trampoline and libmcloc's direct trampoline.
 */
#ifndef MC_X86_ARGS_FRAME_H
#define MC_X86_ARGS_FRAME_H

#define MC_X86_ARGS_FRAME "192"
#define MC_X86_ARGS_FRAME_BYTES 192	/* (the same, for C) */

#define MC_X86_SAVE_ARGS \
"	movq	%rdi, 0(%rsp)\n" \
"	movq	%rsi, 8(%rsp)\n" \
"	movq	%rdx, 16(%rsp)\n" \
"	movq	%rcx, 24(%rsp)\n" \
"	movq	%r8, 32(%rsp)\n" \
"	movq	%r9, 40(%rsp)\n" \
"	movq	%rax, 48(%rsp)\n" \
"	movq	%r10, 56(%rsp)\n" \
"	movaps	%xmm0, 64(%rsp)\n" \
"	movaps	%xmm1, 80(%rsp)\n" \
"	movaps	%xmm2, 96(%rsp)\n" \
"	movaps	%xmm3, 112(%rsp)\n" \
"	movaps	%xmm4, 128(%rsp)\n" \
"	movaps	%xmm5, 144(%rsp)\n" \
"	movaps	%xmm6, 160(%rsp)\n" \
"	movaps	%xmm7, 176(%rsp)\n"

#define MC_X86_RESTORE_ARGS \
"	movq	0(%rsp), %rdi\n" \
"	movq	8(%rsp), %rsi\n" \
"	movq	16(%rsp), %rdx\n" \
"	movq	24(%rsp), %rcx\n" \
"	movq	32(%rsp), %r8\n" \
"	movq	40(%rsp), %r9\n" \
"	movq	48(%rsp), %rax\n" \
"	movq	56(%rsp), %r10\n" \
"	movaps	64(%rsp), %xmm0\n" \
"	movaps	80(%rsp), %xmm1\n" \
"	movaps	96(%rsp), %xmm2\n" \
"	movaps	112(%rsp), %xmm3\n" \
"	movaps	128(%rsp), %xmm4\n" \
"	movaps	144(%rsp), %xmm5\n" \
"	movaps	160(%rsp), %xmm6\n" \
"	movaps	176(%rsp), %xmm7\n"

/* Open that frame at a function's entry site, just called (nothing lives
 * below the stack pointer then, so no red zone to step over): a frame
 * pointer, the stack realigned (an mcount site after a prologue has the
 * other parity), the frame saved, and the return address into the
 * function and its caller's as the first two arguments of a C call. */
#define MC_X86_ENTER_ARGS \
"	.cfi_startproc\n" \
"	pushq	%rbp\n" \
"	.cfi_def_cfa_offset 16\n" \
"	.cfi_offset %rbp, -16\n" \
"	movq	%rsp, %rbp\n" \
"	.cfi_def_cfa_register %rbp\n" \
"	andq	$-16, %rsp\n" \
"	subq	$" MC_X86_ARGS_FRAME ", %rsp\n" \
MC_X86_SAVE_ARGS \
"	movq	8(%rbp), %rdi\n" \
"	movq	16(%rbp), %rsi\n"

/* Back out of a frame that "pushq %rbp; movq %rsp, %rbp" opened, and
 * return. */
#define MC_X86_LEAVE \
"	movq	%rbp, %rsp\n" \
"	popq	%rbp\n" \
"	.cfi_def_cfa %rsp, 8\n" \
"	ret\n" \
"	.cfi_endproc\n"

#endif
