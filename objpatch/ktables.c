// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A kernel image's exception and ORC tables: what the kernel's
 * scripts/sorttable sorts besides __mcount_loc (ktables.h).
 *
 * Both are searched by binary search at run time: the exception table on
 * every fault in the kernel (a user access that faulted, an rdmsr that
 * trapped), ORC on every unwind.  ld concatenates each object's piece in
 * link order, which is not address order (.init.text, .noinstr.text and
 * .text interleave), so the build sorts them after the link; a kernel
 * whose exception table is not sorted sorts it at boot if
 * main_extable_sort_needed says so, and one whose ORC table is not sorted
 * unwinds wrongly.
 *
 * Byte identity with 6.1's and 6.12's sorttable comes from three facts
 * about them (6.12 tells a weak terminator by its type, the layout of
 * 6.4 on, but orders the entries the same way):
 *   - It sorts with glibc's qsort, a top-down merge sort (n/2 on the left,
 *     the left element taken while the comparator says <= 0), so any
 *     stable sort under the same comparator gives the same bytes.
 *   - Its keys are not the true addresses: a relative entry's insn word
 *     plus its offset in the table, compared as a 32-bit signed number
 *     (what relative_key() computes), and an absolute entry's first word,
 *     unsigned.
 *   - Its ORC comparator says "greater" both ways for two real entries
 *     with the same address.  Under that merge, of two such entries the
 *     one from the right half always goes first, in every merge where the
 *     two first meet; so the result is the total order below: address,
 *     then weak terminators first (in table order), then real entries in
 *     reverse table order.  orc_sort() sorts by that order directly, for
 *     --kernel; otherwise real entries keep their table order, so that a
 *     second sort changes nothing (sorttable's would swap them back).
 */
#include "ktables.h"

#include "../base/byteorder.h"
#include "../common/mcsort.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EX_TABLE "__ex_table"
#define ORC_IP ".orc_unwind_ip"
#define ORC ".orc_unwind"
#define ORC_HEADER ".orc_header"
#define SORT_NEEDED "main_extable_sort_needed"

static unsigned ex_entry_size(const struct mce_file *f, const struct mc_arch *a)
{
	switch (a->extable) {
	case MC_EXTABLE_REL_DATA: return 12;
	case MC_EXTABLE_REL: return 8;
	case MC_EXTABLE_ABS: return 2 * f->addrsize;
	default: return 0;
	}
}

/* The bytes of table section S, checked: allocated contents in the file,
 * whole entries of SIZE bytes, no dynamic relocation applied inside
 * (nothing here would keep one in step).  *N: entries. */
static uint8_t *table_bytes(struct mce_file *f, struct mce_sec *s, unsigned size, size_t *n)
{
	Elf_Data *d;

	if (s->sh.sh_type != SHT_PROGBITS || !(s->sh.sh_flags & SHF_ALLOC)) {
		mce_fail(f, "%s: not an allocated section with contents (type %u)", s->name,
			 s->sh.sh_type);
		return NULL;
	}
	if (s->sh.sh_size % size) {
		mce_fail(f, "%s: %llu bytes, not a whole number of %u-byte entries", s->name,
			 (unsigned long long)s->sh.sh_size, size);
		return NULL;
	}
	d = mce_sec_data(f, s);
	if (!d)
		return NULL;
	if (d->d_type != ELF_T_BYTE || d->d_size != s->sh.sh_size || (s->sh.sh_size && !d->d_buf)) {
		mce_fail(f, "%s: contents not readable", s->name);
		return NULL;
	}
	if (mce_dynrels_within(f, s->sh.sh_addr, s->sh.sh_addr + s->sh.sh_size)) {
		mce_fail(f, "%s: dynamic relocations apply inside it", s->name);
		return NULL;
	}
	*n = s->sh.sh_size / size;
	return d->d_buf ? d->d_buf : (uint8_t *)"";
}

/*
 * The ORC entry layout F names: none named (no .orc_header) is the one
 * before 6.4; a header must match a known layout's hash exactly, since
 * a misread terminator would sort the tables wrong without a word.
 */
static const struct mc_orc_layout *orc_layout(struct mce_file *f, const struct mc_arch *a)
{
	struct mce_sec *h = mce_sec_by_name(f, ORC_HEADER);
	const uint8_t *b = NULL;
	Elf_Data *d;

	if (h) {
		d = mce_sec_data(f, h);
		if (!d)
			return NULL;
		if (d->d_type != ELF_T_BYTE || d->d_size != h->sh.sh_size ||
		    h->sh.sh_type != SHT_PROGBITS || !d->d_buf) {
			mce_fail(f, "%s: contents not readable", ORC_HEADER);
			return NULL;
		}
		b = d->d_buf;
	}
	for (const struct mc_orc_layout *l = a->orc_layouts; l && l->name; l++)
		if (!h ? !l->header : l->header && l->header_size == h->sh.sh_size &&
		    !memcmp(l->header, b, l->header_size))
			return l;
	if (!h) {
		mce_fail(f, "ORC unwind tables without an %s: the layout before Linux 6.4, "
			 "which objpatch does not know on %s", ORC_HEADER, a->name);
		return NULL;
	}
	char hex[2 * 32 + 4] = "";

	for (size_t i = 0; i < h->sh.sh_size && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", b[i]);
	if (h->sh.sh_size > 32)
		strcat(hex, "...");
	mce_fail(f, "ORC unwind tables whose %s (%llu bytes: %s) names an entry layout "
		 "objpatch does not know", ORC_HEADER, (unsigned long long)h->sh.sh_size, hex);
	return NULL;
}

int kt_find(struct mce_file *f, const struct mc_arch *a, struct kt_tables *t)
{
	static const char *const names[] = { SORT_NEEDED };
	size_t n_ip = 0;

	memset(t, 0, sizeof(*t));
	t->sort_needed = -1;
	t->ex = mce_sec_by_name(f, EX_TABLE);
	t->orc_ip = mce_sec_by_name(f, ORC_IP);
	t->orc = mce_sec_by_name(f, ORC);
	if (t->ex) {
		t->ex_size = ex_entry_size(f, a);
		if (!t->ex_size)
			return mce_fail(f, "%s: its layout on %s is not known", EX_TABLE, a->name);
		if (!table_bytes(f, t->ex, t->ex_size, &t->ex_n))
			return -1;
	}
	if (t->orc_ip || t->orc) {
		if (!a->orc_entry_size)
			return mce_fail(f, "ORC unwind tables on %s: not an ORC architecture",
					a->name);
		if (!(t->orc_layout = orc_layout(f, a)))
			return -1;
		if (!t->orc_ip || !t->orc)
			return mce_fail(f, "incomplete ORC unwind tables: %s without %s",
					t->orc ? ORC : ORC_IP, t->orc ? ORC_IP : ORC);
		if (!table_bytes(f, t->orc_ip, 4, &n_ip) ||
		    !table_bytes(f, t->orc, a->orc_entry_size, &t->orc_n))
			return -1;
		if (n_ip != t->orc_n)
			return mce_fail(f, "ORC unwind tables disagree: %zu addresses in %s, %zu "
					"entries in %s", n_ip, ORC_IP, t->orc_n, ORC);
	}
	if (t->ex)
		mce_sym_lookup_many(f, names, 1, &t->sort_needed, ~(1u << STT_OBJECT));
	return 0;
}

/* ---- the exception table ---------------------------------------------- */

/* Entry I's sort key, as sorttable computes it: a relative entry's insn
 * offset made relative to the table's start, as a signed 32-bit number
 * (it wraps as theirs does), biased to sort unsigned; an absolute entry's
 * first word. */
static uint64_t ex_key(const struct mce_file *f, const struct mc_arch *a, const uint8_t *b,
		       unsigned size, size_t i)
{
	const uint8_t *e = b + i * size;

	if (a->extable == MC_EXTABLE_ABS)
		return mce_get_addr(f, e);
	uint32_t k = mce_get32(f, e) + (uint32_t)(i * size);

	return (uint64_t)(k ^ 0x80000000u);
}

/* The address entry I's instruction is at. */
static uint64_t ex_addr(const struct mce_file *f, const struct mc_arch *a, const struct kt_tables *t,
			const uint8_t *b, size_t i)
{
	const uint8_t *e = b + i * t->ex_size;

	if (a->extable == MC_EXTABLE_ABS)
		return mce_get_addr(f, e);
	return t->ex->sh.sh_addr + i * t->ex_size + (uint64_t)(int64_t)(int32_t)mce_get32(f, e);
}

/* OUT := the entries of B in the order ORDER (the old indexes), the
 * offsets of a relative layout rebased to their new places. */
static void ex_permute(const struct mce_file *f, const struct mc_arch *a, const uint8_t *b,
		       unsigned size, const struct mc_kv *order, size_t n, uint8_t *out)
{
	for (size_t j = 0; j < n; j++) {
		size_t k = order[j].val;
		uint8_t *o = out + j * size;

		memcpy(o, b + k * size, size);
		if (a->extable == MC_EXTABLE_ABS || k == j)
			continue;
		/* insn and fixup each point from their own place. */
		uint32_t delta = (uint32_t)(k * size) - (uint32_t)(j * size);

		mc_put32(o, f->msb, mc_get32(o, f->msb) + delta);
		mc_put32(o + 4, f->msb, mc_get32(o + 4, f->msb) + delta);
	}
}

static inline size_t moved_of(const uint8_t *old, const uint8_t *new, size_t entries,
			      unsigned size)
{
	size_t moved = 0;

	for (size_t i = 0; i < entries; i++)
		moved += memcmp(old + i * size, new + i * size, size) != 0;
	return moved;
}

/* How many of ENTRIES entries of SIZE bytes differ between OLD and NEW:
 * the table's sizes each get a compare the compiler inlines (a call per
 * entry of a 50,000-entry ORC table was a tenth of the sort). */
static size_t count_moved(const uint8_t *old, const uint8_t *new, size_t entries,
			  unsigned size)
{
	switch (size) {
	case 4:
		return moved_of(old, new, entries, 4);
	case 6:
		return moved_of(old, new, entries, 6);
	case 8:
		return moved_of(old, new, entries, 8);
	case 12:
		return moved_of(old, new, entries, 12);
	default:
		return moved_of(old, new, entries, size);
	}
}

/* *NEW (malloc'ed) as section S's contents OLD if they differ, taken by
 * the file (*NEW becomes NULL): how many of its ENTRIES entries of SIZE
 * bytes changed, or -1. */
static long replace(struct mce_file *f, struct mce_sec *s, const uint8_t *old, uint8_t **new,
		    size_t entries, unsigned size)
{
	size_t moved = count_moved(old, *new, entries, size);
	void *taken = *new;

	if (!moved)
		return 0;
	*new = NULL;
	return mce_sec_replace(f, s, taken) < 0 ? -1 : (long)moved;
}

static int ex_sort(struct mce_file *f, const struct mc_arch *a, const struct kt_tables *t,
		   struct kt_sort_stats *st)
{
	size_t n = t->ex_n;
	const uint8_t *b = mce_sec_data(f, t->ex)->d_buf;
	struct mc_kv *v = malloc((n + 1) * sizeof(*v));
	uint8_t *out = malloc(n * t->ex_size + 1);
	long moved;
	int ret = -1;

	if (!v || !out) {
		mce_fail(f, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = (struct mc_kv){ ex_key(f, a, b, t->ex_size, i), i };
	if (mc_sort_kv(v, n) < 0) {
		mce_fail(f, "out of memory");
		goto out;
	}
	ex_permute(f, a, b, t->ex_size, v, n, out);
	moved = replace(f, t->ex, b, &out, n, t->ex_size);
	if (moved < 0)
		goto out;
	st->ex += n;
	st->ex_moved += (size_t)moved;
	ret = 0;
out:
	free(v);
	free(out);
	return ret;
}

/* Zero the relocations --emit-relocs kept for __ex_table (unless
 * KEEP_RELS: 6.12's sorttable leaves them), and clear
 * main_extable_sort_needed (a 32-bit word in the image's byte order). */
static int ex_after(struct mce_file *f, const struct kt_tables *t, bool keep_rels,
		    struct kt_sort_stats *st)
{
	for (size_t i = 1; !keep_rels && i < f->shnum; i++) {
		struct mce_sec *rs = &f->secs[i];

		if ((rs->sh.sh_type != SHT_REL && rs->sh.sh_type != SHT_RELA) ||
		    rs->sh.sh_info != t->ex->idx)
			continue;
		long k = mce_rels_clear(f, rs);

		if (k < 0)
			return -1;
		st->rels_cleared += (size_t)k;
	}
	if (t->sort_needed <= 0)
		return 0;
	struct mce_sym m;
	struct mce_sec *s;
	uint8_t zero[4] = { 0 };

	if (mce_sym_peek(f, (size_t)t->sort_needed, &m) < 0)
		return -1;
	s = m.shndx && m.shndx < f->shnum ? &f->secs[m.shndx] : NULL;
	if (!s || s->sh.sh_type != SHT_PROGBITS || m.value < s->sh.sh_addr ||
	    m.value - s->sh.sh_addr > s->sh.sh_size || s->sh.sh_size - (m.value - s->sh.sh_addr) < 4)
		return mce_fail(f, "%s: not a 4-byte word with contents in the file", SORT_NEEDED);
	Elf_Data *d = mce_sec_data(f, s);
	if (!d || d->d_type != ELF_T_BYTE || !d->d_buf)
		return mce_fail(f, "%s: its section's contents are not readable", SORT_NEEDED);
	const uint8_t *p = (const uint8_t *)d->d_buf + (m.value - s->sh.sh_addr);
	if (!memcmp(p, zero, 4))
		return 0;
	st->flag_cleared = true;
	return mce_patch(f, s, m.value - s->sh.sh_addr, zero, 4);
}

/* ---- ORC ---------------------------------------------------------------- */

/* Entry I's address relative to the start of .orc_unwind_ip. */
static int64_t orc_rel(const struct mce_file *f, const uint8_t *ip, size_t i)
{
	return (int64_t)(int32_t)mc_get32(ip + 4 * i, f->msb) + (int64_t)(4 * i);
}

static int orc_sort(struct mce_file *f, const struct mc_arch *a, const struct kt_tables *t,
		    bool kernel, struct kt_sort_stats *st)
{
	size_t n = t->orc_n;
	unsigned es = a->orc_entry_size;
	const uint8_t *ip = mce_sec_data(f, t->orc_ip)->d_buf;
	const uint8_t *orc = mce_sec_data(f, t->orc)->d_buf;
	struct mc_kv *v = malloc((n + 1) * sizeof(*v));
	uint8_t *nip = malloc(4 * n + 1), *norc = malloc(es * n + 1);
	long m1, m2;
	int ret = -1;

	if (!v || !nip || !norc) {
		mce_fail(f, "out of memory");
		goto out;
	}
	/* The address (at most 2^31 + 4n from the table's start either way:
	 * biased by 2^40, it stays positive), then 0 for a weak terminator,
	 * 1 for a real entry. */
	for (size_t i = 0; i < n; i++)
		v[i] = (struct mc_kv){ (uint64_t)(orc_rel(f, ip, i) + (1ll << 40)) << 1 |
				       !t->orc_layout->weak(orc + i * es), i };
	if (mc_sort_kv(v, n) < 0) {
		mce_fail(f, "out of memory");
		goto out;
	}
	/* Real entries for one address, as sorttable leaves them: the last
	 * in the table first. */
	for (size_t i = 0; kernel && i < n;) {
		size_t j = i + 1;

		while (j < n && v[j].key == v[i].key)
			j++;
		if (v[i].key & 1)
			for (size_t lo = i, hi = j - 1; lo < hi; lo++, hi--) {
				struct mc_kv x = v[lo];

				v[lo] = v[hi];
				v[hi] = x;
			}
		i = j;
	}
	for (size_t j = 0; j < n; j++) {
		size_t k = v[j].val;

		mc_put32(nip + 4 * j, f->msb, mc_get32(ip + 4 * k, f->msb) + (uint32_t)(4 * k) -
			 (uint32_t)(4 * j));
		if (es == 6)	/* (x86's: a copy the compiler inlines) */
			memcpy(norc + 6 * j, orc + 6 * k, 6);
		else
			memcpy(norc + es * j, orc + es * k, es);
	}
	m1 = replace(f, t->orc_ip, ip, &nip, n, 4);
	m2 = m1 < 0 ? -1 : replace(f, t->orc, orc, &norc, n, es);
	if (m2 < 0)
		goto out;
	st->orc += n;
	st->orc_moved += (size_t)(m1 > m2 ? m1 : m2);
	ret = 0;
out:
	free(v);
	free(nip);
	free(norc);
	return ret;
}

int kt_sort(struct mce_file *f, const struct mc_arch *a, const struct kt_tables *t,
	    bool kernel, bool keep_rels, struct kt_sort_stats *st)
{
	if (t->ex && (ex_sort(f, a, t, st) < 0 || ex_after(f, t, keep_rels, st) < 0))
		return -1;
	if (t->orc && orc_sort(f, a, t, kernel, st) < 0)
		return -1;
	return 0;
}

/* ---- summaries ---------------------------------------------------------- */

/* Whether ADDR lies in code, or (END_OK) right at the end of an
 * executable section, where objtool puts a section's terminator. */
static bool in_code(struct mce_file *f, uint64_t addr, bool end_ok)
{
	const struct mce_sec *s = mce_sec_of_vaddr(f, addr);

	if (s)
		return mce_sec_exec(s);
	for (size_t i = 1; end_ok && i < f->shnum; i++)
		if (mce_sec_exec(&f->secs[i]) && f->secs[i].sh.sh_size &&
		    f->secs[i].sh.sh_addr + f->secs[i].sh.sh_size == addr)
			return true;
	return end_ok && addr && (s = mce_sec_of_vaddr(f, addr - 1)) && mce_sec_exec(s);
}

static void note_unsorted(struct kt_summary *s, size_t i, uint64_t addr)
{
	if (!s->unsorted++) {
		s->first_unsorted = i;
		s->unsorted_addr = addr;
	}
}

static void note_outside(struct kt_summary *s, size_t i, uint64_t addr)
{
	if (!s->outside++) {
		s->first_outside = i;
		s->outside_addr = addr;
	}
}

int kt_summarize(struct mce_file *f, const struct mc_arch *a, const struct kt_tables *t,
		 struct kt_summary *out, long *flag)
{
	int k = 0;

	*flag = -1;
	if (t->ex) {
		struct kt_summary *s = &out[k++];
		const uint8_t *b = mce_sec_data(f, t->ex)->d_buf;
		uint64_t prev = 0;

		*s = (struct kt_summary){ .name = EX_TABLE, .entries = t->ex_n };
		for (size_t i = 0; i < t->ex_n; i++) {
			uint64_t at = ex_addr(f, a, t, b, i);

			if (i && at < prev)
				note_unsorted(s, i, at);
			if (!in_code(f, at, false))
				note_outside(s, i, at);
			prev = at;
		}
		struct mce_sym m;

		if (t->sort_needed > 0 && mce_sym_peek(f, (size_t)t->sort_needed, &m) == 0 &&
		    m.shndx && m.shndx < f->shnum) {
			struct mce_sec *sec = &f->secs[m.shndx];
			Elf_Data *d = mce_sec_data(f, sec);

			if (d && d->d_type == ELF_T_BYTE && d->d_buf && m.value >= sec->sh.sh_addr &&
			    m.value - sec->sh.sh_addr + 4 <= d->d_size)
				*flag = mce_get32(f, (const uint8_t *)d->d_buf +
						  (m.value - sec->sh.sh_addr));
		}
	}
	if (t->orc) {
		struct kt_summary *s = &out[k++];
		const uint8_t *ip = mce_sec_data(f, t->orc_ip)->d_buf;
		const uint8_t *orc = mce_sec_data(f, t->orc)->d_buf;
		uint64_t prev = 0;
		bool prev_weak = false;

		*s = (struct kt_summary){ .name = ORC_IP, .entries = t->orc_n };
		for (size_t i = 0; i < t->orc_n; i++) {
			uint64_t at = t->orc_ip->sh.sh_addr + (uint64_t)orc_rel(f, ip, i);
			bool weak = t->orc_layout->weak(orc + i * a->orc_entry_size);

			/* A weak terminator after a real entry for the same
			 * address would hide it from the kernel's search. */
			if (i && (at < prev || (at == prev && weak && !prev_weak)))
				note_unsorted(s, i, at);
			if (!in_code(f, at, true))
				note_outside(s, i, at);
			prev = at;
			prev_weak = weak;
		}
	}
	return k;
}
