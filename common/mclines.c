// SPDX-License-Identifier: GPL-2.0-or-later
#include "mclines.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mc_lines {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Elf *elf;		/* libdwfl's view: an ET_REL's sections get addresses */
	Dwarf_Addr bias;
	/* The unit cu_at() found last by its own ranges, and its module:
	 * lookups come mostly in address order, a unit's functions in a row. */
	Dwfl_Module *last_mod;
	Dwarf_Die last_cu;
};

/*
 * The compile unit of MOD that holds ADDR (*BIAS: MOD's), into *BUF.  By
 * .debug_aranges, as libdwfl looks; where an image has none (clang emits
 * none, and the elfutils of Debian 12 reads no other index) by each
 * unit's own ranges.  NULL when no unit holds it.
 */
static Dwarf_Die *cu_at(struct mc_lines *l, Dwfl_Module *mod, Dwarf_Addr addr,
			Dwarf_Addr *bias, Dwarf_Die *buf)
{
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, bias);
	Dwarf *dw = cu ? NULL : dwfl_module_getdwarf(mod, bias);

	if (cu || !dw)
		return cu;
	if (l->last_mod == mod && dwarf_haspc(&l->last_cu, addr - *bias) > 0) {
		*buf = l->last_cu;
		return buf;
	}
	Dwarf_CU *u = NULL;
	uint8_t type;

	while (dwarf_get_units(dw, u, &u, NULL, &type, buf, NULL) == 0)
		if ((type == DW_UT_compile || type == DW_UT_partial) &&
		    dwarf_haspc(buf, addr - *bias) > 0) {
			l->last_mod = mod;
			l->last_cu = *buf;
			return buf;
		}
	return NULL;
}

/* "FILE:LINE" of ADDR in MOD, into BUF; NULL if no line is known. */
static const char *line_at(struct mc_lines *l, Dwfl_Module *mod, Dwarf_Addr addr, char *buf,
			   size_t len)
{
	Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
	const char *src = NULL;
	int lineno = 0;

	if (line) {
		src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
	} else {
		Dwarf_Addr bias = 0;
		Dwarf_Die die, *cu = cu_at(l, mod, addr, &bias, &die);
		Dwarf_Line *dl = cu ? dwarf_getsrc_die(cu, addr - bias) : NULL;

		if (dl && (src = dwarf_linesrc(dl, NULL, NULL)) && dwarf_lineno(dl, &lineno))
			src = NULL;
	}
	if (!src)
		return NULL;
	snprintf(buf, len, "%s:%d", src, lineno);
	return buf;
}

static const Dwfl_Callbacks callbacks = {
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

struct mc_lines *mc_lines_open(const char *path, char *err, size_t errlen)
{
	struct mc_lines *l = calloc(1, sizeof(*l));
	Dwarf_Addr bias;

	if (!l) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->dwfl = dwfl_begin(&callbacks);
	if (!l->dwfl)
		goto fail;
	l->mod = dwfl_report_offline(l->dwfl, "", path, -1);
	if (!l->mod || dwfl_report_end(l->dwfl, NULL, NULL) != 0)
		goto fail;
	l->elf = dwfl_module_getelf(l->mod, &l->bias);
	if (!l->elf || !dwfl_module_getdwarf(l->mod, &bias))
		goto fail;
	return l;
fail:
	snprintf(err, errlen, "no line information: %s", dwfl_errmsg(-1));
	mc_lines_close(l);
	return NULL;
}

const char *mc_lines_at(struct mc_lines *l, uint32_t shndx, uint64_t off, char *buf,
			size_t len)
{
	Elf_Scn *scn = elf_getscn(l->elf, shndx);
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh))
		return NULL;
	return line_at(l, l->mod, sh.sh_addr + off + l->bias, buf, len);
}

/* A process's images, by the files its maps name (as they are now). */
static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

struct mc_lines *mc_lines_open_maps(FILE *maps, char *err, size_t errlen)
{
	struct mc_lines *l = calloc(1, sizeof(*l));

	if (!l) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->dwfl = dwfl_begin(&proc_callbacks);
	if (!l->dwfl || dwfl_linux_proc_maps_report(l->dwfl, maps) != 0 ||
	    dwfl_report_end(l->dwfl, NULL, NULL) != 0) {
		snprintf(err, errlen, "its images cannot be read: %s", dwfl_errmsg(-1));
		mc_lines_close(l);
		return NULL;
	}
	return l;
}

