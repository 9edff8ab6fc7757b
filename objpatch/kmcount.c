// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * __mcount_loc under 6.12's conventions (kmcount.h).
 *
 * Byte identity with 6.12's sorttable -s NMFILE rests on reading NMFILE
 * as it does and searching it as it does, not as a careful reader would:
 *   - It reads the file as a stream of whitespace-separated fields, four
 *     to a record (at most 16 characters of the address, at most 16 of
 *     the size, one character of type, the name), whatever the lines.  A
 *     symbol without a size (nm prints none for size 0) or an undefined
 *     one (no address) shifts the fields of the records after it; the
 *     records it takes for functions (type t, T or W) are what counts.
 *   - It sorts them by address, keeping the file's order among equals
 *     (glibc's qsort, a merge sort), and looks each entry up with glibc's
 *     bsearch, an entry being the function's when it lies in [address -
 *     before, address + size).  Overlapping functions make that search
 *     miss some entries a scan would find; those are zeroed too.
 * Without NMFILE, the listing is made from the image's symbol table the
 * way nm -S prints it (sorted by name, its type letters), so that sort
 * --kernel gives the bytes link-vmlinux.sh's two steps give.
 */
#include "kmcount.h"

#include "../common/mcsort.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int km_version_parse(const char *s, enum km_version *v)
{
	if (!strcmp(s, "6.1"))
		*v = KM_6_1;
	else if (!strcmp(s, "6.12"))
		*v = KM_6_12;
	else
		return -1;
	return 0;
}

const char *km_version_name(enum km_version v)
{
	return v == KM_6_12 ? "6.12" : "6.1";
}

/* The string at address VA of F, if its section has contents: NULL if not. */
static const char *string_at(struct mce_file *f, uint64_t va, size_t *len)
{
	struct mce_sec *s = mce_sec_of_vaddr(f, va);
	Elf_Data *d = s && s->sh.sh_type == SHT_PROGBITS ? mce_sec_data(f, s) : NULL;

	if (!d || d->d_type != ELF_T_BYTE || !d->d_buf || va - s->sh.sh_addr >= d->d_size)
		return NULL;
	*len = d->d_size - (va - s->sh.sh_addr);
	return (const char *)d->d_buf + (va - s->sh.sh_addr);
}

enum km_version km_detect(struct mce_file *f)
{
	static const char *const names[] = { "linux_banner" };
	static const char prefix[] = "Linux version ";
	long banner;
	struct mce_sym m;
	const char *p;
	size_t len;
	unsigned major, minor;

	char ver[32];

	mce_sym_lookup_many(f, names, 1, &banner, 0);
	if (banner > 0 && mce_sym_peek(f, (size_t)banner, &m) == 0 &&
	    (p = string_at(f, m.value, &len)) && len > sizeof(prefix) + 4 &&
	    !memcmp(p, prefix, sizeof(prefix) - 1)) {
		/* (Only the section's own bytes: the string need not end in it.) */
		size_t n = len - (sizeof(prefix) - 1);

		n = n < sizeof(ver) - 1 ? n : sizeof(ver) - 1;
		memcpy(ver, p + sizeof(prefix) - 1, n);
		ver[n] = 0;
		if (sscanf(ver, "%u.%u", &major, &minor) == 2)
			return major > 6 || (major == 6 && minor >= 12) ? KM_6_12 : KM_6_1;
	}
	return mce_sec_by_name(f, ".orc_header") ? KM_6_12 : KM_6_1;
}

/* ---- the function list ---------------------------------------------------- */

struct km_func {
	uint64_t addr, size;
};

struct km_funcs {
	struct km_func *v;
	size_t n, cap;
};

static int push_func(struct km_funcs *fl, uint64_t addr, uint64_t size)
{
	if (fl->n == fl->cap) {
		size_t cap = fl->cap ? 2 * fl->cap : 1024;
		struct km_func *v = realloc(fl->v, cap * sizeof(*v));

		if (!v)
			return -1;
		fl->v = v;
		fl->cap = cap;
	}
	fl->v[fl->n] = (struct km_func){ addr, size };
	fl->n++;
	return 0;
}

