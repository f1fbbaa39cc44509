/* mt-compare TRUTH ACTUAL: span fidelity against mt-ptsim's truth. */
#include "driver.h"
#include "err.h"
#include "fnmap.h"
#include "imgfind.h"
#include "io.h"
#include "mtev.h"
#include "spancmp.h"
#include "vec.h"

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
	      "       mt-compare --kept-branches TRUTH-BRANCHES DECODED\n"
	      "       mt-compare --inline TRUTH-INLINE SYMBOLIZED\n"
	      "Compares the spans of ACTUAL (mt-segment or mt-stitch output) with TRUTH\n"
	      "(mt-ptsim's truth-spans.mt) and prints precision, recall, frame-time\n"
	      "coverage and the wrong spans.  The last stdout line is one machine-readable\n"
	      "summary: 'mt-compare: precision=P recall=R coverage=C exact_coverage=E\n"
	      "time_precision=T gap=G joins=N wrong_joins=N wrong=N matched=N truth=N\n"
	      "judged=N unwound=N' (gap: the share of the truth's frame-time inside gaps\n"
	      "in frames that begin or end there, all in a gap no segment follows: what no trace\n"
	      "shows, coverage is at most 1 - gap; joins: judged spans live across a gap;\n"
	      "wrong_joins: of the wrong ones, those joined across a gap over two\n"
	      "activations, below).\n"
	      "\n"
	      "Window (per thread; truth spans are clipped to it): by default the honest\n"
	      "one, what the recording holds by the truth: the extent of the truth's\n"
	      "branch stream (--truth-branches, default DIR/truth.mt beside a TRUTH named\n"
	      "DIR/truth-spans.mt; without one, the truth spans' own extent).  Trace the\n"
	      "actual result lost at the start or end of a window counts as missed.\n"
	      "--actual-window takes it from ACTUAL's segment records (else its spans):\n"
	      "lost trace at a window's edges is then not seen.  Outer frames that no\n"
	      "recorded trace can see (in every stretch ACTUAL recorded, from its first\n"
	      "span to its last cut at its gap markers, live throughout it with a child\n"
	      "live throughout it) are dropped and truth depths renumbered, and so are ACTUAL's\n"
	      "spans flagged callchain (those frames, from the trigger's call chain), unless\n"
	      "--absolute-depth (the whole stack, root included: what a trace with the\n"
	      "trigger's call chain shows, docs/exactness.md).  Frames that executed\n"
	      "nothing in the window although they end in it are dropped too (depths kept):\n"
	      "suspended in a callee when the window began and removed with it by an\n"
	      "unwinding (an exception, a longjmp) without being returned to, so no branch\n"
	      "names them ('unwound=N'); --count-unwound keeps them in the truth.\n"
	      "The frame running a window's first instruction, when that code is another\n"
	      "function's (a body entered by a jump into it: mempcpy into memcpy's), takes\n"
	      "the name an ACTUAL span that begins with the window gives it when that is\n"
	      "the function of that code (the symbols of --images; counted as 'named by\n"
	      "the code they run'): no trace of the window shows the entry it was called at.\n"
	      "Times match when within --tolerance, or when the actual time lies between\n"
	      "the truth time and the truth's next distinct span boundary on that thread\n"
	      "(the truth's own time resolution; off with --strict), except at a window's\n"
	      "edge: a truth span clipped there matches only a span that begins (ends)\n"
	      "there, so trace lost at the edge is never within resolution.\n"
	      "\n"
	      "  -t, --tolerance NS      absolute time tolerance (default 0)\n"
	      "      --strict            times must match within --tolerance only\n"
	      "      --absolute-depth    compare depths as they are\n"
	      "      --truth-branches FILE  the truth's branch stream (mt-ptsim's truth.mt)\n"
	      "      --actual-window     the window from ACTUAL (hides lost trace)\n"
	      "      --images DIR        look for the truth's mapped files in DIR first\n"
	      "                          (repeatable; default DIR/images beside a TRUTH\n"
	      "                          named DIR/truth-spans.mt): their symbols name\n"
	      "                          the code a window begins in (above)\n"
	      "      --count-unwound     keep the frames an unwinding removed unseen\n"
	      "  -b, --branches FILE     take each thread's window from this branch stream\n"
	      "      --min-precision X   exit 1 if precision < X (0..1)\n"
	      "      --min-recall X      exit 1 if recall < X\n"
	      "      --min-coverage X    exit 1 if frame-time coverage < X\n"
	      "      --max-wrong N       exit 1 if more than N wrong spans\n"
	      "      --kept-branches     compare two branch streams instead (mt-ptsim's\n"
	      "                          truth.mt, mt-decode's output): every decoded\n"
	      "                          branch (trace-start/-end aside) must be a true\n"
	      "                          one, same thread, time, type, from and to; prints\n"
	      "                          'mt-compare: kept=N wrong=N truth=N' (kept: the\n"
	      "                          decoded branches; wrong: those the truth has not;\n"
	      "                          --max-wrong applies to them)\n"
	      "      --inline            judge inline frames instead: TRUTH-INLINE is\n"
	      "                          mt-ptsim's truth-inline.mt, SYMBOLIZED mt-symbolize's\n"
	      "                          output; each inline frame of the truth must be an\n"
	      "                          inline span of the same thread, name (Rust\n"
	      "                          legacy paths compared demangled: escapes decoded,\n"
	      "                          no ::h hash) and begin\n"
	      "                          (within the truth's time resolution: before the\n"
	      "                          thread's next branch time in DIR/truth.mt beside\n"
	      "                          DIR/truth-inline.mt or --truth-branches; exactly\n"
	      "                          with --strict) (frames live at the window's start,\n"
	      "                          flagged inferred-start, are not checked); prints\n"
	      "                          'mt-compare: inline_checked=N inline_matched=N\n"
	      "                          inline_missed=N inline_extra=N'; --max-wrong\n"
	      "                          applies to the missed\n"
	      "  -l, --list N            list at most N wrong spans (default 20)\n"
	      "  -v, --verbose           also list the truth spans not matched (up to N)\n"
	      "  -h, --help              this help\n"
	      "\n"
	      "A span is wrong when no truth span of the same thread, depth and function\n"
	      "intersects it.  A span flagged min-depth (its depth a lower bound: unseen\n"
	      "frames may lie below it) takes the depth, at or below its own, of the\n"
	      "truth span of its function it matches in time, else overlaps most.\n"
	      "Gaps (ACTUAL's gap records but untraced ones, each to the next segment's\n"
	      "begin, else the window's end) are time no trace shows: time inside one\n"
	      "counts as covered only for a truth span live across the whole gap that\n"
	      "an actual span of its thread, depth and function also covers across it.\n"
	      "A span joined across a gap (live from before it to after it) that matches\n"
	      "no truth span is wrong when no truth span of its thread, depth and\n"
	      "function is live across that gap: its two sides were different calls\n"
	      "(counted in wrong_joins too); it covers nothing.\n"
	      "Spans flagged error (gap markers) are not judged; synthetic\n"
	      "spans ([syscall] ...) only when the truth has spans of that name.\n"
	      "Exit status: 0 ok (all thresholds met); 1 a threshold was not met; 2 usage\n"
	      "or unusable input (not MTEV, truncated, no spans); 111 system error.\n",
	      f);
}