const char *mc_lines_func(struct mc_lines *l, uint64_t addr, uint64_t *off)
{
	Dwfl_Module *mod = dwfl_addrmodule(l->dwfl, addr);
	GElf_Off o = 0;
	GElf_Sym sym;

	if (!mod)
		return NULL;
	const char *name = dwfl_module_addrinfo(mod, addr, &o, &sym, NULL, NULL, NULL);

	*off = o;
	return name;
}

const char *mc_lines_src(struct mc_lines *l, uint64_t addr, char *buf, size_t len)
{
	Dwfl_Module *mod = dwfl_addrmodule(l->dwfl, addr);

	return mod ? line_at(l, mod, addr, buf, len) : NULL;
}

/* TYPE's class, through typedefs and qualifiers. */
static struct mc_param param_of(Dwarf_Die *type)
{
	Dwarf_Die d = *type, peeled;
	Dwarf_Attribute at;
	Dwarf_Word size = 0, enc = 0;

	for (int hops = 0; hops < 32; hops++) {
		int tag = dwarf_tag(&d);

		if (tag != DW_TAG_typedef && tag != DW_TAG_const_type &&
		    tag != DW_TAG_volatile_type && tag != DW_TAG_restrict_type &&
		    tag != DW_TAG_atomic_type)
			break;
		if (!dwarf_attr_integrate(&d, DW_AT_type, &at) || !dwarf_formref_die(&at, &peeled))
			return (struct mc_param){ MC_P_NONE, 0 };	/* (const void) */
		d = peeled;
	}
	int tag = dwarf_tag(&d);
	Dwarf_Attribute sa;

	if (dwarf_attr_integrate(&d, DW_AT_byte_size, &sa))
		dwarf_formudata(&sa, &size);
	if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type ||
	    tag == DW_TAG_rvalue_reference_type) {
		/* A pointer to plain char, whatever its typedefs and
		 * qualifiers, is a string (not a byte buffer: uint8_t *). */
		Dwarf_Die base;

		if (tag == DW_TAG_pointer_type && dwarf_attr_integrate(&d, DW_AT_type, &at) &&
		    dwarf_formref_die(&at, &base)) {
			for (int hops = 0; hops < 32 && (dwarf_tag(&base) == DW_TAG_const_type ||
							 dwarf_tag(&base) == DW_TAG_volatile_type ||
							 dwarf_tag(&base) == DW_TAG_typedef); hops++)
				if (!dwarf_attr_integrate(&base, DW_AT_type, &at) ||
				    !dwarf_formref_die(&at, &base))
					break;
			const char *name = dwarf_diename(&base);

			if (dwarf_tag(&base) == DW_TAG_base_type && name && !strcmp(name, "char"))
				return (struct mc_param){ MC_P_STRING, 8 };
		}
		return (struct mc_param){ MC_P_POINTER, 8 };
	}
	if (tag == DW_TAG_enumeration_type)
		return (struct mc_param){ MC_P_SIGNED, size && size <= 8 ? (unsigned)size : 4 };
	if ((tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
	     tag == DW_TAG_class_type) && size && size <= 16) {
		Dwarf_Die cu;
		Dwarf_Word cc = 0;
		int lang = dwarf_diecu(&d, &cu, NULL, NULL) ? dwarf_srclang(&cu) : -1;
		bool c = lang == DW_LANG_C || lang == DW_LANG_C89 || lang == DW_LANG_C99 ||
			 lang == DW_LANG_C11;

		/* (C++'s class with a destructor or a copy constructor comes
		 * back through memory whatever its size: only one its DWARF
		 * says is passed by value.) */
		if (dwarf_attr_integrate(&d, DW_AT_calling_convention, &at))
			dwarf_formudata(&at, &cc);
		if ((c && cc != DW_CC_pass_by_reference) || cc == DW_CC_pass_by_value)
			return (struct mc_param){ MC_P_SMALL_AGGREGATE, (unsigned)size };
		return (struct mc_param){ MC_P_OTHER, (unsigned)size };
	}
	if (tag != DW_TAG_base_type || !size || size > 8 ||
	    !dwarf_attr_integrate(&d, DW_AT_encoding, &at) || dwarf_formudata(&at, &enc))
		return (struct mc_param){ MC_P_OTHER, (unsigned)size };
	switch (enc) {
	case DW_ATE_signed_char:
	case DW_ATE_unsigned_char: {
		/* (Plain char is a character; signed and unsigned char, as
		 * int8_t and uint8_t are, small integers.) */
		const char *name = dwarf_diename(&d);

		if (size == 1 && name && !strcmp(name, "char"))
			return (struct mc_param){ MC_P_CHAR, 1 };
		return (struct mc_param){ enc == DW_ATE_signed_char ? MC_P_SIGNED : MC_P_UNSIGNED,
					  (unsigned)size };
	}
	case DW_ATE_signed:
		return (struct mc_param){ MC_P_SIGNED, (unsigned)size };
	case DW_ATE_unsigned:
	case DW_ATE_boolean:
	case DW_ATE_UTF:
		return (struct mc_param){ MC_P_UNSIGNED, (unsigned)size };
	case DW_ATE_float:
		return (struct mc_param){ size == 4 || size == 8 ? MC_P_FLOAT : MC_P_OTHER,
					  (unsigned)size };
	default:
		return (struct mc_param){ MC_P_OTHER, (unsigned)size };
	}
}