/* isspace() in the "C" locale, the one sorttable's fscanf reads in (it
 * sets none), without the locale table's cost on every byte. */
static bool is_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static const char *skip_space(const char *p, const char *end)
{
	while (p < end && is_space(*p))
		p++;
	return p;
}

/* strtoull(S, NULL, 16) of a field of at most 16 characters: a plain run
 * of hex digits, nm's case, by hand; anything else (a sign, a "0x", a
 * name in the field's place) as strtoull reads it. */
static int hex_digit(char ch)
{
	unsigned c = (unsigned char)ch;

	if (c - '0' < 10)
		return (int)(c - '0');
	if ((c | 0x20) - 'a' < 6)
		return (int)((c | 0x20) - 'a' + 10);
	return -1;
}

static uint64_t hex_field(const char *s)
{
	uint64_t v = 0;
	const char *p = s;
	int d;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return strtoull(s, NULL, 16);
	for (; (d = hex_digit(*p)) >= 0; p++)
		v = v << 4 | (unsigned)d;
	return p == s ? strtoull(s, NULL, 16) : v;
}

/* 1 to 16 hex digits at P, then one space and something else: the value
 * into *V, and the place past the space; NULL for anything else. */
static const char *hex_run(const char *p, const char *end, uint64_t *v)
{
	const char *s = p;
	uint64_t x = 0;
	int d;

	for (; p < end && p - s < 16 && (d = hex_digit(*p)) >= 0; p++)
		x = x << 4 | (unsigned)d;
	if (p == s || end - p < 2 || !is_space(p[0]) || is_space(p[1]))
		return NULL;
	*v = x;
	return p + 1;
}

/*
 * A record of nm -S's usual shape at P, "ADDR SIZE TYPE NAME" with one
 * space between the fields, read at once: past the name, or NULL when P
 * starts anything else, which parse_listing() then reads field by field.
 * (What it takes is what that reading would take: there, each field's
 * trailing space run is skipped whole, and here it is one space long.)
 */
static const char *nm_record(const char *p, const char *end, uint64_t *addr, uint64_t *size,
			     char *type)
{
	if (!(p = hex_run(p, end, addr)) || !(p = hex_run(p, end, size)) ||
	    end - p < 3 || !is_space(p[1]) || is_space(p[2]))
		return NULL;
	*type = p[0];
	for (p += 2; p < end && !is_space(*p); p++)
		;
	return p;
}

/* At most MAX non-space characters from P into OUT (MAX + 1 bytes; NULL
 * to skip them): past them. */
static const char *field(const char *p, const char *end, size_t max, char *out)
{
	size_t n = 0;

	while (p < end && n < max && !is_space(*p)) {
		if (out)
			out[n] = *p;
		n++;
		p++;
	}
	if (out)
		out[n] = 0;
	return p;
}

/* The functions of the nm -S listing TEXT[0..LEN), read record by
 * record as sorttable reads them (the header comment). */
static int parse_listing(const char *text, size_t len, struct km_funcs *fl)
{
	const char *p = text, *end = text + len;
	char addr[17], size[17];

	for (;;) {
		uint64_t a, sz;
		const char *q;
		char type;

		if ((p = skip_space(p, end)) == end)
			break;
		if ((q = nm_record(p, end, &a, &sz, &type))) {
			p = q;
		} else {
			p = skip_space(field(p, end, 16, addr), end);
			if (p == end)
				break;
			p = skip_space(field(p, end, 16, size), end);
			if (p == end)
				break;
			type = *p++;
			p = skip_space(field(skip_space(p, end), end, SIZE_MAX, NULL), end);
			a = hex_field(addr);
			sz = hex_field(size);
		}
		/* (Functions: text, global text, weak.) */
		if ((type == 't' || type == 'T' || type == 'W') && push_func(fl, a, sz) < 0)
			return -1;
	}
	return 0;
}

/* nm's type letter for symbol M of F (binutils' rules, for what an image
 * holds), or 0 for a symbol nm does not list. */
