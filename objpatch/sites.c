// SPDX-License-Identifier: GPL-2.0-or-later
#include "sites.h"

#include "../common/diag.h"
#include "../common/lto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const op_state_name[] = { "call", "nop", "patchable", "other" };

static const char *const table_names[] = { "__mcount_loc", "__patchable_function_entries" };

bool op_skip_bitcode(const char *path, const char *what)
{
	if (!mce_is_bitcode(path))
		return false;
	mc_note(path, "LLVM bitcode (LTO): no machine code until the link, nothing to %s", what);
	return true;
}

const struct mc_arch *op_open_as(struct mce_file *f, const char *path, const char *name,
				 unsigned flags)
{
	const struct mc_arch *a;

	if (mce_open_flags(f, path, flags) < 0) {
		mc_error(name, "%s", f->err);
		return NULL;
	}
	f->path = name;	/* (what every message says) */
	if (f->eh.e_type != ET_REL && !mce_linked(f)) {
		mc_error(name, "neither a relocatable object nor a linked image (ELF type %u)",
			 f->eh.e_type);
		return NULL;
	}
	if (mce_linked(f) && !f->eh.e_phnum) {
		mc_error(name, "a linked image (ELF type %u) without program headers",
			 f->eh.e_type);
		return NULL;
	}
	a = mc_arch_find(f->eh.e_machine, f->cls);
	if (!a) {
		mc_error(name, "unsupported machine %u", f->eh.e_machine);
		return NULL;
	}
	/* Validate every relocation up front: a bad one is an error here,
	 * never something a later pass silently skips.  Except those a
	 * linked image keeps from ld --emit-relocs (not allocated; a
	 * KASLR kernel's run to megabytes): no loader applies them and
	 * nothing here reads them, but to zero __ex_table's. */
	for (size_t i = 1; i < f->shnum; i++)
		if ((f->secs[i].sh.sh_type == SHT_REL || f->secs[i].sh.sh_type == SHT_RELA) &&
		    !(mce_linked(f) && !(f->secs[i].sh.sh_flags & SHF_ALLOC)) &&
		    mce_load_rels(f, &f->secs[i]) < 0) {
			mc_error(name, "%s", f->err);
			return NULL;
		}
	if (mce_linked(f) && mce_dynrels_load(f, a->relative_reloc) < 0) {
		mc_error(name, "%s", f->err);
		return NULL;
	}
	return a;
}

const struct mc_arch *op_open_flags(struct mce_file *f, const char *path, unsigned flags)
{
	return op_open_as(f, path, path, flags);
}

const struct mc_arch *op_open(struct mce_file *f, const char *path)
{
	return op_open_flags(f, path, 0);
}

int op_cmp_place(const struct op_entry *x, const struct op_entry *y)
{
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->shndx != y->shndx)
		return x->shndx < y->shndx ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

bool op_out_of_order(const struct op_sites *s, size_t i)
{
	return i && s->v[i - 1].table == s->v[i].table &&
	       op_cmp_place(&s->v[i - 1], &s->v[i]) > 0;
}

static int cmp_place_idx(const void *a, const void *b)
{
	const struct op_entry *x = a, *y = b;
	int c = op_cmp_place(x, y);

	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

struct op_entry *op_sites_by_place(const struct op_sites *s, size_t *n)
{
	struct op_entry *v = malloc((s->n + 1) * sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].resolved) {
			v[*n] = s->v[i];
			v[(*n)++].addr = 0;
		}
	qsort(v, *n, sizeof(*v), cmp_place_idx);
	return v;
}

const char *op_callee(struct mce_file *f, const struct mc_arch *a,
		      const struct mc_insn *in, struct op_callee_memo *m)
{
	const struct mce_dynrel *d;
	uint64_t slot = in->target;
	const char *name = "";

	if (!in->has_target)
		return "";
	/* Calls of one image mostly reach the same few places. */
	if (m && m->name && m->target == in->target && m->via_slot == in->via_slot)
		return m->name;
	if (!in->via_slot) {
		struct mce_sec *s = mce_sec_of_vaddr(f, in->target);
		uint64_t start;
		long sym;

		slot = 0;
		if (s && (s->sh.sh_flags & SHF_EXECINSTR)) {
			sym = mce_label_before(f, (uint32_t)s->idx, in->target - s->sh.sh_addr,
					       &start);
			if (sym > 0 && start == in->target - s->sh.sh_addr)
				name = f->syms[sym].name;
			else if (!strncmp(s->name, ".plt", 4) || !strcmp(s->name, ".iplt")) {
				struct mc_text t = mc_text_of(f, s, 0);

				slot = a->plt_slot ? a->plt_slot(&t, in->target - s->sh.sh_addr,
								 in->target) : 0;
			}
		}
	}
	if (slot && (d = mce_dynrel_at(f, slot)))
		name = mce_dynrel_name(f, d);
	if (m)
		*m = (struct op_callee_memo){ .target = in->target, .via_slot = in->via_slot,
					      .name = name };
	return name;
}

