/* libFuzzer target: mt-decode --stitch (the decoder's records handed to the
 * segmenter and stitcher through ptd_options.sink, in process) against the
 * pipe it replaces, mt-decode | mt-segment --stitch (the records written as
 * MTEV, read back, then segmented).  Each input is a whole perf.data,
 * decoded both ways as mt-decode decodes a file read through a pipe; any
 * difference aborts: the decoder's return value, the segmenter's error and
 * the record it came on, and every byte of the output.  One thread: the
 * batches of mt-decode's segmenter thread are tools/mt-decode.c's, checked by
 * tests/decode-segment.bats (also under ThreadSanitizer).
 *
 * Seeds: fuzz_ptwalkcpu's (mt-ptsim's per-cpu recordings of fuzz/ptprog.c
 * with thread switches) and fuzz_perfdata's; images as fuzz_ptwalkcpu's
 * (FUZZ_DECSTITCH_IMAGES=DIR for another). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "imgfind.h"
#include "memfd.h"
#include "mtev.h"
#include "ptdecode.h"
#include "segdrv.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_DECSTITCH_IMAGES");
	(void)argc;
	(void)argv;
	FUZZ_ASSERT(img_dirs_add(dir ? dir : "build/fuzz/ptsim/clean/images") == 0, "images");
	return 0;
}

/* one way's result */
struct way {
	int ret;	  /* the decoder's */
	int seg_err;	  /* the segmenter's or stitcher's first error, 0 */
	uint64_t recno;	  /* the record it came on, from 1 */
	uint8_t *out;	  /* the output (kept between inputs) */
	size_t len, cap;
};

static struct way pipe_way, one_way;
static uint8_t *mtev_buf; /* the decoder's MTEV (the pipe's middle) */
static size_t mtev_len, mtev_cap;

static const struct segdrv_opts *seg_opts(void)
{
	static struct segdrv_opts o;
	segdrv_opts_init(&o);
	o.stitch = 1;
	o.no_cache = 1;
	o.mem_limit = 4096; /* the stitcher's spill path too */
	return &o;
}

/* the output header mt-segment writes for an input of @flags */
static uint32_t seg_flags(uint32_t flags)
{
	return MTEV_F_SPANS | (flags & (MTEV_F_SORTED | MTEV_F_SAMPLING | MTEV_F_SYMBOLS));
}

/* ---- the pipe: decode to MTEV, read it back, segment ---- */

static mtev_writer *dec_w;

static int open_plain(void *ctx, uint32_t flags, mtev_writer **w)
{
	int err;
	(void)ctx;
	*w = dec_w = mtev_writer_alloc(FUZZ_FD_OUT, "mt-decode", flags, &err);
	return *w ? 0 : -1;
}

static void run_pipe(const uint8_t *data, size_t size, struct way *r)
{
	static struct ptd_options o;
	struct ptd_stats st;
	memset(&o, 0, sizeof o);
	o.input_name = "stdin";
	o.walk = 1;
	fuzz_in_set(data, size, 0);
	fuzz_out_reset();
	dec_w = NULL;
	r->ret = ptd_decode_perf(FUZZ_FD_IN, open_plain, NULL, &o, &st);
	r->seg_err = 0;
	r->recno = 0;
	r->len = 0;
	if (dec_w && r->ret >= 0)
		FUZZ_ASSERT(mtev_writer_finish(dec_w) >= 0, "finishing the decoder's MTEV");
	mtev_writer_free(dec_w);
	dec_w = NULL;
	if (r->ret < 0)
		return; /* no complete stream: mt-segment refuses it */
	size_t n;
	const uint8_t *p = fuzz_out(&n);
	fuzz_keep(&mtev_buf, &mtev_len, &mtev_cap, p, n);

	int err;
	mtev_reader *rd = mtev_reader_alloc_mem(mtev_buf, mtev_len, &err);
	FUZZ_ASSERT(rd, "the decoder's own MTEV refused: %d", err);
	fuzz_out_reset();
	mtev_writer *w = mtev_writer_alloc(FUZZ_FD_OUT, "mt-decode --stitch",
					   seg_flags(mtev_reader_header(rd)->flags), &err);
	FUZZ_ASSERT(w, "writer");
	struct segdrv sd;
	segdrv_open(&sd, seg_opts(), w);
	struct mtev_rec recs[64];
	int rc = 0;
	for (;;) {
		size_t at, k = mtev_read_branches(rd, recs, NULL, 64);
		if (!k) {
			if ((rc = mtev_read(rd, &recs[0])) <= 0)
				break;
			k = 1;
		}
		int e = k == 1 ? seg_feed(sd.s, recs) : seg_feed_n(sd.s, recs, k, &at);
		if (e) {
			r->seg_err = e;
			r->recno += (k == 1 ? 0 : at) + 1;
			break;
		}
		r->recno += k;
	}
	FUZZ_ASSERT(rc >= 0, "the decoder's own MTEV unreadable at record %llu: %d",
		    (unsigned long long)r->recno, rc);
	if (!r->seg_err && (r->seg_err = seg_finish(sd.s)) == 0 && (r->seg_err = stitch_finish(sd.sti)) == 0)
		FUZZ_ASSERT(mtev_writer_finish(w) >= 0, "finishing the output");
	if (!r->seg_err) {
		p = fuzz_out(&n);
		fuzz_keep(&r->out, &r->len, &r->cap, p, n);
	}
	segdrv_free(&sd);
	mtev_writer_free(w);
	mtev_reader_free(rd);
}

