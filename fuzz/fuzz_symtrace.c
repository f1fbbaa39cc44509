/* libFuzzer target: mt-symbolize --trace (the symbolizer's records handed to
 * the trace writer through mtev_writer_alloc_sink and libcommon/twdrv.c)
 * against the pipe it replaces, mt-symbolize | mt-write (the records written
 * as MTEV, read back, then written as a trace).  Each input is an MTEV stream,
 * symbolized both ways without llvm-symbolizer (ELF symbol tables of the
 * files the maps name, else fallback names); any difference aborts: the
 * symbolizer's return value, whether the trace writer failed, its counters
 * and warnings, every byte of the trace.  The input's size picks the
 * variant: FXT or JSON, the resolve window (default, 1, 3, 64 records),
 * --no-args, --partial.  The pipe's middle must read back whole (the
 * symbolizer writes a complete stream or none).
 *
 * Seeds: fuzz_write's (span streams: tests/golden, mt-stitch and
 * mt-symbolize outputs cached by the tests). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memfd.h"
#include "mtev.h"
#include "symbolize.h"
#include "tracewrite.h"
#include "zsink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* one way's result */
struct way {
	int ret;	/* the symbolizer's */
	int tw_err;	/* the trace writer's first error, 0 */
	unsigned warns; /* the trace writer's warnings */
	struct tw_stats st;
	uint8_t *out;	/* the trace (kept between inputs) */
	size_t len, cap;
};

static struct way pipe_way, one_way;
static uint8_t *mid; /* the symbolizer's MTEV (the pipe's middle) */
static size_t mid_len, mid_cap;

static void sym_warn(void *ctx, int degraded, const char *msg)
{
	(void)ctx;
	(void)degraded;
	(void)msg;
}

static void tw_warn(void *ctx, const char *msg)
{
	(void)msg;
	((struct way *)ctx)->warns++;
}

static void opts_of(size_t size, struct symz_opts *o, struct tw_opts *t, struct way *w)
{
	static const size_t windows[] = {0, 1, 3, 64};
	memset(o, 0, sizeof *o);
	o->symbolizer = ""; /* ELF symbol tables only */
	o->timeout_ms = 1000;
	o->window = windows[(size >> 1) & 3];
	o->warn = sym_warn;
	o->partial = (size >> 4) & 1;
	memset(t, 0, sizeof *t);
	t->format = size & 1 ? TW_JSON : TW_FXT;
	t->no_args = (size >> 3) & 1;
	t->warn = tw_warn;
	t->warn_ctx = w;
}

static tw *open_trace(size_t size, zsink **z, struct way *w)
{
	struct symz_opts o;
	struct tw_opts t;
	opts_of(size, &o, &t, w);
	*z = zsink_alloc(FUZZ_FD_OUT, ZSINK_PLAIN, 0);
	FUZZ_ASSERT(*z, "zsink");
	tw *tr = tw_alloc(*z, &t);
	FUZZ_ASSERT(tr, "tw_alloc");
	return tr;
}

/* the trace's end, its bytes and counters into @w */
static void close_trace(tw *tr, zsink *z, struct way *w)
{
	if (!w->tw_err)
		w->tw_err = tw_finish(tr);
	if (!w->tw_err)
		FUZZ_ASSERT(zsink_finish(z) >= 0, "zsink_finish");
	tw_get_stats(tr, &w->st);
	size_t n;
	const uint8_t *p = fuzz_out(&n);
	fuzz_keep(&w->out, &w->len, &w->cap, p, n);
	tw_free(tr);
	zsink_free(z);
}

/* ---- the pipe: symbolize to MTEV, read it back, write the trace ---- */

static void run_pipe(const uint8_t *data, size_t size, struct way *w)
{
	struct symz_opts o;
	struct tw_opts t;
	struct symz_stats st;
	opts_of(size, &o, &t, w);
	fuzz_out_reset();
	w->ret = symz_stream(data, size, FUZZ_FD_OUT, &o, &st);
	w->tw_err = 0;
	w->warns = 0;
	w->len = 0;
	if (w->ret < 0)
		return; /* nothing written: mt-write does not run */
	size_t n;
	const uint8_t *p = fuzz_out(&n);
	fuzz_keep(&mid, &mid_len, &mid_cap, p, n);
	int err;
	mtev_reader *rd = mtev_reader_alloc_mem(mid, mid_len, &err);
	FUZZ_ASSERT(rd, "the symbolizer's own MTEV refused: %d", err);
	fuzz_out_reset();
	zsink *z;
	tw *tr = open_trace(size, &z, w);
	struct mtev_rec rec;
	int rc;
	while ((rc = mtev_read(rd, &rec)) > 0)
		if ((w->tw_err = tw_record(tr, &rec)) < 0)
			break;
	FUZZ_ASSERT(rc >= 0 || w->tw_err, "the symbolizer's own MTEV unreadable: %d", rc);
	close_trace(tr, z, w);
	mtev_reader_free(rd);
}

/* ---- one process: the symbolizer's records into the trace writer ---- */

static tw *one_tw;

static int sink(void *ctx, const struct mtev_rec *rec)
{
	struct way *w = ctx;
	int e = tw_record(one_tw, rec);
	if (e < 0) {
		w->tw_err = e;
		return -MTEV_EINVAL;
	}
	return 0;
}

static void run_one(const uint8_t *data, size_t size, struct way *w)
{
	struct symz_opts o;
	struct tw_opts t;
	struct symz_stats st;
	opts_of(size, &o, &t, w);
	w->tw_err = 0;
	w->warns = 0;
	w->len = 0;
	fuzz_out_reset();
	zsink *z;
	one_tw = open_trace(size, &z, w);
	o.sink = sink;
	o.sink_ctx = w;
	w->ret = symz_stream(data, size, -1, &o, &st);
	if (w->ret < 0) { /* mt-symbolize --trace leaves no output */
		tw_free(one_tw);
		zsink_free(z);
		return;
	}
	close_trace(one_tw, z, w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_pipe(data, size, &pipe_way);
	run_one(data, size, &one_way);
	FUZZ_ASSERT(pipe_way.ret == one_way.ret, "symbolizer: pipe %d, one process %d", pipe_way.ret,
		    one_way.ret);
	if (pipe_way.ret < 0)
		return 0;
	FUZZ_ASSERT(!pipe_way.tw_err == !one_way.tw_err, "trace writer error: pipe %d, one process %d",
		    pipe_way.tw_err, one_way.tw_err);
	FUZZ_ASSERT(pipe_way.warns == one_way.warns, "warnings: pipe %u, one process %u", pipe_way.warns,
		    one_way.warns);
	FUZZ_ASSERT(!memcmp(&pipe_way.st, &one_way.st, sizeof pipe_way.st), "trace writer counters differ");
	FUZZ_ASSERT(pipe_way.len == one_way.len && !memcmp(pipe_way.out, one_way.out, pipe_way.len),
		    "traces differ: %zu and %zu bytes", pipe_way.len, one_way.len);
	return 0;
}
