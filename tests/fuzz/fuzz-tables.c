// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libmcloc's readers of an image: its call-site tables, as a program's
 * constructor registers them (mcloc_register_image(), then unregistered),
 * and the function names of its file (.symtab, .mcloc_names, .dynsym).
 *
 * The input: a count N (one byte), N table entries (4 bytes each, an
 * offset from a block of this harness's own text, signed: most land
 * outside it, where nothing may be read), then an ELF file for the name
 * reader.  The text block holds what sites can be: 5- and 6-byte NOPs,
 * calls, breakpoints, and bytes that are none of them.
 */
#include "harness.h"
#include <mcloc/abi.h>
#include <mcloc/mcloc.h>
#include "../../libmcloc/mcr.h"
#include "../../libmcloc/images.h"

#include <stdlib.h>
#include <string.h>

extern const uint8_t fz_text[], fz_text_end[];
__asm__(
"	.text\n"
"	.p2align 4\n"
"fz_text:\n"
"	.rept 64\n"
"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"		/* nop5 */
"	.byte 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00\n"	/* nop6 */
"	.byte 0xe8, 0x00, 0x00, 0x00, 0x00\n"		/* call .+5 */
"	.byte 0xa9, 0x00, 0x00, 0x00, 0x00\n"		/* parked */
"	.byte 0xcc, 0x90, 0xc3, 0xf3, 0x0f, 0x1e, 0xfa\n"
"	.byte 0x48, 0x89, 0xe5, 0xff, 0x25, 0x00\n"
"	.endr\n"
"fz_text_end:\n"
"	ret\n"
);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n, at = 1;
	uintptr_t *tab;
	struct mcloc_image desc;

	if (!size)
		return 0;
	n = data[0];
	if (at + 4 * n > size)
		n = (size - at) / 4;
	tab = malloc((n + 1) * sizeof(*tab));
	if (!tab)
		return 0;
	for (size_t i = 0; i < n; i++, at += 4) {
		int32_t off;

		memcpy(&off, data + at, 4);
		/* (Offsets past the block reach the rest of the harness,
		 * other mappings, and nothing at all.) */
		tab[i] = off == INT32_MIN ? 0 : (uintptr_t)fz_text + (intptr_t)off;
	}
	desc = (struct mcloc_image){
		.magic = MCLOC_IMAGE_MAGIC, .version = MCLOC_IMAGE_VERSION,
		.mcount_start = (uintptr_t)tab, .mcount_stop = (uintptr_t)(tab + n),
		.base = 0,	/* (this harness is not PIE) */
	};
	if (mcloc_register_image(&desc) == 0)
		mcloc_unregister_image(&desc);
	free(tab);

	char *str = NULL;
	size_t nf = 0;
	struct fsym *fs = mcr_read_funcs(fz_put("image", data + at, size - at), 0, &str, &nf);

	free(fs);
	free(str);
	return 0;
}