struct opts {
	struct spancmp_opts c;
	const char *branches, *truth_branches;
	int actual_window;
	int images; /* --images given */
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

/* The truth's processes and maps: the function of a window's first
 * instruction (spancmp.c, name_by_code) */
static struct fnmap *truth_fns;

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
		} else if (rec.kind == MTEV_SEGMENT) {
			if ((segments && spanset_add_window(s, rec.segment.tid, rec.segment.begin,
							     rec.segment.end)) ||
			    (!is_truth && spanset_add_gap(s, rec.segment.tid, 1, rec.segment.begin,
							  rec.segment.end)))
				mt_fatal(MT_EXIT_SYS, "out of memory");
		} else if (rec.kind == MTEV_THREAD && is_truth && truth_fns) {
			if (fnmap_add_thread(truth_fns, rec.thread.pid, rec.thread.tid))
				mt_fatal(MT_EXIT_SYS, "out of memory");
		} else if (rec.kind == MTEV_MAP && is_truth && truth_fns) {
			if (fnmap_add_map(truth_fns, rec.map.pid, rec.map.start, rec.map.len,
					  rec.map.pgoff, rec.map.path.p, rec.map.path.len,
					  rec.map.build_id, rec.map.build_id_len))
				mt_fatal(MT_EXIT_SYS, "out of memory");
		} else if (rec.kind == MTEV_GAP && !is_truth && rec.gap.reason != MTEV_GAP_UNTRACED) {
			/* the time no trace shows (spancmp.h, gaps) */
			if (spanset_add_gap(s, rec.gap.tid, 0, rec.gap.begin, rec.gap.end))
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

/* each thread's window: the extent of the branch stream at @path; its
 * jumps (which tell a tail call from a return and a call at one time) */
static void load_windows(const char *path, struct spanset *s)
{
	int fd;
	mtev_reader *r = open_stream(path, &fd);
	struct mtev_rec rec;
	int e;
	while ((e = mtev_read(r, &rec)) > 0)
		if (rec.kind == MTEV_BRANCH &&
		    ((rec.br.type == MTEV_BR_TRACE_START
			      ? spanset_note_start(s, rec.br.tid, rec.br.time, rec.br.to)
			      : spanset_note_move(s, rec.br.tid, rec.br.time)) ||
		     (rec.br.type == MTEV_BR_JUMP &&
		      spanset_note_jump(s, rec.br.tid, rec.br.time, rec.br.to)) ||
		     (rec.br.type == MTEV_BR_RETURN &&
		      spanset_note_return(s, rec.br.tid, rec.br.time, rec.br.to))))
			mt_fatal(MT_EXIT_SYS, "out of memory");
	if (e < 0)
		read_failed(path, r, e);
	mtev_reader_free(r);
	close(fd);
	spanset_sort_jumps(s);
}

struct bkey {
	uint64_t time, from, to;
	uint32_t tid, type;
};

static int bkey_cmp(const void *x, const void *y)
{
	const struct bkey *a = x, *b = y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->time != b->time)
		return a->time < b->time ? -1 : 1;
	if (a->from != b->from)
		return a->from < b->from ? -1 : 1;
	if (a->to != b->to)
		return a->to < b->to ? -1 : 1;
	return a->type < b->type ? -1 : a->type > b->type;
}

