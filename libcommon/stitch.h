/* The stitcher: joins each thread's segments (mt-segment output) across the
 * gaps between them.
 *
 * For each pair of consecutive segments A, B of a thread, the stack live at
 * A's end (its open-at-end spans, by depth) is aligned with the stack live at
 * B's start (its inferred-start spans).  An alignment puts the root of one
 * stack at some depth of the other; its score is the number of consecutive
 * frames, from there, with the same function (and the same call site when
 * both are known).  The best score wins; on a tie the deepest placement of
 * B's root (the one that assumes the fewest returns inside the gap).  Frames
 * that align continue as one span (flag stitched); B's frames below A's root
 * (roots B revealed) were live during A too and begin where A's chain of
 * joined segments begins.  The gap becomes a span named for its reason at the
 * depth where the stacks diverge.  With no alignment (no common function),
 * B starts a new group whose depths stay as mt-segment numbered them.
 * No frame is ever invented: every output span is an input span, joined, or
 * a gap marker.
 *
 * Streaming (docs/stitch.md, "What is held"): a group's output can
 * only begin once the group is complete (its root span's end and the roots
 * later segments reveal come first in pre-order), so until then the spans
 * whose records are final and the waypoints go, in arrival order, to a
 * log (4 bytes a waypoint, 48 a span) that spills to a temporary file past
 * a limit; only the spans whose records can still change (open at a
 * segment's end) or whose place is not their arrival place (revealed
 * roots) are held in memory, plus one segment's start stack. */
#ifndef MT_STITCH_H
#define MT_STITCH_H

#include "mtev.h"

enum stitch_err {
	STITCH_ENOMEM = 1,
	STITCH_EKIND = 2, /* branch or sample records: not segmented yet */
	STITCH_EEMIT = 3,
	STITCH_ESPILL = 4, /* the temporary file failed (errno is set) */
};

/* Default log memory per thread before spilling to $TMPDIR (or /tmp). */
#define STITCH_MEM_DEFAULT ((size_t)4 << 20)

struct stitch_stats {
	uint64_t segments, joins, aligned, unaligned, continued, revealed, gap_spans;
	uint64_t lower_bound; /* segments placed at depths that are lower bounds (min-depth) */
	uint64_t split; /* facing frames across a gap not joined: seen called again there */
	uint64_t resumed; /* earlier frames beneath the later root not joined across a gap:
			   * a span of the same function after it (inferred-start) */
	uint64_t called_under; /* no common frame across a gap: the later root placed
				* under an earlier frame whose code calls it */
	uint64_t ambiguous; /* the later root faced the shallowest of several frames
			     * of its function (a recursion): placed there, its
			     * depths lower bounds (min-depth) */
	uint64_t handoff; /* no common frame across a gap whose earlier root was the
			   * dynamic loader's entry: the program's entry took over
			   * inside the gap, the thread's root after it */
};

typedef int (*stitch_emit_fn)(void *ctx, const struct mtev_rec *rec);
typedef struct stitcher stitcher;

stitcher *stitch_alloc(stitch_emit_fn emit, void *ctx);
/* Log memory per thread before spilling (bytes; at least 256). */
void stitch_set_mem_limit(stitcher *s, size_t bytes);
void stitch_free(stitcher *s);
/* Function ranges and code of the traced processes (NULL: none), for a join
 * that finds no common frame (docs/stitch.md); the caller feeds it the map
 * and thread records and frees it after stitch_finish(). */
struct fnmap;
void stitch_set_fnmap(stitcher *s, struct fnmap *fns);
/* Context records are emitted at once; a group of a thread's segments
 * when a later segment does not align with it, or at the end. */
int stitch_feed(stitcher *s, const struct mtev_rec *rec);
int stitch_finish(stitcher *s);
/* The waypoints of thread @tid at @run (libcommon/wplog.h: depth = level +
 * abs_off) before @run->limit: what stitch_feed of a record for each does,
 * without the records (mt-segment --stitch).  Advances @run. */
struct wprun;
int stitch_feed_wprun(stitcher *s, uint32_t tid, struct wprun *run);
const struct stitch_stats *stitch_stats(const stitcher *s);
const char *stitch_strerror(int err);
/* The counters as one `--stats` line's key=value pairs, each key preceded by
 * @prefix ("" for mt-stitch, "stitch_" inside mt-segment), into @buf. */
void stitch_stats_text(const struct stitch_stats *st, const char *prefix, char *buf, size_t len);
/* The warning for joins that found no common frame into @buf: 1, or 0 when
 * there were none. */
int stitch_unaligned_text(const struct stitch_stats *st, char *buf, size_t len);
unsigned stitch_error_detail(const stitcher *s);

#endif