size_t op_mcount_calls(struct mce_file *f, const struct mc_arch *a,
		       void (*fn)(void *ctx, uint32_t shndx, uint64_t off, const char *callee),
		       void *ctx)
{
	struct op_callee_memo memo = { 0 };
	size_t calls = 0;

	if (!a->insn)
		return 0;	/* (callers say that nothing was decoded) */
	for (size_t i = 1; i < f->nsyms; i++) {
		const struct mce_sym *m = &f->syms[i];

		if (m->type != STT_FUNC || !m->size || !m->shndx || m->shndx >= f->shnum ||
		    !mce_sec_exec(&f->secs[m->shndx]))
			continue;
		struct mce_sec *tx = &f->secs[m->shndx];
		struct mc_text t = mc_text_of(f, tx, 0);
		uint64_t off = m->value - tx->sh.sh_addr, end = off + m->size;

		if (m->value < tx->sh.sh_addr || end > t.size)
			continue;
		while (off < end) {
			struct mc_insn in;

			if (a->insn(&t, off, tx->sh.sh_addr + off, &in) < 0 || !in.len)
				break;	/* data in code: the rest is not ours to judge */
			const char *callee = in.call ? op_callee(f, a, &in, &memo) : "";

			if (mc_is_mcount_name(callee)) {
				calls++;
				fn(ctx, m->shndx, off, callee);
			}
			off += in.len;
		}
	}
	return calls;
}

static bool is_mcount_target(const struct mce_file *f, uint32_t sym)
{
	return sym < f->nsyms && mc_is_mcount_name(f->syms[sym].name);
}

/* Bytes of whole NOPs from OFF (up to 255). */
static unsigned nop_run(const struct mc_arch *a, const struct mc_text *t, uint64_t off)
{
	unsigned len, run;

	for (run = 0; run < 255 && off + run < t->size && (len = a->any_nop(t, off + run));)
		run += len;
	return run;
}

/* NOPs a compiler padded a patchable entry with, not yet the site's NOP,
 * long enough to become it (mc_nop_prefix): E says so, and its length
 * the whole run of NOPs. */
static bool raw_entry_run(const struct mc_arch *a, const struct mc_text *t, uint64_t off,
			  struct op_entry *e)
{
	unsigned run;

	if (!a->nops || !mc_nop_prefix(a, t, off, a->nops[0].len))
		return false;
	run = nop_run(a, t, off);
	e->state = OP_PATCHABLE;
	e->raw = true;
	e->len = (uint8_t)(run > 255 ? 255 : run);
	return true;
}

