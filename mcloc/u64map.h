/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * u64map.c: a map of 64-bit keys to 64-bit values by open addressing, for
 * what the command asks about millions of times: Perfetto's interned
 * names by site, symbols by address.  Key 0 is never stored.
 */
#ifndef MCLOC_COMMAND_U64MAP_H
#define MCLOC_COMMAND_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *key, *val;
	size_t mask, n;
};

/* KEY's value slot, made (0, *FRESH true) if KEY was not there; NULL when
 * out of memory. */
uint64_t *u64map_slot(struct u64map *m, uint64_t key, bool *fresh);
/* Each value V, for the caller to free what it points to. */
void u64map_each(const struct u64map *m, void (*fn)(uint64_t v));
void u64map_free(struct u64map *m);

#endif
