/* deep [SECONDS] — a fixed call chain main -> outer -> middle -> inner that
 * spins for SECONDS (default 0.6) of CPU time, calling libc (memcpy, strlen)
 * on the way: a run long enough to wrap a small sampling ring many times.
 * Built -O1 -fno-omit-frame-pointer by tests/sampling.bats. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char buf[2][4096];
volatile size_t sink;

__attribute__((noinline)) void inner(void)
{
	for (int i = 0; i < 64; i++) {
		memcpy(buf[i & 1], buf[!(i & 1)], sizeof buf[0]);
		sink += strlen(buf[0]);
	}
}

__attribute__((noinline)) void middle(void)
{
	for (int i = 0; i < 16; i++)
		inner();
}

__attribute__((noinline)) void outer(double secs)
{
	double t0 = cpu_now();
	while (cpu_now() - t0 < secs)
		middle();
}

int main(int argc, char **argv)
{
	memset(buf, 'a', sizeof buf);
	buf[0][sizeof buf[0] - 1] = buf[1][sizeof buf[1] - 1] = 0;
	outer(argc > 1 ? atof(argv[1]) : 0.6);
	return 0;
}
