/* mt_late_thread — the trigger fires only in a thread created late.
 *
 * The main thread works for about 100 ms, then starts a worker thread,
 * which works a little and calls magic_trace_take_snapshot_with_arg(42);
 * the main thread joins it and works about 400 ms more before exiting 0.
 * A capture whose trigger sees the worker stops at its call; one that
 * misses it would run until the exit, 400 ms later.  Usage: mt_late_thread */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "magic_trace.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static uint64_t crunch(uint64_t x)
{
	for (int i = 0; i < 1000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

__attribute__((noinline)) static uint64_t work_for(uint64_t ns)
{
	uint64_t end = now_ns() + ns, x = 1;
	while (now_ns() < end)
		x = crunch(x);
	return x;
}

static void *late_worker(void *p)
{
	(void)p;
	work_for(20 * 1000000u);
	magic_trace_take_snapshot_with_arg(42);
	return NULL;
}

int main(void)
{
	pthread_t th;
	uint64_t x = work_for(100 * 1000000u);
	if (pthread_create(&th, NULL, late_worker, NULL))
		return 1;
	pthread_join(th, NULL);
	x ^= work_for(400 * 1000000u);
	printf("mt_late_thread: done %llu\n", (unsigned long long)(x & 1));
	return 0;
}
