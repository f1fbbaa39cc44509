/* mt-dump: any MTEV stream as text, one record a line. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "err.h"
#include "io.h"
#include "mtev.h"
#include "mtev_text.h"

static void usage(FILE *f)
{
	fputs("usage: mt-dump [-k KIND[,KIND...]] [-s] [[-i] FILE]\n"
	      "Prints every record of an MTEV stream (FILE or stdin) as one line of text:\n"
	      "`KIND key=value ...`, addresses in hex, times in ns.  mt-undump is the inverse.\n"
	      "\n"
	      "  -k, --kinds LIST  print only these kinds (branch, span, gap, ...; `mtev` is the\n"
	      "                    header line and `end` the end line)\n"
	      "  -i, --input FILE  read FILE (same as the FILE operand); default stdin\n"
	      "  -s, --stats       print record counts and bytes per record to stderr\n"
	      "  -h, --help        this help\n"
	      "\n"
	      "Exit status: 0 ok; 2 unusable input (not MTEV, unsupported version, truncated or\n"
	      "corrupt stream: the message names the byte offset); 111 system error.\n",
	      f);
}

static int kind_index(const char *name, size_t n)
{
	if (n == 4 && !memcmp(name, "mtev", 4))
		return 256;
	if (n == 3 && !memcmp(name, "raw", 3))
		return 257;
	for (unsigned k = 0; k < 256; k++) {
		const char *kn = mtev_kind_name(k);
		if (kn && strlen(kn) == n && !memcmp(kn, name, n))
			return (int)k;
	}
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"kinds", required_argument, 0, 'k'},
					   {"input", required_argument, 0, 'i'},
					   {"stats", no_argument, 0, 's'},
					   {"help", no_argument, 0, 'h'},
					   {0, 0, 0, 0}};
	unsigned char want[258];
	int filter = 0, stats = 0, c;
	const char *in_opt = NULL;
	drv_init(argc, argv);
	memset(want, 1, sizeof want);
	while ((c = getopt_long(argc, argv, ":k:i:sh", lo, NULL)) != -1) {
		switch (c) {
		case 'k': {
			if (!filter)
				memset(want, 0, sizeof want);
			filter = 1;
			for (const char *p = optarg; *p;) {
				const char *q = strchr(p, ',');
				size_t n = q ? (size_t)(q - p) : strlen(p);
				int k = kind_index(p, n);
				if (k < 0)
					drv_usage("unknown record kind '%.*s'", (int)n, p);
				want[k] = 1;
				p += n + (q ? 1 : 0);
			}
			break;
		}
		case 'i': in_opt = optarg; break;
		case 's': stats = 1; break;
		case 'h': usage(stdout); return 0;
		default: drv_getopt_error(c, argv);
		}
	}
	const char *path = drv_input(argc, argv, in_opt);
	if (!path)
		path = "-";
	mtev_reader *r = drv_reader(path, drv_open_in(path));
	struct mtev_line line = {0};
	struct mtev_rec rec;
	uint64_t counts[258] = {0}, bytes[258] = {0};
	if (want[256]) {
		mtev_text_format_header(&line, mtev_reader_header(r));
		printf("%s\n", line.p);
	}
	int rc = 0;
	int prev_k = -1;
	uint64_t prev_off = 0;
	for (;;) {
		int n = mtev_read(r, &rec);
		if (n >= 0 && prev_k >= 0)
			bytes[prev_k] += mtev_reader_offset(r) - prev_off;
		if (n < 0) {
			int e = errno;
			fflush(stdout);
			errno = e;
			drv_read_failed(path, r, n, NULL);
		}
		if (n == 0)
			break;
		unsigned k = rec.kind == MTEV_KIND_RAW ? 257 : rec.kind;
		counts[k]++;
		prev_k = (int)k;
		prev_off = mtev_reader_offset(r);
		if (want[k]) {
			if (mtev_text_format(&line, &rec))
				mt_fatal(MT_EXIT_SYS, "out of memory");
			fwrite(line.p, 1, line.len, stdout);
			putchar('\n');
		}
	}
	if (want[MTEV_END])
		printf("end\n");
	if (fflush(stdout) || ferror(stdout))
		drv_write_failed(NULL, "stdout", NULL);
	if (stats) {
		for (unsigned k = 0; k < 258; k++) {
			if (!counts[k])
				continue;
			const char *kn = k == 257 ? "raw" : mtev_kind_name(k);
			fprintf(stderr, "mt-dump: kind=%s records=%" PRIu64 " bytes=%" PRIu64
				" bytes_per_record=%.2f\n",
				kn, counts[k], bytes[k], (double)bytes[k] / (double)counts[k]);
		}
	}
	free(line.p);
	mtev_reader_free(r);
	return rc;
}