static struct bkey *load_branches(const char *path, size_t *n)
{
	int fd;
	mtev_reader *r = open_stream(path, &fd);
	struct mtev_rec rec;
	struct bkey *v = NULL;
	size_t cap = 0;
	int e;
	*n = 0;
	while ((e = mtev_read(r, &rec)) > 0) {
		if (rec.kind != MTEV_BRANCH || rec.br.type == MTEV_BR_TRACE_START ||
		    rec.br.type == MTEV_BR_TRACE_END)
			continue;
		if (mt_grow((void **)&v, &cap, *n + 1, sizeof *v))
			mt_fatal(MT_EXIT_SYS, "out of memory");
		v[(*n)++] = (struct bkey){rec.br.time, rec.br.from, rec.br.to, rec.br.tid,
					  rec.br.type};
	}
	if (e < 0)
		read_failed(path, r, e);
	mtev_reader_free(r);
	close(fd);
	qsort(v, *n, sizeof *v, bkey_cmp);
	return v;
}

struct ikey {
	uint64_t begin;
	uint32_t tid, name;
};

static int ikey_cmp(const void *x, const void *y)
{
	const struct ikey *a = x, *b = y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->name != b->name)
		return a->name < b->name ? -1 : 1;
	return a->begin < b->begin ? -1 : a->begin > b->begin;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A Rust legacy-mangled path as a demangler prints it: mt-ptsim's inline
 * truth names some frames by their linkage name's path, escapes and hash
 * kept (core::ptr::mut_ptr::_$LT$impl$u20$$BP$mut$u20$T$GT$::sub::h0123...),
 * mt-symbolize demangles (core::ptr::mut_ptr::<impl *mut T>::sub): the same
 * function.  Drops a final "::h" + 16 hex digits; when the name holds a
 * '$', decodes $LT$ $GT$ $RF$ $BP$ $SP$ $LP$ $RP$ $C$ $uXX$, ".." as "::"
 * and a segment's leading "_$" as "$".  Other names are left as they are.
 * Returns the length written to @out (at most @len bytes). */
