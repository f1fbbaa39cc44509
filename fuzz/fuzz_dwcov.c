/* libFuzzer target: libcommon/dwcov.c, which reads the DWARF of every
 * binary mt-segment loads (its own images, or whatever a map record names).
 *
 * Input: an ELF file (when it starts with the ELF magic: written to a file
 * and loaded by path, as mt-segment does, so libelf's
 * section lookup, decompression and the .gnu_debuglink path are exercised),
 * or else two byte strings taken as .debug_info and .debug_aranges (the
 * first two bytes give the length of the first).  Either way the result must
 * be well formed: a known state; with ranges, at least one, each non-empty,
 * sorted, disjoint and not touching (merged); and dwcov_any() must agree
 * with a linear scan of the ranges for probes at and around every edge.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "dwcov.h"
#include "memfd.h"

static int scan(const struct dwcov *dc, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < dc->n; i++)
		if (dc->r[2 * i] < hi && lo < dc->r[2 * i + 1])
			return 1;
	return 0;
}

static void check(const struct dwcov *dc)
{
	FUZZ_ASSERT(dc->state == DWCOV_NONE || dc->state == DWCOV_RANGES || dc->state == DWCOV_ALL,
		    "state %d", dc->state);
	if (dc->state != DWCOV_RANGES) {
		FUZZ_ASSERT(dwcov_any(dc, 0, UINT64_MAX) == (dc->state == DWCOV_ALL), "any: state %s",
			    dwcov_state_name(dc->state));
		return;
	}
	FUZZ_ASSERT(dc->n > 0 && dc->r, "ranges state with %zu ranges", dc->n);
	for (size_t i = 0; i < dc->n; i++) {
		uint64_t lo = dc->r[2 * i], hi = dc->r[2 * i + 1];
		FUZZ_ASSERT(lo < hi, "range %zu empty: [%#llx, %#llx)", i, (unsigned long long)lo,
			    (unsigned long long)hi);
		FUZZ_ASSERT(!i || dc->r[2 * i - 1] < lo, "range %zu not after the one before", i);
	}
	size_t lim = dc->n < 64 ? dc->n : 64;
	for (size_t i = 0; i < lim; i++) {
		uint64_t e[2] = {dc->r[2 * i], dc->r[2 * i + 1]};
		for (int k = 0; k < 2; k++)
			for (int d = -2; d <= 2; d++) {
				uint64_t a = e[k] + (uint64_t)(int64_t)d;
				uint64_t b = a + 1 + (uint64_t)(d & 3);
				if (b <= a)
					continue;
				FUZZ_ASSERT(dwcov_any(dc, a, b) == scan(dc, a, b),
					    "any [%#llx, %#llx) disagrees with a scan", (unsigned long long)a,
					    (unsigned long long)b);
			}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dwcov dc = {0};
	if (size >= 4 && !memcmp(data, "\177ELF", 4)) {
		/* a file of its own directory: a .gnu_debuglink (a file name)
		 * finds nothing but the file itself */
		static char dir[] = "/tmp/mt-fuzz-dwcov-XXXXXX";
		static int made;
		if (!made)
			FUZZ_ASSERT(mkdtemp(dir), "mkdtemp");
		made = 1;
		char path[64];
		snprintf(path, sizeof path, "%s/f", dir);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		FUZZ_ASSERT(fd >= 0, "open %s", path);
		size_t off = 0;
		while (off < size) {
			ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);
			FUZZ_ASSERT(n > 0, "pwrite");
			off += (size_t)n;
		}
		/* no separate debug files from this machine */
		setenv("MT_DEBUGINFO_DIR", "", 1);
		dwcov_load(&dc, path, data, size < 20 ? size : 20);
		close(fd);
	} else {
		size_t n1 = size >= 2 ? (size_t)(data[0] | data[1] << 8) : 0;
		const uint8_t *p = data + (size >= 2 ? 2 : size);
		size_t rest = size >= 2 ? size - 2 : 0;
		if (n1 > rest)
			n1 = rest;
		dwcov_parse(&dc, p, n1, p + n1, rest - n1);
	}
	check(&dc);
	dwcov_fini(&dc);
	return 0;
}
