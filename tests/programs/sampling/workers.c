/* workers — the main thread starts two threads, named worker-0 and worker-1
 * with prctl(PR_SET_NAME), that each spin 0.3 s of their own CPU time in
 * spin_work(), and joins them.  Threads created while recording. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

static double thread_cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static volatile unsigned long sink;

__attribute__((noinline)) void spin_work(void)
{
	double t0 = thread_cpu();
	while (thread_cpu() - t0 < 0.3)
		for (int i = 0; i < 1000; i++)
			sink += (unsigned long)i;
}

static void *worker(void *arg)
{
	char name[16];
	snprintf(name, sizeof name, "worker-%d", (int)(long)arg);
	prctl(PR_SET_NAME, name);
	spin_work();
	return NULL;
}

int main(void)
{
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i))
			return 1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("done\n");
	return 0;
}
