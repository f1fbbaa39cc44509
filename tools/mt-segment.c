/* mt-segment: branch records (or stack samples) -> segments, spans, waypoints. */
#include "driver.h"
#include "dwcov.h"
#include "err.h"
#include "fnmap.h"
#include "imgfind.h"
#include "io.h"
#include "mtev.h"
#include "segment.h"
#include "stitch.h"
#include "sysenv.h"

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
	      "      --no-symbols     use no ELF file: only call targets seen tell functions\n"
	      "      --no-call-targets  where no symbol covers a jump's target, never take\n"
	      "                       it for a tail call (default: a jump to an address an\n"
	      "                       earlier call targeted is a tail call)\n"
	      "      --no-waypoints   do not write waypoint records\n"
	      "      --all-waypoints  write one at every branch source and target (by\n"
	      "                       default those that cannot change the inline chain are\n"
	      "                       left out: in functions without DWARF, and outside every\n"
	      "                       inlined subroutine while the frame's last one was too;\n"
	      "                       mt-symbolize's spans are the same)\n"
	      "      --no-smear       keep raw times for events sharing a timestamp\n"
	      "      --no-sample-repair  stack samples: take each callchain as it is (by\n"
	      "                       default a frameless leaf's hidden caller is restored\n"
	      "                       from its call instruction and a chain cut short is\n"
	      "                       aligned with the previous sample's root frames,\n"
	      "                       marked stitched: docs/sampling.md)\n"
	      "      --stitch         also join the segments across gaps, in this process:\n"
	      "                       the output is what `mt-segment | mt-stitch` writes,\n"
	      "                       without encoding and decoding the stream in between\n"
	      "      --mem-limit SIZE  with --stitch: as mt-stitch --mem-limit\n"
	      "      --cache-dir DIR  keep what was read of each binary's DWARF (where its\n"
	      "                       inline subroutines are) in DIR/dwcov/BUILDID for the\n"
	      "                       next run (default $XDG_CACHE_HOME/mt, else\n"
	      "                       ~/.cache/mt: the directory mt-symbolize's cache uses)\n"
	      "      --no-cache       neither read nor write that cache\n"
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
	int no_symbols, no_waypoints, no_smear, no_call_targets, stats, force, partial, stitch;
	int all_waypoints, no_sample_repair;
	size_t mem_limit;
};

static int emit_cb(void *ctx, const struct mtev_rec *r)
{
	return mtev_write(ctx, r);
}

static int stitch_err; /* the stitcher's error behind a -SEG_EEMIT */

static int stitch_cb(void *ctx, const struct mtev_rec *r)
{
	int e = stitch_feed(ctx, r);
	if (e)
		stitch_err = e;
	return e;
}

static int stitch_wprun_cb(void *ctx, uint32_t tid, struct wprun *run)
{
	int e = stitch_feed_wprun(ctx, tid, run);
	if (e)
		stitch_err = e;
	return e;
}

/* Exits on an error of the segmenter (@e) or of the stitcher behind it. */
static void fail(struct io_out *out, const char *path, int e)
{
	int en = errno;
	if (e == -SEG_EEMIT && stitch_err == -STITCH_ESPILL)
		mt_fatal(MT_EXIT_SYS, "%s in %s: %s", stitch_strerror(stitch_err), mt_tmp_dir(),
			 strerror(en));
	if (e == -SEG_EEMIT && (!stitch_err || stitch_err == -STITCH_EEMIT)) {
		errno = en; /* the writer failed */
		drv_write_failed(out, path, NULL);
	}
	if (e == -SEG_EEMIT && stitch_err)
		mt_fatal(MT_EXIT_SYS, "%s", stitch_strerror(stitch_err));
	mt_fatal(MT_EXIT_SYS, "%s", seg_strerror(e));
}

