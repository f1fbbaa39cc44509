/* In-memory descriptors for the fuzz targets (see memfd.h). */
#include "memfd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_read(int fd, void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);

static const uint8_t *in_buf;
static size_t in_len, in_pos;
static int in_short;
static unsigned in_step;

static uint8_t *out_buf;
static size_t out_len, out_cap, out_limit = SIZE_MAX;

void fuzz_in_set(const void *buf, size_t len, int short_reads)
{
	in_buf = buf;
	in_len = len;
	in_pos = 0;
	in_short = short_reads;
	in_step = 0;
}

void fuzz_out_reset(void)
{
	out_len = 0;
	out_limit = SIZE_MAX;
}

void fuzz_out_fail_after(size_t n)
{
	out_limit = n;
}

const uint8_t *fuzz_out(size_t *len)
{
	*len = out_len;
	return out_buf;
}

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
	static const size_t cycle[] = {1, 2, 3, 5, 8, 13, 4096, 7, 65536, 17};
	if (fd != FUZZ_FD_IN)
		return __real_read(fd, buf, n);
	size_t left = in_len - in_pos;
	if (n > left)
		n = left;
	if (in_short) {
		size_t c = cycle[in_step++ % (sizeof cycle / sizeof *cycle)];
		if (n > c)
			n = c;
	}
	if (n)
		memcpy(buf, in_buf + in_pos, n);
	in_pos += n;
	return (ssize_t)n;
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	if (fd != FUZZ_FD_OUT)
		return __real_write(fd, buf, n);
	if (out_len + n > out_limit) {
		errno = EIO;
		return -1;
	}
	if (out_len + n > out_cap) {
		size_t nc = out_cap ? out_cap : 1 << 16;
		while (nc < out_len + n)
			nc *= 2;
		uint8_t *nb = realloc(out_buf, nc);
		if (!nb)
			abort();
		out_buf = nb;
		out_cap = nc;
	}
	memcpy(out_buf + out_len, buf, n);
	out_len += n;
	return (ssize_t)n;
}

void fuzz_keep(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (n > *cap) {
		*cap = n;
		*buf = realloc(*buf, n ? n : 1);
		FUZZ_ASSERT(*buf, "out of memory");
	}
	memcpy(*buf, p, n);
	*len = n;
}

void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "FUZZ FINDING at %s:%d: (%s) ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* ASan's quarantine of freed memory at 16 MiB instead of 256: an exec frees a
 * few MiB at most (ptdecode and ptwalk well under 1 MiB since fuzz/ptprog.c),
 * so a use after free inside an exec (or a few execs on) is still caught, and
 * the recycled memory stays warm: at 64 MiB the slow targets (write,
 * ptdecode) ran ~22% more executions per CPU-second than at 256, at 16 MiB
 * write ~35%, ptdecode ~10%, ptwalk ~20% more than at 64 (docs/fuzz.md).
 * ASAN_OPTIONS still overrides it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "quarantine_size_mb=16";
}
