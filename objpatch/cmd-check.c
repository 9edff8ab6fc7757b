// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * objpatch check: is an object's call-site table right?  Every problem is
 * reported, one line each:
 *   - a table exists if the code calls an mcount symbol at all, and every
 *     entry resolves into an executable section;
 *   - the code there is a call to an mcount symbol, a NOP of a call
 *     site's length, or a patchable NOP run;
 *   - each entry sits where its convention puts it: __fentry__ calls and
 *     patchable entries at the function's entry (after endbr64/BTI), -pg
 *     mcount calls inside the prologue;
 *   - no entry twice, and none missing: decoding every call to an mcount
 *     symbol finds no call the table lacks;
 *   - sites are aligned as the architecture's atomic patching needs.
 * And in a linked kernel image, its other sorted tables (ktables.h): the
 * exception table and the ORC tables are well formed, sorted, and point
 * into code.
 */
#include "kmcount.h"
#include "ktables.h"
#include "objpatch.h"
#include "sites.h"

#include "../common/diag.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How far into a function a -pg mcount call (after the prologue) or a
 * NOPed one may sit. */
#define PROLOGUE_MAX 256

struct checker {
	const char *path;
	struct mce_file *f;
	const struct mc_arch *a;
	const struct op_common *c;
	struct json *j;
	size_t problems;
	size_t ntables;
	bool runtime;		/* the image has libmcloc's descriptor */
	int have_stubs;		/* x86_64: op_direct_stubs(), into STUBS */
	uint64_t stubs;
	bool kernel;		/* --kernel: the kernel's conventions */
	enum km_version kversion;	/* with kernel: whose (KM_DETECT: the image's) */
	size_t in_no_function;	/* entries --kernel accepted there */
	size_t misplaced;	/* patchable entries not at their function's entry */
	size_t unplaced;	/* entries not placed: the image has no symbols */
};

