// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ELF layer: parse once with libelf, change in memory, write once.
 *
 * Reading maps the input privately and writably, so libelf's data buffers
 * can point straight into the mapping (native byte order) and be edited
 * without ever touching the file.  Writing lays the sections out again and
 * streams them with writev() into a temporary file that is renamed over the
 * target, the way elfutils' strip does it, so a failure at any point leaves
 * the target byte-identical.
 */
#include "mcelf.h"
#include "mcelf-priv.h"
#include "mcsort.h"
#include "diag.h"

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
	const uint8_t *b = p;

	if (f->msb)
		return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
		       (uint32_t)b[2] << 8 | b[3];
	return (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[1] << 8 | b[0];
}

uint16_t mce_get16(const struct mce_file *f, const void *p)
{
	const uint8_t *b = p;

	return f->msb ? (uint16_t)(b[0] << 8 | b[1]) : (uint16_t)(b[1] << 8 | b[0]);
}

void mce_put32(const struct mce_file *f, void *p, uint32_t v)
{
	uint8_t *b = p;

	for (int i = 0; i < 4; i++)
		b[f->msb ? 3 - i : i] = (uint8_t)(v >> (8 * i));
}

/* (memcpy and a byte swap: the compiler makes one load or store of each.) */
#define HOST_MSB (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)

uint64_t mce_get_addr(const struct mce_file *f, const void *p)
{
	if (f->addrsize == 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		return f->msb == HOST_MSB ? v : __builtin_bswap64(v);
	}
	uint32_t v;

	memcpy(&v, p, 4);
	return f->msb == HOST_MSB ? v : __builtin_bswap32(v);
}

void mce_put_addr(const struct mce_file *f, void *p, uint64_t v)
{
	if (f->addrsize == 8) {
		if (f->msb != HOST_MSB)
			v = __builtin_bswap64(v);
		memcpy(p, &v, 8);
		return;
	}
	uint32_t w = (uint32_t)v;

	if (f->msb != HOST_MSB)
		w = __builtin_bswap32(w);
	memcpy(p, &w, 4);
}

/* ---- relocation info ---------------------------------------------------- */

/*
 * MIPS64 does not use the ELF64_R_SYM/ELF64_R_TYPE split: r_info is a
 * 32-bit symbol index followed by four bytes (ssym, type3, type2, type) in
 * file order.  libelf hands us r_info as a 64-bit integer read in the
 * object's byte order, so the fields land in different bits for LE and BE.
 */
static void decode_info(const struct mce_file *f, uint64_t info,
			struct mce_rel *r)
{
	r->type2 = r->type3 = 0;
	if (f->mips64 && !f->msb) {
		r->sym = (uint32_t)info;
		r->type3 = (uint8_t)(info >> 40);
		r->type2 = (uint8_t)(info >> 48);
		r->type = (uint8_t)(info >> 56);
	} else if (f->mips64) {
		r->sym = (uint32_t)(info >> 32);
		r->type3 = (uint8_t)(info >> 16);
		r->type2 = (uint8_t)(info >> 8);
		r->type = (uint8_t)info;
	} else {
		/* gelf widens a 32-bit r_info to the 64-bit layout. */
		r->sym = (uint32_t)GELF_R_SYM(info);
		r->type = (uint32_t)GELF_R_TYPE(info);
	}
}

static uint64_t encode_info(const struct mce_file *f, const struct mce_rel *r)
{
	if (f->mips64 && !f->msb)
		return (uint64_t)r->sym | (uint64_t)r->type3 << 40 |
		       (uint64_t)r->type2 << 48 | (uint64_t)(r->type & 0xff) << 56;
	if (f->mips64)
		return (uint64_t)r->sym << 32 | (uint64_t)r->type3 << 16 |
		       (uint64_t)r->type2 << 8 | (r->type & 0xff);
	return GELF_R_INFO(r->sym, r->type);
}

/* r_info as stored in the object's own structures (not gelf's). */
static uint64_t raw_info(const struct mce_file *f, const struct mce_rel *r)
{
	if (f->cls == ELFCLASS32)
		return ELF32_R_INFO(r->sym, r->type);
	return encode_info(f, r);
}

void mce_rel_to_gelf(const struct mce_file *f, const struct mce_rel *r,
		     GElf_Rela *out)
{
	out->r_offset = r->offset;
	out->r_info = encode_info(f, r);
	out->r_addend = r->addend;
}

/* ---- opening ------------------------------------------------------------ */


/* Grow the section array to CAP entries, re-pointing the internal links
 * that pointed into the old array. */
static int grow_secs(struct mce_file *f, size_t cap)
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

