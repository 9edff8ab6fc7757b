/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dispatch.c: what a traced call runs, as plan.c and registry.c see it. */
#ifndef MCLOC_DISPATCH_H
#define MCLOC_DISPATCH_H

#include "mcr.h"

/* What the trampolines call; they return a direct trampoline
 * for the image's trampoline to enter, or 0. */
uintptr_t mcr_args_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img, void *args);
uintptr_t mcr_regs_dispatch(uintptr_t after, uintptr_t parent, struct mcloc_image *img, void *regs);
/* What a site's ops slot holds when more than one ops covers the site
 * (ftrace's list ops): its dispatcher walks the set.  Never called. */
extern struct mcloc_ops mcr_list_ops;

#endif
