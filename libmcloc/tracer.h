/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef MCLOC_TRACER_H
#define MCLOC_TRACER_H

/* Start (or extend to a newly loaded image) the tracer MCLOC_TRACER asks
 * for; called after every image registration. */
void mcloc_env_tracer_kick(void);

/* From the core: FN(name, ARG) for every named site. */
void mcloc_each_site_name(void (*fn)(const char *name, void *arg), void *arg);

#endif