static void problem(struct checker *k, uint32_t shndx, uint64_t off, bool placed,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void problem(struct checker *k, uint32_t shndx, uint64_t off, bool placed,
		    const char *fmt, ...)
{
	char msg[512], w[256] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (placed)
		mce_where(k->f, shndx, off, w, sizeof(w));
	k->problems++;
	if (k->c->json) {
		json_begin(k->j, NULL, '{');
		json_str(k->j, "where", placed ? w : NULL);
		json_str(k->j, "problem", msg);
		json_end(k->j, '}');
	} else if (placed) {
		mc_error(k->path, "%s: %s", w, msg);
	} else {
		mc_error(k->path, "%s", msg);
	}
}

/*
 * A patchable entry of an image linked for the runtime on aarch64 or
 * riscv64 (objpatch link --runtime): its fixed first instruction written,
 * and the ops slot before the function, if it has one, 8-byte aligned, or
 * its one store would not be atomic.  ENTRY is the function's start.
 */
static void check_runtime_entry(struct checker *k, const struct op_entry *e,
				const struct mc_text *t, uint64_t entry)
{
	uint64_t addr = k->f->secs[e->shndx].sh.sh_addr + e->off;

	if (!k->runtime || !k->a->runtime_site || !mce_linked(k->f))
		return;
	if (entry != e->off && entry != e->off + 8) {
		problem(k, e->shndx, e->off, true, "%llu bytes of NOPs before the entry: the "
			"runtime needs none, or 8 for an ops slot",
			(unsigned long long)(entry - e->off));
		return;
	}
	if (!k->a->runtime_site_len(t, entry))
		problem(k, e->shndx, entry, true, "not a run-time site (mov x9, x30 / auipc t0 "
			"then a NOP): link with objpatch link --runtime");
	else if (entry != e->off && addr % 8)
		problem(k, e->shndx, e->off, true, "ops slot at 0x%llx not 8-byte aligned: "
			"compile with -falign-functions=8", (unsigned long long)addr);
}

/*
 * A site link --runtime parked (x86_64): the runtime enables it only if
 * its displacement is that of a call to the image's first direct stub,
 * and refuses it otherwise.
 */
static void check_parked(struct checker *k, const struct op_entry *e)
{
	struct mce_sec *sec = &k->f->secs[e->shndx];
	struct mc_text t = mc_text_of(k->f, sec, 0);

	/* (Stripped, the symbols that would say which stub are gone; the
	 * runtime reads the stubs from the image's descriptor, and takes
	 * them: as op_classify, the site is left unjudged.) */
	if (!e->parked || !k->a->parked_on || !mce_linked(k->f) || !k->f->symtab)
		return;
	if (k->have_stubs <= 0) {
		problem(k, e->shndx, e->off, true, "a parked site in an image without direct "
			"stubs (mcloc_direct_stubs): the runtime refuses it");
		return;
	}
	uint64_t to = k->a->parked_on(&t, e->off, sec->sh.sh_addr + e->off);

	if (to != k->stubs)
		problem(k, e->shndx, e->off, true, "parked on 0x%llx, not on the image's first "
			"direct stub (0x%llx): the runtime refuses it", (unsigned long long)to,
			(unsigned long long)k->stubs);
}

/*
 * Under --kernel, E, which lies in no function of a linked image (the
 * code of a replaced weak definition), is accepted: the kernel keeps it
 * (6.1's sorttable does not drop it) and marks it invalid at boot.
 */
static bool kernel_keeps(struct checker *k, const struct op_entry *e)
{
	if (!k->kernel || !mce_linked(k->f))
		return false;
	k->in_no_function++;
	if (mc_noting()) {
		char w[256];

		mce_where(k->f, e->shndx, e->off, w, sizeof(w));
		mc_note(k->path, "%s: lies in no function; kept, as the kernel keeps it", w);
	}
	return true;
}

static void check_placement(struct checker *k, const struct op_entry *e)
{
	struct mc_text t = mc_text_of(k->f, &k->f->secs[e->shndx], 0);
	uint64_t start;
	long fn = mce_label_before(k->f, e->shndx, e->off, &start);
	unsigned pad = 0;

	if (e->state == OP_PATCHABLE) {
		/* -fpatchable-function-entry=N,M: the run may begin M NOPs
		 * before the entry; the entry must lie within the run, or right
		 * after a landing pad that opens it. */
		uint64_t s2;
		long next = mce_label_before(k->f, e->shndx, e->off + e->len, &s2);
		char why[256];

		/* (One line for the image: every function is compiled alike.
		 * The kernel's x86 CALL_PADDING is =16,16 padding, which
		 * ftrace does not patch.) */
		if (!k->kernel && op_entry_misplaced(k->f, k->a, e, why, sizeof(why))) {
			if (!k->misplaced++)
				problem(k, e->shndx, e->off, true, "%s", why);
			return;
		}

		if (next >= 0 && s2 >= e->off && s2 <= e->off + e->len) {
			check_runtime_entry(k, e, &t, s2);
			return;
		}
		if (fn >= 0 && k->a->landing_pad &&
		    start + k->a->landing_pad(&t, start) == e->off)
			return;
		if (fn >= 0 && k->f->syms[fn].size && e->off >= start + k->f->syms[fn].size &&
		    kernel_keeps(k, e))
			return;
		problem(k, e->shndx, e->off, true, "patchable NOPs not at a function entry");
		return;
	}
	if (fn < 0) {
		problem(k, e->shndx, e->off, true, "not inside any function");
		return;
	}
	/* Past the end of the last sized symbol: code whose symbol the
	 * object does not keep (modules lose some); its entry is unknown. */
	if (k->f->syms[fn].size && e->off >= start + k->f->syms[fn].size) {
		/* A linked image keeps every function's symbol; code no
		 * symbol covers is a weak definition another replaced. */
		if (!mce_linked(k->f))
			return;
		if (kernel_keeps(k, e))
			return;
		problem(k, e->shndx, e->off, true, "lies in no function (the code of "
			"a weak definition the link replaced?); objpatch sort drops it");
		return;
	}
	if (k->a->landing_pad)
		pad = k->a->landing_pad(&t, start);
	bool at_entry = e->off == start || e->off == start + pad;
	bool fentry = e->state == OP_CALL && !strcmp(e->target, "__fentry__");

	if (fentry && !at_entry)
		problem(k, e->shndx, e->off, true,
			"call to __fentry__ not at the function's entry");
	else if (!fentry && e->off - start >= PROLOGUE_MAX)
		problem(k, e->shndx, e->off, true,
			"%s %llu bytes into the function, past any prologue",
			e->state == OP_CALL ? "mcount call" : "site",
			(unsigned long long)(e->off - start));
}

/* The kernel's other tables of a linked image: one problem per kind of
 * defect and table, naming the first entry (a table holds thousands). */
static void check_ktables(struct checker *k)
{
	struct kt_tables t;
	struct kt_summary sum[2];
	long flag;
	int n;

	if (!mce_linked(k->f))
		return;
	if (kt_find(k->f, k->a, &t) < 0 || (n = kt_summarize(k->f, k->a, &t, sum, &flag)) < 0) {
		problem(k, 0, 0, false, "%s", k->f->err);
		return;
	}
	for (int i = 0; i < n; i++) {
		const struct kt_summary *s = &sum[i];

		if (s->unsorted)
			problem(k, 0, 0, false, "%s: %zu of %zu entries out of order (the first: "
				"entry %zu, 0x%llx): run objpatch sort", s->name, s->unsorted,
				s->entries, s->first_unsorted,
				(unsigned long long)s->unsorted_addr);
		if (s->outside)
			problem(k, 0, 0, false, "%s: %zu entr%s point%s outside code (the first: "
				"entry %zu, 0x%llx)", s->name, s->outside,
				s->outside == 1 ? "y" : "ies", s->outside == 1 ? "s" : "",
				s->first_outside, (unsigned long long)s->outside_addr);
	}
	if (k->c->json) {
		/* The problems end here; check_one() ends the tables. */
		json_end(k->j, ']');
		json_begin(k->j, "tables", '[');
		for (int i = 0; i < n; i++) {
			json_begin(k->j, NULL, '{');
			json_str(k->j, "name", sum[i].name);
			json_u64(k->j, "entries", sum[i].entries);
			json_u64(k->j, "unsorted", sum[i].unsorted);
			json_u64(k->j, "outside_code", sum[i].outside);
			json_end(k->j, '}');
		}
	}
}

static bool in_table(const struct op_entry *sorted, size_t n, uint32_t shndx, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sorted[mid].shndx < shndx ||
		    (sorted[mid].shndx == shndx && sorted[mid].off < off))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && sorted[lo].shndx == shndx && sorted[lo].off == off;
}

