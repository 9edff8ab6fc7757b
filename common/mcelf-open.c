// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ELF layer, reading: parse once with libelf, into the layer's own
 * structs (sections, the symbol table, on demand each section's data).
 *
 * Reading maps the input privately and writably, so libelf's data buffers
 * can point straight into the mapping (native byte order) and be edited
 * without ever touching the file (see mcelf-write.c).  Also here: failing
 * with a reason, the object's byte order, and the SIGBUS guard of the
 * mappings.
 */
#include "mcelf.h"
#include "mcelf-priv.h"
#include "mcsort.h"
#include "diag.h"
#include "../base/byteorder.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

int mce_fail(struct mce_file *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f->err, sizeof(f->err), fmt, ap);
	va_end(ap);
	return -1;
}

bool mce_add_overflows(uint64_t a, uint64_t b, uint64_t limit)
{
	return a > limit || b > limit - a;
}

/* ---- byte order helpers: the object's order, never the host's ---------- */

uint32_t mce_get32(const struct mce_file *f, const void *p)
{
	return mc_get32(p, f->msb);
}

uint16_t mce_get16(const struct mce_file *f, const void *p)
{
	return mc_get16(p, f->msb);
}

void mce_put32(const struct mce_file *f, void *p, uint32_t v)
{
	mc_put32(p, f->msb, v);
}

uint64_t mce_get_addr(const struct mce_file *f, const void *p)
{
	return f->addrsize == 8 ? mc_get64(p, f->msb) : mc_get32(p, f->msb);
}

void mce_put_addr(const struct mce_file *f, void *p, uint64_t v)
{
	if (f->addrsize == 8)
		mc_put64(p, f->msb, v);
	else
		mc_put32(p, f->msb, (uint32_t)v);
}

/* ---- opening ------------------------------------------------------------ */


/* Grow the section array to CAP entries, re-pointing the internal links
 * that pointed into the old array. */
int mce_grow_secs(struct mce_file *f, size_t cap)
{
	/* Turn the internal links into indices while the old array is still
	 * alive; realloc() may free it. */
	size_t *links = malloc((f->shnum + 1) * sizeof(*links));
	size_t st = f->symtab ? f->symtab->idx : SIZE_MAX;
	size_t str = f->strtab ? f->strtab->idx : SIZE_MAX;
	size_t sx = f->symtab_shndx ? f->symtab_shndx->idx : SIZE_MAX;

	if (!links)
		return -1;
	for (size_t i = 0; i < f->shnum; i++)
		links[i] = f->secs[i].rela ? f->secs[i].rela->idx : SIZE_MAX;
	struct mce_sec *n = realloc(f->secs, cap * sizeof(*n));
	if (!n) {
		free(links);
		return -1;
	}
	memset(n + f->secs_cap, 0, (cap - f->secs_cap) * sizeof(*n));
	for (size_t i = 0; i < f->shnum; i++)
		n[i].rela = links[i] == SIZE_MAX ? NULL : n + links[i];
	f->symtab = st == SIZE_MAX ? NULL : n + st;
	f->strtab = str == SIZE_MAX ? NULL : n + str;
	f->symtab_shndx = sx == SIZE_MAX ? NULL : n + sx;
	f->secs = n;
	f->secs_cap = cap;
	free(links);
	return 0;
}

struct mce_sec *mce_new_sec(struct mce_file *f)
{
	if (f->shnum == f->secs_cap &&
	    mce_grow_secs(f, f->secs_cap ? f->secs_cap * 2 : 16) < 0)
		return NULL;
	struct mce_sec *s = &f->secs[f->shnum];

	memset(s, 0, sizeof(*s));
	s->idx = f->shnum++;
	return s;
}

struct range { uint64_t lo, hi; size_t idx; };

