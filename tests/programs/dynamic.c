/* A dynamically linked program (lazy PLT binding): calls into libc go
 * through the PLT, resolved by ld.so on first use; clock_gettime runs in the
 * vdso, and so does time(), an IFUNC that glibc binds to the vdso's own
 * function: ld.so's resolver tail-calls into the vdso on the first call, the
 * PLT stub jumps there on the second. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	(void)argv;
	char buf[64];
	size_t n = 0;
	for (int i = 0; i < 5; i++) {
		memset(buf, 'a' + i, sizeof buf - 1);
		buf[sizeof buf - 1] = 0;
		n += strlen(buf);
	}
	char *p = malloc(100);
	if (!p)
		return 2;
	strcpy(p, "hello");
	n += strlen(p);
	free(p);
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 3;
	if (time(NULL) == (time_t)-1 || time(NULL) == (time_t)-1)
		return 4;
	return (int)(n + (size_t)argc) == 321 ? 0 : 1;
}