static struct mce_sec *new_sec(struct mce_file *f)
{
	if (f->shnum == f->secs_cap &&
	    grow_secs(f, f->secs_cap ? f->secs_cap * 2 : 16) < 0)
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

static void guard_map(struct mce_file *f)
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

static void unguard_map(struct mce_file *f)
{
	for (struct mce_file **p = &guarded; *p; p = &(*p)->guard_next)
		if (*p == f) {
			*p = f->guard_next;
			return;
		}
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
	f->fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
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
	guard_map(f);
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
	if (grow_secs(f, n + 8) < 0)
		return mce_fail(f, "out of memory");
	for (size_t i = 0; i < n; i++) {
		struct mce_sec *s = new_sec(f);

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
		unguard_map(f);
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
static size_t rel_size(const struct mce_file *f, bool rela)
{
	if (f->cls == ELFCLASS64)
		return rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
	return rela ? sizeof(Elf32_Rela) : sizeof(Elf32_Rel);
}

/* Whether D holds RS's entries in this host's layout, N of them at least. */
static bool rels_in_place(const struct mce_file *f, const struct mce_sec *rs,
			  const Elf_Data *d, size_t n)
{
	return d->d_type == (rs->is_rela ? ELF_T_RELA : ELF_T_REL) &&
	       n <= d->d_size / rel_size(f, rs->is_rela);
}

/*
 * Relocation I of RS (data D), decoded and checked.  libelf has already
 * put D in this host's layout, so the usual classes are read in place:
 * gelf_getrela()'s checks and copies per entry were a third of the time
 * of a scan of a large .rela.text.
 */
static int read_rel(struct mce_file *f, const struct mce_sec *rs, const Elf_Data *d,
		    size_t i, const struct mce_sec *tgt, struct mce_rel *r)
{
	uint64_t info;
	bool rela = rs->is_rela;
	bool in_place = rels_in_place(f, rs, d, i + 1) &&
			(uintptr_t)d->d_buf % (f->cls == ELFCLASS64 ? _Alignof(Elf64_Rela)
								    : _Alignof(Elf32_Rela)) == 0;

	/* Entry I as the in-memory types REL_T/RELA_T, into R and INFO. */
#define READ_IN_PLACE(REL_T, RELA_T, INFO)					\
	do {									\
		if (rela) {							\
			const RELA_T *e_ = (const RELA_T *)d->d_buf + i;	\
			r->offset = e_->r_offset;				\
			(INFO) = e_->r_info;					\
			r->addend = e_->r_addend;				\
		} else {							\
			const REL_T *e_ = (const REL_T *)d->d_buf + i;		\
			r->offset = e_->r_offset;				\
			(INFO) = e_->r_info;					\
		}								\
	} while (0)

	r->addend = 0;
	if (in_place && f->cls == ELFCLASS64) {
		READ_IN_PLACE(Elf64_Rel, Elf64_Rela, info);
	} else if (in_place) {
		Elf32_Word w;

		READ_IN_PLACE(Elf32_Rel, Elf32_Rela, w);
		/* As gelf widens it. */
		info = GELF_R_INFO(ELF32_R_SYM(w), ELF32_R_TYPE(w));
	} else {
		GElf_Rela ra;
		GElf_Rel rl;

		if (rela ? !gelf_getrela((Elf_Data *)d, (int)i, &ra) :
			   !gelf_getrel((Elf_Data *)d, (int)i, &rl))
			return mce_fail(f, "%s: cannot read relocation %zu", rs->name, i);
		r->offset = rela ? ra.r_offset : rl.r_offset;
		info = rela ? ra.r_info : rl.r_info;
		if (rela)
			r->addend = ra.r_addend;
	}
#undef READ_IN_PLACE
	decode_info(f, info, r);
	if (f->symtab && rs->sh.sh_link == f->symtab->idx && r->sym >= f->nsyms)
		return mce_fail(f, "%s: relocation %zu: symbol index %u out of range",
			    rs->name, i, r->sym);
	if (tgt && tgt->sh.sh_type != SHT_NOBITS && r->offset >= tgt->sh.sh_size)
		return mce_fail(f, "%s: relocation %zu: offset 0x%llx outside %s (size 0x%llx)",
			    rs->name, i, (unsigned long long)r->offset, tgt->name,
			    (unsigned long long)tgt->sh.sh_size);
	return 0;
}

/* The section RS's offsets are in, when they are offsets into one. */
static const struct mce_sec *rel_target(const struct mce_file *f, const struct mce_sec *rs)
{
	return rs->sh.sh_info && !(rs->sh.sh_flags & SHF_ALLOC) ? &f->secs[rs->sh.sh_info] : NULL;
}

int mce_load_rels(struct mce_file *f, struct mce_sec *rs)
{
	Elf_Data *d;
	const struct mce_sec *tgt = rel_target(f, rs);

	if (rs->rels_loaded)
		return 0;
	d = mce_sec_data(f, rs);
	if (!d)
		return -1;
	rs->nrels = rs->sh.sh_size / rs->sh.sh_entsize;
	rs->rels = calloc(rs->nrels ? rs->nrels : 1, sizeof(*rs->rels));
	if (!rs->rels)
		return mce_fail(f, "out of memory");
	for (size_t i = 0; i < rs->nrels; i++)
		if (read_rel(f, rs, d, i, tgt, &rs->rels[i]) < 0)
			return -1;
	rs->rels_loaded = true;
	return 0;
}

/*
 * The symbol index and offset of entry P of a REL/RELA section in this
 * host's layout: all that the scan for mcount calls needs, read without
 * decoding the rest.
 */
static uint32_t raw_sym_off(const struct mce_file *f, const uint8_t *p, uint64_t *off)
{
	if (f->cls == ELFCLASS64) {
		uint64_t o, info;

		memcpy(&o, p, sizeof(o));
		memcpy(&info, p + sizeof(o), sizeof(info));
		*off = o;
		return (uint32_t)(f->mips64 && !f->msb ? info : info >> 32);
	}
	uint32_t o, info;

	memcpy(&o, p, sizeof(o));
	memcpy(&info, p + sizeof(o), sizeof(info));
	*off = o;
	return info >> 8;
}

long mce_rels_pick(struct mce_file *f, struct mce_sec *rs, const bool *want,
		   struct mce_rel **out)
{
	const struct mce_sec *tgt = rel_target(f, rs);
	struct mce_rel *v;
	size_t n = 0, nrels = rs->nrels;
	Elf_Data *d = NULL;

	*out = NULL;
	if (!f->symtab || rs->sh.sh_link != f->symtab->idx)
		return mce_fail(f, "%s: relocations not against the symbol table", rs->name);
	if (!rs->rels_loaded) {
		if (!(d = mce_sec_data(f, rs)))
			return -1;
		nrels = rs->sh.sh_size / rs->sh.sh_entsize;
		/* Not in this host's layout: decode them all the usual way. */
		if (!rels_in_place(f, rs, d, nrels)) {
			if (mce_load_rels(f, rs) < 0)
				return -1;
			d = NULL;
		}
	}

	/*
	 * Room for every entry, filled by one pass.  Only the pages the
	 * picked few touch are ever faulted in (a block this size is fresh
	 * memory, from the tools' allocator as from glibc's), and a second,
	 * counting pass over the data would cost more than the address space.
	 */
	v = malloc((nrels ? nrels : 1) * sizeof(*v));
	if (!v)
		return mce_fail(f, "out of memory");
	if (!d) {
		for (size_t i = 0; i < nrels; i++)
			if (want[rs->rels[i].sym])
				v[n++] = rs->rels[i];
		*out = v;
		return (long)n;
	}

	/* The scan the kernel's recordmcount does: a load and a compare per
	 * entry, checked as mce_load_rels() checks it; only picks are decoded. */
	uint64_t limit = tgt && tgt->sh.sh_type != SHT_NOBITS ? tgt->sh.sh_size : UINT64_MAX;
	size_t stride = rel_size(f, rs->is_rela);
	const uint8_t *p = d->d_buf;

	for (size_t i = 0; i < nrels; i++, p += stride) {
		uint64_t off;
		uint32_t sym = raw_sym_off(f, p, &off);

		if (sym >= f->nsyms || off >= limit || want[sym]) {
			/* read_rel() says what is wrong with a bad one. */
			if (read_rel(f, rs, d, i, tgt, &v[n]) < 0) {
				free(v);
				return -1;
			}
			n += want[v[n].sym];
		}
	}
	*out = v;
	return (long)n;
}

static int cmp_rel_off(const void *a, const void *b, void *arg)
{
	const struct mce_rel *r = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (r[x].offset != r[y].offset)
		return r[x].offset < r[y].offset ? -1 : 1;
	return x < y ? -1 : x > y;
}

void mce_rels_by_offset(const struct mce_rel *r, size_t n, size_t *idx)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	/* An assembler emits them in offset order: a pass to see it. */
	mc_sort_nearly(idx, n, sizeof(*idx), cmp_rel_off, (void *)r);
}

long mce_rels_within(struct mce_file *f, struct mce_sec *rs, uint64_t lo,
		     uint64_t hi, const size_t **idx)
{
	if (mce_load_rels(f, rs) < 0)
		return -1;
	if (!rs->byoff) {
		rs->byoff = malloc((rs->nrels ? rs->nrels : 1) * sizeof(*rs->byoff));
		if (!rs->byoff)
			return mce_fail(f, "out of memory");
		mce_rels_by_offset(rs->rels, rs->nrels, rs->byoff);
	}
	size_t a = 0, b = rs->nrels;

	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (rs->rels[rs->byoff[mid]].offset < lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (b = a; b < rs->nrels && rs->rels[rs->byoff[b]].offset < hi; b++)
		;
	*idx = rs->byoff + a;
	return (long)(b - a);
}

/* ---- changes ------------------------------------------------------------ */

int mce_patch(struct mce_file *f, struct mce_sec *s, uint64_t off,
	      const void *bytes, size_t len)
{
	Elf_Data *d = mce_sec_data(f, s);

	if (!d)
		return -1;
	if (d->d_type != ELF_T_BYTE || !d->d_buf || mce_add_overflows(off, len, d->d_size))
		return mce_fail(f, "cannot patch %zu bytes at %s+0x%llx", len, s->name,
			    (unsigned long long)off);
	memcpy((uint8_t *)d->d_buf + off, bytes, len);
	s->dirty = f->dirty = true;
	return 0;
}

int mce_store_rel(struct mce_file *f, struct mce_sec *rs, size_t i)
{
	Elf_Data *d = mce_sec_data(f, rs);
	GElf_Rela ra;

	if (!d)
		return -1;
	mce_rel_to_gelf(f, &rs->rels[i], &ra);
	if (rs->is_rela) {
		if (!gelf_update_rela(d, (int)i, &ra))
			return mce_fail(f, "%s: cannot update relocation %zu", rs->name, i);
	} else {
		GElf_Rel rl = { .r_offset = ra.r_offset, .r_info = ra.r_info };

		if (!gelf_update_rel(d, (int)i, &rl))
			return mce_fail(f, "%s: cannot update relocation %zu", rs->name, i);
	}
	rs->dirty = f->dirty = true;
	return 0;
}

int mce_reserve_sections(struct mce_file *f, size_t extra)
{
	if (f->shnum + extra > f->secs_cap && grow_secs(f, f->shnum + extra) < 0)
		return mce_fail(f, "out of memory");
	return 0;
}

int mce_rel_retire(struct mce_file *f, struct mce_sec *rs, size_t i,
		   uint32_t none)
{
	if (mce_load_rels(f, rs) < 0)
		return -1;
	if (i >= rs->nrels)
		return mce_fail(f, "%s: no relocation %zu", rs->name, i);
	rs->rels[i] = (struct mce_rel){ .offset = rs->rels[i].offset, .type = none };
	return mce_store_rel(f, rs, i);
}

long mce_add_section(struct mce_file *f, const char *name, GElf_Word type,
		     GElf_Xword flags, GElf_Xword align, GElf_Xword entsize,
		     GElf_Word link, GElf_Word info, Elf_Type dtype,
		     const void *data, size_t size)
{
	struct mce_sec *s = new_sec(f);

	if (!s)
		return mce_fail(f, "out of memory");
	s->is_new = true;
	s->name = strdup(name);
	s->data = calloc(1, sizeof(*s->data));
	s->owned = malloc(size ? size : 1);
	if (!s->name || !s->data || !s->owned)
		return mce_fail(f, "out of memory");
	if (size)
		memcpy(s->owned, data, size);
	s->data->d_buf = s->owned;
	s->data->d_size = size;
	s->data->d_type = dtype;
	s->data->d_version = EV_CURRENT;
	s->data->d_align = align;
	s->sh = (GElf_Shdr){ .sh_type = type, .sh_flags = flags, .sh_size = size,
			     .sh_link = link, .sh_info = info, .sh_addralign = align,
			     .sh_entsize = entsize };
	s->is_rela = type == SHT_RELA;
	s->dirty = f->dirty = true;
	if ((type == SHT_REL || type == SHT_RELA) && info < f->shnum &&
	    !f->secs[info].rela)
		f->secs[info].rela = s;
	return (long)s->idx;
}

/* Section symbols by section, so that asking for many is not quadratic. */
static int index_section_symbols(struct mce_file *f)
{
	/* Built once: sections this layer adds later have no symbols. */
	if (f->secsym)
		return 0;
	if (mce_syms_need(f) < 0)
		return -1;
	f->nsecsym = f->shnum;
	f->secsym = calloc(f->nsecsym + 1, sizeof(*f->secsym));
	if (!f->secsym)
		return mce_fail(f, "out of memory");
	for (size_t i = f->nsyms; i-- > 1;)	/* the first one wins */
		if (f->syms[i].type == STT_SECTION && f->syms[i].shndx < f->nsecsym)
			f->secsym[f->syms[i].shndx] = (uint32_t)i;
	return 0;
}

long mce_find_section_symbol(struct mce_file *f, uint32_t shndx)
{
	if (!f->symtab)
		return mce_fail(f, "no symbol table");
	if (index_section_symbols(f) < 0)
		return -1;
	return shndx < f->nsecsym ? f->secsym[shndx] : 0;
}

long mce_section_symbol(struct mce_file *f, uint32_t shndx)
{
	long found = mce_find_section_symbol(f, shndx);

	if (found)
		return found;

	struct mce_sym *n = realloc(f->syms, (f->nsyms + 1) * sizeof(*n));
	if (!n)
		return mce_fail(f, "out of memory");
	f->syms = n;

	size_t first_global = f->symtab->sh.sh_info;
	size_t moved_to = f->nsyms;
	struct mce_sym sec = { .name = "", .bind = STB_LOCAL, .type = STT_SECTION,
			       .shndx = shndx,
			       .raw_shndx = shndx >= SHN_LORESERVE ? SHN_XINDEX : shndx };

	if (shndx >= SHN_LORESERVE && !f->symtab_shndx)
		return mce_fail(f, "section index %u needs a SHT_SYMTAB_SHNDX table", shndx);
	/*
	 * Locals must precede globals (sh_info is the first global), so a new
	 * local takes the first global's slot and that global moves to the end.
	 * Every relocation and group naming the moved symbol is renumbered.
	 */
	f->syms[moved_to] = f->syms[first_global < f->nsyms ? first_global : moved_to];
	f->syms[first_global] = sec;
	f->nsyms++;
	f->symtab->sh.sh_info = (GElf_Word)first_global + 1;
	f->syms_dirty = f->dirty = true;
	if (shndx < f->nsecsym)
		f->secsym[shndx] = (uint32_t)first_global;
	if (first_global == moved_to)
		return (long)first_global;

	for (size_t i = 1; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];

		if ((s->sh.sh_type == SHT_REL || s->sh.sh_type == SHT_RELA) &&
		    s->sh.sh_link == f->symtab->idx) {
			if (mce_load_rels(f, s) < 0)
				return -1;
			for (size_t k = 0; k < s->nrels; k++)
				if (s->rels[k].sym == first_global) {
					s->rels[k].sym = (uint32_t)moved_to;
					if (mce_store_rel(f, s, k) < 0)
						return -1;
				}
		} else if (s->sh.sh_type == SHT_GROUP && s->sh.sh_link == f->symtab->idx &&
			   s->sh.sh_info == first_global) {
			s->sh.sh_info = (GElf_Word)moved_to;
			s->dirty = f->dirty = true;
		}
	}
	return (long)first_global;
}

long mce_add_addr_table(struct mce_file *f, const char *name, GElf_Xword flags,
			GElf_Word link, uint32_t rtype, bool rela,
			const uint32_t *syms, const int64_t *addends, size_t n)
{
	bool c64 = f->cls == ELFCLASS64;
	size_t asz = c64 ? sizeof(Elf64_Addr) : sizeof(Elf32_Addr);
	size_t rsz = c64 ? (rela ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel))
			 : (rela ? sizeof(Elf32_Rela) : sizeof(Elf32_Rel));
	uint8_t *tab = calloc(n ? n : 1, asz), *rel = calloc(n ? n : 1, rsz);
	long idx = -1, ridx;
	char *rname = NULL;

	if (!tab || !rel || asprintf(&rname, "%s%s", rela ? ".rela" : ".rel", name) < 0) {
		rname = NULL;
		mce_fail(f, "out of memory");
		goto out;
	}
	if (!f->symtab) {
		mce_fail(f, "no symbol table");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct mce_rel r = { .offset = i * asz, .sym = syms[i], .type = rtype,
				     .addend = rela ? addends[i] : 0 };
		uint64_t info = raw_info(f, &r);
		uint64_t inplace = rela ? 0 : (uint64_t)addends[i];

		if (c64) {
			((Elf64_Addr *)tab)[i] = inplace;
			if (rela)
				((Elf64_Rela *)rel)[i] = (Elf64_Rela){ r.offset, info, r.addend };
			else
				((Elf64_Rel *)rel)[i] = (Elf64_Rel){ r.offset, info };
		} else {
			((Elf32_Addr *)tab)[i] = (Elf32_Addr)inplace;
			if (rela)
				((Elf32_Rela *)rel)[i] = (Elf32_Rela){ (Elf32_Addr)r.offset,
					(Elf32_Word)info, (Elf32_Sword)r.addend };
			else
				((Elf32_Rel *)rel)[i] = (Elf32_Rel){ (Elf32_Addr)r.offset,
					(Elf32_Word)info };
		}
	}
	idx = mce_add_section(f, name, SHT_PROGBITS, SHF_ALLOC | flags, asz, asz,
			      link, 0, ELF_T_ADDR, tab, n * asz);
	if (idx < 0)
		goto out;
	/* SHF_INFO_LINK, as GNU as marks relocations of allocated sections. */
	ridx = mce_add_section(f, rname, rela ? SHT_RELA : SHT_REL, SHF_INFO_LINK,
			       asz, rsz, (GElf_Word)f->symtab->idx, (GElf_Word)idx,
			       rela ? ELF_T_RELA : ELF_T_REL, rel, n * rsz);
	if (ridx < 0)
		idx = -1;
out:
	free(tab);
	free(rel);
	free(rname);
	return idx;
}

int mce_sec_empty(struct mce_file *f, struct mce_sec *s)
{
	Elf_Data *d = mce_sec_data(f, s);

	if (!d)
		return -1;
	d->d_size = 0;
	s->sh.sh_size = 0;
	s->sh.sh_flags &= ~(GElf_Xword)SHF_ALLOC;
	s->nrels = 0;
	free(s->byoff);
	s->byoff = NULL;
	s->dirty = f->dirty = true;
	return 0;
}

long mce_label_before(struct mce_file *f, uint32_t shndx, uint64_t off,
		      uint64_t *start)
{
	if (!f->bounds) {
		if (mce_syms_need(f) < 0)
			return -1;
		struct mc_kv *kv = malloc((f->nsyms + 1) * sizeof(*kv));
		size_t n = 0;

		f->bounds = malloc((f->nsyms + 1) * sizeof(*f->bounds));
		if (!f->bounds || !kv) {
			free(kv);
			free(f->bounds);
			f->bounds = NULL;
			return -1;
		}
		for (size_t i = 0; i < f->nsyms; i++) {
			const struct mce_sym *m = &f->syms[i];

			/* Functions, and untyped named labels (assembly). */
			if ((m->type == STT_FUNC || (m->type == STT_NOTYPE && m->name[0] &&
						     m->name[0] != '$' &&
						     strncmp(m->name, ".L", 2))) &&
			    m->shndx && m->shndx < f->shnum) {
				uint64_t rel = m->value - mce_sec_base(f, m->shndx);

				/* Key: section, then offset (offsets past 2^40 do
				 * not exist in a section); ties keep symbol order. */
				kv[n++] = (struct mc_kv){ (uint64_t)m->shndx << 40 |
							  (rel & ((1ull << 40) - 1)), i };
			}
		}
		if (mc_sort_kv(kv, n) < 0) {
			free(kv);
			free(f->bounds);
			f->bounds = NULL;
			return -1;
		}
		for (size_t k = 0; k < n; k++) {
			const struct mce_sym *m = &f->syms[kv[k].val];

			f->bounds[k] = (struct mce_bound){ m->shndx, m->value - mce_sec_base(f, m->shndx),
							   (uint32_t)kv[k].val };
		}
		f->nbounds = n;
		free(kv);
	}
	/* LO: the number of labels at or before the place.  Callers walk a
	 * section's call sites in order, one or two per function, so the
	 * answer is usually at or a few past the last one: step from there,
	 * and search only when that does not reach it. */
#define AT_OR_BEFORE(b) ((b)->shndx < shndx || ((b)->shndx == shndx && (b)->value <= off))
	size_t lo = f->bounds_hint, hi = f->nbounds;

	if (lo > hi || (lo && !AT_OR_BEFORE(&f->bounds[lo - 1])))
		lo = 0;
	for (int step = 0; lo < hi && AT_OR_BEFORE(&f->bounds[lo]); step++) {
		if (step == 4) {
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (AT_OR_BEFORE(&f->bounds[mid]))
					lo = mid + 1;
				else
					hi = mid;
			}
			break;
		}
		lo++;
	}
#undef AT_OR_BEFORE
	f->bounds_hint = lo;
	if (!lo || f->bounds[lo - 1].shndx != shndx)
		return -1;
	*start = f->bounds[lo - 1].value;
	return f->bounds[lo - 1].sym;
}

