// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * __mcount_loc under 6.12's conventions (kmcount.h).
 *
 * Byte identity with 6.12's sorttable -s NMFILE rests on reading NMFILE
 * as it does and searching it as it does, not as a careful reader would:
 *   - It reads the file as a stream of whitespace-separated fields, four
 *     to a record (at most 16 characters of the address, at most 16 of
 *     the size, one character of type, the name), whatever the lines.  A
 *     line without a size (nm prints none for size 0) is still one
 *     record, whose type is the name's first character and whose size is
 *     the type letter read as hex; a name of one character, an undefined
 *     symbol's line (no address) or a name with whitespace shifts the
 *     fields of the records after it, until a line happens to realign
 *     them.  The records it takes for functions (type t, T or W) are
 *     what counts.
 *   - It sorts them by address, keeping the file's order among equals
 *     (glibc's qsort, a merge sort), and looks each entry up with glibc's
 *     bsearch, an entry being the function's when it lies in [address -
 *     before, address + size).  Overlapping functions make that search
 *     miss some entries a scan would find; those are zeroed too.
 * Without NMFILE, the listing is the image's symbol table as nm -S would
 * print it (sorted by name, its type letters), so that sort --kernel
 * gives the bytes link-vmlinux.sh's two steps give; only its lines from
 * the first that shifts on are printed and read back (nm_functions()).
 */
#include "kmcount.h"

#include "../common/mcsort.h"
#include "../common/prefault.h"

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

/*
 * Past the run of non-space bytes at P (a name), before END, and with
 * NUL, before a zero byte too: eight bytes a step, a whitespace byte (9
 * to 13, or 32) found by arithmetic on the word.  A byte of 128 or more
 * is never whitespace: LOW keeps the tests on the low seven bits, and the
 * top bit of each byte of X rules those bytes out.
 */
static const char *past_name(const char *p, const char *end, bool nul)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;

	for (; end - p >= 8; p += 8) {
		uint64_t x, low, sp, ws, zero;

		memcpy(&x, p, 8);
		low = x & ~high;
		/* bytes equal to 32: low ^ 32 is 0; bytes 9..13: low + (127 - 13)
		 * has no top bit, low + (128 - 9) has it; zero bytes: low + 127
		 * has no top bit. */
		sp = ((low ^ 0x20 * ones) + 0x7f * ones) & high;
		ws = ~((low + (127 - 13) * ones) & high) & ((low + (128 - 9) * ones) & high);
		zero = nul ? ~(low + 0x7f * ones) & high : 0;
		ws = ((~sp & high) | ws | zero) & ~x & high;
		if (ws)	/* (the byte first in memory: lowest or highest) */
			return p + (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? __builtin_ctzll(ws)
									     : __builtin_clzll(ws)) / 8;
	}
	while (p < end && !is_space(*p) && (!nul || *p))
		p++;
	return p;
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
 * 8 hex digits at P, by arithmetic on the word: their value into *V, or
 * false when a byte is no hex digit.  A digit's value is its low nibble,
 * plus 9 for a letter (bit 6); the nibbles are then gathered in pairs,
 * the first in memory the most significant.  (A kernel's listing has
 * 19,000 records, 32 digits each: a loop over them was a fifth of the
 * drop-in's time.)
 */
static bool hex8(const char *p, uint32_t *v)
{
	const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
	uint64_t x, low, fold, digit, letter;

	memcpy(&x, p, 8);
	if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
		x = __builtin_bswap64(x);	/* (the first byte lowest) */
	low = x & ~high;
	fold = low | 0x20 * ones;	/* 'A'-'F' as 'a'-'f' */
	/* [A, B] holds a seven-bit byte Y when Y + 128 - A has the top bit
	 * and Y + 127 - B has not. */
	digit = (low + (128 - '0') * ones) & ~(low + (127 - '9') * ones);
	letter = (fold + (128 - 'a') * ones) & ~(fold + (127 - 'f') * ones);
	if (((digit | letter) & ~x & high) != high)
		return false;
	x = (x & 0x0f * ones) + ((x >> 6) & ones) * 9;
	x = ((x << 4) + (x >> 8)) & 0x00ff00ff00ff00ffull;
	x = ((x << 8) + (x >> 16)) & 0x0000ffff0000ffffull;
	*v = (uint32_t)((x << 16) + (x >> 32));
	return true;
}

/* Exactly 16 hex digits at P (the caller knows they are there). */
static bool hex16(const char *p, uint64_t *v)
{
	uint32_t hi, lo;

	if (!hex8(p, &hi) || !hex8(p + 8, &lo))
		return false;
	*v = (uint64_t)hi << 32 | lo;
	return true;
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
	/* (nm's own: both fields 16 digits wide, on a 64-bit image.) */
	if (end - p >= 37 && p[16] == ' ' && p[33] == ' ' && !is_space(p[34]) &&
	    p[35] == ' ' && !is_space(p[36]) && hex16(p, addr) && hex16(p + 17, size)) {
		*type = p[34];
		return past_name(p + 36, end, false);
	}
	if (!(p = hex_run(p, end, addr)) || !(p = hex_run(p, end, size)) ||
	    end - p < 3 || !is_space(p[1]) || is_space(p[2]))
		return NULL;
	*type = p[0];
	return past_name(p + 2, end, false);
}

/* At most 16 non-space characters from P into OUT (17 bytes), as "%16s"
 * takes them: past them. */
static const char *field(const char *p, const char *end, char *out)
{
	size_t n = 0;

	while (p < end && n < 16 && !is_space(*p))
		out[n++] = *p++;
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
			p = skip_space(field(p, end, addr), end);
			if (p == end)
				break;
			p = skip_space(field(p, end, size), end);
			if (p == end)
				break;
			type = *p++;
			p = skip_space(past_name(skip_space(p, end), end, false), end);
			a = hex_field(addr);
			sz = hex_field(size);
		}
		/* (Functions: text, global text, weak.) */
		if ((type == 't' || type == 'T' || type == 'W') && push_func(fl, a, sz) < 0)
			return -1;
	}
	return 0;
}

