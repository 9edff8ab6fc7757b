// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace-bench.sh's floor (x86_64): the least a tracer that times calls by
 * hooking their returns does per call, written by hand.  At entry, a clock
 * read (rdtsc), a 32-byte event, the return address kept on a shadow
 * stack and replaced; at the return, a clock read, a 32-byte event, a jump
 * back.  No checks, no locks, no dispatch, no registers saved but the
 * ones the empty function uses: no real tracer gets below it.
 * Usage: trace-floor N    Prints ns per call above a plain call.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define RING (64u << 20)

struct ev {
	uint64_t t, ip, parent, type;
};
static struct ev *ring;
static uint64_t head;
static uint64_t shadow[256];
static unsigned depth;

void floor_ret(void);

__attribute__((used)) void floor_entry(uint64_t *slot, uint64_t ip)
{
	uint64_t t = __builtin_ia32_rdtsc();

	shadow[depth++] = *slot;
	*slot = (uint64_t)floor_ret;
	ring[head++ % (RING / sizeof(struct ev))] = (struct ev){ t, ip, shadow[depth - 1], 2 };
}

__attribute__((used)) uint64_t floor_exit(void)
{
	uint64_t t = __builtin_ia32_rdtsc();
	uint64_t r = shadow[--depth];

	ring[head++ % (RING / sizeof(struct ev))] = (struct ev){ t, 0, r, 3 };
	return r;
}

/* The traced function calls floor_tramp at its entry, as a -mfentry site
 * would; it uses %edi and %eax only. */
__asm__(
"	.text\n"
"floor_tramp:\n"
"	pushq	%rdi\n"
"	pushq	%rax\n"
"	leaq	24(%rsp), %rdi\n"	/* the caller's return address */
"	movq	16(%rsp), %rsi\n"	/* into the function */
"	call	floor_entry\n"
"	popq	%rax\n"
"	popq	%rdi\n"
"	ret\n"
"floor_ret:\n"				/* (the stack as the caller's: realigned) */
"	pushq	%rax\n"
"	subq	$8, %rsp\n"
"	call	floor_exit\n"
"	addq	$8, %rsp\n"
"	movq	%rax, %r11\n"
"	popq	%rax\n"
"	jmpq	*%r11\n"
"	.globl	leaf_hooked\n"
"leaf_hooked:\n"
"	call	floor_tramp\n"
"	leal	1(%rdi), %eax\n"
"	ret\n"
"	.globl	leaf_plain\n"
"leaf_plain:\n"
"	leal	1(%rdi), %eax\n"
"	ret\n");
int leaf_hooked(int), leaf_plain(int);

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 500000;
	int (*volatile hooked)(int) = leaf_hooked, (*volatile plain)(int) = leaf_plain;
	int s = 0;

	ring = mmap(NULL, RING, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		    -1, 0);
	if (ring == MAP_FAILED)
		return 1;
	double a = now();
	for (long i = 0; i < n; i++)
		s += plain((int)i);
	double b = now();
	for (long i = 0; i < n; i++)
		s += hooked((int)i);
	double c = now();
	printf("%.3f\n", (c - b) / n - (b - a) / n);
	return s == 42;
}
