/* mt-stitch: joins each thread's segments across gaps. */
#include "err.h"
#include "io.h"
#include "mtev.h"
#include "stitch.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where the stitcher spills (libcommon/stitch.c uses the same rule). */
static const char *spill_dir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}

static void usage(FILE *f)
{
	fputs("usage: mt-stitch [OPTIONS] [-i IN] [-o OUT]\n"
	      "Joins each thread's segments (mt-segment output) across the gaps between\n"
	      "them: the stack live at the end of a segment is aligned with the stack live\n"
	      "at the start of the next; frames that align (same function, same call site\n"
	      "when known) continue as one span (flag stitched); the gap becomes a span\n"
	      "named for its reason ([decode error: MSG], [lost trace], [untraced]) at the\n"
	      "depth where the stacks diverge.  No frame is invented.\n"
	      "Heuristics and where they fail: docs/stitch.md.\n"
	      "\n"
	      "  -i, --input FILE     read FILE (default: stdin)\n"
	      "  -o, --output FILE    write FILE, atomically (default: stdout)\n"
	      "      --mem-limit SIZE  log memory per thread before spilling to a temporary\n"
	      "                       file in $TMPDIR (default /tmp); SIZE in bytes, or with\n"
	      "                       a K, M or G suffix (default 4M, at least 256)\n"
	      "      --stats          print counters on stderr at the end\n"
	      "      --partial        on a truncated or corrupt input, still write what was\n"
	      "                       read (exit 1); by default nothing is (exit 2)\n"
	      "  -f, --force          write binary output to a terminal\n"
	      "  -h, --help           this help\n"
	      "\n"
	      "Limits (docs/limits.md): records at most 16 MiB, any of them may be larger\n"
	      "than --mem-limit (it is read back whole); any depth and thread count.\n"
	      "\n"
	      "Exit status: 0 ok; 1 --partial and the input was truncated or corrupt after\n"
	      "its header (output covers the records before the damage); 2 usage, not an\n"
	      "MTEV stream, a truncated or corrupt input (a killed upstream stage: no output\n"
	      "file is left, stdout gets no END record), or branch/sample records (run\n"
	      "mt-segment first); 111 system error.\n",
	      f);
}

