/* libFuzzer target: libcommon/dwcov.c, which reads the DWARF of every
 * binary mt-segment loads (its own images, or whatever a map record names).
 *
 * Input: an ELF file (when it starts with the ELF magic: written to a file
 * and loaded by path, as mt-segment does, so libelf's
 * section lookup, decompression and the .gnu_debuglink path are exercised),
 * or else six byte strings taken as .debug_info, .debug_abbrev,
 * .debug_aranges, .debug_ranges, .debug_rnglists and .debug_addr (five
 * 2-byte lengths first; the last one is the rest).  Either way the result
 * must be well formed: a known state; with ranges, at least one, each
 * non-empty, sorted, disjoint and not touching (merged); dwcov_any() must
 * agree with a linear scan of the ranges for probes at and around every
 * edge; the same for the inline ranges, dwcov_inline() and the bitmap.
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

/* Merged pairs: non-empty, sorted, disjoint, not touching. */
static void check_pairs(const char *what, const uint64_t *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		FUZZ_ASSERT(r[2 * i] < r[2 * i + 1], "%s %zu empty", what, i);
		FUZZ_ASSERT(!i || r[2 * i - 1] < r[2 * i], "%s %zu not after the one before", what, i);
	}
}

static int in_pairs(const uint64_t *r, size_t n, uint64_t a)
{
	for (size_t i = 0; i < n; i++)
		if (r[2 * i] <= a && a < r[2 * i + 1])
			return 1;
	return 0;
}

static void check_inline(const struct dwcov *dc)
{
	const uint64_t *r;
	if (!dc->inl_known) {
		FUZZ_ASSERT(dwcov_inline(dc, 0, 1, &r) == 1 && r[0] == 0 && r[1] == UINT64_MAX,
			    "unknown inline ranges: not everything");
		return;
	}
	check_pairs("inline range", dc->ir, dc->nir);
	size_t lim = dc->nir < 32 ? dc->nir : 32;
	for (size_t i = 0; i < lim; i++)
		for (int k = 0; k < 2; k++)
			for (int d = -1; d <= 1; d++) {
				uint64_t a = dc->ir[2 * i + k] + (uint64_t)(int64_t)d;
				if (a == UINT64_MAX)
					continue;
				size_t n = dwcov_inline(dc, a, a + 1, &r);
				int in = in_pairs(dc->ir, dc->nir, a);
				FUZZ_ASSERT(n == (size_t)in && (!n || (r[0] <= a && a < r[1])),
					    "dwcov_inline at %#llx: %zu, scan %d", (unsigned long long)a, n,
					    in);
				uint64_t base;
				const uint8_t *bits = dwcov_inline_bits(dc, a, a + 1, &base);
				if (bits) {
					uint64_t o = a - base;
					FUZZ_ASSERT(((bits[o >> 3] >> (o & 7)) & 1) == in,
						    "bitmap at %#llx: not the scan's %d",
						    (unsigned long long)a, in);
				}
			}
}

static void check(const struct dwcov *dc)
{
	check_inline(dc);
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
		/* no build-id: no separate debug file from this machine is
		 * looked for (only a .gnu_debuglink, in the file's directory) */
		dwcov_load(&dc, path, NULL, 0);
		close(fd);
	} else {
		const uint8_t *p[6];
		size_t n[6], off = size < 10 ? size : 10;
		for (size_t i = 0; i < 6; i++) {
			size_t want = i < 5 && 2 * i + 1 < size ? (size_t)(data[2 * i] | data[2 * i + 1] << 8)
								 : size - off;
			if (want > size - off)
				want = size - off;
			p[i] = data + off;
			n[i] = want;
			off += want;
		}
		struct dwcov_raw raw = {p[0], p[1], p[2], p[3], p[4], p[5],
					n[0], n[1], n[2], n[3], n[4], n[5]};
		dwcov_parse_raw(&dc, &raw);
	}
	check(&dc);
	dwcov_fini(&dc);
	return 0;
}
