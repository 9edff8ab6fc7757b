// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the ELF layer, TAP output.  The objects are made by the
 * system compiler at run time, never checked in.
 */
#include "../../common/mcelf.h"
#include "../../common/mcsort.h"
#include "tap.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>


static int sh(const char *cmd)
{
	return system(cmd);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t rnd(void)
{
	static uint64_t x = 0x9e3779b97f4a7c15ull;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

/* mc_sort_u64_into on V (N keys), without SKIP's keys, agrees with qsort
 * and leaves V as it was. */
static int sorts_like_qsort_skip(const uint64_t *v, size_t n, const uint64_t *skip)
{
	uint64_t *want = malloc((n + 1) * sizeof(*want)), *got = malloc((n + 1) * sizeof(*got));
	uint64_t *keep = malloc((n + 1) * sizeof(*keep));
	size_t m = 0;
	int same;

	memcpy(keep, v, n * sizeof(*v));
	for (size_t i = 0; i < n; i++)
		if (!skip || !(skip[i / 64] >> (i % 64) & 1))
			want[m++] = v[i];
	qsort(want, m, sizeof(*want), cmp_u64);
	same = mc_sort_u64_into(v, n, skip, got) == (long)m && !memcmp(got, want, m * sizeof(*v)) &&
	       !memcmp(keep, v, n * sizeof(*v));
	free(want);
	free(got);
	free(keep);
	return same;
}

static int sorts_like_qsort(const uint64_t *v, size_t n)
{
	return sorts_like_qsort_skip(v, n, NULL);
}

/* K ascending sequences of N keys in all, interleaved at random, as the
 * sections of a linked call-site table are; a few duplicates too. */
static void interleaved(uint64_t *v, size_t n, size_t k)
{
	uint64_t next[64];

	for (size_t p = 0; p < k; p++)
		next[p] = 0xffffffff81000000ull + p * 0x1000000ull;
	for (size_t i = 0; i < n; i++) {
		size_t p = rnd() % k;

		v[i] = next[p];
		next[p] += rnd() % 7 ? 1 + rnd() % 300 : 0;
	}
}

/* K ascending sequences interleaved, the first holding most keys. */
static void interleaved_skewed(uint64_t *v, size_t n, size_t k)
{
	uint64_t next[64];

	for (size_t p = 0; p < k; p++)
		next[p] = 0xffffffff81000000ull + p * 0x1000000ull;
	for (size_t i = 0; i < n; i++) {
		size_t p = rnd() % 5 ? 0 : rnd() % k;

		v[i] = next[p];
		next[p] += rnd() % 7 ? 1 + rnd() % 300 : 0;
	}
}

static int cmp_kv(const void *a, const void *b)
{
	const struct mc_kv *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return (x->val > y->val) - (x->val < y->val);
}

/* mc_sort_kv on KV (N pairs, whose values ascend) agrees with a sort by
 * (key, value): the stable order. */
static bool kv_sorts_stably(struct mc_kv *kv, size_t n)
{
	struct mc_kv *want = malloc(n * sizeof(*want));
	bool same;

	memcpy(want, kv, n * sizeof(*want));
	qsort(want, n, sizeof(*want), cmp_kv);
	same = mc_sort_kv(kv, n) == 0 && !memcmp(kv, want, n * sizeof(*kv));
	free(want);
	return same;
}

struct rec { uint64_t key; uint64_t pos; unsigned char pad[56]; };

static int cmp_rec(const void *a, const void *b, void *arg)
{
	const struct rec *x = a, *y = b;

	(void)arg;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* A permutation of records 0..N-1, sorted by key, equal keys in their
 * first order (the insertion sort is stable; only the qsort fallback may
 * reorder them). */
static int sorted_recs(const struct rec *r, size_t n, int stable)
{
	unsigned char *seen = calloc(n, 1);
	int good = seen != NULL;

	for (size_t i = 0; good && i < n; i++) {
		good = r[i].pos < n && !seen[r[i].pos]++;
		if (i && (r[i].key < r[i - 1].key ||
			  (stable && r[i].key == r[i - 1].key && r[i].pos < r[i - 1].pos)))
			good = 0;
	}
	free(seen);
	return good;
}

static void test_sort_nearly(void)
{
	enum { N = 5000 };
	struct rec *r = malloc(N * sizeof(*r));
	size_t small = offsetof(struct rec, pad) + 8;	/* 24 bytes: the insertion sort */
	int good = 1;

	/* Nearly sorted: a few elements out of place; then random, which
	 * exhausts the insertion sort's budget and falls back to qsort_r. */
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < N; i++)
			r[i] = (struct rec){ .key = round == 2 ? rnd() % 100 : i / 3, .pos = i };
		if (round == 1)	/* records a few places out of order */
			for (int k = 0; k < 200; k++) {
				size_t at = rnd() % (N - 10), to = at + 1 + rnd() % 9;
				struct rec t = r[at];

				r[at] = r[to];
				r[to] = t;
			}
		for (size_t i = 0; i < N; i++)
			r[i].pos = i;	/* the input order, which stability keeps */
		unsigned char *p = (unsigned char *)r;
		struct rec *tmp = malloc(N * small);

		for (size_t i = 0; i < N; i++)
			memcpy((unsigned char *)tmp + i * small, p + i * sizeof(*r), small);
		mc_sort_nearly(tmp, N, small, cmp_rec, NULL);
		for (size_t i = 0; i < N; i++)
			memcpy(p + i * sizeof(*r), (unsigned char *)tmp + i * small, small);
		free(tmp);
		good &= sorted_recs(r, N, round < 2);
	}
	ok(good, "mc_sort_nearly: sorted, nearly sorted and random 24-byte records");
	for (size_t i = 0; i < N; i++)
		r[i] = (struct rec){ .key = (uint64_t)(N - i) / 2, .pos = i };
	mc_sort_nearly(r, N, sizeof(*r), cmp_rec, NULL);
	ok(sorted_recs(r, N, 0), "mc_sort_nearly: records too large to insert go to qsort_r");
	mc_sort_nearly(r, 0, sizeof(*r), cmp_rec, NULL);
	mc_sort_nearly(r, 1, sizeof(*r), cmp_rec, NULL);
	free(r);
}

static void test_sort(void)
{
	enum { N = 200000 };
	uint64_t *v = malloc(N * sizeof(*v));
	char what[128];

	for (size_t i = 0; i < N; i++)
		v[i] = rnd();
	ok(sorts_like_qsort(v, N), "mc_sort_u64_into: random 64-bit keys (radix)");
	for (size_t i = 0; i < N; i++)
		v[i] = 0xffffffff81000000ull + (rnd() % 0x2000000);
	ok(sorts_like_qsort(v, N), "mc_sort_u64_into: random addresses, constant high bits skipped");
	/* 1-4 merged in place by cursors, 5-16 scattered (an odd and an even
	 * number of merge rounds), then radix. */
	static const size_t ks[] = { 1, 2, 3, 4, 5, 9, 16, 17, 40 };
	uint64_t *skip = calloc(N / 64 + 1, sizeof(*skip));
	for (size_t i = 0; i < N; i += 1 + rnd() % 5)
		skip[i / 64] |= 1ull << (i % 64);
	for (size_t j = 0; j < sizeof(ks) / sizeof(ks[0]); j++) {
		interleaved(v, N, ks[j]);
		snprintf(what, sizeof(what), "mc_sort_u64_into: %zu interleaved ascending sequences%s",
			 ks[j], ks[j] > 16 ? " (more than the piles: radix)" : "");
		ok(sorts_like_qsort(v, N), what);
		strcat(what, ", some keys skipped");
		ok(sorts_like_qsort_skip(v, N, skip), what);
	}
	/* An image's piles: one large (.text), the others small, merged
	 * smallest first, in place in the scatter buffer every other time. */
	for (size_t k = 5; k <= 16; k += 11) {
		interleaved_skewed(v, N, k);
		snprintf(what, sizeof(what), "mc_sort_u64_into: %zu sequences, one holding most keys", k);
		ok(sorts_like_qsort(v, N), what);
		strcat(what, ", some keys skipped");
		ok(sorts_like_qsort_skip(v, N, skip), what);
	}
	free(skip);
	for (size_t i = 0; i < 5; i++)
		v[i] = 5 - i;
	ok(sorts_like_qsort(v, 0) && sorts_like_qsort(v, 1) && sorts_like_qsort(v, 5),
	   "mc_sort_u64_into: 0, 1 and 5 keys");

	struct mc_kv *kv = malloc(N * sizeof(*kv));
	for (size_t i = 0; i < N; i++)
		kv[i] = (struct mc_kv){ rnd() % 1000, i };
	int stable = mc_sort_kv(kv, N) == 0;
	for (size_t i = 1; i < N; i++)
		if (kv[i].key < kv[i - 1].key ||
		    (kv[i].key == kv[i - 1].key && kv[i].val < kv[i - 1].val))
			stable = 0;
	ok(stable, "mc_sort_kv: sorted, equal keys in their first order");
	/* Packed into words (values that are places, a narrow key range),
	 * merged as piles or radix-sorted; and the pairs as they are. */
	interleaved_skewed(v, N, 9);
	for (size_t i = 0; i < N; i++)
		kv[i] = (struct mc_kv){ v[i], i };
	ok(kv_sorts_stably(kv, N), "mc_sort_kv: interleaved runs, values their places (packed)");
	for (size_t i = 0; i < N; i++)
		kv[i] = (struct mc_kv){ 0xffffffff81000000ull + rnd() % 0x100000, i };
	ok(kv_sorts_stably(kv, N), "mc_sort_kv: random addresses, values their places (packed, radix)");
	for (size_t i = 0; i < N; i++)
		kv[i] = (struct mc_kv){ rnd() % 3 ? rnd() : 7, i };
	ok(kv_sorts_stably(kv, N), "mc_sort_kv: full-range keys (no room to pack)");
	for (size_t i = 0; i < N; i++)
		kv[i] = (struct mc_kv){ rnd() % 5000, 3 * i + 1 };
	ok(kv_sorts_stably(kv, N), "mc_sort_kv: values that are not places");
	free(kv);
	free(v);
	test_sort_nearly();
}

/* Symbols left in the file (MCE_OPEN_LAZY_SYMS) read as f->syms does. */
static void test_lazy_symbols(const char *path)
{
	struct mce_file full, lazy;
	struct mce_sym m;
	int same = 1;

	if (mce_open(&full, path) < 0 || mce_open_flags(&lazy, path, MCE_OPEN_LAZY_SYMS) < 0) {
		ok(0, "lazy symbols: the object opens both ways");
		return;
	}
	ok(lazy.syms == NULL && lazy.syms_lazy && lazy.nsyms == full.nsyms,
	   "lazy symbols: none read at open, the count known");
	for (size_t i = 0; i < full.nsyms; i++) {
		const struct mce_sym *w = &full.syms[i];

		if (mce_sym_peek(&lazy, i, &m) < 0 || strcmp(m.name, w->name) ||
		    m.value != w->value || m.size != w->size || m.type != w->type ||
		    m.bind != w->bind || m.shndx != w->shndx)
			same = 0;
	}
	ok(same, "lazy symbols: each symbol peeked in place equals the one read up front");
	/* The functions, one batch each, from the raw table and from f->syms. */
	struct mce_func a[1], b[1];
	size_t at_a = 0, at_b = 0, nfunc = 0;
	long ka, kb;
	same = 1;
	do {
		ka = mce_funcs_next(&lazy, &at_a, a, 1);
		kb = mce_funcs_next(&full, &at_b, b, 1);
		if (ka != kb || ka < 0)
			same = 0;
		for (long j = 0; same && j < ka; j++)
			same = a[j].value == b[j].value && a[j].size == b[j].size &&
			       a[j].shndx == b[j].shndx &&
			       (full.secs[a[j].shndx].sh.sh_flags & SHF_EXECINSTR);
		nfunc += ka > 0 ? (size_t)ka : 0;
	} while (same && ka > 0);
	size_t want = 0;
	for (size_t i = 0; i < full.nsyms; i++)
		want += full.syms[i].type == STT_FUNC && full.syms[i].shndx;
	ok(same && nfunc == want && nfunc > 0,
	   "lazy symbols: the defined functions, batch by batch, the same from the raw table");
	ok(mce_sym_lookup(&lazy, "f") == mce_sym_lookup(&full, "f") && mce_sym_lookup(&lazy, "f") > 0,
	   "lazy symbols: lookup by name reads the table in place");
	ok(mce_syms_need(&lazy) == 0 && lazy.syms && !lazy.syms_lazy &&
	   !strcmp(lazy.syms[mce_sym_lookup(&full, "f")].name, "f"),
	   "lazy symbols: read in full on demand");
	mce_close(&full);
	mce_close(&lazy);
}

/* A file truncated under its mapping: one diagnostic line and exit 1, not
 * a SIGBUS crash.  Run in a child, which reads the lost last page. */
static void test_shrunk(const char *path, const char *copy)
{
	char cmd[1024], line[512] = "";
	int pipefd[2], status = 0;
	struct mce_file f;

	snprintf(cmd, sizeof(cmd), "cp %s %s", path, copy);
	if (sh(cmd) || pipe(pipefd) < 0) {
		ok(0, "a truncated mapped file is one diagnostic, exit 1");
		return;
	}
	fflush(stdout);
	pid_t pid = fork();

	if (pid == 0) {
		/* Other files open at once must not crowd the guard out: a
		 * table of eight once left the ninth file unguarded. */
		struct mce_file others[12];

		dup2(pipefd[1], 2);
		for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
			if (mce_open(&others[i], path) < 0)
				_exit(3);
		if (mce_open(&f, copy) < 0 || truncate(copy, 0) < 0)
			_exit(3);
		volatile uint8_t last = f.map[f.size - 1];

		(void)last;
		_exit(4);
	}
	close(pipefd[1]);
	ssize_t n = read(pipefd[0], line, sizeof(line) - 1);

	line[n > 0 ? n : 0] = 0;
	close(pipefd[0]);
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(line, copy) &&
	   strstr(line, ": error: ") && strstr(line, "shrank while it was being read") &&
	   strchr(line, '\n') == line + strlen(line) - 1,
	   "a file truncated under its mapping, 12 others open: one diagnostic line, exit 1");
}

