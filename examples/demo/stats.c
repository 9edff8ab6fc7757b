#include "demo.h"

/* Weak, so that a strong definition elsewhere may replace it. */
__attribute__((weak)) long stats_clamp(long v) { return v < 0 ? 0 : v; }

void stats_add(struct stats *s, long v)
{
	v = stats_clamp(v);
	s->n++;
	s->sum += v;
	if (v > s->max)
		s->max = v;
}

double stats_mean(const struct stats *s)
{
	return s->n ? (double)s->sum / (double)s->n : 0.0;
}
