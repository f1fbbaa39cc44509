/* Span fidelity: compares actual spans (mt-segment / mt-stitch output) with
 * the truth (mt-ptsim's truth-spans.mt).
 *
 * Per thread, the traced window [wb, we] comes from the actual stream's
 * segment records (else its spans, else a branch stream given with
 * spanset_add_window()).  Truth spans are clipped to it: one that began
 * before wb matches an actual span with begin = wb and flag inferred-start;
 * likewise at we with open-at-end.
 *
 * Depth: frames live across the whole recorded part of the window whose
 * child is also live across it executed nothing there, so no trace can see
 * them; they are the outermost frames.  The recorded part: each stretch of
 * the actual result between its gap markers (from its first span to its
 * last); a frame is hidden when that holds in every stretch.  Unless @absolute_depth, they are dropped and
 * the truth's depths renumbered from the outermost observable frame (the
 * root a perfect segmenter finds); the actual spans flagged callchain (those
 * frames, from a trigger's call chain) are then set aside (not judged) and
 * the depths under them renumbered the same way.
 *
 * Matching: same thread, depth, function (name for synthetic spans, func 0),
 * begin and end.  Two times match when they differ by at most @tol ns, or
 * (unless @strict) when the actual time lies in [b, next) where b is the
 * truth time and next the truth's next distinct span boundary on that thread:
 * the truth cannot order events inside one timestamp, which is where
 * mt-segment spreads them.  Except at a window's edge: a truth span clipped
 * there matches only an actual span beginning (ending) there within @tol.
 *
 * Judged actual spans: functions (func != 0), and synthetic spans whose name
 * occurs in the truth ([syscall] ...).  Gap markers (flag error) are not
 * judged.  A judged span is wrong when no truth span of the same thread,
 * depth and function intersects it.  A span flagged min-depth (its depth a
 * lower bound) is first given the depth, at or below its own, of the truth
 * span of the same function that it matches in time (else overlaps most).  Coverage: the fraction of the truth's
 * frame-time (sum of clipped durations over all depths) during which an
 * actual span of the same thread, depth and function is live.
 *
 * Gaps (honest about what was not recorded): a gap of the actual result
 * runs from its gap record's begin to the next segment's begin on that
 * thread (to the window's end when no segment follows).  Time inside a gap
 * counts as covered only for a truth span live across the whole gap that
 * an actual span of its group also covers across it (a frame joined across
 * the gap that was one activation); a truth span that begins or ends
 * inside a gap gets no credit there.  An actual span joined across a gap
 * (live from before its begin to after its end) that matches no truth span
 * is wrong when no truth span of its group is live across that gap: its
 * two sides are different activations (a call that returned inside the gap
 * and one made again); such a span gives no coverage.  Gap records of
 * reason untraced are not gaps here. */
#ifndef MT_SPANCMP_H
#define MT_SPANCMP_H

#include "mtev.h"

#include <stddef.h>
#include <stdint.h>

struct sc_span {
	uint64_t begin, end, func;
	uint64_t callsite; /* the call instruction's address, 0 unknown */
	uint32_t tid, depth, flags;
	uint32_t name; /* interned name id, 0 = none */
	uint32_t cflags; /* comparison state (SC_*) */
};

struct sc_win {
	uint32_t tid;
	uint64_t begin, end;
	/* the first time a branch other than a trace-start moved the thread
	 * (spanset_note_move; begin when never noted) */
	uint64_t first_move;
	/* the first traced instruction (the trace-start at begin;
	 * spanset_note_start), 0 unknown */
	uint64_t start_to;
	/* the entry of the function whose code start_to is (the caller's
	 * symbol tables: mt-compare --images), 0 unknown */
	uint64_t start_fn;
};

/* A stretch of a thread the recording holds no trace of (the actual
 * result's gap records), or a segment's begin (spanset_add_gap) */
struct sc_gap {
	uint32_t tid;
	int is_seg; /* a segment record: only its begin is used */
	int tail;   /* (a gap) no segment follows it */
	uint64_t begin, end;
};