const char *op_entry_misplaced(struct mce_file *f, const struct mc_arch *a,
			       const struct op_entry *e, char *buf, size_t n)
{
	uint64_t fn_at;
	unsigned run = e->len;
	long fn;

	if (!a->entry_nop || !a->any_nop)
		return NULL;
	if (e->state == OP_OTHER && !strcmp(e->table, "__patchable_function_entries")) {
		/* (Too few NOPs to be a patchable run: =N with N < 5.) */
		struct mc_text t = mc_text_of(f, &f->secs[e->shndx], 0);

		run = t.buf && e->off < t.size ? nop_run(a, &t, e->off) : 0;
	} else if (e->state != OP_PATCHABLE) {
		return NULL;
	}
	if (!run)
		return NULL;
	fn = mce_label_before(f, e->shndx, e->off + run, &fn_at);
	if (fn >= 0 && fn_at > e->off) {
		snprintf(buf, n, "-fpatchable-function-entry=N,M with M>0 (the entry %llu "
			 "bytes before its function, at %s): on %s use "
			 "-fpatchable-function-entry=%u (M=0) or -pg -mfentry",
			 (unsigned long long)(fn_at - e->off), f->syms[fn].name, a->name,
			 a->nops[0].len);
		return buf;
	}
	/* An entry inside a function, past its start (and past a landing pad
	 * that may open it), is no function's entry: nothing says a thread
	 * cannot be in the middle of its NOPs. */
	if (fn >= 0 && fn_at < e->off) {
		struct mc_text t = mc_text_of(f, &f->secs[e->shndx], 0);

		if (!a->landing_pad || !t.buf || fn_at + a->landing_pad(&t, fn_at) != e->off) {
			snprintf(buf, n, "patchable NOPs not at a function entry (in %s): the "
				 "site's NOP is made only at a function's own entry",
				 f->syms[fn].name);
			return buf;
		}
	}
	if (run < a->nops[0].len) {
		snprintf(buf, n, "only %u bytes of patchable NOPs at the entry: on %s use "
			 "-fpatchable-function-entry=%u (M=0) or -pg -mfentry", run,
			 a->name, a->nops[0].len);
		return buf;
	}
	return NULL;
}

int op_direct_stubs(struct mce_file *f, uint64_t *at)
{
	static const char *const names[] = { "mcloc_direct_stubs" };
	long found;
	struct mce_sym st;

	mce_sym_lookup_many(f, names, 1, &found, 0);
	if (found <= 0)
		return 0;
	if (mce_sym_peek(f, (size_t)found, &st) < 0)
		return -1;
	*at = st.value;
	return 1;
}

/*
 * Whether an 0xa9 at a site of F may be one link --runtime parked: only
 * in a linked image with direct stubs (mcloc_direct_stubs), where check
 * judges which stub it is parked on, or one stripped of the symbols that
 * would say.  An object, a kernel or a module has no parked site: an
 * 0xa9 there is damage, which the kernel's ftrace refuses.
 */
static bool may_be_parked(struct mce_file *f, struct op_callee_memo *memo)
{
	struct op_callee_memo own = { 0 };
	uint64_t at;

	if (!mce_linked(f))
		return false;
	if (!f->symtab)
		return true;
	memo = memo ? memo : &own;
	if (!memo->stubs_known) {
		memo->has_stubs = op_direct_stubs(f, &at) > 0;
		memo->stubs_known = true;
	}
	return memo->has_stubs;
}

