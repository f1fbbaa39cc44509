/* Signal handlers: one signal delivered on the return of the kill system
 * call (raise), and one fault (a write through NULL) whose handler leaves
 * with siglongjmp. */
#include <setjmp.h>
#include <signal.h>
#include <string.h>

static volatile int hits;
static sigjmp_buf env;

__attribute__((noinline)) static void on_usr1(int sig)
{
	hits += sig == SIGUSR1;
}

__attribute__((noinline)) static void on_segv(int sig)
{
	(void)sig;
	hits += 10;
	siglongjmp(env, 1);
}

__attribute__((noinline)) static void crash(volatile int *p)
{
	*p = 1;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_segv;
	sigaction(SIGSEGV, &sa, NULL);
	for (int i = 0; i < 3; i++)
		raise(SIGUSR1);
	if (!sigsetjmp(env, 1))
		crash(NULL);
	return hits == 13 ? 0 : 1;
}