/* Whether BFD makes S of F a section of its own: not the symbol table
 * and its string tables, nor the static relocations of a section (a
 * symbol "in" one of those is absolute to nm). */
static bool bfd_section(const struct mce_file *f, const struct mce_sec *s)
{
	const GElf_Shdr *sh = &s->sh;

	switch (sh->sh_type) {
	case SHT_SYMTAB:
	case SHT_SYMTAB_SHNDX:
		return false;
	case SHT_STRTAB:
		return s->idx != f->shstrndx && s != f->strtab;
	case SHT_REL:
	case SHT_RELA:
		return (sh->sh_flags & SHF_ALLOC) || !f->symtab || sh->sh_link != f->symtab->idx ||
		       !sh->sh_info || sh->sh_info >= f->shnum || sh->sh_info == s->idx;
	default:
		return true;
	}
}

/* nm's letter for a symbol defined in S: BFD's, which looks at a few
 * names (PE's, on any object) before the flags, and calls a section
 * without contents 'b' whether it is allocated or not.  (What it calls
 * 'N' or '?', 'n' here: no function's letter, and no hex digit, which is
 * all sorttable makes of a letter.) */
static char section_letter(const struct mce_file *f, const struct mce_sec *s)
{
	static const struct {
		const char *prefix;
		char letter;
	} named[] = { { ".drectve", 'i' }, { ".edata", 'e' }, { ".idata", 'i' }, { ".pdata", 'p' } };

	if (!bfd_section(f, s))
		return 'a';
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (s->name && !strncmp(s->name, named[i].prefix, strlen(named[i].prefix)))
			return named[i].letter;
	if (s->sh.sh_flags & SHF_EXECINSTR)
		return 't';
	if (s->sh.sh_type == SHT_NOBITS)
		return 'b';
	if (!(s->sh.sh_flags & SHF_ALLOC))
		return 'n';
	return s->sh.sh_flags & SHF_WRITE ? 'd' : 'r';
}

/* nm's type letter for symbol M of F (binutils' rules, for what an image
 * of A holds), or 0 for a symbol nm does not list.  SECS: each section's
 * section_letter(), worked out once per listing. */