static size_t rust_name(const char *p, size_t len, char *out)
{
	if (len >= 20 && !memcmp(p + len - 19, "::h", 3)) {
		size_t i = len - 16;
		while (i < len && hexval(p[i]) >= 0)
			i++;
		if (i == len)
			len -= 19;
	}
	if (!memchr(p, '$', len)) {
		memcpy(out, p, len);
		return len;
	}
	static const struct {
		const char *e;
		char c;
	} esc[] = {{"$LT$", '<'}, {"$GT$", '>'}, {"$RF$", '&'}, {"$BP$", '*'}, {"$SP$", '@'},
		   {"$LP$", '('}, {"$RP$", ')'}, {"$C$", ','}};
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		/* a segment's leading "_$": the underscore is the mangler's */
		if (p[i] == '_' && i + 1 < len && p[i + 1] == '$' &&
		    (i == 0 || (i >= 2 && p[i - 1] == ':' && p[i - 2] == ':'))) {
			i++;
			continue;
		}
		if (p[i] == '.' && i + 1 < len && p[i + 1] == '.') {
			out[n++] = ':';
			out[n++] = ':';
			i += 2;
			continue;
		}
		if (p[i] == '$') {
			size_t k, el = 0;
			for (k = 0; k < sizeof esc / sizeof esc[0]; k++) {
				el = strlen(esc[k].e);
				if (i + el <= len && !memcmp(p + i, esc[k].e, el))
					break;
			}
			if (k < sizeof esc / sizeof esc[0]) {
				out[n++] = esc[k].c;
				i += el;
				continue;
			}
			/* $uXX$: a character by its code (ASCII) */
			if (i + 5 <= len && p[i + 1] == 'u' && p[i + 4] == '$') {
				int hi = hexval(p[i + 2]), lo = hexval(p[i + 3]);
				unsigned v = (unsigned)(hi * 16 + lo);
				if (hi >= 0 && lo >= 0 && v >= 0x20 && v < 0x7f) {
					out[n++] = (char)v;
					i += 5;
					continue;
				}
			}
		}
		out[n++] = p[i++];
	}
	return n;
}

/* the inline spans of @path (names resolved through string records) */
static struct ikey *load_inline(const char *path, size_t *n, size_t *nskip, int skip_inferred)
{
	int fd;
	mtev_reader *r = open_stream(path, &fd);
	struct mtev_rec rec;
	struct ikey *v = NULL;
	size_t cap = 0;
	int e;
	*n = *nskip = 0;
	while ((e = mtev_read(r, &rec)) > 0) {
		if (rec.kind != MTEV_SPAN || !(rec.span.flags & MTEV_SPAN_INLINE))
			continue;
		if (skip_inferred && (rec.span.flags & MTEV_SPAN_INFERRED_START)) {
			(*nskip)++;
			continue;
		}
		if (mt_grow((void **)&v, &cap, *n + 1, sizeof *v))
			mt_fatal(MT_EXIT_SYS, "out of memory");
		char nb[4096];
		size_t nl = rec.span.name.len < sizeof nb ? rust_name(rec.span.name.p, rec.span.name.len, nb) : 0;
		v[(*n)++] = (struct ikey){rec.span.begin, rec.span.tid,
					  nl ? spancmp_intern(nb, nl)
					     : spancmp_intern(rec.span.name.p, rec.span.name.len)};
	}
	if (e < 0)
		read_failed(path, r, e);
	mtev_reader_free(r);
	close(fd);
	qsort(v, *n, sizeof *v, ikey_cmp);
	return v;
}

struct tkey {
	uint32_t tid;
	uint64_t time;
};

static int tkey_cmp(const void *x, const void *y)
{
	const struct tkey *a = x, *b = y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->time < b->time ? -1 : a->time > b->time;
}

