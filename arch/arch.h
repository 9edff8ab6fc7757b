/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The architecture interface.  Everything mcloc knows about an instruction
 * set lives behind this header: which relocations mark a call to an mcount
 * symbol, how to find the call's first byte by decoding (never by a fixed
 * adjustment), the table's relocation type, and the NOP and call encodings.
 * Adding an architecture means adding one table and one decoder under
 * arch/<name>/ and listing it in arch.c; generic code never names an opcode.
 *
 * Decoding uses Zydis on x86 and capstone elsewhere.  Debian 12's capstone
 * (4.0.2) has no RISC-V support, so that backend decodes its fixed call
 * sequences by hand: a few bit-field checks.
 */
#ifndef MCLOC_ARCH_H
#define MCLOC_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


/* A view of one executable section, for decoding around a relocation. */
struct mc_text {
	const uint8_t *buf;
	size_t size;
	uint64_t boundary;	/* a known instruction start at or before the site */
	bool msb;		/* object is big-endian */
	int elfclass;		/* ELFCLASS32 or ELFCLASS64 */
	bool thumb;		/* ARM: the code at the site is Thumb */
	bool describe;		/* fill mc_site.what for call sites too (costly) */
};

/* What a relocation against an mcount symbol turned out to be. */
enum mc_site_verdict {
	MC_SITE_CALL,		/* a call: record it */
	MC_SITE_PART,		/* a further relocation of a site already seen */
	MC_SITE_NOT_CALL,	/* not a call (address taken, tail jump...) */
};

struct mc_site {
	uint64_t off;		/* first byte of the call: the table entry */
	uint8_t len;		/* bytes of the call instruction(s) */
	uint8_t pre;		/* setup bytes before off that --nop also covers */
	uint8_t post;		/* bytes after the call that --nop also covers */
	uint8_t mode;		/* backend-private: e.g. ARM vs Thumb */
	enum mc_site_verdict verdict;
	char what[64];		/* the decoded instruction: always for a site that
				 * is not a call, for calls only if t->describe */
};

#define MC_MAX_SITE 16

/* One NOP replacement for a call site of LEN bytes: either BYTES as they
 * are, or (WORD = 2 or 4) the instruction words W stored in the object's
 * byte order. */
struct mc_nop {
	uint8_t len;
	uint8_t word;
	uint32_t w[4];
	uint8_t bytes[MC_MAX_SITE];
};

/* One instruction (or call sequence) of linked code, where no relocation
 * says what a call reaches: decoded from the bytes and the address. */
struct mc_insn {
	uint8_t len;		/* bytes, 0 if nothing decodes */
	bool call;		/* links a return address */
	bool via_slot;		/* the callee is read from memory at target */
	bool has_target;	/* target is known */
	uint64_t target;	/* the callee's address, or the slot's */
};

/*
 * How a kernel lays out its exception table (__ex_table) on an
 * architecture: which word says where the faulting instruction is, and
 * how, which is what the kernel's build-time sort orders the table by.
 */
enum mc_extable {
	MC_EXTABLE_NONE,	/* not known here */
	/* 12 bytes: insn and fixup, 32-bit offsets each from its own
	 * place, then 4 bytes of type and data that move with them */
	MC_EXTABLE_REL_DATA,
	MC_EXTABLE_REL,		/* 8 bytes: insn and fixup, as above */
	MC_EXTABLE_ABS,		/* two address-sized words: insn, fixup */
};

/*
 * One layout of ORC's struct orc_entry.  Since Linux 6.4 an image names
 * its layout in .orc_header: a hash of the entry's definition (HEADER,
 * HEADER_SIZE bytes); before, there was one layout and no header (HEADER
 * NULL).  WEAK: whether entry E is a weak terminator, which objtool puts
 * at the end of a section and which goes before a real entry for the same
 * address.
 */
struct mc_orc_layout {
	const char *name;
	const uint8_t *header;
	uint8_t header_size;
	bool (*weak)(const uint8_t *e);
};

