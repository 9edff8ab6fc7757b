/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The Zydis entry points the x86 backend uses, reached through a
 * table so that the tools can be linked fully statically.
 *
 * Debian ships Zydis only as a shared library.  A dynamically linked tool
 * pays the dynamic loader on every exec (about 0.2 ms here, a large part of
 * recordmcount's per-object cost when a Makefile runs it once per object).
 * In the static build (MCLOC_ZYDIS_IMAGE defined) the table points into an
 * image of libZydis.so that zydis-image.c prelinked into the tool at build
 * time: it needs only memcpy, memset, strlen, __assert_fail and
 * __stack_chk_fail from libc, and has no TLS.  Otherwise the table points
 * at the normally linked library.
 */
#ifndef MCLOC_ARCH_X86_ZYDIS_H
#define MCLOC_ARCH_X86_ZYDIS_H

#include <Zydis/Zydis.h>
#include <stddef.h>

struct mc_zydis {
	ZyanStatus (*decoder_init)(ZydisDecoder *, ZydisMachineMode, ZydisStackWidth);
	ZyanStatus (*enable_mode)(ZydisDecoder *, ZydisDecoderMode, ZyanBool);
	ZyanStatus (*decode)(const ZydisDecoder *, ZydisDecoderContext *,
			     const void *, ZyanUSize, ZydisDecodedInstruction *);
	const char *(*mnemonic)(ZydisMnemonic);
};

/* The entry points. */
const struct mc_zydis *mc_zydis(void);

#endif
