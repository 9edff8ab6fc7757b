/*
 * call-bench.sh's timed loop, in an object of its own that is compiled
 * once and linked unchanged into every build it compares.  In the driver,
 * the loop's place depended on what else main() held, which differs per
 * build: in one run the mcloc build's `call hot` straddled a 32-byte
 * boundary (0x113f-0x1143) and the plain build's did not, and that alone
 * cost 15-20% per call, charged to the NOP.  Aligned to 64 and byte for
 * byte the same, the loop now sits identically in every binary.
 */
long hot(long);

__attribute__((noinline, aligned(64))) long call_hot(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += hot(i);
	return s;
}
