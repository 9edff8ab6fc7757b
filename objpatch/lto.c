// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * objpatch link and LTO.  recordmcount passes LTO objects through, since
 * their code is made only at the link.  To record that code, whatever the
 * linker (bfd, gold, lld, mold), the link keeps its relocations
 * (--emit-relocs), which name every call to an mcount symbol the LTO step
 * made, and objpatch decodes them exactly as recordmcount decodes an
 * object's (mc_rel_sites).  A linked image has no room for a new table,
 * so the link runs once more with a table object of as many entries, each
 * pointing at the table itself (in a PIE, one R_*_RELATIVE relocation
 * each), whose words then take the sites' addresses.  The LTO step is
 * deterministic: the second link makes the same code, and its own
 * relocations are what the entries are filled from.
 *
 * GCC's LTO step compiles with the link's -pg, not the objects' (target
 * options such as -mfentry come from the objects), and -pg on the link
 * line also links gcrt1.o, which writes gmon.out.  -fprofile sets the
 * same compiler flag without the driver's startup file.
 */
#include "lto.h"

#include "objpatch.h"

#include "../arch/arch.h"
#include "../base/grow.h"
#include "../common/command.h"
#include "../common/diag.h"
#include "../common/lto.h"
#include "../site/site.h"

#include <ar.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LTO_TABLE "__mcount_loc"

/* Whether ARG gives the linker one of NAMES, itself (LD) or through -Wl. */
static bool linker_option(const char *arg, bool ld, const char *const *names)
{
	const char *p = arg + 4;

	if (ld) {
		for (; *names; names++)
			if (!strcmp(arg, *names))
				return true;
		return false;
	}
	if (strncmp(arg, "-Wl,", 4))
		return false;
	while (*p) {
		size_t len = strcspn(p, ",");

		for (const char *const *n = names; *n; n++)
			if (strlen(*n) == len && !strncmp(p, *n, len))
				return true;
		p += len + (p[len] == ',');
	}
	return false;
}

/* An object built for tracing: a table of its own, or a call to an
 * mcount symbol that recordmcount never saw. */
static bool object_traced(const struct mce_file *f)
{
	for (size_t i = 1; i < f->shnum; i++)
		if (!strcmp(f->secs[i].name, "__mcount_loc") ||
		    !strcmp(f->secs[i].name, "__patchable_function_entries"))
			return true;
	for (size_t i = 1; i < f->nsyms; i++)
		if (f->syms[i].shndx == SHN_UNDEF && mc_is_mcount_name(f->syms[i].name))
			return true;
	return false;
}

static void scan_input(const char *path, struct op_lto *l)
{
	struct stat st;
	struct mce_file f;
	struct mce_lto_info info;

	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (mce_is_bitcode(path)) {
		l->bitcode = true;
		return;
	}
	if (mce_open(&f, path) == 0 && f.eh.e_type == ET_REL) {
		mce_lto_of(&f, &info);
		l->gcc |= info.kind == MCE_LTO_GCC;
		l->gcc_profile |= info.profile;
		l->traced |= info.profile || info.patchable || object_traced(&f);
	}
	mce_close(&f);
}

/* What the options and inputs of a link command say, gathered over the
 * command and the response files it names. */
struct scan {
	struct op_lto *l;
	bool gc_sections, gold;
	const char *ldirs[64];	/* the -L directories, for -lNAME */
	int nldirs, depth;
};

static void scan_args(struct scan *sc, int argc, char **argv);

/* Whether the bytes P[0..N) are LLVM bitcode, raw or wrapped. */
static bool bitcode_bytes(const char *p, size_t n)
{
	return n >= 4 && (!memcmp(p, "BC\xc0\xde", 4) || !memcmp(p, "\xde\xc0\x17\x0b", 4));
}

/* The member P[0..N) of an archive, scanned as a file of its own (an
 * anonymous one: nothing is made on disk).  Returns -1 if it could not
 * be. */
static int scan_member(const char *p, size_t n, struct op_lto *l)
{
	char path[64];
	int fd;

	if (bitcode_bytes(p, n)) {
		l->bitcode = true;
		return 0;
	}
	if (n < 4 || memcmp(p, ELFMAG, SELFMAG))
		return 0;
	fd = memfd_create("mcloc-member", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	int ret = -1;

	if (write(fd, p, n) == (ssize_t)n) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ret = access(path, R_OK) == 0 ? 0 : -1;
		if (!ret)
			scan_input(path, l);
	}
	close(fd);
	return ret;
}

