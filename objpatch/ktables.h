/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A kernel image's build-time sorted tables beside the call-site tables:
 * the exception table (__ex_table, in each architecture's layout, arch.h)
 * and, on x86_64, the ORC unwind tables, .orc_unwind_ip and .orc_unwind,
 * whose entries pair up by index.  Found and validated together before
 * anything changes; sorted as the 6.1 kernel's scripts/sorttable sorts
 * them (6.1's and 6.12's agree here), to the byte; and summarised for inspect and check.
 */
#ifndef MCLOC_OBJPATCH_KTABLES_H
#define MCLOC_OBJPATCH_KTABLES_H

#include "../arch/arch.h"
#include "../common/mcelf.h"

struct kt_tables {
	struct mce_sec *ex;		/* __ex_table, or NULL */
	size_t ex_n;
	unsigned ex_size;		/* bytes per entry */
	struct mce_sec *orc_ip, *orc;	/* both or neither */
	size_t orc_n;
	const struct mc_orc_layout *orc_layout;	/* with them: which */
	long sort_needed;		/* main_extable_sort_needed, or -1 */
};

static inline bool kt_any(const struct kt_tables *t)
{
	return t->ex || t->orc;
}

/*
 * Find F's tables and check that their shapes agree with A's layouts:
 * whole entries, ORC tables of one length, contents in the file, no
 * dynamic relocation inside.  -1 with f->err set on a defect.
 */
int kt_find(struct mce_file *f, const struct mc_arch *a, struct kt_tables *t);

struct kt_sort_stats {
	size_t ex, orc;			/* entries sorted */
	size_t ex_moved, orc_moved;	/* of which changed place */
	size_t rels_cleared;		/* __ex_table relocations zeroed */
	bool flag_cleared;		/* main_extable_sort_needed set to 0 */
};

/*
 * Sort the tables of T as the kernel's sorttable does: __ex_table by the
 * faulting instruction's address, its offsets rebased to the new places;
 * the ORC tables by address together, a weak terminator before a real
 * entry for the same address; the relocations of __ex_table (kept by
 * --emit-relocs) zeroed, since they no longer say where anything is (by
 * 6.1's sorttable, not 6.12's); and
 * main_extable_sort_needed cleared, so that the kernel does not sort the
 * table again at boot.  KERNEL: two real ORC entries for one address end
 * up as sorttable leaves them (swapped), else in table order.  KEEP_RELS:
 * leave __ex_table's relocations as they are, as 6.12's sorttable does.
 * -1 with f->err set.
 */
int kt_sort(struct mce_file *f, const struct mc_arch *a, const struct kt_tables *t,
	    bool kernel, bool keep_rels, struct kt_sort_stats *st);

/* What inspect and check report of one table. */
struct kt_summary {
	const char *name;		/* "__ex_table", ".orc_unwind_ip" */
	size_t entries;
	size_t unsorted;		/* entries before which the one ahead belongs */
	size_t outside;			/* entries whose address lies in no code */
	size_t first_unsorted, first_outside;	/* their indexes, if any */
	uint64_t unsorted_addr, outside_addr;	/* and the addresses there */
};

/* Summaries of T's tables into OUT (room for 2): how many.  -1 with
 * f->err set.  *FLAG: main_extable_sort_needed's value, -1 if none. */
int kt_summarize(struct mce_file *f, const struct mc_arch *a, const struct kt_tables *t,
		 struct kt_summary *out, long *flag);

#endif