/* The segmenter writing to @w, through a stitcher (*@sti) with --stitch. */
static segmenter *make_segmenter(const struct opts *o, struct fnmap *fns, mtev_writer *w,
				 stitcher **sti)
{
	struct seg_opts so = {fns, o->no_waypoints, o->no_smear, o->no_call_targets, NULL, 0, 0};
	so.all_waypoints = o->all_waypoints;
	so.no_sample_repair = o->no_sample_repair;
	if (o->stitch) /* waypoints as runs of words, not records */
		so.wprun = stitch_wprun_cb;
	if (o->stitch) {
		if (!(*sti = stitch_alloc(emit_cb, w)))
			mt_fatal(MT_EXIT_SYS, "out of memory");
		stitch_set_mem_limit(*sti, o->mem_limit);
		stitch_set_fnmap(*sti, fns); /* fed by the segmenter */
	}
	segmenter *s = *sti ? seg_alloc(&so, stitch_cb, *sti) : seg_alloc(&so, emit_cb, w);
	if (!s)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	return s;
}

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
static void feed_failed(segmenter *s, int e, uint64_t n, uint64_t off, struct io_out *out,
			const struct opts *o)
{
	if (e == -SEG_EKIND) {
		io_out_abort(out);
		mt_fatal(MT_EXIT_USAGE,
			 "%s: record %llu at offset %llu is a %s record: the input is "
			 "already segmented; mt-segment reads branch records or samples",
			 o->in ? o->in : "stdin", (unsigned long long)n, (unsigned long long)off,
			 mtev_kind_name(seg_error_detail(s)) ? mtev_kind_name(seg_error_detail(s)) : "?");
	}
	if (e == -SEG_EBRANCH)
		mt_fatal(MT_EXIT_USAGE, "%s: record %llu at offset %llu: %s with to=0: %s",
			 o->in ? o->in : "stdin", (unsigned long long)n, (unsigned long long)off,
			 mtev_branch_name(seg_error_detail(s)), seg_strerror(e));
	fail(out, o->out, e);
}

/* Feeds every record of @rd to @s; MT_EXIT_DEGRADED when --partial let a
 * damaged input end early, else MT_EXIT_OK (it exits on other errors).
 * Runs of branch records are read a batch at a time (mtev_read_branches). */
static int feed_all(segmenter *s, mtev_reader *rd, struct io_out *out, const struct opts *o)
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
		int e = seg_feed_n(s, recs, k, &at);
		if (__builtin_expect(e != 0, 0))
			feed_failed(s, e, n + at + 1, offs[at], out, o);
		if (progress && (n >> 20) != ((n + k) >> 20))
			fprintf(stderr, "\rmt-segment: %llu records", (unsigned long long)(n + k));
		n += k;
	}
	if (progress && n > 0xfffff)
		fputc('\n', stderr);
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

