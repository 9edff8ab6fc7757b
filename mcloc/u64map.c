// SPDX-License-Identifier: GPL-2.0-or-later
#include "u64map.h"

#include <stdlib.h>

static size_t hash(uint64_t key, size_t mask)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & mask;
}

/* Twice the room, every entry placed again; false when out of memory. */
static bool grow(struct u64map *m)
{
	size_t cap = m->mask ? 2 * (m->mask + 1) : 256;
	uint64_t *key = calloc(cap, sizeof(*key)), *val = calloc(cap, sizeof(*val));

	if (!key || !val) {
		free(key);
		free(val);
		return false;
	}
	for (size_t i = 0; m->key && i <= m->mask; i++) {
		if (!m->key[i])
			continue;
		size_t k = hash(m->key[i], cap - 1);

		while (key[k])
			k = (k + 1) & (cap - 1);
		key[k] = m->key[i];
		val[k] = m->val[i];
	}
	free(m->key);
	free(m->val);
	m->key = key;
	m->val = val;
	m->mask = cap - 1;
	return true;
}

uint64_t *u64map_slot(struct u64map *m, uint64_t key, bool *fresh)
{
	*fresh = false;
	if (!key || (m->n * 2 >= m->mask && !grow(m)))
		return NULL;
	size_t k = hash(key, m->mask);

	for (; m->key[k]; k = (k + 1) & m->mask)
		if (m->key[k] == key)
			return &m->val[k];
	m->key[k] = key;
	m->val[k] = 0;
	m->n++;
	*fresh = true;
	return &m->val[k];
}

void u64map_each(const struct u64map *m, void (*fn)(uint64_t v))
{
	for (size_t i = 0; m->key && i <= m->mask; i++)
		if (m->key[i])
			fn(m->val[i]);
}

void u64map_free(struct u64map *m)
{
	free(m->key);
	free(m->val);
	*m = (struct u64map){ 0 };
}
