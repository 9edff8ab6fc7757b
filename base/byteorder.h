/* SPDX-License-Identifier: MIT */
/*
 * Reading and writing words in a given byte order, never the host's: the
 * one implementation under the ELF layer's accessors (the object's order)
 * and the architectures' (the code's order).  base/ is the leaf every
 * layer may include; it includes nothing of the project.
 *
 * memcpy and a byte swap: the compiler makes one load or store of each.
 */
#ifndef MCLOC_BASE_BYTEORDER_H
#define MCLOC_BASE_BYTEORDER_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define MC_HOST_MSB (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)

static inline uint16_t mc_get16(const void *p, bool msb)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return msb == MC_HOST_MSB ? v : __builtin_bswap16(v);
}

static inline uint32_t mc_get32(const void *p, bool msb)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return msb == MC_HOST_MSB ? v : __builtin_bswap32(v);
}

static inline uint64_t mc_get64(const void *p, bool msb)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return msb == MC_HOST_MSB ? v : __builtin_bswap64(v);
}

static inline void mc_put16(void *p, bool msb, uint16_t v)
{
	if (msb != MC_HOST_MSB)
		v = __builtin_bswap16(v);
	memcpy(p, &v, 2);
}

static inline void mc_put32(void *p, bool msb, uint32_t v)
{
	if (msb != MC_HOST_MSB)
		v = __builtin_bswap32(v);
	memcpy(p, &v, 4);
}

static inline void mc_put64(void *p, bool msb, uint64_t v)
{
	if (msb != MC_HOST_MSB)
		v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}

#endif