static char nm_letter(const struct mce_file *f, const struct mce_sym *m)
{
	char c;

	if (m->type == STT_SECTION || m->type == STT_FILE || !m->name[0])
		return 0;
	/* (The arm, aarch64 and riscv mapping symbols: nm's "special".) */
	if (m->name[0] == '$' && strchr("atxd", m->name[1]) &&
	    (!m->name[2] || m->name[2] == '.'))
		return 0;
	if (m->raw_shndx == SHN_UNDEF)
		return m->bind == STB_WEAK ? (m->type == STT_OBJECT ? 'v' : 'w') : 'U';
	if (m->raw_shndx == SHN_COMMON)
		return 'C';
	if (m->type == STT_GNU_IFUNC)
		return 'i';
	if (m->bind == STB_WEAK)
		return m->type == STT_OBJECT ? 'V' : 'W';
	if (m->bind == STB_GNU_UNIQUE)
		return 'u';
	if (m->raw_shndx == SHN_ABS) {
		c = 'a';
	} else if (m->shndx && m->shndx < f->shnum) {
		const GElf_Shdr *sh = &f->secs[m->shndx].sh;

		if (sh->sh_flags & SHF_EXECINSTR)
			c = 't';
		else if (!(sh->sh_flags & SHF_ALLOC))
			c = 'n';
		else if (sh->sh_type == SHT_NOBITS)
			c = 'b';
		else
			c = sh->sh_flags & SHF_WRITE ? 'd' : 'r';
	} else {
		c = '?';
	}
	return m->bind == STB_LOCAL ? c : (char)toupper((unsigned char)c);
}

struct named {
	const char *name;
	size_t idx;
	char letter;		/* nm_letter()'s, worked out once */
};

