/* segdrv: mt-segment's driver, shared with mt-decode --segment/--stitch. */
#include "segdrv.h"

#include "driver.h"
#include "dwcov.h"
#include "err.h"
#include "fnmap.h"
#include "sysenv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum {
	O_NOSYM = SEGDRV_O_FIRST, O_NOWP, O_NOSMEAR, O_NOCT, O_ALLWP, O_NOREPAIR,
	O_STITCH, O_MEM, O_CACHEDIR, O_NOCACHE
};

const struct option segdrv_longopts[] = {
	{"no-symbols", no_argument, 0, O_NOSYM},
	{"no-waypoints", no_argument, 0, O_NOWP},
	{"no-smear", no_argument, 0, O_NOSMEAR},
	{"no-call-targets", no_argument, 0, O_NOCT},
	{"all-waypoints", no_argument, 0, O_ALLWP},
	{"no-sample-repair", no_argument, 0, O_NOREPAIR},
	{"stitch", no_argument, 0, O_STITCH},
	{"mem-limit", required_argument, 0, O_MEM},
	{"cache-dir", required_argument, 0, O_CACHEDIR},
	{"no-cache", no_argument, 0, O_NOCACHE},
	{0, 0, 0, 0},
};

size_t segdrv_nlongopts(void)
{
	return sizeof segdrv_longopts / sizeof segdrv_longopts[0] - 1;
}

const char segdrv_help[] =
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
	"      --no-cache       neither read nor write that cache\n";

void segdrv_opts_init(struct segdrv_opts *o)
{
	memset(o, 0, sizeof *o);
	o->mem_limit = STITCH_MEM_DEFAULT;
}

int segdrv_opt(struct segdrv_opts *o, int c, const char *arg)
{
	switch (c) {
	case O_NOSYM:
		o->no_symbols = 1;
		break;
	case O_NOWP:
		o->no_waypoints = 1;
		break;
	case O_NOSMEAR:
		o->no_smear = 1;
		break;
	case O_NOCT:
		o->no_call_targets = 1;
		break;
	case O_ALLWP:
		o->all_waypoints = 1;
		break;
	case O_NOREPAIR:
		o->no_sample_repair = 1;
		break;
	case O_STITCH:
		o->stitch = 1;
		break;
	case O_MEM:
		if (!(o->mem_limit = io_parse_size(arg, 256)))
			drv_usage("--mem-limit: '%s' is not a size of at least 256 bytes", arg);
		break;
	case O_CACHEDIR:
		o->cache_dir = arg;
		break;
	case O_NOCACHE:
		o->no_cache = 1;
		break;
	default:
		return 0;
	}
	if (c != O_STITCH)
		o->any = 1;
	return 1;
}

void segdrv_cache(const struct segdrv_opts *o)
{
	static char defcache[4096];
	if (!o->no_cache)
		dwcov_set_cache(o->cache_dir ? o->cache_dir
				: mt_cache_dir(defcache, sizeof defcache) ? NULL : defcache);
}

static int emit_cb(void *ctx, const struct mtev_rec *r)
{
	return mtev_write(ctx, r);
}

static int stitch_cb(void *ctx, const struct mtev_rec *r)
{
	struct segdrv *d = ctx;
	int e = stitch_feed(d->sti, r);
	if (e)
		d->stitch_err = e;
	return e;
}

static int stitch_wprun_cb(void *ctx, uint32_t tid, struct wprun *run)
{
	struct segdrv *d = ctx;
	int e = stitch_feed_wprun(d->sti, tid, run);
	if (e)
		d->stitch_err = e;
	return e;
}

void segdrv_open(struct segdrv *d, const struct segdrv_opts *o, mtev_writer *w)
{
	memset(d, 0, sizeof *d);
	if (!o->no_symbols && !(d->fns = fnmap_alloc()))
		mt_fatal(MT_EXIT_SYS, "out of memory");
	struct seg_opts so = {d->fns, o->no_waypoints, o->no_smear, o->no_call_targets, NULL, 0, 0};
	so.all_waypoints = o->all_waypoints;
	so.no_sample_repair = o->no_sample_repair;
	if (o->stitch) { /* waypoints as runs of words, not records */
		so.wprun = stitch_wprun_cb;
		if (!(d->sti = stitch_alloc(emit_cb, w)))
			mt_fatal(MT_EXIT_SYS, "out of memory");
		stitch_set_mem_limit(d->sti, o->mem_limit);
		stitch_set_fnmap(d->sti, d->fns); /* fed by the segmenter */
	}
	d->s = d->sti ? seg_alloc(&so, stitch_cb, d) : seg_alloc(&so, emit_cb, w);
	if (!d->s)
		mt_fatal(MT_EXIT_SYS, "out of memory");
}

void segdrv_fail(struct segdrv *d, struct io_out *out, const char *path, int e)
{
	int en = errno;
	if (e == -SEG_EEMIT && d->stitch_err == -STITCH_ESPILL)
		mt_fatal(MT_EXIT_SYS, "%s in %s: %s", stitch_strerror(d->stitch_err), mt_tmp_dir(),
			 strerror(en));
	if (e == -SEG_EEMIT && (!d->stitch_err || d->stitch_err == -STITCH_EEMIT)) {
		errno = en; /* the writer failed */
		drv_write_failed(out, path, NULL);
	}
	if (e == -SEG_EEMIT && d->stitch_err)
		mt_fatal(MT_EXIT_SYS, "%s", stitch_strerror(d->stitch_err));
	mt_fatal(MT_EXIT_SYS, "%s", seg_strerror(e));
}

void segdrv_finish(struct segdrv *d, struct io_out *out, const char *path)
{
	int e = seg_finish(d->s);
	if (e)
		segdrv_fail(d, out, path, e);
	if (d->sti && (e = stitch_finish(d->sti))) {
		d->stitch_err = e;
		segdrv_fail(d, out, path, -SEG_EEMIT);
	}
}

void segdrv_report(struct segdrv *d, int stats, const char *prefix)
{
	const struct seg_stats *st = seg_stats(d->s);
	if (d->fns && fnmap_missing(d->fns)) {
		mt_warn("%zu mapped file(s) not found, e.g. %s: jumps there are classified by "
			"call targets only (use --images)",
			fnmap_missing(d->fns), fnmap_missing_path(d->fns, 0));
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
			"%s: branches=%llu samples=%llu segments=%llu spans=%llu "
			"waypoints=%llu waypoints_elided=%llu waypoints_elided_inline=%llu "
			"promoted=%llu tailcalls=%llu "
			"unwinds=%llu signals=%llu anomalies=%llu chains=%llu chains_joined=%llu "
			"chains_unjoined=%llu chains_sampled=%llu chain_frames=%llu peak_frames=%llu\n",
			prefix, (unsigned long long)st->branches, (unsigned long long)st->samples,
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
	if (d->sti) {
		char line[512];
		if (stitch_unaligned_text(stitch_stats(d->sti), line, sizeof line))
			mt_warn("%s", line);
		if (stats) {
			stitch_stats_text(stitch_stats(d->sti), "stitch_", line, sizeof line);
			fprintf(stderr, "%s: %s\n", prefix, line);
		}
	}
}

void segdrv_free(struct segdrv *d)
{
	stitch_free(d->sti);
	seg_free(d->s);
	fnmap_free(d->fns);
	memset(d, 0, sizeof *d);
}