struct mc_arch {
	const char *name;		/* "x86_64", "aarch64", ... */
	uint16_t machine;		/* EM_* */
	uint8_t elfclass;		/* 0: either class */
	uint32_t table_reloc;		/* absolute, address-sized */
	uint32_t none_reloc;		/* R_*_NONE */
	const uint32_t *call_relocs;	/* relocation types that can mark a call, 0-ended */
	bool kernel_nops_untraced;	/* the kernel's recordmcount NOPs calls in
					 * untraced sections on this architecture */
	/*
	 * The kernel's tool drops an mcount relocation that lies exactly this
	 * many bytes after the previous one (MIPS: the LO16 half of a
	 * lui/addiu pair).  Its "previous" survives from one section to the
	 * next, so a site at offset 8 right after a section whose last
	 * relocation was at 4 is dropped as well; --kernel reproduces that.
	 */
	uint8_t kernel_pair_distance;
	/* Instructions vary in length, so decode() needs mc_text.boundary. */
	bool variable_length;
	/*
	 * A linker-relaxation hint (R_RISCV_RELAX), or 0.  Relaxation shrinks
	 * code, and moves symbols with it but not section-relative addends in
	 * other sections: tables then point at a label per site, and the hint
	 * is removed at each recorded call so it keeps its patchable shape.
	 */
	uint32_t relax_reloc;
	bool base_avoid_func;		/* function symbols are poor table bases (ARM
					 * Thumb symbols carry bit 0) */
	/* nm leaves out symbols with empty names (BFD's "special" symbols
	 * on RISC-V, for its pc-relative labels); elsewhere it lists them. */
	bool nm_hides_empty_names;
	/* The letters L of the mapping symbols ("$L", "$L.anything") nm
	 * leaves out on this architecture (BFD's "special" symbols), or NULL:
	 * it lists every name that starts with a dollar. */
	const char *nm_mapping_letters;

	/*
	 * Decode the site that a relocation of type TYPE at OFFSET (against an
	 * mcount symbol) belongs to.  Returns 0 with *site filled in, or -1
	 * with site->what saying why the bytes could not be decoded at all.
	 */
	int (*decode)(const struct mc_text *t, uint64_t offset, uint32_t type,
		      struct mc_site *site);
	/* Natural alignment a site needs for atomic patching (riscv64: 4). */
	uint8_t site_align;
	/* Bytes of a landing pad (endbr64, BTI) at OFF, which a function-entry
	 * site may follow; 0 if none.  NULL: the ISA has none. */
	unsigned (*landing_pad)(const struct mc_text *t, uint64_t off);
	/* NOPs by site length, ended by len 0: one instruction per site. */
	const struct mc_nop *nops;
	/*
	 * Compilers pad a -fpatchable-function-entry=N entry with NOPs that
	 * are not NOPS[0] (x86: GCC N one-byte NOPs, clang one long NOP with
	 * a displacement).  ANY_NOP gives the bytes of the NOP instruction of
	 * any encoding at OFF, else 0; ENTRY_NOP is the ISA's one-byte NOP.
	 * Whole NOPs covering nops[0].len bytes from an entry are a site in
	 * the raw: objpatch nop makes them nops[0], the NOP the runtime
	 * patches as one instruction, then ENTRY_NOPs.  NULL: no such sites.
	 */
	unsigned (*any_nop)(const struct mc_text *t, uint64_t off);
	const struct mc_nop *entry_nop;
	/*
	 * For sites a plain table cannot cover (setup before the call, delay
	 * slots): write the replacement of SITE (pre + len + post bytes,
	 * starting pre bytes before site->off) into OUT.  Returns 0, or -1
	 * when this form of site cannot be NOPed safely.
	 */
	int (*make_nop)(const struct mc_text *t, const struct mc_site *site,
			uint8_t *out);
	/* The bytes of the NOP that make_nop leaves at a site's OFF (the
	 * table entry), when they are there; 0 otherwise. */
	unsigned (*is_nop)(const struct mc_text *t, uint64_t off);

	/* --- linked images (objpatch), NULL/0 where not supported --- */
	uint32_t relative_reloc;	/* R_*_RELATIVE */
	/* Decode the instruction at OFF of T, loaded at address PC.  A call
	 * sequence (riscv64 auipc+jalr) is one unit.  Returns 0, or -1 when
	 * nothing decodes there. */
	int (*insn)(const struct mc_text *t, uint64_t off, uint64_t pc,
		    struct mc_insn *out);
	/* The slot a PLT entry at OFF (address PC) jumps through, or 0. */
	uint64_t (*plt_slot)(const struct mc_text *t, uint64_t off, uint64_t pc);

	/* --- a kernel image's other sorted tables (objpatch sort) --- */
	uint8_t extable;		/* enum mc_extable */
	/*
	 * ORC unwind tables (.orc_unwind_ip, .orc_unwind): the bytes of one
	 * .orc_unwind entry, 0 where the kernel has none; and the entry
	 * layouts objpatch knows (struct mc_orc_layout), ended by one with
	 * no name.
	 */
	uint8_t orc_entry_size;
	const struct mc_orc_layout *orc_layouts;
	/*
	 * __mcount_loc as 6.12's sorttable reads it here: through the addends
	 * of R_*_RELATIVE relocations when there are any (arm64's gcc leaves
	 * zeros in place); and how many bytes before a function's symbol an
	 * entry may lie and still count as the function's (arm64's CALL_OPS
	 * slot, -fpatchable-function-entry=4,2).
	 */
	bool kernel_mcount_addends;
	uint8_t kernel_mcount_before;

