/* syscalls — do_writes() writes 4 KiB blocks to /dev/null for 0.3 s of CPU
 * time: most of it in the kernel, under libc's write(). */
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) void do_writes(int fd)
{
	static char b[4096];
	double t0 = cpu_now();
	while (cpu_now() - t0 < 0.3)
		if (write(fd, b, sizeof b) < 0)
			return;
}

int main(void)
{
	int fd = open("/dev/null", O_WRONLY);
	if (fd < 0)
		return 1;
	do_writes(fd);
	return 0;
}