const char *mce_where(struct mce_file *f, uint32_t shndx, uint64_t off,
		      char *buf, size_t len)
{
	const struct mce_sym *best = NULL;
	uint64_t start;
	long fn = mce_label_before(f, shndx, off, &start);

	if (f->syms_lazy) {	/* (the symbols could not be read) */
		snprintf(buf, len, "%s+0x%llx", f->secs[shndx].name, (unsigned long long)off);
		return buf;
	}

	/* The common case, a place inside a function, from the index; only
	 * places outside every function scan all symbols. */
	if (fn > 0 && f->syms[fn].type == STT_FUNC && off - start < f->syms[fn].size) {
		snprintf(buf, len, "%s+0x%llx", f->syms[fn].name,
			 (unsigned long long)(off - start));
		return buf;
	}

	/* Symbol values of a linked image are addresses. */
	off += mce_sec_base(f, shndx);
	for (size_t i = 0; i < f->nsyms; i++) {
		const struct mce_sym *m = &f->syms[i];

		if (m->shndx != shndx || m->type == STT_SECTION || !m->name[0] ||
		    m->name[0] == '$' || !strncmp(m->name, ".L", 2) || m->value > off)
			continue;
		/* Prefer the function that contains OFF, then the closest. */
		bool inside = off < m->value + m->size;
		bool best_inside = best && off < best->value + best->size;
		if (!best || (inside && !best_inside) ||
		    (inside == best_inside && m->value > best->value))
			best = m;
	}
	if (best)
		snprintf(buf, len, "%s+0x%llx", best->name,
			 (unsigned long long)(off - best->value));
	else if (mce_sec_base(f, shndx))
		snprintf(buf, len, "%s+0x%llx", f->secs[shndx].name,
			 (unsigned long long)(off - mce_sec_base(f, shndx)));
	else
		snprintf(buf, len, "%s+0x%llx", shndx < f->shnum ? f->secs[shndx].name : "?",
			 (unsigned long long)off);
	return buf;
}