	/* --- the runtime's one-store sites (objpatch link --runtime) --- */
	/*
	 * Turn the 8 bytes of NOPs at OFF of T, a function's entry at address
	 * PC, into a run-time site: the instruction that never changes, then
	 * a NOP, the one the runtime toggles into a call to the args or regs
	 * trampoline (at TARGS, TREGS), which it must reach.  Into OUT;
	 * returns 0, or -1 when the bytes are not the NOPs or a trampoline is
	 * out of reach.  NULL: the ISA's sites are the calls themselves.
	 */
	int (*runtime_site)(const struct mc_text *t, uint64_t off, uint64_t pc,
			    uint64_t targs, uint64_t tregs, uint8_t out[8]);
	/* How many bytes of such a site OFF of T is already (its NOP or a
	 * call; x86_64: parked, below), or 0 when it is not one. */
	unsigned (*runtime_site_len)(const struct mc_text *t, uint64_t off);
	/*
	 * x86_64's form of the same: its sites are the calls themselves, and
	 * link --runtime parks each (include/mcloc/abi.h), the site's NOP at
	 * OFF of T, address PC, becoming "test $disp32, %eax" with the
	 * displacement of a call to the image's direct stub 0 at STUBS (a
	 * 6-byte site: then a 1-byte NOP).  Into OUT, *LEN bytes; returns 0,
	 * 1 when OFF is parked there already, or -1 when it is neither the
	 * NOP nor parked there, or the stub is out of reach.
	 */
	int (*park_site)(const struct mc_text *t, uint64_t off, uint64_t pc, uint64_t stubs,
			 uint8_t out[8], unsigned *len);
	/* What the site at OFF of T (address PC) would call, were it
	 * enabled, when it is parked; else 0 (no parked site calls 0: its
	 * target is a stub of the image). */
	uint64_t (*parked_on)(const struct mc_text *t, uint64_t off, uint64_t pc);
	/*
	 * The same for a -pg site, the NOPed call to _mcount at OFF (address
	 * PC), after the function's prologue, spelt so that the runtime can
	 * tell it from an entry's: 8 bytes into OUT, to be written at *AT
	 * (aarch64: OFF - 4, over GCC's "mov x0, x30"; riscv64: OFF, over the
	 * 8 bytes of NOPs recordmcount --nop left of "call _mcount").  Returns
	 * 0, 1 when OFF is such a site already, or -1 when it cannot be made
	 * one (the instruction before is not that mov; the call was relaxed
	 * to 4 bytes; a trampoline is out of reach).  NULL: no such sites.
	 */
	int (*runtime_mcount_site)(const struct mc_text *t, uint64_t off, uint64_t pc,
				   uint64_t targs, uint64_t tregs, uint64_t *at, uint8_t out[8]);

	/* --- static trampolines (objpatch tramp), NULL where not supported --- */
	/* GNU as text: mcloc_tramp_args, mcloc_tramp_regs, the mcount stub,
	 * and __mcloc_ctor/__mcloc_dtor, which pass __mcloc_image to the
	 * runtime's weak mcloc_register_image/mcloc_unregister_image. */
	const char *tramp_asm;
	const char *cross_prefix;	/* Debian's cross toolchain: "aarch64-linux-gnu-" */
};

/* The backend called NAME ("x86_64", "aarch64", ...), or NULL. */
const struct mc_arch *mc_arch_by_name(const char *name);

/* The backend for an object, or NULL when the architecture is unsupported. */
const struct mc_arch *mc_arch_find(uint16_t machine, int elfclass);

/* The NOP replacement of SITE into OUT (pre + len + post bytes), by the
 * backend's make_nop or its nops table.  -1 when there is none. */
int mc_make_nop(const struct mc_arch *a, const struct mc_text *t,
		const struct mc_site *site, uint8_t *out);

/* The names recognised as mcount symbols on every architecture. */
bool mc_is_mcount_name(const char *name);

/* Helpers shared by the backends. */
bool mc_reloc_in(const uint32_t *list, uint32_t type);
uint32_t mc_load32(const struct mc_text *t, uint64_t off);
uint16_t mc_load16(const struct mc_text *t, uint64_t off);
void mc_store32(const struct mc_text *t, uint8_t *out, uint32_t v);
void mc_store16(const struct mc_text *t, uint8_t *out, uint16_t v);

#endif