struct linked_scan {
	struct checker *k;
	const struct op_entry *sorted;
	size_t n, calls;
};

static void linked_call(void *ctx, uint32_t shndx, uint64_t off, const char *callee)
{
	struct linked_scan *c = ctx;

	if (c->calls++ == 0 && !c->k->ntables)
		problem(c->k, 0, 0, false, "no __mcount_loc or __patchable_function_entries "
			"table, but calls to %s", callee);
	if (!in_table(c->sorted, c->n, shndx, off))
		problem(c->k, shndx, off, true, "call to %s missing from the table", callee);
}

/* Every call to an mcount symbol the code makes must be in the table.
 * Returns how many such calls there are. */
static size_t check_complete(struct checker *k, const struct op_entry *sorted, size_t n)
{
	struct mce_file *f = k->f;
	size_t calls = 0;

	for (size_t s = 1; s < f->shnum; s++) {
		struct mce_sec *rs = &f->secs[s];

		if ((rs->sh.sh_type != SHT_REL && rs->sh.sh_type != SHT_RELA) ||
		    !rs->sh.sh_info || rs->sh.sh_info >= f->shnum ||
		    !mce_sec_exec(&f->secs[rs->sh.sh_info]) || mce_load_rels(f, rs) < 0)
			continue;
		uint32_t tx = rs->sh.sh_info;
		struct mc_text t = mc_text_of(k->f, &k->f->secs[tx], 0);

		for (size_t i = 0; i < rs->nrels; i++) {
			const struct mce_rel *r = &rs->rels[i];
			struct mc_site site;

			if (r->sym >= f->nsyms || !mc_is_mcount_name(f->syms[r->sym].name) ||
			    !mc_reloc_in(k->a->call_relocs, r->type))
				continue;
			t.boundary = 0;
			if (k->a->variable_length)
				mce_label_before(f, tx, r->offset, &t.boundary);
			if (k->a->decode(&t, r->offset, r->type, &site) < 0 || site.verdict != MC_SITE_CALL)
				continue;
			if (calls++ == 0 && !k->ntables)
				problem(k, 0, 0, false, "no __mcount_loc or "
					"__patchable_function_entries table, but calls to %s",
					f->syms[r->sym].name);
			if (!in_table(sorted, n, tx, site.off))
				problem(k, tx, site.off, true, "call to %s missing from the table",
					f->syms[r->sym].name);
		}
	}
	return calls;
}

