// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The main program when it was not linked through objpatch: its table
 * comes from GCC's own -mrecord-mcount (or -fpatchable-function-entry),
 * found through dl_iterate_phdr and the section headers of
 * /proc/self/exe.  It has no trampolines of its own, and the library's
 * are out of a call's reach, so a page of jump stubs is mapped within
 * reach of its text.  x86_64: its sites, still calls to glibc's
 * __fentry__, become NOPs in one batch.  aarch64, riscv64: its sites, the
 * NOPs of -fpatchable-function-entry, get the fixed first instruction
 * objpatch link --runtime would have written (mov x9, x30; auipc t0 of the
 * stubs' window), in one batch while the program is still alone.  From
 * then on it is an image like any other.
 */
#include "mcr.h"
#include "images.h"
#include <mcloc/abi.h>
#include "patch.h"
#include "registry.h"

#include <dirent.h>
#include <dlfcn.h>
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#endif
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern struct mcloc_image __mcloc_image __attribute__((visibility("hidden")));

struct main_info {
	uintptr_t bias, text_lo, text_hi;
	const ElfW(Phdr) *phdr;	/* its program headers, as loaded */
	int phnum;
	bool found;
};

static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct main_info *m = data;

	(void)size;
	m->bias = info->dlpi_addr;
	m->phdr = info->dlpi_phdr;
	m->phnum = info->dlpi_phnum;
	m->text_lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			uintptr_t lo = info->dlpi_addr + p->p_vaddr;

			if (lo < m->text_lo)
				m->text_lo = lo;
			if (lo + p->p_memsz > m->text_hi)
				m->text_hi = lo + p->p_memsz;
		}
	}
	m->found = m->text_lo < m->text_hi;
	return 1;		/* the first object is the main program */
}

/* Does a section of TYPE (SHT_SYMTAB, SHT_DYNSYM) of the file FD name
 * NAME? */
static bool has_symbol(int fd, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, unsigned type,
		       const char *name)
{
	size_t len = strlen(name);
	bool found = false;

	for (unsigned i = 1; i < eh->e_shnum && !found; i++) {
		if (sh[i].sh_type != type || sh[i].sh_link >= eh->e_shnum)
			continue;
		const Elf64_Shdr *ss = &sh[sh[i].sh_link];
		Elf64_Sym *syms = mcr_read_at(fd, (off_t)sh[i].sh_offset, sh[i].sh_size);
		char *str = mcr_read_at(fd, (off_t)ss->sh_offset, ss->sh_size);

		for (size_t k = 0; syms && str && k < sh[i].sh_size / sizeof(*syms); k++)
			if (syms[k].st_name + len < ss->sh_size &&
			    !memcmp(str + syms[k].st_name, name, len + 1))
				found = true;
		free(syms);
		free(str);
	}
	return found;
}

/* Do LEN bytes at the link-time address ADDR of M lie in one of its
 * loaded segments (with FLAGS: PF_R, PF_X)?  What the section headers of
 * the program's file say is data: not a reason to read where nothing is
 * mapped. */
static bool in_segment(const struct main_info *m, uint64_t addr, uint64_t len, unsigned flags)
{
	for (int i = 0; i < m->phnum; i++) {
		const ElfW(Phdr) *p = &m->phdr[i];

		if (p->p_type == PT_LOAD && (p->p_flags & flags) == flags &&
		    addr >= p->p_vaddr && addr - p->p_vaddr <= p->p_memsz &&
		    len <= p->p_memsz - (addr - p->p_vaddr))
			return true;
	}
	return false;
}

/* Does table T, as M's loader relocated it, name a parked site, which
 * only objpatch link --runtime leaves (x86_64)?  Such a program registers
 * itself, stripped of the symbol has_symbol() looks for or not: taken
 * here as well, its sites were refused, a second image of the same text. */
static bool parked_table(const struct main_info *m, const Elf64_Shdr *t)
{
#ifdef MCR_PARK	/* (elsewhere no site is parked: nothing to look at) */
	for (size_t i = 0; i < t->sh_size / 8; i++) {
		uintptr_t site;

		/* (Its first byte says it: one byte read, inside the text.) */
		memcpy(&site, (const void *)(m->bias + t->sh_addr + 8 * i), sizeof(site));
		if (site >= m->text_lo && site < m->text_hi &&
		    in_segment(m, site - m->bias, 1, PF_R | PF_X) &&
		    *(const uint8_t *)site == MCR_PARK)
			return true;
	}
#else
	(void)m, (void)t;
#endif
	return false;
}

#if MCR_ONE_STORE
/*
 * Is the process alone, so that instructions other than NOP and BL/JALR
 * may be written?  glibc's flag sees only pthread_create(); a thread made
 * with a raw clone() is seen only by the kernel, in /proc/self/task.
 * Under qemu-user that list also holds the emulator's own threads, which
 * never run the program's code, and which exist before any library's
 * constructor runs: so the tasks listed when libmcloc was loaded, while
 * glibc said the program had no thread, are taken as not the program's
 * (on a kernel of the program's own architecture, the main thread
 * alone).  Any other task is a thread of the program.  What this cannot
 * see is a raw clone() made before libmcloc was loaded: by an earlier
 * constructor, or before a dlopen() of libmcloc.  Without /proc there is
 * no telling, and the answer is no.
 */
