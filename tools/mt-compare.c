/* mt-compare TRUTH ACTUAL: span fidelity against mt-ptsim's truth. */
#include "driver.h"
#include "err.h"
#include "io.h"
#include "mtev.h"
#include "spancmp.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs("usage: mt-compare [OPTIONS] TRUTH ACTUAL\n"
	      "Compares the spans of ACTUAL (mt-segment or mt-stitch output) with TRUTH\n"
	      "(mt-ptsim's truth-spans.mt) and prints precision, recall, frame-time\n"
	      "coverage and the wrong spans.  The last stdout line is one machine-readable\n"
	      "summary: 'mt-compare: precision=P recall=R coverage=C exact_coverage=E\n"
	      "time_precision=T wrong=N matched=N truth=N judged=N'.\n"
	      "\n"
	      "Window: per thread, from ACTUAL's segment records (else its spans, or\n"
	      "--branches); truth spans are clipped to it.  Outer frames that no trace of\n"
	      "the window can see (live throughout it with a child live throughout it)\n"
	      "are dropped and truth depths renumbered, unless --absolute-depth.\n"
	      "Times match when within --tolerance, or when the actual time lies between\n"
	      "the truth time and the truth's next distinct span boundary on that thread\n"
	      "(the truth's own time resolution; off with --strict).\n"
	      "\n"
	      "  -t, --tolerance NS      absolute time tolerance (default 0)\n"
	      "      --strict            times must match within --tolerance only\n"
	      "      --absolute-depth    compare depths as they are\n"
	      "  -b, --branches FILE     take each thread's window from a branch stream\n"
	      "      --min-precision X   exit 1 if precision < X (0..1)\n"
	      "      --min-recall X      exit 1 if recall < X\n"
	      "      --min-coverage X    exit 1 if frame-time coverage < X\n"
	      "      --max-wrong N       exit 1 if more than N wrong spans\n"
	      "  -l, --list N            list at most N wrong spans (default 20)\n"
	      "  -v, --verbose           also list the truth spans not matched (up to N)\n"
	      "  -h, --help              this help\n"
	      "\n"
	      "A span is wrong when no truth span of the same thread, depth and function\n"
	      "intersects it.  Spans flagged error (gap markers) are not judged; synthetic\n"
	      "spans ([syscall] ...) only when the truth has spans of that name.\n"
	      "Exit status: 0 ok (all thresholds met); 1 a threshold was not met; 2 usage\n"
	      "or unusable input (not MTEV, truncated, no spans); 111 system error.\n",
	      f);
}

struct opts {
	struct spancmp_opts c;
	const char *branches;
	double min_prec, min_rec, min_cov;
	long max_wrong;
	long list;
	int verbose;
};

static mtev_reader *open_stream(const char *path, int *fd)
{
	*fd = drv_open_in(path);
	return drv_reader(path, *fd);
}

static void read_failed(const char *path, mtev_reader *r, int e)
{
	drv_read_failed(path, r, e, NULL);
}

static void load_spans(const char *path, struct spanset *s, int segments, int is_truth)
{
	int fd;
	mtev_reader *r = open_stream(path, &fd);
	struct mtev_rec rec;
	int e;
	size_t nspans = 0;
	while ((e = mtev_read(r, &rec)) > 0) {
		if (rec.kind == MTEV_SPAN) {
			if (spanset_add(s, &rec))
				mt_fatal(MT_EXIT_SYS, "out of memory");
			nspans++;
		} else if (segments && rec.kind == MTEV_SEGMENT) {
			if (spanset_add_window(s, rec.segment.tid, rec.segment.begin, rec.segment.end))
				mt_fatal(MT_EXIT_SYS, "out of memory");
		}
	}
	if (e < 0)
		read_failed(path, r, e);
	if (!nspans && is_truth)
		drv_input_error(MT_EXIT_USAGE, path,
				"no span records (expected mt-ptsim's truth-spans.mt)");
	if (!nspans && !s->nwin)
		drv_input_error(MT_EXIT_USAGE, path, "no span or segment records (expected "
				"mt-segment or mt-stitch output)");
	mtev_reader_free(r);
	close(fd);
}

static void load_windows(const char *path, struct spanset *s)
{
	int fd;
	mtev_reader *r = open_stream(path, &fd);
	struct mtev_rec rec;
	int e;
	while ((e = mtev_read(r, &rec)) > 0)
		if (rec.kind == MTEV_BRANCH &&
		    spanset_add_window(s, rec.br.tid, rec.br.time, rec.br.time))
			mt_fatal(MT_EXIT_SYS, "out of memory");
	if (e < 0)
		read_failed(path, r, e);
	mtev_reader_free(r);
	close(fd);
}

