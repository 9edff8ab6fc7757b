// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Naming a process's addresses from the files it mapped (symbols.h).  The
 * maps are kept as text; libdw reads them (dwfl_linux_proc_maps_report)
 * at the first address asked after they change, and each answer is kept
 * by address, as a replay asks about the same few callers millions of
 * times.
 */
#include "symbols.h"
#include "u64map.h"
#include "../base/grow.h"

#ifdef MCLOC_HAVE_DW
#include "mclines.h"
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct symbols {
	char *maps;
	size_t len;
	bool tried;			/* libdw was asked to read the maps */
#ifdef MCLOC_HAVE_DW
	struct mc_lines *lines;		/* NULL: none */
#endif
	struct u64map names;		/* a strdup'd name (0: unknown), by address */
};

struct symbols *sym_new(void)
{
	return calloc(1, sizeof(struct symbols));
}

static void free_name(uint64_t v)
{
	free((char *)(uintptr_t)v);
}

static void forget(struct symbols *c)
{
	u64map_each(&c->names, free_name);
	u64map_free(&c->names);
#ifdef MCLOC_HAVE_DW
	if (c->lines)
		mc_lines_close(c->lines);
	c->lines = NULL;
#endif
	c->tried = false;
}

void sym_set_maps(struct symbols *c, const char *maps, size_t len)
{
	if (!c || (c->maps && c->len == len && !memcmp(c->maps, maps, len)))
		return;
	char *m = malloc(len + 1);

	if (!m)
		return;
	memcpy(m, maps, len);
	m[len] = 0;
	forget(c);
	free(c->maps);
	c->maps = m;
	c->len = len;
}

uint32_t proc_parent(uint32_t pid)
{
	char path[64], buf[512];
	uint32_t ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);

	fclose(f);
	buf[n] = 0;
	/* (After the name's last ')': a name may hold anything.) */
	const char *p = strrchr(buf, ')');

	if (!p || sscanf(p + 1, " %*c %u", &ppid) != 1)
		ppid = 0;
	return ppid;
}

char *sym_read_maps(uint32_t pid, size_t *len)
{
	char path[64], *buf = NULL;
	size_t n = 0;
	FILE *f, *out;

	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	if (!(f = fopen(path, "re")))
		return NULL;
	if ((out = open_memstream(&buf, &n))) {
		char chunk[4096];

		for (size_t k; (k = fread(chunk, 1, sizeof(chunk), f)) > 0;)
			fwrite(chunk, 1, k, out);
		fclose(out);
	}
	fclose(f);
	*len = n;
	return buf;
}

#ifdef MCLOC_HAVE_DW
/* One line of maps text, as tidy_maps() sorts and compares them. */
struct map_line {
	const char *at;
	size_t len;
	unsigned long long lo, hi, off, inode;
	unsigned major, minor;
};

static int cmp_map_line(const void *a, const void *b)
{
	const struct map_line *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi > y->hi ? -1 : x->hi < y->hi;	/* (the wider first) */
}

/* Whether line Y maps a part of what X maps: the same file, at the same
 * offset for the same address. */
static bool map_within(const struct map_line *x, const struct map_line *y)
{
	return x->inode == y->inode && x->major == y->major && x->minor == y->minor &&
	       y->lo >= x->lo && y->hi <= x->hi && y->off - x->off == y->lo - x->lo;
}

/*
 * MAPS (LEN bytes) as libdw can read it, into a new string (*OUT bytes),
 * or NULL: in address order, without a line that maps a part of the one
 * before it.  A recording keeps every line it saw, and a text mapping
 * that was patched after the first look comes back split in two, after
 * every other file; libdw took the file seen again for another image
 * based at the split, and named none of its addresses.
 */
