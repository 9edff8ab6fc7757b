#include <stdatomic.h>
extern atomic_int app_stop;
long calc_square(long x);
long calc_mix(long a, long b);
long work_hash(long seed);
long work_sum(long n);
void *app_worker(void *arg);
