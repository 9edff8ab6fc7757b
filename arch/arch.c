// SPDX-License-Identifier: GPL-2.0-or-later
/* The list of backends and the helpers they share. */
#include "arch.h"
#include "../base/byteorder.h"

#include <elf.h>
#include <string.h>

extern const struct mc_arch mc_arch_x86_64, mc_arch_i386, mc_arch_aarch64,
	mc_arch_arm, mc_arch_riscv64, mc_arch_ppc64, mc_arch_s390x,
	mc_arch_mips64, mc_arch_mips32;

static const struct mc_arch *const backends[] = {
	&mc_arch_x86_64, &mc_arch_i386, &mc_arch_aarch64, &mc_arch_arm,
	&mc_arch_riscv64, &mc_arch_ppc64, &mc_arch_s390x, &mc_arch_mips64,
	&mc_arch_mips32,
};

const struct mc_arch *mc_arch_find(uint16_t machine, int elfclass)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (backends[i]->machine == machine &&
		    (!backends[i]->elfclass || backends[i]->elfclass == elfclass))
			return backends[i];
	return NULL;
}

const struct mc_arch *mc_arch_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

int mc_make_nop(const struct mc_arch *a, const struct mc_text *t,
		const struct mc_site *site, uint8_t *out)
{
	if (a->make_nop)
		return a->make_nop(t, site, out);
	if (site->pre || site->post)
		return -1;
	for (const struct mc_nop *n = a->nops; n && n->len; n++) {
		if (n->len != site->len)
			continue;
		if (!n->word) {
			memcpy(out, n->bytes, n->len);
		} else {
			for (unsigned i = 0; i < n->len / n->word; i++) {
				if (n->word == 4)
					mc_store32(t, out + 4 * i, n->w[i]);
				else
					mc_store16(t, out + 2 * i, (uint16_t)n->w[i]);
			}
		}
		return 0;
	}
	return -1;
}

/*
 * The profiling entry points compilers call: mcount (x86 -pg, s390),
 * _mcount (most RISC targets), __fentry__ (-mfentry), __gnu_mcount_nc (ARM
 * EABI).  ppc64 ELFv1 objects name the code entry with a leading dot, which
 * the kernel's tool also strips.
 */
bool mc_is_mcount_name(const char *name)
{
	if (name[0] == '.')
		name++;
	/* Every symbol of every object comes through here: the first
	 * characters turn nearly all of them away without a strcmp. */
	if (name[0] == 'm')
		return !strcmp(name, "mcount");
	if (name[0] != '_')
		return false;
	if (name[1] == 'm')
		return !strcmp(name, "_mcount");
	if (name[1] != '_')
		return false;
	if (name[2] == 'f')
		return !strcmp(name, "__fentry__");
	return name[2] == 'g' && !strcmp(name, "__gnu_mcount_nc");
}

bool mc_reloc_in(const uint32_t *list, uint32_t type)
{
	for (; *list; list++)
		if (*list == type)
			return true;
	return false;
}

uint32_t mc_load32(const struct mc_text *t, uint64_t off)
{
	return mc_get32(t->buf + off, t->msb);
}

uint16_t mc_load16(const struct mc_text *t, uint64_t off)
{
	return mc_get16(t->buf + off, t->msb);
}

void mc_store32(const struct mc_text *t, uint8_t *out, uint32_t v)
{
	mc_put32(out, t->msb, v);
}

void mc_store16(const struct mc_text *t, uint8_t *out, uint16_t v)
{
	mc_put16(out, t->msb, v);
}
