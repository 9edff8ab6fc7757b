// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Find the calls to mcount-like symbols in one relocatable object and
 * record where they are.
 *
 * Like the kernel's scripts/recordmcount, the candidates come from the
 * relocations: a call to an external symbol always leaves one.  Unlike it,
 * every candidate is decoded before it is believed: the instruction that
 * the relocation patches must be a call, and the table entry is that
 * instruction's first byte, found by decoding rather than by a per-arch
 * constant.  Relocations against __fentry__ that are not calls (taking its
 * address, a tail jump) are never recorded.
 */
#include "record.h"

#include "../arch/arch.h"
#include "../common/diag.h"
#include "../common/lto.h"
#include "../site/site.h"
#include "../common/mcelf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * A recorded site, compactly: a large module has thousands, and the
 * decoder's text (struct mc_site's what) would triple the array.  That
 * text is kept, in sites.what, only when it will be printed.
 */
struct site_rec {
	struct mce_sec *rs;	/* the relocation section that named the site */
	uint64_t off;
	uint32_t shndx;
	uint8_t len, pre, post, mode;
	bool traced;
};

typedef char site_what[sizeof(((struct mc_site *)0)->what)];

struct sites {
	struct site_rec *v;
	site_what *what;	/* parallel to v when describing, else NULL */
	size_t n, cap;
	bool describe;
};

/* Room for MORE sites (the number of candidates is known up front). */
static int reserve_sites(struct sites *ss, size_t more)
{
	if (ss->cap - ss->n >= more)
		return 0;

	size_t cap = ss->n + more > 2 * ss->cap ? ss->n + more : 2 * ss->cap;
	struct site_rec *v = realloc(ss->v, cap * sizeof(*v));

	if (!v)
		return -1;
	ss->v = v;
	if (ss->describe) {
		site_what *w = realloc(ss->what, cap * sizeof(*w));

		if (!w)
			return -1;
		ss->what = w;
	}
	ss->cap = cap;
	return 0;
}

static void push_site(struct sites *ss, struct mce_sec *rs, uint32_t shndx, bool traced,
		      const struct mc_site *s)
{
	if (ss->what)
		memcpy(ss->what[ss->n], s->what, sizeof(s->what));
	ss->v[ss->n++] = (struct site_rec){ rs, s->off, shndx, s->len, s->pre, s->post,
					    s->mode, traced };
}

static const char *site_text(const struct sites *ss, size_t k)
{
	return ss->what ? ss->what[k] : "";
}

/*
 * The kernel's list of sections ftrace may patch (scripts/recordmcount.c,
 * is_mcounted_section_name): any ".text" prefix plus the special text
 * sections the kernel's linker script places where ftrace expects them.
 * Calls elsewhere (.exit.text, .noinstr.text, .entry.text...) must never
 * become ftrace records.
 */
static bool kernel_traced(const char *name)
{
	static const char *const exact[] = {
		".init.text", ".ref.text", ".sched.text", ".spinlock.text",
		".irqentry.text", ".softirqentry.text", ".kprobes.text",
		".cpuidle.text",
	};

	if (!strncmp(name, ".text", 5))
		return true;
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (!strcmp(name, exact[i]))
			return true;
	return false;
}

/* The symbol the table's relocations are made against for section SHNDX:
 * its section symbol, else a non-weak local, else a new section symbol.
 * Never a weak symbol: a strong definition elsewhere would move it, and
 * every entry with it.  Never a global either: in a shared object a global
 * is preemptible and the entry would follow the interposed definition.
 * *VALUE is the symbol's st_value even for a section symbol: compilers
 * write 0 there, but ld.bfd, gold and lld all resolve a relocation against
 * a section symbol to section + st_value + addend, and the kernel's tool
 * subtracts it too. */