static char *tidy_maps(const char *maps, size_t len, size_t *out)
{
	size_t n = 0, k = 0;
	struct map_line *v = NULL;
	size_t cap = 0;
	char *text = NULL;

	for (const char *p = maps, *end = maps + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		struct map_line m = { .at = p, .len = l };
		struct map_line *w = mc_grown(v, &cap, n, sizeof(*v), 64);

		if (!w)
			goto out;
		v = w;
		/* (A line that does not parse compares as a mapping at 0.) */
		if (sscanf(p, "%llx-%llx %*s %llx %x:%x %llu", &m.lo, &m.hi, &m.off, &m.major,
			   &m.minor, &m.inode) != 6)
			m.lo = m.hi = 0;
		v[n++] = m;
		p += l;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_map_line);
	if (!(text = malloc(len + 1)))
		goto out;
	*out = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && v[i].hi && map_within(&v[k - 1], &v[i]))
			continue;
		v[k++] = v[i];
		memcpy(text + *out, v[i].at, v[i].len);
		*out += v[i].len;
		if (v[i].at[v[i].len - 1] != '\n')
			text[(*out)++] = '\n';
	}
out:
	free(v);
	return text;
}

static struct mc_lines *lines_of(struct symbols *c)
{
	if (!c->tried && c->maps) {
		char err[256];
		size_t len = 0;
		char *maps = tidy_maps(c->maps, c->len, &len);
		FILE *f = maps && len ? fmemopen(maps, len, "r") : NULL;

		c->tried = true;
		if (f) {
			c->lines = mc_lines_open_maps(f, err, sizeof(err));
			fclose(f);
		}
		free(maps);
	}
	return c->lines;
}
#endif


const char *sym_func(struct symbols *c, uint64_t addr)
{
#ifdef MCLOC_HAVE_DW
	bool fresh;
	uint64_t *v = c && addr && lines_of(c) ? u64map_slot(&c->names, addr, &fresh) : NULL;

	if (v && fresh) {
		uint64_t off = 0;
		const char *name = mc_lines_func(c->lines, addr, &off);

		char *copy = name ? strdup(name) : NULL;

		if (copy)
			sym_clean(copy, strlen(copy));
		*v = (uint64_t)(uintptr_t)copy;
	}
	return v ? (const char *)(uintptr_t)*v : NULL;
#else
	(void)c, (void)addr;
	return NULL;
#endif
}

const char *sym_source(struct symbols *c, uint64_t addr, char *buf, size_t len)
{
#ifdef MCLOC_HAVE_DW
	struct mc_lines *l = c ? lines_of(c) : NULL;
	const char *src = l ? mc_lines_src(l, addr, buf, len) : NULL;

	if (src)
		sym_clean(buf, strlen(buf));
	return src;
#else
	(void)c, (void)addr, (void)buf, (void)len;
	return NULL;
#endif
}

int sym_params(struct symbols *c, uint64_t addr, struct mc_param *v, int max,
	       struct mc_param *ret)
{
#ifdef MCLOC_HAVE_DW
	struct mc_lines *l = c ? lines_of(c) : NULL;

	return l ? mc_lines_params(l, addr, v, max, ret) : -1;
#else
	(void)c, (void)addr, (void)v, (void)max, (void)ret;
	return -1;
#endif
}

/* The length of the UTF-8 sequence at S (of N bytes), 0 if it is none:
 * no overlong form, surrogate, or code point past U+10FFFF, as JSON's
 * readers want. */
size_t sym_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t want;

	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		want = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		want = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		want = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (n < want || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < want; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return want;
}

void sym_clean(char *s, size_t len)
{
	unsigned char *u = (unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t n = u[i] >= 0x80 ? sym_utf8_len(u + i, len - i) : 1;

		if (!n || (u[i] && (u[i] < 0x20 || u[i] == 0x7f)))
			u[i] = '?', n = 1;
		i += n;
	}
}

void sym_free(struct symbols *c)
{
	if (!c)
		return;
	forget(c);
	free(c->maps);
	free(c);
}
