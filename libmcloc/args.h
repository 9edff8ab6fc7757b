/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * args.c: arguments and return values of traced calls, captured into the
 * DATA items of <mcloc/control.h> for the tracers of trace.c.
 */
#ifndef MCLOC_ARGS_H
#define MCLOC_ARGS_H

#include <mcloc/control.h>
#include "../arch/runtime.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether SPEC may be captured at entry (RET false) or at the return:
 * its format, size, class and index are ones args.c knows. */
bool mcr_arg_valid(const struct mcloc_arg *spec, bool ret);
/* The items of E's arguments, from the call's registers AR (NULL: none
 * could be found, every item says so), into OUT (MCLOC_EV_DATA_MAX
 * bytes): their length.  A signal handler may be here: system calls and
 * plain stores only. */
size_t mcr_args_capture(const struct mcloc_args_ent *e, const struct mcr_argregs *ar,
			uint8_t *out);
/* The item of the return value RET from the result registers RR, into
 * OUT: its length. */
size_t mcr_ret_capture(const struct mcloc_arg *ret, const struct mcr_retregs *rr, uint8_t *out);

#endif