static long base_symbol(struct mce_file *f, const struct mc_arch *a,
			uint32_t shndx, uint64_t *value)
{
	long sec = mce_find_section_symbol(f, shndx);

	*value = sec > 0 ? f->syms[sec].value : 0;
	if (sec != 0)
		return sec;	/* found, or -1 on error */
	for (size_t i = 1; i < f->symtab->sh.sh_info && i < f->nsyms; i++) {
		const struct mce_sym *m = &f->syms[i];

		if (m->shndx != shndx || m->bind != STB_LOCAL || m->type == STT_TLS ||
		    m->type == STT_FILE || (a->base_avoid_func && m->type == STT_FUNC) ||
		    (m->name[0] == '$'))	/* ARM/AArch64 mapping symbols */
			continue;
		*value = m->value;
		return (long)i;
	}
	return mce_section_symbol(f, shndx);
}

static bool is_mcount_sym(const struct mce_sym *m, const struct record_opts *o)
{
	if (mc_is_mcount_name(m->name))
		return true;
	for (size_t i = 0; i < o->nsymbols; i++)
		if (!strcmp(m->name, o->symbols[i]))
			return true;
	return false;
}

/* Where mc_rel_sites() puts each site it decodes (room reserved). */
struct push_ctx {
	struct sites *ss;
	struct mce_sec *rs;
	uint32_t shndx;
	bool traced;
};

static void push_decoded(void *ctx, const struct mc_site *s)
{
	struct push_ctx *p = ctx;

	push_site(p->ss, p->rs, p->shndx, p->traced, s);
}

static int find_sites(struct mce_file *f, const struct mc_arch *a,
		      const struct record_opts *o, const bool *is_mc,
		      struct sites *ss)
{
	struct mce_rel *pick = NULL;
	bool *fake = NULL;
	uint64_t kernel_last = UINT64_MAX;	/* see kernel_pair_distance */
	int ret = -1;

	for (size_t k = 1; k < f->shnum; k++) {
		struct mce_sec *rs = &f->secs[k];

		if ((rs->sh.sh_type != SHT_REL && rs->sh.sh_type != SHT_RELA) ||
		    rs->sh.sh_link != f->symtab->idx || !rs->sh.sh_info)
			continue;
		struct mce_sec *tx = &f->secs[rs->sh.sh_info];
		if (!mce_sec_exec(tx))
			continue;
		free(pick);
		long got = mce_rels_pick(f, rs, is_mc, &pick);
		if (got < 0) {
			mc_error(f->path, "%s", f->err);
			goto out;
		}
		size_t n = (size_t)got;
		if (!n)
			continue;
		bool traced = !o->kernel || kernel_traced(tx->name);
		free(fake);
		fake = calloc(n, sizeof(*fake));
		if (!fake || reserve_sites(ss, n) < 0) {
			mc_error(f->path, "out of memory");
			goto out;
		}
		/* In relocation order, as the kernel's tool walks them. */
		if (o->kernel && traced && a->kernel_pair_distance)
			for (size_t j = 0; j < n; j++) {
				uint64_t off = pick[j].offset;

				fake[j] = kernel_last != UINT64_MAX &&
					  off - kernel_last == a->kernel_pair_distance;
				kernel_last = off;
			}
		struct push_ctx p = { ss, rs, (uint32_t)tx->idx, traced };

		if (mc_rel_sites(f, a, tx, pick, n, fake, ss->describe, push_decoded, &p) < 0)
			goto out;
	}
	ret = 0;
out:
	free(fake);
	free(pick);
	return ret;
}

/* Replace a site by its NOP and retire every relocation inside it. */
static int nop_site(struct mce_file *f, const struct mc_arch *a,
		    const struct sites *ss, size_t k, bool must)
{
	const struct site_rec *sr = &ss->v[k];
	struct mc_site s = { .off = sr->off, .len = sr->len, .pre = sr->pre,
			     .post = sr->post, .mode = sr->mode, .verdict = MC_SITE_CALL };
	char where[256];
	int r = mc_nop_site(f, a, &f->secs[sr->shndx], sr->rs, &s);

	if (r < 0)
		mc_error(f->path, "%s", f->err);
	else if (r > 0 && must)
		mc_error(f->path, "%s: cannot NOP this %u-byte call%s%s%s",
			 mce_where(f, sr->shndx, sr->off, where, sizeof(where)), sr->len,
			 ss->what ? " (" : "", site_text(ss, k), ss->what ? ")" : "");
	return r < 0 || (r > 0 && must) ? -1 : 0;
}

