/* call-bench.sh's driver: calls hot() N times and prints ns per call
 * (best of 5).  With argv[2] = "enable" it first registers one empty ops
 * over hot() through libmcloc (built with -DWITH_MCLOC); with "direct",
 * an empty direct trampoline (mcloc_register_direct). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef WITH_MCLOC
#include <mcloc/mcloc.h>
#include "../../fixtures/direct-tramp.h"
static void empty(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops, struct mcloc_regs *regs)
{
	(void)ip; (void)parent; (void)ops; (void)regs;
}
#endif
#ifdef WITH_XRAY
#include <xray/xray_interface.h>
static void handler(int32_t id, XRayEntryType t) { (void)id; (void)t; }
#endif

#ifdef __cplusplus
extern "C"
#endif
long call_hot(long);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000000;
	int enable = argc > 2 && !strcmp(argv[2], "enable");
	int direct = argc > 2 && !strcmp(argv[2], "direct");
	volatile long sink = 0;
	double best = 1e30;

#ifdef WITH_MCLOC
	static struct mcloc_ops ops = { .func = empty };
	if (enable && (mcloc_set_filter(&ops, "hot", 1) != 1 || mcloc_register_ops(&ops)))
		return 1;
	if (direct && mcloc_register_direct(mcloc_site_of("hot"), (void *)mc_test_empty_tramp))
		return 1;
#endif
	(void)direct;
#ifdef WITH_XRAY
	if (enable) {
		__xray_set_handler(handler);
		__xray_patch();
	}
#endif
	(void)enable;
	for (int r = 0; r < 5; r++) {
		double t0 = now();
		long s = call_hot(n);
		double t = (now() - t0) / (double)n;
		sink += s;
		if (t < best)
			best = t;
	}
	printf("%.3f\n", best);
	return 0;
}