#define BORN_MAX 8
static pid_t born[BORN_MAX];
static int nborn = -1;	/* (-1: not known) */

/* How many tasks the process has, the first MAX of them into V; -1
 * without /proc. */
static int list_tasks(pid_t *v, int max)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;

	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.' && n++ < max)
			v[n - 1] = (pid_t)atoi(e->d_name);
	closedir(d);
	return n;
}

static bool born_with(pid_t t)
{
	for (int i = 0; i < nborn; i++)
		if (born[i] == t)
			return true;
	return false;
}

/* Why the program is not alone, or NULL if it is. */
static const char *not_alone(void)
{
	pid_t now[BORN_MAX];
	int n;

#if __has_include(<sys/single_threaded.h>)
	if (!__libc_single_threaded)
		return "it has started threads";
#endif
	if (nborn < 0 || (n = list_tasks(now, BORN_MAX)) < 0)
		return "its threads cannot be counted (no /proc/self/task)";
	if (n > BORN_MAX)
		return "it has started threads";
	for (int i = 0; i < n; i++)
		if (now[i] != getpid() && !born_with(now[i]))
			return "it has started threads";
	return NULL;
}

static void note_born(void)
{
#if __has_include(<sys/single_threaded.h>)
	if (!__libc_single_threaded)
		return;
#endif
	nborn = list_tasks(born, BORN_MAX);
	if (nborn > BORN_MAX)
		nborn = 0;	/* (then none is taken for the emulator's) */
}
#endif

/* Register the main program if it was linked without objpatch:
 * mcloc_init() (plan.c) calls it once, after the first successful init. */
/* The main program's file, as far as its table goes: the table section
 * T (NULL: none), and whether the program registers that table itself
 * (SELF: linked with objpatch link --runtime, its constructor run or
 * still to come). */
struct main_file {
	int fd;
	Elf64_Ehdr eh;
	Elf64_Shdr *sh;
	char *names;
	const Elf64_Shdr *t;
	bool self;
};

static void main_file_close(struct main_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	free(f->sh);
	free(f->names);
}

/* Read M's file into F (main_file_close() it even on failure): false
 * when it cannot be read as a 64-bit ELF file with section headers. */
static bool main_file_open(const struct main_info *m, struct main_file *f)
{
	Elf64_Ehdr *eh = &f->eh;

	*f = (struct main_file){ .fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC) };
	if (f->fd < 0 || pread(f->fd, eh, sizeof(*eh), 0) != sizeof(*eh) ||
	    memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shstrndx >= eh->e_shnum)
		return false;
	f->sh = mcr_read_at(f->fd, (off_t)eh->e_shoff, (size_t)eh->e_shnum * sizeof(*f->sh));
	if (!f->sh)
		return false;
	const Elf64_Shdr *sn = &f->sh[eh->e_shstrndx];
	f->names = mcr_read_at(f->fd, (off_t)sn->sh_offset, sn->sh_size);
	if (!f->names)
		return false;
	f->names[sn->sh_size] = 0;
	for (unsigned i = 1; i < eh->e_shnum && !f->t; i++)
		if (f->sh[i].sh_name < sn->sh_size && (f->sh[i].sh_flags & SHF_ALLOC) &&
		    f->sh[i].sh_type == SHT_PROGBITS &&
		    (!strcmp(f->names + f->sh[i].sh_name, "__mcount_loc") ||
		     !strcmp(f->names + f->sh[i].sh_name, "__patchable_function_entries")))
			f->t = &f->sh[i];
	/* (A table that is not where the program is loaded is none: the
	 * file's headers lie, or are not the program's.) */
	if (f->t && !in_segment(m, f->t->sh_addr, f->t->sh_size, PF_R))
		f->t = NULL;
	/* Its descriptor's name (gone with strip), the reference its
	 * constructor makes to the library's registration (which strip
	 * keeps: .dynsym), or a parked site say it registers itself. */
	f->self = f->t && (has_symbol(f->fd, eh, f->sh, SHT_SYMTAB, "__mcloc_image") ||
			   has_symbol(f->fd, eh, f->sh, SHT_DYNSYM, "mcloc_register_image") ||
			   parked_table(m, f->t));
	return true;
}

bool mcr_main_registered(void)
{
	struct main_info m = { 0 };

	dl_iterate_phdr(first_object, &m);
	return m.found && mcr_covers(m.text_lo, m.text_hi);
}

bool mcr_main_registers_itself(void)
{
	struct main_info m = { 0 };
	struct main_file f;
	bool self;

	dl_iterate_phdr(first_object, &m);
	self = m.found && main_file_open(&m, &f) && f.self;
	if (m.found)
		main_file_close(&f);
	return self;
}

