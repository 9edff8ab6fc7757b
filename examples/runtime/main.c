/*
 * The libmcloc demo: four threads run app.c's functions, every call site a
 * NOP.  While they run, the function tracer is turned on for "work_*",
 * some trace lines are shown, it is turned off, and then the profile runs
 * for a while.  main.c itself is not traced.
 */
#include "app.h"
#include <mcloc/mcloc.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void show(const char *what)
{
	struct mcloc_stats st = { .sz = sizeof(st) };

	mcloc_get_stats(&st);
	printf("%-34s %zu of %zu sites enabled (%zu direct); %zu batches so far, the last "
	       "%.3f ms; %zu core syncs\n", what, st.enabled, st.records, st.direct, st.batches,
	       st.last_batch_ms, st.syncs);
	fflush(stdout);
}

int main(void)
{
	pthread_t th[4];
	char path[] = "/tmp/mcloc-demo-trace.XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0 || mcloc_init()) {
		fprintf(stderr, "demo: cannot start\n");
		return 1;
	}
	for (long i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, app_worker, (void *)(i * 1000));
	usleep(100000);
	show("running, all NOPs:");

	mcloc_tracer_start("function", "work_*", NULL, fd);
	show("function tracer on 'work_*':");
	usleep(20000);	/* (long enough for qemu-user too) */
	mcloc_tracer_stop();
	show("function tracer off:");
	printf("\nthe first trace lines (TASK-TID [CPU] TIMESTAMP: function <-parent):\n");
	fflush(stdout);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "head -8 %s; echo '  ...'; wc -l < %s | sed 's/$/ lines in all/'",
		 path, path);
	if (system(cmd) != 0)
		return 1;

	printf("\nprofile of every function for 200 ms:\n");
	fflush(stdout);
	mcloc_tracer_start("profile", NULL, NULL, 1);
	show("profile on:");
	usleep(200000);
	mcloc_tracer_stop();
	show("profile off:");
	atomic_store(&app_stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	unlink(path);
	return 0;
}