/* ---- one process: the decoder's records into the segmenter ---- */

static struct segdrv one_sd;
static mtev_writer *one_w;

static int open_seg(void *ctx, uint32_t flags, mtev_writer **w)
{
	int err;
	(void)ctx;
	*w = one_w = mtev_writer_alloc(FUZZ_FD_OUT, "mt-decode --stitch", seg_flags(flags), &err);
	if (!one_w)
		return -1;
	segdrv_open(&one_sd, seg_opts(), one_w);
	return 0;
}

static int sink_rec(void *ctx, const struct mtev_rec *rec)
{
	struct way *r = ctx;
	int e = seg_feed(one_sd.s, rec);
	if (e) {
		r->seg_err = e;
		r->recno++;
		return -1;
	}
	r->recno++;
	return 0;
}

static long sink_run(void *ctx, const struct mtev_rec *rec, size_t n, uint64_t limit)
{
	struct way *r = ctx;
	size_t m = 0, at;
	while (m < n && rec[m].kind == MTEV_BRANCH && rec[m].br.time <= limit)
		m++;
	int e = m ? seg_feed_n(one_sd.s, rec, m, &at) : 0;
	if (e) {
		r->seg_err = e;
		r->recno += at + 1;
		return -1;
	}
	r->recno += m;
	return (long)m;
}

static void run_one(const uint8_t *data, size_t size, struct way *r)
{
	static struct ptd_options o;
	static struct ptd_sink sink = {sink_rec, sink_run, NULL};
	struct ptd_stats st;
	memset(&o, 0, sizeof o);
	o.input_name = "stdin";
	o.walk = 1;
	sink.ctx = r;
	o.sink = &sink;
	r->seg_err = 0;
	r->recno = 0;
	r->len = 0;
	fuzz_in_set(data, size, 0);
	fuzz_out_reset();
	one_w = NULL;
	r->ret = ptd_decode_perf(FUZZ_FD_IN, open_seg, NULL, &o, &st);
	if (one_w && r->ret >= 0 && !r->seg_err) {
		if ((r->seg_err = seg_finish(one_sd.s)) == 0 &&
		    (r->seg_err = stitch_finish(one_sd.sti)) == 0) {
			FUZZ_ASSERT(mtev_writer_finish(one_w) >= 0, "finishing the output");
			size_t n;
			const uint8_t *p = fuzz_out(&n);
			fuzz_keep(&r->out, &r->len, &r->cap, p, n);
		}
	}
	if (one_w)
		segdrv_free(&one_sd);
	mtev_writer_free(one_w);
	one_w = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_pipe(data, size, &pipe_way);
	run_one(data, size, &one_way);
	struct way *a = &pipe_way, *b = &one_way;
	if (a->seg_err) { /* the segmenter refused a record: the same one */
		FUZZ_ASSERT(b->seg_err == a->seg_err && b->recno == a->recno,
			    "segmenter error %d on record %llu, in process %d on %llu", a->seg_err,
			    (unsigned long long)a->recno, b->seg_err, (unsigned long long)b->recno);
		return 0;
	}
	FUZZ_ASSERT(!b->seg_err, "in process: segmenter error %d on record %llu (the pipe: none)",
		    b->seg_err, (unsigned long long)b->recno);
	FUZZ_ASSERT(a->ret == b->ret, "decoder returned %d, in process %d", a->ret, b->ret);
	if (a->ret < 0)
		return 0;
	FUZZ_ASSERT(a->len == b->len && !memcmp(a->out, b->out, a->len),
		    "outputs differ: %zu bytes, in process %zu", a->len, b->len);
	return 0;
}