/*
 * mce_rels_pick() and mce_rels_within() against the plain reading of
 * mce_load_rels(): the same relocations, in the same order, for every
 * symbol on its own and for every window of offsets, on an object of the
 * class the command line built (64-bit RELA, or 32-bit REL with -m32).
 */
static void test_rels_views(const char *path, const char *what)
{
	struct mce_file f, g;
	char name[128];

	if (mce_open(&f, path) < 0 || mce_open(&g, path) < 0) {
		snprintf(name, sizeof(name), "%s: the object opens", what);
		ok(0, name);
		return;
	}
	int same = 1, checked = 0;
	bool *want = calloc(f.nsyms, sizeof(*want));

	for (size_t k = 0; k < f.shnum && want; k++) {
		struct mce_sec *rs = &f.secs[k], *rg = &g.secs[k];

		if (rs->sh.sh_type != SHT_RELA && rs->sh.sh_type != SHT_REL)
			continue;
		/* f picks from the raw data; g has loaded first (the slow path). */
		if (mce_load_rels(&g, rg) < 0) {
			same = 0;
			break;
		}
		for (size_t s = 0; s < f.nsyms; s++) {
			struct mce_rel *p = NULL, *q = NULL;

			want[s] = true;
			long n = mce_rels_pick(&f, rs, want, &p);
			long m = mce_rels_pick(&g, rg, want, &q);
			long j = 0;

			for (size_t i = 0; n >= 0 && i < rg->nrels; i++) {
				const struct mce_rel *r = &rg->rels[i];

				if (r->sym != s)
					continue;
				if (j >= n || p[j].offset != r->offset || p[j].type != r->type ||
				    p[j].addend != r->addend || q[j].offset != r->offset)
					same = 0;
				j++;
			}
			same &= n == j && m == j;
			checked += j > 0;
			want[s] = false;
			free(p);
			free(q);
		}
		uint64_t end = f.secs[rs->sh.sh_info].sh.sh_size + 2;

		for (uint64_t lo = 0; lo < end; lo += 3)
			for (uint64_t hi = lo; hi < lo + 9; hi += 4) {
				const size_t *at;
				long n = mce_rels_within(&f, rs, lo, hi, &at), j = 0;

				for (size_t i = 0; n >= 0 && i < rg->nrels; i++)
					if (rg->rels[i].offset >= lo && rg->rels[i].offset < hi)
						same &= j < n && rg->rels[at[j++]].offset == rg->rels[i].offset;
				same &= n == j;
				for (long i = 1; i < n; i++)
					same &= at[i - 1] < at[i] ||
						rs->rels[at[i - 1]].offset < rs->rels[at[i]].offset;
			}
	}
	snprintf(name, sizeof(name), "%s: picked and windowed relocations are the plain ones", what);
	ok(want && same && checked > 3, name);
	free(want);
	mce_close(&f);
	mce_close(&g);
}

