/*
 * call-bench.sh's floor: hot() as an enabled site that does the least any
 * design keeping the SysV ABI can do.  Its entry calls a trampoline that
 * saves exactly libmcloc's argument frame (arch/x86/args-frame.h: the
 * integer argument registers, %rax, %r10 and %xmm0-7, all of which a C
 * callback may clobber), calls an empty C function with (ip, parent),
 * and restores.  No recursion guard, no read-side section, no lookup: what
 * this costs over the plain build no tracer of C callbacks can undercut.
 */
#include "../../../arch/x86/args-frame.h"

#include <stdint.h>

__attribute__((noinline, used, visibility("hidden")))
void floor_cb(uintptr_t ip, uintptr_t parent, void *ops, void *regs)
{
	(void)ip; (void)parent; (void)ops; (void)regs;
	__asm__ volatile("");
}

__asm__(
"	.text\n"
"	.p2align 4\n"
"	.globl	hot\n"
"	.type	hot, @function\n"
"hot:\n"
"	call	floor_tramp\n"
"	leaq	1(%rdi,%rdi,2), %rax\n"
"	ret\n"
"	.size	hot, .-hot\n"
"	.p2align 4\n"
"	.type	floor_tramp, @function\n"
"floor_tramp:\n"
MC_X86_ENTER_ARGS
"	xorl	%edx, %edx\n"
"	xorl	%ecx, %ecx\n"
"	call	floor_cb\n"
MC_X86_RESTORE_ARGS
MC_X86_LEAVE
"	.size	floor_tramp, .-floor_tramp\n"
);
