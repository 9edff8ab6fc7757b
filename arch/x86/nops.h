/* SPDX-License-Identifier: MIT */
/*
 * The x86_64 NOPs a call site becomes, one instruction each: the P6 long
 * NOPs (NOPL) the kernel's ftrace uses, by length.  The one source for the
 * tools' table (x86.c: what recordmcount --nop and objpatch nop write) and
 * the runtime (runtime.c: what it recognises and writes back).
 */
#ifndef MCLOC_ARCH_X86_NOPS_H
#define MCLOC_ARCH_X86_NOPS_H

#define MC_X86_NOP1 0x90					/* nop: what -fpatchable-function-entry=N repeats */
#define MC_X86_NOP5 0x0f, 0x1f, 0x44, 0x00, 0x00		/* nopl 0x0(%rax,%rax,1) */
#define MC_X86_NOP6 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00		/* nopw 0x0(%rax,%rax,1) */
#define MC_X86_NOP7 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00	/* nopl 0x0(%rax) */

/*
 * A parked site: a 5-byte call whose first byte (e8) became this one,
 * "test $disp32, %eax", which keeps the call's displacement and changes
 * only the flags (dead at a call site).  The runtime parks a site it
 * disables, and objpatch link --runtime parks each site on its image's
 * direct stub 0 (include/mcloc/abi.h), so that any enable to the same
 * target is a change of the first byte alone.
 */
#define MC_X86_PARK 0xa9

#endif