/* The distinct branch times of each thread in @path (sorted by thread, time). */
static struct tkey *load_times(const char *path, size_t *n)
{
	int fd;
	mtev_reader *r = open_stream(path, &fd);
	struct mtev_rec rec;
	struct tkey *v = NULL;
	size_t cap = 0;
	int e;
	*n = 0;
	while ((e = mtev_read(r, &rec)) > 0) {
		if (rec.kind != MTEV_BRANCH)
			continue;
		if (mt_grow((void **)&v, &cap, *n + 1, sizeof *v))
			mt_fatal(MT_EXIT_SYS, "out of memory");
		v[(*n)++] = (struct tkey){rec.br.tid, rec.br.time};
	}
	if (e < 0)
		read_failed(path, r, e);
	mtev_reader_free(r);
	close(fd);
	qsort(v, *n, sizeof *v, tkey_cmp);
	size_t m = 0;
	for (size_t i = 0; i < *n; i++)
		if (!m || tkey_cmp(&v[m - 1], &v[i]))
			v[m++] = v[i];
	*n = m;
	return v;
}

/* The thread's first branch time after @t in @v (t + 1 if none). */
static uint64_t next_time(const struct tkey *v, size_t n, uint32_t tid, uint64_t t)
{
	size_t lo = 0, hi = n;
	const struct tkey k = {tid, t};
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tkey_cmp(&v[mid], &k) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].tid == tid ? v[lo].time : t + 1;
}

/* --inline: the truth's inline frames that the actual has not (missed) and
 * the actual's inline spans the truth has not (extra).  With the truth's
 * branch times (@times, @ntimes), an actual begin matches a true one when
 * it lies in [true begin, the thread's next branch time): the truth's time
 * resolution, within which mt-segment spreads the frames one timestamp
 * opens (docs/segment.md, "Times"); else only the same begin does. */
static size_t inline_frames(const char *tpath, const char *apath, long list,
			    const struct tkey *times, size_t ntimes)
{
	size_t nt, na, st, sa, i = 0, j = 0, matched = 0, missed = 0, extra = 0;
	struct ikey *t = load_inline(tpath, &nt, &st, 1), *a = load_inline(apath, &na, &sa, 0);
	while (i < nt || j < na) {
		int k = i >= nt ? 1 : j >= na ? -1 : ikey_cmp(&t[i], &a[j]);
		if (k < 0 && j < na && t[i].tid == a[j].tid && t[i].name == a[j].name &&
		    a[j].begin < next_time(times, ntimes, t[i].tid, t[i].begin))
			k = 0; /* a[j] begins after t[i], within its resolution */
		if (!k) {
			matched++;
			i++;
			j++;
		} else if (k < 0) {
			if ((long)missed < list)
				printf("missed: tid=%" PRIu32 " begin=%" PRIu64 " name=%s\n", t[i].tid,
				       t[i].begin, spancmp_name(t[i].name));
			missed++;
			i++;
		} else {
			extra++;
			j++;
		}
	}
	printf("mt-compare: inline_checked=%zu inline_matched=%zu inline_missed=%zu "
	       "inline_extra=%zu\n",
	       nt, matched, missed, extra);
	free(t);
	free(a);
	return missed;
}

/* --kept-branches: the decoded branches the truth does not have (as a
 * multiset: a branch taken twice at one time counts twice). */
