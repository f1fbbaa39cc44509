/* mt-segment: branch records (or stack samples) -> segments, spans, waypoints. */
#include "driver.h"
#include "err.h"
#include "imgfind.h"
#include "io.h"
#include "mtev.h"
#include "segdrv.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs("usage: mt-segment [OPTIONS] [-o OUT] [[-i] IN]\n"
	      "Rebuilds each thread's call stacks from MTEV branch records (mt-decode or\n"
	      "mt-ptsim output) or stack samples, and writes segments, spans (one per\n"
	      "function activation) and waypoints.  A new segment begins at every gap.\n"
	      "Other records (clock, process, thread, map, trigger, string, gap, unknown)\n"
	      "pass through.\n"
	      "\n"
	      "  -i, --input FILE     read FILE (same as the IN operand; default: stdin)\n"
	      "  -o, --output FILE    write FILE, atomically (default: stdout)\n"
	      "      --images DIR     look for mapped files in DIR first (repeatable; a build-\n"
	      "                       id cache, a root file system or a flat directory; also\n"
	      "                       spelled -s, --symfs, --buildid-dir), then at their PATH\n"
	      "                       (docs/images.md); ELF symbols tell intra-function\n"
	      "                       jumps from tail calls\n"
	      ,
	      f);
	fputs(segdrv_help, f);
	fputs(
	      "      --stats          print counters on stderr at the end\n"
	      "      --partial        on a truncated or corrupt input, still write what was\n"
	      "                       read (exit 1); by default nothing is (exit 2)\n"
	      "  -f, --force          write binary output to a terminal\n"
	      "  -h, --help           this help\n"
	      "\n"
	      "Rules: docs/segment.md.\n"
	      "Limits (docs/limits.md): records at most 16 MiB; any depth and thread count,\n"
	      "memory about 3 KB per thread plus what its open frames hold.  A sysret, iret\n"
	      "or trace-start without its target (to=0) is refused (exit 2).\n"
	      "\n"
	      "Exit status: 0 ok; 1 --partial and the input was truncated or corrupt after\n"
	      "its header (output covers the records before the damage); 2 usage, not an\n"
	      "MTEV stream, a truncated or corrupt input (a killed upstream stage: no output\n"
	      "file is left, stdout gets no END record), or records that do not belong here\n"
	      "(spans, segments, waypoints: already segmented); 111 system error.\n",
	      f);
}

struct opts {
	const char *in, *out;
	int stats, force, partial;
	struct segdrv_opts so;
};

/* The input's reader; exits when it already carries spans. */
static mtev_reader *open_input(const char *in)
{
	mtev_reader *rd = drv_reader(in, drv_open_in(in));
	const struct mtev_header *h = mtev_reader_header(rd);
	if (h->flags & MTEV_F_SPANS)
		mt_fatal(MT_EXIT_USAGE,
			 "%s: the stream already carries spans (producer %s); mt-segment reads "
			 "branch records or samples (mt-decode or mt-ptsim truth.mt)",
			 in ? in : "stdin", h->producer);
	return rd;
}

/* seg_feed's error @e on record @n (at offset @off): exits. */
static void feed_failed(struct segdrv *sd, int e, uint64_t n, uint64_t off, struct io_out *out,
			const struct opts *o)
{
	if (e == -SEG_EKIND) {
		io_out_abort(out);
		mt_fatal(MT_EXIT_USAGE,
			 "%s: record %llu at offset %llu is a %s record: the input is "
			 "already segmented; mt-segment reads branch records or samples",
			 o->in ? o->in : "stdin", (unsigned long long)n, (unsigned long long)off,
			 mtev_kind_name(seg_error_detail(sd->s)) ? mtev_kind_name(seg_error_detail(sd->s)) : "?");
	}
	if (e == -SEG_EBRANCH)
		mt_fatal(MT_EXIT_USAGE, "%s: record %llu at offset %llu: %s with to=0: %s",
			 o->in ? o->in : "stdin", (unsigned long long)n, (unsigned long long)off,
			 mtev_branch_name(seg_error_detail(sd->s)), seg_strerror(e));
	segdrv_fail(sd, out, o->out, e);
}

/* Feeds every record of @rd to @s; MT_EXIT_DEGRADED when --partial let a
 * damaged input end early, else MT_EXIT_OK (it exits on other errors).
 * Runs of branch records are read a batch at a time (mtev_read_branches). */
