#ifndef DEMO_H
#define DEMO_H
struct stats { long n, sum, max; };
long fib(int n);
void stats_add(struct stats *s, long v);
double stats_mean(const struct stats *s);
#endif
