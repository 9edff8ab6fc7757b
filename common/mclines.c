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
};

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
	Dwfl_Line *line;
	const char *src;
	int lineno = 0;

	if (!scn || !gelf_getshdr(scn, &sh))
		return NULL;
	line = dwfl_module_getsrc(l->mod, sh.sh_addr + off + l->bias);
	if (!line || !(src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL)))
		return NULL;
	snprintf(buf, len, "%s:%d", src, lineno);
	return buf;
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
	Dwfl_Line *line = mod ? dwfl_module_getsrc(mod, addr) : NULL;
	const char *src;
	int lineno = 0;

	if (!line || !(src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL)))
		return NULL;
	snprintf(buf, len, "%s:%d", src, lineno);
	return buf;
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
	Dwarf_Die *cu = mod ? dwfl_module_addrdie(mod, addr, &bias) : NULL;
	Dwarf_Die *scopes = NULL;
	int n = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : -1, found = -1;

	/* The innermost function around ADDR that is not inlined there. */
	for (int i = 0; i < n && found < 0; i++) {
		Dwarf_Die *fn = &scopes[i], child;

		if (dwarf_tag(fn) != DW_TAG_subprogram)
			continue;
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
			if (found < max)
				v[found] = type_param(&child);
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
