// The XRay side of patch-bench.sh: patch and unpatch every sled of the
// generated program, timed, ROUNDS times; prints the medians in ms, then
// the first patch alone, the process's first write to its text.
#include <xray/xray_interface.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" long fn0(long);

static void handler(int32_t, XRayEntryType) {}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	std::vector<double> p, u;

	__xray_set_handler(handler);
	for (int r = 0; r < rounds; r++) {
		auto t0 = std::chrono::steady_clock::now();
		if (__xray_patch() != XRayPatchingStatus::SUCCESS)
			return 1;
		auto t1 = std::chrono::steady_clock::now();
		fn0(1);
		if (__xray_unpatch() != XRayPatchingStatus::SUCCESS)
			return 1;
		auto t2 = std::chrono::steady_clock::now();
		p.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
		u.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
	}
	double first = p[0];	// (the process's first patch: before the sort)

	std::sort(p.begin(), p.end());
	std::sort(u.begin(), u.end());
	printf("%.3f %.3f %.3f\n", p[p.size() / 2], u[u.size() / 2], first);
	return 0;
}
