// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * zydis-image LIB.so OUT.S SYMBOL...: prelink a shared library into the
 * static tools, at build time.
 *
 * Debian ships Zydis only as libZydis.so, and the static tools cannot ask
 * ld.so for it.  Mapping and relocating it on every run (the tools used to)
 * cost about a tenth of a recordmcount run: four mappings, five mprotects,
 * 2,500 relocations and the copy-on-write faults of seven pages, paid once
 * per object in a kernel build.  All of that is the same every time, so it
 * is done here, once: the library's segments become one read-only,
 * executable section of the tool, laid out at their own offsets from one
 * page-aligned label, with every relocated word written as an assembler
 * expression the static link resolves:
 *
 *   RELATIVE               ->  .quad mc_zydis_image + addend
 *   64, GLOB_DAT, JUMP_SLOT ->  .quad mc_zydis_image + value (defined)
 *                              .quad name (an import: memcpy, strlen, ...)
 *
 * An import the tool does not define fails the link by name; a weak one
 * nobody defines (__gmon_start__, the TM clone hooks) is 0, as ld.so would
 * leave it.  Each SYMBOL becomes a global function mc_zydis_SYMBOL, and
 * the library's initialisers a table, mc_zydis_inits, for zydis.c to run.
 *
 * The library must not need what the image cannot give: thread-local
 * storage, relocation types other than those above, or writable data
 * outside RELRO (the image is read-only at run time; the 16 bytes of
 * .data and .bss Zydis has are crtstuff's, written only at unload, which
 * never comes).  Anything unexpected is refused, and the build stops.
 */
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *lib;

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: error: zydis-image: ", lib);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

struct slot {
	uint64_t at;		/* offset in the image */
	const char *sym;	/* NULL: relative to the image */
	uint64_t add;
};

static uint8_t *file;
static size_t fsize;
static const Elf64_Ehdr *eh;
static const Elf64_Phdr *ph;
static const Elf64_Sym *dynsym;
static size_t ndynsym;
static const char *dynstr;
static size_t dynstrsz;
static struct slot *slots;
static size_t nslots;

/* The file bytes behind an image offset range, or die. */
static const void *at_vaddr(uint64_t va, uint64_t len)
{
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];

		if (p->p_type == PT_LOAD && va >= p->p_vaddr && len <= p->p_filesz &&
		    va - p->p_vaddr <= p->p_filesz - len)
			return file + p->p_offset + (va - p->p_vaddr);
	}
	die("address 0x%llx+%llu is not in a loaded segment", (unsigned long long)va,
	    (unsigned long long)len);
	return NULL;
}

static const char *sym_name(const Elf64_Sym *s)
{
	if (s->st_name >= dynstrsz)
		die("symbol name out of range");
	return dynstr + s->st_name;
}

static void add_relocs(uint64_t va, uint64_t size)
{
	if (!size)
		return;
	if (size % sizeof(Elf64_Rela))
		die("odd relocation table size");

	const Elf64_Rela *r = at_vaddr(va, size);
	size_t n = size / sizeof(*r);

	slots = realloc(slots, (nslots + n) * sizeof(*slots));
	if (!slots)
		die("out of memory");
	for (size_t i = 0; i < n; i++) {
		uint32_t type = ELF64_R_TYPE(r[i].r_info);
		uint32_t si = ELF64_R_SYM(r[i].r_info);
		struct slot *s = &slots[nslots];

		if (type == R_X86_64_NONE)
			continue;
		*s = (struct slot){ r[i].r_offset, NULL, (uint64_t)r[i].r_addend };
		if (type != R_X86_64_RELATIVE) {
			if (type != R_X86_64_64 && type != R_X86_64_GLOB_DAT &&
			    type != R_X86_64_JUMP_SLOT)
				die("relocation type %u is not supported", type);
			if (si >= ndynsym)
				die("relocation symbol out of range");

			const Elf64_Sym *sym = &dynsym[si];
			uint64_t add = type == R_X86_64_64 ? (uint64_t)r[i].r_addend : 0;

			if (sym->st_shndx != SHN_UNDEF) {
				s->add = sym->st_value + add;
			} else if (ELF64_ST_BIND(sym->st_info) == STB_WEAK) {
				s->sym = "0";	/* nobody here defines it */
				s->add = 0;
			} else {
				s->sym = sym_name(sym);
				s->add = add;
			}
		}
		nslots++;
	}
}

