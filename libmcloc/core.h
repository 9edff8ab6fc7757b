/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Between the core and its helpers. */
#ifndef MCLOC_CORE_H
#define MCLOC_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Does a registered image have sites in [LO, HI)? */
bool mcloc_covers(uintptr_t lo, uintptr_t hi);
/* LEN bytes of the file FD at OFF, in a malloc'd buffer with room for a
 * terminating NUL; NULL on failure. */
void *mcloc_read_at(int fd, off_t off, size_t len);
/* A fresh read-write page within a rel32 call of [LO, HI), or NULL. */
uint8_t *mcloc_near_page(uintptr_t lo, uintptr_t hi);
/* Register the main program if it was linked without objpatch. */
int mcloc_discover_main(char *err, size_t errlen);

#endif
