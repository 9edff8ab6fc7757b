// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The ELF layer, writing: lay the sections out again and stream them with
 * writev() into a temporary file that is renamed over the target, the way
 * elfutils' strip does it, so a failure at any point leaves the target
 * byte-identical; or append to the input itself (mce_write_in_place()).
 */
#include "mcelf.h"
#include "mcelf-priv.h"
#include "mcsort.h"
#include "diag.h"
#include "prefault.h"
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
#include <sys/xattr.h>
#include <unistd.h>
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

/* Stream O's vectors to FD.  O is left as it was, so that the same
 * output can be written again into another file (see mce_write()). */
static int write_all(int fd, const struct out *o)
{
	size_t i = 0, off = 0;

	while (i < o->n) {
		size_t cnt = o->n - i > IOV_MAX ? IOV_MAX : o->n - i;
		/* (The rest of a vector a short write stopped in goes alone.) */
		ssize_t w = off ? write(fd, (uint8_t *)o->iov[i].iov_base + off,
					o->iov[i].iov_len - off)
				: writev(fd, o->iov + i, (int)cnt);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		for (off += (size_t)w; i < o->n && off >= o->iov[i].iov_len; i++)
			off -= o->iov[i].iov_len;
	}
	return 0;
}

/* LEN bytes of P at offset AT of FD, however many calls it takes; how
 * many went in, into *DONE if not NULL. */
static int pwrite_done(int fd, const void *p, size_t len, uint64_t at, size_t *done)
{
	size_t w = 0;
	int ret = 0;

	while (w < len) {
		ssize_t k = pwrite(fd, (const uint8_t *)p + w, len - w, (off_t)(at + w));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			ret = -1;
			break;
		}
		w += (size_t)k;
	}
	if (done)
		*done = w;
	return ret;
}

static int pwrite_all(int fd, const void *p, size_t len, uint64_t at)
{
	return pwrite_done(fd, p, len, at, NULL);
}

/* Patch mode: copy the input, then write each patch at its offset. */
static int write_patched(struct mce_file *f, int fd, const struct out *o)
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
		if (pwrite_all(fd, o->iov[i].iov_base, o->iov[i].iov_len, o->at[i]) < 0)
			return -1;
	return ftruncate(fd, (off_t)o->total);
}

/*
 * Whether only S's edited ranges need writing over the image, the rest
 * being the file's already: its data are the bytes written (BYTES), and
 * it has kept its place and size.  A megabyte of .init.data patched for
 * main_extable_sort_needed and __mcount_loc was otherwise compared and
 * written whole, page faults and all.
 */