/* ---- writing ------------------------------------------------------------ */

struct out {
	bool in_place;		/* only the tail and the ELF header are written */
	const void *ehdr;	/* in_place: the new ELF header, written last */
	size_t ehdr_len;
	struct iovec *iov;
	size_t n, cap;
	uint64_t pos;
	void **frees;
	size_t nfrees, capfrees;
	/* A linked image is written as a copy of the input made by the
	 * kernel (copy_file_range, as cp does), then iov[i] at offset at[i]
	 * for what changed; the file ends at total. */
	bool patches;
	uint64_t *at;
	uint64_t total;
};

static const uint8_t zeros[4096];

static int out_add(struct out *o, const void *p, size_t len)
{
	if (!len)
		return 0;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		struct iovec *n = realloc(o->iov, cap * sizeof(*n));

		if (!n)
			return -1;
		o->iov = n;
		o->cap = cap;
	}
	o->iov[o->n++] = (struct iovec){ (void *)p, len };
	o->pos += len;
	return 0;
}

/* Patch mode: LEN bytes P at file offset AT. */
static int out_patch(struct out *o, uint64_t at, const void *p, size_t len)
{
	if (!len)
		return 0;
	if (o->n == o->cap) {
		uint64_t *n = realloc(o->at, (o->cap ? o->cap * 2 : 64) * sizeof(*n));

		if (!n)
			return -1;
		o->at = n;
	}
	if (out_add(o, p, len) < 0)
		return -1;
	o->at[o->n - 1] = at;
	return 0;
}