/* Patchable entries still the compiler's NOPs (GCC's one-byte ones,
 * clang's long ones) are sound, but the runtime patches only its site
 * NOP: one line says how to get it. */
static void note_raw_entries(const char *path, const struct mc_arch *a,
			     const struct op_sites *s)
{
	size_t raw = 0;

	for (size_t i = 0; i < s->n; i++)
		raw += s->v[i].state == OP_PATCHABLE && s->v[i].raw;
	if (raw)
		mc_note(path, "%zu patchable entr%s the compiler's NOPs: objpatch nop (or "
			"link --nop) makes the first %u bytes the one NOP the runtime patches", raw,
			raw == 1 ? "y is" : "ies are", a->nops[0].len);
}

/* Check FILE, named PATH in what is said of it. */
static int check_one(const char *file, const char *path, const struct op_common *c,
		     struct json *j, bool kernel, enum km_version kversion, size_t *total)
{
	struct mce_file f;
	struct op_sites s = { 0 };
	struct checker k = { .path = path, .f = &f, .c = c, .j = j, .kernel = kernel };
	struct op_entry *sorted = NULL;
	int ret = -1;

	k.a = op_open_as(&f, file, path, 0);
	if (!k.a)
		goto out;
	if (op_sites_load(&f, k.a, &s) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	if (c->json) {
		json_begin(j, NULL, '{');
		json_str(j, "file", path);
		json_u64(j, "entries", s.n);
		json_begin(j, "problems", '[');
	}
	k.ntables = s.ntables;
	k.runtime = s.image_sym > 0;
	k.have_stubs = op_direct_stubs(&f, &k.stubs);
	if (kernel)
		k.kversion = kversion ? kversion : km_detect(&f);
	size_t zeros = 0;
	for (size_t i = 0; i < s.n; i++) {
		const struct op_entry *e = &s.v[i];
		char why[256];

		if (!e->resolved) {
			/* 6.12's sorttable zeroes the entries of replaced weak
			 * functions, and its kernel skips zeros at boot. */
			if (k.kversion == KM_6_12 && mce_linked(&f) && !e->addr) {
				zeros++;
				continue;
			}
			if (!mce_linked(&f))
				problem(&k, 0, 0, false, "%s entry %u has no relocation "
					"(a zero entry)", e->table, e->idx);
			else if (!e->addr)
				problem(&k, 0, 0, false, "%s entry %u is zero%s", e->table, e->idx,
					k.kversion == KM_6_12 ? "" :
					" (6.12's sorttable zeroes a replaced weak function's: "
					"check --kernel takes a 6.12 kernel's conventions)");
			else
				problem(&k, 0, 0, false, "%s entry %u (0x%llx) points outside "
					"every section", e->table, e->idx,
					(unsigned long long)e->addr);
			continue;
		}
		if (mce_linked(&f) && op_out_of_order(&s, i))
			problem(&k, e->shndx, e->off, true, "%s entry %u is out of order "
				"(0x%llx after 0x%llx): the table is not sorted", e->table,
				e->idx, (unsigned long long)e->addr,
				(unsigned long long)s.v[i - 1].addr);
		if (!mce_sec_exec(&f.secs[e->shndx])) {
			problem(&k, e->shndx, e->off, true, "%s entry %u points into %s, "
				"which is not executable", e->table, e->idx, f.secs[e->shndx].name);
			continue;
		}
		if (!e->classified)
			continue;	/* (nothing decoded: said once, below) */
		if (e->state == OP_OTHER && !k.kernel &&
		    op_entry_misplaced(&f, k.a, e, why, sizeof(why))) {
			if (!k.misplaced++)
				problem(&k, e->shndx, e->off, true, "%s", why);
			continue;
		}
		if (e->state == OP_OTHER) {
			problem(&k, e->shndx, e->off, true, "%s entry %u: neither a call to an "
				"mcount symbol nor a NOP (%s)", e->table, e->idx,
				e->bytes[0] ? e->bytes : "past the end of the section");
			continue;
		}
		/* (Stripped: no function to place a site in, said once.) */
		if (f.symtab)
			check_placement(&k, e);
		else if (!k.unplaced++)
			mc_warn(path, "no symbol table (stripped?): where each site lies in its "
				"function is not checked");
		check_parked(&k, e);
		if (k.a->site_align && e->off % k.a->site_align)
			problem(&k, e->shndx, e->off, true, "not aligned to %u bytes, which "
				"atomic patching needs", k.a->site_align);
	}
	/* (An empty table is no defect by itself: a kernel built without
	 * tracing has one; calls it lacks are reported below.) */
	if (kernel && mce_linked(&f) && s.n && zeros == s.n)
		problem(&k, 0, 0, false, "%s: every entry is zero: the kernel would trace "
			"nothing", s.tables[0].name);
	size_t n;

	sorted = op_sites_by_place(&s, &n);
	if (!sorted) {
		mc_error(path, "out of memory");
		goto out;
	}
	for (size_t i = 1; i < n; i++)
		if (op_same_place(&sorted[i - 1], &sorted[i]))
			problem(&k, sorted[i].shndx, sorted[i].off, true,
				"%s entry %u duplicates entry %u", sorted[i].table,
				sorted[i].idx, sorted[i - 1].idx);
	if (mce_linked(&f)) {
		struct linked_scan c = { &k, sorted, n, 0 };

		op_mcount_calls(&f, k.a, linked_call, &c);
		if (!k.a->insn && mc_noting())
			mc_note(path, "linked %s code is not decoded: the call-site tables' "
				"order and bounds are checked, not the code they point at",
				k.a->name);
	} else
		check_complete(&k, sorted, n);
	note_raw_entries(path, k.a, &s);
	check_ktables(&k);
	if (c->json) {
		json_end(j, ']');
		if (k.kernel)
			json_u64(j, "in_no_function", k.in_no_function);
		json_end(j, '}');
	}
	*total += k.problems;
	ret = k.problems ? 1 : 0;
out:
	free(sorted);
	op_sites_free(&s);
	mce_close(&f);
	return ret;
}

/* Check PATHS[0..N), each named NAME if given; 1 if any has a problem. */
static int check_files(char *const *paths, int n, const char *name,
		       const struct op_common *c, bool kernel, enum km_version kversion)
{
	struct json j;
	size_t total = 0;
	int status = 0;

	json_init(&j, stdout, c->pretty);
	if (c->json)
		json_begin(&j, NULL, '[');
	for (int i = 0; i < n; i++)
		if (!op_skip_bitcode(paths[i], "check") &&
		    check_one(paths[i], name ? name : paths[i], c, &j, kernel, kversion,
			      &total) != 0)
			status = 1;
	if (c->json) {
		json_end(&j, ']');
		json_done(&j);
	}
	return status;
}

int cmd_check(int argc, char **argv, const struct op_common *c)
{
	static const struct option longopts[] = {
		{ "kernel", optional_argument, NULL, 'k' },
		{ "verbose", no_argument, NULL, 'v' },
		{ 0 }
	};
	bool kernel = false;
	enum km_version kversion = KM_DETECT;
	int opt;

	while ((opt = getopt_long(argc, argv, "v", longopts, NULL)) != -1) {
		switch (opt) {
		case 'k':
			kernel = true;
			if (optarg && km_version_parse(optarg, &kversion) < 0) {
				fprintf(stderr, "objpatch check: --kernel=%s: not 6.1 or 6.12\n",
					optarg);
				return 2;
			}
			break;
		case 'v': mc_verbose++; break;
		default: return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "objpatch check: no input files\n");
		return 2;
	}
	return check_files(argv + optind, argc - optind, NULL, c, kernel, kversion);
}

int op_check_as(const char *path, const char *name, const struct op_common *c)
{
	char *paths[] = { (char *)path };

	return check_files(paths, 1, name, c, false, KM_DETECT);
}