static bool edited_only(struct mce_file *f, const struct mce_sec *s, const void *bytes)
{
	GElf_Shdr old;

	if (!s->dirty || !s->edit_known || s->is_new || !s->scn || !s->data ||
	    bytes != s->data->d_buf || !gelf_getshdr(s->scn, &old) ||
	    old.sh_offset != s->sh.sh_offset || old.sh_size != s->sh.sh_size ||
	    s->sh.sh_offset + s->sh.sh_size > f->size)
		return false;
	for (unsigned k = 0; k < s->nedits; k++)
		if (s->edits[k].lo >= s->edits[k].hi || s->edits[k].hi > s->sh.sh_size)
			return false;
	return true;
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
		if (s->dirty && s->sh.sh_type != SHT_GROUP && f->msb == MC_HOST_MSB) {
			/* (In this host's byte order the memory and the file
			 * representations are the same bytes: written from
			 * where they are, as libelf would only copy them.) */
			bytes[i] = s->data->d_buf;
		} else if (s->dirty && s->sh.sh_type != SHT_GROUP) {
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
	 * The output is never much larger than the input plus what is
	 * written anew: every section at most once more (a linked image's
	 * grown sections move past its end, a relocatable object is laid
	 * out afresh), with at most 4 KiB of padding each.  An input's own
	 * larger padding is already in the input (gas pads the file to a
	 * section's alignment), so an alignment that would pad the output
	 * past this bound is a corrupt header, and writing it would fill
	 * the disk with zeros (2^31, 2^40 and 2^63 were seen).
	 */
	uint64_t limit = f->size + (uint64_t)f->shnum * 4096 + 65536;
	for (size_t i = 1; i < f->shnum; i++)
		if (f->secs[i].sh.sh_type != SHT_NOBITS)
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
	/* The header in the class's own struct; to_file() then puts it in
	 * the object's byte order. */
#define EHDR_OF_CLASS(EHDR_T, ADDR_T, OFF_T) do {					\
		EHDR_T *e = out_keep(o, calloc(1, sizeof(*e)));			\
		if (!e)								\
			goto oom;						\
		memcpy(e->e_ident, eh.e_ident, EI_NIDENT);			\
		e->e_type = eh.e_type; e->e_machine = eh.e_machine;		\
		e->e_version = eh.e_version; e->e_entry = (ADDR_T)eh.e_entry;	\
		e->e_phoff = (OFF_T)eh.e_phoff; e->e_shoff = (OFF_T)eh.e_shoff;	\
		e->e_flags = eh.e_flags; e->e_ehsize = eh.e_ehsize;		\
		e->e_phentsize = eh.e_phentsize; e->e_phnum = eh.e_phnum;	\
		e->e_shentsize = eh.e_shentsize; e->e_shnum = eh.e_shnum;	\
		e->e_shstrndx = eh.e_shstrndx;					\
		ehmem = e;							\
		ehsz = sizeof(*e);						\
	} while (0)
	if (f->cls == ELFCLASS64)
		EHDR_OF_CLASS(Elf64_Ehdr, Elf64_Addr, Elf64_Off);
	else
		EHDR_OF_CLASS(Elf32_Ehdr, Elf32_Addr, Elf32_Off);
#undef EHDR_OF_CLASS
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
			const uint8_t *b = bytes[i];

			if (s->sh.sh_type == SHT_NOBITS || !b ||
			    !(s->dirty || s->is_new || bytes[i] != f->map + s->sh.sh_offset))
				continue;
			if (!edited_only(f, s, b)) {
				if (out_patch(o, s->sh.sh_offset, b, s->sh.sh_size) < 0)
					goto oom;
				continue;
			}
			for (unsigned k = 0; k < s->nedits; k++) {
				const struct mce_range *r = &s->edits[k];

				if (out_patch(o, s->sh.sh_offset + r->lo, b + r->lo, r->hi - r->lo) < 0)
					goto oom;
			}
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
	uint8_t old[sizeof(Elf64_Ehdr)];

	/* Appending to a file that has other names changes it under each of
	 * them: a ccache cache in hard_link mode, whose objects are linked
	 * into the build tree, would be corrupted.  Such a file is replaced
	 * by a new one instead, which leaves the other names as they were. */
	if (f->st.st_nlink > 1)
		return mce_write(f, NULL);
	if (build_image(f, &o) < 0)
		goto out;
	fd = f->writable ? dup(f->fd) : open(f->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		mce_fail(f, "cannot open for writing: %s", strerror(errno));
		goto out;
	}
	/* (The old header as the file has it, not as the private map may by
	 * now: to put back if the close fails after the new one is in.) */
	if (o.ehdr_len > sizeof(old) || pread(fd, old, o.ehdr_len, 0) != (ssize_t)o.ehdr_len) {
		mce_fail(f, "cannot read the ELF header back: %s", strerror(errno));
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
	/* A close that fails (a deferred write error) fails the update:
	 * the old header and size go back, through a new descriptor. */
	if (close(fd) == 0) {
		fd = -1;
		ret = 0;
		goto out;
	}
	mce_fail(f, "cannot write: %s", strerror(errno));
	fd = open(f->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, old, o.ehdr_len, 0) != (ssize_t)o.ehdr_len) {
		snprintf(f->err + strlen(f->err), sizeof(f->err) - strlen(f->err),
			 "; and could not put the old header back: %s", strerror(errno));
		goto out;
	}
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

/* One stretch of an overwrite: the bytes at AT that change, and what the
 * file had there, to put back if the overwrite fails. */
struct span {
	uint64_t at;
	size_t len;
	const uint8_t *now;
	uint8_t *was;
};

/*
 * Where NOW and WAS (LEN bytes each) first and last differ: [*A, *B),
 * empty if nowhere.  Compared a page at a time, so that a megabyte of
 * .data patched for the one word of main_extable_sort_needed costs
 * memcmp()s, not a byte loop.
 */
static void differs(const uint8_t *now, const uint8_t *was, size_t len, size_t *a, size_t *b)
{
	size_t lo = 0, hi = len;

	while (lo < len) {
		size_t k = len - lo < 4096 ? len - lo : 4096;

		if (memcmp(now + lo, was + lo, k))
			break;
		lo += k;
	}
	while (lo < len && now[lo] == was[lo])
		lo++;
	while (hi > lo) {
		size_t k = hi - lo < 4096 ? hi - lo : 4096;

		if (memcmp(now + hi - k, was + hi - k, k))
			break;
		hi -= k;
	}
	while (hi > lo && now[hi - 1] == was[hi - 1])
		hi--;
	*a = lo;
	*b = hi;
}

/*
 * The spans of O's patches that differ from the file, with a copy of the
 * old bytes of each in *SAVED (one buffer, malloc'ed): into V, how many;
 * -1 with errno.  Only they are written, so that a failure or a kill can
 * touch nothing else.  The file is read through a shared mapping of its
 * own (f->map is private, and holds the edits), which costs page-table
 * entries, not copies: a patch is a whole section.
 */
static long spans_of(struct mce_file *f, const struct out *o, struct span *v, uint8_t **saved)
{
	struct mce_view *view;
	const uint8_t *now_file = mce_view_open(&view, f->path, f->fd, f->size);
	size_t total = 0;
	long n = 0;

	*saved = NULL;
	if (!now_file)
		return -1;
	for (size_t i = 0; i < o->n; i++) {
		const uint8_t *now = o->iov[i].iov_base;
		size_t a, b;

		differs(now, now_file + o->at[i], o->iov[i].iov_len, &a, &b);
		if (a < b) {
			v[n++] = (struct span){ o->at[i] + a, b - a, now + a, NULL };
			total += b - a;
		}
	}
	/* (Its pages faulted in at once: a sorted ORC table is hundreds.) */
	*saved = malloc(total + 1);
	if (*saved) {
		mc_prefault_write(*saved, total);
		total = 0;
		for (long k = 0; k < n; k++) {
			v[k].was = *saved + total;
			memcpy(v[k].was, now_file + v[k].at, v[k].len);
			total += v[k].len;
		}
	} else {
		n = -1;
	}
	mce_view_close(view);
	return n;
}

/* Put the old bytes of V[0..N) back through FD: 0, or -1 (errno) if one
 * could not be (every one is tried). */
static int spans_undo(int fd, const struct span *v, size_t n)
{
	int ret = 0, err = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].len && pwrite_all(fd, v[i].was, v[i].len, v[i].at) < 0) {
			ret = -1;
			err = errno;
		}
	errno = err;
	return ret;
}

