/*
 * call-bench.sh's paired driver for the cost of a disabled site.  One
 * process holds both hot()s: the instrumented one, NOPed by recordmcount
 * and objpatch, and the plain one built as hot_plain, each called through
 * its own copy of the timed loop (loop.c built twice, 64-aligned, the same
 * bytes).  The two alternate ROUNDS times (400), N calls each (2,000,000:
 * short rounds, many chances at a quiet moment), and each keeps
 * its fastest round.  Separate runs on this VM swing by +-40% from one
 * second to the next, which hides the 2% a NOP may cost; here both sides
 * see the same machine within milliseconds.  The process is set up as a
 * program linked for live patching is, with nothing enabled: libmcloc
 * loaded and initialised (its SIGTRAP handler, membarrier registration),
 * so that whatever that costs the loop is counted too.  With argv[3] =
 * "parked", hot()'s site is first enabled and disabled again, so that it
 * holds the parked call (test $rel32, %eax) rather than the NOP.
 * Prints "PLAIN_NS NOP_NS".
 */
#include <mcloc/mcloc.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long call_hot(long), call_hot_plain(long);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void empty(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops, struct mcloc_regs *regs)
{
	(void)ip, (void)parent, (void)ops, (void)regs;
}

static double timed(long (*loop)(long), long n, volatile long *sink)
{
	double t0 = now();

	*sink += loop(n);
	return (now() - t0) / (double)n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 400;
	volatile long sink = 0;
	double plain = 1e30, nop = 1e30;

	if (mcloc_init())
		return 1;
	if (argc > 3 && !strcmp(argv[3], "parked")) {
		struct mcloc_ops ops = { .func = empty };

		if (mcloc_register_ops(&ops) || mcloc_unregister_ops(&ops))
			return 1;
		mcloc_ops_free(&ops);
		if (*(const uint8_t *)mcloc_site_of("hot") != 0xa9) {
			fprintf(stderr, "pair: hot()'s site is not parked\n");
			return 1;
		}
	}
	for (int r = 0; r < rounds; r++) {
		/* Each round starts with the other side, so that neither
		 * always runs first. */
		long (*first)(long) = r & 1 ? call_hot : call_hot_plain;
		long (*second)(long) = r & 1 ? call_hot_plain : call_hot;
		double a = timed(first, n, &sink), b = timed(second, n, &sink);
		double tp = r & 1 ? b : a, tn = r & 1 ? a : b;

		if (tp < plain)
			plain = tp;
		if (tn < nop)
			nop = tn;
	}
	printf("%.3f %.3f\n", plain, nop);
	return 0;
}