/* DIE's type's class (MC_P_NONE: it has none, void). */
static struct mc_param type_param(Dwarf_Die *die)
{
	Dwarf_Attribute at;
	Dwarf_Die type;

	if (!dwarf_attr_integrate(die, DW_AT_type, &at) || !dwarf_formref_die(&at, &type))
		return (struct mc_param){ MC_P_NONE, 0 };
	return param_of(&type);
}

int mc_lines_params(struct mc_lines *l, uint64_t addr, struct mc_param *v, int max,
		    struct mc_param *ret)
{
	Dwfl_Module *mod = dwfl_addrmodule(l->dwfl, addr);
	Dwarf_Addr bias = 0;
	Dwarf_Die cubuf, *cu = mod ? cu_at(l, mod, addr, &bias, &cubuf) : NULL;
	Dwarf_Die *scopes = NULL;
	int n = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : -1, found = -1;

	/* The innermost function around ADDR that is not inlined there. */
	for (int i = 0; i < n && found < 0; i++) {
		Dwarf_Die *fn = &scopes[i], child;

		if (dwarf_tag(fn) != DW_TAG_subprogram)
			continue;
		/* Another calling convention than the platform's (clang's
		 * ms_abi, GCC's DW_CC_nocall for a function whose convention
		 * it changed): where its arguments are is not known. */
		Dwarf_Attribute cc;
		Dwarf_Word conv;

		if (dwarf_attr_integrate(fn, DW_AT_calling_convention, &cc) &&
		    (dwarf_formudata(&cc, &conv) || conv != DW_CC_normal))
			break;
		/* A C function defined without a prototype (K&R) takes a float
		 * as a double, promoted by its callers. */
		int lang = dwarf_srclang(cu);
		bool kr = !dwarf_hasattr_integrate(fn, DW_AT_prototyped) &&
			  (lang == DW_LANG_C89 || lang == DW_LANG_C || lang == DW_LANG_C99 ||
			   lang == DW_LANG_C11);
		*ret = type_param(fn);
		found = 0;
		if (dwarf_child(fn, &child) != 0)
			break;
		do {
			int tag = dwarf_tag(&child);

			if (tag == DW_TAG_unspecified_parameters && !found) {
				found = -1;	/* (f(...), or an old-style f()) */
				break;
			}
			if (tag != DW_TAG_formal_parameter)
				continue;
			if (found < max) {
				v[found] = type_param(&child);
				if (kr && v[found].kind == MC_P_FLOAT)
					v[found].size = 8;
			}
			found++;
		} while (dwarf_siblingof(&child, &child) == 0);
	}
	free(scopes);
	return found;
}

void mc_lines_close(struct mc_lines *l)
{
	if (!l)
		return;
	if (l->dwfl)
		dwfl_end(l->dwfl);
	free(l);
}