static void print_span(const char *what, const struct sc_span *s)
{
	printf("%s tid=%" PRIu32 " depth=%" PRIu32 " func=0x%" PRIx64 "%s%s begin=%" PRIu64
	       " end=%" PRIu64 " flags=0x%" PRIx32 "\n",
	       what, s->tid, s->depth, s->func, s->name ? " name=" : "", spancmp_name(s->name),
	       s->begin, s->end, s->flags);
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 1.0;
}

static double parse_frac(const char *s, const char *opt)
{
	char *e;
	double v = strtod(s, &e);
	if (*e || v < 0 || v > 1)
		drv_usage("%s: expected a number in [0, 1], got '%s'", opt, s);
	return v;
}

static long parse_long(const char *s, const char *opt)
{
	char *e;
	long v = strtol(s, &e, 0);
	if (*e || v < 0 || !*s)
		drv_usage("%s: expected a non-negative integer, got '%s'", opt, s);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"tolerance", required_argument, 0, 't'},
		{"strict", no_argument, 0, 'S'},
		{"absolute-depth", no_argument, 0, 'A'},
		{"branches", required_argument, 0, 'b'},
		{"min-precision", required_argument, 0, 'P'},
		{"min-recall", required_argument, 0, 'R'},
		{"min-coverage", required_argument, 0, 'C'},
		{"max-wrong", required_argument, 0, 'W'},
		{"list", required_argument, 0, 'l'},
		{"verbose", no_argument, 0, 'v'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	struct opts o = {.max_wrong = -1, .list = 20};
	int c;
	drv_init(argc, argv);
	while ((c = getopt_long(argc, argv, ":t:b:l:vh", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o.c.tol = (uint64_t)parse_long(optarg, "--tolerance");
			break;
		case 'S':
			o.c.strict = 1;
			break;
		case 'A':
			o.c.absolute_depth = 1;
			break;
		case 'b':
			o.branches = optarg;
			break;
		case 'P':
			o.min_prec = parse_frac(optarg, "--min-precision");
			break;
		case 'R':
			o.min_rec = parse_frac(optarg, "--min-recall");
			break;
		case 'C':
			o.min_cov = parse_frac(optarg, "--min-coverage");
			break;
		case 'W':
			o.max_wrong = parse_long(optarg, "--max-wrong");
			break;
		case 'l':
			o.list = parse_long(optarg, "--list");
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			drv_getopt_error(c, argv);
		}
	}
	if (argc - optind != 2)
		drv_usage("expected TRUTH and ACTUAL");
	struct spanset truth, actual;
	spanset_init(&truth);
	spanset_init(&actual);
	load_spans(argv[optind], &truth, 0, 1);
	if (o.branches)
		load_windows(o.branches, &actual);
	load_spans(argv[optind + 1], &actual, !o.branches, 0);

	struct spancmp_res r;
	if (spancmp_run(&truth, &actual, &o.c, &r))
		mt_fatal(MT_EXIT_SYS, "out of memory");
	double prec = ratio((double)r.matched, (double)r.judged);
	double rec = ratio((double)r.truth_matched, (double)r.truth);
	double cov = ratio(r.covered_time, r.truth_time);
	double ecov = ratio(r.exact_time, r.truth_time);
	double tprec = ratio(r.true_actual_time, r.actual_time);
	printf("truth spans: %zu (clipped to the traced windows; outer frames hidden: %u)\n", r.truth,
	       r.max_hidden);
	printf("actual spans: %zu (judged %zu, not judged %zu)\n", r.actual, r.judged, r.unjudged);
	printf("exact matches: %zu  precision %.6f  recall %.6f\n", r.matched, prec, rec);
	printf("frame-time: coverage %.6f  exact coverage %.6f  time precision %.6f\n", cov, ecov,
	       tprec);
	printf("wrong spans: %zu\n", r.wrong);
	for (size_t i = 0; i < r.nwrong_list && (long)i < o.list; i++)
		print_span("wrong:", &r.wrong_spans[i]);
	if (o.verbose) {
		for (size_t i = 0; i < r.nmissed_list && (long)i < o.list; i++)
			print_span("missed:", &r.missed_spans[i]);
	}
	printf("mt-compare: precision=%.6f recall=%.6f coverage=%.6f exact_coverage=%.6f "
	       "time_precision=%.6f wrong=%zu matched=%zu truth=%zu judged=%zu\n",
	       prec, rec, cov, ecov, tprec, r.wrong, r.matched, r.truth, r.judged);
	int rc = 0;
	if (prec < o.min_prec || rec < o.min_rec || cov < o.min_cov ||
	    (o.max_wrong >= 0 && (long)r.wrong > o.max_wrong))
		rc = 1;
	spancmp_res_fini(&r);
	spanset_fini(&truth);
	spanset_fini(&actual);
	return rc;
}