void op_classify(struct mce_file *f, const struct mc_arch *a, uint32_t shndx,
		 uint64_t off, struct op_entry *e, struct op_callee_memo *memo)
{
	struct mce_sec *tx = &f->secs[shndx];
	struct mc_text t = mc_text_of(f, tx, off);

	e->state = OP_OTHER;
	e->raw = false;
	e->len = 0;
	e->target = NULL;
	e->bytes[0] = 0;
	e->classified = true;
	if (!t.buf || off >= t.size)
		return;
	if (mce_linked(f) && !a->insn) {
		/* No decoder of this ISA's linked code: nothing is known. */
		e->classified = false;
		return;
	}

	/* Linked: no relocations left; decode, and name what is called. */
	if (mce_linked(f)) {
		struct mc_insn in;

		const char *callee = "";

		if (a->insn(&t, off, tx->sh.sh_addr + off, &in) == 0 && in.call)
			callee = op_callee(f, a, &in, memo);
		if (mc_is_mcount_name(callee)) {
			e->state = OP_CALL;
			e->len = in.len;
			e->target = callee;
			return;
		}
	}

	/* A call: a relocation against an mcount symbol inside the first
	 * instruction(s) at OFF, that decodes as a call starting at OFF. */
	if (tx->rela && mce_load_rels(f, tx->rela) == 0) {
		struct mce_sec *rs = tx->rela;

		for (size_t i = 0; i < rs->nrels; i++) {
			const struct mce_rel *r = &rs->rels[i];
			struct mc_site s;

			if (r->offset < off || r->offset >= off + MC_MAX_SITE ||
			    !is_mcount_target(f, r->sym) || !mc_reloc_in(a->call_relocs, r->type))
				continue;
			if (a->decode(&t, r->offset, r->type, &s) == 0 && s.verdict == MC_SITE_CALL && s.off == off) {
				e->state = OP_CALL;
				e->len = s.len;
				e->target = f->syms[r->sym].name;
				return;
			}
		}
	}
	/* A run-time site objpatch link --runtime made of a patchable entry:
	 * still that entry; of a -pg call (riscv64), still its NOP; on
	 * x86_64, parked, a NOP still (it calls nothing). */
	unsigned rlen = a->runtime_site_len ? a->runtime_site_len(&t, off) : 0;
	if (rlen && a->park_site && !may_be_parked(f, memo))
		rlen = 0;
	if (rlen) {
		e->state = strcmp(e->table, "__mcount_loc") && !a->park_site ? OP_PATCHABLE : OP_NOP;
		e->len = (uint8_t)rlen;
		e->parked = a->park_site != NULL;
		return;
	}
	/* NOPs from the architecture's table; repeats of the first, or of a
	 * one-instruction NOP, are a patchable-entry run. */
	for (const struct mc_nop *n = a->nops; n && n->len; n++) {
		uint8_t want[MC_MAX_SITE];
		struct mc_site s = { .off = off, .len = n->len };

		if (off + n->len > t.size || mc_make_nop(a, &t, &s, want) < 0 ||
		    memcmp(want, t.buf + off, n->len))
			continue;
		unsigned k = 1;
		while ((n == a->nops || n->len == n->word) && off + (k + 1) * n->len <= t.size &&
		       !memcmp(want, t.buf + off + k * n->len, n->len))
			k++;
		e->state = k > 1 ? OP_PATCHABLE : OP_NOP;
		e->len = (uint8_t)(k * n->len > 255 ? 255 : k * n->len);
		return;
	}
	if (raw_entry_run(a, &t, off, e))
		return;
	/* The NOPs a backend writes itself (ARM, Thumb-2, MIPS). */
	unsigned len = a->is_nop ? a->is_nop(&t, off) : 0;

	if (len) {
		e->state = OP_NOP;
		e->len = (uint8_t)len;
		return;
	}
	size_t m = t.size - off < 8 ? t.size - off : 8;
	for (size_t i = 0, at = 0; i < m; i++)
		at += (size_t)snprintf(e->bytes + at, sizeof(e->bytes) - at, "%s%02x",
				       i ? " " : "", t.buf[off + i]);
}

