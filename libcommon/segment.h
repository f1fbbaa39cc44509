/* The segmenter: per thread, the call-stack history rebuilt from branch
 * records (or stack samples), written as segment, span and waypoint records.
 *
 * Feed every record of a stream with seg_feed() in order, then seg_finish().
 * Context records (clock, process, thread, map, trigger, string, gap, symbol,
 * unknown kinds) are handed to the emit callback as they arrive; a thread's
 * segment is written (segment record, spans in pre-order with its waypoints
 * merged by time) when it closes: at the thread's next gap, or at the end.
 * The gap record is emitted after the segment it closes.
 *
 * Rules (docs/segment.md has the full story):
 *  - a call pushes a frame (func = target, callsite = source);
 *  - a return pops down to the innermost frame whose call site the return
 *    target follows (up to 15 bytes after the call instruction); a return
 *    past the root promotes the function containing the target to a new
 *    root that began at the segment start (flag inferred-start), in O(1);
 *  - a jump or taken jcc stays in the frame when its target is in the
 *    frame's function; a jump to another function's entry is a tail call
 *    (the frame is replaced); a jump into an ancestor's function unwinds to
 *    it (longjmp); function ranges come from ELF symbols (fnmap), else from
 *    call targets seen so far;
 *  - syscall and interrupt open [syscall] / [interrupt] child spans closed
 *    by sysret / iret; a resume at an unexpected address enters a signal
 *    handler, nested under the interrupted frame; the resume at the
 *    interrupted address (rt_sigreturn) unwinds the handler;
 *  - branch records sharing a timestamp: the frames they open are spread
 *    evenly over [t, next distinct time); other events take the time of
 *    the last frame opened before them in that run.
 *
 * Memory: per open segment, a 40-byte frame per span and a waypoint log
 * (libcommon/wplog.h, 4 bytes per waypoint usually).  A waypoint that
 * repeats the previous one exactly (time, address, level) is not written,
 * nor one in a function that no DWARF describes, nor one outside every
 * inlined subroutine of its function while the frame's last written one was
 * too (opts.all_waypoints keeps those; docs/segment.md, Waypoints, says
 * which are kept anyway and why mt-symbolize's spans are the same).
 * Library code: never prints. */
#ifndef MT_SEGMENT_H
#define MT_SEGMENT_H

#include "mtev.h"

struct fnmap;
struct wprun;

enum seg_err {
	SEG_ENOMEM = 1,
	SEG_EKIND = 2, /* a record that does not belong in mt-segment's input */
	SEG_EEMIT = 3, /* the emit callback failed */
	SEG_EORDER = 4, /* time went backwards within a thread */
	SEG_EBRANCH = 5 /* a sysret, iret or trace-start without its target (mtev-semantics) */
};

struct seg_opts {
	struct fnmap *fns;  /* function ranges; may be NULL */
	int no_waypoints;   /* do not write waypoint records */
	int no_smear;	    /* keep raw times for events sharing a timestamp */
	int no_call_targets; /* without symbols, never guess a tail call from call targets */
	/* optional: a segment's waypoints handed over as runs of
	 * libcommon/wplog.h words (with the emit callback's ctx) instead of
	 * one waypoint record each; 0 or a negative value (an emit error) */
	int (*wprun)(void *ctx, uint32_t tid, struct wprun *run);
	/* write every waypoint (by default those that cannot change the
	 * inline chain are left out, libcommon/dwcov.h) */
	int all_waypoints;
	/* stack samples: the callchains as they are, without
	 * libcommon/sampstack.h's repairs */
	int no_sample_repair;
};

struct seg_stats {
	uint64_t branches, samples, segments, spans, waypoints;
	uint64_t wp_elided; /* waypoints left out: in a function without DWARF, or ... */
	uint64_t wp_elided_inline; /* ... outside its inline frames (of wp_elided) */
	uint64_t anomalies; /* events that did not fit the stack (see docs/segment.md) */
	uint64_t promoted;  /* frames revealed by a return past the root */
	uint64_t tailcalls, unwinds, signals;
	uint64_t peak_frames; /* largest number of frames held at once */
	uint64_t sample_inferred; /* samples whose root frames were taken from the previous one */
	/* call chains (sample records flagged chain): read, joined to the
	 * stack, not joined (no match, or no segment holds their time), left
	 * alone in a sampling recording (its samples carry their stacks); the
	 * outer frames they added */
	uint64_t chains, chains_joined, chains_unjoined, chains_sampled, chain_frames;
};

/* Returns 0 or a negative errno-like value; the record is valid only during
 * the call. */
typedef int (*seg_emit_fn)(void *ctx, const struct mtev_rec *rec);

typedef struct segmenter segmenter;

segmenter *seg_alloc(const struct seg_opts *opts, seg_emit_fn emit, void *ctx);
void seg_free(segmenter *s);
/* 0 or -SEG_E*.  After an error the segmenter must only be freed. */
int seg_feed(segmenter *s, const struct mtev_rec *rec);
/* seg_feed of @n records in order: 0, or the first error (*at: the record
 * it came on; what came before it was fed). */
int seg_feed_n(segmenter *s, const struct mtev_rec *rec, size_t n, size_t *at);
/* Closes every open segment.  0 or -SEG_E*. */
int seg_finish(segmenter *s);
const struct seg_stats *seg_stats(const segmenter *s);
const char *seg_strerror(int err);
/* The offending record kind after -SEG_EKIND, the thread after -SEG_EORDER. */
unsigned seg_error_detail(const segmenter *s);

#endif
