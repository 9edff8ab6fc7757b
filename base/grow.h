/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A growing array's one way of making room (header-only; includes nothing
 * of the project, so the tools and the runtime can both use it). */
#ifndef MCLOC_BASE_GROW_H
#define MCLOC_BASE_GROW_H

#include <stddef.h>
#include <stdlib.h>

/*
 * Room for element N of V, an array of *CAP elements of SIZE bytes: V
 * itself while N < *CAP, else V reallocated to twice *CAP (FIRST when it
 * has none) and *CAP updated.  NULL when out of memory: V is then still
 * the caller's, unchanged.  (The new array is returned rather than stored
 * through a void **, which would write a pointer of another type.)
 */
static inline void *mc_grown(void *v, size_t *cap, size_t n, size_t size, size_t first)
{
	size_t c;

	if (n < *cap)
		return v;
	c = *cap ? 2 * *cap : first;
	if (c < *cap || c > (size_t)-1 / size)
		return NULL;
	v = realloc(v, c * size);
	if (v)
		*cap = c;
	return v;
}

#endif