/* The warnings and --stats lines at the end of a run. */
static void report(segmenter *s, stitcher *sti, struct fnmap *fns, int stats)
{
	const struct seg_stats *st = seg_stats(s);
	if (fns && fnmap_missing(fns)) {
		mt_warn("%zu mapped file(s) not found, e.g. %s: jumps there are classified by "
			"call targets only (use --images)",
			fnmap_missing(fns), fnmap_missing_path(fns, 0));
	}
	if (st->anomalies)
		mt_warn("%llu branch(es) did not fit the call stack (see docs/segment.md)",
			(unsigned long long)st->anomalies);
	if (st->chains_unjoined)
		mt_warn("%llu of %llu call chain(s) could not be joined to the trace's stack: "
			"no outer frames added from them (docs/exactness.md)",
			(unsigned long long)st->chains_unjoined, (unsigned long long)st->chains);
	if (stats)
		fprintf(stderr,
			"mt-segment: branches=%llu samples=%llu segments=%llu spans=%llu "
			"waypoints=%llu waypoints_elided=%llu waypoints_elided_inline=%llu "
			"promoted=%llu tailcalls=%llu "
			"unwinds=%llu signals=%llu anomalies=%llu chains=%llu chains_joined=%llu "
			"chains_unjoined=%llu chains_sampled=%llu chain_frames=%llu peak_frames=%llu\n",
			(unsigned long long)st->branches, (unsigned long long)st->samples,
			(unsigned long long)st->segments, (unsigned long long)st->spans,
			(unsigned long long)st->waypoints, (unsigned long long)st->wp_elided,
			(unsigned long long)st->wp_elided_inline,
			(unsigned long long)st->promoted,
			(unsigned long long)st->tailcalls, (unsigned long long)st->unwinds,
			(unsigned long long)st->signals, (unsigned long long)st->anomalies,
			(unsigned long long)st->chains, (unsigned long long)st->chains_joined,
			(unsigned long long)st->chains_unjoined, (unsigned long long)st->chains_sampled,
			(unsigned long long)st->chain_frames,
			(unsigned long long)st->peak_frames);
	if (sti) {
		char line[512];
		if (stitch_unaligned_text(stitch_stats(sti), line, sizeof line))
			mt_warn("%s", line);
		if (stats) {
			stitch_stats_text(stitch_stats(sti), "stitch_", line, sizeof line);
			fprintf(stderr, "mt-segment: %s\n", line);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"input", required_argument, 0, 'i'},	{"output", required_argument, 0, 'o'},
		{"images", required_argument, 0, 's'},	{"symfs", required_argument, 0, 's'},
		{"buildid-dir", required_argument, 0, 's'},	{"no-symbols", no_argument, 0, 'S'},
		{"no-waypoints", no_argument, 0, 'W'},	{"no-smear", no_argument, 0, 'M'},
		{"stats", no_argument, 0, 'T'},		{"force", no_argument, 0, 'f'},
		{"no-call-targets", no_argument, 0, 'C'},
		{"all-waypoints", no_argument, 0, 'A'},
		{"no-sample-repair", no_argument, 0, 'R'},
		{"help", no_argument, 0, 'h'},		{"partial", no_argument, 0, 'P'},
		{"stitch", no_argument, 0, 'J'},	{"mem-limit", required_argument, 0, 'm'},
		{"cache-dir", required_argument, 0, 'D'}, {"no-cache", no_argument, 0, 'N'},
		{0, 0, 0, 0},
	};
	struct opts o = {0};
	o.mem_limit = STITCH_MEM_DEFAULT;
	const char *cache_dir = NULL;
	char defcache[4096];
	int no_cache = 0;
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
		case 'S':
			o.no_symbols = 1;
			break;
		case 'W':
			o.no_waypoints = 1;
			break;
		case 'A':
			o.all_waypoints = 1;
			break;
		case 'R':
			o.no_sample_repair = 1;
			break;
		case 'M':
			o.no_smear = 1;
			break;
		case 'T':
			o.stats = 1;
			break;
		case 'C':
			o.no_call_targets = 1;
			break;
		case 'f':
			o.force = 1;
			break;
		case 'P':
			o.partial = 1;
			break;
		case 'J':
			o.stitch = 1;
			break;
		case 'D':
			cache_dir = optarg;
			break;
		case 'N':
			no_cache = 1;
			break;
		case 'm':
			if (!(o.mem_limit = io_parse_size(optarg, 256)))
				drv_usage("--mem-limit: '%s' is not a size of at least 256 bytes", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			drv_getopt_error(c, argv);
		}
	}
	o.in = drv_input(argc, argv, o.in);
	if (!no_cache)
		dwcov_set_cache(cache_dir ? cache_dir
				: mt_cache_dir(defcache, sizeof defcache) ? NULL : defcache);

	mtev_reader *rd = open_input(o.in);
	const struct mtev_header *h = mtev_reader_header(rd);

	struct io_out out;
	drv_out_open(&out, o.out, 1, o.force);
	uint32_t flags = MTEV_F_SPANS | (h->flags & (MTEV_F_SORTED | MTEV_F_SAMPLING | MTEV_F_SYMBOLS));
	mtev_writer *w = mtev_writer_alloc(out.fd, o.stitch ? "mt-segment --stitch" : "mt-segment",
					   flags, &err);
	if (!w)
		drv_write_failed(&out, o.out, err == -MTEV_EIO ? NULL : mtev_strerror(-err));
	struct fnmap *fns = NULL;
	if (!o.no_symbols && !(fns = fnmap_alloc()))
		mt_fatal(MT_EXIT_SYS, "out of memory");
	stitcher *sti = NULL;
	segmenter *s = make_segmenter(&o, fns, w, &sti);

	if (feed_all(s, rd, &out, &o) == MT_EXIT_DEGRADED)
		rc = MT_EXIT_DEGRADED;
	int e = seg_finish(s);
	if (e)
		fail(&out, o.out, e);
	if (sti && (e = stitch_finish(sti))) {
		stitch_err = e;
		fail(&out, o.out, -SEG_EEMIT);
	}
	if ((e = mtev_writer_finish(w)) < 0)
		drv_write_failed(&out, o.out, e == -MTEV_EIO ? NULL : mtev_strerror(-e));
	drv_out_commit(&out, o.out);
	report(s, sti, fns, o.stats);
	stitch_free(sti);
	seg_free(s);
	fnmap_free(fns);
	mtev_writer_free(w);
	mtev_reader_free(rd);
	return rc;
}