static char nm_letter(const struct mce_file *f, const struct mc_arch *a, const char *secs,
		      const struct mce_sym *m)
{
	/* (BFD reads an STT_COMMON symbol as an object.) */
	bool object = m->type == STT_OBJECT || m->type == STT_COMMON;
	char c;

	if (m->type == STT_SECTION || m->type == STT_FILE || (!m->name[0] && a->nm_hides_empty_names))
		return 0;
	/* (Mapping symbols, on the architectures that have them: nm's
	 * "special".) */
	if (m->name[0] == '$' && a->nm_mapping_letters && m->name[1] &&
	    strchr(a->nm_mapping_letters, m->name[1]) && (!m->name[2] || m->name[2] == '.'))
		return 0;
	if (m->raw_shndx == SHN_UNDEF)
		return m->bind == STB_WEAK ? (object ? 'v' : 'w') : 'U';
	if (m->raw_shndx == SHN_COMMON)
		return 'C';
	if (m->type == STT_GNU_IFUNC)
		return 'i';
	if (m->bind == STB_WEAK)
		return object ? 'V' : 'W';
	if (m->bind == STB_GNU_UNIQUE)
		return 'u';
	/* (Neither local nor global: an OS or processor binding, which BFD
	 * reads as no binding at all.) */
	if (m->bind != STB_LOCAL && m->bind != STB_GLOBAL)
		return '?';
	if (m->raw_shndx == SHN_ABS) {
		c = 'a';
	} else if (m->shndx && m->shndx < f->shnum) {
		c = secs[m->shndx];
	} else {
		c = '?';
	}
	/* (toupper() without the locale's table) */
	return m->bind == STB_LOCAL || c < 'a' || c > 'z' ? c : (char)(c - 'a' + 'A');
}

/* A line of the listing, all it needs read once, in the symbol table's
 * order: read in name order, the symbols' scattered bytes were most of
 * the listing's cost. */
struct named {
	const char *name;
	uint64_t value, size;
	uint32_t len;
	char letter;		/* nm_letter()'s */
	bool undef;
	bool spaced;		/* whitespace in the name */
};

/* What the name sort reads of a line: the name's first 16 bytes as two
 * name_word()s, read in the table's order, and the name. */
struct name_key {
	uint64_t word[2];
	const char *name;
};

/* The 8 bytes of NAME from AT on (its length is at least AT), the first
 * the most significant, zeros past its end: strcmp's order. */
static uint64_t name_word(const char *name, size_t at)
{
	uint64_t w = 0;
	int i = 0;

	for (const char *p = name + at; i < 8; i++, p++) {
		w = w << 8 | (unsigned char)*p;
		if (!*p) {
			/* (the zeros past the end) */
			for (i++; i < 8; i++)
				w <<= 8;
			break;
		}
	}
	return w;
}

/* name_word() of the LEFT bytes at P (the rest of a name), without a
 * byte loop when they fill the word. */
static uint64_t word_of(const char *p, size_t left)
{
	uint64_t w = 0;

	if (left < 8)
		return left ? name_word(p, 0) : 0;
	memcpy(&w, p, 8);
	return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? __builtin_bswap64(w) : w;
}

/* K's name's word at DEPTH (a multiple of 8, within the name): the first
 * two were read with the symbol, in order; later ones are misses. */
static uint64_t word_at(const struct name_key *k, size_t depth)
{
	return depth < 16 ? k->word[depth / 8] : name_word(k->name, depth);
}

/* Whether line X comes before line Y in K: by name from byte DEPTH on
 * (the bytes before it are the same), then by place in the symbol table,
 * which is their order in K. */
static bool named_before(const struct name_key *k, uint32_t x, uint32_t y, size_t depth)
{
	for (; depth < 16; depth += 8) {
		uint64_t a = k[x].word[depth / 8], b = k[y].word[depth / 8];

		if (a != b)
			return a < b;
		if (!(a & 0xff))	/* (both names end here) */
			return x < y;
	}
	int c = strcmp(k[x].name + depth, k[y].name + depth);

	return c ? c < 0 : x < y;
}

/*
 * ORD[0..N), places in K whose names agree on their first DEPTH bytes,
 * in nm's order: by name, then (for equal names) by place.  A radix sort
 * by the next eight bytes (the first two of them in K), then the same
 * for each run that agrees on them and goes on: a kernel's 19,000 names
 * share long prefixes (__pfx_, __ksymtab_), and strcmp through qsort was
 * a quarter of sort --kernel.  The places move, not the lines.
 */
