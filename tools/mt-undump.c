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
	      "text was cut (a killed mt-dump upstream) and is refused.  Input with neither\n"
	      "the header nor any record (empty, or only blank and # lines) is refused too:\n"
	      "an mt-dump killed before its first line writes nothing.\n"
	      "\n"
	      "Limits: a line is at most 64 MiB (longer: exit 2); raw data at most 16 MiB.\n"
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

/* The longest line read: the text of the largest record mt-dump writes is far
 * below it (docs/limits.md); a longer line is refused before it fills memory. */
#define LINE_MAX_BYTES (64u << 20)

/* Reads one line (without its newline) into *buf: its length, -1 at the end
 * of input, -2 when longer than LINE_MAX_BYTES, -3 out of memory.  A read
 * error is left to ferror(). */
static long read_line(FILE *in, char **buf, size_t *cap)
{
	size_t n = 0;
	int ch;
	while ((ch = getc_unlocked(in)) != EOF && ch != '\n') {
		if (n >= LINE_MAX_BYTES)
			return -2;
		if (n + 1 >= *cap) {
			size_t nc = *cap ? *cap * 2 : 4096;
			char *nb = realloc(*buf, nc);
			if (!nb)
				return -3;
			*buf = nb;
			*cap = nc;
		}
		(*buf)[n++] = (char)ch;
	}
	if (ch == EOF && !n)
		return -1;
	if (!*buf && !(*buf = malloc(*cap = 1)))
		return -3;
	return (long)n;
}

/* @s with control bytes, DEL, backslash and bytes that are not UTF-8 as \xHH:
 * an error message never carries the input's raw bytes to the terminal. */
static const char *escaped(const char *s, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;
	while (*p && o + 5 < cap) {
		unsigned c = *p, len = 0;
		if (c >= 0xc2 && c <= 0xdf)
			len = 2;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4;
		int ok = len > 0;
		for (unsigned i = 1; ok && i < len; i++)
			ok = (p[i] & 0xc0) == 0x80;
		if (ok && len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
			ok = 0; /* overlong, surrogate */
		if (ok && len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
			ok = 0;
		if (ok) {
			if (o + len + 1 >= cap)
				break;
			memcpy(out + o, p, len);
			o += len;
			p += len;
			continue;
		}
		if (c < 0x20 || c >= 0x7f || c == '\\') {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			out[o++] = (char)c;
		}
		p++;
	}
	out[o] = 0;
	return out;
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
	const char *inpath = drv_input(argc, argv, in_opt);
	if (!inpath)
		inpath = "-";
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
	unsigned long lineno = 0;
	int ended = 0, headed = 0, err;
	const char *why = NULL;

	long n;
	char ebuf[4 * sizeof tp.err + 8];
	while ((n = read_line(in, &line, &cap)) != -1) {
		lineno++;
		if (n == -2) {
			why = "line longer than 64 MiB (the limit)";
			goto bad;
		}
		if (n == -3) {
			io_out_abort(&out);
			mt_fatal(MT_EXIT_SYS, "out of memory reading line %lu of %s", lineno, inpath);
		}
		int k = mtev_text_parse(&tp, line, (size_t)n, &rec, &hdr);
		if (k == MTEV_TEXT_EMPTY)
			continue;
		if (k == MTEV_TEXT_ERROR) {
			why = escaped(tp.err, ebuf, sizeof ebuf);
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
	if (!w) {
		io_out_abort(&out);
		mt_fatal(MT_EXIT_USAGE, "%s: empty input: no 'mtev' header and no record (an mt-dump killed before its first line?)",
			 inpath);
	}
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
