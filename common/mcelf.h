/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The one ELF layer of mcloc, shared by recordmcount and objpatch.
 *
 * A file is read once, up front: section headers, names, the symbol table
 * and (on demand) each section's data and relocations, all in the host's
 * memory representation through libelf's gelf_* calls, so the callers never
 * see the object's class or byte order.  Every change goes through this
 * layer, marks what it touched dirty, and mce_write() writes the result once,
 * to a temporary file beside the target that is renamed over it.  Nothing
 * outside this file calls gelf_update_* or writes into section data.
 *
 * Functions return 0 (or a count/index) on success and -1 on failure, with
 * the reason in f->err; only a tool's main() turns that into an exit status.
 */
#ifndef MCLOC_ELF_H
#define MCLOC_ELF_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct mce_rel {
	uint64_t offset;	/* in the section; an address in a linked image */
	int64_t addend;		/* RELA only; REL addends live in the section */
	uint32_t sym;
	uint32_t type;		/* MIPS64: the first of the three types */
	uint8_t type2, type3;	/* MIPS64 composite relocations, else 0 */
};

struct mce_sec {
	size_t idx;
	GElf_Shdr sh;
	const char *name;
	Elf_Scn *scn;		/* NULL for sections this layer created */
	Elf_Data *data;		/* memory representation; see mce_sec_data() */
	void *owned;		/* buffer we allocated for data, freed at close */
	struct mce_sec *rela;	/* first REL/RELA section whose sh_info is us */
	struct mce_rel *rels;	/* decoded, for REL/RELA sections */
	size_t nrels;
	size_t *byoff;		/* rels' indexes by offset; see mce_rels_within() */
	bool rels_loaded;
	bool dirty;		/* contents changed: rewrite from data */
	/* With EDIT_KNOWN, the edits lie in these NEDITS ranges of the
	 * data's bytes: only they are written over a linked image
	 * (mce_sec_edited()). */
	bool edit_known;
	unsigned nedits;
	struct mce_range {
		uint64_t lo, hi;
	} edits[4];
	bool is_new;
	bool is_rela;		/* SHT_RELA (else SHT_REL), for relocation sections */
};

struct mce_sym {
	const char *name;
	uint64_t value, size;
	uint32_t shndx;		/* SHN_XINDEX already resolved */
	uint8_t bind, type, other;
	uint16_t raw_shndx;
	uint32_t st_name;
};

struct mce_dynrel;

struct mce_bound {
	uint32_t shndx;
	uint64_t value;
	uint32_t sym;
};

struct mce_file {
	const char *path;
	int fd;
	struct stat st;
	uint8_t *map;		/* private, writable mapping of the input */
	bool writable;		/* opened read-write, for mce_write_in_place() */
	size_t size;
	Elf *elf;
	GElf_Ehdr eh;
	int cls;		/* ELFCLASS32 or ELFCLASS64 */
	unsigned addrsize;	/* 4 or 8, from the class, never the host */
	bool msb;		/* big-endian object */
	bool mips64;		/* MIPS64 r_info layout */
	size_t shnum, shstrndx;
	struct mce_sec *secs;	/* shnum entries (grows with new sections) */
	size_t secs_cap;
	struct mce_sec *symtab, *strtab, *symtab_shndx;
	struct mce_sym *syms;	/* NULL until mce_syms_need() when syms_lazy */
	size_t nsyms;
	bool syms_dirty;
	bool syms_lazy;		/* MCE_OPEN_LAZY_SYMS: syms not read yet */
	Elf_Data *symdata, *symxdata, *strdata;	/* .symtab, its SHNDX, .strtab */
	bool strtab_ends;	/* .strtab ends in NUL */
	struct mce_bound *bounds;	/* code labels sorted by place; first use */
	size_t nbounds;
	size_t bounds_hint;		/* the last answer of mce_label_before() */
	uint32_t *secsym;	/* section index -> its STT_SECTION symbol, or 0;
				 * built on first use */
	size_t nsecsym;
	struct mce_sec **byaddr;	/* allocated sections by address; first use */
	size_t nbyaddr;
	struct mce_dynrel *dynrels;	/* linked images: by address; first use */
	size_t ndynrels;
	bool dynrels_loaded;
	size_t dynrel_hint;		/* where the last mce_dynrel_at() matched */
	uint32_t relative_type;
	void **garbage;		/* replaced buffers names may still point into */
	size_t ngarbage;
	bool dirty;
	struct mce_file *guard_next;	/* the mapped files the SIGBUS handler knows */
	char err[512];
};