/* After a failed write (ERR), the old bytes of V[0..N) back through FD;
 * f->err says what happened.  Always -1. */
static int over_failed(struct mce_file *f, int fd, const struct span *v, size_t n, int err)
{
	if (spans_undo(fd, v, n) < 0)
		return mce_fail(f, "cannot write: %s; and could not put the old bytes back (%s): "
				"the tables are torn, rebuild the image", strerror(err),
				strerror(errno));
	return mce_fail(f, "cannot write: %s (the old bytes are back)", strerror(err));
}

/*
 * Overwrite, in the linked image itself, the bytes that the changes made
 * differ, as the kernel's sorttable does (see the header).
 */
int mce_write_over(struct mce_file *f)
{
	struct out o = { 0 };
	struct span *v = NULL;
	uint8_t *saved = NULL;
	long n = 0, i;
	int fd = -1, ret = -1;

	/* (As mce_write_in_place(): the other names keep the old file.) */
	if (f->st.st_nlink > 1)
		return mce_write(f, NULL);
	if (!f->writable || f->eh.e_phnum == 0)
		return mce_fail(f, "only a linked image opened for writing is changed in place");
	if (build_image(f, &o) < 0)
		goto out;
	for (size_t k = 0; k < o.n; k++)
		if (o.at[k] + o.iov[k].iov_len > f->size)
			o.total = UINT64_MAX;
	if (o.total != f->size) {
		mce_fail(f, "the changes need room the file does not have: they are only "
			 "written to a new file (without --in-place)");
		goto out;
	}
	v = calloc(o.n ? o.n : 1, sizeof(*v));
	if (!v) {
		mce_fail(f, "out of memory");
		goto out;
	}
	n = spans_of(f, &o, v, &saved);
	if (n < 0) {
		mce_fail(f, "cannot read: %s", strerror(errno));
		goto out;
	}
	/* (Through a descriptor of its own, whose close() may report a
	 * deferred write error, as on NFS.) */
	fd = dup(f->fd);
	if (fd < 0) {
		mce_fail(f, "cannot write: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < n; i++) {
		size_t done;

		if (pwrite_done(fd, v[i].now, v[i].len, v[i].at, &done) < 0) {
			/* (Only what went in goes back: a write refused
			 * outright, as past RLIMIT_FSIZE, changed nothing.) */
			v[i].len = done;
			over_failed(f, fd, v, (size_t)i + 1, errno);
			goto out;
		}
	}
	ret = close(fd);
	fd = -1;
	if (ret < 0)
		over_failed(f, f->fd, v, (size_t)n, errno);
out:
	if (fd >= 0)
		close(fd);
	free(saved);
	free(v);
	out_free(&o);
	return ret;
}

/*
 * Create TMP, whose name ends in six X's, as a new file (O_EXCL) with the
 * permission bits of MODE (keep_meta() sets the rest once it is written):
 * the X's become letters until the name is free.  Each call draws its own
 * seed from getrandom(): no state outlives the call, and O_EXCL, not the
 * name's secrecy, is what keeps another user's file from being opened.
 */
int mce_make_temp(char *tmp, mode_t mode)
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
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode & 0777);
		if (fd < 0 && errno != EEXIST)
			return -1;
	}
	return fd;	/* (-1: errno is EEXIST) */
}

