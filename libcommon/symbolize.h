/* mt-symbolize's stage logic: names, source lines and inline frames for a
 * span stream.
 *
 * symz_run() reads an MTEV span stream as it comes (spans, waypoints, maps,
 * and context passed through), resolves every unique address it needs (span
 * entries, call sites, waypoints) through one llvm-symbolizer coprocess
 * (libcommon/llvmsym.h) and a per-build-id cache, and writes:
 *   - the input's other records, unchanged and in order;
 *   - one symbol record per unique runtime address, before the first span
 *     that needs it;
 *   - every span with its name filled in (by reference to a string record
 *     written once per name), each physical span followed by nested inline
 *     spans (flag MTEV_SPAN_INLINE) built from its waypoints, depths
 *     renumbered so that the tree stays a tree;
 *   - no waypoints (they are consumed).
 *
 * Records are taken in windows (opts.window): each window's new addresses
 * are resolved in one batch, then its spans and waypoints are processed in
 * input order, so the waypoints are never stored, then what has settled is
 * written: per thread, records are in time order (formats/mtev-semantics.md,
 * Symbols), so a span whose place, depth and name nothing still to come can
 * change, and before which nothing still to come can go, is written, and
 * freed once nothing can hang under it.  Memory: the spans and inline frames
 * not settled yet (the open frames of each thread, and up to 1024 records'
 * worth; 128 and 64 bytes each), the window's records (56 bytes a span, 16 a
 * waypoint), plus the symbol tables.  A segment or gap record, or a
 * thread's next root span that begins after all before it ended, ends a unit:
 * everything before it is final then.
 *
 * Inline spans: the waypoints of one physical span, in time order, each carry
 * an inline chain (innermost first).  A run of consecutive waypoints whose
 * chain shares a prefix of inline frames keeps those frames open; a frame
 * begins at the time of the first waypoint that has it and ends at the time
 * of the first later waypoint that does not (or at the physical span's end).
 * This is an approximation: inline frames can only change where an address
 * was observed (a branch source or target), so code executed between two
 * waypoints is attributed to the frames of the earlier one.
 *
 * Fallbacks when llvm-symbolizer cannot name an address: the ELF symbol
 * (`name+0xoff`), /tmp/perf-PID.map for anonymous (JIT) code, else
 * `[unknown @ 0xADDR (binary)]`.  Every degradation is reported once through
 * @warn and counted in symz_stats.degraded. */
#ifndef MT_SYMBOLIZE_H
#define MT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "mtev.h"

struct symz_opts {
	const char *symbolizer;	  /* program to run; NULL: "llvm-symbolizer"; "": none */
	/* binaries are looked up with img_find (imgfind.h: --images DIR) */
	const char *cache_dir;	  /* NULL: no cache; else the mt cache directory */
	const char *perf_map_dir; /* NULL: "/tmp" (perf-PID.map files) */
	int timeout_ms;		  /* no answer for this long: the symbolizer is killed */
	size_t window;		  /* records per resolve batch and write round; 0: batches
				   * of 65536, written every 1024 */
	/* Diagnostics (library code never prints): one call per problem, already
	 * deduplicated; @degraded says whether names were lost because of it. */
	void (*warn)(void *ctx, int degraded, const char *msg);
	void *warn_ctx;
	/* a stream truncated or corrupt after its header: write what was read
	 * (one degraded warning) instead of failing with -SYMZ_EINPUT */
	int partial;
	/* records go to @sink (mtev_writer_alloc_sink) instead of out_fd:
	 * mt-symbolize --trace hands them to the trace writer */
	mtev_sink_fn sink;
	void *sink_ctx;
	/* called every 2^16 records read with how many (NULL: not called):
	 * mt-symbolize's progress line on a terminal */
	void (*progress)(void *ctx, uint64_t records);
	void *progress_ctx;
};

struct symz_stats {
	uint64_t records_in, spans_in, waypoints_in, spans_out, inline_spans, symbols_out;
	uint64_t waypoints_unmatched; /* no physical span at their depth and time */
	/* records earlier than a record before them of their thread (the input
	 * breaks time order): such waypoints are dropped, such spans placed
	 * after what is already written */
	uint64_t waypoints_late, spans_late;
	/* most spans and inline frames held at once (what is not yet settled) */
	uint64_t spans_live_max, inodes_live_max;
	uint64_t unique_addrs;	      /* unique (thread, address) pairs */
	uint64_t unique_binaddrs;     /* unique (binary, address) pairs resolved */
	uint64_t cache_hits, symbolizer_requests, fallback_names, unknown_names;
	uint64_t json_slow; /* replies the fast reader left to jansson */
	double t_read, t_resolve, t_tree, t_write; /* wall seconds per phase */
	int degraded; /* some names are fallbacks because of a problem */
	char err[256]; /* why symz_stream failed */
};

enum {
	SYMZ_EINPUT = 2, /* unusable input (corrupt, truncated, no spans); err says why */
	SYMZ_ESYS = 111, /* system error (write failed, out of memory); err says why */
};

/* Transforms the MTEV stream in @buf[0..@len) and writes the result to
 * @out_fd.  0 on success (check stats->degraded), or -SYMZ_EINPUT /
 * -SYMZ_ESYS with stats->err filled.  Output already written when the input
 * turns out unusable (corrupt or truncated in the middle) stays written and
 * has no END record: write to a temporary file and discard it on error.  The
 * caller must ignore SIGPIPE. */
int symz_stream(const void *buf, size_t len, int out_fd, const struct symz_opts *o,
		struct symz_stats *stats);

/* Same, reading the stream from @in_fd as it comes: memory is bounded by
 * what is not settled yet plus the symbol tables. */
int symz_run(int in_fd, int out_fd, const struct symz_opts *o, struct symz_stats *st);

/* Same, from a reader whose header was read (the stage driver opens it). */
int symz_run_reader(mtev_reader *rd, int out_fd, const struct symz_opts *o,
		    struct symz_stats *st);

#endif