struct spanset {
	struct sc_span *v;
	size_t n, cap;
	struct sc_win *win;
	size_t nwin, capwin;
	struct sc_gap *gap;
	size_t ngap, capgap;
	/* the window's jumps (the truth's branch stream): a frame that follows
	 * another at the same depth at one instant was tail-called only if a
	 * jump to it was taken then */
	struct sc_jump {
		uint32_t tid;
		uint64_t time, to;
		uint64_t fn; /* a return's: the entry of @to's function, 0 unknown */
	} *jmp;
	size_t njmp, capjmp;
	/* its returns (tid, time, to): a frame whose callee returned to it
	 * executed again (the caller may fill in each one's fn) */
	struct sc_jump *ret;
	size_t nret, capret;
};

/* Notes a gap record (@is_seg 0) or a segment record (1) of the actual
 * result; they bound the time no trace shows (the honest coverage, below).
 * 0 or -ENOMEM. */
int spanset_add_gap(struct spanset *s, uint32_t tid, int is_seg, uint64_t begin, uint64_t end);

/* Note a trace-start of thread @tid at @time to @to: widens its window, and
 * the earliest one's @to is the window's first traced instruction.  0 or
 * -ENOMEM. */
int spanset_note_start(struct spanset *s, uint32_t tid, uint64_t time, uint64_t to);

/* Note that thread @tid took a branch (not a trace-start) at @time. */
int spanset_note_move(struct spanset *s, uint32_t tid, uint64_t time);

/* Note that thread @tid jumped to @to at @time (a jmp, not a call or a
 * return: a tail call when @to is a function's entry).  0 or -ENOMEM. */
int spanset_note_jump(struct spanset *s, uint32_t tid, uint64_t time, uint64_t to);

/* Note that thread @tid returned to @to at @time.  0 or -ENOMEM. */
int spanset_note_return(struct spanset *s, uint32_t tid, uint64_t time, uint64_t to);

/* Sorts the jumps and returns noted: required before the comparison looks
 * them up. */
void spanset_sort_jumps(struct spanset *s);

struct spancmp_opts {
	uint64_t tol;
	int strict;
	int absolute_depth;
	int count_unwound; /* keep the frames hide_unwound drops */
};

struct spancmp_res {
	size_t truth, actual, judged, unjudged, matched, wrong, truth_matched;
	double truth_time, covered_time, exact_time, actual_time, true_actual_time;
	size_t joins; /* judged spans live across a gap (joined by mt-stitch) */
	size_t wrong_joins; /* of wrong: spans joined across a gap over two activations */
	/* truth frame-time inside gaps that no trace can show: in frames that
	 * begin or end inside one (all, in a gap no segment follows) */
	double gap_time;
	/* indices into the actual set (wrong) and into the comparison's clipped
	 * truth (missed); owned by the result */
	struct sc_span *wrong_spans, *missed_spans;
	size_t nwrong_list, nmissed_list;
	uint32_t max_hidden; /* most outer frames dropped on one thread */
	/* truth frames dropped because they executed nothing in the window:
	 * suspended in a callee when it began and unwound with it (an
	 * exception, a longjmp), never resumed (spancmp.c, hide_unwound) */
	size_t unwound;
	/* truth frames renamed by the code the window shows them running
	 * (spancmp.c, name_by_code) */
	size_t renamed;
};

/* Names are interned process-wide (a test tool); returns the id, 0 for "". */
uint32_t spancmp_intern(const char *p, size_t len);
const char *spancmp_name(uint32_t id);

void spanset_init(struct spanset *s);
void spanset_fini(struct spanset *s);
/* Adds a span record.  0 or -ENOMEM. */
int spanset_add(struct spanset *s, const struct mtev_rec *span);
/* Widens thread @tid's window to include [begin, end].  0 or -ENOMEM. */
int spanset_add_window(struct spanset *s, uint32_t tid, uint64_t begin, uint64_t end);

/* @actual's windows clip @truth; both sets are reordered.  0 or -ENOMEM. */
int spancmp_run(struct spanset *truth, struct spanset *actual, const struct spancmp_opts *o,
		struct spancmp_res *res);
void spancmp_res_fini(struct spancmp_res *res);

#endif
