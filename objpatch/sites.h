/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The call-site table of an object as objpatch sees it: every entry
 * resolved to section+offset, and the state of the code there decoded.
 * Shared by the inspecting subcommands.
 */
#ifndef MCLOC_OBJPATCH_SITES_H
#define MCLOC_OBJPATCH_SITES_H

#include "../arch/arch.h"
#include "../common/mcelf.h"

enum op_state {
	OP_CALL,	/* a call to an mcount symbol */
	OP_NOP,		/* one NOP of a call site's length */
	OP_PATCHABLE,	/* a run of NOPs (-fpatchable-function-entry) */
	OP_OTHER,	/* anything else: a defect */
};

struct op_entry {
	size_t idx;		/* position in the table */
	const char *table;	/* __mcount_loc or __patchable_function_entries */
	bool resolved;		/* its relocation names a place */
	uint32_t shndx;
	uint64_t off;
	enum op_state state;
	uint8_t len;		/* bytes of the call or NOP(s) */
	const char *target;	/* OP_CALL: the symbol called */
	char bytes[48];		/* OP_OTHER: what is there, in hex */
};

struct op_sites {
	struct op_entry *v;
	size_t n;
	size_t ntables;
};

extern const char *const op_state_name[];

/* Read every table of F (relocatable objects).  -1 with f->err set. */
int op_sites_load(struct mce_file *f, const struct mc_arch *a, struct op_sites *s);
void op_sites_free(struct op_sites *s);

/* Decode the code at SHNDX+OFF into E's state fields. */
void op_classify(struct mce_file *f, const struct mc_arch *a, uint32_t shndx,
		 uint64_t off, struct op_entry *e);

/* Open FILE as a relocatable object of a known architecture, or print one
 * diagnostic and return NULL. */
const struct mc_arch *op_open(struct mce_file *f, const char *path);

#endif