static void uninspected(struct op_lto *l, const char *path)
{
	snprintf(l->uninspected, sizeof(l->uninspected), "%s", path);
}

/* The members of the archive PATH (gcc-ar, llvm-ar), as if each had been
 * named.  Returns false if PATH is no archive. */
static bool scan_archive(const char *path, struct op_lto *l)
{
	char magic[SARMAG];
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	Elf *ar = NULL, *m;
	struct stat st;
	bool is_ar = false;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || read(fd, magic, SARMAG) != SARMAG)
		goto out;
	/* (A thin archive's members are files libelf does not follow.) */
	if (!memcmp(magic, "!<thin>\n", SARMAG))
		uninspected(l, path);
	if (memcmp(magic, ARMAG, SARMAG))
		goto out;
	is_ar = true;
	elf_version(EV_CURRENT);
	ar = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!ar || elf_kind(ar) != ELF_K_AR) {
		uninspected(l, path);
		goto out;
	}
	for (Elf_Cmd cmd = ELF_C_READ_MMAP; (m = elf_begin(fd, cmd, ar)); ) {
		Elf_Arhdr *h = elf_getarhdr(m);
		size_t n = 0;
		char *p = elf_rawfile(m, &n);

		if (h && h->ar_name[0] != '/' && (!p || scan_member(p, n, l) < 0))
			uninspected(l, path);
		cmd = elf_next(m);
		elf_end(m);
	}
out:
	elf_end(ar);
	close(fd);
	return is_ar;
}

/* An input file of the link: an archive's members, or the file. */
static void scan_file(const char *path, struct op_lto *l)
{
	if (!scan_archive(path, l))
		scan_input(path, l);
}

/* -lNAME (-l:FILE): the archive of the -L directories the linker would
 * take, scanned; a shared library has no LTO code. */
static void scan_lib(struct scan *sc, const char *name)
{
	char path[4096];

	for (int d = 0; d < sc->nldirs; d++)
		for (int so = 1; so >= 0; so--) {
			if (name[0] == ':')
				snprintf(path, sizeof(path), "%s/%s", sc->ldirs[d], name + 1);
			else
				snprintf(path, sizeof(path), "%s/lib%s.%s", sc->ldirs[d], name,
					 so ? "so" : "a");
			if (access(path, F_OK) == 0) {
				scan_file(path, sc->l);
				return;
			}
		}
	/* (Asked of the driver only if the output has no table.) */
	if (!sc->depth && name[0] != ':' && sc->l->nsearched < 16)
		sc->l->searched[sc->l->nsearched++] = name;
}

/* The response file @PATH, split as GCC splits it (libiberty's
 * buildargv: whitespace between arguments, '...' and "..." group, a
 * backslash takes the next character as it is), scanned as arguments.
 * One that cannot be read is an input named "@PATH", as GCC takes it. */
static void scan_rsp(struct scan *sc, const char *arg)
{
	FILE *in = sc->depth < 16 ? fopen(arg + 1, "re") : NULL;
	char **v = NULL, *buf = NULL;
	size_t nv = 0, len = 0, cap = 0;
	int c, q = 0;
	bool bs = false, in_arg = false;

	if (!in) {
		scan_file(arg, sc->l);
		return;
	}
	for (;;) {
		c = getc(in);
		if (c != EOF && (bs || q || !isspace(c))) {
			if (len + 1 >= cap) {
				char *b = realloc(buf, cap = cap ? 2 * cap : 256);

				if (!b)
					break;
				buf = b;
			}
			in_arg = true;
			if (bs)
				buf[len++] = (char)c, bs = false;
			else if (c == '\\')
				bs = true;
			else if (q)
				c == q ? (void)(q = 0) : (void)(buf[len++] = (char)c);
			else if (c == '\'' || c == '"')
				q = c;
			else
				buf[len++] = (char)c;
			continue;
		}
		if (in_arg) {
			char **nvv = realloc(v, (nv + 1) * sizeof(*v));

			if (!nvv)
				break;
			v = nvv;
			v[nv] = strndup(buf ? buf : "", len);
			if (!v[nv])
				break;
			nv++;
			len = 0;
			in_arg = false;
		}
		if (c == EOF)
			break;
	}
	fclose(in);
	free(buf);
	sc->depth++;
	scan_args(sc, (int)nv, v);
	sc->depth--;
	for (size_t i = 0; i < nv; i++)
		free(v[i]);
	free(v);
}