static int reserve(struct op_sites *s, size_t want)
{
	if (want <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap : 16;
	while (cap < want)
		cap *= 2;
	struct op_entry *n = realloc(s->v, cap * sizeof(*n));

	if (!n)
		return -1;
	s->v = n;
	s->cap = cap;
	return 0;
}

static int push(struct op_sites *s, const struct op_entry *e)
{
	if (reserve(s, s->n + 1) < 0)
		return -1;
	s->v[s->n++] = *e;
	return 0;
}

/*
 * The tables of a linked image.  The kernel's bounds (__start_mcount_loc,
 * __stop_mcount_loc, around whatever vmlinux.lds collected, often inside
 * .init.data) come first; then, per table name, the GNU __start_/__stop_
 * symbols, or the output section of that name.
 */
static int find_tables(struct mce_file *f, struct op_sites *s)
{
	static const char *const names[] = {
		"__start_mcount_loc", "__stop_mcount_loc",
		"__start___mcount_loc", "__stop___mcount_loc",
		"__start___patchable_function_entries", "__stop___patchable_function_entries",
		"__mcloc_image",
	};
	long found[7];
	uint64_t at[7] = { 0 };	/* their values */
	struct mce_sym m;

	/* One pass over the symbols finds them all; none is a function, and
	 * not reading the names of a million functions halves the pass. */
	mce_sym_lookup_many(f, names, 7, found, 1u << STT_FUNC);
	s->image_sym = found[6];
	for (size_t k = 0; k < 6; k++)
		if (found[k] > 0) {
			if (mce_sym_peek(f, (size_t)found[k], &m) < 0)
				return -1;
			at[k] = m.value;
		}
	long ks = found[0], ke = found[1];
	uint64_t kstart = at[0], kend = at[1];

	for (size_t j = 0; j < sizeof(table_names) / sizeof(table_names[0]); j++) {
		struct op_table *t = &s->tables[s->ntables];
		*t = (struct op_table){ .name = table_names[j],
					.bound = { found[2 + 2 * j], found[3 + 2 * j], -1, -1 } };
		struct mce_sec *sec = mce_sec_by_name(f, table_names[j]);

		if (sec && sec->sh.sh_type == SHT_PROGBITS) {
			t->sec = sec;
			t->own_section = true;
			t->start = sec->sh.sh_addr;
			t->end = sec->sh.sh_addr + sec->sh.sh_size;
		}
		if (t->bound[0] > 0 && t->bound[1] > 0) {
			t->start = at[2 + 2 * j];
			t->end = at[3 + 2 * j];
		}
		/* The kernel's names bound the first table vmlinux.lds fills:
		 * __mcount_loc, unless there is none and they bound the
		 * patchable table (objpatch link adds them for either). */
		struct mce_sec *pf = j == 0 && !t->sec ?
			mce_sec_by_name(f, "__patchable_function_entries") : NULL;
		bool theirs = !(pf && kstart >= pf->sh.sh_addr &&
				kstart < pf->sh.sh_addr + pf->sh.sh_size);

		if (ks > 0 && ke > 0 && theirs && (j == 0 || !s->ntables)) {
			if (t->bound[0] > 0 && t->bound[1] > 0 &&
			    (kstart != t->start || kend != t->end))
				return mce_fail(f, "%s: __start_/__stop_%s (0x%llx..0x%llx) and "
						"__start_/__stop_mcount_loc (0x%llx..0x%llx) disagree",
						t->name, t->name, (unsigned long long)t->start,
						(unsigned long long)t->end,
						(unsigned long long)kstart,
						(unsigned long long)kend);
			if (!t->sec || kstart != t->start)
				t->own_section = false;
			t->bound[2] = ks;
			t->bound[3] = ke;
			t->start = kstart;
			t->end = kend;
			ks = ke = -1;
		}
		if (t->end < t->start)
			return mce_fail(f, "%s: its end (0x%llx) lies before its start (0x%llx)",
					t->name, (unsigned long long)t->end,
					(unsigned long long)t->start);
		if (t->end == t->start && !t->sec)
			continue;
		if (!t->own_section)
			t->sec = mce_sec_of_vaddr(f, t->start);
		if (!t->sec)
			continue;
		/* Checked before anything is sized by them: a corrupt bound
		 * must not make the tool ask for gigabytes. */
		if (t->start < t->sec->sh.sh_addr ||
		    t->end > t->sec->sh.sh_addr + t->sec->sh.sh_size ||
		    (t->end - t->start) % f->addrsize)
			return mce_fail(f, "%s: bounds 0x%llx..0x%llx do not fit section %s",
					t->name, (unsigned long long)t->start,
					(unsigned long long)t->end, t->sec->name);
		if (t->sec->sh.sh_type == SHT_NOBITS && t->end > t->start)
			return mce_fail(f, "%s: section %s has no bytes in the file", t->name,
					t->sec->name);
		s->ntables++;
	}
	return 0;
}

static int push(struct op_sites *s, const struct op_entry *e);
static int reserve(struct op_sites *s, size_t want);

const uint64_t *op_table_words(struct mce_file *f, const struct mc_arch *a,
			       const struct op_table *t, uint64_t **own)
{
	size_t n = (t->end - t->start) / f->addrsize;
	const uint64_t *v;

	*own = NULL;
	/* (find_tables() checked the bounds against the section.) */
	/* (One more word: a table may be empty, and NULL means failure.) */
	if ((v = mce_words_view(f, t->start, n)))
		return v;
	*own = malloc((n + 1) * sizeof(**own));
	if (!*own) {
		mce_fail(f, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct mce_dynrel *d = mce_dynrel_at(f, t->start + i * f->addrsize);

		/* Entries are addresses in the image: relocated, if at all,
		 * relative to the load address.  Anything else is not a
		 * call-site table this tool can read or sort. */
		if (d && d->type != a->relative_reloc && d->type != a->none_reloc) {
			mce_fail(f, "%s entry %zu: relocation type %u against '%s', not a "
				 "relative one", t->name, i, d->type, mce_dynrel_name(f, d));
			goto fail;
		}
	}
	if (mce_words_read(f, t->start, n, *own) < 0)
		goto fail;
	return *own;
fail:
	free(*own);
	*own = NULL;
	return NULL;
}

static int load_linked(struct mce_file *f, const struct mc_arch *a, struct op_sites *s)
{
	if (find_tables(f, s) < 0)
		return -1;
	size_t total = 0;
	for (size_t k = 0; k < s->ntables; k++)
		total += (s->tables[k].end - s->tables[k].start) / f->addrsize;
	if (reserve(s, total) < 0)	/* one allocation for every entry */
		return mce_fail(f, "out of memory");
	for (size_t k = 0; k < s->ntables; k++) {
		const struct op_table *t = &s->tables[k];
		size_t n = (t->end - t->start) / f->addrsize;
		uint64_t *own;
		const uint64_t *words = op_table_words(f, a, t, &own);

		if (!words)
			return -1;
		for (size_t i = 0; i < n; i++) {
			struct op_entry e = { .idx = (uint32_t)i, .table = t->name,
					      .addr = words[i] };
			struct mce_sec *in = e.addr ? mce_sec_of_vaddr(f, e.addr) : NULL;

			if (in) {
				e.resolved = true;
				e.shndx = (uint32_t)in->idx;
				e.off = e.addr - in->sh.sh_addr;
			}
			if (push(s, &e) < 0) {
				free(own);
				return mce_fail(f, "out of memory");
			}
		}
		free(own);
	}
	struct op_callee_memo memo = { 0 };

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].resolved && mce_sec_exec(&f->secs[s->v[i].shndx]))
			op_classify(f, a, s->v[i].shndx, s->v[i].off, &s->v[i], &memo);
	return 0;
}