/*
 * What the file a rewrite replaces had, for the new one: as binutils'
 * strip and objcopy keep them, its owner and group, its mode, with
 * setuid and setgid only where the owner and group could be kept (root's
 * rewrite of another user's setuid program must not make it setuid
 * root), and its extended attributes, ACLs among them.
 */
struct keep {
	struct stat st;
	bool owner;		/* give the new file st's owner and group */
	int xfd;		/* where the extended attributes come from, */
	const char *xpath;	/* by descriptor or else by path; or neither */
};

static ssize_t x_list(const struct keep *k, char *buf, size_t len)
{
	return k->xfd >= 0 ? flistxattr(k->xfd, buf, len) : listxattr(k->xpath, buf, len);
}

static ssize_t x_get(const struct keep *k, const char *name, void *buf, size_t len)
{
	return k->xfd >= 0 ? fgetxattr(k->xfd, name, buf, len)
			   : getxattr(k->xpath, name, buf, len);
}

/*
 * An attribute that grants privilege (security.capability, a security
 * label) and that this user may not set is dropped, as setuid is when the
 * owner cannot be kept; any other that cannot be kept fails the rewrite.
 */
static bool droppable(const char *name, int err)
{
	return !strncmp(name, "security.", 9) &&
	       (err == EPERM || err == EACCES || err == ENOTSUP);
}