static int sort_names(const struct name_key *k, uint32_t *ord, size_t n, size_t depth)
{
	struct mc_kv *kv;

	if (n < 16) {
		for (size_t i = 1; i < n; i++) {
			uint32_t x = ord[i];
			size_t j = i;

			for (; j > 0 && named_before(k, x, ord[j - 1], depth); j--)
				ord[j] = ord[j - 1];
			ord[j] = x;
		}
		return 0;
	}
	if (!(kv = malloc(n * sizeof(*kv))))
		return -1;
	for (size_t i = 0; i < n; i++)
		kv[i] = (struct mc_kv){ word_at(&k[ord[i]], depth), ord[i] };
	/* (Stable: equal names keep their places' order.) */
	if (mc_sort_kv(kv, n) < 0) {
		free(kv);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		ord[i] = (uint32_t)kv[i].val;
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && kv[j].key == kv[i].key; j++)
			;
		/* (A word ending in a zero byte ends the names: they are equal.) */
		if (j - i > 1 && (kv[i].key & 0xff) && sort_names(k, ord + i, j - i, depth + 8) < 0) {
			free(kv);
			return -1;
		}
	}
	free(kv);
	return 0;
}

/* V as W lowercase hex digits (8 or 16) into BUF at AT: past them.  Each
 * nibble spread to a byte, then made a digit, eight at a time. */
static size_t put_hex(char *buf, size_t at, uint64_t v, size_t w)
{
	const uint64_t ones = 0x0101010101010101ull;

	for (size_t half = w / 8; half-- > 0; v >>= 32) {
		uint64_t x = (uint32_t)v;

		x = (x | x << 16) & 0x0000ffff0000ffffull;
		x = (x | x << 8) & 0x00ff00ff00ff00ffull;
		x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
		/* ten or more: 'a' - '0' - 10 more */
		x += '0' * ones + (((x + 6 * ones) >> 4) & ones) * ('a' - '0' - 10);
		/* (the most significant digit first in memory) */
		if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
			x = __builtin_bswap64(x);
		memcpy(buf + at + half * 8, &x, 8);
	}
	return at + w;
}

/*
 * Whether M's line is not one record of sorttable's reading by itself
 * (the header comment): an undefined symbol's (no address), a name of one
 * byte without a size (the record takes the next line's address), an
 * empty name (the record's name is the next line's address), or a name
 * with whitespace in it.
 */
static bool shifts(const struct named *m)
{
	return m->undef || (!m->size && m->len < 2) || !m->len || m->spaced;
}

/* Line M (nm's "%0*llx %0*llx %c %s\n", without the size when it is 0
 * and with blanks for an undefined symbol's address) into BUF at AT:
 * past it. */
static size_t put_line(char *buf, size_t at, const struct named *m, size_t w)
{
	if (m->undef) {
		memset(buf + at, ' ', w);
		at += w;
	} else {
		at = put_hex(buf, at, m->value, w);
	}
	buf[at++] = ' ';
	if (!m->undef && m->size) {
		at = put_hex(buf, at, m->size, w);
		buf[at++] = ' ';
	}
	buf[at++] = m->letter;
	buf[at++] = ' ';
	memcpy(buf + at, m->name, m->len);
	at += m->len;
	buf[at++] = '\n';
	return at;
}

/* What sorttable takes from M's line when the line is one record: a
 * function when its type is t, T or W, which for a line without a size
 * is the name's first byte, the letter being read as the size. */
static int push_line(struct km_funcs *fl, const struct named *m)
{
	char type = m->size ? m->letter : m->name[0];
	int digit = hex_digit(m->letter);

	if (type != 't' && type != 'T' && type != 'W')
		return 0;
	return push_func(fl, m->value, m->size ? m->size : digit < 0 ? 0 : (uint64_t)digit);
}

/* M's name's length, and whether it has whitespace, in one pass: the
 * names lie in F's string table, which ends in a zero byte. */
static void measure(const struct mce_file *f, struct named *m)
{
	const char *end = (const char *)f->strdata->d_buf + f->strdata->d_size;
	const char *stop;

	if (!m->name[0]) {	/* (listed()'s "", which may lie elsewhere) */
		m->len = 0;
		m->spaced = false;
		return;
	}
	stop = past_name(m->name, end, true);

	m->spaced = stop < end && *stop;
	m->len = (uint32_t)(m->spaced ? strlen(m->name) : (size_t)(stop - m->name));
}

