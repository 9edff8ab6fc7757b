/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Source lines of code places, from DWARF through libdw's libdwfl, which
 * applies an object's own relocations to its debug sections (a .o or .ko
 * has its line table relative to unrelocated sections) and finds separate
 * debug files the standard way.
 */
#ifndef MCLOC_LINES_H
#define MCLOC_LINES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct mc_lines;

/* NULL with the reason in ERR when PATH has no usable DWARF. */
struct mc_lines *mc_lines_open(const char *path, char *err, size_t errlen);
/* "file:line" of offset OFF of section SHNDX, or NULL if unknown. */
const char *mc_lines_at(struct mc_lines *l, uint32_t shndx, uint64_t off, char *buf,
			size_t len);
/* A process's images, as the lines of its /proc/PID/maps in MAPS name
 * them, read from those files as they are now: NULL with the reason in
 * ERR.  Then the function ADDR lies in (its offset in *OFF), or its
 * "file:line" in BUF: NULL where unknown. */
struct mc_lines *mc_lines_open_maps(FILE *maps, char *err, size_t errlen);
const char *mc_lines_func(struct mc_lines *l, uint64_t addr, uint64_t *off);
const char *mc_lines_src(struct mc_lines *l, uint64_t addr, char *buf, size_t len);
void mc_lines_close(struct mc_lines *l);

#endif