/* The -L directories of ARGV[0..ARGC), for the -l options anywhere. */
static void scan_ldirs(struct scan *sc, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		const char *d = !strcmp(argv[i], "-L") && i + 1 < argc ? argv[++i] :
				!strncmp(argv[i], "-L", 2) ? argv[i] + 2 : NULL;

		if (d && *d && sc->nldirs < (int)(sizeof(sc->ldirs) / sizeof(*sc->ldirs)))
			sc->ldirs[sc->nldirs++] = d;
	}
}

static void scan_args(struct scan *sc, int argc, char **argv)
{
	struct op_lto *l = sc->l;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (a[0] == '@') {
			scan_rsp(sc, a);
			continue;
		}
		if (a[0] != '-') {
			scan_file(a, l);
			continue;
		}
		if (!strncmp(a, "-l", 2) && (a[2] || i + 1 < argc))
			scan_lib(sc, a[2] ? a + 2 : argv[i + 1]);
		l->user_profile |= !strcmp(a, "-p") || !strcmp(a, "-pg") ||
				   !strcmp(a, "-fprofile");
		static const char *const emit[] = { "--emit-relocs", "-q", NULL };
		static const char *const strip[] = { "--strip-all", "-s", NULL };
		static const char *const gc[] = { "--gc-sections", NULL };
		/* (-Xlinker OPT, CMake's LINKER: prefix, is OPT as ld takes it.) */
		bool xl = !l->ld && !strcmp(a, "-Xlinker") && i + 1 < argc;
		const char *o = xl ? argv[i + 1] : a;

		l->user_emit_relocs |= linker_option(o, l->ld || xl, emit);
		l->user_strip |= linker_option(o, l->ld || xl, strip) || (!l->ld && !strcmp(a, "-s"));
		sc->gc_sections |= linker_option(o, l->ld || xl, gc);
		sc->gold |= !strcmp(a, "-fuse-ld=gold");
		if (mc_ccargs_takes_value(a))
			i++;
	}
}

void op_lto_scan(int argc, char **argv, struct op_lto *l)
{
	struct scan sc = { .l = l, .gold = strstr(argv[0], "gold") != NULL };
	bool gc_sections, gold;

	*l = (struct op_lto){ .ld = mc_linker_prefix(argv[0]) >= 0 };
	l->driver = l->ld ? NULL : mc_ccargs_driver(argc, argv);
	scan_ldirs(&sc, argc - 1, argv + 1);
	scan_args(&sc, argc - 1, argv + 1);
	gc_sections = sc.gc_sections;
	gold = sc.gold;
	/* A link by ld itself runs no LTO plugin objpatch knows how to
	 * drive, a stripped output keeps no symbols for the relocations to
	 * name (ld.bfd refuses the pair), and gold fails on --emit-relocs
	 * with --gc-sections (an internal error in do_layout): those outputs
	 * are only checked for a table, and the warning says why. */
	if (l->ld)
		l->unrecorded = "a link by ld itself is not one objpatch link records LTO code of";
	else if (l->user_strip)
		l->unrecorded = "-s leaves no symbols for the LTO step's relocations to name";
	else if (gold && gc_sections && !l->user_emit_relocs)
		l->unrecorded = "gold cannot keep relocations (--emit-relocs) under --gc-sections";
	l->record = !l->unrecorded && (l->gcc_profile || l->bitcode);
}

int op_lto_args(const struct op_lto *l, char **cmd, int n)
{
	if (!l->record)
		return n;
	if (l->gcc_profile && !l->user_profile)
		cmd[n++] = "-fprofile";
	if (!l->user_emit_relocs)
		cmd[n++] = "-Wl,--emit-relocs";
	return n;
}

struct addrs {
	uint64_t *v;
	size_t n, cap;
	uint64_t base;		/* the section's address */
	bool oom;
};

static void push_addr(void *ctx, const struct mc_site *s)
{
	struct addrs *x = ctx;

	uint64_t *v = mc_grown(x->v, &x->cap, x->n, sizeof(*v), 256);

	if (!v) {
		x->oom = true;
		return;
	}
	x->v = v;
	x->v[x->n++] = x->base + s->off;
}

/* An mcount symbol of a linked image, whose .symtab may spell a
 * versioned reference as bfd does ("__fentry__@GLIBC_2.13"). */
static bool linked_mcount_name(const char *name)
{
	char base[64];
	size_t len = strcspn(name, "@");

	if (len >= sizeof(base))
		return false;
	memcpy(base, name, len);
	base[len] = 0;
	return mc_is_mcount_name(base);
}