static size_t kept_branches(const char *tpath, const char *dpath, long list)
{
	size_t nt, nd, i = 0, j = 0, wrong = 0;
	struct bkey *t = load_branches(tpath, &nt), *dv = load_branches(dpath, &nd);
	while (j < nd) {
		int k = i < nt ? bkey_cmp(&t[i], &dv[j]) : 1;
		if (k < 0) {
			i++;
		} else if (k == 0) {
			i++;
			j++;
		} else {
			if ((long)wrong < list)
				printf("wrong: tid=%" PRIu32 " time=%" PRIu64 " type=%" PRIu32
				       " from=0x%" PRIx64 " to=0x%" PRIx64 "\n",
				       dv[j].tid, dv[j].time, dv[j].type, dv[j].from, dv[j].to);
			wrong++;
			j++;
		}
	}
	printf("mt-compare: kept=%zu wrong=%zu truth=%zu\n", nd, wrong, nt);
	free(t);
	free(dv);
	return wrong;
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

/* The windows clipping the truth, into @actual: from --branches, from
 * --truth-branches (by default DIR/truth.mt beside DIR/truth-spans.mt, its
 * path into @sib), or the truth's own extent; none with --actual-window.
 * Returns what they come from. */
static const char *windows(struct opts *o, const char *tpath, const struct spanset *truth,
			   struct spanset *actual, char *sib, size_t n)
{
	const char *wsrc = "ACTUAL";
	if (!o->branches && !o->actual_window && !o->truth_branches) {
		/* mt-ptsim's layout: DIR/truth-spans.mt beside DIR/truth.mt */
		const char *b = strrchr(tpath, '/');
		b = b ? b + 1 : tpath;
		if (!strcmp(b, "truth-spans.mt") &&
		    (size_t)snprintf(sib, n, "%.*struth.mt", (int)(b - tpath), tpath) <
			    n &&
		    access(sib, R_OK) == 0)
			o->truth_branches = sib;
	}
	if (o->branches) {
		load_windows(o->branches, actual);
		wsrc = o->branches;
	} else if (o->truth_branches) {
		load_windows(o->truth_branches, actual);
		wsrc = o->truth_branches;
	} else if (!o->actual_window) {
		for (size_t i = 0; i < truth->n; i++)
			if (spanset_add_window(actual, truth->v[i].tid, truth->v[i].begin,
					       truth->v[i].end))
				mt_fatal(MT_EXIT_SYS, "out of memory");
		wsrc = "the truth's spans";
	}
	return wsrc;
}

/* The summary, the wrong (and with -v the missed) spans; 1 when a
 * threshold is not met. */
static int report(const struct opts *o, const struct spancmp_res *r, const char *wsrc)
{
	double prec = ratio((double)r->matched, (double)r->judged);
	double rec = ratio((double)r->truth_matched, (double)r->truth);
	double cov = ratio(r->covered_time, r->truth_time);
	double ecov = ratio(r->exact_time, r->truth_time);
	double tprec = ratio(r->true_actual_time, r->actual_time);
	printf("window: from %s\n", wsrc);
	printf("truth spans: %zu (clipped to the traced windows; outer frames hidden: %u; "
	       "unwound unseen: %zu; named by the code they run: %zu)\n",
	       r->truth, r->max_hidden, r->unwound, r->renamed);
	printf("actual spans: %zu (judged %zu, not judged %zu)\n", r->actual, r->judged, r->unjudged);
	printf("exact matches: %zu  precision %.6f  recall %.6f\n", r->matched, prec, rec);
	printf("frame-time: coverage %.6f  exact coverage %.6f  time precision %.6f\n", cov, ecov,
	       tprec);
	printf("wrong spans: %zu (joined across a gap over two activations: %zu of the %zu spans "
	       "live across a gap)\n",
	       r->wrong, r->wrong_joins, r->joins);
	for (size_t i = 0; i < r->nwrong_list && (long)i < o->list; i++)
		print_span("wrong:", &r->wrong_spans[i]);
	if (o->verbose) {
		for (size_t i = 0; i < r->nmissed_list && (long)i < o->list; i++)
			print_span("missed:", &r->missed_spans[i]);
	}
	printf("mt-compare: precision=%.6f recall=%.6f coverage=%.6f exact_coverage=%.6f "
	       "time_precision=%.6f gap=%.6f joins=%zu wrong_joins=%zu wrong=%zu matched=%zu "
	       "truth=%zu judged=%zu unwound=%zu\n",
	       prec, rec, cov, ecov, tprec, ratio(r->gap_time, r->truth_time), r->joins,
	       r->wrong_joins, r->wrong, r->matched, r->truth, r->judged, r->unwound);
	if (prec < o->min_prec || rec < o->min_rec || cov < o->min_cov ||
	    (o->max_wrong >= 0 && (long)r->wrong > o->max_wrong))
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"tolerance", required_argument, 0, 't'},
		{"strict", no_argument, 0, 'S'},
		{"absolute-depth", no_argument, 0, 'A'},
		{"count-unwound", no_argument, 0, 'U'},
		{"branches", required_argument, 0, 'b'},
		{"images", required_argument, 0, 'i'},
		{"truth-branches", required_argument, 0, 'B'},
		{"actual-window", no_argument, 0, 'a'},
		{"kept-branches", no_argument, 0, 'K'},
		{"inline", no_argument, 0, 'I'},
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
	int c, kept = 0, inl = 0;
	drv_init(argc, argv);
	while ((c = getopt_long(argc, argv, ":t:b:l:vh", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o.c.tol = (uint64_t)parse_long(optarg, "--tolerance");
			break;
		case 'S':
			o.c.strict = 1;
			break;
		case 'U':
			o.c.count_unwound = 1;
			break;
		case 'A':
			o.c.absolute_depth = 1;
			break;
		case 'b':
			o.branches = optarg;
			break;
		case 'B':
			o.truth_branches = optarg;
			break;
		case 'i':
			if (img_dirs_add(optarg) < 0)
				mt_fatal(MT_EXIT_SYS, "out of memory");
			o.images = 1;
			break;
		case 'a':
			o.actual_window = 1;
			break;
		case 'K':
			kept = 1;
			break;
		case 'I':
			inl = 1;
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
	if (inl) {
		/* the truth's time resolution: DIR/truth.mt beside
		 * DIR/truth-inline.mt, or --truth-branches; none with --strict */
		char isib[4096];
		const char *ip = argv[optind], *tb = o.truth_branches, *ib = strrchr(ip, '/');
		ib = ib ? ib + 1 : ip;
		if (!tb && !strcmp(ib, "truth-inline.mt") &&
		    (size_t)snprintf(isib, sizeof isib, "%.*struth.mt", (int)(ib - ip), ip) <
			    sizeof isib &&
		    access(isib, R_OK) == 0)
			tb = isib;
		size_t nts = 0;
		struct tkey *ts = tb && !o.c.strict ? load_times(tb, &nts) : NULL;
		size_t w = inline_frames(argv[optind], argv[optind + 1], o.list, ts, nts);
		free(ts);
		return o.max_wrong >= 0 && (long)w > o.max_wrong;
	}
	if (kept) {
		size_t w = kept_branches(argv[optind], argv[optind + 1], o.list);
		return o.max_wrong >= 0 && (long)w > o.max_wrong;
	}
	if ((o.branches != NULL) + (o.truth_branches != NULL) + o.actual_window > 1)
		drv_usage("--branches, --truth-branches and --actual-window exclude each other");
	const char *tpath = argv[optind], *wsrc;
	if (!o.images) {
		/* mt-ptsim's layout: DIR/images beside DIR/truth-spans.mt */
		const char *b = strrchr(tpath, '/');
		b = b ? b + 1 : tpath;
		char dir[4096];
		if (!strcmp(b, "truth-spans.mt") &&
		    (size_t)snprintf(dir, sizeof dir, "%.*simages", (int)(b - tpath), tpath) <
			    sizeof dir &&
		    access(dir, R_OK | X_OK) == 0 && img_dirs_add(dir) < 0)
			mt_fatal(MT_EXIT_SYS, "out of memory");
	}
	if (!(truth_fns = fnmap_alloc()))
		mt_fatal(MT_EXIT_SYS, "out of memory");
	load_spans(tpath, &truth, 0, 1);
	static char sib[4096];
	wsrc = windows(&o, tpath, &truth, &actual, sib, sizeof sib);
	for (size_t i = 0; i < actual.nwin; i++) {
		struct sc_win *w = &actual.win[i];
		struct fn_info fi;
		if (w->start_to && (fnmap_owner(truth_fns, w->tid, w->start_to, &fi) ||
				    fnmap_lookup(truth_fns, w->tid, w->start_to, &fi)))
			w->start_fn = fi.entry;
	}
	for (size_t i = 0; i < actual.nret; i++) {
		struct sc_jump *j = &actual.ret[i];
		struct fn_info fi;
		if (fnmap_owner(truth_fns, j->tid, j->to, &fi) ||
		    fnmap_lookup(truth_fns, j->tid, j->to, &fi))
			j->fn = fi.entry;
	}
	fnmap_free(truth_fns);
	truth_fns = NULL;
	load_spans(argv[optind + 1], &actual, o.actual_window, 0);

	struct spancmp_res r;
	if (spancmp_run(&truth, &actual, &o.c, &r))
		mt_fatal(MT_EXIT_SYS, "out of memory");
	int rc = report(&o, &r, wsrc);
	spancmp_res_fini(&r);
	spanset_fini(&truth);
	spanset_fini(&actual);
	return rc;
}