/*
 * Relaxing linkers (riscv64): one local label per traced site, in site
 * order, for the table to point at; and no relaxation hint left on a
 * recorded call, so the linker keeps the auipc+jalr pair that run-time
 * patching expects instead of shrinking it to a jal.
 */
static long add_site_labels(struct mce_file *f, const struct mc_arch *a,
			    const struct sites *ss)
{
	struct mce_sym *v = calloc(ss->n + 1, sizeof(*v));
	char (*names)[24] = calloc(ss->n + 1, sizeof(*names));
	size_t n = 0;
	long first = -1;

	if (!v || !names) {
		mc_error(f->path, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < ss->n; k++) {
		const struct site_rec *sr = &ss->v[k];

		if (!sr->traced)
			continue;
		snprintf(names[n], sizeof(names[n]), ".Lmcount%zu", n);
		v[n++] = (struct mce_sym){ .name = names[n - 1], .value = sr->off,
					   .shndx = sr->shndx, .type = STT_NOTYPE };
		const size_t *at;
		long m = mce_rels_within(f, sr->rs, sr->off, sr->off + 1, &at);

		if (m < 0)
			goto fail;
		for (long i = 0; i < m; i++)
			if (sr->rs->rels[at[i]].type == a->relax_reloc &&
			    mce_rel_retire(f, sr->rs, at[i], a->none_reloc) < 0)
				goto fail;
	}
	first = mce_add_locals(f, v, n);
	if (first < 0)
		goto fail;
	goto out;
fail:
	mc_error(f->path, "%s", f->err);
	first = -1;
out:
	free(v);
	free(names);
	return first;
}

static int emit_tables(struct mce_file *f, const struct mc_arch *a,
		       const struct record_opts *o, const struct sites *ss)
{
	uint32_t *syms = calloc(ss->n + 1, sizeof(*syms));
	int64_t *adds = calloc(ss->n + 1, sizeof(*adds));
	bool rela = false, found = false;
	int ret = -1;
	/* Userspace tables hold absolute addresses that become R_*_RELATIVE
	 * relocations in a PIE or shared object: a writable section keeps the
	 * link free of DT_TEXTREL (GCC's -mrecord-mcount table is read-only
	 * and gets one).  The kernel's tool writes SHF_ALLOC alone. */
	GElf_Xword wflag = o->kernel ? 0 : SHF_WRITE;

	if (!syms || !adds) {
		mc_error(f->path, "out of memory");
		goto out;
	}
	/* The object's own flavour: that of the relocations that named the
	 * sites (REL on i386 and ARM, RELA elsewhere). */
	for (size_t i = 0; i < ss->n && !found; i++)
		if (ss->v[i].traced) {
			rela = ss->v[i].rs->is_rela;
			found = true;
		}
	long labels = 0;
	size_t nl = 0;
	if (a->relax_reloc && (labels = add_site_labels(f, a, ss)) < 0)
		goto out;
	for (size_t i = 0; i < ss->n;) {
		size_t j = i, n = 0;
		uint32_t shndx = ss->v[i].shndx;
		uint64_t value = 0;
		long sym;

		/* Sites come grouped by relocation section, hence by text
		 * section; each group shares one base symbol. */
		bool any = false;

		while (j < ss->n && ss->v[j].shndx == shndx)
			any |= ss->v[j++].traced;
		if (!any) {
			i = j;
			continue;
		}
		sym = a->relax_reloc ? 0 : base_symbol(f, a, shndx, &value);
		if (sym < 0) {
			mc_error(f->path, "%s", f->err);
			goto out;
		}
		/* With -g each group becomes its own table (index from 0);
		 * otherwise entries stay at their site index, compacted below. */
		for (size_t k = i; k < j; k++) {
			if (!ss->v[k].traced)
				continue;
			size_t at = o->gc ? n : k;

			if (a->relax_reloc) {
				syms[at] = (uint32_t)(labels + nl++);
				adds[at] = 0;
			} else {
				syms[at] = (uint32_t)sym;
				adds[at] = (int64_t)(ss->v[k].off - value);
			}
			n++;
		}
		if (o->gc && n &&
		    mce_add_addr_table(f, o->section, wflag | SHF_LINK_ORDER, shndx, a->table_reloc,
				       rela, syms, adds, n) < 0) {
			mc_error(f->path, "%s", f->err);
			goto out;
		}
		i = j;
	}
	if (!o->gc) {
		/* Compact the traced entries, in site order. */
		size_t n = 0;
		for (size_t k = 0; k < ss->n; k++)
			if (ss->v[k].traced) {
				syms[n] = syms[k];
				adds[n] = adds[k];
				n++;
			}
		if (n && mce_add_addr_table(f, o->section, wflag, 0, a->table_reloc, rela,
					    syms, adds, n) < 0) {
			mc_error(f->path, "%s", f->err);
			goto out;
		}
	}
	ret = 0;
out:
	free(syms);
	free(adds);
	return ret;
}

static bool is_table_name(const char *name, const char *table)
{
	if (!strncmp(name, ".rela", 5))
		name += 5;
	else if (!strncmp(name, ".rel", 4))
		name += 4;
	return !strcmp(name, table);
}

static bool is_rel(const struct mce_sec *s)
{
	return s->sh.sh_type == SHT_REL || s->sh.sh_type == SHT_RELA;
}

static bool is_table(const struct mce_file *f, size_t i, const char *table)
{
	return i && i < f->shnum && !is_rel(&f->secs[i]) && !strcmp(f->secs[i].name, table);
}

/*
 * --force: empty the tables already there.  Relocations go with the
 * section they apply to (sh_info), whatever their name: left behind, they
 * would point into a table emptied under them.  A relocation section named
 * as the table's that applies to anything else is not the table's to drop.
 */
static int drop_tables(struct mce_file *f, const char *table)
{
	for (size_t i = 1; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];
		bool mine = is_table(f, i, table) ||
			    (is_rel(s) && is_table(f, s->sh.sh_info, table));

		if (!mine && is_rel(s) && is_table_name(s->name, table))
			return mce_fail(f, "%s applies to section %u, not to a %s table",
					s->name, s->sh.sh_info, table);
		if (mine && mce_sec_empty(f, s) < 0)
			return -1;
	}
	return 0;
}

