/* The hot function of call-bench.sh, in its own object so that it is
 * called, not inlined. */
__attribute__((noinline)) long hot(long x)
{
	return x * 3 + 1;
}
