// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Reaching Zydis: linked normally, or, in the fully static build, mapped
 * by a minimal loader for one known library.  See zydis.h for why.
 *
 * The loader does what ld.so would do for libZydis and nothing more: map
 * the PT_LOAD segments, apply the RELATIVE, 64, GLOB_DAT and JUMP_SLOT
 * relocations (binding its few libc imports to this program's static
 * libc), protect the segments and RELRO, and run its constructors.
 * Anything else it meets (TLS, another relocation type, an import it
 * does not know) is refused with a message, never guessed at.
 */
#include "zydis.h"

#include <stdio.h>
#include <string.h>

#ifndef MCLOC_ZYDIS_PATH

const struct mc_zydis *mc_zydis(char *err, size_t len)
{
	static const struct mc_zydis z = {
		ZydisDecoderInit, ZydisDecoderDecodeInstruction, ZydisMnemonicGetString
	};

	(void)err;
	(void)len;
	return &z;
}

#else

#include <assert.h>
#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void __stack_chk_fail(void);

struct image {
	uint8_t *base;
	const Elf64_Sym *symtab;
	const char *strtab;
	const uint32_t *gnu_hash;
};

static const struct {
	const char *name;
	void *addr;
} imports[] = {
	{ "memcpy", (void *)memcpy },
	{ "memset", (void *)memset },
	{ "strlen", (void *)strlen },
	{ "__assert_fail", (void *)__assert_fail },
	{ "__stack_chk_fail", (void *)__stack_chk_fail },
};

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (uint8_t)*s;
	return h;
}

/* An exported definition of the library, by the GNU hash table. */
static void *lookup(const struct image *im, const char *name)
{
	const uint32_t *g = im->gnu_hash;
	uint32_t nbuckets = g[0], symoff = g[1], bloom = g[2];
	const uint32_t *buckets = g + 4 + bloom * 2;	/* 64-bit bloom words */
	const uint32_t *chain = buckets + nbuckets;
	uint32_t h = gnu_hash(name), i = buckets[h % nbuckets];

	if (i < symoff)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoff];
		const Elf64_Sym *s = &im->symtab[i];

		if ((h | 1) == (h2 | 1) && s->st_shndx != SHN_UNDEF &&
		    !strcmp(im->strtab + s->st_name, name))
			return im->base + s->st_value;
		if (h2 & 1)
			return NULL;
	}
}

static int fail(char *err, size_t len, const char *what, const char *arg)
{
	snprintf(err, len, "cannot load %s: %s%s", MCLOC_ZYDIS_PATH, what, arg ? arg : "");
	return -1;
}

static int relocate(struct image *im, const Elf64_Rela *r, size_t n,
		    char *err, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *where = (uint64_t *)(im->base + r[i].r_offset);
		uint32_t type = ELF64_R_TYPE(r[i].r_info);
		const Elf64_Sym *s = &im->symtab[ELF64_R_SYM(r[i].r_info)];
		uint64_t val = 0;

		if (type == R_X86_64_NONE)
			continue;
		if (type == R_X86_64_RELATIVE) {
			*where = (uint64_t)im->base + (uint64_t)r[i].r_addend;
			continue;
		}
		if (type != R_X86_64_64 && type != R_X86_64_GLOB_DAT &&
		    type != R_X86_64_JUMP_SLOT)
			return fail(err, len, "unsupported relocation type", NULL);
		if (s->st_shndx != SHN_UNDEF) {
			val = (uint64_t)im->base + s->st_value;
		} else {
			const char *name = im->strtab + s->st_name;
			size_t k;

			for (k = 0; k < sizeof(imports) / sizeof(imports[0]); k++)
				if (!strcmp(name, imports[k].name))
					break;
			if (k < sizeof(imports) / sizeof(imports[0]))
				val = (uint64_t)imports[k].addr;
			else if (ELF64_ST_BIND(s->st_info) != STB_WEAK)
				return fail(err, len, "needs the unknown symbol ", name);
		}
		*where = val + (type == R_X86_64_64 ? (uint64_t)r[i].r_addend : 0);
	}
	return 0;
}

static int prot_of(uint32_t f)
{
	return (f & PF_R ? PROT_READ : 0) | (f & PF_W ? PROT_WRITE : 0) |
	       (f & PF_X ? PROT_EXEC : 0);
}

