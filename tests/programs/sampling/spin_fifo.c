/* spin_fifo FILE — spins 0.2 s of CPU time in spin_loop(), writes "ready
 * PGID" (its process group) to FILE (a FIFO the test reads: the
 * synchronization), then spins in spin_loop() until a signal ends it. */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) void spin_loop(double secs)
{
	double t0 = cpu_now();
	while (secs <= 0 || cpu_now() - t0 < secs)
		for (int i = 0; i < 1000; i++)
			sink += (unsigned long)i;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	spin_loop(0.2);
	FILE *f = fopen(argv[1], "w");
	if (!f || fprintf(f, "ready %d\n", (int)getpgrp()) < 0 || fclose(f))
		return 1;
	spin_loop(0);
	return 0;
}
