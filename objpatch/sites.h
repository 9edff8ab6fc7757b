/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The call-site table of an object as objpatch sees it: every entry
 * resolved to section+offset, and the state of the code there decoded.
 * Shared by the inspecting subcommands.
 */
#ifndef MCLOC_OBJPATCH_SITES_H
#define MCLOC_OBJPATCH_SITES_H

#include "../site/site.h"

enum op_state {
	OP_CALL,	/* a call to an mcount symbol */
	OP_NOP,		/* one NOP of a call site's length */
	OP_PATCHABLE,	/* a run of NOPs (-fpatchable-function-entry) */
	OP_OTHER,	/* anything else: a defect */
};

struct op_entry {
	const char *table;	/* __mcount_loc or __patchable_function_entries */
	const char *target;	/* OP_CALL: the symbol called */
	uint64_t addr;		/* linked images: the address the entry holds */
	uint64_t off;
	uint32_t idx;		/* position in the table */
	uint32_t shndx;
	uint8_t state;		/* enum op_state */
	uint8_t len;		/* bytes of the call or NOP(s) */
	bool resolved;		/* its relocation names a place (linked: its
				 * address lies in a section) */
	bool raw;		/* OP_PATCHABLE: a run of the ISA's one-byte NOPs,
				 * not yet the site's NOP (objpatch nop makes it) */
	bool classified;	/* state, len, target and bytes are filled in (false:
				 * a linked image of an ISA objpatch cannot decode) */
	bool parked;		/* OP_NOP: x86_64's parked site (link --runtime) */
	char bytes[24];		/* OP_OTHER: the first 8 bytes there, in hex */
};

/* A table of a linked image: the entries between START and END. */
struct op_table {
	const char *name;	/* as entries report it */
	uint64_t start, end;
	struct mce_sec *sec;	/* the section holding it */
	bool own_section;	/* sec is the table itself, not e.g. .init.data */
	long bound[4];		/* __start_X, __stop_X, __start_mcount_loc,
				 * __stop_mcount_loc (symbol indices or -1) */
};

struct op_sites {
	struct op_entry *v;
	size_t n, cap;
	size_t ntables;
	struct op_table tables[2];	/* linked images */
	long image_sym;		/* linked: __mcloc_image (objpatch link --runtime), or -1 */
};

/* Place order: by address in a linked image, else by section and offset. */
int op_cmp_place(const struct op_entry *x, const struct op_entry *y);

/* Entry I of S comes before the entry ahead of it in the same table: a
 * table out of order (a linked image's must be sorted). */
bool op_out_of_order(const struct op_sites *s, size_t i);

/*
 * The entries of S that name a place, by section and offset (ties in
 * table order), with their addresses cleared: the order that finding a
 * place and spotting duplicates use.  Malloc'ed, *N of them; NULL when out
 * of memory.  op_same_place() says whether two of them are duplicates.
 */
struct op_entry *op_sites_by_place(const struct op_sites *s, size_t *n);
static inline bool op_same_place(const struct op_entry *x, const struct op_entry *y)
{
	return x->shndx == y->shndx && x->off == y->off;
}

/* The address of F's page of direct stubs (mcloc_direct_stubs, which
 * objpatch tramp writes for x86_64) into *AT: 1; 0 when F has none; -1
 * when its symbol cannot be read (F's error says why). */
int op_direct_stubs(struct mce_file *f, uint64_t *at);

/*
 * What op_callee() and op_classify() remember of one file: the last
 * callee answered, and whether the image has direct stubs.  The caller
 * owns it, one per open file and zeroed at the start: a memo kept in
 * function-static variables and keyed by the file's address once
 * answered for the wrong image when two files in turn had the same
 * (stack) address.
 */
struct op_callee_memo {
	uint64_t target;
	bool via_slot;
	const char *name;	/* NULL: nothing remembered yet */
	/* op_classify()'s, looked up once: a linked image has 100,000
	 * sites to classify */
	bool stubs_known;
	bool has_stubs;
};

/* The name of what a decoded call in a linked image reaches ("" if not
 * known): a symbol, or the dynamic symbol behind a PLT entry or GOT slot.
 * M (may be NULL) remembers the last answer for F. */
const char *op_callee(struct mce_file *f, const struct mc_arch *a,
		      const struct mc_insn *in, struct op_callee_memo *m);

/*
 * A linked image has no relocations to say where mcount is called: decode
 * every function its symbol table names, first byte to last, resolve each
 * call's target (a symbol, a PLT entry, a GOT slot), and call FN for each
 * call to an mcount symbol.  Returns how many there were (0 where A has no
 * decoder of linked code).
 */
size_t op_mcount_calls(struct mce_file *f, const struct mc_arch *a,
		       void (*fn)(void *ctx, uint32_t shndx, uint64_t off, const char *callee),
		       void *ctx);

extern const char *const op_state_name[];

/* Read every table of F and decode each entry's code.  -1 with f->err set. */
int op_sites_load(struct mce_file *f, const struct mc_arch *a, struct op_sites *s);
/* Only find the tables of a linked image (s->tables; no entries read):
 * sorting reads the words itself.  -1 with f->err set. */
int op_tables_find(struct mce_file *f, struct op_sites *s);
void op_sites_free(struct op_sites *s);
/* The words of linked table T, checked (its bounds fit its section; every
 * entry is a plain or R_*_RELATIVE address): in place, or read into *OWN,
 * which the caller frees.  NULL with f->err set. */
const uint64_t *op_table_words(struct mce_file *f, const struct mc_arch *a,
			       const struct op_table *t, uint64_t **own);

/* Decode the code at SHNDX+OFF into E's state fields. */
void op_classify(struct mce_file *f, const struct mc_arch *a, uint32_t shndx,
		 uint64_t off, struct op_entry *e, struct op_callee_memo *memo);

/*
 * On an ISA whose patchable entries become the site's NOP where the table
 * points (a->entry_nop: x86), the runtime calls from that address, so it
 * must be the function's entry: -fpatchable-function-entry=N,M with M > 0
 * puts it M NOPs before.  NULL when E is fine; else the one line to
 * refuse it with, written into BUF.
 */
const char *op_entry_misplaced(struct mce_file *f, const struct mc_arch *a,
			       const struct op_entry *e, char *buf, size_t n);

/* Whether PATH is LLVM bitcode (clang -flto's objects), which has no
 * machine code to WHAT until the link: said as a note (-v), and skipped. */
bool op_skip_bitcode(const char *path, const char *what);

/* Open FILE (a relocatable object, or a linked image of an architecture
 * objpatch can decode linked code of) read-only, with mce_open_flags()'s
 * FLAGS; or print one diagnostic and return NULL. */
const struct mc_arch *op_open(struct mce_file *f, const char *path);
const struct mc_arch *op_open_flags(struct mce_file *f, const char *path, unsigned flags);
/* The same, but NAME is what every message and f->path say (objpatch link
 * works on a file of its own in place of its output); writes must name
 * PATH. */
const struct mc_arch *op_open_as(struct mce_file *f, const char *path, const char *name,
				 unsigned flags);

#endif