static int out_pad_to(struct out *o, uint64_t pos)
{
	while (o->pos < pos) {
		uint64_t k = pos - o->pos;

		if (out_add(o, zeros, k > sizeof(zeros) ? sizeof(zeros) : (size_t)k) < 0)
			return -1;
	}
	return 0;
}

static void *out_keep(struct out *o, void *p)
{
	if (!p)
		return NULL;
	if (o->nfrees == o->capfrees) {
		size_t cap = o->capfrees ? o->capfrees * 2 : 16;
		void **n = realloc(o->frees, cap * sizeof(*n));

		if (!n) {
			free(p);
			return NULL;
		}
		o->frees = n;
		o->capfrees = cap;
	}
	o->frees[o->nfrees++] = p;
	return p;
}

static void out_free(struct out *o)
{
	for (size_t i = 0; i < o->nfrees; i++)
		free(o->frees[i]);
	free(o->frees);
	free(o->iov);
	free(o->at);
}

/* File representation of a memory-representation buffer. */
static void *to_file(struct mce_file *f, struct out *o, Elf_Type t,
		     const void *buf, size_t size)
{
	uint8_t *dst = out_keep(o, malloc(size ? size : 1));
	Elf_Data s = { .d_buf = (void *)buf, .d_type = t, .d_size = size,
		       .d_version = EV_CURRENT };
	Elf_Data d = { .d_buf = dst, .d_type = t, .d_size = size,
		       .d_version = EV_CURRENT };

	if (!dst)
		return NULL;
	if (!size)
		return dst;
	if (!gelf_xlatetof(f->elf, &d, &s, f->map[EI_DATA])) {
		mce_fail(f, "cannot convert section data: %s", elf_errmsg(-1));
		return NULL;
	}
	return dst;
}

static void *build_symtab(struct mce_file *f, struct out *o, void **shndx_out)
{
	size_t esz = f->cls == ELFCLASS64 ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
	uint8_t *mem = malloc(f->nsyms * esz + 1);
	uint32_t *xs = f->symtab_shndx ? calloc(f->nsyms + 1, 4) : NULL;
	void *file = NULL;

	if (!mem || (f->symtab_shndx && !xs))
		goto out;
	for (size_t i = 0; i < f->nsyms; i++) {
		const struct mce_sym *m = &f->syms[i];
		unsigned char info = (unsigned char)GELF_ST_INFO(m->bind, m->type);

		if (xs)
			xs[i] = m->raw_shndx == SHN_XINDEX ? m->shndx : 0;
		if (f->cls == ELFCLASS64) {
			Elf64_Sym *s = (Elf64_Sym *)mem + i;
			*s = (Elf64_Sym){ m->st_name, info, m->other, m->raw_shndx,
					  m->value, m->size };
		} else {
			Elf32_Sym *s = (Elf32_Sym *)mem + i;
			*s = (Elf32_Sym){ m->st_name, (Elf32_Addr)m->value,
					  (Elf32_Word)m->size, info, m->other, m->raw_shndx };
		}
	}
	file = to_file(f, o, ELF_T_SYM, mem, f->nsyms * esz);
	if (file && xs)
		*shndx_out = to_file(f, o, ELF_T_WORD, xs, f->nsyms * 4);
out:
	free(mem);
	free(xs);
	return file;
}

static int cmp_off(const void *a, const void *b, void *arg)
{
	const struct mce_file *f = arg;
	const struct mce_sec *x = &f->secs[*(const size_t *)a];
	const struct mce_sec *y = &f->secs[*(const size_t *)b];

	if (x->is_new != y->is_new)
		return x->is_new ? 1 : -1;
	if (!x->is_new && x->sh.sh_offset != y->sh.sh_offset)
		return x->sh.sh_offset < y->sh.sh_offset ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return a > 1 ? (v + a - 1) & ~(a - 1) : v;
}

