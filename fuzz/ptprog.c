/* The program the raw-PT fuzz targets decode against (fuzz/ptfuzz.h):
 * fuzz_ptdecode and fuzz_ptwalk map its code, and their PT seeds are
 * mt-ptsim's recordings of it (mk/fuzz.mk).  No libc (-nostdlib, static):
 * its code is ~2 KiB, so libipt's block cache (4 bytes per code byte, built
 * cold for each decode of fuzz_ptwalk) and each decode's image mapping stay
 * small, where the recursion test program's static libc made them 480 KiB.
 *
 * What it runs, for the kinds of branch and packet a decoder must follow:
 * recursion 300 deep (past the 64-entry return stack that return
 * compression relies on), indirect calls through a table, a switch through
 * a jump table, loops (conditional branches taken and not), a `rep movsb`,
 * system calls (TIP.PGD/TIP.PGE in user-only tracing), and a signal handler
 * entered from a system call and left through rt_sigreturn.
 *
 * Behind it, never run, PTPROG_CODE (mk/fuzz.mk: the first 56 KiB of the
 * recursion test program's .text, static glibc code): a corrupt TIP that
 * updates the low 16 bits of the last ip lands in code as often as it did
 * in the 480 KiB image, and libipt and the walk decode whatever is there
 * (mid-instruction starts, far branches, hlt loops) as before. */
#include <stddef.h>

#define NR_getpid 39
#define NR_kill 62
#define NR_rt_sigaction 13
#define NR_exit_group 231
#define SIGUSR1 10
#define SA_RESTORER 0x04000000

static long sys4(long n, long a, long b, long c, long d)
{
	long r;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return r;
}

__attribute__((noinline)) static long down(long n)
{
	if (n == 0)
		return 0;
	return 1 + down(n - 1) + (n & 1);
}

__attribute__((noinline)) static long f_add(long x)
{
	return x + 3;
}

__attribute__((noinline)) static long f_mul(long x)
{
	return x * 5;
}

__attribute__((noinline)) static long f_xor(long x)
{
	return x ^ 0x55;
}

static long (*const table[])(long) = {f_add, f_mul, f_xor};

__attribute__((noinline)) static long sw(long k)
{
	switch (k & 7) {
	case 0:
		return k + 11;
	case 1:
		return k * 3;
	case 2:
		return k - 7;
	case 3:
		return k << 2;
	case 4:
		return k >> 1;
	case 5:
		return ~k;
	case 6:
		return k ^ 0x3c;
	default:
		return 1;
	}
}

__attribute__((noinline)) static void copy(char *d, const char *s, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static volatile long got;

static void handler(int sig)
{
	got += sig;
}

void restorer(void);
__asm__(".text\n"
	"restorer:\n"
	"\tmov $15, %eax\n" /* rt_sigreturn */
	"\tsyscall\n"
	"\thlt\n");

struct ksigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

int main(void);

int main(void)
{
	static char src[64] = "the raw-PT fuzz targets' program";
	static char dst[64];
	struct ksigaction sa = {handler, SA_RESTORER, restorer, 0};
	long r = 0;
	for (int i = 0; i < 3; i++)
		r += down(300);
	for (long i = 0; i < 64; i++) {
		r += table[i % 3](i);
		r += sw(i);
	}
	copy(dst, src, sizeof src);
	r += dst[5];
	sys4(NR_rt_sigaction, SIGUSR1, (long)&sa, 0, 8);
	sys4(NR_kill, sys4(NR_getpid, 0, 0, 0, 0), SIGUSR1, 0, 0);
	return got == SIGUSR1 && r ? 0 : 1;
}

#ifdef PTPROG_CODE
__asm__(".section .text.zcode, \"ax\"\n"
	".incbin \"" PTPROG_CODE "\"\n"
	".previous\n");
#endif

void _start(void);
__asm__(".text\n"
	".globl _start\n"
	"_start:\n"
	"\txor %ebp, %ebp\n"
	"\tand $-16, %rsp\n"
	"\tcall main\n"
	"\tmov %eax, %edi\n"
	"\tmov $231, %eax\n" /* exit_group */
	"\tsyscall\n"
	"\thlt\n");