/* Symbol I of F as nm lists it into *M, its name measured when
 * MEASURE_IT (else its length only as 0, 1 or "2 or more", which is what
 * shifts() asks): 1, 0 when nm does not list it, -1 for a bad symbol. */
static int listed(struct mce_file *f, const struct mc_arch *a, const char *secs, size_t i,
		  struct named *m, bool measure_it)
{
	struct mce_sym y;

	if (mce_sym_peek(f, i, &y) < 0)
		return -1;
	/* (BFD's name for offset 0 is "", whatever the table's first byte.) */
	if (y.name == (const char *)f->strdata->d_buf)
		y.name = "";
	if (!(m->letter = nm_letter(f, a, secs, &y)))
		return 0;
	m->name = y.name;
	m->value = y.value;
	m->size = y.size;
	m->undef = y.raw_shndx == SHN_UNDEF;
	m->spaced = false;
	m->len = !y.name[0] ? 0 : !y.name[1] ? 1 : 2;	/* (at least) */
	if (measure_it)
		measure(f, m);
	return 1;
}

/* Whether any byte of F's string table is whitespace: when none is, no
 * name needs looking at for it (one pass over the table, not one per
 * name). */
static bool strtab_has_space(const struct mce_file *f)
{
	const char *p = f->strdata->d_buf, *end = p + f->strdata->d_size;

	return past_name(p, end, false) != end;
}

/*
 * The functions sorttable reads from "nm -S" on F, into FL (unsorted).
 * Unless FULL, only the lines from the first that shifts() on (in nm's
 * order) are sorted, printed and read back: each line before it is one
 * record, whatever the order, taken straight from the symbol (in the
 * symbol table's order; the same functions).  *ALL_SORTED: whether FL
 * holds them in nm's order.  (A real kernel's first such line, an
 * absolute "i", comes half way.)
 */
static int nm_functions(struct mce_file *f, const struct mc_arch *a, bool full,
			struct km_funcs *fl, bool *all_sorted)
{
	struct named *v = malloc(f->nsyms * sizeof(*v) + 1);
	struct name_key *keys = NULL;
	uint32_t *ord = NULL;
	size_t n = 0, at = 0, total = 0, w = f->addrsize * 2, before = 0, rest = 0;
	const char *first = NULL;	/* the least name of a line that shifts */
	char *buf = NULL, *secs = malloc(f->shnum + 1);
	int r = -1, k;
	bool spaces = strtab_has_space(f);

	if (!v || !secs || f->nsyms > UINT32_MAX)
		goto nomem;
	for (size_t i = 1; i < f->shnum; i++)
		secs[i] = section_letter(f, &f->secs[i]);
	mc_prefault_write(v, f->nsyms * sizeof(*v));
	for (size_t i = 1; i < f->nsyms; i++) {
		if ((k = listed(f, a, secs, i, &v[n], spaces)) < 0)
			goto out;
		if (!k)
			continue;
		if (!full && shifts(&v[n]) && (!first || strcmp(v[n].name, first) < 0))
			first = v[n].name;
		n++;
	}
	/* The lines before FIRST, taken as they are; the rest, kept in V's
	 * front (in the table's order) to be sorted.  (Names compared by
	 * their first word, then, when those agree, by strcmp.) */
	uint64_t first_word = first ? name_word(first, 0) : 0;

