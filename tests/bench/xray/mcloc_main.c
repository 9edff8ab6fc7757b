/* Our side of patch-bench.sh: enable every site (register an ops that
 * covers all) and disable it again, timed, ROUNDS times; prints the
 * medians in ms of the whole calls, then of the patching batches alone,
 * the number of sites, and two floors.  One pass: making the text
 * writable, one pass that stores each site's own 5 bytes back, and the
 * protection back (what any patcher that touches every site once pays,
 * with no SMP safety at all).  The protocol: the same, but the kernel's
 * breakpoint protocol for a change of the first byte alone, as a parked
 * site's toggle is (int3 over every site, sync, every first byte back,
 * sync): what libmcloc's batch would cost if deciding and checking each
 * site were free.  Last, the first enable alone, the process's first
 * write to its text.
 *
 * With "first-write" after ROUNDS: only the floor of that first enable,
 * in this fresh process: the text made writable, every site's first byte
 * stored back once (a copy-on-write fault per page, what any patcher's
 * first pass pays), the protection back.  Prints its ms.
 *
 * With "threaded" after ROUNDS: a second thread, idle, runs meanwhile, so
 * that every batch is made for threads that may run the sites (the
 * breakpoint protocol and its syncs); alone, the library changes each
 * site at once. */
#include <mcloc/mcloc.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

long fn0(long);

static void cb(uintptr_t ip, uintptr_t parent, struct mcloc_ops *ops, struct mcloc_regs *regs)
{
	(void)ip; (void)parent; (void)ops; (void)regs;
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The sites of fn0 ... fnN, as the library knows them, into *V: how
 * many; and the pages they lie on, [*LO, *HI).  mcloc_site_of() looks a
 * name up in every record, so 100,000 of them take half a minute: the
 * sites' offsets from fn0 are kept in the file $MCLOC_BENCH_SITES, when
 * set, for the next fresh process of the same program. */
static size_t sites_of(uintptr_t **v, uintptr_t *lo, uintptr_t *hi)
{
	struct mcloc_stats st = { .sz = sizeof(st) };
	const char *cache = getenv("MCLOC_BENCH_SITES");
	FILE *f = cache ? fopen(cache, "r") : NULL;
	char name[32];
	size_t k = 0;
	long off;

	mcloc_get_stats(&st);
	*v = calloc(st.records + 1, sizeof(**v));
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (size_t i = 0; *v && i < st.records; i++) {
		uintptr_t a = 0;

		if (f)
			a = fscanf(f, "%ld", &off) == 1 ? (uintptr_t)fn0 + (uintptr_t)off : 0;
		else {
			snprintf(name, sizeof(name), "fn%zu", i);
			a = mcloc_site_of(name);
		}
		if (!a)
			continue;
		(*v)[k++] = a;
		*lo = a < *lo ? a : *lo;
		*hi = a + 5 > *hi ? a + 5 : *hi;
	}
	if (f)
		fclose(f);
	else if (cache && (f = fopen(cache, "w"))) {
		for (size_t i = 0; i < k; i++)
			fprintf(f, "%ld\n", (long)((*v)[i] - (uintptr_t)fn0));
		fclose(f);
	}
	long pg = sysconf(_SC_PAGESIZE);

	*lo &= ~(uintptr_t)(pg - 1);
	*hi = (*hi + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	return k;
}

static int first_write(void)
{
	uintptr_t *site, lo, hi;
	size_t k = sites_of(&site, &lo, &hi);
	double t0 = now();

	if (!k || mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC))
		return 1;
	for (size_t i = 0; i < k; i++)
		*(volatile uint8_t *)site[i] = *(volatile uint8_t *)site[i];
	mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC);
	printf("%.3f\n", now() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	double *p = calloc((size_t)rounds, sizeof(double)), *u = calloc((size_t)rounds, sizeof(double));
	double *pb = calloc((size_t)rounds, sizeof(double)), *ub = calloc((size_t)rounds, sizeof(double));
	struct mcloc_ops ops = { .func = cb };
	struct mcloc_stats st = { .sz = sizeof(st) };

	pthread_t th;

	if (argc > 2 && !strcmp(argv[2], "threaded") && pthread_create(&th, NULL, idle, NULL))
		return 1;
	if (mcloc_init())
		return 1;
	if (argc > 2 && !strcmp(argv[2], "first-write"))
		return first_write();
	for (int r = 0; r < rounds; r++) {
		double t0 = now();
		if (mcloc_register_ops(&ops))
			return 1;
		double t1 = now();
		mcloc_get_stats(&st);	/* (outside the timed windows) */
		pb[r] = st.last_batch_ms;
		fn0(1);
		double t1b = now();
		if (mcloc_unregister_ops(&ops))
			return 1;
		double t2 = now();
		mcloc_get_stats(&st);
		ub[r] = st.last_batch_ms;
		p[r] = t1 - t0;
		u[r] = t2 - t1b;
	}
	/* The floor, over the sites as the library knows them. */
	uintptr_t *site, lo, hi;
	size_t k = sites_of(&site, &lo, &hi);
	double *fl = calloc((size_t)rounds, sizeof(double)), *fp = calloc((size_t)rounds, sizeof(double));
	for (int r = 0; r < rounds && k; r++) {
		double t0 = now();
		if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC))
			return 1;
		for (size_t i = 0; i < k; i++) {
			uint8_t b[5];

			memcpy(b, (void *)site[i], 5);
			memcpy((void *)site[i], b, 5);
		}
		mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC);
		fl[r] = now() - t0;
	}
	/* (libmcloc registered the process for SYNC_CORE; no other thread
	 * runs, so no breakpoint is ever met.) */
	uint8_t *first = malloc(k + 1);
	for (int r = 0; r < rounds && k && first; r++) {
		double t0 = now();
		if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC))
			return 1;
		for (size_t i = 0; i < k; i++) {
			first[i] = *(volatile uint8_t *)site[i];
			*(volatile uint8_t *)site[i] = 0xcc;
		}
		syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
		for (size_t i = 0; i < k; i++)
			*(volatile uint8_t *)site[i] = first[i];
		syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
		mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC);
		fp[r] = now() - t0;
	}
	double first_enable = p[0];	/* (in this fresh process: before the sort) */

	qsort(fp, (size_t)rounds, sizeof(double), cmp);
	qsort(fl, (size_t)rounds, sizeof(double), cmp);
	qsort(p, (size_t)rounds, sizeof(double), cmp);
	qsort(u, (size_t)rounds, sizeof(double), cmp);
	qsort(pb, (size_t)rounds, sizeof(double), cmp);
	qsort(ub, (size_t)rounds, sizeof(double), cmp);
	printf("%.3f %.3f %.3f %.3f %zu %.3f %.3f %.3f\n", p[rounds / 2], u[rounds / 2], pb[rounds / 2],
	       ub[rounds / 2], st.records, fl[rounds / 2], fp[rounds / 2], first_enable);
	return 0;
}
