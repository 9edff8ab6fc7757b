#include "demo.h"

static long fib_step(long a, long b) { return a + b; }

long fib(int n)
{
	long a = 0, b = 1;

	while (n-- > 0) {
		long t = fib_step(a, b);
		a = b;
		b = t;
	}
	return a;
}