static int by_at(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

static const Elf64_Sym *find(const char *name)
{
	for (size_t i = 1; i < ndynsym; i++)
		if (dynsym[i].st_shndx != SHN_UNDEF && !strcmp(sym_name(&dynsym[i]), name))
			return &dynsym[i];
	die("exports no %s", name);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: zydis-image LIB.so OUT.S [SYMBOL...]\n");
		return 2;
	}
	lib = argv[1];

	FILE *in = fopen(lib, "rb");
	long len = in && !fseek(in, 0, SEEK_END) ? ftell(in) : -1;

	if (len <= 0 || fseek(in, 0, SEEK_SET))
		die("cannot read: %s", len ? strerror(errno) : "empty file");
	fsize = (size_t)len;
	file = malloc(fsize);
	if (!file || fread(file, 1, fsize, in) != fsize)
		die("cannot read: %s", strerror(errno));
	fclose(in);

	eh = (const Elf64_Ehdr *)file;
	if (fsize < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_machine != EM_X86_64 || eh->e_type != ET_DYN ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > fsize ||
	    (fsize - eh->e_phoff) / sizeof(Elf64_Phdr) < eh->e_phnum)
		die("not an x86_64 shared library");
	ph = (const Elf64_Phdr *)(file + eh->e_phoff);

	uint64_t span = 0, last_end = 0;
	const Elf64_Dyn *dyn = NULL;
	size_t ndyn = 0;

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];

		if (p->p_type == PT_TLS)
			die("it uses thread-local storage");
		if (p->p_type == PT_DYNAMIC) {
			dyn = at_vaddr(p->p_vaddr, p->p_filesz);
			ndyn = p->p_filesz / sizeof(*dyn);
		}
		if (p->p_type != PT_LOAD)
			continue;
		if (p->p_offset > fsize || p->p_filesz > fsize - p->p_offset ||
		    p->p_memsz < p->p_filesz || p->p_vaddr < last_end)
			die("segment %u is out of order or out of the file", i);
		last_end = span = p->p_vaddr + p->p_memsz;
	}
	if (!dyn)
		die("no dynamic section");

	/* The image is read-only: whatever the library may write must lie
	 * under RELRO (written only by relocation, here at build time), but
	 * for crtstuff's __dso_handle and completed.0, 16 bytes at most. */
	uint64_t relro_end = 0, writable = 0;

	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_GNU_RELRO)
			relro_end = ph[i].p_vaddr + ph[i].p_memsz;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		uint64_t end = p->p_vaddr + p->p_memsz;

		if (p->p_type == PT_LOAD && (p->p_flags & PF_W))
			writable += end - (relro_end > p->p_vaddr ? (relro_end < end ? relro_end : end)
								 : p->p_vaddr);
	}
	if (writable > 16)
		die("it has %llu bytes of writable data, and the image is read-only",
		    (unsigned long long)writable);

	uint64_t rela = 0, relasz = 0, jmprel = 0, pltsz = 0, init = 0, inita = 0, initsz = 0;
	uint64_t symtab = 0, strtab = 0;

	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		uint64_t v = dyn[i].d_un.d_val;

		switch (dyn[i].d_tag) {
		case DT_SYMTAB: symtab = v; break;
		case DT_STRTAB: strtab = v; break;
		case DT_STRSZ: dynstrsz = v; break;
		case DT_RELA: rela = v; break;
		case DT_RELASZ: relasz = v; break;
		case DT_JMPREL: jmprel = v; break;
		case DT_PLTRELSZ: pltsz = v; break;
		case DT_INIT: init = v; break;
		case DT_INIT_ARRAY: inita = v; break;
		case DT_INIT_ARRAYSZ: initsz = v; break;
		case DT_PLTREL:
			if (v != DT_RELA)
				die("PLT relocations are not RELA");
			break;
		case DT_NEEDED: case DT_SONAME: case DT_FINI: case DT_FINI_ARRAY:
		case DT_FINI_ARRAYSZ: case DT_SYMENT: case DT_PLTGOT: case DT_RELAENT:
		case DT_FLAGS: case DT_FLAGS_1: case DT_VERNEED: case DT_VERNEEDNUM:
		case DT_VERSYM: case DT_RELACOUNT: case DT_DEBUG: case DT_GNU_HASH:
			break;
		default:
			die("unexpected dynamic tag 0x%llx", (unsigned long long)dyn[i].d_tag);
		}
	}
	if (!symtab || !strtab || !dynstrsz)
		die("no dynamic symbols");
	dynstr = at_vaddr(strtab, dynstrsz);
	/* The symbol table ends where the string table starts, in every
	 * layout GNU ld produces; check the entries stay inside the file. */
	if (strtab <= symtab)
		die("dynamic string table before the symbol table");
	ndynsym = (strtab - symtab) / sizeof(Elf64_Sym);
	dynsym = at_vaddr(symtab, ndynsym * sizeof(Elf64_Sym));

	add_relocs(rela, relasz);
	add_relocs(jmprel, pltsz);
	qsort(slots, nslots, sizeof(*slots), by_at);
	for (size_t i = 0; i < nslots; i++) {
		at_vaddr(slots[i].at, 8);
		if (i && slots[i].at < slots[i - 1].at + 8)
			die("overlapping relocations at 0x%llx", (unsigned long long)slots[i].at);
	}

	FILE *out = fopen(argv[2], "w");

	if (!out)
		die("cannot write %s: %s", argv[2], strerror(errno));
	fprintf(out, "/* Generated by zydis-image from %s: do not edit. */\n", lib);
	fprintf(out, "\t.section .mcloc.zydis,\"ax\",@progbits\n\t.balign 4096\n");
	fprintf(out, "\t.globl mc_zydis_image\n\t.hidden mc_zydis_image\nmc_zydis_image:\n");

	uint64_t pos = 0;
	size_t k = 0;

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];

		if (p->p_type != PT_LOAD)
			continue;
		if (p->p_vaddr > pos)
			fprintf(out, "\t.zero %llu\n", (unsigned long long)(p->p_vaddr - pos));
		pos = p->p_vaddr;
		for (uint64_t end = p->p_vaddr + p->p_filesz; pos < end;) {
			uint64_t next = k < nslots && slots[k].at < end ? slots[k].at : end;

			if (next > pos)
				fprintf(out, "\t.incbin \"%s\", %llu, %llu\n", lib,
					(unsigned long long)(p->p_offset + (pos - p->p_vaddr)),
					(unsigned long long)(next - pos));
			pos = next;
			if (pos < end) {
				if (slots[k].sym)
					fprintf(out, "\t.quad %s + %llu\n", slots[k].sym,
						(unsigned long long)slots[k].add);
				else
					fprintf(out, "\t.quad mc_zydis_image + %llu\n",
						(unsigned long long)slots[k].add);
				pos += 8;
				k++;
			}
		}
		if (p->p_memsz > p->p_filesz)
			fprintf(out, "\t.zero %llu\n", (unsigned long long)(p->p_memsz - p->p_filesz));
		pos = p->p_vaddr + p->p_memsz;
	}
	if (k != nslots || pos != span)
		die("relocations outside the loaded segments");

	for (int i = 3; i < argc; i++) {
		const Elf64_Sym *s = find(argv[i]);

		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC)
			die("%s is not a function", argv[i]);
		fprintf(out, "\t.globl mc_zydis_%s\n\t.hidden mc_zydis_%s\n\t.type mc_zydis_%s, @function\n"
			"\t.set mc_zydis_%s, mc_zydis_image + %llu\n",
			argv[i], argv[i], argv[i], argv[i], (unsigned long long)s->st_value);
	}

	/* The initialisers, in ld.so's order: DT_INIT, then DT_INIT_ARRAY.
	 * The array's entries are relocated words; their targets are known. */
	fprintf(out, "\t.section .rodata\n\t.balign 8\n\t.globl mc_zydis_inits\n\t.hidden mc_zydis_inits\nmc_zydis_inits:\n");
	if (init)
		fprintf(out, "\t.quad mc_zydis_image + %llu\n", (unsigned long long)init);
	for (uint64_t a = inita; a < inita + initsz; a += 8) {
		const struct slot key = { a, NULL, 0 };
		const struct slot *s = bsearch(&key, slots, nslots, sizeof(*slots), by_at);

		if (!s || s->sym)
			die("initialiser 0x%llx is not relocated to the library", (unsigned long long)a);
		fprintf(out, "\t.quad mc_zydis_image + %llu\n", (unsigned long long)s->add);
	}
	fprintf(out, "\t.quad 0\n\t.section .note.GNU-stack,\"\",@progbits\n");
	if (fclose(out))
		die("cannot write %s: %s", argv[2], strerror(errno));
	return 0;
}