static int cmp_range(const void *a, const void *b, void *arg)
{
	const struct range *x = a, *y = b;

	(void)arg;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Headers and section contents must not overlap: a tool that rewrites one
 * of them would silently corrupt the other. */
static int check_overlaps(struct mce_file *f)
{
	struct range *r = calloc(f->shnum + 3, sizeof(*r));
	size_t n = 0;
	int ret = 0;

	if (!r)
		return mce_fail(f, "out of memory");
	r[n++] = (struct range){ 0, f->eh.e_ehsize, SIZE_MAX };
	r[n++] = (struct range){ f->eh.e_shoff,
				 f->eh.e_shoff + (uint64_t)f->shnum * f->eh.e_shentsize,
				 SIZE_MAX - 1 };
	if (f->eh.e_phnum)
		r[n++] = (struct range){ f->eh.e_phoff,
					 f->eh.e_phoff + (uint64_t)f->eh.e_phnum * f->eh.e_phentsize,
					 SIZE_MAX - 2 };
	for (size_t i = 1; i < f->shnum; i++) {
		const GElf_Shdr *sh = &f->secs[i].sh;

		if (sh->sh_type == SHT_NOBITS || sh->sh_size == 0)
			continue;
		r[n++] = (struct range){ sh->sh_offset, sh->sh_offset + sh->sh_size, i };
	}
	mc_sort_nearly(r, n, sizeof(*r), cmp_range, NULL);
	for (size_t i = 1; i < n && !ret; i++) {
		if (r[i].lo >= r[i - 1].hi)
			continue;
		/* The program header table may sit inside a segment that a
		 * section also covers; only overlaps between sections, the ELF
		 * header and the section header table are errors. */
		if (r[i].idx == SIZE_MAX - 2 || r[i - 1].idx == SIZE_MAX - 2)
			continue;
		const char *a = r[i - 1].idx < f->shnum ? f->secs[r[i - 1].idx].name
			       : r[i - 1].idx == SIZE_MAX ? "ELF header"
							   : "section header table";
		const char *b = r[i].idx < f->shnum ? f->secs[r[i].idx].name
			       : r[i].idx == SIZE_MAX ? "ELF header"
						       : "section header table";
		ret = mce_fail(f, "%s overlaps %s", b, a);
	}
	free(r);
	return ret;
}

/* Check the symbol table's shape and find its data; the symbols themselves
 * are read by fill_symbols(), or one at a time by mce_sym_peek(). */
static int prepare_symbols(struct mce_file *f)
{
	struct mce_sec *st = f->symtab;

	if (!st)
		return 0;
	if (st->sh.sh_link >= f->shnum ||
	    f->secs[st->sh.sh_link].sh.sh_type != SHT_STRTAB)
		return mce_fail(f, "%s: bad string table link %u", st->name,
			    st->sh.sh_link);
	f->strtab = &f->secs[st->sh.sh_link];
	f->symdata = mce_sec_data(f, st);
	if (!f->symdata)
		return -1;
	size_t esz = gelf_fsize(f->elf, ELF_T_SYM, 1, EV_CURRENT);
	if (st->sh.sh_entsize != esz)
		return mce_fail(f, "%s: bad entry size %llu", st->name,
			    (unsigned long long)st->sh.sh_entsize);
	f->nsyms = st->sh.sh_size / esz;
	if (f->symtab_shndx) {
		f->symxdata = mce_sec_data(f, f->symtab_shndx);
		if (!f->symxdata)
			return -1;
		if (f->symtab_shndx->sh.sh_size / 4 < f->nsyms || f->symxdata->d_size / 4 < f->nsyms)
			return mce_fail(f, "%s: shorter than the symbol table",
				    f->symtab_shndx->name);
	}
	if (st->sh.sh_info > f->nsyms)
		return mce_fail(f, "%s: first global index %u out of range",
			    st->name, st->sh.sh_info);
	f->strdata = mce_sec_data(f, f->strtab);
	if (!f->strdata)
		return -1;
	/* A table ending in NUL makes any offset inside it a whole name. */
	f->strtab_ends = f->strdata->d_size &&
		!((const char *)f->strdata->d_buf)[f->strdata->d_size - 1];
	return 0;
}

/* Symbol I from the table itself, checked as fill_symbols() checks it
 * (its name only when NAME). */
static int read_symbol(struct mce_file *f, size_t i, struct mce_sym *m, bool name)
{
	GElf_Sym s;
	Elf32_Word x = 0;
	const Elf_Data *sd = f->strdata;

	/* The data are in memory representation (prepare_symbols() checked
	 * the entry size), so read the struct itself: gelf_getsymshndx()
	 * costs a third of a pass over a million symbols. */
	if (f->symdata->d_type != ELF_T_SYM || (i + 1) * f->symtab->sh.sh_entsize > f->symdata->d_size)
		return mce_fail(f, "%s: cannot read symbol %zu", f->symtab->name, i);
	if (f->cls == ELFCLASS64) {
		const Elf64_Sym *y = (const Elf64_Sym *)f->symdata->d_buf + i;

		s = (GElf_Sym){ y->st_name, y->st_info, y->st_other, y->st_shndx, y->st_value,
				y->st_size };
	} else {
		const Elf32_Sym *y = (const Elf32_Sym *)f->symdata->d_buf + i;

		s = (GElf_Sym){ y->st_name, y->st_info, y->st_other, y->st_shndx, y->st_value,
				y->st_size };
	}
	if (s.st_shndx == SHN_XINDEX && f->symxdata)
		x = ((const Elf32_Word *)f->symxdata->d_buf)[i];
	/* (What elf_strptr() checks, without its per-call lookups: a
	 * million symbols are read this way.) */
	m->name = NULL;
	if (name) {
		if (s.st_name >= sd->d_size ||
		    (!f->strtab_ends &&
		     !memchr((const char *)sd->d_buf + s.st_name, 0, sd->d_size - s.st_name)))
			return mce_fail(f, "symbol %zu: name offset %u out of range", i,
					s.st_name);
		m->name = (const char *)sd->d_buf + s.st_name;
	}
	m->value = s.st_value;
	m->size = s.st_size;
	m->bind = GELF_ST_BIND(s.st_info);
	m->type = GELF_ST_TYPE(s.st_info);
	m->other = s.st_other;
	m->raw_shndx = s.st_shndx;
	m->st_name = s.st_name;
	m->shndx = s.st_shndx == SHN_XINDEX ? x : s.st_shndx;
	if (m->shndx >= f->shnum && (m->shndx < SHN_LORESERVE || s.st_shndx == SHN_XINDEX)) {
		if (!name)
			return read_symbol(f, i, m, true) < 0 ? -1
				: mce_fail(f, "symbol %zu (%s): section index %u out of range",
					   i, m->name, m->shndx);
		return mce_fail(f, "symbol %zu (%s): section index %u out of range",
			    i, m->name, m->shndx);
	}
	return 0;
}

static int fill_symbols(struct mce_file *f)
{
	if (!f->symtab)
		return 0;
	f->syms = calloc(f->nsyms ? f->nsyms : 1, sizeof(*f->syms));
	if (!f->syms)
		return mce_fail(f, "out of memory");
	for (size_t i = 0; i < f->nsyms; i++)
		if (read_symbol(f, i, &f->syms[i], true) < 0)
			return -1;
	return 0;
}

int mce_syms_need(struct mce_file *f)
{
	if (!f->syms_lazy)
		return 0;
	if (fill_symbols(f) < 0) {
		free(f->syms);
		f->syms = NULL;
		return -1;
	}
	f->syms_lazy = false;
	return 0;
}

int mce_sym_peek(struct mce_file *f, size_t i, struct mce_sym *m)
{
	if (i >= f->nsyms)
		return mce_fail(f, "no symbol %zu", i);
	if (!f->syms_lazy) {
		*m = f->syms[i];
		return 0;
	}
	return read_symbol(f, i, m, true);
}

/* (One body per class: the loop is the whole cost.) */
#define FUNCS_NEXT(SYM, ST_TYPE)							\
	for (const SYM *y = (const SYM *)f->symdata->d_buf; i < end && k < max; i++) { \
		uint32_t shndx = y[i].st_shndx;						\
										\
		/* (Every symbol's index is checked, as read_symbol() does.) */	\
		if (shndx == SHN_XINDEX && f->symxdata)					\
			shndx = ((const Elf32_Word *)f->symxdata->d_buf)[i];		\
		else if (shndx >= SHN_LORESERVE)					\
			continue;	/* SHN_ABS, SHN_COMMON: in no section */	\
		if (shndx >= f->shnum)							\
			goto bad;							\
		if (ST_TYPE(y[i].st_info) != STT_FUNC || shndx == SHN_UNDEF)		\
			continue;							\
		out[k++] = (struct mce_func){ y[i].st_value, y[i].st_size, shndx };	\
	}

long mce_funcs_next(struct mce_file *f, size_t *at, struct mce_func *out, size_t max)
{
	size_t i = *at, end = f->nsyms, k = 0;
	struct mce_sym m;

	if (!f->syms_lazy) {
		for (; i < end && k < max; i++) {
			const struct mce_sym *y = &f->syms[i];

			if (y->type == STT_FUNC && y->shndx && y->shndx < f->shnum)
				out[k++] = (struct mce_func){ y->value, y->size, y->shndx };
		}
		*at = i;
		return (long)k;
	}
	if (i >= end)
		return 0;
	if (f->symdata->d_type != ELF_T_SYM || end * f->symtab->sh.sh_entsize > f->symdata->d_size)
		return mce_fail(f, "%s: cannot read its symbols", f->symtab->name);
	if (i == 0)
		i = 1;	/* (the null symbol) */
	if (f->cls == ELFCLASS64) {
		FUNCS_NEXT(Elf64_Sym, ELF64_ST_TYPE)
	} else {
		FUNCS_NEXT(Elf32_Sym, ELF32_ST_TYPE)
	}
	*at = i;
	return (long)k;
bad:
	/* read_symbol() words the diagnostic, with the name. */
	return read_symbol(f, i, &m, true) < 0 ? -1
		: mce_fail(f, "symbol %zu: section index out of range", i);
}

int mce_open(struct mce_file *f, const char *path)
{
	return mce_open_mode(f, path, false);
}

int mce_open_mode(struct mce_file *f, const char *path, bool writable)
{
	return mce_open_flags(f, path, writable ? MCE_OPEN_WRITABLE : 0);
}

/*
 * A mapped file that shrinks under us (another process truncating it)
 * turns our next read of the lost pages into SIGBUS.  That must not be a
 * crash: the handler says which file, in the usual one-line form, and
 * exits 1.  Nothing has been written by then (the output is streamed from
 * the mapping by writev(), which fails with EFAULT instead), so the input
 * is as it was.
 *
 * A signal handler is process-wide by nature, so the open files are found
 * through one process-wide list, linked through the files themselves: any
 * number of files may be open at once.  SIGBUS from a mapping is
 * synchronous (raised by the thread's own read of it), and no read of a
 * mapping happens while the list is being changed, so the handler never
 * sees it half-linked.  The ELF layer is used by one thread at a time.
 */
static struct mce_file *guarded;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	static const char what[] = ": error: ";
	static const char why[] = ": the file shrank while it was being read\n";
	const uint8_t *at = si->si_addr;

	(void)uc;
	for (const struct mce_file *g = guarded; g; g = g->guard_next) {
		if (at >= g->map && at < g->map + g->size) {
			struct iovec v[] = {
				{ (void *)g->path, strlen(g->path) }, { (void *)what, sizeof(what) - 1 },
				{ (void *)mc_tool, strlen(mc_tool) }, { (void *)why, sizeof(why) - 1 },
			};
			ssize_t unused = writev(STDERR_FILENO, v, 4);

			(void)unused;
			_exit(1);
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void mce_guard_map(struct mce_file *f)
{
	/* Installing the same handler again is harmless; once is enough. */
	if (!guarded) {
		struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, NULL);
	}
	f->guard_next = guarded;
	guarded = f;
}

void mce_unguard_map(struct mce_file *f)
{
	for (struct mce_file **p = &guarded; *p; p = &(*p)->guard_next)
		if (*p == f) {
			*p = f->guard_next;
			return;
		}
}

/* A view is a file with only its map, path and size set: the guard's
 * list takes it as it takes an image. */
struct mce_view {
	struct mce_file f;
};

const void *mce_view_open(struct mce_view **vp, const char *path, int fd, size_t size)
{
	struct mce_view *v = calloc(1, sizeof(*v));
	void *map;

	*vp = NULL;
	if (!v)
		return NULL;
	map = mmap(NULL, size ? size : 1, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		int e = errno;

		free(v);
		errno = e;
		return NULL;
	}
	v->f.path = path;
	v->f.map = map;
	v->f.size = size;
	v->f.fd = -1;
	mce_guard_map(&v->f);
	*vp = v;
	return map;
}

void mce_view_close(struct mce_view *v)
{
	if (!v)
		return;
	mce_unguard_map(&v->f);
	munmap(v->f.map, v->f.size ? v->f.size : 1);
	free(v);
}

int mce_open_flags(struct mce_file *f, const char *path, unsigned flags)
{
	bool writable = flags & MCE_OPEN_WRITABLE;

	memset(f, 0, sizeof(*f));
	f->path = path;
	f->fd = -1;
	f->writable = writable;

	/* libelf's version handshake is per process, and idempotent. */
	if (elf_version(EV_CURRENT) == EV_NONE)
		return mce_fail(f, "libelf is out of date");
	/* O_NONBLOCK: opening a FIFO would otherwise wait for a writer
	 * before its type could be checked (it has no effect on the regular
	 * files that pass the check). */
	f->fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
	if (f->fd < 0)
		return mce_fail(f, "cannot open: %s", strerror(errno));
	if (fstat(f->fd, &f->st) < 0)
		return mce_fail(f, "cannot stat: %s", strerror(errno));
	if (S_ISDIR(f->st.st_mode))
		return mce_fail(f, "is a directory");
	if (!S_ISREG(f->st.st_mode))
		return mce_fail(f, "not a regular file");
	if (f->st.st_size == 0)
		return mce_fail(f, "empty file");
	f->size = (size_t)f->st.st_size;
	/* Mapped privately and writably, whatever the size: edits never reach
	 * the file, and the pages come straight from the page cache.  Reading
	 * into memory instead cost a short-lived tool more (fresh pages to
	 * fault in, clear and copy into: 40-60 us of a recordmcount run). */
	f->map = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, f->fd, 0);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		return mce_fail(f, "cannot map: %s", strerror(errno));
	}
	mce_guard_map(f);
	if (f->size >= 8 && !memcmp(f->map, "!<arch>\n", 8))
		return mce_fail(f, "is an ar archive; run on its member objects");
	if (f->size < SELFMAG || memcmp(f->map, ELFMAG, SELFMAG))
		return mce_fail(f, "not an ELF file");
	if (f->size < EI_NIDENT)
		return mce_fail(f, "truncated: too short for an ELF header");
	if (f->map[EI_CLASS] != ELFCLASS32 && f->map[EI_CLASS] != ELFCLASS64)
		return mce_fail(f, "unknown ELF class %u", f->map[EI_CLASS]);
	if (f->map[EI_DATA] != ELFDATA2LSB && f->map[EI_DATA] != ELFDATA2MSB)
		return mce_fail(f, "unknown ELF byte order %u", f->map[EI_DATA]);
	if (f->map[EI_VERSION] != EV_CURRENT)
		return mce_fail(f, "unknown ELF version %u", f->map[EI_VERSION]);
	f->cls = f->map[EI_CLASS];
	f->msb = f->map[EI_DATA] == ELFDATA2MSB;
	f->addrsize = f->cls == ELFCLASS64 ? 8 : 4;
	size_t ehsz = f->cls == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	if (f->size < ehsz)
		return mce_fail(f, "truncated: too short for an ELF header");

	f->elf = elf_memory((char *)f->map, f->size);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF)
		return mce_fail(f, "not an ELF file: %s", elf_errmsg(-1));
	if (!gelf_getehdr(f->elf, &f->eh))
		return mce_fail(f, "bad ELF header: %s", elf_errmsg(-1));
	f->mips64 = f->eh.e_machine == EM_MIPS && f->cls == ELFCLASS64;
	if (f->eh.e_ehsize != ehsz)
		return mce_fail(f, "bad ELF header size %u", f->eh.e_ehsize);

	size_t shentsz = f->cls == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	if (f->eh.e_shoff == 0)
		return mce_fail(f, "no section header table");
	if (f->eh.e_shentsize != shentsz)
		return mce_fail(f, "bad section header size %u", f->eh.e_shentsize);
	/* libelf reports a table that runs past the end as "no sections";
	 * say what is really wrong. */
	if (f->eh.e_shnum &&
	    mce_add_overflows(f->eh.e_shoff, (uint64_t)f->eh.e_shnum * shentsz, f->size))
		return mce_fail(f, "truncated: section header table (%u entries at 0x%llx) "
			    "runs past the end of the file (0x%zx)", f->eh.e_shnum,
			    (unsigned long long)f->eh.e_shoff, f->size);
	if (elf_getshdrnum(f->elf, &f->shnum) < 0)
		return mce_fail(f, "bad section count: %s", elf_errmsg(-1));
	if (f->shnum == 0)
		return mce_fail(f, "no sections");
	if (mce_add_overflows(f->eh.e_shoff, (uint64_t)f->shnum * shentsz, f->size))
		return mce_fail(f, "truncated: section header table (%zu entries at 0x%llx) "
			    "runs past the end of the file", f->shnum,
			    (unsigned long long)f->eh.e_shoff);
	if (f->eh.e_phnum &&
	    mce_add_overflows(f->eh.e_phoff, (uint64_t)f->eh.e_phnum * f->eh.e_phentsize, f->size))
		return mce_fail(f, "truncated: program header table runs past the end of the file");
	if (elf_getshdrstrndx(f->elf, &f->shstrndx) < 0)
		return mce_fail(f, "bad section name table index: %s", elf_errmsg(-1));
	if (f->shstrndx == 0 || f->shstrndx >= f->shnum)
		return mce_fail(f, "section name table index %zu out of range", f->shstrndx);

	size_t n = f->shnum;
	f->shnum = 0;
	if (mce_grow_secs(f, n + 8) < 0)
		return mce_fail(f, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct mce_sec *s = mce_new_sec(f);

		s->scn = elf_getscn(f->elf, i);
		if (!s->scn || !gelf_getshdr(s->scn, &s->sh))
			return mce_fail(f, "cannot read section header %zu: %s", i,
				    elf_errmsg(-1));
	}
	if (f->secs[f->shstrndx].sh.sh_type != SHT_STRTAB)
		return mce_fail(f, "section name table is not a string table");
	for (size_t i = 0; i < n; i++) {
		struct mce_sec *s = &f->secs[i];
		const GElf_Shdr *sh = &s->sh;

		s->name = elf_strptr(f->elf, f->shstrndx, sh->sh_name);
		if (!s->name)
			return mce_fail(f, "section %zu: name offset %u out of range", i,
				    sh->sh_name);
		if (i == 0)
			continue;
		if (sh->sh_type != SHT_NOBITS &&
		    mce_add_overflows(sh->sh_offset, sh->sh_size, f->size))
			return mce_fail(f, "truncated or oversized: section %s (0x%llx bytes at "
				    "0x%llx) runs past the end of the file (0x%zx)", s->name,
				    (unsigned long long)sh->sh_size,
				    (unsigned long long)sh->sh_offset, f->size);
		if (sh->sh_addralign & (sh->sh_addralign - 1))
			return mce_fail(f, "section %s: alignment %llu is not a power of two",
				    s->name, (unsigned long long)sh->sh_addralign);
		/* An assembler pads a relocatable object's file to each
		 * section's alignment, so a section with bytes can never be
		 * aligned to more than the file's size.  (A linked image
		 * aligns addresses, not file offsets: no such rule there.) */
		if (f->eh.e_type == ET_REL && sh->sh_type != SHT_NOBITS && sh->sh_size &&
		    sh->sh_addralign > f->size)
			return mce_fail(f, "section %s: alignment %llu is larger than the file",
				    s->name, (unsigned long long)sh->sh_addralign);
		switch (sh->sh_type) {
		case SHT_REL:
		case SHT_RELA: {
			Elf_Type t = sh->sh_type == SHT_RELA ? ELF_T_RELA : ELF_T_REL;

			s->is_rela = sh->sh_type == SHT_RELA;
			if (sh->sh_entsize != gelf_fsize(f->elf, t, 1, EV_CURRENT))
				return mce_fail(f, "section %s: bad relocation entry size %llu",
					    s->name, (unsigned long long)sh->sh_entsize);
			if (sh->sh_link >= n)
				return mce_fail(f, "section %s: symbol table link %u out of range",
					    s->name, sh->sh_link);
			/* Dynamic relocations of linked images relocate the
			 * whole image; sh_info 0 is normal there. */
			if (sh->sh_info >= n)
				return mce_fail(f, "section %s: target section %u out of range",
					    s->name, sh->sh_info);
			break;
		}
		case SHT_SYMTAB:
			if (f->symtab)
				return mce_fail(f, "more than one symbol table");
			f->symtab = s;
			break;
		case SHT_SYMTAB_SHNDX:
			f->symtab_shndx = s;
			break;
		}
	}
	/* Link relocation sections to their targets (after the loop: a
	 * target may come after its relocations). */
	for (size_t i = 1; i < n; i++) {
		struct mce_sec *s = &f->secs[i];

		if ((s->sh.sh_type == SHT_REL || s->sh.sh_type == SHT_RELA) &&
		    s->sh.sh_info && !(s->sh.sh_flags & SHF_ALLOC) &&
		    !f->secs[s->sh.sh_info].rela)
			f->secs[s->sh.sh_info].rela = s;
	}
	if (f->symtab_shndx && f->symtab_shndx->sh.sh_link != (f->symtab ? f->symtab->idx : 0))
		return mce_fail(f, "%s does not belong to the symbol table",
			    f->symtab_shndx->name);
	if (check_overlaps(f) < 0)
		return -1;
	if (prepare_symbols(f) < 0)
		return -1;
	if (flags & MCE_OPEN_LAZY_SYMS) {
		f->syms_lazy = f->symtab != NULL;
		return 0;
	}
	return fill_symbols(f);
}

