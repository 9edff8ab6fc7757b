/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ops.c: the registered ops, as the registry needs them. */
#ifndef MCLOC_OPS_H
#define MCLOC_OPS_H

/* With mcr_lock held, after an image was registered: every registered
 * ops covers the new records its filters name, and the sites follow. */
void mcr_cover_new_image(void);

#endif