/* The call sites of the linked image F, from the relocations that
 * --emit-relocs kept (the linker's own, allocated ones are not these). */
static int linked_sites(struct mce_file *f, const struct mc_arch *a, struct addrs *x)
{
	bool *is_mc = calloc(f->nsyms + 1, sizeof(*is_mc));
	struct mce_rel *pick = NULL;
	int ret = -1;

	if (!is_mc)
		goto oom;
	for (size_t i = 1; i < f->nsyms; i++)
		is_mc[i] = f->syms[i].type != STT_SECTION && linked_mcount_name(f->syms[i].name);
	for (size_t k = 1; f->symtab && k < f->shnum; k++) {
		struct mce_sec *rs = &f->secs[k];

		if ((rs->sh.sh_type != SHT_REL && rs->sh.sh_type != SHT_RELA) ||
		    (rs->sh.sh_flags & SHF_ALLOC) || rs->sh.sh_link != f->symtab->idx ||
		    !rs->sh.sh_info || rs->sh.sh_info >= f->shnum ||
		    !mce_sec_exec(&f->secs[rs->sh.sh_info]))
			continue;
		free(pick);
		pick = NULL;
		long n = mce_rels_pick(f, rs, is_mc, &pick);

		if (n < 0) {
			mc_error(f->path, "%s", f->err);
			goto out;
		}
		x->base = f->secs[rs->sh.sh_info].sh.sh_addr;
		if (mc_rel_sites(f, a, &f->secs[rs->sh.sh_info], pick, (size_t)n, NULL, false,
				 push_addr, x) < 0)
			goto out;
		if (x->oom)
			goto oom;
	}
	ret = 0;
	goto out;
oom:
	mc_error(f->path, "out of memory");
out:
	free(pick);
	free(is_mc);
	return ret;
}

/* Open the linked TMP (as OUT) and find its sites into X. */
static const struct mc_arch *open_sites(struct mce_file *f, const char *tmp, const char *out,
					bool writable, struct addrs *x)
{
	const struct mc_arch *a = NULL;

	if (mce_open_mode(f, tmp, writable) < 0) {
		mc_error(out, "%s", f->err);
		return NULL;
	}
	f->path = out;
	a = mc_arch_find(f->eh.e_machine, f->cls);
	if (!a)
		mc_error(out, "unsupported machine %u", f->eh.e_machine);
	else if (!mce_linked(f))
		mc_error(out, "not a linked image");
	else if (linked_sites(f, a, x) == 0)
		return a;
	return NULL;
}

/* The table object: N address-sized words in an "aw" __mcount_loc, each
 * the table's own address (a placeholder that needs, in a PIE, the same
 * relative relocation a real entry does), kept under --gc-sections.  Its
 * source and object are made in DIR, a directory private to this run
 * (mkdtemp: mode 0700, a name nobody could have prepared), so no planted
 * symlink is ever followed. */
static int table_object(const char *cc, const char *dir, size_t n, unsigned addrsize,
			char *obj, size_t len)
{
	char src[4096];
	FILE *o;

	snprintf(src, sizeof(src), "%s/t.s", dir);
	snprintf(obj, len, "%s/t.o", dir);
	o = fopen(src, "wx");
	if (!o) {
		mc_error(src, "cannot create: %s", strerror(errno));
		return -1;
	}
	fprintf(o, "\t.section " LTO_TABLE ", \"awR\", %%progbits\n"
		"\t.p2align %u\n"
		"__mcloc_lto_table:\n"
		"\t.rept %zu\n"
		"\t%s __mcloc_lto_table\n"
		"\t.endr\n"
		"\t.section .note.GNU-stack, \"\", %%progbits\n",
		addrsize == 8 ? 3 : 2, n, addrsize == 8 ? ".quad" : ".long");
	if (fclose(o) != 0) {
		mc_error(src, "cannot write: %s", strerror(errno));
		unlink(src);
		return -1;
	}
	int ret = op_assemble(cc, src, obj, "the LTO call-site table");

	unlink(src);
	return ret;
}

/* The link CMD[0..N) once more, with the table object of NSITES entries
 * made in a private directory beside TMP; every file made is removed. */
