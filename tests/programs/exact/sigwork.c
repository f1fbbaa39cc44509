/* Signal handlers that do work and return through the sigreturn
 * trampoline (__restore_rt, rt_sigreturn): one delivered on the return of
 * kill (raise), one asynchronous (a write to a read-only page: the handler
 * makes it writable and the write is restarted).  A snapshot that begins
 * inside a handler must nest it under the interrupted frame, which then
 * continues as itself.  Static, -O1. */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile unsigned acc;
static char *page;

__attribute__((noinline)) static unsigned mix(unsigned x)
{
	return x * 2654435761u ^ (x >> 7);
}

__attribute__((noinline)) static void work(int n)
{
	for (int i = 0; i < n; i++)
		acc = mix(acc + (unsigned)i);
}

static void on_usr1(int sig)
{
	work(40 + sig);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	work(30);
	mprotect((void *)((unsigned long)si->si_addr & ~4095ul), 4096, PROT_READ | PROT_WRITE);
}

__attribute__((noinline)) static void poke(int i)
{
	page[i] = (char)i; /* faults once: the page starts read-only */
	work(5);
}

__attribute__((noinline)) static void after(void)
{
	work(60);
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	work(10);
	raise(SIGUSR1);
	after();
	poke(3);
	after();
	return acc == 0x12345 ? 2 : 0;
}