static int write_all(int fd, struct out *o)
{
	size_t i = 0;

	while (i < o->n) {
		size_t cnt = o->n - i > IOV_MAX ? IOV_MAX : o->n - i;
		ssize_t w = writev(fd, o->iov + i, (int)cnt);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		/* Consume what was written, possibly part of one vector. */
		while (w > 0 && i < o->n) {
			if ((size_t)w >= o->iov[i].iov_len) {
				w -= (ssize_t)o->iov[i].iov_len;
				i++;
			} else {
				o->iov[i].iov_base = (uint8_t *)o->iov[i].iov_base + w;
				o->iov[i].iov_len -= (size_t)w;
				w = 0;
			}
		}
	}
	return 0;
}

/* Patch mode: copy the input, then write each patch at its offset. */
static int write_patched(struct mce_file *f, int fd, struct out *o)
{
	uint64_t done = 0;

	while (done < f->size) {
		loff_t in = (loff_t)done, outp = (loff_t)done;
		ssize_t n = copy_file_range(f->fd, &in, fd, &outp, f->size - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* Not supported here (or the file shrank under us): the
			 * bytes we read are the truth anyway.  Edits of native-
			 * order data went into f->map, but every such section is
			 * also a patch below, written over these bytes. */
			for (; done < f->size;) {
				ssize_t w = pwrite(fd, f->map + done, f->size - done, (off_t)done);

				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					return -1;
				done += (uint64_t)w;
			}
			break;
		}
		done += (uint64_t)n;
	}
	for (size_t i = 0; i < o->n; i++)
		for (size_t w = 0; w < o->iov[i].iov_len;) {
			ssize_t k = pwrite(fd, (uint8_t *)o->iov[i].iov_base + w,
					   o->iov[i].iov_len - w, (off_t)(o->at[i] + w));

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				return -1;
			w += (size_t)k;
		}
	return ftruncate(fd, (off_t)o->total);
}