static int relink_with_table(char **cmd, int n, const char *tmp, size_t nsites,
			     unsigned addrsize)
{
	char dir[4000], obj[4096];
	int status = 1;

	if ((size_t)snprintf(dir, sizeof(dir), "%s.lto.XXXXXX", tmp) >= sizeof(dir) ||
	    !mkdtemp(dir)) {
		mc_error(tmp, "cannot make a temporary directory beside it: %s", strerror(errno));
		return 1;
	}
	/* (The driver behind a launcher such as ccache: "ccache -c" is
	 * ccache's own --cleanup.) */
	if (table_object(mc_ccargs_driver(n, cmd), dir, nsites, addrsize, obj,
			 sizeof(obj)) == 0) {
		cmd[n] = obj;
		status = mc_run(cmd, "the link command");
		cmd[n] = NULL;
	}
	unlink(obj);
	rmdir(dir);
	return status;
}

/* The N placeholders of the table object in F: where the first is. */
static int find_placeholders(struct mce_file *f, size_t n, uint64_t *at)
{
	struct mce_sec *t = mce_sec_by_name(f, LTO_TABLE);
	uint64_t as = f->addrsize;

	for (uint64_t va = t ? t->sh.sh_addr : 0; t && va + n * as <= t->sh.sh_addr +
	     t->sh.sh_size; va += as) {
		uint64_t w;
		size_t k = 0;

		while (k < n && mce_word_read(f, va + k * as, &w) == 0 && w == va)
			k++;
		if (k == n) {
			*at = va;
			return 0;
		}
	}
	return mce_fail(f, "the LTO call-site table is not in the output");
}

/* The relocation sections only --emit-relocs made (the dynamic ones are
 * allocated): emptied, so that the output is what the user asked for. */
static int drop_emitted_relocs(struct mce_file *f)
{
	for (size_t k = 1; k < f->shnum; k++) {
		struct mce_sec *rs = &f->secs[k];

		if ((rs->sh.sh_type == SHT_REL || rs->sh.sh_type == SHT_RELA) &&
		    !(rs->sh.sh_flags & SHF_ALLOC) && rs->sh.sh_size && mce_sec_empty(f, rs) < 0)
			return -1;
	}
	return 0;
}

/* With the user's own --emit-relocs, the relocations of the table object
 * (each "the table + 0", the placeholders) would contradict the words the
 * sites were written into: those at [AT, AT + N words) become R_*_NONE,
 * and the relocations of the user's own objects stay. */
static int retire_table_relocs(struct mce_file *f, const struct mc_arch *a, uint64_t at,
			       size_t n)
{
	uint64_t end = at + n * f->addrsize;

	for (size_t k = 1; k < f->shnum; k++) {
		struct mce_sec *rs = &f->secs[k];

		if ((rs->sh.sh_type != SHT_REL && rs->sh.sh_type != SHT_RELA) ||
		    (rs->sh.sh_flags & SHF_ALLOC) || !rs->sh.sh_info ||
		    rs->sh.sh_info >= f->shnum ||
		    strcmp(f->secs[rs->sh.sh_info].name, LTO_TABLE) || mce_load_rels(f, rs) < 0)
			continue;
		for (size_t i = 0; i < rs->nrels; i++)
			if (rs->rels[i].offset >= at && rs->rels[i].offset < end &&
			    mce_rel_retire(f, rs, i, a->none_reloc) < 0)
				return -1;
	}
	return 0;
}

/* The second link's output TMP: its N placeholders take its sites. */
static int fill_table(const struct op_lto *l, const char *tmp, const char *out, size_t n)
{
	struct mce_file f;
	struct addrs x = { 0 };
	const struct mc_arch *a = open_sites(&f, tmp, out, false, &x);
	uint64_t at = 0, *v = calloc(n + 1, sizeof(*v));
	int ret = 1;

	if (!a)
		goto out;
	if (!v) {
		mc_error(out, "out of memory");
		goto out;
	}
	if (x.n > n) {
		mc_error(out, "the LTO step made %zu call sites in the second link, %zu in the "
			 "first: its code is not reproducible", x.n, n);
		goto out;
	}
	memcpy(v, x.v, x.n * sizeof(*v));
	if ((n && a->relative_reloc && mce_dynrels_load(&f, a->relative_reloc) < 0) ||
	    (n && find_placeholders(&f, n, &at) < 0) || (n && mce_words_write(&f, at, n, v) < 0) ||
	    (!l->user_emit_relocs && drop_emitted_relocs(&f) < 0) ||
	    (n && l->user_emit_relocs && retire_table_relocs(&f, a, at, n) < 0) ||
	    mce_write(&f, tmp) < 0) {
		mc_error(out, "%s", f.err);
		goto out;
	}
	if (n && mc_noting())
		mc_note(out, "%zu call site%s of the LTO step's code recorded in " LTO_TABLE,
			x.n, x.n == 1 ? "" : "s");
	ret = 0;
out:
	free(v);
	free(x.v);
	mce_close(&f);
	return ret;
}