void mce_close(struct mce_file *f)
{
	for (size_t i = 0; f->secs && i < f->shnum; i++) {
		free(f->secs[i].rels);
		free(f->secs[i].byoff);
		if (f->secs[i].owned) {
			free(f->secs[i].owned);
			free(f->secs[i].data);
		}
		if (f->secs[i].is_new)
			free((char *)f->secs[i].name);
	}
	free(f->secs);
	free(f->syms);
	free(f->secsym);
	free(f->bounds);
	free(f->byaddr);
	free(f->dynrels);
	for (size_t i = 0; i < f->ngarbage; i++)
		free(f->garbage[i]);
	free(f->garbage);
	if (f->elf)
		elf_end(f->elf);
	if (f->map) {
		mce_unguard_map(f);
		munmap(f->map, f->size);
	}
	if (f->fd >= 0)
		close(f->fd);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

Elf_Data *mce_sec_data(struct mce_file *f, struct mce_sec *s)
{
	if (s->data)
		return s->data;
	if (!s->scn) {
		mce_fail(f, "section %s has no data", s->name);
		return NULL;
	}
	s->data = elf_getdata(s->scn, NULL);
	if (!s->data) {
		/* A section of size 0 has no data buffer at all. */
		if (s->sh.sh_size == 0 || s->sh.sh_type == SHT_NOBITS) {
			static Elf_Data empty;
			empty.d_type = ELF_T_BYTE;
			return &empty;
		}
		mce_fail(f, "cannot read section %s: %s", s->name, elf_errmsg(-1));
		return NULL;
	}
	return s->data;
}

struct mce_sec *mce_sec_by_name(struct mce_file *f, const char *name)
{
	for (size_t i = 1; i < f->shnum; i++)
		if (!strcmp(f->secs[i].name, name))
			return &f->secs[i];
	return NULL;
}

/* The size of one REL (or RELA) entry of F's class, in memory as on disk. */
