/* mt_calls — calls libmagictrace's trigger a known number of times, with
 * known arguments, from the main thread and from threads it creates later.
 * The trigger tests (tests/unit/test_trigger.c, tests/trigger.bats) check that
 * a hardware breakpoint sees exactly these calls:
 *   main thread:   magic_trace_stop_indicator(i, 3 * i) for i = 1, 2, 3
 *   worker k=1..3: magic_trace_stop_indicator(100 + k, 200 + k), each in its
 *                  own thread, created after the main thread's calls
 *   main thread:   magic_trace_mark_start(); magic_trace_take_snapshot_with_arg(77)
 *                  (rdi = the TSC read by mark_start, non-zero; rsi = 77)
 * Usage: mt_calls [--wait]
 *   --wait: first start a thread that waits, print "ready", and block reading
 *   a line from stdin (a tracer attaches meanwhile); then that older thread
 *   calls magic_trace_stop_indicator(50, 60) before everything above. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "magic_trace.h"

static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;

static void *older(void *p)
{
	(void)p;
	pthread_mutex_lock(&gate);
	magic_trace_stop_indicator(50, 60);
	pthread_mutex_unlock(&gate);
	return NULL;
}

static void *worker(void *p)
{
	uint64_t k = (uint64_t)(uintptr_t)p;
	magic_trace_stop_indicator(100 + k, 200 + k);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[3], old;

	if (argc > 1 && !strcmp(argv[1], "--wait")) {
		char line[16];
		pthread_mutex_lock(&gate);
		if (pthread_create(&old, NULL, older, NULL))
			return 1;
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 1;
		pthread_mutex_unlock(&gate);
		pthread_join(old, NULL);
	}
	for (uint64_t i = 1; i <= 3; i++)
		magic_trace_stop_indicator(i, 3 * i);
	/* One worker at a time, so their order is fixed. */
	for (uintptr_t k = 1; k <= 3; k++) {
		if (pthread_create(&th[k - 1], NULL, worker, (void *)k))
			return 1;
		pthread_join(th[k - 1], NULL);
	}
	magic_trace_mark_start();
	magic_trace_take_snapshot_with_arg(77);
	printf("mt_calls: done\n");
	return 0;
}