static int discover_main(char *err, size_t errlen)
{
	struct main_info m = { 0 };
	struct main_file f;
	int ret = 0;
	uintptr_t *tab = NULL;

	dl_iterate_phdr(first_object, &m);
	if (!m.found || mcr_covers(m.text_lo, m.text_hi))
		return 0;	/* registered itself (objpatch link --runtime) */
	/* A program linked with --runtime whose constructor has not run
	 * yet also has a table: it is left to register itself. */
	const Elf64_Shdr *t = main_file_open(&m, &f) && !f.self ? f.t : NULL;
	if (!t || t->sh_size < 8)
		goto out;

	size_t n = t->sh_size / 8, k = 0;
#if MCR_ONE_STORE
	/* The fixed first instruction of each site is not one that may
	 * change while another thread runs it: this is done while the
	 * program is still alone (an LD_PRELOADed library's constructor),
	 * or not at all. */
	const char *why = not_alone();
	if (why) {
		mcr_say(0, "the main program's sites are left alone: %s (link it with objpatch "
			"link --runtime, or initialise libmcloc first)", why);
		goto out;
	}
#endif
	uint8_t *stubs = mcr_near_page(m.text_lo, m.text_hi);
	if (!stubs) {
		snprintf(err, errlen, "no page within reach of the main program's text");
		ret = -ENOMEM;
		goto out;
	}
	mcr_tramp_stubs(stubs, __mcloc_image.tramp_args, __mcloc_image.tramp_regs);
	mprotect(stubs, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC);
	tab = malloc(n * sizeof(*tab));
	struct mcr_poke *pk = calloc(2 * n + 1, sizeof(*pk));
	if (!tab || !pk) {
		free(pk);
		ret = -ENOMEM;
		goto out;
	}
	/* The table as the loader relocated it (GCC's is byte-aligned). */
	memcpy(tab, (const void *)(m.bias + t->sh_addr), n * 8);
	size_t np = 0;
#if !MCR_ONE_STORE
	uintptr_t fentry = (uintptr_t)dlsym(RTLD_DEFAULT, "__fentry__");
#endif
	for (size_t i = 0; i < n; i++) {
		if (!tab[i])
			continue;	/* (a discarded function's) */
		/* One outside the text stays in the table, untouched:
		 * registration refuses it, and counts it in its one line. */
		if (tab[i] < m.text_lo || tab[i] >= m.text_hi) {
			tab[k++] = tab[i];
			continue;
		}
#if MCR_ONE_STORE
		/* Its NOPs become what objpatch link --runtime writes: the
		 * fixed instruction, then the NOP that toggles, one poke per
		 * word that changes. */
		uint8_t out[8];

		/* (One of no form this path prepares is left as it is, out
		 * of the table, where registration might take a form of its
		 * own that was never made ready: counted as refused here.) */
		if (mcr_site_prepare(tab[i], (uintptr_t)stubs, (uintptr_t)stubs + MCR_STUB_SIZE,
				     out)) {
			mcr_nrefused++;
			continue;
		}
		for (size_t w = 0; w < 8; w += 4)
			if (memcmp((const void *)(tab[i] + w), out + w, 4)) {
				pk[np].addr = tab[i] + w;
				pk[np].len = 4;
				memcpy(pk[np].old_bytes, (const void *)(tab[i] + w), 4);
				memcpy(pk[np].new_bytes, out + w, 4);
				np++;
			}
		tab[k++] = tab[i];
#else
		struct mcr_site st;

		/* A site refused here stays in the table: registration
		 * refuses it again, and counts it for its one line. */
		tab[k++] = tab[i];
		if (mcr_site_find(tab[i], fentry, &st))
			continue;
		/* Every compiled-in call becomes a NOP: the starting state. */
		if (st.is_call) {
			pk[np].addr = tab[i];
			pk[np].len = (uint8_t)st.len;
			memcpy(pk[np].old_bytes, (const void *)tab[i], st.len);
			mcr_encode(tab[i], st.len, 0, pk[np].new_bytes);
			np++;
		}
#endif
	}
	/* Under the lock, as every batch: another thread's first call into
	 * the library returns from mcloc_init() while this one still runs
	 * here, and its batch would share the SIGTRAP handler's. */
	pthread_mutex_lock(&mcr_lock);
	ret = mcr_patch(pk, np, NULL, 0, err, errlen);
	pthread_mutex_unlock(&mcr_lock);
	free(pk);
	if (ret)
		goto out;

	struct mcloc_image *d = calloc(1, sizeof(*d));
	if (!d) {
		ret = -ENOMEM;
		goto out;
	}
	*d = (struct mcloc_image){ .magic = MCLOC_IMAGE_MAGIC, .version = MCLOC_IMAGE_VERSION,
				   .mcount_start = (uintptr_t)tab,
				   .mcount_stop = (uintptr_t)(tab + k),
				   .tramp_args = (uintptr_t)stubs,
				   .tramp_regs = (uintptr_t)stubs + MCR_STUB_SIZE,
				   .base = m.bias };
	tab = NULL;	/* the image keeps it */
	ret = mcloc_register_image(d);
out:
	main_file_close(&f);
	free(tab);
	return ret;
}

__attribute__((constructor(101))) static void discover_hook(void)
{
	mcr_hooks.after_init = discover_main;
#if MCR_ONE_STORE
	note_born();
#endif
}
