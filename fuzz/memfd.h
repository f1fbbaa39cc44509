/* Deterministic in-memory file descriptors for the fuzz targets.
 *
 * The targets are linked with -Wl,--wrap=read,--wrap=write: a read() or
 * write() on one of the descriptors below is served from memory, every other
 * descriptor goes to the real call.  Reads return short counts in a fixed
 * cycle (1, 2, 3, 5, 8, 13, 4096 bytes...) so that code reading a pipe is
 * exercised at every buffer boundary, reproducibly (no threads, no timing).
 */
#ifndef MT_FUZZ_MEMFD_H
#define MT_FUZZ_MEMFD_H

#include <stddef.h>
#include <stdint.h>

enum { FUZZ_FD_IN = 1000, FUZZ_FD_OUT = 1001 };

/* Makes FUZZ_FD_IN read @len bytes of @buf (must outlive the reads), then EOF.
 * @short_reads: 0 = return as much as asked, 1 = short reads in a cycle. */
void fuzz_in_set(const void *buf, size_t len, int short_reads);
/* Empties FUZZ_FD_OUT; fuzz_out() gives what was written since. */
void fuzz_out_reset(void);
const uint8_t *fuzz_out(size_t *len);
/* Makes writes to FUZZ_FD_OUT fail with EIO after @n bytes (SIZE_MAX: never). */
void fuzz_out_fail_after(size_t n);

/* Copies @n bytes of @p into *@buf (grown as needed; kept between inputs). */
void fuzz_keep(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n);

/* abort() with a message when @cond is false: a finding, not an input error. */
#define FUZZ_ASSERT(cond, ...)                                                                     \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                         \
	} while (0)
void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));

#endif
