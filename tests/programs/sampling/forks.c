/* forks — the main process forks two children while recording: the first
 * renames itself "renamed-kid" with prctl(PR_SET_NAME) and spins 0.2 s of
 * CPU in child_work(); the second keeps its parent's name and spins 0.2 s
 * in plain_child().  Neither execs.  The parent spins 0.1 s in
 * parent_work() before it waits, so that it has samples of its own (a parent
 * that only forks and waits runs for microseconds: sampled or not by luck). */
#define _GNU_SOURCE
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) void child_work(void)
{
	double t0 = cpu();
	while (cpu() - t0 < 0.2)
		sink++;
}

__attribute__((noinline)) void plain_child(void)
{
	double t0 = cpu();
	while (cpu() - t0 < 0.2)
		sink++;
}

__attribute__((noinline)) void parent_work(void)
{
	double t0 = cpu();
	while (cpu() - t0 < 0.1)
		sink++;
}

int main(void)
{
	pid_t a = fork();
	if (a == 0) {
		prctl(PR_SET_NAME, "renamed-kid");
		child_work();
		_exit(0);
	}
	pid_t b = fork();
	if (b == 0) {
		plain_child();
		_exit(0);
	}
	if (a < 0 || b < 0)
		return 1;
	parent_work();
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);
	return 0;
}