int op_tables_find(struct mce_file *f, struct op_sites *s)
{
	memset(s, 0, sizeof(*s));
	return find_tables(f, s);
}

int op_sites_load(struct mce_file *f, const struct mc_arch *a, struct op_sites *s)
{
	memset(s, 0, sizeof(*s));
	if (mce_linked(f))
		return load_linked(f, a, s);
	for (size_t k = 1; k < f->shnum; k++) {
		struct mce_sec *tab = &f->secs[k];
		const char *name = NULL;

		for (size_t j = 0; j < sizeof(table_names) / sizeof(table_names[0]); j++)
			if (!strcmp(tab->name, table_names[j]))
				name = table_names[j];
		if (!name || tab->sh.sh_type != SHT_PROGBITS)
			continue;
		s->ntables++;
		Elf_Data *d = mce_sec_data(f, tab);
		if (!d)
			return -1;
		size_t n = tab->sh.sh_size / f->addrsize;
		bool *seen = calloc(n + 1, sizeof(*seen));
		size_t first = s->n;

		if (!seen)
			return -1;
		for (size_t i = 0; i < n; i++) {
			struct op_entry e = { .idx = (uint32_t)i, .table = name };

			if (push(s, &e) < 0) {
				free(seen);
				return -1;
			}
		}
		if (tab->rela) {
			struct mce_sec *rs = tab->rela;

			if (mce_load_rels(f, rs) < 0) {
				free(seen);
				return -1;
			}
			for (size_t i = 0; i < rs->nrels; i++) {
				const struct mce_rel *r = &rs->rels[i];
				size_t at = r->offset / f->addrsize;

				if (r->type == a->none_reloc || at >= n || r->sym >= f->nsyms)
					continue;
				const struct mce_sym *m = &f->syms[r->sym];
				int64_t add = rs->is_rela ? r->addend : 0;

				if (!rs->is_rela) {
					/* REL: the addend is the entry itself (sign-extended). */
					uint64_t v = mce_get_addr(f, (uint8_t *)d->d_buf + at * f->addrsize);
					add = f->addrsize == 4 ? (int32_t)v : (int64_t)v;
				}
				struct op_entry *e = &s->v[first + at];
				e->resolved = m->shndx && m->shndx < f->shnum;
				e->shndx = m->shndx;
				e->off = m->value + (uint64_t)add;
				if (f->addrsize == 4)	/* (a 32-bit link computes S + A modulo 2^32) */
					e->off = (uint32_t)e->off;
				seen[at] = true;
			}
		}
		free(seen);
	}
	struct op_callee_memo memo = { 0 };

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].resolved && mce_sec_exec(&f->secs[s->v[i].shndx]))
			op_classify(f, a, s->v[i].shndx, s->v[i].off, &s->v[i], &memo);
	return 0;
}

void op_sites_free(struct op_sites *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}