	for (size_t j = 0; j < n; j++) {
		uint64_t word = first ? name_word(v[j].name, 0) : 0;

		if (!full && (!first || word < first_word ||
			      (word == first_word && strcmp(v[j].name, first) < 0))) {
			if (push_line(fl, &v[j]) < 0)
				goto nomem;
			before++;
		} else {
			if (!spaces)
				measure(f, &v[j]);
			total += v[j].len + 2 * w + 5;
			v[rest++] = v[j];
		}
	}
	keys = malloc((rest + 1) * sizeof(*keys));
	ord = malloc((rest + 1) * sizeof(*ord));
	if (!keys || !ord)
		goto nomem;
	for (size_t j = 0; j < rest; j++) {
		const struct named *m = &v[j];

		keys[j] = (struct name_key){ { word_of(m->name, m->len),
					       m->len > 8 ? word_of(m->name + 8, m->len - 8) : 0 },
					     m->name };
		ord[j] = (uint32_t)j;
	}
	if (sort_names(keys, ord, rest, 0) < 0 || !(buf = malloc(total + 1)))
		goto nomem;
	for (size_t j = 0; j < rest; j++) {
		/* (The lines are read in name order, all over V and the names:
		 * their misses overlap when asked for ahead.) */
		if (j + 16 < rest)
			__builtin_prefetch(&v[ord[j + 16]]);
		at = put_line(buf, at, &v[ord[j]], w);
	}
	if (parse_listing(buf, at, fl) < 0)
		goto nomem;
	*all_sorted = before < 2;
	r = 0;
	goto out;
nomem:
	mce_fail(f, "out of memory");
out:
	free(v);
	free(secs);
	free(keys);
	free(ord);
	free(buf);
	return r;
}

/* Past this, NMFILE is no nm -S listing (a kernel's is a few MB), and
 * reading on (/dev/zero, a pipe that never ends) would only fill memory. */
#define KM_LISTING_MAX (1u << 30)

/* A listing's text: mapped (a regular file), or read into a buffer (a
 * pipe). */
struct listing {
	const char *text;
	size_t len;
	struct mce_view *view;
	char *buf;
};

static void listing_free(struct listing *l)
{
	mce_view_close(l->view);
	free(l->buf);
}