/* Copy K's extended attributes to FD: how many, or -1 (f->err says). */
static int copy_xattrs(struct mce_file *f, int fd, const struct keep *k)
{
	char small[256], *names = small, *val = NULL;
	ssize_t len;
	int n = 0;

	if (k->xfd < 0 && !k->xpath)
		return 0;
	/* (One call for the usual file, which has none.) */
	len = x_list(k, small, sizeof(small));
	if (len < 0 && errno == ERANGE && (len = x_list(k, NULL, 0)) > 0 &&
	    (names = malloc((size_t)len)))
		len = x_list(k, names, (size_t)len);
	if (!names)
		return mce_fail(f, "out of memory");
	if (len < 0) {
		n = errno == ENOTSUP ? 0 : mce_fail(f, "cannot list extended attributes: %s",
						       strerror(errno));
		goto out;
	}
	for (const char *a = names; a < names + len; a += strlen(a) + 1) {
		ssize_t vl = x_get(k, a, NULL, 0);
		void *v = vl >= 0 ? realloc(val, (size_t)vl + 1) : NULL;

		if (v)
			val = v;
		if (vl < 0 || !v || (vl = x_get(k, a, val, (size_t)vl)) < 0) {
			n = mce_fail(f, "cannot read extended attribute %s: %s", a,
				     strerror(vl < 0 ? errno : ENOMEM));
			goto out;
		}
		if (fsetxattr(fd, a, val, (size_t)vl, 0) < 0 && !droppable(a, errno)) {
			n = mce_fail(f, "cannot keep extended attribute %s: %s", a, strerror(errno));
			goto out;
		}
		n++;
	}
out:
	if (names != small)
		free(names);
	free(val);
	return n;
}

/* Give the new file FD what K says it keeps; -1 (f->err says) if not. */
static int keep_meta(struct mce_file *f, int fd, const struct keep *k)
{
	mode_t mode = k->st.st_mode & 07777;
	bool changed = false;
	struct stat now;
	int nx;

	if (fstat(fd, &now) < 0)
		return mce_fail(f, "cannot stat the new file: %s", strerror(errno));
	/* (A chown() refused, as it is to anyone but root giving a file
	 * away, or to an owner a user namespace does not map (EINVAL), only
	 * costs the special bits below; any other failure fails.) */
	if (k->owner && (now.st_uid != k->st.st_uid || now.st_gid != k->st.st_gid)) {
		if (fchown(fd, k->st.st_uid, k->st.st_gid) == 0) {
			now.st_uid = k->st.st_uid;
			now.st_gid = k->st.st_gid;
			changed = true;	/* (chown() clears setuid and setgid) */
		} else if (errno != EPERM && errno != EINVAL) {
			return mce_fail(f, "cannot keep the owner: %s", strerror(errno));
		}
	}
	if (now.st_uid != k->st.st_uid)
		mode &= ~(mode_t)S_ISUID;
	if (now.st_gid != k->st.st_gid)
		mode &= ~(mode_t)S_ISGID;
	nx = copy_xattrs(f, fd, k);
	if (nx < 0)
		return -1;
	/* An ACL sets the group bits: the mode goes last, after it.  For the
	 * usual 0644 file under umask 022 nothing is left to do here. */
	if ((changed || nx || (now.st_mode & 07777) != mode) && fchmod(fd, mode) < 0)
		return mce_fail(f, "cannot set the mode of the new file: %s", strerror(errno));
	return 0;
}

/*
 * The new file is written unnamed (O_TMPFILE) in the target's directory
 * and only then given a name, STAGE (".NAME.mcloc~"), and renamed over
 * the target: a tool killed while it writes leaves nothing behind, and
 * one killed between the link and the rename leaves a complete output
 * under a name that says what it is, which the next run on the same
 * target removes (one unlink, no directory scan) if it is a regular file
 * of the caller's or of the target's owner (clear_stage()); anything else
 * under that name (in a shared directory, a third user's) stays, and the
 * run writes a named temporary file instead.  Runs on the same
 * target at once (make -j with a bad Makefile) may take each other's
 * staged file: every file ever under that name is complete, so whichever
 * is renamed, the target is a whole object.  Returns the descriptor, or
 * -1 where the file system has no O_TMPFILE (the caller then makes a
 * named temporary file).
 */
