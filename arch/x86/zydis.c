// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Reaching Zydis: linked normally, or, in the fully static build, through
 * the image of libZydis.so that zydis-image prelinked into the tool at
 * build time.  See zydis.h for why.
 */
#include "zydis.h"

#include <stdbool.h>

#ifndef MCLOC_ZYDIS_IMAGE

const struct mc_zydis *mc_zydis(void)
{
	static const struct mc_zydis z = {
		ZydisDecoderInit, ZydisDecoderEnableMode, ZydisDecoderDecodeInstruction,
		ZydisMnemonicGetString
	};

	return &z;
}

#else

/* Defined by the image zydis-image generated from libZydis.so. */
ZyanStatus mc_zydis_ZydisDecoderInit(ZydisDecoder *, ZydisMachineMode, ZydisStackWidth);
ZyanStatus mc_zydis_ZydisDecoderEnableMode(ZydisDecoder *, ZydisDecoderMode, ZyanBool);
ZyanStatus mc_zydis_ZydisDecoderDecodeInstruction(const ZydisDecoder *, ZydisDecoderContext *,
						  const void *, ZyanUSize,
						  ZydisDecodedInstruction *);
const char *mc_zydis_ZydisMnemonicGetString(ZydisMnemonic);
extern void (*const mc_zydis_inits[])(void);

const struct mc_zydis *mc_zydis(void)
{
	static const struct mc_zydis z = {
		mc_zydis_ZydisDecoderInit, mc_zydis_ZydisDecoderEnableMode,
		mc_zydis_ZydisDecoderDecodeInstruction, mc_zydis_ZydisMnemonicGetString
	};
	static bool ready;

	/* As ld.so would before handing the library out: its initialisers
	 * (crtstuff's, today; no-ops without a TM clone table or gmon). */
	if (!ready) {
		for (size_t i = 0; mc_zydis_inits[i]; i++)
			mc_zydis_inits[i]();
		ready = true;
	}
	return &z;
}

#endif
