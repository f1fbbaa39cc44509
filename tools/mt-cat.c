/* mt-cat: concatenate MTEV streams into one (e.g. mt-capture's hits.mt with
 * mt-decode's output, so the trigger hits reach the trace).  See --help. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "io.h"
#include "mtev.h"

static void usage(FILE *f)
{
	fputs("usage: mt-cat [-o OUT] FILE...\n"
	      "Writes the records of every MTEV stream FILE (\"-\": stdin), in order, as one\n"
	      "stream (one header, one END). Header flags: the union of the inputs' flags,\n"
	      "except 'sorted', kept only when there is a single input.\n"
	      "\n"
	      "  -o, --output FILE  write FILE (appears only when complete); default stdout\n"
	      "  -f, --force        write binary to a terminal\n"
	      "  -h, --help         this help\n"
	      "\n"
	      "Exit status: 0 ok; 2 usage, an input that is not MTEV, corrupt or truncated\n"
	      "(no output file is left); 111 system error.\n",
	      f);
}

/* The readers still open (error paths free them too: no leak at exit). */
static void free_readers(mtev_reader **r, int n)
{
	for (int i = 0; i < n; i++)
		mtev_reader_free(r[i]);
	free(r);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"output", required_argument, 0, 'o'},
		{"force", no_argument, 0, 'f'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *out_path = NULL;
	int force = 0, ch, err = 0;

	mt_set_progname(argv[0]);
	while ((ch = getopt_long(argc, argv, "o:fh", lo, NULL)) != -1) {
		switch (ch) {
		case 'o':
			out_path = optarg;
			break;
		case 'f':
			force = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return MT_EXIT_USAGE;
		}
	}
	int n = argc - optind;
	if (n < 1) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	mtev_reader **r = calloc((size_t)n, sizeof *r);
	if (!r)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	uint32_t flags = 0, sorted = MTEV_F_SORTED;
	for (int i = 0; i < n; i++) {
		const char *p = argv[optind + i];
		int fd = io_open_in(p);
		if (fd < 0) {
			int e = errno;
			free_readers(r, n);
			mt_fatal(e == ENOENT ? MT_EXIT_USAGE : MT_EXIT_SYS, "unable to open %s: %s", p,
				 strerror(e));
		}
		if (!(r[i] = mtev_reader_alloc(fd, &err))) {
			free_readers(r, n);
			mt_fatal(err == MTEV_EIO ? MT_EXIT_SYS : MT_EXIT_USAGE, "%s: %s", p,
				 mtev_strerror(err));
		}
		uint32_t f = mtev_reader_header(r[i])->flags;
		flags |= f & ~(uint32_t)MTEV_F_SORTED;
		sorted &= f;
	}
	if (n == 1)
		flags |= sorted;
	struct io_out out;
	if (io_out_open(&out, out_path, 1, force) < 0) {
		int e = errno;
		free_readers(r, n);
		errno = e;
		mt_fatal(errno == EISDIR ? MT_EXIT_USAGE : MT_EXIT_SYS, "%s: %s",
			 out_path ? out_path : "stdout",
			 errno == EISDIR ? "refusing to write binary to a terminal (use -f)" : strerror(errno));
	}
	mtev_writer *w = mtev_writer_alloc(out.fd, "mt-cat", flags, &err);
	if (!w)
		goto werr;
	for (int i = 0; i < n; i++) {
		struct mtev_rec rec;
		int k;
		while ((k = mtev_read(r[i], &rec)) > 0)
			if ((err = mtev_write(w, &rec)) < 0)
				goto werr;
		if (k < 0) {
			unsigned long long at = (unsigned long long)mtev_reader_offset(r[i]);
			mtev_writer_free(w);
			io_out_abort(&out);
			free_readers(r, n);
			mt_fatal(k == -MTEV_EIO ? MT_EXIT_SYS : MT_EXIT_USAGE, "%s: %s at byte %llu",
				 argv[optind + i], mtev_strerror(-k), at);
		}
		mtev_reader_free(r[i]);
		r[i] = NULL;
	}
	if ((err = mtev_writer_finish(w)) < 0)
		goto werr;
	mtev_writer_free(w);
	free_readers(r, n);
	if (io_out_commit(&out) < 0)
		mt_fatal(MT_EXIT_SYS, "%s: %s", out_path, strerror(errno));
	return 0;
werr:
	mtev_writer_free(w);
	io_out_abort(&out);
	free_readers(r, n);
	mt_fatal(MT_EXIT_SYS, "write: %s", mtev_strerror(err < 0 ? -err : err));
}
