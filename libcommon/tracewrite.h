/* tracewrite: MTEV records -> a trace file for Perfetto (FXT or Chrome JSON).
 *
 * Feed every record of a stream to tw_record() in stream order, then call
 * tw_finish().  Output is streamed: memory grows with the number of threads,
 * symbols and the deepest stack, never with the number of spans.
 *
 * What is written:
 * - process and thread records -> process and thread names;
 * - span records -> one slice each (FXT duration-complete event, JSON "X"
 *   event) on its thread, category "span", named by span.name, else the
 *   symbol record of span.func (its physical function, the last frame), else
 *   "0x<func>".  Arguments: "addr" (func, hex), "src" (file:line of the
 *   symbol of func, when known), "inline" (true, only for inline spans),
 *   "flags" (the span flags by name, only when not 0);
 * - gap records -> an instant "gap: REASON" (category "gap") at gap.begin;
 * - trigger records -> an instant "trigger: SYMBOL" (category "trigger").
 *
 * Spans are checked against the MTEV span contract before they are written,
 * so the output always nests the way a viewer will read it: per thread,
 * begin times never go back, a span at depth d > 0 lies inside the last
 * written span at depth d - 1, and siblings do not overlap.  A span that
 * breaks this is not written (nor its descendants), and counted in
 * tw_stats.dropped[reason]; the warn callback gets one message per drop.
 *
 * Library code: never prints or exits; errors are negative TW_E* codes.
 */
#ifndef MT_TRACEWRITE_H
#define MT_TRACEWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "mtev.h"
#include "zsink.h"

enum tw_format { TW_FXT = 0, TW_JSON = 1 };

enum tw_err {
	TW_EIO = 1,	/* writing failed; errno is set */
	TW_ENOMEM = 2,
	TW_EINVAL = 3,
};

enum tw_drop {
	TW_DROP_BACKWARDS = 0, /* begin before the previous span's begin on its thread */
	TW_DROP_ORPHAN,	       /* depth > 0 with no open parent at depth - 1 */
	TW_DROP_OUTSIDE,       /* not inside its parent's [begin, end] */
	TW_DROP_OVERLAP,       /* begins before its previous sibling ended */
	TW_DROP_ANCESTOR,      /* a descendant of a dropped span */
	TW_DROP_TIME,	       /* a time after INT64_MAX ns, beyond what trace readers take */
	TW_DROP__COUNT,
};

struct tw_stats {
	uint64_t spans_in;	 /* span records seen */
	uint64_t spans_written;
	uint64_t dropped[TW_DROP__COUNT];
	uint64_t gaps, triggers, symbols;
	uint64_t threads;	      /* distinct tids with output */
	uint64_t threads_without_pid; /* spans on a tid with no thread record: pid = tid */
	uint64_t bytes_out;	      /* bytes of trace (before compression) */
	/* FXT only: table registrations and reuses of a slot for a new value */
	uint64_t fxt_string_records, fxt_string_reuses, fxt_thread_records, fxt_thread_reuses;
};

struct tw_opts {
	enum tw_format format;
	int no_args; /* write slices without arguments */
	/* Called once per problem found in the input; may be NULL. */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

typedef struct tw tw;

/* @out receives the trace (uncompressed bytes; the zsink compresses).  @out
 * must outlive the writer. */
tw *tw_alloc(zsink *out, const struct tw_opts *opts);
void tw_free(tw *t);
/* 0 or -TW_E*.  After an error every call returns it again. */
int tw_record(tw *t, const struct mtev_rec *rec);
/* Writes the end of the trace and flushes into the zsink (the caller then
 * finishes the zsink).  0 or -TW_E*. */
int tw_finish(tw *t);
void tw_get_stats(const tw *t, struct tw_stats *st);

const char *tw_strerror(int err);
const char *tw_drop_name(unsigned reason);
/* The format a file name implies (".json", ".json.gz", ...; FXT otherwise),
 * or -1 when it names neither (".fxt" and ".fxt.gz" are FXT). */
int tw_format_from_name(const char *name);

#endif