static int emit_cb(void *ctx, const struct mtev_rec *r)
{
	return mtev_write(ctx, r);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"input", required_argument, 0, 'i'}, {"output", required_argument, 0, 'o'},
		{"stats", no_argument, 0, 'T'},	      {"force", no_argument, 0, 'f'},
		{"help", no_argument, 0, 'h'},	      {"partial", no_argument, 0, 'P'},
		{"mem-limit", required_argument, 0, 'm'},
		{0, 0, 0, 0},
	};
	const char *in = NULL, *outp = NULL;
	int c, stats = 0, force = 0, partial = 0, err = 0, rc = MT_EXIT_OK;
	size_t mem_limit = STITCH_MEM_DEFAULT;
	mt_set_progname(argv[0]);
	while ((c = getopt_long(argc, argv, "i:o:fh", lo, NULL)) != -1) {
		switch (c) {
		case 'i':
			in = optarg;
			break;
		case 'o':
			outp = optarg;
			break;
		case 'T':
			stats = 1;
			break;
		case 'f':
			force = 1;
			break;
		case 'P':
			partial = 1;
			break;
		case 'm':
			if (!(mem_limit = io_parse_size(optarg, 256))) {
				mt_warn("--mem-limit: '%s' is not a size of at least 256 bytes", optarg);
				usage(stderr);
				return MT_EXIT_USAGE;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return MT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		mt_warn("unexpected argument '%s'", argv[optind]);
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	const char *iname = in ? in : "stdin";
	int fd = io_open_in(in);
	if (fd < 0)
		mt_fatal(MT_EXIT_SYS, "unable to open %s: %s", iname, strerror(errno));
	mtev_reader *rd = mtev_reader_alloc(fd, &err);
	if (!rd)
		mt_fatal(err == -MTEV_EIO ? MT_EXIT_SYS : MT_EXIT_USAGE, "%s: %s", iname,
			 mtev_strerror(err));
	const struct mtev_header *h = mtev_reader_header(rd);
	struct io_out out;
	if (io_out_open(&out, outp, 1, force) < 0) {
		if (errno == EISDIR && !outp)
			mt_fatal(MT_EXIT_USAGE, "refusing to write binary output to a terminal (use -o or -f)");
		mt_fatal(MT_EXIT_SYS, "unable to open %s: %s", outp ? outp : "stdout", strerror(errno));
	}
	mtev_writer *w = mtev_writer_alloc(out.fd, "mt-stitch", h->flags | MTEV_F_SPANS, &err);
	if (!w) {
		io_out_abort(&out);
		mt_fatal(MT_EXIT_SYS, "unable to write output: %s", mtev_strerror(err));
	}
	stitcher *s = stitch_alloc(emit_cb, w);
	if (!s)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	stitch_set_mem_limit(s, mem_limit);
	struct mtev_rec rec;
	int r;
	uint64_t n = 0;
	while ((r = mtev_read(rd, &rec)) > 0) {
		n++;
		int e = stitch_feed(s, &rec);
		if (__builtin_expect(!e, 1))
			continue;
		if (e == -STITCH_EKIND) {
			io_out_abort(&out);
			mt_fatal(MT_EXIT_USAGE,
				 "%s: record %llu at offset %llu is a %s record: mt-stitch reads "
				 "mt-segment output (run mt-segment first)",
				 iname, (unsigned long long)n, (unsigned long long)mtev_reader_offset(rd),
				 mtev_kind_name(stitch_error_detail(s)));
		}
		io_out_abort(&out);
		if (e == -STITCH_ESPILL)
			mt_fatal(MT_EXIT_SYS, "%s in %s: %s", stitch_strerror(e), spill_dir(),
				 strerror(errno));
		mt_fatal(MT_EXIT_SYS, "%s", stitch_strerror(e));
	}
	if (r < 0) {
		if (r == -MTEV_EIO) {
			io_out_abort(&out);
			mt_fatal(MT_EXIT_SYS, "reading %s: %s", iname, strerror(errno));
		}
		if (!partial) { /* an upstream stage died: do not pass on a complete-looking stream */
			io_out_abort(&out);
			mt_fatal(MT_EXIT_USAGE, "%s: %s at offset %llu%s", iname, mtev_strerror(r),
				 (unsigned long long)mtev_reader_offset(rd),
				 outp ? "; no output written (--partial writes what was read)" : "");
		}
		mt_warn("%s: %s at offset %llu; the output covers the records before it", iname,
			mtev_strerror(r), (unsigned long long)mtev_reader_offset(rd));
		rc = MT_EXIT_DEGRADED;
	}
	int e = stitch_finish(s);
	if (e) {
		io_out_abort(&out);
		if (e == -STITCH_ESPILL)
			mt_fatal(MT_EXIT_SYS, "%s in %s: %s", stitch_strerror(e), spill_dir(),
				 strerror(errno));
		mt_fatal(MT_EXIT_SYS, "%s", stitch_strerror(e));
	}
	if ((e = mtev_writer_finish(w)) < 0 || io_out_commit(&out) < 0) {
		io_out_abort(&out);
		mt_fatal(MT_EXIT_SYS, "writing %s: %s", outp ? outp : "stdout",
			 e < 0 ? mtev_strerror(e) : strerror(errno));
	}
	const struct stitch_stats *st = stitch_stats(s);
	if (st->unaligned)
		mt_warn("%llu of %llu join(s) found no common frame: the later segment keeps its own "
			"depths", (unsigned long long)st->unaligned, (unsigned long long)st->joins);
	if (stats)
		fprintf(stderr,
			"mt-stitch: segments=%llu joins=%llu aligned=%llu unaligned=%llu continued=%llu "
			"revealed=%llu gap_spans=%llu\n",
			(unsigned long long)st->segments, (unsigned long long)st->joins,
			(unsigned long long)st->aligned, (unsigned long long)st->unaligned,
			(unsigned long long)st->continued, (unsigned long long)st->revealed,
			(unsigned long long)st->gap_spans);
	stitch_free(s);
	mtev_writer_free(w);
	mtev_reader_free(rd);
	return rc;
}