/* Set f->err from FMT (for callers that fail on the layer's behalf too);
 * always returns -1. */
int mce_fail(struct mce_file *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Open and parse PATH (read-only; the file itself is never modified). */
int mce_open(struct mce_file *f, const char *path);
/* The same, opening PATH read-write when WRITABLE, for an in-place update
 * (and so failing early on a file that cannot be written). */
int mce_open_mode(struct mce_file *f, const char *path, bool writable);

#define MCE_OPEN_WRITABLE 1u	/* as mce_open_mode()'s WRITABLE */
/*
 * Leave the symbol table where it is: f->syms stays NULL until
 * mce_syms_need(), which the layer's own symbol functions call.  A linked
 * image may carry a million symbols; reading them all costs more than the
 * rest of a sort, which only needs to look at them once (mce_sym_peek(),
 * mce_funcs_next()).
 */
#define MCE_OPEN_LAZY_SYMS 2u
int mce_open_flags(struct mce_file *f, const char *path, unsigned flags);
/* Read the symbols into f->syms if they were left (0, or -1 on a bad one). */
int mce_syms_need(struct mce_file *f);
/* Symbol I, from f->syms or straight from the table (0, or -1). */
int mce_sym_peek(struct mce_file *f, size_t i, struct mce_sym *m);
void mce_close(struct mce_file *f);

/*
 * A read-only view of FD's first SIZE bytes (FD stays the caller's), for
 * an input other than the image (an nm listing) or the image's file as it
 * is now: mapped shared, under the same SIGBUS guard as an image, so that
 * a file shrinking while it is read ends the run with one line naming
 * PATH, before anything is written.  NULL with errno.
 */
struct mce_view;
const void *mce_view_open(struct mce_view **v, const char *path, int fd, size_t size);
void mce_view_close(struct mce_view *v);

/*
 * Mark S changed: LEN bytes of its data at OFF (mce_sec_edited()), or all
 * of it, size and all (mce_sec_rewritten()).  Every change to a
 * section's data goes through one of them: a linked image is rewritten
 * over only the bytes they name.
 */
void mce_sec_edited(struct mce_file *f, struct mce_sec *s, uint64_t off, uint64_t len);
/*
 * S's contents become BUF (malloc'ed, as many bytes as S has), which the
 * file now owns, even on failure.  A whole table rewritten, without
 * copying it over the private mapping: that copy took a page fault and a
 * page copy per 4 KB of a kernel's ORC tables.  0, or -1.
 */
int mce_sec_replace(struct mce_file *f, struct mce_sec *s, void *buf);
void mce_sec_rewritten(struct mce_file *f, struct mce_sec *s);

/* A defined function symbol's place, for passes over every symbol. */
struct mce_func {
	uint64_t value, size;
	uint32_t shndx;		/* SHN_XINDEX resolved; always < f->shnum */
};
/*
 * The STT_FUNC symbols defined in a section, reading symbols from *AT on:
 * up to MAX of them into OUT, *AT moved past the symbols read.  Returns
 * how many (0 when no symbol is left), or -1 on a symbol whose section
 * index is out of range.  One tight loop over the raw table: a million
 * mce_sym_peek() calls cost four times as much.
 */
long mce_funcs_next(struct mce_file *f, size_t *at, struct mce_func *out, size_t max);

/* Section data in memory representation, loaded on first use. */
Elf_Data *mce_sec_data(struct mce_file *f, struct mce_sec *s);
/* Relocations of a REL/RELA section, loaded on first use. */
int mce_load_rels(struct mce_file *f, struct mce_sec *rs);

/*
 * The relocations of RS against the symbols that WANT marks (one flag per
 * symbol), in section order, into *OUT (malloc'ed; free it).  Returns
 * their number, or -1 with f->err set.  Every entry is checked as
 * mce_load_rels() checks it, but only the picked ones are copied: a
 * module's .rela.text holds thousands of relocations of which a few
 * hundred name __fentry__, and the full array costs a page fault per 128.
 */
long mce_rels_pick(struct mce_file *f, struct mce_sec *rs, const bool *want,
		   struct mce_rel **out);

/*
 * The relocations of RS at offsets in [LO, HI): *IDX points at their
 * indexes, in offset order (stable).  Returns their number, or -1 with
 * f->err set.  Loads the relocations, and sorts an index of them on first
 * use, so that finding those of each of many call sites is a search.
 */
long mce_rels_within(struct mce_file *f, struct mce_sec *rs, uint64_t lo,
		     uint64_t hi, const size_t **idx);

/* IDX[0..N) := the indexes of R[0..N) in offset order, ties in index order. */
void mce_rels_by_offset(const struct mce_rel *r, size_t n, size_t *idx);

struct mce_sec *mce_sec_by_name(struct mce_file *f, const char *name);
static inline bool mce_sec_exec(const struct mce_sec *s)
{
	return s->sh.sh_type == SHT_PROGBITS && (s->sh.sh_flags & SHF_EXECINSTR);
}

/* --- changes ---------------------------------------------------------- */

/* Overwrite LEN bytes at OFF of a SHT_PROGBITS section. */
int mce_patch(struct mce_file *f, struct mce_sec *s, uint64_t off,
	      const void *bytes, size_t len);
/*
 * Make room for EXTRA new sections up front: pointers into f->secs stay
 * valid across mce_add_section() only within a reservation.
 */
int mce_reserve_sections(struct mce_file *f, size_t extra);

/* Turn relocation I into TYPE (R_*_NONE) against no symbol: ld refuses a
 * NONE relocation that still names a dynamic symbol such as __fentry__. */
int mce_rel_retire(struct mce_file *f, struct mce_sec *rs, size_t i,
		   uint32_t none);

/* Zero every relocation of RS (offset, info and addend), as the kernel's
 * sorttable does to those of a table it reordered.  Returns how many were
 * not zero already, or -1. */
long mce_rels_clear(struct mce_file *f, struct mce_sec *rs);

/*
 * Append a new section.  DATA (SIZE bytes, memory representation of TYPE,
 * e.g. ELF_T_ADDR or ELF_T_RELA) is copied.  Returns the new section index.
 */
long mce_add_section(struct mce_file *f, const char *name, GElf_Word type,
		     GElf_Xword flags, GElf_Xword align, GElf_Xword entsize,
		     GElf_Word link, GElf_Word info, Elf_Type dtype,
		     const void *data, size_t size);

/*
 * Return the index of a section symbol for section SHNDX, creating one if
 * the object has none (the first global is moved to the end to make room
 * among the locals, and every relocation that named it is renumbered).
 */
long mce_section_symbol(struct mce_file *f, uint32_t shndx);
/* The section symbol of SHNDX if there is one, else 0 (-1 on error). */
long mce_find_section_symbol(struct mce_file *f, uint32_t shndx);

/*
 * Append an address table NAME (SHT_PROGBITS, SHF_ALLOC | FLAGS, sh_link
 * LINK) of N address-sized entries, and its .rel/.rela section: entry i is
 * relocated by an absolute relocation of type RTYPE against SYMS[i] +
 * ADDENDS[i].  For REL the addend is stored in the entry itself.  Returns
 * the table's section index.
 */
long mce_add_addr_table(struct mce_file *f, const char *name, GElf_Xword flags,
			GElf_Word link, uint32_t rtype, bool rela,
			const uint32_t *syms, const int64_t *addends, size_t n);

/* Empty a section (size 0, out of the link's allocation), keeping its index
 * and every reference to it valid. */
int mce_sec_empty(struct mce_file *f, struct mce_sec *s);

/* Let section S end at SIZE (no more than it has): only its header says
 * so; a linked image's bytes stay where the program headers load them. */
int mce_sec_shrink(struct mce_file *f, struct mce_sec *s, uint64_t size);

/*
 * The last function or code label of section SHNDX at or before OFF (its
 * symbol index, and its value in *START), or -1 when there is none:
 * a known instruction boundary for decoding variable-length code.
 */
long mce_label_before(struct mce_file *f, uint32_t shndx, uint64_t off,
		      uint64_t *start);

/* What symbol values of section SHNDX count from: its address in a
 * linked image, 0 in a relocatable object.  Places are always offsets. */
static inline uint64_t mce_sec_base(const struct mce_file *f, uint32_t shndx)
{
	return (f->eh.e_type == ET_EXEC || f->eh.e_type == ET_DYN) && shndx < f->shnum ?
		f->secs[shndx].sh.sh_addr : 0;
}

/* "sym+0xoff" for offset OFF of section SHNDX, or "section+0xoff". */
const char *mce_where(struct mce_file *f, uint32_t shndx, uint64_t off,
		      char *buf, size_t len);

/* Relocation encoding helpers (class- and MIPS64-aware). */
void mce_rel_to_gelf(const struct mce_file *f, const struct mce_rel *r,
		     GElf_Rela *out);

/*
 * Write the changed file to OUT (the input's path when OUT is NULL):
 * an unnamed file in the same directory (O_TMPFILE; where there is none,
 * or no /proc to name it through, a named temporary file), then rename().
 * The new file keeps the replaced one's owner, group, mode and extended
 * attributes (a new OUT: the input's mode, without setuid and setgid
 * unless its owner is the caller).  A symbolic link is followed and kept;
 * a file with other hard links is replaced under this name only.  An
 * unchanged file is copied as it is.  On failure nothing is left behind
 * and the target is untouched.
 */
int mce_write(struct mce_file *f, const char *out);

/*
 * Create TMP, whose name ends in "XXXXXX", as a new file (O_EXCL) with
 * the permission bits of MODE; the X's are replaced.  A descriptor, or -1
 * with errno.
 */
int mce_make_temp(char *tmp, mode_t mode);

/*
 * A tool killed between naming its new file and renaming it over TARGET
 * leaves a complete new file as ".TARGET.mcloc~" beside it; mce_write()
 * on TARGET removes it, and a tool that leaves TARGET as it is calls this
 * to remove it too (one unlink: no directory scan).
 */
void mce_unstage(const char *target);

/*
 * Update the input file itself, the way the kernel's recordmcount does, but
 * so that a tool that stops half-way leaves the old object: every new or
 * changed section and a new section header table are appended, then the
 * ELF header is rewritten in one write.  Until that write the file is the
 * old object; on any failure it is truncated back to its old bytes.
 * Nothing is synced: after a power loss, a file system may have kept the
 * new header and not the tail it points at (as with any object a
 * compiler writes; rebuild after such a crash).  Costs no new inode, which on some file
 * systems is most of the time a temp-and-rename takes.  The old header
 * table and any replaced section stay behind as unreferenced bytes.
 * A file with other hard links is not appended to (that would change it
 * under each name) but replaced, as by mce_write().
 */
int mce_write_in_place(struct mce_file *f);

/*
 * Overwrite, in the linked image F itself (opened writable), only the
 * bytes its changes made differ, as the kernel's sorttable does through
 * its mapping: no copy of the image, no new inode.  Changes that would
 * need a byte past the file's end (a section that grew) are refused
 * before anything is written.  A failed write puts back the old bytes of
 * everything written (if that fails too, the message says the tables are
 * torn); a tool killed while it writes leaves them part old, part new, a
 * table possibly torn within.  Nothing is synced.  A file with other
 * hard links is replaced instead, as by mce_write().
 */
int mce_write_over(struct mce_file *f);

/* Read an address-sized word in the object's byte order, and write one. */
uint64_t mce_get_addr(const struct mce_file *f, const void *p);
void mce_put_addr(const struct mce_file *f, void *p, uint64_t v);
uint32_t mce_get32(const struct mce_file *f, const void *p);
void mce_put32(const struct mce_file *f, void *p, uint32_t v);
uint16_t mce_get16(const struct mce_file *f, const void *p);

/* --- symbols ------------------------------------------------------------ */

/* The .symtab index of the first symbol called NAME, or -1. */
long mce_sym_lookup(const struct mce_file *f, const char *name);
/* The same for N names in one pass: FOUND[k] for NAMES[k], passing over
 * symbols whose type is in SKIP_TYPES (a bit per STT_ value). */
void mce_sym_lookup_many(const struct mce_file *f, const char *const *names, size_t n,
			 long *found, unsigned skip_types);
/* Change symbol I's value (and section). */
int mce_sym_set(struct mce_file *f, size_t i, uint32_t shndx, uint64_t value);
/* Append a global (or weak) symbol NAME to .symtab; its index. */
long mce_add_global(struct mce_file *f, const char *name, uint32_t shndx,
		    uint64_t value, uint64_t size, uint8_t bind, uint8_t type,
		    uint8_t other);
/*
 * Insert N local symbols SYMS (names in SYMS[i].name, copied into .strtab)
 * before the first global, in one pass: every global moves up by N and
 * every relocation and group that names one is renumbered.  Returns the
 * index of the first new symbol.
 */
long mce_add_locals(struct mce_file *f, const struct mce_sym *syms, size_t n);

/* --- linked images (ET_EXEC, ET_DYN) ------------------------------------ */

static inline bool mce_linked(const struct mce_file *f)
{
	return f->eh.e_type == ET_EXEC || f->eh.e_type == ET_DYN;
}

/* The allocated section with contents that holds address VA, or NULL. */
struct mce_sec *mce_sec_of_vaddr(struct mce_file *f, uint64_t va);

/* One dynamic relocation of a linked image, from any SHF_ALLOC REL/RELA
 * section or from SHT_RELR (rs NULL). */
struct mce_dynrel {
	uint64_t where;
	struct mce_sec *rs;	/* NULL: DT_RELR, the addend is in place */
	size_t i;		/* index in rs */
	uint32_t type, sym;
	int64_t addend;
};

/*
 * Index every dynamic relocation by address.  RELATIVE is the
 * architecture's R_*_RELATIVE type, which the word accessors below follow.
 */
int mce_dynrels_load(struct mce_file *f, uint32_t relative);
/* Whether any dynamic relocation applies in [VA, END). */
bool mce_dynrels_within(const struct mce_file *f, uint64_t va, uint64_t end);
/* The dynamic relocation at exactly VA, or NULL. */
const struct mce_dynrel *mce_dynrel_at(struct mce_file *f, uint64_t va);
/* The dynamic symbol a relocation names ("" if none). */
const char *mce_dynrel_name(struct mce_file *f, const struct mce_dynrel *d);

/* Set the addend of D, a RELA relocation, and nothing at its place
 * (what the kernel's sorttable does on arm64, whose places hold 0). */
int mce_dynrel_set_addend(struct mce_file *f, const struct mce_dynrel *d, int64_t addend);

/*
 * The address-sized word at VA as the loaded image sees it relative to its
 * load address: the addend of a RELA R_*_RELATIVE relocation there (the
 * place itself may hold 0, as on aarch64 and riscv64), else the bytes in
 * place (REL, DT_RELR, absolute images).  -1 if VA has no contents.
 */
int mce_word_read(struct mce_file *f, uint64_t va, uint64_t *value);
/* Store VALUE at VA so that every view agrees: in place, and in the
 * addend of a RELA relocation there. */
int mce_word_write(struct mce_file *f, uint64_t va, uint64_t value);
/* N consecutive words from VA, each as mce_word_read() reads it (0, -1). */
int mce_words_read(struct mce_file *f, uint64_t va, size_t n, uint64_t *out);
/* Write VALS (N words) from VA as mce_word_write() does, touching only the
 * words that differ: 0 when none did, more when some did, or -1. */
long mce_words_write(struct mce_file *f, uint64_t va, size_t n, const uint64_t *vals);
/* The N words from VA in place, when they need no translation (8 bytes, the
 * host's byte order, no dynamic relocation among them); else NULL, and the
 * caller reads them with mce_words_read(). */
const uint64_t *mce_words_view(struct mce_file *f, uint64_t va, size_t n);

#endif
