/* mt-stitch: joins each thread's segments across gaps. */
#include "driver.h"
#include "err.h"
#include "fnmap.h"
#include "imgfind.h"
#include "io.h"
#include "mtev.h"
#include "stitch.h"
#include "sysenv.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fputs("usage: mt-stitch [OPTIONS] [-o OUT] [[-i] IN]\n"
	      "Joins each thread's segments (mt-segment output) across the gaps between\n"
	      "them: the stack live at the end of a segment is aligned with the stack live\n"
	      "at the start of the next; frames that align (same function, same call site\n"
	      "when known) continue as one span (flag stitched); the gap becomes a span\n"
	      "named for its reason ([decode error: MSG], [lost trace], [untraced]) at the\n"
	      "depth where the stacks diverge.  No frame is invented.\n"
	      "Heuristics and where they fail: docs/stitch.md.\n"
	      "\n"
	      "  -i, --input FILE     read FILE (same as the IN operand; default: stdin)\n"
	      "  -o, --output FILE    write FILE, atomically (default: stdout)\n"
	      "      --images DIR     look for mapped files in DIR first (repeatable; also\n"
	      "                       spelled -s, --symfs, --buildid-dir; docs/images.md):\n"
	      "                       their code tells, at a join that finds no common\n"
	      "                       frame, whether the earlier root returned in the gap,\n"
	      "                       and whether a recursion's outermost frame may have\n"
	      "                       been called again inside a gap (another call site)\n"
	      "      --no-symbols     do not read the mapped files\n"
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

/* Exits on the stitcher's error @e. */
static void fail(struct io_out *out, const char *path, int e) __attribute__((noreturn));
static void fail(struct io_out *out, const char *path, int e)
{
	int en = errno;
	if (e == -STITCH_ESPILL)
		mt_fatal(MT_EXIT_SYS, "%s in %s: %s", stitch_strerror(e), mt_tmp_dir(), strerror(en));
	if (e == -STITCH_EEMIT) {
		errno = en; /* the writer failed */
		drv_write_failed(out, path, NULL);
	}
	mt_fatal(MT_EXIT_SYS, "%s", stitch_strerror(e));
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
		{"images", required_argument, 0, 's'},	      {"symfs", required_argument, 0, 's'},
		{"buildid-dir", required_argument, 0, 's'},   {"no-symbols", no_argument, 0, 'S'},
		{0, 0, 0, 0},
	};
	const char *in = NULL, *outp = NULL;
	int c, stats = 0, force = 0, partial = 0, err = 0, rc = MT_EXIT_OK, no_symbols = 0;
	size_t mem_limit = STITCH_MEM_DEFAULT;
	drv_init(argc, argv);
	while ((c = getopt_long(argc, argv, ":i:o:s:fh", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			if (img_dirs_add(optarg) < 0)
				mt_fatal(MT_EXIT_SYS, "out of memory");
			break;
		case 'S':
			no_symbols = 1;
			break;
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
			if (!(mem_limit = io_parse_size(optarg, 256)))
				drv_usage("--mem-limit: '%s' is not a size of at least 256 bytes", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			drv_getopt_error(c, argv);
		}
	}
	in = drv_input(argc, argv, in);
	const char *iname = drv_name(in);
	mtev_reader *rd = drv_reader(in, drv_open_in(in));
	const struct mtev_header *h = mtev_reader_header(rd);
	struct io_out out;
	drv_out_open(&out, outp, 1, force);
	mtev_writer *w = mtev_writer_alloc(out.fd, "mt-stitch", h->flags | MTEV_F_SPANS, &err);
	if (!w)
		drv_write_failed(&out, outp, err == -MTEV_EIO ? NULL : mtev_strerror(-err));
	stitcher *s = stitch_alloc(emit_cb, w);
	if (!s)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	stitch_set_mem_limit(s, mem_limit);
	struct fnmap *fns = NULL;
	if (!no_symbols && !(fns = fnmap_alloc()))
		mt_fatal(MT_EXIT_SYS, "out of memory");
	stitch_set_fnmap(s, fns);
	struct mtev_rec rec;
	int r, progress = io_progress_enabled();
	uint64_t n = 0;
	while ((r = mtev_read(rd, &rec)) > 0) {
		n++;
		if (progress && !(n & 0xfffff)) /* every 2^20 records on a terminal */
			mt_progress("%llu records", (unsigned long long)n);
		if (fns && ((rec.kind == MTEV_MAP &&
			     fnmap_add_map(fns, rec.map.pid, rec.map.start, rec.map.len, rec.map.pgoff,
					   rec.map.path.p, rec.map.path.len, rec.map.build_id,
					   rec.map.build_id_len)) ||
			    (rec.kind == MTEV_THREAD &&
			     fnmap_add_thread(fns, rec.thread.pid, rec.thread.tid))))
			mt_fatal(MT_EXIT_SYS, "out of memory");
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
		fail(&out, outp, e);
	}
	mt_progress_end();
	if (r < 0) {
		if (r == -MTEV_EIO || !partial) /* an upstream stage died: no complete-looking stream */
			drv_read_failed(in, rd, r,
					outp ? "; no output written (--partial writes what was read)" : "");
		mt_warn("%s: %s at offset %llu; the output covers the records before it", iname,
			mtev_strerror(r), (unsigned long long)mtev_reader_offset(rd));
		rc = MT_EXIT_DEGRADED;
	}
	int e = stitch_finish(s);
	if (e)
		fail(&out, outp, e);
	if ((e = mtev_writer_finish(w)) < 0)
		drv_write_failed(&out, outp, e == -MTEV_EIO ? NULL : mtev_strerror(-e));
	drv_out_commit(&out, outp);
	char line[512];
	if (stitch_unaligned_text(stitch_stats(s), line, sizeof line))
		mt_warn("%s", line);
	if (stats) {
		stitch_stats_text(stitch_stats(s), "", line, sizeof line);
		fprintf(stderr, "mt-stitch: %s\n", line);
	}
	stitch_free(s);
	fnmap_free(fns);
	mtev_writer_free(w);
	mtev_reader_free(rd);
	return rc;
}
