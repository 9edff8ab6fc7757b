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

#include <stdbool.h>
#include <stdint.h>

/* The auipc immediate *HI whose 4 KiB window from PC holds both A and B
 * (a jalr's signed 12-bit offset from the auipc's result reaches them). */
static inline bool mc_rv_window(uint64_t pc, uint64_t a, uint64_t b, int64_t *hi)
{
	*hi = ((int64_t)(a - pc) + 0x800) >> 12;
	int64_t base = (int64_t)pc + *hi * 4096;

	if (*hi < -(1 << 19) || *hi >= (1 << 19))
		return false;
	return (int64_t)a - base >= -2048 && (int64_t)a - base <= 2047 &&
	       (int64_t)b - base >= -2048 && (int64_t)b - base <= 2047;
}

/* For a site at PC: the auipc immediate of the window that holds a whole
 * pair of trampoline entries (ARGS, REGS), or their mirror. */
static inline bool mc_rv_tramp_window(uint64_t pc, uint64_t args, uint64_t regs, int64_t *hi)
{
	return mc_rv_window(pc, args, regs, hi) ||
	       mc_rv_window(pc, args + MC_RV_TRAMP_MIRROR, regs + MC_RV_TRAMP_MIRROR, hi);
}

#endif