static int build_image(struct mce_file *f, struct out *o)
{
	const void **bytes = calloc(f->shnum, sizeof(*bytes));
	size_t *order = calloc(f->shnum, sizeof(*order));
	void *shndx_file = NULL;
	char *shstr = NULL;
	int ret = -1;
	bool linked = f->eh.e_phnum != 0 || o->in_place;

	if (!bytes || !order) {
		mce_fail(f, "out of memory");
		goto out;
	}

	/* Names of new sections go at the end of a copy of .shstrtab; a name
	 * that is a suffix of an existing one (as "__mcount_loc" is of
	 * ".rela__mcount_loc") shares its bytes. */
	struct mce_sec *ss = &f->secs[f->shstrndx];
	Elf_Data *sd = mce_sec_data(f, ss);
	if (!sd)
		goto out;
	size_t shlen = sd->d_size, shcap = shlen + 1;
	for (size_t i = 0; i < f->shnum; i++)
		if (f->secs[i].is_new)
			shcap += strlen(f->secs[i].name) + 1;
	shstr = out_keep(o, malloc(shcap));
	if (!shstr) {
		mce_fail(f, "out of memory");
		goto out;
	}
	memcpy(shstr, sd->d_buf, shlen);
	/* New sections mostly repeat a few names (-g makes one table pair per
	 * text section): look each distinct name up once. */
	const struct mce_sec *named[8];
	size_t nnamed = 0;
	for (size_t i = 0; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];
		size_t nl;

		if (!s->is_new)
			continue;
		size_t k;
		for (k = 0; k < nnamed && strcmp(named[k]->name, s->name); k++)
			;
		if (k < nnamed) {
			s->sh.sh_name = named[k]->sh.sh_name;
			continue;
		}
		if (nnamed < sizeof(named) / sizeof(named[0]))
			named[nnamed++] = s;
		nl = strlen(s->name);
		s->sh.sh_name = 0;
		for (size_t k = 0; k < f->shnum; k++) {
			const struct mce_sec *t = &f->secs[k];
			size_t tl = strlen(t->name);

			if (t != s && tl >= nl && t->sh.sh_name + tl <= shlen &&
			    !strcmp(t->name + tl - nl, s->name) && (k < i || !t->is_new)) {
				s->sh.sh_name = (GElf_Word)(t->sh.sh_name + tl - nl);
				break;
			}
		}
		if (!s->sh.sh_name) {
			/* A name equal to a brand-new one placed earlier. */
			for (size_t k = 0; k < i && !s->sh.sh_name; k++)
				if (f->secs[k].is_new && !strcmp(f->secs[k].name, s->name))
					s->sh.sh_name = f->secs[k].sh.sh_name;
		}
		if (!s->sh.sh_name) {
			s->sh.sh_name = (GElf_Word)shlen;
			memcpy(shstr + shlen, s->name, nl + 1);
			shlen += nl + 1;
		}
	}
	ss->sh.sh_size = shlen;
	bytes[f->shstrndx] = shstr;

	if (f->syms_dirty) {
		bytes[f->symtab->idx] = build_symtab(f, o, &shndx_file);
		if (!bytes[f->symtab->idx])
			goto out;
		f->symtab->sh.sh_size = f->nsyms * f->symtab->sh.sh_entsize;
		if (f->symtab_shndx) {
			bytes[f->symtab_shndx->idx] = shndx_file;
			f->symtab_shndx->sh.sh_size = f->nsyms * 4;
		}
	}
	for (size_t i = 1; i < f->shnum; i++) {
		struct mce_sec *s = &f->secs[i];

		if (bytes[i] || s->sh.sh_type == SHT_NOBITS)
			continue;
		if (s->dirty && s->sh.sh_type != SHT_GROUP) {
			bytes[i] = to_file(f, o, s->data->d_type, s->data->d_buf,
					   s->data->d_size);
			if (!bytes[i])
				goto out;
		} else if (!s->is_new) {
			bytes[i] = f->map + s->sh.sh_offset;
		}
	}

	/* Layout.  A relocatable object is laid out afresh in the order of
	 * the original offsets (new sections last), which keeps it compact.
	 * A linked image keeps every offset its program headers rely on;
	 * only sections that grew or are new move past the end. */
	for (size_t i = 0; i < f->shnum; i++)
		order[i] = i;
	mc_sort_nearly(order + 1, f->shnum - 1, sizeof(*order), cmp_off, f);

	/*
	 * The output is never much larger than the input plus what was
	 * added: an input's own padding is already in the input (gas pads
	 * the file to a section's alignment), so an alignment that would
	 * pad the output past this bound is a corrupt header, and writing
	 * it would fill the disk with zeros (2^31, 2^40 and 2^63 were seen).
	 */
	uint64_t limit = f->size + (uint64_t)f->shnum * 4096 + 65536;
	for (size_t i = 1; i < f->shnum; i++)
		if ((f->secs[i].is_new || f->secs[i].dirty) && f->secs[i].sh.sh_type != SHT_NOBITS)
			limit += f->secs[i].sh.sh_size;

	size_t bad;
	bool moved = false;
	uint64_t end = linked ? f->size
			      : f->cls == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
	if (linked) {
		for (size_t i = 1; i < f->shnum; i++) {
			struct mce_sec *s = &f->secs[i];
			uint64_t oldsize = 0;

			if (!s->is_new && s->scn) {
				GElf_Shdr osh;
				gelf_getshdr(s->scn, &osh);
				oldsize = osh.sh_size;
			}
			/* In place, nothing already in the file may change:
			 * every changed section moves to the end too. */
			bool changed = s->is_new || (s->sh.sh_type != SHT_NOBITS &&
				(s->sh.sh_size > oldsize ||
				 (o->in_place && (s->dirty ||
						  (f->syms_dirty && (s == f->symtab ||
								     s == f->symtab_shndx))))));
			/* (Not a byte comparison with f->map: edits of
			 * native-order data went straight into the private
			 * mapping, which no longer shows the file.) */
			if (changed) {
				moved = true;
				end = align_up(end, s->sh.sh_addralign);
				bad = i;
				if (end > limit)
					goto too_big;
				s->sh.sh_offset = end;
				end += s->sh.sh_type == SHT_NOBITS ? 0 : s->sh.sh_size;
			}
		}
	} else {
		for (size_t k = 1; k < f->shnum; k++) {
			struct mce_sec *s = &f->secs[order[k]];

			end = align_up(end, s->sh.sh_addralign);
			bad = order[k];
			if (end > limit)
				goto too_big;
			s->sh.sh_offset = end;
			if (s->sh.sh_type != SHT_NOBITS)
				end += s->sh.sh_size;
		}
	}
	uint64_t shoff = align_up(end, f->addrsize);
	/* A linked image whose sections all stayed put keeps its section
	 * header table where it was: the file keeps its size. */
	size_t shbytes = f->shnum * (f->cls == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr));
	if (linked && !moved && !o->in_place && f->eh.e_shoff &&
	    !mce_add_overflows(f->eh.e_shoff, shbytes, f->size))
		shoff = f->eh.e_shoff;

	/* Headers. */
	GElf_Ehdr eh = f->eh;
	eh.e_shoff = shoff;
	eh.e_shnum = f->shnum < SHN_LORESERVE ? (GElf_Half)f->shnum : 0;
	eh.e_shstrndx = f->shstrndx < SHN_LORESERVE ? (GElf_Half)f->shstrndx : SHN_XINDEX;
	f->secs[0].sh.sh_size = f->shnum < SHN_LORESERVE ? 0 : f->shnum;
	f->secs[0].sh.sh_link = f->shstrndx < SHN_LORESERVE ? 0 : (GElf_Word)f->shstrndx;

	void *ehmem;
	size_t ehsz;
	if (f->cls == ELFCLASS64) {
		Elf64_Ehdr *e = out_keep(o, calloc(1, sizeof(*e)));
		if (!e)
			goto oom;
		memcpy(e->e_ident, eh.e_ident, EI_NIDENT);
		e->e_type = eh.e_type; e->e_machine = eh.e_machine;
		e->e_version = eh.e_version; e->e_entry = eh.e_entry;
		e->e_phoff = eh.e_phoff; e->e_shoff = eh.e_shoff;
		e->e_flags = eh.e_flags; e->e_ehsize = eh.e_ehsize;
		e->e_phentsize = eh.e_phentsize; e->e_phnum = eh.e_phnum;
		e->e_shentsize = eh.e_shentsize; e->e_shnum = eh.e_shnum;
		e->e_shstrndx = eh.e_shstrndx;
		ehmem = e;
		ehsz = sizeof(*e);
	} else {
		Elf32_Ehdr *e = out_keep(o, calloc(1, sizeof(*e)));
		if (!e)
			goto oom;
		memcpy(e->e_ident, eh.e_ident, EI_NIDENT);
		e->e_type = eh.e_type; e->e_machine = eh.e_machine;
		e->e_version = eh.e_version; e->e_entry = (Elf32_Addr)eh.e_entry;
		e->e_phoff = (Elf32_Off)eh.e_phoff; e->e_shoff = (Elf32_Off)eh.e_shoff;
		e->e_flags = eh.e_flags; e->e_ehsize = eh.e_ehsize;
		e->e_phentsize = eh.e_phentsize; e->e_phnum = eh.e_phnum;
		e->e_shentsize = eh.e_shentsize; e->e_shnum = eh.e_shnum;
		e->e_shstrndx = eh.e_shstrndx;
		ehmem = e;
		ehsz = sizeof(*e);
	}
	const void *ehfile = to_file(f, o, ELF_T_EHDR, ehmem, ehsz);
	if (!ehfile)
		goto out;

	size_t shsz = f->cls == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	uint8_t *shmem = out_keep(o, calloc(f->shnum, shsz));
	if (!shmem)
		goto oom;
	for (size_t i = 0; i < f->shnum; i++) {
		const GElf_Shdr *g = &f->secs[i].sh;

		if (f->cls == ELFCLASS64) {
			Elf64_Shdr *h = (Elf64_Shdr *)shmem + i;
			*h = (Elf64_Shdr){ g->sh_name, g->sh_type, g->sh_flags, g->sh_addr,
					   g->sh_offset, g->sh_size, g->sh_link, g->sh_info,
					   g->sh_addralign, g->sh_entsize };
		} else {
			Elf32_Shdr *h = (Elf32_Shdr *)shmem + i;
			*h = (Elf32_Shdr){ g->sh_name, g->sh_type, (Elf32_Word)g->sh_flags,
					   (Elf32_Addr)g->sh_addr, (Elf32_Off)g->sh_offset,
					   (Elf32_Word)g->sh_size, g->sh_link, g->sh_info,
					   (Elf32_Word)g->sh_addralign, (Elf32_Word)g->sh_entsize };
		}
	}
	const void *shfile = to_file(f, o, ELF_T_SHDR, shmem, f->shnum * shsz);
	if (!shfile)
		goto out;

	/* Stream: header, sections in file order, section header table. */
	if (o->in_place) {
		/* Only what lies past the old end; the header goes last. */
		o->pos = f->size;
		for (size_t k = 0; k < f->shnum; k++) {
			/* New offsets past the old end were handed out in index
			 * order, so index order is file order here. */
			const struct mce_sec *s = &f->secs[k];

			if (k == 0 || s->sh.sh_type == SHT_NOBITS || !s->sh.sh_size ||
			    s->sh.sh_offset < f->size)
				continue;
			if (out_pad_to(o, s->sh.sh_offset) < 0 ||
			    out_add(o, bytes[k], s->sh.sh_size) < 0)
				goto oom;
		}
		if (out_pad_to(o, shoff) < 0 || out_add(o, shfile, f->shnum * shsz) < 0)
			goto oom;
		o->ehdr = ehfile;
		o->ehdr_len = ehsz;
	} else if (linked) {
		/* The original bytes, then what changed over them. */
		o->patches = true;
		o->total = shoff + f->shnum * shsz > f->size ? shoff + f->shnum * shsz : f->size;
		if (out_patch(o, 0, ehfile, ehsz) < 0)
			goto oom;
		for (size_t i = 1; i < f->shnum; i++) {
			const struct mce_sec *s = &f->secs[i];

			if (s->sh.sh_type != SHT_NOBITS && bytes[i] &&
			    (s->dirty || s->is_new || bytes[i] != f->map + s->sh.sh_offset) &&
			    out_patch(o, s->sh.sh_offset, bytes[i], s->sh.sh_size) < 0)
				goto oom;
		}
		if (out_patch(o, shoff, shfile, f->shnum * shsz) < 0)
			goto oom;
	} else {
		if (out_add(o, ehfile, ehsz) < 0)
			goto oom;
		for (size_t k = 1; k < f->shnum; k++) {
			const struct mce_sec *s = &f->secs[order[k]];

			if (s->sh.sh_type == SHT_NOBITS || !s->sh.sh_size)
				continue;
			if (out_pad_to(o, s->sh.sh_offset) < 0 ||
			    out_add(o, bytes[order[k]], s->sh.sh_size) < 0)
				goto oom;
		}
		if (out_pad_to(o, shoff) < 0 || out_add(o, shfile, f->shnum * shsz) < 0)
			goto oom;
	}
	ret = 0;
	goto out;
