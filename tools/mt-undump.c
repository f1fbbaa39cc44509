/* mt-undump: text (mt-dump's form) back to an MTEV stream. */
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
#include "mtev_text.h"

static void usage(FILE *f)
{
	fputs("usage: mt-undump [-o FILE] [-f] [[-i] FILE]\n"
	      "Reads mt-dump's text form (FILE or stdin) and writes the MTEV stream.\n"
	      "Blank lines and lines starting with # are ignored.  The first line may be the\n"
	      "`mtev ...` header (default: producer \"mt-undump\", flags 0); keys left out of a\n"
	      "record are 0 or empty; the END record is always written.  Text that starts with\n"
	      "the header (mt-dump's output) must also have the `end` line: without it the\n"
	      "text was cut (a killed mt-dump upstream) and is refused.\n"
	      "\n"
	      "  -i, --input FILE   read FILE (same as the FILE operand); default stdin\n"
	      "  -o, --output FILE  write to FILE (appears only when complete); default stdout\n"
	      "  -f, --force        write binary to a terminal\n"
	      "  -h, --help         this help\n"
	      "\n"
	      "Exit status: 0 ok; 2 bad or truncated text (the message names the line); 111 system\n"
	      "error.\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"output", required_argument, 0, 'o'},
					   {"input", required_argument, 0, 'i'},
					   {"force", no_argument, 0, 'f'},
					   {"help", no_argument, 0, 'h'},
					   {0, 0, 0, 0}};
	const char *outpath = NULL, *in_opt = NULL;
	int force = 0, c;
	drv_init(argc, argv);
	while ((c = getopt_long(argc, argv, ":i:o:fh", lo, NULL)) != -1) {
		switch (c) {
		case 'i': in_opt = optarg; break;
		case 'o': outpath = optarg; break;
		case 'f': force = 1; break;
		case 'h': usage(stdout); return 0;
		default: drv_getopt_error(c, argv);
		}
	}
	if (argc - optind > 1 || (in_opt && argc - optind > 0))
		drv_usage("unexpected argument '%s'", argv[argc - 1]);
	const char *inpath = in_opt ? in_opt : optind < argc ? argv[optind] : "-";
	int in_fd = drv_open_in(inpath);
	FILE *in = in_fd ? fdopen(in_fd, "r") : stdin;
	if (!in)
		mt_fatal(MT_EXIT_SYS, "unable to open %s: %s", inpath, strerror(errno));
	struct io_out out;
	drv_out_open(&out, outpath, 1, force);

	struct mtev_text_parser tp = {0};
	struct mtev_rec rec;
	struct mtev_header hdr;
	mtev_writer *w = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned long lineno = 0;
	int ended = 0, headed = 0, err;
	const char *why = NULL;

	while ((n = getline(&line, &cap, in)) >= 0) {
		lineno++;
		if (n && line[n - 1] == '\n')
			n--;
		int k = mtev_text_parse(&tp, line, (size_t)n, &rec, &hdr);
		if (k == MTEV_TEXT_EMPTY)
			continue;
		if (k == MTEV_TEXT_ERROR) {
			why = tp.err;
			goto bad;
		}
		if (ended) {
			why = "record after 'end'";
			goto bad;
		}
		if (k == MTEV_TEXT_HEADER) {
			if (w) {
				why = "header line after the first record";
				goto bad;
			}
			if (hdr.version != MTEV_VERSION) {
				why = "unsupported version in header";
				goto bad;
			}
			w = mtev_writer_alloc(out.fd, hdr.producer, hdr.flags, &err);
			if (!w)
				goto syserr;
			headed = 1;
			continue;
		}
		if (!w && !(w = mtev_writer_alloc(out.fd, "mt-undump", 0, &err)))
			goto syserr;
		if (k == MTEV_TEXT_END) {
			ended = 1;
			continue;
		}
		err = mtev_write(w, &rec);
		if (err == -MTEV_EINVAL) {
			why = "record cannot be encoded";
			goto bad;
		}
		if (err)
			goto syserr;
	}
	if (ferror(in))
		drv_input_error(MT_EXIT_SYS, inpath, "%s", strerror(errno));
	if (headed && !ended) {
		why = "no 'end' line after the 'mtev' header: truncated text";
		goto bad;
	}
	if (!w && !(w = mtev_writer_alloc(out.fd, "mt-undump", 0, &err)))
		goto syserr;
	if ((err = mtev_writer_finish(w)))
		goto syserr;
	drv_out_commit(&out, outpath);
	mtev_writer_free(w);
	mtev_text_parser_fini(&tp);
	free(line);
	return 0;
bad:
	drv_input_error(MT_EXIT_USAGE, inpath, "line %lu: %s", lineno, why);
syserr:
	drv_write_failed(&out, outpath, err == -MTEV_EIO ? NULL : mtev_strerror(-err));
}
