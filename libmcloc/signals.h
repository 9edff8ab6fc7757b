/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SIGTRAP kept deliverable (signals.c): the library's own signal calls. */
#ifndef MCLOC_SIGNALS_H
#define MCLOC_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

#include "mcr.h"

/* pthread_sigmask() as libc does it, SIGTRAP and all: for the library's
 * own masks (a batch holds every signal of its thread). */
int mcr_sigmask(int how, const sigset_t *set, sigset_t *old);

/* Whether the program's signal calls reach this library's definitions
 * (always, where sites change without a breakpoint): not where libmcloc
 * was dlopen()ed, the program's calls bound to libc's already. */
bool mcr_signals_interposed(void);

/* Install HANDLER for SIGTRAP (SA_SIGINFO, SA_NODEFER, SA_ONSTACK); from
 * then on the program's own disposition is kept apart, for
 * mcr_trap_forward().  0, or -1 with errno. */
int mcr_trap_install(void (*handler)(int, siginfo_t *, void *));

/* Pass a trap that is not the library's to the program's disposition:
 * its handler (under its sa_mask), nothing (SIG_IGN), or the default
 * action (SIG_DFL: the process ends as if the library were not there). */
void mcr_trap_forward(int sig, siginfo_t *si, void *ctx);

/* fork.c's part: a child forked while another thread was setting
 * SIGTRAP's disposition gets the flag that thread held free again (the
 * disposition it reads is whole: the one before that setting). */
void mcr_signals_fork(enum mcr_fork stage);

#endif