too_big:
	mce_fail(f, "section %s: alignment %llu would pad the output past %llu bytes "
		 "(the input has %zu)", f->secs[bad].name,
		 (unsigned long long)f->secs[bad].sh.sh_addralign, (unsigned long long)limit,
		 f->size);
	goto out;
oom:
	mce_fail(f, "out of memory");
out:
	free(bytes);
	free(order);
	return ret;
}

/*
 * Interruption-safe update of the input itself, for build systems that
 * cannot afford a new inode per object (see mce_write_in_place() in the
 * header).  Everything new is appended past the old end; until the final
 * one-sector write of the ELF header the file still reads as the old
 * object, and any failure truncates it back to its old bytes.
 */
int mce_write_in_place(struct mce_file *f)
{
	struct out o = { .in_place = true };
	int fd = -1, ret = -1;

	if (build_image(f, &o) < 0)
		goto out;
	fd = f->writable ? dup(f->fd) : open(f->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		mce_fail(f, "cannot open for writing: %s", strerror(errno));
		goto out;
	}
	if (lseek(fd, (off_t)f->size, SEEK_SET) < 0 || write_all(fd, &o) < 0) {
		mce_fail(f, "cannot append: %s", strerror(errno));
		goto undo;
	}
	ssize_t w = pwrite(fd, o.ehdr, o.ehdr_len, 0);
	if (w != (ssize_t)o.ehdr_len) {
		mce_fail(f, "cannot write the ELF header: %s", w < 0 ? strerror(errno) : "short write");
		goto undo;
	}
	ret = 0;
	goto out;
undo:
	if (ftruncate(fd, (off_t)f->size) < 0)
		snprintf(f->err + strlen(f->err), sizeof(f->err) - strlen(f->err),
			 "; and could not truncate back: %s", strerror(errno));
out:
	if (fd >= 0 && close(fd) < 0 && ret == 0)
		ret = mce_fail(f, "cannot write: %s", strerror(errno));
	out_free(&o);
	return ret;
}

/*
 * Create TMP, whose name ends in six X's, as a new file (O_EXCL) with the
 * mode MODE: the X's become letters until the name is free.  Unlike
 * mkstemp(), which makes the file 0600, the file is created with MODE's
 * permission bits, and changed afterwards only when the umask or a
 * special bit kept them from it: for the common 0644 under umask 022 that
 * spares an inode update per object.  Each call draws its own seed from
 * getrandom(): no state outlives the call, and O_EXCL, not the name's
 * secrecy, is what keeps another user's file from being opened.
 */
static int open_temp(char *tmp, mode_t mode)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
	uint64_t state = (uint64_t)getpid() << 32 ^ (uintptr_t)tmp;
	uint64_t seed;
	char *x = tmp + strlen(tmp) - 6;
	int fd = -1;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == sizeof(seed))
		state ^= seed;
	for (int tries = 0; tries < 1000 && fd < 0; tries++) {
		/* splitmix64: every state gives a well-mixed word. */
		uint64_t z = (state += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		for (int i = 0; i < 6; i++)
			x[i] = abc[(z >> (6 * i)) & 63];
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL, mode & 0777);
		if (fd < 0 && errno != EEXIST)
			return -1;
	}
	if (fd < 0)
		return -1;	/* errno is EEXIST */

	struct stat st;

	if (fstat(fd, &st) < 0 || ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)) {
		int e = errno;

		close(fd);
		unlink(tmp);
		errno = e;
		return -1;
	}
	return fd;
}

int mce_write(struct mce_file *f, const char *outpath)
{
	const char *target = outpath ? outpath : f->path;
	char *dup = strdup(target), *tmp = NULL;
	struct out o = { 0 };
	int fd = -1, ret = -1;
	struct stat tst;
	mode_t mode = f->st.st_mode & 07777;

	if (!dup)
		return mce_fail(f, "out of memory");
	if (outpath && stat(outpath, &tst) == 0) {
		if (!S_ISREG(tst.st_mode)) {
			mce_fail(f, "%s: not a regular file", outpath);
			goto out;
		}
		mode = tst.st_mode & 07777;
	}
	if (!f->dirty) {
		/* Nothing changed (a tool asked for its -o FILE anyway): the
		 * input's own bytes, copied by the kernel. */
		o.patches = true;
		o.total = f->size;
	} else if (build_image(f, &o) < 0) {
		goto out;
	}
	if (asprintf(&tmp, "%s/.%s.XXXXXX", dirname(dup),
		     strrchr(target, '/') ? strrchr(target, '/') + 1 : target) < 0) {
		tmp = NULL;
		mce_fail(f, "out of memory");
		goto out;
	}
	fd = open_temp(tmp, mode);
	if (fd < 0) {
		mce_fail(f, "cannot create a temporary file beside %s: %s", target,
		     strerror(errno));
		goto out;
	}
	if ((o.patches ? write_patched(f, fd, &o) : write_all(fd, &o)) < 0) {
		mce_fail(f, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		mce_fail(f, "cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, target) < 0) {
		mce_fail(f, "cannot replace %s: %s", target, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (ret < 0 && tmp)
		unlink(tmp);
	free(tmp);
	free(dup);
	out_free(&o);
	return ret;
}
