/* SPDX-License-Identifier: MIT */
/*
 * riscv64: a run-time site is "auipc t0, hi; jalr t0, lo(t0)" with the
 * auipc fixed at link time, so one site reaches a 4 KiB window only, and
 * the window's edge may fall between the args and regs trampolines'
 * entries.  Those entries are a pair of jumps that repeats this many
 * bytes on (tramp.c): every window then holds one whole pair.  objpatch
 * link --runtime picks the pair for each site's auipc; the runtime tries
 * the first pair, then the second.
 */
#ifndef MC_RISCV_TRAMP_H
#define MC_RISCV_TRAMP_H

#define MC_RV_TRAMP_MIRROR 2048

#endif
