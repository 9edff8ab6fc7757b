/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* registry.c: the registered images, as discover.c needs them. */
#ifndef MCLOC_REGISTRY_H
#define MCLOC_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

/* Does a registered image have sites in [LO, HI)? */
bool mcr_covers(uintptr_t lo, uintptr_t hi);
/* A fresh read-write page within a rel32 call of [LO, HI), or NULL. */
uint8_t *mcr_near_page(uintptr_t lo, uintptr_t hi);

#endif
