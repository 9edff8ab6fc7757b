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
/*
 * A function's parameters and result as DWARF declares them, classed by
 * how a calling convention passes a scalar: what mcloc's --auto-args
 * captures.  MC_P_OTHER is anything else (an aggregate, a long double, a
 * complex): where it and the parameters after it go depends on the ABI's
 * rules for aggregates, so a reader stops there.
 */
enum mc_param_kind {
	MC_P_NONE,	/* (the result of a void function) */
	MC_P_SIGNED,	/* integers and enums: SIZE bytes */
	MC_P_UNSIGNED,	/* (and bool) */
	MC_P_CHAR,	/* a character type of one byte */
	MC_P_POINTER,
	MC_P_STRING,	/* a pointer to char */
	MC_P_FLOAT,	/* float or double: SIZE 4 or 8 */
	/* A struct or union of at most 16 bytes that C (or C++'s DWARF 5,
	 * saying it is passed by value) returns in registers on x86_64,
	 * aarch64 and riscv64 alike, not through memory the caller passes
	 * the address of: a result of it moves no argument on. */
	MC_P_SMALL_AGGREGATE,
	MC_P_OTHER,
};
struct mc_param {
	enum mc_param_kind kind;
	unsigned size;
};
/* Of the function whose code holds ADDR (a process's address): up to MAX
 * parameters into V and the result into *RET; how many it has (more than
 * MAX possible), or -1 when no DWARF describes it (or it is variadic
 * with none named, or says its calling convention is not the platform's:
 * nothing is known).  A float parameter of a C function defined without a
 * prototype is a double, as its callers promote it. */
int mc_lines_params(struct mc_lines *l, uint64_t addr, struct mc_param *v, int max,
		    struct mc_param *ret);
void mc_lines_close(struct mc_lines *l);

#endif
