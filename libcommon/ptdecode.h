/* ptdecode: Intel PT in perf.data (or raw PT plus memory images) to MTEV
 * events with libipt's block decoder; sampling recordings to sample and
 * trigger events.
 *
 * The output follows formats/mtev-semantics.md: a clock record, then process,
 * thread and map records, every taken branch, stack samples, triggers and
 * gaps, each thread's records in time order (MTEV_F_SORTED).  Threads may be
 * interleaved; records of all threads come out in (near) global time order.
 *
 * Library code: never prints.  Warnings go to opts->warn (one call per
 * problem; the caller prints them), the return value says how it went.
 */
#ifndef MT_PTDECODE_H
#define MT_PTDECODE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mtev.h"

enum ptd_err {
	PTD_EINPUT = 1,	 /* unusable input (not perf.data, corrupt container, ...) */
	PTD_ESYS = 2,	 /* system error (I/O, memory): errno-like detail in the message */
	PTD_EOUTPUT = 3, /* writing MTEV failed */
	PTD_EUSAGE = 4,	 /* bad options (e.g. --image spec) */
};

struct pt_image_section_cache; /* libipt's */

struct ptd_image_spec { /* raw mode: FILE[:OFFSET[:SIZE]]@VADDR */
	const char *file;
	uint64_t offset, size; /* size 0: to the end of the file */
	uint64_t vaddr;
};

struct ptd_options {
	/* images are looked up with img_find (imgfind.h: --images DIR) */
	int no_images;		 /* do not look for images at all (-> gaps) */
	int partial;		 /* a truncated perf.data: decode what is there (else -PTD_EINPUT) */
	const char *input_name;	 /* the input in messages ("stdin", a path); NULL: "perf.data" */
	/* raw mode */
	const struct ptd_image_spec *images;
	size_t nimages;
	int cpu_family, cpu_model, cpu_stepping; /* 0: unknown vendor */
	uint32_t raw_pid, raw_tid;
	/* raw mode: what perf's AUXTRACE_INFO gives: the MTC period (log2 of CTC
	 * ticks), CPUID 0x15 EBX/EAX (TSC:CTC), the nominal core:bus ratio */
	uint32_t raw_mtc_freq, raw_ctc_num, raw_ctc_den, raw_nom_freq;
	int walk; /* 1: decode with the cached walk (ptd_walk.c) where it can, else
		   * libipt's block decoder; 2: the walk or fail (-PTD_EINPUT) */
	int walk_qry; /* the walk's trace: 0 the project's query decoder (ptq.c) where it
		       * can, else libipt's; 1 libipt's; 2 both in lockstep, exit 3 where
		       * they differ */
	/* NULL: a fresh libipt section cache per decode.  Else the caller's,
	 * kept between decodes: the same file section is added once and keeps
	 * its block cache (a cache of the code's blocks: no result depends on
	 * it).  The fuzz target's, which decodes one image over and over. */
	struct pt_image_section_cache *iscache;
	int resync; /* after damage, go on before the next PSB where exact (docs/decode.md) */
	/* threads decoding PT (PSB-parallel, docs/decode.md): 0 or 1 serial */
	int jobs;
	uint64_t chunk_bytes; /* bytes of trace per chunk at least; 0: 4 KiB */
	int par_fallback;     /* test: never switch chunks, take the serial fallback */
	int par_answers;      /* -j: workers record libipt's answers only, no records */
	/* sampling: frame-pointer stacks are not completed with their
	 * thread's root chain (docs/sampling.md) */
	int no_root_join;
	/* where the records go instead of the output's MTEV writer (mt-decode
	 * --segment: into the segmenter, in this process); NULL: the writer */
	const struct ptd_sink *sink;
	/* called now and then while the trace is decoded (mt-decode's progress
	 * on a terminal): @done of @total ns of the recording's time, from its
	 * first timed perf record to its last, are written out; NULL: never */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* diagnostics: called once per problem with a one-line message */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
	/* a message for fatal errors (filled on a negative return) */
	char errmsg[512];
};

/* A consumer of the decoded records in place of an MTEV writer: @rec takes
 * one record, as mtev_write; @run the branch records that come first in
 * @r[0..@n) with time <= @limit, and returns how many it took, as
 * mtev_write_upto.  The records are only valid during the call.  A negative
 * return stops the decoder (-PTD_EOUTPUT); the sink keeps its own error. */
struct ptd_sink {
	int (*rec)(void *ctx, const struct mtev_rec *r);
	long (*run)(void *ctx, const struct mtev_rec *r, size_t n, uint64_t limit);
	void *ctx;
};

struct ptd_stats {
	uint64_t records;		/* perf records read */
	uint64_t rec_by_type[128];	/* by PD_REC_* type (type < 128) */
	uint64_t aux_bytes;		/* AUXTRACE payload bytes */
	uint64_t branches, gaps, samples, triggers;
	uint64_t unwound; /* samples whose user stack copy was unwound (--call-graph dwarf) */
	uint64_t roots;	  /* root samples (a stack-copy stream beside frame-pointer samples) */
	uint64_t roots_whole; /* of those, unwound to the thread's outermost frame */
	uint64_t rooted;  /* frame-pointer samples completed with their thread's root chain */
	uint64_t blocks, insns;		/* from the block decoder */
	uint64_t retracted;		/* branches dropped: decoded from trace found corrupt later */
	uint64_t resync_tries, resyncs; /* resyncs before the next PSB: tried, done */
	uint64_t resync_skipped;	/* bytes from the damage to where packets were found */
	uint64_t warnings;
	/* -j N: chunks decoded on threads, switched to at a PSB, and serial
	 * fallbacks (the records could not answer) */
	uint64_t par_chunks, par_spliced, par_fallbacks;
	uint64_t par_bodies, par_body_recs; /* stretches of records decoded on workers */
	uint64_t walk_checked; /* --decoder walk-check: trace segments ptq decoded in lockstep */
	int degraded; /* the data had errors: gaps, missing images, truncation */
};

/* Decodes perf.data read from @fd_in.  When the input has been read,
 * open_out(@out_ctx, flags, &w) is called once to open the output with the
 * stream's MTEV header flags (MTEV_F_SORTED, and MTEV_F_SAMPLING for a
 * sampling recording); the records are written to w, and the caller calls
 * mtev_writer_finish() after a successful return.  Returns 0 (ok or
 * degraded: see stats->degraded) or -PTD_E* with opts->errmsg set. */
int ptd_decode_perf(int fd_in, int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w),
		    void *out_ctx, struct ptd_options *opts, struct ptd_stats *stats);

/* Raw PT in @pt_file decoded with opts->images; one thread (raw_pid/raw_tid),
 * times are raw TSC (the clock record says so: mult 1, shift 0). */
int ptd_decode_raw(const char *pt_file, int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w),
		   void *out_ctx, struct ptd_options *opts, struct ptd_stats *stats);

/* Lists every perf.data record of @fd_in, one line each, to @out:
 * `OFFSET TYPE key=value ...` (AUXTRACE lines carry idx= size=; see
 * ptd_list.c).  Returns 0 or -PTD_E* with opts->errmsg set. */
int ptd_list_records(int fd_in, FILE *out, struct ptd_options *opts);

/* Parses "FILE[:OFFSET[:SIZE]]@VADDR" (numbers in C syntax). 0 or -1. */
int ptd_parse_image_spec(const char *arg, struct ptd_image_spec *spec);


#endif
