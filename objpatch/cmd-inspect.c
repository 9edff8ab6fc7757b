// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * objpatch inspect: the offline available_filter_functions.  For every
 * entry of an object's call-site table: where it is, in which function,
 * and what the code there is now (a call to what, a NOP of what length, a
 * patchable NOP run, or something else), then a summary; and for a linked
 * kernel image, its exception and ORC tables' counts and order.
 */
#include "ktables.h"
#include "objpatch.h"
#include "sites.h"

#include "../common/diag.h"
#include "../common/mclines.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct summary {
	size_t states[4];
	size_t zero;		/* entries that are 0 (6.12's sorttable makes them) */
	bool sorted;
	size_t duplicates;
};

/* An entry that is 0, as 6.12's sorttable leaves a replaced weak
 * function's: no site, whatever its state says. */
static bool is_zero(const struct op_entry *e)
{
	return !e->resolved && !e->addr;
}

static void summarize(const struct op_sites *s, struct summary *sum)
{
	size_t n;
	struct op_entry *p = op_sites_by_place(s, &n);

	memset(sum, 0, sizeof(*sum));
	sum->sorted = true;
	for (size_t i = 0; i < s->n; i++) {
		if (is_zero(&s->v[i]))
			sum->zero++;
		else
			sum->states[s->v[i].state]++;
		if (op_out_of_order(s, i))
			sum->sorted = false;
	}
	for (size_t i = 1; p && i < n; i++)
		if (op_same_place(&p[i - 1], &p[i]))
			sum->duplicates++;
	free(p);
}

/* The function an entry belongs to, and where it starts (*START).  A
 * patchable NOP run may start before its function's symbol
 * (-fpatchable-function-entry=N,M), so look at the first byte after the
 * run: the function's entry when the whole run lies before it (M = N, or
 * the ops slot that objpatch link --runtime makes of the M NOPs, which is
 * all the run then counts), else a byte inside the function.  An entry
 * past the end of the sized function before it lies in none (a weak
 * definition the link replaced leaves one behind): -1. */
static long function_of(struct mce_file *f, const struct op_entry *e, uint64_t *start)
{
	uint64_t at = e->off + (e->state == OP_PATCHABLE ? e->len : 0);

	if (!e->resolved)
		return -1;
	long sym = mce_label_before(f, e->shndx, at, start);
	if (sym >= 0 && f->syms[sym].type == STT_FUNC && f->syms[sym].size &&
	    at - *start >= f->syms[sym].size)
		return -1;
	return sym;
}

/* A run that starts before its function is named after that function,
 * not after the one it follows. */
static const char *where(struct mce_file *f, const struct op_entry *e, char *buf, size_t n)
{
	uint64_t start;
	long sym;

	if (!e->resolved)
		return "?";
	if (e->state == OP_PATCHABLE && (sym = function_of(f, e, &start)) > 0 && start > e->off) {
		snprintf(buf, n, "%s-0x%llx", f->syms[sym].name,
			 (unsigned long long)(start - e->off));
		return buf;
	}
	return mce_where(f, e->shndx, e->off, buf, n);
}

static void state_text(const struct op_entry *e, char *buf, size_t n)
{
	if (!e->classified) {
		snprintf(buf, n, is_zero(e) ? "zero" : "not decoded");
		return;
	}
	switch (e->state) {
	case OP_CALL: snprintf(buf, n, "call %s (%u bytes)", e->target, e->len); break;
	case OP_NOP: snprintf(buf, n, "%s (%u bytes)", e->parked ? "parked" : "nop", e->len); break;
	case OP_PATCHABLE: snprintf(buf, n, "patchable nops (%u bytes)", e->len); break;
	default: snprintf(buf, n, "other: %s", e->bytes[0] ? e->bytes : "no code there");
	}
}