static int feed_all(struct segdrv *sd, mtev_reader *rd, struct io_out *out, const struct opts *o)
{
	enum { BATCH = 256 };
	struct mtev_rec recs[BATCH];
	uint64_t offs[BATCH];
	int r = 1, progress = io_progress_enabled();
	uint64_t n = 0;
	for (;;) {
		size_t at, k = mtev_read_branches(rd, recs, offs, BATCH);
		if (!k) { /* anything else: one record */
			if ((r = mtev_read(rd, &recs[0])) <= 0)
				break;
			offs[0] = mtev_reader_offset(rd);
			k = 1;
		}
		int e = seg_feed_n(sd->s, recs, k, &at);
		if (__builtin_expect(e != 0, 0))
			feed_failed(sd, e, n + at + 1, offs[at], out, o);
		if (progress && (n >> 20) != ((n + k) >> 20))
			mt_progress("%llu records", (unsigned long long)(n + k));
		n += k;
	}
	mt_progress_end();
	if (r < 0) {
		if (r == -MTEV_EIO || !o->partial) /* an upstream stage died: no complete-looking stream */
			drv_read_failed(o->in, rd, r,
					o->out ? "; no output written (--partial writes what was read)" : "");
		mt_warn("%s: %s at offset %llu; the output covers the records before it",
			o->in ? o->in : "stdin", mtev_strerror(r),
			(unsigned long long)mtev_reader_offset(rd));
		return MT_EXIT_DEGRADED;
	}
	return MT_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{"input", required_argument, 0, 'i'},	{"output", required_argument, 0, 'o'},
		{"images", required_argument, 0, 's'},	{"symfs", required_argument, 0, 's'},
		{"buildid-dir", required_argument, 0, 's'},
		{"stats", no_argument, 0, 'T'},		{"force", no_argument, 0, 'f'},
		{"help", no_argument, 0, 'h'},		{"partial", no_argument, 0, 'P'},
	};
	enum { NOWN = sizeof own / sizeof own[0] };
	struct option lo[NOWN + 16];
	size_t nseg = segdrv_nlongopts();
	memcpy(lo, own, sizeof own);
	memcpy(lo + NOWN, segdrv_longopts, (nseg + 1) * sizeof *lo);
	struct opts o = {0};
	segdrv_opts_init(&o.so);
	int c, rc = MT_EXIT_OK, err = 0;
	drv_init(argc, argv);
	while ((c = getopt_long(argc, argv, ":i:o:s:fh", lo, NULL)) != -1) {
		switch (c) {
		case 'i':
			o.in = optarg;
			break;
		case 'o':
			o.out = optarg;
			break;
		case 's':
			if (img_dirs_add(optarg) < 0)
				mt_fatal(MT_EXIT_SYS, "out of memory");
			break;
		case 'T':
			o.stats = 1;
			break;
		case 'f':
			o.force = 1;
			break;
		case 'P':
			o.partial = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			if (!segdrv_opt(&o.so, c, optarg))
				drv_getopt_error(c, argv);
		}
	}
	o.in = drv_input(argc, argv, o.in);
	segdrv_cache(&o.so);

	mtev_reader *rd = open_input(o.in);
	const struct mtev_header *h = mtev_reader_header(rd);

	struct io_out out;
	drv_out_open(&out, o.out, 1, o.force);
	uint32_t flags = MTEV_F_SPANS | (h->flags & (MTEV_F_SORTED | MTEV_F_SAMPLING | MTEV_F_SYMBOLS));
	mtev_writer *w = mtev_writer_alloc(out.fd, o.so.stitch ? "mt-segment --stitch" : "mt-segment",
					   flags, &err);
	if (!w)
		drv_write_failed(&out, o.out, err == -MTEV_EIO ? NULL : mtev_strerror(-err));
	struct segdrv sd;
	segdrv_open(&sd, &o.so, w);

	if (feed_all(&sd, rd, &out, &o) == MT_EXIT_DEGRADED)
		rc = MT_EXIT_DEGRADED;
	segdrv_finish(&sd, &out, o.out);
	int e;
	if ((e = mtev_writer_finish(w)) < 0)
		drv_write_failed(&out, o.out, e == -MTEV_EIO ? NULL : mtev_strerror(-e));
	drv_out_commit(&out, o.out);
	segdrv_report(&sd, o.stats, "mt-segment");
	segdrv_free(&sd);
	mtev_writer_free(w);
	mtev_reader_free(rd);
	return rc;
}