static int load(struct mc_zydis *z, char *err, size_t len)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[16];
	struct image im = { 0 };
	size_t page = (size_t)sysconf(_SC_PAGESIZE), span = 0;
	const Elf64_Dyn *dyn = NULL;
	int fd = open(MCLOC_ZYDIS_PATH, O_RDONLY | O_CLOEXEC), ret = -1;

	if (fd < 0)
		return fail(err, len, "cannot open it", NULL);
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64 ||
	    eh.e_type != ET_DYN || eh.e_phnum > 16 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), (off_t)eh.e_phoff) !=
		    (ssize_t)(eh.e_phnum * sizeof(ph[0]))) {
		fail(err, len, "not an x86_64 shared library", NULL);
		goto out;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_TLS) {
			fail(err, len, "it uses thread-local storage", NULL);
			goto out;
		}
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > span)
			span = ph[i].p_vaddr + ph[i].p_memsz;
	}
	span = (span + page - 1) & ~(page - 1);
	im.base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (im.base == MAP_FAILED) {
		fail(err, len, "out of address space", NULL);
		goto out;
	}
	/* Map every segment writable for relocation; protect afterwards. */
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];

		if (p->p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(im.base + p->p_vaddr);
		if (p->p_type != PT_LOAD)
			continue;
		uint64_t start = p->p_vaddr & ~(uint64_t)(page - 1);
		uint64_t fend = p->p_vaddr + p->p_filesz;
		uint64_t mend = (p->p_vaddr + p->p_memsz + page - 1) & ~(uint64_t)(page - 1);
		uint64_t fpage_end = (fend + page - 1) & ~(uint64_t)(page - 1);

		if (mmap(im.base + start, fpage_end - start, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_FIXED, fd, (off_t)(p->p_offset - (p->p_vaddr - start))) ==
		    MAP_FAILED) {
			fail(err, len, "cannot map a segment", NULL);
			goto out;
		}
		if (p->p_memsz > p->p_filesz) {
			memset(im.base + fend, 0, fpage_end - fend);
			if (mend > fpage_end &&
			    mmap(im.base + fpage_end, mend - fpage_end, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) {
				fail(err, len, "cannot map its bss", NULL);
				goto out;
			}
		}
	}
	if (!dyn) {
		fail(err, len, "no dynamic section", NULL);
		goto out;
	}
	const Elf64_Rela *rela = NULL, *jmprel = NULL;
	size_t relasz = 0, pltsz = 0, initsz = 0;
	void (**init_array)(void) = NULL;
	void (*init)(void) = NULL;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		uint8_t *p = im.base + dyn->d_un.d_ptr;

		switch (dyn->d_tag) {
		case DT_SYMTAB: im.symtab = (const Elf64_Sym *)p; break;
		case DT_STRTAB: im.strtab = (const char *)p; break;
		case DT_GNU_HASH: im.gnu_hash = (const uint32_t *)p; break;
		case DT_RELA: rela = (const Elf64_Rela *)p; break;
		case DT_RELASZ: relasz = dyn->d_un.d_val; break;
		case DT_JMPREL: jmprel = (const Elf64_Rela *)p; break;
		case DT_PLTRELSZ: pltsz = dyn->d_un.d_val; break;
		case DT_INIT: init = (void (*)(void))p; break;
		case DT_INIT_ARRAY: init_array = (void (**)(void))p; break;
		case DT_INIT_ARRAYSZ: initsz = dyn->d_un.d_val; break;
		case DT_NEEDED: case DT_SONAME: case DT_FINI: case DT_FINI_ARRAY:
		case DT_FINI_ARRAYSZ: case DT_STRSZ: case DT_SYMENT: case DT_PLTGOT:
		case DT_PLTREL: case DT_RELAENT: case DT_FLAGS: case DT_FLAGS_1:
		case DT_VERNEED: case DT_VERNEEDNUM: case DT_VERSYM: case DT_RELACOUNT:
		case DT_DEBUG:
			break;
		default:
			fail(err, len, "unexpected dynamic tag", NULL);
			goto out;
		}
	}
	if (!im.symtab || !im.strtab || !im.gnu_hash) {
		fail(err, len, "no dynamic symbols", NULL);
		goto out;
	}
	if ((rela && relocate(&im, rela, relasz / sizeof(*rela), err, len) < 0) ||
	    (jmprel && relocate(&im, jmprel, pltsz / sizeof(*jmprel), err, len) < 0))
		goto out;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		uint64_t start = p->p_vaddr & ~(uint64_t)(page - 1);
		uint64_t end = (p->p_vaddr + p->p_memsz + page - 1) & ~(uint64_t)(page - 1);

		if (p->p_type == PT_LOAD)
			mprotect(im.base + start, end - start, prot_of(p->p_flags));
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		uint64_t start = p->p_vaddr & ~(uint64_t)(page - 1);
		uint64_t end = (p->p_vaddr + p->p_memsz) & ~(uint64_t)(page - 1);

		if (p->p_type == PT_GNU_RELRO && end > start)
			mprotect(im.base + start, end - start, PROT_READ);
	}
	if (init)
		init();
	for (size_t i = 0; init_array && i < initsz / sizeof(*init_array); i++)
		init_array[i]();

	*(void **)&z->decoder_init = lookup(&im, "ZydisDecoderInit");
	*(void **)&z->decode = lookup(&im, "ZydisDecoderDecodeInstruction");
	*(void **)&z->mnemonic = lookup(&im, "ZydisMnemonicGetString");
	if (!z->decoder_init || !z->decode || !z->mnemonic) {
		fail(err, len, "missing a Zydis entry point", NULL);
		goto out;
	}
	ret = 0;
out:
	if (ret < 0 && im.base && im.base != MAP_FAILED)
		munmap(im.base, span);
	close(fd);
	return ret;
}

const struct mc_zydis *mc_zydis(char *err, size_t len)
{
	static struct mc_zydis z;
	static int state;	/* 0 untried, 1 loaded, -1 failed */
	static char why[256];

	if (!state)
		state = load(&z, why, sizeof(why)) < 0 ? -1 : 1;
	if (state < 0) {
		snprintf(err, len, "%s", why);
		return NULL;
	}
	return &z;
}

#endif