/* -o FILE for an input that is not ELF: FILE becomes a copy of PATH. */
static int copy_to(const char *path, const char *out)
{
	char buf[65536];
	int in = open(path, O_RDONLY | O_CLOEXEC), fd = -1, ret = -1;
	ssize_t n = 0;

	if (in >= 0)
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	while (fd >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	if (in >= 0 && fd >= 0 && n == 0)
		ret = 0;
	if (ret < 0)
		mc_error(in < 0 ? path : out, "cannot copy: %s", strerror(errno ? errno : EIO));
	if (fd >= 0 && close(fd) < 0 && !ret) {
		mc_error(out, "cannot copy: %s", strerror(errno));
		ret = -1;
	}
	if (in >= 0)
		close(in);
	return ret;
}

/*
 * LLVM bitcode (clang -flto): no machine code yet, so nothing to record.
 * objpatch link records the code the LTO step makes from it.
 */
static int pass_bitcode(const char *path, const struct record_opts *o)
{
	mc_note(path, "LLVM bitcode (LTO): its code is made at the link, where "
		"objpatch link records it; left unchanged");
	return o->output && !o->dry_run ? copy_to(path, o->output) : 0;
}

int record_file(const char *path, const struct record_opts *o)
{
	struct mce_file f;
	const struct mc_arch *a;
	struct sites ss = { .describe = o->print || mc_noting() };
	bool *is_mc = NULL, any = false, existing = false;
	size_t ntraced = 0;
	int ret = -1;

	if (mce_is_bitcode(path))
		return pass_bitcode(path, o);
	if (mce_open_mode(&f, path, o->in_place && !o->dry_run) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	if (f.eh.e_type != ET_REL) {
		mc_error(path, "not a relocatable object (ELF type %u); "
			 "linked images are handled by objpatch", f.eh.e_type);
		goto out;
	}
	a = mc_arch_find(f.eh.e_machine, f.cls);
	if (!a) {
		mc_error(path, "unsupported machine %u (%d-bit)", f.eh.e_machine,
			 f.cls == ELFCLASS64 ? 64 : 32);
		goto out;
	}
	struct mce_lto_info lto;

	mce_lto_of(&f, &lto);
	if (lto.kind == MCE_LTO_GCC && !lto.fat) {
		/* (A fat object's code is what a link without LTO uses:
		 * recorded as any other.) */
		mc_note(path, "GCC LTO object: its code is made at the link, where objpatch "
			"link records it; left unchanged");
		goto unchanged;
	}
	for (size_t i = 1; i < f.shnum; i++)
		if (is_table_name(f.secs[i].name, o->section))
			existing = true;
	if (existing && !o->force) {
		mc_note(path, "already has %s; left unchanged (--force regenerates it)",
			o->section);
		goto unchanged;
	}
	if (!f.symtab) {
		mc_note(path, "no symbol table, so no calls to record");
		goto unchanged;
	}
	is_mc = calloc(f.nsyms + 1, sizeof(*is_mc));
	if (!is_mc) {
		mc_error(path, "out of memory");
		goto out;
	}
	for (size_t i = 1; i < f.nsyms; i++)
		if (f.syms[i].type != STT_SECTION && is_mcount_sym(&f.syms[i], o))
			any = is_mc[i] = true;
	if (!any) {
		mc_note(path, "no calls to mcount symbols");
		goto unchanged;
	}
	/* Sites keep pointers into f.secs, so make room for every table
	 * section up front (at most a table and its relocations per text
	 * section) before any pointer is taken. */
	if (mce_reserve_sections(&f, o->gc ? 2 * f.shnum + 2 : 2) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	if (find_sites(&f, a, o, is_mc, &ss) < 0)
		goto out;
	for (size_t i = 0; i < ss.n; i++) {
		if (ss.v[i].traced)
			ntraced++;
	}
	if (!ss.n) {
		mc_note(path, "no calls to mcount symbols");
		goto unchanged;
	}
	if (existing && drop_tables(&f, o->section) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	const char *last_warned = NULL;
	for (size_t i = 0; i < ss.n; i++) {
		const struct site_rec *sr = &ss.v[i];

		if (!sr->traced) {
			if (o->warn_untraced && last_warned != f.secs[sr->shndx].name) {
				last_warned = f.secs[sr->shndx].name;
				mc_warn(path, "section %s has mcount callers being ignored",
					last_warned);
			}
			/* The kernel's tool NOPs these where it knows how. */
			if (a->kernel_nops_untraced && nop_site(&f, a, &ss, i, false) < 0)
				goto out;
		} else if (o->nop && nop_site(&f, a, &ss, i, true) < 0) {
			goto out;
		}
	}
	if (o->print) {
		char where[256];

		for (size_t i = 0; i < ss.n; i++)
			if (ss.v[i].traced)
				printf("%s: %s+0x%llx %s: %s\n", path, f.secs[ss.v[i].shndx].name,
				       (unsigned long long)ss.v[i].off,
				       mce_where(&f, ss.v[i].shndx, ss.v[i].off, where,
						 sizeof(where)), site_text(&ss, i));
	}
	if (ntraced && emit_tables(&f, a, o, &ss) < 0)
		goto out;
	if (!f.dirty)
		goto unchanged;
	mc_note(path, "%zu call%s recorded in %s%s", ntraced, ntraced == 1 ? "" : "s",
		o->section, o->nop ? ", NOPed" : "");
	if (o->dry_run) {
		ret = 0;
		goto out;
	}
	if ((o->in_place ? mce_write_in_place(&f) : mce_write(&f, o->output)) < 0) {
		mc_error(path, "%s", f.err);
		goto out;
	}
	ret = 0;
	goto out;
unchanged:
	/* Nothing to change in the input; but -o FILE is a promise to a
	 * Makefile rule that FILE exists afterwards. */
	ret = 0;
	if (o->output && !o->dry_run && mce_write(&f, o->output) < 0) {
		mc_error(path, "%s", f.err);
		ret = -1;
	} else if (!o->output && !o->dry_run && !o->in_place) {
		mce_unstage(path);	/* (what a killed run may have left) */
	}
out:
	free(ss.v);
	free(ss.what);
	free(is_mc);
	mce_close(&f);
	return ret;
}
