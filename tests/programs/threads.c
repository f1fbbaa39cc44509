/* Two threads: main and a worker it creates and joins. */
#include <pthread.h>

static volatile long total;

__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i & 7;
	return s;
}

static void *worker(void *arg)
{
	total += work((long)arg);
	return NULL;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, worker, (void *)2000L))
		return 2;
	long mine = work(1500);
	pthread_join(t, NULL);
	return total + mine > 0 ? 0 : 1;
}