static int inspect_one(const char *path, const struct op_common *c, bool functions,
		       bool lines, struct json *j)
{
	struct mc_lines *dw = NULL;
	char lbuf[512];
	struct mce_file f;
	const struct mc_arch *a = op_open(&f, path);
	struct op_sites s = { 0 };
	struct summary sum;
	char buf[256], st[96];
	int ret = -1;

	if (!a)
		goto out;
	if (op_sites_load(&f, a, &s) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	summarize(&s, &sum);
	struct kt_tables kt = { 0 };
	struct kt_summary ks[2];
	long flag = -1;
	int nk = 0;

	if (mce_linked(&f) &&
	    (kt_find(&f, a, &kt) < 0 || (nk = kt_summarize(&f, a, &kt, ks, &flag)) < 0)) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	if (lines && !functions) {
		char err[256];

		dw = mc_lines_open(path, err, sizeof(err));
		if (!dw) {
			mc_error(path, "--lines: %s (built without -g?)", err);
			goto out;
		}
	}
	if (functions) {
		/* One name per function, in table order (a function with two
		 * entries is listed once). */
		bool *seen = calloc(f.nsyms + 1, sizeof(*seen));

		if (!seen) {
			mc_error(path, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < s.n; i++) {
			uint64_t start;
			long sym = function_of(&f, &s.v[i], &start);

			if (sym >= 0 && !seen[sym]) {
				seen[sym] = true;
				printf("%s\n", f.syms[sym].name);
			}
		}
		free(seen);
	} else if (c->json) {
		json_begin(j, NULL, '{');
		json_str(j, "file", path);
		json_str(j, "arch", a->name);
		json_begin(j, "sites", '[');
		for (size_t i = 0; i < s.n; i++) {
			const struct op_entry *e = &s.v[i];

			json_begin(j, NULL, '{');
			json_str(j, "table", e->table);
			json_u64(j, "index", e->idx);
			json_str(j, "section", e->resolved ? f.secs[e->shndx].name : NULL);
			json_u64(j, "offset", e->off);
			if (mce_linked(&f))
				json_u64(j, "address", e->addr);
			json_str(j, "where", where(&f, e, buf, sizeof(buf)));
			json_str(j, "state", is_zero(e) ? "zero" : op_state_name[e->state]);
			json_u64(j, "length", e->len);
			if (e->state == OP_CALL && !is_zero(e))
				json_str(j, "target", e->target);
			if (e->state == OP_OTHER)
				json_str(j, "bytes", e->bytes);
			if (dw)
				json_str(j, "line", e->resolved ?
					 mc_lines_at(dw, e->shndx, e->off, lbuf, sizeof(lbuf)) : NULL);
			json_end(j, '}');
		}
		json_end(j, ']');
		json_begin(j, "summary", '{');
		json_u64(j, "entries", s.n);
		for (int k = 0; k < 4; k++)
			json_u64(j, op_state_name[k], sum.states[k]);
		if (sum.zero)
			json_u64(j, "zero", sum.zero);
		json_bool(j, "sorted", sum.sorted);
		json_u64(j, "duplicates", sum.duplicates);
		json_end(j, '}');
		json_begin(j, "tables", '[');
		for (int i = 0; i < nk; i++) {
			json_begin(j, NULL, '{');
			json_str(j, "name", ks[i].name);
			json_u64(j, "entries", ks[i].entries);
			json_bool(j, "sorted", !ks[i].unsorted);
			json_u64(j, "unsorted", ks[i].unsorted);
			json_u64(j, "outside_code", ks[i].outside);
			json_end(j, '}');
		}
		json_end(j, ']');
		if (flag >= 0)
			json_u64(j, "main_extable_sort_needed", (uint64_t)flag);
		json_end(j, '}');
	} else {
		printf("%s: %zu entr%s in %zu table%s (%s)\n", path, s.n, s.n == 1 ? "y" : "ies",
		       s.ntables, s.ntables == 1 ? "" : "s", a->name);
		for (size_t i = 0; i < s.n; i++) {
			const struct op_entry *e = &s.v[i];
			char place[128];

			if (mce_linked(&f))
				snprintf(place, sizeof(place), "0x%llx %s",
					 (unsigned long long)e->addr,
					 e->resolved ? f.secs[e->shndx].name : "?");
			else
				snprintf(place, sizeof(place), "%s+0x%llx",
					 e->resolved ? f.secs[e->shndx].name : "?",
					 (unsigned long long)e->off);
			state_text(e, st, sizeof(st));
			if (dw) {
				const char *ln = e->resolved ?
					mc_lines_at(dw, e->shndx, e->off, lbuf, sizeof(lbuf)) : NULL;
				printf("  %-24s %-36s %-28s %s\n", place, where(&f, e, buf, sizeof(buf)),
				       st, ln ? ln : "?");
			} else {
				printf("  %-24s %-36s %s\n", place, where(&f, e, buf, sizeof(buf)), st);
			}
		}
		char zero[32] = "";

		if (sum.zero)
			snprintf(zero, sizeof(zero), ", %zu zero", sum.zero);
		printf("summary: %zu call, %zu nop, %zu patchable, %zu other%s; %s; "
		       "%zu duplicate%s\n", sum.states[OP_CALL], sum.states[OP_NOP],
		       sum.states[OP_PATCHABLE], sum.states[OP_OTHER], zero,
		       sum.sorted ? "sorted" : "not sorted",
		       sum.duplicates, sum.duplicates == 1 ? "" : "s");
		for (int i = 0; i < nk; i++) {
			printf("%s: %zu entr%s%s, %s, %zu outside code", ks[i].name, ks[i].entries,
			       ks[i].entries == 1 ? "y" : "ies",
			       kt.orc && !strcmp(ks[i].name, ".orc_unwind_ip") ?
			       " (with .orc_unwind)" : "",
			       ks[i].unsorted ? "not sorted" : "sorted", ks[i].outside);
			if (flag >= 0 && kt.ex && !strcmp(ks[i].name, "__ex_table"))
				printf("; main_extable_sort_needed = %ld", flag);
			printf("\n");
		}
	}
	ret = 0;
out:
	mc_lines_close(dw);
	op_sites_free(&s);
	mce_close(&f);
	return ret;
}

int cmd_inspect(int argc, char **argv, const struct op_common *c)
{
	static const struct option longopts[] = {
		{ "functions", no_argument, NULL, 'F' },
		{ "lines", no_argument, NULL, 'L' },
		{ 0 }
	};
	bool functions = false, lines = false;
	struct json j;
	int opt, status = 0;

	while ((opt = getopt_long(argc, argv, "FL", longopts, NULL)) != -1) {
		if (opt == 'F')
			functions = true;
		else if (opt == 'L')
			lines = true;
		else
			return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "objpatch inspect: no input files\n");
		return 2;
	}
	json_init(&j, stdout, c->pretty);
	if (c->json && !functions)
		json_begin(&j, NULL, '[');
	for (int i = optind; i < argc; i++)
		if (!op_skip_bitcode(argv[i], "inspect") &&
		    inspect_one(argv[i], c, functions, lines, &j) < 0)
			status = 1;
	if (c->json && !functions) {
		json_end(&j, ']');
		json_done(&j);
	}
	return status;
}
