/* A small multi-threaded program, built for tracing: its workers crunch
 * numbers through a handful of functions.  (noinline: a call the compiler
 * inlines has no call site to trace.) */
#include "app.h"

#include <stdatomic.h>

atomic_int app_stop;

__attribute__((noinline)) long calc_square(long x) { return x * x; }
__attribute__((noinline)) long calc_mix(long a, long b) { return (a * 31) ^ b; }

__attribute__((noinline)) long work_hash(long seed)
{
	long h = seed;

	for (int i = 0; i < 4; i++)
		h = calc_mix(h, calc_square(i));
	return h;
}

__attribute__((noinline)) long work_sum(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += calc_square(i);
	return s;
}

void *app_worker(void *arg)
{
	long x = (long)arg, sink = 0;

	while (!atomic_load(&app_stop)) {
		sink += work_hash(x++);
		sink += work_sum(8);
	}
	return (void *)sink;
}