static int by_name(const void *x, const void *y)
{
	const struct named *a = x, *b = y;
	int c = strcmp(a->name, b->name);

	return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

/* V as W lowercase hex digits into BUF at AT: past them. */
static size_t put_hex(char *buf, size_t at, uint64_t v, int w)
{
	for (int i = w - 1; i >= 0; i--, v >>= 4)
		buf[at + (size_t)i] = "0123456789abcdef"[v & 15];
	return at + (size_t)w;
}

/* The text of "nm -S" on F, into *OUT (*LEN bytes, malloc'd). */
static int nm_listing(struct mce_file *f, char **out, size_t *len)
{
	struct named *v = malloc((f->nsyms + 1) * sizeof(*v));
	size_t n = 0, cap = 0, at = 0;
	int w = (int)f->addrsize * 2;
	char *buf = NULL;

	if (!v)
		return mce_fail(f, "out of memory");
	for (size_t i = 1; i < f->nsyms; i++) {
		char c = nm_letter(f, &f->syms[i]);

		if (c)
			v[n++] = (struct named){ f->syms[i].name, i, c };
	}
	qsort(v, n, sizeof(*v), by_name);
	for (size_t k = 0; k < n; k++) {
		const struct mce_sym *m = &f->syms[v[k].idx];
		char c = v[k].letter;
		size_t namelen = strlen(m->name), need = namelen + 2 * (size_t)w + 8;

		if (at + need > cap) {
			char *nb;

			cap = 2 * cap + need + 65536;
			if (!(nb = realloc(buf, cap))) {
				free(buf);
				free(v);
				return mce_fail(f, "out of memory");
			}
			buf = nb;
		}
		/* nm's "%0*llx %0*llx %c %s\n", without the size when it is 0
		 * and with blanks for an undefined symbol's address. */
		if (m->raw_shndx == SHN_UNDEF) {
			memset(buf + at, ' ', (size_t)w);
			at += (size_t)w;
		} else {
			at = put_hex(buf, at, m->value, w);
		}
		buf[at++] = ' ';
		if (m->raw_shndx != SHN_UNDEF && m->size) {
			at = put_hex(buf, at, m->size, w);
			buf[at++] = ' ';
		}
		buf[at++] = c;
		buf[at++] = ' ';
		memcpy(buf + at, m->name, namelen);
		at += namelen;
		buf[at++] = '\n';
	}
	free(v);
	*out = buf;
	*len = at;
	return 0;
}

/* Past this, NMFILE is no nm -S listing (a kernel's is a few MB), and
 * reading on (/dev/zero, a pipe that never ends) would only fill memory. */
#define KM_LISTING_MAX (1u << 30)

/* NMFILE (a regular file, or a pipe such as <(nm -S vmlinux)) into *OUT. */
static int read_listing(struct mce_file *f, const char *path, char **out, size_t *len)
{
	/* O_NONBLOCK: a FIFO's open would otherwise wait for a writer. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	size_t cap = 65536, n = 0;
	struct stat st;
	char *buf = NULL;
	ssize_t k;

	if (fd < 0)
		return mce_fail(f, "%s: %s", path, strerror(errno));
	const char *bad = fstat(fd, &st) < 0	     ? strerror(errno)
			  : S_ISDIR(st.st_mode)	     ? "is a directory"
			  : S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) ? NULL
			  : "not a regular file or a pipe";

	if (bad) {
		close(fd);
		return mce_fail(f, "%s: %s", path, bad);
	}
	fcntl(fd, F_SETFL, 0);	/* (a pipe's reads may wait for its writer) */
	if (!(buf = malloc(cap)))
		goto nomem;
	while ((k = read(fd, buf + n, cap - n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;

			free(buf);
			close(fd);
			return mce_fail(f, "%s: cannot read: %s", path, strerror(e));
		}
		n += (size_t)k;
		if (n == cap) {
			char *nb;

			if (cap >= KM_LISTING_MAX) {
				free(buf);
				close(fd);
				return mce_fail(f, "%s: more than %u MiB: not an nm -S listing", path,
						KM_LISTING_MAX >> 20);
			}
			if (!(nb = realloc(buf, cap *= 2)))
				goto nomem;
			buf = nb;
		}
	}
	close(fd);
	*out = buf;
	*len = n;
	return 0;
nomem:
	free(buf);
	close(fd);
	return mce_fail(f, "out of memory");
}

/* FL by address, the listing's order kept among equals, as glibc's qsort
 * (a merge sort) leaves them: a stable radix sort of (address, place). */
static int sort_funcs(struct km_funcs *fl)
{
	struct mc_kv *kv = malloc((fl->n + 1) * sizeof(*kv));
	struct km_func *v = malloc((fl->n + 1) * sizeof(*v));

	if (!kv || !v) {
		free(kv);
		free(v);
		return -1;
	}
	for (size_t i = 0; i < fl->n; i++)
		kv[i] = (struct mc_kv){ fl->v[i].addr, i };
	if (mc_sort_kv(kv, fl->n) < 0) {
		free(kv);
		free(v);
		return -1;
	}
	for (size_t i = 0; i < fl->n; i++)
		v[i] = fl->v[kv[i].val];
	free(kv);
	free(fl->v);
	fl->v = v;
	fl->cap = fl->n + 1;
	return 0;
}

static int load_funcs(struct mce_file *f, const struct km_opts *o, struct km_funcs *fl)
{
	char *text = NULL;
	size_t len = 0;
	int r;

	memset(fl, 0, sizeof(*fl));
	if (o->from == KM_FUNCS_NONE)
		return 0;
	if (o->from == KM_FUNCS_FILE)
		r = read_listing(f, o->nm_file, &text, &len);
	else
		r = mce_syms_need(f) < 0 ? -1 : nm_listing(f, &text, &len);
	if (r < 0)
		return -1;
	r = parse_listing(text, len, fl);
	free(text);
	if (r < 0 || sort_funcs(fl) < 0)
		return mce_fail(f, "out of memory");
	return 0;
}

/* Whether KEY is some function's, by glibc's bsearch over FL. */
static bool in_function(const struct km_funcs *fl, uint64_t key, unsigned before)
{
	size_t lo = 0, hi = fl->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct km_func *fn = &fl->v[mid];

		if (key + before < fn->addr)
			hi = mid;
		else if (key >= fn->addr + fn->size)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

/* ---- the table ------------------------------------------------------------ */

static int by_place(const void *x, const void *y)
{
	const struct mce_dynrel *a = *(const struct mce_dynrel *const *)x;
	const struct mce_dynrel *b = *(const struct mce_dynrel *const *)y;

	if (a->rs->idx != b->rs->idx)
		return a->rs->idx < b->rs->idx ? -1 : 1;
	return (a->i > b->i) - (a->i < b->i);
}

/*
 * The relocations of [START, START + N words) when A's sorttable reads
 * addends and there are any: every word must have its R_*_RELATIVE, in
 * the order sorttable meets them (section by section, then by index),
 * into REL.  *NREL: 0 when the words in place are the truth.
 */
static int table_relocs(struct mce_file *f, const struct mc_arch *a, uint64_t start, size_t n,
			const struct mce_dynrel **rel, size_t *nrel)
{
	*nrel = 0;
	if (!a->kernel_mcount_addends || !n ||
	    !mce_dynrels_within(f, start, start + n * f->addrsize))
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct mce_dynrel *d = mce_dynrel_at(f, start + i * f->addrsize);

		if (!d)
			return mce_fail(f, "__mcount_loc: %zu entries but relocations for only "
					"some (entry %zu has none)", n, i);
		if (!d->rs || !d->rs->is_rela || d->type != a->relative_reloc || d->sym)
			return mce_fail(f, "__mcount_loc entry %zu: relocation type %u, not %s's "
					"relative one", i, d->type, a->name);
		rel[(*nrel)++] = d;
	}
	qsort(rel, *nrel, sizeof(*rel), by_place);
	return 0;
}

/* Write the sorted V[0..N) back: into the addends of REL (in its order),
 * or in place.  *CHANGED: whether anything differed. */
static int write_back(struct mce_file *f, uint64_t start, size_t n, const uint64_t *v,
		      const struct mce_dynrel **rel, size_t nrel, bool *changed)
{
	if (!nrel) {
		long c = mce_words_write(f, start, n, v);

		*changed = c > 0;
		return c < 0 ? -1 : 0;
	}
	for (size_t i = 0; i < nrel; i++) {
		if ((uint64_t)rel[i]->addend == v[i])
			continue;
		*changed = true;
		if (mce_dynrel_set_addend(f, rel[i], (int64_t)v[i]) < 0)
			return -1;
	}
	return 0;
}

int km_sort(struct mce_file *f, const struct mc_arch *a, uint64_t start, uint64_t end,
	    const struct km_opts *o, struct km_stats *st)
{
	size_t n = (end - start) / f->addrsize, nrel = 0, nonzero = 0;
	uint64_t *v = malloc((n + 1) * sizeof(*v)), *sorted = malloc((n + 1) * sizeof(*v));
	const struct mce_dynrel **rel = malloc((n + 1) * sizeof(*rel));
	struct km_funcs fl = { 0 };
	int ret = -1;

	memset(st, 0, sizeof(*st));
	if (!v || !sorted || !rel) {
		mce_fail(f, "out of memory");
		goto out;
	}
	if (table_relocs(f, a, start, n, rel, &nrel) < 0 || load_funcs(f, o, &fl) < 0)
		goto out;
	for (size_t i = 0; i < nrel; i++)
		v[i] = (uint64_t)rel[i]->addend;
	if (!nrel && n && mce_words_read(f, start, n, v) < 0)
		goto out;
	if (f->addrsize == 4)	/* (the addends of a 32-bit RELA are words) */
		for (size_t i = 0; i < n; i++)
			v[i] &= 0xffffffffu;
	for (size_t i = 0; fl.n && i < n; i++)
		if (!in_function(&fl, v[i], a->kernel_mcount_before)) {
			st->zeroed += v[i] != 0;
			v[i] = 0;
		}
	for (size_t i = 0; i < n; i++)
		nonzero += v[i] != 0;
	if (n && !nonzero) {
		mce_fail(f, "__mcount_loc: all %zu entries %s zero: the kernel would trace "
			 "nothing (do the entries lie before their functions?)", n,
			 st->zeroed ? "would come out" : "are");
		goto out;
	}
	if (mc_sort_u64_into(v, n, NULL, sorted) < 0) {
		mce_fail(f, "out of memory");
		goto out;
	}
	st->entries = n;
	st->addends = nrel != 0;
	ret = write_back(f, start, n, sorted, rel, nrel, &st->changed);
out:
	free(v);
	free(sorted);
	free(rel);
	free(fl.v);
	return ret;
}