static int open_unnamed(const char *dir, mode_t mode)
{
	return open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode & 0777);
}

/* The name a new TARGET is staged under in DIR (see above). */
static char *stage_name(const char *dir, const char *base)
{
	char *s;

	return asprintf(&s, "%s/.%s.mcloc~", dir, base) < 0 ? NULL : s;
}

/*
 * What a rewrite of PATH replaces: PATH, or the file it leads to when it
 * is a symbolic link, whose link stays (as strip keeps it).  NULL when
 * out of memory.
 */
static char *real_target(const char *path)
{
	struct stat st;
	char *r;

	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && (r = realpath(path, NULL)))
		return r;
	return strdup(path);
}

/*
 * Remove what a killed or concurrent run of ours left at STAGE: only a
 * regular file as this run would have made it, this user's or OWNER's
 * (the owner a rewrite keeps).  0 when STAGE is free now; 1 when
 * something else is there (a third user's file in a shared directory, a
 * directory, a link), which is never removed: the caller stages under a
 * name of its own instead.
 */
static int clear_stage(const char *stage, uid_t owner)
{
	struct stat st;

	if (lstat(stage, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISREG(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != owner))
		return 1;
	return unlink(stage) < 0 && errno != ENOENT ? -1 : 0;
}

void mce_unstage(const char *target)
{
	char *real = real_target(target), *dup = real ? strdup(real) : NULL, *s;

	struct stat st;

	if (dup && stat(real, &st) == 0 &&
	    (s = stage_name(dirname(dup), strrchr(real, '/') ? strrchr(real, '/') + 1 : real))) {
		clear_stage(s, st.st_uid);
		free(s);
	}
	free(dup);
	free(real);
}

/* publish()'s answer where the unnamed file cannot be named under STAGE:
 * no /proc, or STAGE holds what this run may not remove. */
#define NO_PROC 1

/* Name the unnamed *FD STAGE, close it (a close that fails is a write
 * error: nothing is replaced), and rename STAGE over TARGET.  -1 with
 * errno, and STAGE not left behind; *FD is -1 once closed.  NO_PROC, *FD
 * still open, when /proc is missing (a chroot, a container) or STAGE is
 * not this run's to clear: the caller writes a named file instead. */
static int publish(int *fd, const char *stage, const char *target, uid_t owner)
{
	char proc[64];
	int tries = 0;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", *fd);
	for (;;) {
		/* (A staged file a killed run left, or a concurrent run's.) */
		int c = clear_stage(stage, owner);

		if (c)
			return c < 0 ? -1 : NO_PROC;
		if (linkat(AT_FDCWD, proc, AT_FDCWD, stage, AT_SYMLINK_FOLLOW) == 0)
			break;
		if (errno == ENOENT)
			return NO_PROC;
		if (errno != EEXIST)
			return -1;
		if (++tries == 8) {
			errno = EBUSY;
			return -1;
		}
	}
	int c = close(*fd), e = errno;

	*fd = -1;
	if (c < 0 || rename(stage, target) < 0) {
		e = c < 0 ? e : errno;
		/* ENOENT: a run on the same target at once unlinked ours and
		 * staged its own, which it renames over the target: that is
		 * a whole object too. */
		if (c == 0 && e == ENOENT)
			return 0;
		unlink(stage);
		errno = e;
		return -1;
	}
	return 0;
}

/* Write O into the new file FD and give it what K keeps. */
static int fill(struct mce_file *f, int fd, const struct out *o, const struct keep *k,
		const char *target)
{
	if ((o->patches ? write_patched(f, fd, o) : write_all(fd, o)) < 0)
		return mce_fail(f, "cannot write beside %s: %s", target, strerror(errno));
	return keep_meta(f, fd, k);
}

/* The new file under a name of its own, TMP, then renamed over TARGET. */
static int write_named(struct mce_file *f, const struct out *o, const struct keep *k,
		       char *tmp, const char *target)
{
	int fd = mce_make_temp(tmp, k->st.st_mode);

	if (fd < 0)
		return mce_fail(f, "cannot create a temporary file beside %s: %s", target,
				strerror(errno));
	if (fill(f, fd, o, k, target) < 0) {
		close(fd);
		goto fail;
	}
	if (close(fd) < 0) {
		mce_fail(f, "cannot write %s: %s", tmp, strerror(errno));
		goto fail;
	}
	if (rename(tmp, target) < 0) {
		mce_fail(f, "cannot replace %s: %s", target, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	unlink(tmp);
	return -1;
}

/*
 * What a rewrite of TARGET keeps (see struct keep): the input's, when
 * the input itself is replaced; an existing output's; and for a new
 * output, the input's mode only, the file being the caller's.
 */
static int what_to_keep(struct mce_file *f, const char *outpath, const char *target,
			struct keep *k)
{
	struct stat tst;

	*k = (struct keep){ .st = f->st, .owner = !outpath, .xfd = outpath ? -1 : f->fd };
	if (outpath && lstat(target, &tst) == 0 && !S_ISLNK(tst.st_mode)) {
		if (!S_ISREG(tst.st_mode))
			return mce_fail(f, "%s: not a regular file", outpath);
		*k = (struct keep){ .st = tst, .owner = true, .xfd = -1, .xpath = target };
	}
	return 0;
}

/*
 * A file that has other names (hard links) is replaced under this one
 * only: the others keep the old contents, which is what keeps a ccache
 * cache in hard_link mode whole.
 */
int mce_write(struct mce_file *f, const char *outpath)
{
	/* (-o FILE is replaced, a link there too, as objcopy and ld do: a
	 * link planted in a shared directory must not lead the write.) */
	char *target = outpath ? strdup(outpath) : real_target(f->path);
	char *dup = target ? strdup(target) : NULL, *tmp = NULL, *stage = NULL;
	struct out o = { 0 };
	struct keep k;
	int fd = -1, ret = -1;

	if (!dup) {
		mce_fail(f, "out of memory");
		goto out;
	}
	if (what_to_keep(f, outpath, target, &k) < 0)
		goto out;
	if (!f->dirty) {
		/* Nothing changed (a tool asked for its -o FILE anyway): the
		 * input's own bytes, copied by the kernel. */
		o.patches = true;
		o.total = f->size;
	} else if (build_image(f, &o) < 0) {
		goto out;
	}
	const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	const char *dir = dirname(dup);

	fd = open_unnamed(dir, k.st.st_mode);
	if (fd >= 0) {
		int p;

		if (!(stage = stage_name(dir, base))) {
			mce_fail(f, "out of memory");
			goto out;
		}
		if (fill(f, fd, &o, &k, target) < 0)
			goto out;
		p = publish(&fd, stage, target, k.st.st_uid);
		if (p < 0) {
			mce_fail(f, "cannot replace %s: %s", target, strerror(errno));
			goto out;
		}
		if (p != NO_PROC) {
			ret = 0;
			goto out;
		}
		close(fd);
		fd = -1;
	}
	/* No O_TMPFILE here, or no /proc to name one through: a named
	 * temporary file. */
	if (asprintf(&tmp, "%s/.%s.XXXXXX", dir, base) < 0) {
		tmp = NULL;
		mce_fail(f, "out of memory");
		goto out;
	}
	ret = write_named(f, &o, &k, tmp, target);
out:
	if (fd >= 0)
		close(fd);
	free(stage);
	free(tmp);
	free(dup);
	free(target);
	out_free(&o);
	return ret;
}
