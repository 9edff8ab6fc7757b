// SPDX-License-Identifier: GPL-2.0-or-later
#include "mclines.h"

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

void mc_lines_close(struct mc_lines *l)
{
	if (!l)
		return;
	if (l->dwfl)
		dwfl_end(l->dwfl);
	free(l);
}