int main(void)
{
	char dir[] = "/tmp/mcloc-unit.XXXXXX", path[256], out[300], cmd[1024];
	struct mce_file f;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/a.o", dir);
	snprintf(out, sizeof(out), "%s/b.o", dir);
	snprintf(cmd, sizeof(cmd),
		 "printf 'int g(int);\\nstatic int s(int x){return g(x)+1;}\\n"
		 "int f(int x){return s(x)*2;}\\n' | cc -O1 -x c -c - -o %s", path);
	if (sh(cmd)) {
		printf("1..0 # SKIP no C compiler\n");
		return 0;
	}

	test_sort();
	test_lazy_symbols(path);
	test_shrunk(path, out);

	/* Many calls, to several functions, for the relocation views. */
	static const char many[] = "printf 'int g(int);int h(int);int k;\\n"
		"int f(int x){return g(x)+h(x+k)+g(k)+h(g(x*3))+k;}\\n"
		"int e(int x){return h(x)+f(x)+g(k);}\\n' | cc -O1 -x c -c - %s -o %s/r%s.o";
	snprintf(cmd, sizeof(cmd), many, "", dir, "64");
	if (sh(cmd) == 0) {
		snprintf(out, sizeof(out), "%s/r64.o", dir);
		test_rels_views(out, "64-bit RELA");
	}
	snprintf(cmd, sizeof(cmd), many, "-m32", dir, "32");
	if (sh(cmd) == 0) {
		snprintf(out, sizeof(out), "%s/r32.o", dir);
		test_rels_views(out, "32-bit REL");
	} else {
		ok(1, "# SKIP cc -m32 cannot build a 32-bit object here");
	}
	ok(mce_open(&f, path) == 0, "a compiler-made object opens");
	ok(f.cls == ELFCLASS64 && f.addrsize == 8 && !f.msb, "class and byte order come from the file");
	struct mce_sec *text = mce_sec_by_name(&f, ".text");
	ok(text && mce_sec_exec(text) && text->rela, ".text is executable and has its relocations linked");
	ok(text && mce_load_rels(&f, text->rela) == 0 && text->rela->nrels > 0, "relocations decode");

	uint8_t buf[8];
	mce_put_addr(&f, buf, 0x1122334455667788ull);
	ok(buf[0] == 0x88 && mce_get_addr(&f, buf) == 0x1122334455667788ull, "address words use the object's order");

	/* A table against the section symbol, written elsewhere and re-read. */
	long sym = mce_section_symbol(&f, (uint32_t)text->idx);
	uint32_t syms[2] = { (uint32_t)sym, (uint32_t)sym };
	int64_t adds[2] = { 0, 4 };
	ok(sym > 0, "a section symbol is found or made");
	ok(mce_add_addr_table(&f, "__t", SHF_WRITE, 0, R_X86_64_64, true, syms, adds, 2) > 0,
	   "an address table is added");
	ok(mce_write(&f, out) == 0, "the result is written to another path");
	mce_close(&f);

	ok(mce_open(&f, out) == 0, "the written object opens again");
	struct mce_sec *t = mce_sec_by_name(&f, "__t");
	struct mce_sec *r = mce_sec_by_name(&f, ".rela__t");
	ok(t && t->sh.sh_size == 16 && (t->sh.sh_flags & SHF_ALLOC), "the table has two entries");
	ok(r && mce_load_rels(&f, r) == 0 && r->nrels == 2 && r->rels[1].addend == 4 &&
	   r->rels[1].type == R_X86_64_64, "its relocations read back");
	mce_close(&f);

	snprintf(cmd, sizeof(cmd), "cc -c -x c /dev/null -o %s/e.o && ld -r %s %s/e.o -o %s/l.o 2>/dev/null",
		 dir, out, dir, dir);
	ok(sh(cmd) == 0, "the linker accepts the written object");

	/* mce_section_symbol on an object whose .text has no section symbol:
	 * assembled by hand, so the symbol really is missing. */
	snprintf(cmd, sizeof(cmd),
		 "printf '.text\\n.globl f\\nf: call g\\nret\\n.data\\n.globl d\\nd: .quad 0\\n' |"
		 " as -o %s/n.o - && ! readelf -s %s/n.o | grep -q 'SECTION.*1 $'", dir, dir);
	if (sh(cmd) == 0) {
		snprintf(path, sizeof(path), "%s/n.o", dir);
		ok(mce_open(&f, path) == 0, "an object without a .text section symbol opens");
		text = mce_sec_by_name(&f, ".text");
		size_t globals = f.nsyms - f.symtab->sh.sh_info;
		sym = mce_section_symbol(&f, (uint32_t)text->idx);
		ok(sym == (long)f.symtab->sh.sh_info - 1 && f.syms[sym].type == STT_SECTION,
		   "a new section symbol goes last among the locals");
		ok(f.nsyms - f.symtab->sh.sh_info == globals, "the globals are all still there");
		ok(mce_write(&f, out) == 0, "and the object is written");
		mce_close(&f);
		snprintf(cmd, sizeof(cmd), "readelf -rW %s | grep -q ' g - 4'", out);
		ok(sh(cmd) == 0, "the relocation against the moved global still names it");
	} else {
		ok(1, "# SKIP as emitted a section symbol anyway");
	}

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
	return tap_done();
}
