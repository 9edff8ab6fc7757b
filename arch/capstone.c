// SPDX-License-Identifier: GPL-2.0-or-later
#include "capstone.h"

#include <stdio.h>

/*
 * Handles are opened once per (arch, mode) and kept: a tool processes many
 * sites, and cs_open() is far more expensive than one decode.  The cache
 * holds no state of any file, only a decoder per instruction set, so one
 * run over many files may share it; it is per thread because a capstone
 * handle must not be used by two threads at once.  When more instruction
 * sets are in use than it holds (a batch of objects of every
 * architecture), the last slot is closed and reused.
 */
struct handle {
	cs_arch arch;
	cs_mode mode;
	csh h;
	cs_insn *insn;
};

static _Thread_local struct handle handles[16];
static _Thread_local unsigned nhandles;

static struct handle *get(cs_arch arch, cs_mode mode)
{
	for (unsigned i = 0; i < nhandles; i++)
		if (handles[i].arch == arch && handles[i].mode == mode)
			return &handles[i];
	if (nhandles == sizeof(handles) / sizeof(handles[0])) {
		nhandles--;
		cs_free(handles[nhandles].insn, 1);
		cs_close(&handles[nhandles].h);
	}
	struct handle *h = &handles[nhandles];

	if (cs_open(arch, mode, &h->h) != CS_ERR_OK)
		return NULL;
	h->insn = cs_malloc(h->h);
	if (!h->insn) {
		cs_close(&h->h);
		return NULL;
	}
	h->arch = arch;
	h->mode = mode;
	nhandles++;
	return h;
}

unsigned mc_cs_decode(cs_arch arch, cs_mode mode, const struct mc_text *t,
		      uint64_t off, unsigned *len, struct mc_site *s)
{
	struct handle *h;
	const uint8_t *code;
	size_t size;
	uint64_t addr = off;

	mode |= t->msb ? CS_MODE_BIG_ENDIAN : CS_MODE_LITTLE_ENDIAN;
	h = get(arch, mode);
	if (!h || off >= t->size || (code = t->buf + off, size = t->size - off,
				      !cs_disasm_iter(h->h, &code, &size, &addr, h->insn))) {
		if (s)
			snprintf(s->what, sizeof(s->what), "no instruction decodes there");
		return 0;
	}
	*len = h->insn->size;
	/* Only -v and --print read the text; formatting it for every site
	 * would be a good part of the tool's time. */
	if (s && t->describe)
		snprintf(s->what, sizeof(s->what), "%.24s %.36s", h->insn->mnemonic,
			 h->insn->op_str);
	return h->insn->id;
}
