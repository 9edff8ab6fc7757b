// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libmcloc's images: each image's records (its sites, sorted, 8 bytes
 * each) and finding them, the names of their functions (from .symtab, from
 * the .mcloc_names of a stripped image, or from .dynsym), and the name
 * lookups of the public API.  Registering an image is registry.c's.
 */
#include <mcloc/mcloc.h>
#include <mcloc/abi.h>
#include "mcr.h"
#include "images.h"
#include "patch.h"

#include "rcu.h"
#include "../base/grow.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- records ------------------------------------------------------------ */

const struct image *mcr_image_of(uintptr_t addr)
{
	size_t n = __atomic_load_n(&mcr_nimages, __ATOMIC_ACQUIRE);

	for (size_t i = 0; i < n; i++) {
		const struct image *im = mcr_image_at(i);

		if (im && addr >= im->lo && addr <= im->hi + 16)
			return im;
	}
	return NULL;
}

/*
 * The first record of IM at or after ADDR.  Sites are spread over the text
 * about evenly (one per function), so the search first guesses where ADDR
 * falls between the first and the last site and narrows from there: two
 * or three probes instead of a binary search's log2(n), which showed in
 * every dispatch.  The guess only sets the start; the answer is exact.
 */
size_t mcr_rec_lower(const struct image *im, uintptr_t addr)
{
	size_t lo = 0, hi = im->nrecs;
	uint64_t off = addr - im->base;

	if (hi > 8) {
		uint64_t first = im->recs[0].off, last = im->recs[hi - 1].off;

		if (off <= first)
			return 0;
		if (off > last)
			return hi;
		/* (A multiply, not a division: offsets are 32-bit and sites
		 * are at least a byte apart, so scale fits 32 bits too.) */
		size_t g = (size_t)(((off - first) * im->scale) >> 32);
		if (g >= hi)
			g = hi - 1;
		/* Gallop from the guess to a bracket [lo, hi). */
		size_t step = 1;
		if (im->recs[g].off < off) {
			lo = g + 1;
			while (lo + step < hi && im->recs[lo + step - 1].off < off) {
				lo += step;
				step *= 2;
			}
			hi = lo + step < hi ? lo + step : hi;
		} else {
			hi = g;
			while (hi > step && im->recs[hi - step].off >= off) {
				hi -= step;
				step *= 2;
			}
			lo = hi > step ? hi - step : 0;
		}
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (im->recs[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The record of the site that starts at SITE, or -1. */
long mcr_rec_at(const struct image *im, uintptr_t site)
{
	size_t k = mcr_rec_lower(im, site);

	return k < im->nrecs && im->base + im->recs[k].off == site ? (long)k : -1;
}

/* The record whose site ends at AFTER (the trampolines' return address). */
long mcr_rec_before(const struct image *im, uintptr_t after)
{
	size_t k = mcr_rec_lower(im, after);

	if (!k)
		return -1;
	const struct mcloc_rec *r = &im->recs[k - 1];
	return im->base + r->off + mcr_rec_len(r) == after ? (long)k - 1 : -1;
}

/* ---- function names from the image's symbol table ---------------------------- */

static int cmp_fsym(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void *mcr_read_at(int fd, off_t off, size_t len)
{
	struct stat st;

	/* (Sizes come from the file's own headers: none past its end is
	 * allocated for, whatever they say.) */
	if (fstat(fd, &st) < 0 || off < 0 || off > st.st_size ||
	    len > (uint64_t)(st.st_size - off))
		return NULL;
	void *p = malloc(len + 1);

	if (p && pread(fd, p, len, off) != (ssize_t)len) {
		free(p);
		return NULL;
	}
	return p;
}

/*
 * The .mcloc_names section objpatch link --runtime adds (see add_names()
 * in objpatch/fix.c): functions with their link-time start and size, and
 * their names, which strip(1) leaves in place.  Returns the functions (and
 * the names in *STR), or NULL when there is no valid such section.
 */
static struct fsym *own_names(int fd, const Elf64_Ehdr *eh, const Elf64_Shdr *sh,
			      uintptr_t bias, char **str, size_t *nf)
{
	const Elf64_Shdr *shs = eh->e_shstrndx < eh->e_shnum ? &sh[eh->e_shstrndx] : NULL;
	char *names = shs ? mcr_read_at(fd, (off_t)shs->sh_offset, shs->sh_size) : NULL;
	const Elf64_Shdr *ns = NULL;
	uint8_t *b = NULL;
	struct fsym *fs = NULL;

	if (!names)
		return NULL;
	names[shs->sh_size] = 0;
	for (unsigned i = 0; i < eh->e_shnum && !ns; i++)
		if (sh[i].sh_name < shs->sh_size &&
		    !strcmp(names + sh[i].sh_name, MCLOC_NAMES_SECTION))
			ns = &sh[i];
	free(names);

	/* The image is the runtime's own byte order, so the entries are read
	 * as the structs they are (unaligned: through memcpy). */
	const size_t hsz = sizeof(struct mcloc_names_hdr), esz = sizeof(struct mcloc_name_ent);
	struct mcloc_names_hdr h;

	if (!ns || ns->sh_size < hsz || !(b = mcr_read_at(fd, (off_t)ns->sh_offset, ns->sh_size)))
		return NULL;
	memcpy(&h, b, hsz);
	if (memcmp(h.magic, MCLOC_NAMES_MAGIC, sizeof(h.magic)) || h.count > (ns->sh_size - hsz) / esz)
		goto bad;
	uint64_t n = h.count;
	size_t sbytes = ns->sh_size - hsz - n * esz;
	fs = malloc((n + 1) * sizeof(*fs));
	*str = malloc(sbytes + 1);
	if (!fs || !*str)
		goto bad;
	memcpy(*str, b + hsz + n * esz, sbytes);
	(*str)[sbytes] = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct mcloc_name_ent e;

		memcpy(&e, b + hsz + i * esz, esz);
		if (e.name >= sbytes)
			goto bad;
		fs[i] = (struct fsym){ e.start + bias, e.start + bias + (e.size ? e.size : 1), e.name };
	}
	*nf = (size_t)n;
	free(b);
	return fs;
bad:
	free(b);
	free(fs);
	free(*str);
	*str = NULL;
	return NULL;
}

/*
 * Function names outlive their image: a profile still prints the calls of
 * a library that has been dlclose()d, and a name handed out by
 * mcloc_site_name() stays valid.  So the names of traced functions are
 * interned here, once each however often a library is loaded again, and
 * never freed.  Only under the lock.
 */
static struct {
	const char **slot;	/* open addressing, a power of two */
	size_t cap, n;
	char *chunk;		/* where the next string goes */
	size_t left;
} pool;

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static const char *intern(const char *name)
{
	uint64_t h = name_hash(name);
	size_t len = strlen(name);
	if (2 * (pool.n + 1) > pool.cap) {
		size_t cap = pool.cap ? 2 * pool.cap : 4096;
		const char **slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return NULL;
		for (size_t i = 0; i < pool.cap; i++)
			if (pool.slot[i]) {
				size_t j = name_hash(pool.slot[i]) & (cap - 1);
				while (slot[j])
					j = (j + 1) & (cap - 1);
				slot[j] = pool.slot[i];
			}
		free(pool.slot);
		pool.slot = slot;
		pool.cap = cap;
	}
	size_t j = h & (pool.cap - 1);
	for (; pool.slot[j]; j = (j + 1) & (pool.cap - 1))
		if (!strcmp(pool.slot[j], name))
			return pool.slot[j];
	if (pool.left < len + 1) {
		size_t sz = len + 1 > 65536 ? len + 1 : 65536;

		if (!(pool.chunk = malloc(sz)))
			return NULL;
		pool.left = sz;
	}
	char *copy = memcpy(pool.chunk, name, len + 1);
	pool.chunk += len + 1;
	pool.left -= len + 1;
	pool.n++;
	return pool.slot[j] = copy;
}

/*
 * The function symbols of the ELF file PATH, loaded at BIAS, sorted by
 * address: from .symtab, or in a stripped image from .mcloc_names
 * (own_names()) and failing that .dynsym.  Their names in *STR (the
 * caller frees both); NULL when there are none.
 */
struct fsym *mcr_read_funcs(const char *path, uintptr_t bias, char **str_out, size_t *nf_out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL;
	Elf64_Sym *syms = NULL;
	struct fsym *fs = NULL;
	char *str = NULL;
	size_t nf = 0;

	if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || !eh.e_shnum)
		goto out;
	sh = mcr_read_at(fd, (off_t)eh.e_shoff, (size_t)eh.e_shnum * sizeof(*sh));
	if (!sh)
		goto out;
	const Elf64_Shdr *st = NULL;
	for (unsigned i = 0; i < eh.e_shnum; i++)
		if (sh[i].sh_type == SHT_SYMTAB && sh[i].sh_link < eh.e_shnum &&
		    sh[i].sh_entsize == sizeof(Elf64_Sym)) {
			st = &sh[i];
			break;
		}
	/* Stripped: the names objpatch link --runtime kept, else the
	 * dynamic symbols (exported functions only). */
	if (!st && (fs = own_names(fd, &eh, sh, bias, &str, &nf)))
		goto sort;
	for (unsigned i = 0; !st && i < eh.e_shnum; i++)
		if (sh[i].sh_type == SHT_DYNSYM && sh[i].sh_link < eh.e_shnum &&
		    sh[i].sh_entsize == sizeof(Elf64_Sym))
			st = &sh[i];
	if (!st)
		goto out;
	size_t n = st->sh_size / sizeof(Elf64_Sym);
	const Elf64_Shdr *ss = &sh[st->sh_link];
	syms = mcr_read_at(fd, (off_t)st->sh_offset, st->sh_size);
	str = mcr_read_at(fd, (off_t)ss->sh_offset, ss->sh_size);
	/* (Sized once the symbols are known to be in the file.) */
	if (!syms || !str || !(fs = malloc((n + 1) * sizeof(*fs))))
		goto out;
	str[ss->sh_size] = 0;
	for (size_t i = 0; i < n; i++)
		if (ELF64_ST_TYPE(syms[i].st_info) == STT_FUNC && syms[i].st_shndx != SHN_UNDEF &&
		    syms[i].st_name < ss->sh_size)
			fs[nf++] = (struct fsym){ syms[i].st_value + bias,
						  syms[i].st_value + bias + (syms[i].st_size ?
									      syms[i].st_size : 1),
						  syms[i].st_name };
sort:
	qsort(fs, nf, sizeof(*fs), cmp_fsym);
	*str_out = str;
	*nf_out = nf;
	str = NULL;
	close(fd);
	free(sh);
	free(syms);
	return fs;
out:
	if (fd >= 0)
		close(fd);
	free(sh);
	free(syms);
	free(fs);
	free(str);
	return NULL;
}

/*
 * Name every record of IM from PATH's function symbols (mcr_read_funcs()):
 * the FUNC symbol that contains it.  A record no name covers is still
 * traced by address.
 */
static void name_records(struct image *im, const char *path, uintptr_t bias)
{
	char *str = NULL;
	size_t nf = 0;
	struct fsym *fs = mcr_read_funcs(path, bias, &str, &nf);

	if (!fs)
		return;
	im->names = calloc(im->nrecs + 1, sizeof(*im->names));
	im->at_entry = calloc(im->nrecs / 64 + 1, sizeof(*im->at_entry));
	if (!im->names || !im->at_entry) {
		free(im->names);
		free(im->at_entry);
		im->names = NULL;
		im->at_entry = NULL;
		free(fs);
		free(str);
		return;
	}
	/* Records and functions are both sorted: one merge. */
	size_t k = 0, at = 0;
	for (size_t r = 0; r < im->nrecs; r++) {
		uintptr_t a = im->base + im->recs[r].off;

		while (k + 1 < nf && fs[k + 1].lo <= a)
			k++;
		if (nf && fs[k].lo <= a && a < fs[k].hi) {
			im->names[r] = intern(str + fs[k].name);
			if (mcr_site_at_entry(a, fs[k].lo)) {
				im->at_entry[r / 64] |= 1ull << (r % 64);
				at++;
			} else if (mcr_site_framed(a, fs[k].lo) &&
				   (im->framed || (im->framed = calloc(im->nrecs / 64 + 1,
								       sizeof(*im->framed))))) {
				im->framed[r / 64] |= 1ull << (r % 64);
				__atomic_store_n(&mcr_framed_images, true, __ATOMIC_RELAXED);
			}
		} else if (nf && k + 1 < nf && fs[k + 1].lo > a && fs[k + 1].lo - a < 16) {
			im->names[r] = intern(str + fs[k + 1].name);	/* patchable NOPs before the entry */
			im->at_entry[r / 64] |= 1ull << (r % 64);
			at++;
		}
	}
	im->all_at_entry = im->nrecs && at == im->nrecs;
	im->strtab = str;
	im->funcs = fs;
	im->nfuncs = nf;
}

struct find_ctx {
	uintptr_t addr;
	char path[4096];
	uintptr_t bias;
	uintptr_t lo, hi;	/* its loaded segments span these */
	bool found;
};

/* C's path, bias and span from the object INFO describes. */
static void object_of(struct find_ctx *c, const struct dl_phdr_info *info)
{
	snprintf(c->path, sizeof(c->path), "%s",
		 info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe");
	c->bias = info->dlpi_addr;
	c->lo = UINTPTR_MAX;
	c->hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + p->p_vaddr < c->lo)
			c->lo = info->dlpi_addr + p->p_vaddr;
		if (info->dlpi_addr + p->p_vaddr + p->p_memsz > c->hi)
			c->hi = info->dlpi_addr + p->p_vaddr + p->p_memsz;
	}
	c->found = true;
}

static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_ctx *c = data;

	(void)size;
	if (!mcr_segment_holds(info, c->addr, c->addr + 1))
		return 0;
	object_of(c, info);
	return 1;
}


__thread struct mcr_entry_memo mcr_entry_memo __attribute__((tls_model("initial-exec")));

/* Where the thread's memo (images.h) does not answer: the image search. */
bool mcr_at_entry_lookup(void)
{
	uintptr_t after = mcr_entry_args.after;
	unsigned long gen = __atomic_load_n(&mcr_images_gen, __ATOMIC_ACQUIRE);
	const struct image *im = after ? mcr_image_of(after - 1) : NULL;
	long r;
	/* (The record's search was a tenth of a traced program's time
	 * under the graph tracer, each call from a site other than the
	 * last: an image whose sites are all at entries needs none.  The
	 * call came from one of its sites: the direct path checked that it
	 * calls the stub, and only records' sites are made to.) */
	bool at = im && (im->all_at_entry ||
			 ((r = mcr_rec_before(im, after)) >= 0 && im->at_entry &&
			  (im->at_entry[r / 64] >> (r % 64) & 1)));

	mcr_entry_memo = (struct mcr_entry_memo){ after, gen, at };
	mcr_call_at_entry = at;
	return at;
}

/* ---- naming any address of the process -------------------------------------- */

/*
 * The function symbols of every object asked about, read once each from
 * its file (so a static function of an untraced library has its name,
 * where dladdr() knows exported ones only); kept for the process's life,
 * so that the names handed out stay valid.  For the control channel,
 * which names the callers of traced functions, and the function tracer,
 * which names them when it writes its lines out.  An entry is complete
 * before the count that shows it is stored, so that mcr_symbolize_known()
 * reads them without the lock.
 */
#define SYM_OBJECTS 64
struct sym_object {
	uintptr_t bias, lo, hi;
	char *path;
	struct fsym *fs;	/* NULL: the file has none */
	size_t nf;
	char *str;
};
static struct {
	pthread_mutex_t lock;
	struct sym_object v[SYM_OBJECTS];
	size_t n;
} syms_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The entry of the object FC found, read now if it is new: NULL past
 * SYM_OBJECTS of them.  Under the lock. */
static const struct sym_object *sym_object(const struct find_ctx *fc)
{
	for (size_t i = 0; i < syms_cache.n; i++)
		if (syms_cache.v[i].bias == fc->bias && !strcmp(syms_cache.v[i].path, fc->path))
			return &syms_cache.v[i];
	if (syms_cache.n == SYM_OBJECTS)
		return NULL;
	struct sym_object *o = &syms_cache.v[syms_cache.n];

	o->path = strdup(fc->path);
	if (!o->path)
		return NULL;
	o->bias = fc->bias;
	o->lo = fc->lo;
	o->hi = fc->hi;
	o->fs = mcr_read_funcs(fc->path, fc->bias, &o->str, &o->nf);
	__atomic_store_n(&syms_cache.n, syms_cache.n + 1, __ATOMIC_RELEASE);
	return o;
}

/* The function of O that holds ADDR, or NULL. */
static const char *sym_in(const struct sym_object *o, uintptr_t addr, uintptr_t *off)
{
	size_t lo = 0, hi = o->fs ? o->nf : 0;

	while (lo < hi) {	/* the last function starting at or before ADDR */
		size_t mid = lo + (hi - lo) / 2;

		if (o->fs[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= o->fs[lo - 1].hi)
		return NULL;
	if (off)
		*off = addr - o->fs[lo - 1].lo;
	return o->str + o->fs[lo - 1].name;
}

const char *mcr_symbolize(uintptr_t addr, uintptr_t *off)
{
	struct find_ctx fc = { .addr = addr };
	const char *name = NULL;

	dl_iterate_phdr(find_object, &fc);
	if (!fc.found)
		return NULL;
	pthread_mutex_lock(&syms_cache.lock);
	const struct sym_object *o = sym_object(&fc);
	if (o)
		name = sym_in(o, addr, off);
	pthread_mutex_unlock(&syms_cache.lock);
	return name;
}

/* Newest first: an object loaded where an unloaded one was wins. */
const char *mcr_symbolize_known(uintptr_t addr, uintptr_t *off)
{
	for (size_t i = __atomic_load_n(&syms_cache.n, __ATOMIC_ACQUIRE); i-- > 0;) {
		const struct sym_object *o = &syms_cache.v[i];

		if (addr >= o->lo && addr < o->hi)
			return sym_in(o, addr, off);
	}
	return NULL;
}

#define READ_ALL_MAX 64
struct all_ctx {
	struct find_ctx v[READ_ALL_MAX];
	size_t n;
};

static int each_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct all_ctx *c = data;

	(void)size;
	if (c->n < READ_ALL_MAX)
		object_of(&c->v[c->n++], info);
	return 0;
}

void mcr_symbolize_all(void)
{
	struct all_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return;
	dl_iterate_phdr(each_object, c);
	pthread_mutex_lock(&syms_cache.lock);
	for (size_t i = 0; i < c->n; i++)
		sym_object(&c->v[i]);
	pthread_mutex_unlock(&syms_cache.lock);
	free(c);
}

/* fork() (fork.c): the cache is whole in the child, and its lock free. */
void mcr_symbolize_fork(enum mcr_fork stage)
{
	mcr_fork_lock(&syms_cache.lock, stage);
}

/* ---- building an image's records ------------------------------------------- */

/* The entries of both tables of DESC, in one array (the caller frees). */
static uintptr_t *table_entries(const struct mcloc_image *desc, size_t *n)
{
	size_t nm = desc->mcount_stop > desc->mcount_start ?
		    (desc->mcount_stop - desc->mcount_start) / sizeof(uintptr_t) : 0;
	size_t np = desc->patchable_stop > desc->patchable_start ?
		    (desc->patchable_stop - desc->patchable_start) / sizeof(uintptr_t) : 0;
	uintptr_t *v = malloc((nm + np + 1) * sizeof(*v));

	/* (An empty table's bounds may be 0: no memcpy from there.) */
	if (v && nm)
		memcpy(v, (const void *)desc->mcount_start, nm * sizeof(*v));
	if (v && np)
		memcpy(v + nm, (const void *)desc->patchable_start, np * sizeof(*v));
	*n = nm + np;
	return v;
}

/* The executable segments of the object an image's descriptor lies in
 * (else, for a descriptor on the heap, of the object loaded at its
 * base): where its sites can be. */
#define EXEC_SEGS 8
struct exec_ctx {
	uintptr_t desc, base;
	uintptr_t lo[EXEC_SEGS], hi[EXEC_SEGS];
	unsigned n;
	bool by_desc;
};

static int exec_segments(struct dl_phdr_info *info, size_t size, void *data)
{
	struct exec_ctx *c = data;
	bool holds = mcr_segment_holds(info, c->desc, c->desc + 1);

	(void)size;
	if (!holds && (c->by_desc || c->n || info->dlpi_addr != c->base))
		return 0;
	c->n = 0;
	c->by_desc = holds;
	for (int i = 0; i < info->dlpi_phnum && c->n < EXEC_SEGS; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			c->lo[c->n] = info->dlpi_addr + p->p_vaddr;
			c->hi[c->n++] = info->dlpi_addr + p->p_vaddr + p->p_memsz;
		}
	}
	return holds;
}

/* Whether a whole site at ADDR lies in one of C's executable segments:
 * only there is it read.  (A table entry elsewhere, which a corrupt or
 * hand-made image may hold, would otherwise fault at start-up.) */
static bool in_exec(const struct exec_ctx *c, uintptr_t addr)
{
	for (unsigned i = 0; i < c->n; i++)
		if (addr >= c->lo[i] && addr < c->hi[i] && c->hi[i] - addr >= 16)
			return true;
	return false;
}

static int cmp_rec(const void *a, const void *b)
{
	const struct mcloc_rec *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* A refused entry in the image's code whose form the architecture knows:
 * counted, for registration's one line. */
static void note_skipped(struct image *im, const struct exec_ctx *ex, uintptr_t entry)
{
	const char *why = in_exec(ex, entry) ? mcr_site_refusal(entry) : NULL;

	if (why && (!im->skip_why || im->skip_why == why)) {
		im->skip_why = why;
		im->nskipped++;
	}
}

/*
 * The page of direct stubs DESC's image carries (version 4, abi.h), if it
 * is one: page-aligned, inside one of the executable segments of C, and
 * stubs that jump through the descriptor (else a forged or damaged
 * descriptor would have sites call into the middle of other code).  NULL
 * for an older image, or where the architecture has none.
 */
static uint8_t *linked_stubs(const struct exec_ctx *c, const struct mcloc_image *desc)
{
#if MCR_ONE_STORE
	(void)c, (void)desc;
#else
	uintptr_t p = desc->version >= 4 ? desc->direct_stubs : 0;

	if (!p || p % MCR_DIRECT_PAGE)
		return NULL;
	for (unsigned i = 0; i < c->n; i++)
		if (p >= c->lo[i] && p < c->hi[i] && c->hi[i] - p >= MCR_DIRECT_PAGE)
			return mcr_direct_stubs_linked((const uint8_t *)p,
						       (uintptr_t)&desc->direct_tramp)
				       ? (uint8_t *)p : NULL;
#endif
	return NULL;
}

int mcr_image_records(struct image *im, const struct mcloc_image *desc)
{
	size_t n, nslots = 0;
	uintptr_t *tab = table_entries(desc, &n);
	struct exec_ctx ex = { .desc = (uintptr_t)desc, .base = im->base };

	if (!tab)
		return -ENOMEM;
	dl_iterate_phdr(exec_segments, &ex);
	im->stubs = linked_stubs(&ex, desc);
	im->stubs_linked = im->stubs != NULL;
	im->recs = calloc(n + 1, sizeof(*im->recs));
	if (!im->recs) {
		free(tab);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct mcr_site st;

		/* A zero entry becomes the load address after relocation:
		 * objpatch sort leaves those behind its __stop_ symbol.  One
		 * no record can hold (4 GiB past the base, or below it) is
		 * no site of the image: refused, and counted. */
		if (!tab[i] || tab[i] == im->base)
			continue;
		if (tab[i] - im->base >= UINT32_MAX) {
			mcr_nrefused++;
			continue;
		}
		/* The site is the NOP objpatch link --nop wrote; the
		 * architecture says which form, so how long, it is, and
		 * where it begins (aarch64 and riscv64 record the first of
		 * the NOPs, which may be an ops slot). */
		bool ok = in_exec(&ex, tab[i]) && !mcr_site_find(tab[i], 0, &st) && !st.is_call &&
			  st.at - im->base < UINT32_MAX &&
			  (!st.parked || st.parked == (uintptr_t)im->stubs);
		struct mcloc_rec *r = &im->recs[im->nrecs++];

		r->off = (uint32_t)((ok ? st.at : tab[i]) - im->base);
		r->state = ok ? st.len << REC_LEN_SHIFT : REC_REFUSED;
		/* Parked on stub 0 by objpatch link --runtime: as a site an
		 * ops with direct slot 0 had enabled and then left. */
		if (ok && st.parked)
			r->state |= REC_PARKED | REC_ENABLED_DIRECT;
		if (!ok) {
			mcr_nrefused++;
			note_skipped(im, &ex, tab[i]);
		}
		nslots += ok && st.slot;
	}
	free(tab);
	qsort(im->recs, im->nrecs, sizeof(*im->recs), cmp_rec);
	/* Sites reach their ops through the slot only if every one has a
	 * slot: the dispatcher then needs no lookup to know. */
	im->slots = MCR_ONE_STORE && im->nrecs && nslots == im->nrecs;
	if (im->nrecs) {
		im->lo = im->base + im->recs[0].off;
		im->hi = im->base + im->recs[im->nrecs - 1].off;
		uint64_t span = im->recs[im->nrecs - 1].off - im->recs[0].off;
		im->scale = span ? ((uint64_t)(im->nrecs - 1) << 32) / span : 0;
	}
	return 0;
}

const char *mcr_image_name(struct image *im, const struct mcloc_image *desc)
{
	/* The object the sites are in (the descriptor may be on the heap,
	 * for a program linked without objpatch): by a site registration
	 * took, not the table's first entry, which may be one it refused
	 * (outside every object, and then the image had no names). */
	size_t r = 0;

	while (r < im->nrecs && im->recs[r].state == REC_REFUSED)
		r++;
	struct find_ctx fc = { .addr = r < im->nrecs ? im->base + im->recs[r].off :
				       desc->mcount_stop > desc->mcount_start ?
				       *(const uintptr_t *)desc->mcount_start :
				       desc->patchable_stop > desc->patchable_start ?
				       *(const uintptr_t *)desc->patchable_start : (uintptr_t)desc };

	dl_iterate_phdr(find_object, &fc);
	if (!fc.found)
		return NULL;
	name_records(im, fc.path, fc.bias);
	return intern(fc.path);
}

void mcr_image_free(struct image *im)
{
	free(im->recs);
	free(im->names);
	free(im->at_entry);
	free(im->framed);
	free(im->funcs);
	free(im->strtab);
	free(im);
}

const struct fsym *mcr_func_at(const struct image *im, uintptr_t addr)
{
	size_t lo = 0, hi = im->nfuncs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (im->funcs[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < im->funcs[lo - 1].hi ? &im->funcs[lo - 1] : NULL;
}

/* (The lookups below run in callbacks, so they take no lock: a
 * read-side section keeps an image being unloaded alive meanwhile.) */
const char *mcloc_addr_name(uintptr_t addr, uintptr_t *off)
{
	const char *name = NULL;
	size_t n = __atomic_load_n(&mcr_nimages, __ATOMIC_ACQUIRE);

	mcr_read_lock();
	for (size_t i = 0; i < n && !name; i++) {
		const struct image *im = mcr_image_at(i);
		const struct fsym *f = im ? mcr_func_at(im, addr) : NULL;

		if (f) {
			if (off)
				*off = addr - f->lo;
			name = im->strtab + f->name;
		}
	}
	mcr_read_unlock();
	return name;
}

const char *mcloc_site_name(uintptr_t ip)
{
	const char *name = NULL;

	mcr_read_lock();
	const struct image *im = mcr_image_of(ip);
	long r = im ? mcr_rec_at(im, ip) : -1;
	if (r >= 0 && im->names)
		name = im->names[r];
	mcr_read_unlock();
	return name;
}

void mcr_each_site_name(void (*fn)(uintptr_t site, const char *name, uint32_t state, void *arg),
			void *arg)
{
	pthread_mutex_lock(&mcr_lock);
	for (size_t i = 0; i < mcr_nimages; i++) {
		const struct image *im = mcr_images[i];

		for (size_t r = 0; im && im->names && r < im->nrecs; r++)
			if (im->names[r])
				fn(im->base + im->recs[r].off, im->names[r],
				   __atomic_load_n(&im->recs[r].state, __ATOMIC_RELAXED), arg);
	}
	pthread_mutex_unlock(&mcr_lock);
}

/*
 * The sites of images that left while a controller traced (their names
 * are interned, so they stay): what its events name still.  An image's
 * destructor runs before the controller can ask, at exit above all,
 * where the fini arrays run before libmcloc's atexit handler (it was
 * registered first, from a library's constructor).  Forgotten when an
 * image leaves with no trace running; at most DEPARTED_MAX kept.
 */
#define DEPARTED_MAX ((size_t)1 << 20)

static struct {
	struct departed {
		uintptr_t site;
		const char *name;
	} *v;
	size_t n, cap;
} departed;

void mcr_image_departs(const struct image *im, bool traced)
{
	if (!traced) {
		free(departed.v);
		departed.v = NULL;
		departed.n = departed.cap = 0;
		return;
	}
	/* (A name kept before for one of IM's sites, the same interned one,
	 * is IM's again: a plugin loaded and unloaded in a loop is kept once.
	 * Another image's names at IM's place stay: their events, earlier in
	 * the trace, are theirs.) */
	size_t k = 0;

	for (size_t j = 0; j < departed.n; j++) {
		const struct departed *d = &departed.v[j];
		long r = im->names && d->site >= im->lo && d->site <= im->hi ?
				 mcr_rec_at(im, d->site) : -1;

		if (r < 0 || im->names[r] != d->name)
			departed.v[k++] = *d;
	}
	departed.n = k;
	for (size_t r = 0; im->names && r < im->nrecs && departed.n < DEPARTED_MAX; r++) {
		if (!im->names[r])
			continue;
		struct departed *v = mc_grown(departed.v, &departed.cap, departed.n, sizeof(*v), 1024);

		if (!v)
			return;	/* (its events name addresses, or the maps' symbols) */
		departed.v = v;
		departed.v[departed.n++] = (struct departed){ im->base + im->recs[r].off,
							      im->names[r] };
	}
}

void mcr_each_departed_site(void (*fn)(uintptr_t site, const char *name, uint32_t state,
				       void *arg),
			    void *arg)
{
	pthread_mutex_lock(&mcr_lock);
	for (size_t k = 0; k < departed.n; k++) {
		uintptr_t site = departed.v[k].site;
		bool reused = false;

		/* (An image loaded at its place since names it now.) */
		for (size_t i = 0; i < mcr_nimages && !reused; i++)
			reused = mcr_images[i] && mcr_images[i]->nrecs && site >= mcr_images[i]->lo &&
				 site <= mcr_images[i]->hi;
		if (!reused)
			fn(site, departed.v[k].name, 0, arg);
	}
	pthread_mutex_unlock(&mcr_lock);
}

uintptr_t mcloc_site_of(const char *name)
{
	uintptr_t site = 0;
	size_t n = __atomic_load_n(&mcr_nimages, __ATOMIC_ACQUIRE);

	mcr_read_lock();
	for (size_t i = 0; i < n && !site; i++) {
		const struct image *im = mcr_image_at(i);

		for (size_t r = 0; im && im->names && r < im->nrecs && !site; r++)
			if (im->names[r] && !strcmp(im->names[r], name))
				site = im->base + im->recs[r].off;
	}
	mcr_read_unlock();
	return site;
}

/* With the lock held: the record of the site at IP, or of the function
 * at IP (its site lies within its first 16 bytes); -1 if none. */
long mcr_site_rec(uintptr_t ip, struct image **imp)
{
	for (size_t i = 0; i < mcr_nimages; i++) {
		struct image *im = mcr_images[i];

		if (!im)
			continue;
		long r = mcr_rec_at(im, ip);
		if (r < 0 && im->names && ip >= im->base) {
			/* A function's entry names its site: the first record
			 * within the function (a -pg site follows the
			 * prologue), or without its symbol within 16 bytes. */
			size_t k = mcr_rec_lower(im, ip);
			const struct fsym *f = mcr_func_at(im, ip);
			uintptr_t end = f && f->lo == ip ? f->hi : ip + 16;

			if (k < im->nrecs && im->base + im->recs[k].off < end)
				r = (long)k;
		}
		if (r >= 0) {
			*imp = im;
			return r;
		}
	}
	return -1;
}

uintptr_t mcr_site_of_func(uintptr_t fn)
{
	struct image *im;

	pthread_mutex_lock(&mcr_lock);
	long r = mcr_site_rec(fn, &im);
	uintptr_t site = r >= 0 ? im->base + im->recs[r].off : 0;
	pthread_mutex_unlock(&mcr_lock);
	return site;
}