int op_lto_record(const struct op_lto *l, char **cmd, int n, const char *tmp,
		  const char *out)
{
	struct mce_file f;
	struct addrs x = { 0 };
	unsigned addrsize = 8;
	bool ok;

	if (!l->record)
		return 0;
	ok = open_sites(&f, tmp, out, false, &x) != NULL;
	addrsize = ok ? f.addrsize : 8;
	mce_close(&f);
	free(x.v);
	if (!ok)
		return 1;
	if (!x.n)	/* (op_lto_untraced says whether it should have some) */
		return fill_table(l, tmp, out, 0);
	int status = relink_with_table(cmd, n, tmp, x.n, addrsize);

	if (status)
		return status;
	return fill_table(l, tmp, out, x.n);
}

/* Whether the linked TMP has a call-site table with entries. */
static bool has_table(const char *tmp)
{
	struct mce_file f;
	bool found = false;

	if (mce_open(&f, tmp) == 0)
		for (size_t i = 1; i < f.shnum && !found; i++)
			found = f.secs[i].sh.sh_size &&
				(!strcmp(f.secs[i].name, "__mcount_loc") ||
				 !strcmp(f.secs[i].name, "__patchable_function_entries"));
	mce_close(&f);
	return found;
}

/* Where the DRIVER's search path finds FILE (-print-file-name), into
 * PATH; false if nowhere. */
static bool driver_finds(const char *driver, const char *file, char *path, size_t len)
{
	char opt[300];
	int fds[2], status;
	ssize_t n = 0, r;
	pid_t pid;

	snprintf(opt, sizeof(opt), "-print-file-name=%s", file);
	if (pipe(fds) < 0)
		return false;
	pid = fork();
	if (pid == 0) {
		char *argv[] = { (char *)driver, opt, NULL };

		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execvp(driver, argv);
		_exit(127);
	}
	close(fds[1]);
	while (pid > 0 && (size_t)n + 1 < len &&
	       (r = read(fds[0], path + n, len - 1 - (size_t)n)) > 0)
		n += r;
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return false;
	path[n] = 0;
	path[strcspn(path, "\n")] = 0;
	return path[0] == '/' && access(path, F_OK) == 0;
}

/* The -lNAME archives that only the driver's search path finds (the
 * linker takes libNAME.so first), scanned into L. */
static void scan_searched(struct op_lto *l)
{
	char file[280], path[4096];

	for (int i = 0; l->driver && i < l->nsearched; i++) {
		snprintf(file, sizeof(file), "lib%s.so", l->searched[i]);
		if (driver_finds(l->driver, file, path, sizeof(path)))
			continue;
		snprintf(file, sizeof(file), "lib%s.a", l->searched[i]);
		if (driver_finds(l->driver, file, path, sizeof(path)))
			scan_archive(path, l);
	}
}

int op_lto_untraced(const struct op_lto *lto, const char *tmp, const char *out, bool check)
{
	struct op_lto lc = *lto, *l = &lc;
	const char *why;

	if (!l->traced && l->nsearched && !has_table(tmp))
		scan_searched(l);

	/* (Bitcode keeps -pg in function attributes that only LLVM reads;
	 * what it was compiled with shows in the relocations of the code
	 * the LTO step made, which op_lto_record() records.) */
	if ((!l->traced && !l->uninspected[0]) || has_table(tmp))
		return 0;
	/* (Not known to be traced: a warning, with --check too.) */
	if (!l->traced) {
		mc_warn(out, "it has no call-site table, and the archive %s could not be "
			"inspected for inputs compiled for tracing", l->uninspected);
		return 0;
	}
	why = l->gcc_profile ? "its GCC LTO inputs were compiled with -pg" :
		"its inputs were compiled for tracing";
	if (check) {
		mc_error(out, "%s, but it has no call-site table%s%s; output removed", why,
			 l->gcc_profile && l->unrecorded ? ": " : "",
			 l->gcc_profile && l->unrecorded ? l->unrecorded : "");
		return 1;
	}
	mc_warn(out, "%s, but it has no call-site table: %s", why,
		l->gcc_profile && l->unrecorded ? l->unrecorded : "nothing in it can be traced");
	return 0;
}
