/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* images.c: each image's records and names, and the lookups over them. */
#ifndef MCLOC_IMAGES_H
#define MCLOC_IMAGES_H

#include "mcr.h"

/* The thread's last answer of whether a call's site is at its function's
 * entry (timing.c asks, before it hooks a return): the same function
 * called again (a loop, a recursion) is answered without the image
 * search, which was a tenth of a function_graph call.  It holds while no
 * image has come or gone since (GEN): an address may belong to another
 * image after a dlclose and a dlopen. */
struct mcr_entry_memo {
	uintptr_t after;
	unsigned long gen;
	bool at;
};
extern __thread struct mcr_entry_memo mcr_entry_memo;
/* The search, for the call whose callbacks run (mcr_entry_args.after);
 * sets mcr_call_at_entry and the memo.  (Under the read lock the
 * callbacks run in.) */
bool mcr_at_entry_lookup(void);

/* The image whose sites span ADDR; the first record at or after
 * ADDR; the record at SITE, or of the site that ends at AFTER (-1: none). */
const struct image *mcr_image_of(uintptr_t addr);
size_t mcr_rec_lower(const struct image *im, uintptr_t addr);
long mcr_rec_at(const struct image *im, uintptr_t site);
long mcr_rec_before(const struct image *im, uintptr_t after);

/* IM's records from DESC's table; the names of its functions
 * (and the path of its object, or NULL); freeing an unloaded one. */
int mcr_image_records(struct image *im, const struct mcloc_image *desc);
const char *mcr_image_name(struct image *im, const struct mcloc_image *desc);
/* The function symbol of IM that holds ADDR, or NULL. */
const struct fsym *mcr_func_at(const struct image *im, uintptr_t addr);
/* The function symbols of the ELF file PATH, loaded at BIAS, sorted by
 * address (.symtab, else .mcloc_names, else .dynsym), their names in
 * *STR; NULL when there are none.  The caller frees both. */
struct fsym *mcr_read_funcs(const char *path, uintptr_t bias, char **str, size_t *nf);
/* The site of the function whose entry is FN (the record there, or a -pg
 * site after its prologue), or 0. */
uintptr_t mcr_site_of_func(uintptr_t fn);
/* With mcr_lock held: the record of the site at IP, or of the function
 * at IP (its site lies within its first 16 bytes), and its image in
 * *IMP; -1 if none. */
long mcr_site_rec(uintptr_t ip, struct image **imp);
void mcr_image_free(struct image *im);

/* LEN bytes of the file FD at OFF, in a malloc'd buffer with room for a
 * terminating NUL; NULL on failure. */
void *mcr_read_at(int fd, off_t off, size_t len);

/* The function containing ADDR, anywhere in the process, by the symbols
 * of its object's file (.symtab where there is one): NULL if none.  *OFF:
 * ADDR's offset in it.  Reads each object's file once. */
const char *mcr_symbolize(uintptr_t addr, uintptr_t *off);
/* The same from what mcr_symbolize() and mcr_symbolize_all() read already,
 * with no lock, no allocation and no system call: what a callback, or a
 * signal handler, may ask. */
const char *mcr_symbolize_known(uintptr_t addr, uintptr_t *off);
/* Read the symbols of every object loaded now (not from a callback). */
void mcr_symbolize_all(void);

/* Each record of every registered image whose function's name is known:
 * its site's address (what a callback's IP is), the name, and the
 * record's state (REC_*), under mcr_lock. */
void mcr_each_site_name(void (*fn)(uintptr_t site, const char *name, uint32_t state, void *arg),
			void *arg);
/* IM leaves (under mcr_lock): its sites' names kept for a controller
 * that TRACED, else every one kept so far forgotten. */
void mcr_image_departs(const struct image *im, bool traced);
/* The same for the sites of the images that left (state 0), but for
 * those where an image registered now lies, under mcr_lock. */
void mcr_each_departed_site(void (*fn)(uintptr_t site, const char *name, uint32_t state,
				       void *arg),
			    void *arg);
/* fork.c's: the symbol cache's lock. */
void mcr_symbolize_fork(enum mcr_fork stage);

#endif
