/* mt-cat: concatenate MTEV streams into one (e.g. mt-capture's hits.mt with
 * mt-decode's output, so the trigger hits reach the trace).  See --help. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "err.h"
#include "io.h"
#include "mtev.h"

static void usage(FILE *f)
{
	fputs("usage: mt-cat [-o OUT] [-i FILE]... [FILE...]\n"
	      "Writes the records of every MTEV stream FILE (\"-\": stdin), in order, as one\n"
	      "stream (one header, one END). Header flags: the union of the inputs' flags,\n"
	      "except 'sorted', kept only when there is a single input.\n"
	      "\n"
	      "  -i, --input FILE   one more input, before the FILE operands (repeatable)\n"
	      "  -o, --output FILE  write FILE (appears only when complete); default stdout\n"
	      "  -f, --force        write binary to a terminal\n"
	      "  -h, --help         this help\n"
	      "\n"
	      "Exit status: 0 ok; 2 usage, an input that is not MTEV, corrupt or truncated\n"
	      "(no output file is left); 111 system error.\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"output", required_argument, 0, 'o'},
		{"input", required_argument, 0, 'i'},
		{"force", no_argument, 0, 'f'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *out_path = NULL;
	int force = 0, ch, err = 0, nin = 0;
	const char **in = calloc((size_t)argc, sizeof *in); /* -i FILEs, then the operands */
	if (!in)
		mt_fatal(MT_EXIT_SYS, "out of memory");

	drv_init(argc, argv);
	while ((ch = getopt_long(argc, argv, ":i:o:fh", lo, NULL)) != -1) {
		switch (ch) {
		case 'o':
			out_path = optarg;
			break;
		case 'i':
			in[nin++] = optarg;
			break;
		case 'f':
			force = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			drv_getopt_error(ch, argv);
		}
	}
	while (optind < argc)
		in[nin++] = argv[optind++];
	int n = nin;
	if (n < 1)
		drv_usage("no input FILE");
	mtev_reader **r = calloc((size_t)n, sizeof *r);
	if (!r)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	uint32_t flags = 0, sorted = MTEV_F_SORTED;
	for (int i = 0; i < n; i++) {
		const char *p = in[i];
		r[i] = drv_reader(p, drv_open_in(p));
		uint32_t f = mtev_reader_header(r[i])->flags;
		flags |= f & ~(uint32_t)MTEV_F_SORTED;
		sorted &= f;
	}
	if (n == 1)
		flags |= sorted;
	struct io_out out;
	drv_out_open(&out, out_path, 1, force);
	mtev_writer *w = mtev_writer_alloc(out.fd, "mt-cat", flags, &err);
	if (!w)
		goto werr;
	for (int i = 0; i < n; i++) {
		struct mtev_rec rec;
		int k;
		while ((k = mtev_read(r[i], &rec)) > 0)
			if ((err = mtev_write(w, &rec)) < 0)
				goto werr;
		if (k < 0)
			drv_read_failed(in[i], r[i], k,
					out_path ? "; no output written" : "");
		mtev_reader_free(r[i]);
		r[i] = NULL;
	}
	if ((err = mtev_writer_finish(w)) < 0)
		goto werr;
	mtev_writer_free(w);
	drv_out_commit(&out, out_path);
	free(r);
	free(in);
	return 0;
werr:
	drv_write_failed(&out, out_path, err == -MTEV_EIO ? NULL : mtev_strerror(-err));
}