/* The rest of FD, a pipe's, into L->buf. */
static int read_pipe(struct mce_file *f, const char *path, int fd, struct listing *l)
{
	size_t cap = 65536, n = 0;
	ssize_t k;

	if (!(l->buf = malloc(cap)))
		return mce_fail(f, "out of memory");
	while ((k = read(fd, l->buf + n, cap - n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return mce_fail(f, "%s: cannot read: %s", path, strerror(errno));
		n += (size_t)k;
		if (n == cap) {
			char *nb;

			if (cap >= KM_LISTING_MAX)
				return mce_fail(f, "%s: more than %u MiB: not an nm -S listing",
						path, KM_LISTING_MAX >> 20);
			if (!(nb = realloc(l->buf, cap *= 2)))
				return mce_fail(f, "out of memory");
			l->buf = nb;
		}
	}
	l->text = l->buf;
	l->len = n;
	return 0;
}

/* NMFILE (a regular file, or a pipe such as <(nm -S vmlinux)) into L.  A
 * file is mapped, not read: a copy of a kernel's megabyte listing, page
 * faults and all, cost as much as reading it. */
static int read_listing(struct mce_file *f, const char *path, struct listing *l)
{
	/* O_NONBLOCK: a FIFO's open would otherwise wait for a writer. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	int r;

	memset(l, 0, sizeof(*l));
	if (fd < 0)
		return mce_fail(f, "%s: %s", path, strerror(errno));
	const char *bad = fstat(fd, &st) < 0	     ? strerror(errno)
			  : S_ISDIR(st.st_mode)	     ? "is a directory"
			  : S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) ? NULL
			  : "not a regular file or a pipe";

	if (bad) {
		r = mce_fail(f, "%s: %s", path, bad);
	} else if (S_ISFIFO(st.st_mode)) {
		fcntl(fd, F_SETFL, 0);	/* (a pipe's reads may wait for its writer) */
		r = read_pipe(f, path, fd, l);
	} else if ((uint64_t)st.st_size > KM_LISTING_MAX) {
		r = mce_fail(f, "%s: more than %u MiB: not an nm -S listing", path,
			     KM_LISTING_MAX >> 20);
	} else if (!(l->text = mce_view_open(&l->view, path, fd, (size_t)st.st_size))) {
		r = mce_fail(f, "%s: cannot read: %s", path, strerror(errno));
	} else {
		l->len = (size_t)st.st_size;
		r = 0;
	}
	close(fd);
	if (r < 0)
		listing_free(l);
	return r;
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

static bool ends_ascend(const struct km_funcs *fl);

/* Whether FL's functions end in the order they start however those of
 * one address are ordered: these all end together. */
static bool ends_ascend_in_any_order(const struct km_funcs *fl)
{
	for (size_t i = 1; i < fl->n; i++)
		if (fl->v[i].addr == fl->v[i - 1].addr && fl->v[i].size != fl->v[i - 1].size)
			return false;
	return ends_ascend(fl);
}

static int load_funcs(struct mce_file *f, const struct mc_arch *a, const struct km_opts *o,
		      struct km_funcs *fl)
{
	struct listing l;
	bool sorted = true;
	int r = 0;

	memset(fl, 0, sizeof(*fl));
	if (o->from == KM_FUNCS_NONE)
		return 0;
	if (o->from == KM_FUNCS_FILE) {
		if (read_listing(f, o->nm_file, &l) < 0)
			return -1;
		if (parse_listing(l.text, l.len, fl) < 0)
			r = mce_fail(f, "out of memory");
		listing_free(&l);
	} else {
		r = nm_functions(f, a, false, fl, &sorted);
	}
	for (;;) {
		if (r == 0 && sort_funcs(fl) < 0)
			r = mce_fail(f, "out of memory");
		/* (Functions of one address with different sizes: the search's
		 * answers may depend on their order, nm's.) */
		if (r < 0 || sorted || ends_ascend_in_any_order(fl))
			return r;
		free(fl->v);
		memset(fl, 0, sizeof(*fl));
		r = nm_functions(f, a, true, fl, &sorted);
	}
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

/*
 * Whether FL's functions end in the order they start, none wrapping past
 * the top of the address space.  Then, for any key, the functions
 * bsearch would step right over (ending at or before it) come first, the
 * ones it would step left over (starting above it) last, and those
 * holding it in between: the search finds a function exactly when one
 * holds the key, and one walk along the sorted keys answers for all.
 * (Otherwise its answer depends on the order, and each key is searched.)
 */
static bool ends_ascend(const struct km_funcs *fl)
{
	uint64_t last = 0;

	for (size_t i = 0; i < fl->n; i++) {
		uint64_t end = fl->v[i].addr + fl->v[i].size;

		if (end < fl->v[i].addr || end < last)
			return false;
		last = end;
	}
	return true;
}

/*
 * Zero the entries of the sorted V[0..N) that lie in no function of FL,
 * as sorttable does before it sorts: V stays sorted, the zeros first.
 * Returns how many nonzero entries were zeroed.
 */
static size_t keep_in_functions(const struct km_funcs *fl, uint64_t *v, size_t n,
				unsigned before)
{
	bool walk = ends_ascend(fl);
	size_t j = 0, kept = 0, zeroed = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t key = v[i];
		bool in;

		if (walk && key + before >= key) {
			while (j < fl->n && key >= fl->v[j].addr + fl->v[j].size)
				j++;
			in = j < fl->n && !(key + before < fl->v[j].addr);
		} else {
			in = in_function(fl, key, before);
		}
		if (in)
			v[kept++] = key;
		else
			zeroed += key != 0;
	}
	memmove(v + (n - kept), v, kept * sizeof(*v));
	memset(v, 0, (n - kept) * sizeof(*v));
	return zeroed;
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
	if (table_relocs(f, a, start, n, rel, &nrel) < 0 || load_funcs(f, a, o, &fl) < 0)
		goto out;
	for (size_t i = 0; i < nrel; i++)
		v[i] = (uint64_t)rel[i]->addend;
	if (!nrel && n && mce_words_read(f, start, n, v) < 0)
		goto out;
	if (f->addrsize == 4)	/* (the addends of a 32-bit RELA are words) */
		for (size_t i = 0; i < n; i++)
			v[i] &= 0xffffffffu;
	if (mc_sort_u64_into(v, n, NULL, sorted) < 0) {
		mce_fail(f, "out of memory");
		goto out;
	}
	if (fl.n)
		st->zeroed = keep_in_functions(&fl, sorted, n, a->kernel_mcount_before);
	for (size_t i = 0; i < n; i++)
		nonzero += sorted[i] != 0;
	if (n && !nonzero) {
		/* (The likelier cause named first: another image's listing, or
		 * none at all, given as NMFILE.) */
		mce_fail(f, "__mcount_loc: all %zu entries %s zero: the kernel would trace "
			 "nothing (%s)", n, st->zeroed ? "would come out" : "are",
			 o->from == KM_FUNCS_FILE ? "is NMFILE this image's nm -S listing?"
						  : "do the entries lie before their functions?");
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
