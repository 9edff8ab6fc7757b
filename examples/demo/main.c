/* The bundled example: a small multi-file program built with -pg -mfentry. */
#include <stdio.h>
#include "demo.h"

int main(void)
{
	struct stats s = { 0 };

	for (int i = 1; i <= 10; i++)
		stats_add(&s, fib(i));
	printf("sum=%ld max=%ld mean=%.2f\n", s.sum, s.max, stats_mean(&s));
	return 0;
}
