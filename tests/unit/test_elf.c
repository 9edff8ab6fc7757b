// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit tests of the ELF layer, TAP output.  The objects are made by the
 * system compiler at run time, never checked in.
 */
#include "../../common/mcelf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n, failed;

static void ok(int cond, const char *what)
{
	n++;
	if (!cond)
		failed++;
	printf("%s %d - %s\n", cond ? "ok" : "not ok", n, what);
}

static int sh(const char *cmd)
{
	return system(cmd);
}

int main(void)
{
	char dir[] = "/tmp/mcloc-unit.XXXXXX", path[256], out[300], cmd[1024];
	struct mce_file f;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/a.o", dir);
	snprintf(out, sizeof(out), "%s/b.o", dir);
	snprintf(cmd, sizeof(cmd),
		 "printf 'int g(int);\\nstatic int s(int x){return g(x)+1;}\\n"
		 "int f(int x){return s(x)*2;}\\n' | cc -O1 -x c -c - -o %s", path);
	if (sh(cmd)) {
		printf("1..0 # SKIP no C compiler\n");
		return 0;
	}

	ok(mce_open(&f, path) == 0, "a compiler-made object opens");
	ok(f.cls == ELFCLASS64 && f.addrsize == 8 && !f.msb, "class and byte order come from the file");
	struct mce_sec *text = mce_sec_by_name(&f, ".text");
	ok(text && mce_sec_exec(text) && text->rela, ".text is executable and has its relocations linked");
	ok(text && mce_load_rels(&f, text->rela) == 0 && text->rela->nrels > 0, "relocations decode");

	uint8_t buf[8];
	mce_put_addr(&f, buf, 0x1122334455667788ull);
	ok(buf[0] == 0x88 && mce_get_addr(&f, buf) == 0x1122334455667788ull, "address words use the object's order");

	/* A table against the section symbol, written elsewhere and re-read. */
	long sym = mce_section_symbol(&f, (uint32_t)text->idx);
	uint32_t syms[2] = { (uint32_t)sym, (uint32_t)sym };
	int64_t adds[2] = { 0, 4 };
	ok(sym > 0, "a section symbol is found or made");
	ok(mce_add_addr_table(&f, "__t", SHF_WRITE, 0, R_X86_64_64, true, syms, adds, 2) > 0,
	   "an address table is added");
	ok(mce_write(&f, out) == 0, "the result is written to another path");
	mce_close(&f);

	ok(mce_open(&f, out) == 0, "the written object opens again");
	struct mce_sec *t = mce_sec_by_name(&f, "__t");
	struct mce_sec *r = mce_sec_by_name(&f, ".rela__t");
	ok(t && t->sh.sh_size == 16 && (t->sh.sh_flags & SHF_ALLOC), "the table has two entries");
	ok(r && mce_load_rels(&f, r) == 0 && r->nrels == 2 && r->rels[1].addend == 4 &&
	   r->rels[1].type == R_X86_64_64, "its relocations read back");
	mce_close(&f);

	snprintf(cmd, sizeof(cmd), "cc -c -x c /dev/null -o %s/e.o && ld -r %s %s/e.o -o %s/l.o 2>/dev/null",
		 dir, out, dir, dir);
	ok(sh(cmd) == 0, "the linker accepts the written object");

	/* mce_section_symbol on an object whose .text has no section symbol:
	 * assembled by hand, so the symbol really is missing. */
	snprintf(cmd, sizeof(cmd),
		 "printf '.text\\n.globl f\\nf: call g\\nret\\n.data\\n.globl d\\nd: .quad 0\\n' |"
		 " as -o %s/n.o - && ! readelf -s %s/n.o | grep -q 'SECTION.*1 $'", dir, dir);
	if (sh(cmd) == 0) {
		snprintf(path, sizeof(path), "%s/n.o", dir);
		ok(mce_open(&f, path) == 0, "an object without a .text section symbol opens");
		text = mce_sec_by_name(&f, ".text");
		size_t globals = f.nsyms - f.symtab->sh.sh_info;
		sym = mce_section_symbol(&f, (uint32_t)text->idx);
		ok(sym == (long)f.symtab->sh.sh_info - 1 && f.syms[sym].type == STT_SECTION,
		   "a new section symbol goes last among the locals");
		ok(f.nsyms - f.symtab->sh.sh_info == globals, "the globals are all still there");
		ok(mce_write(&f, out) == 0, "and the object is written");
		mce_close(&f);
		snprintf(cmd, sizeof(cmd), "readelf -rW %s | grep -q ' g - 4'", out);
		ok(sh(cmd) == 0, "the relocation against the moved global still names it");
	} else {
		ok(1, "# SKIP as emitted a section symbol anyway");
	}

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
	printf("1..%d\n", n);
	return failed != 0;
}
