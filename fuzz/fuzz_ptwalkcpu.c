/* libFuzzer target: the cached walk (libcommon/ptd_walk.c) against the
 * libipt stepper on per-cpu recordings, the path fuzz_ptwalk (raw PT, one
 * queue, no sideband) does not reach: a cpu's queue that changes threads at
 * its switch records, and images that change with the thread.  Each input is
 * a whole perf.data, decoded twice as mt-decode decodes a file read through a
 * pipe (ptd_decode_perf): --decoder libipt, then --decoder walk-check (ptq's
 * answers checked against libipt's query by query).  Any difference aborts:
 * return value, error message, every warning, the statistics and every byte
 * of the MTEV output.
 *
 * The seeds are mt-ptsim's recordings of fuzz/ptprog.c as per-cpu buffers
 * whose cpu is handed to threads that do not exist and back (--per-cpu
 * --fake-switch, mk/fuzz.mk): one of the same process, one of another whose
 * maps hold the same file 16 bytes further on, so other code at the same
 * addresses.  Their images are found by build-id in
 * build/fuzz/ptsim/clean/images (FUZZ_PTWALKCPU_IMAGES=DIR for another). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imgfind.h"
#include "memfd.h"
#include "mtev.h"
#include "ptdecode.h"

struct warns {
	char buf[8192];
	size_t len;
	unsigned n;
};

static void warn_cb(void *ctx, const char *msg)
{
	struct warns *w = ctx;
	size_t n = strlen(msg);
	w->n++;
	if (w->len + n + 1 < sizeof w->buf) {
		memcpy(w->buf + w->len, msg, n);
		w->buf[w->len + n] = '\n';
		w->len += n + 1;
	}
}

static mtev_writer *cur_w;

static int open_out(void *ctx, uint32_t flags, mtev_writer **w)
{
	int err;
	(void)ctx;
	FUZZ_ASSERT(!cur_w, "output opened twice");
	*w = cur_w = mtev_writer_alloc(FUZZ_FD_OUT, "mt-decode", flags, &err);
	return *w ? 0 : -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("FUZZ_PTWALKCPU_IMAGES");
	(void)argc;
	(void)argv;
	FUZZ_ASSERT(img_dirs_add(dir ? dir : "build/fuzz/ptsim/clean/images") == 0, "images");
	return 0;
}

struct result {
	int ret;
	char errmsg[512];
	struct ptd_stats st;
	struct warns w;
	uint8_t *out;
	size_t outlen, cap;
};

static struct result ra, rb; /* libipt's, the walk's */

static void decode(const uint8_t *data, size_t size, int walk, struct result *r)
{
	static struct ptd_options o;
	const uint8_t *out;
	size_t len;

	memset(&r->st, 0, sizeof r->st);
	memset(&o, 0, sizeof o);
	r->w.len = 0;
	r->w.n = 0;
	o.warn = warn_cb;
	o.warn_ctx = &r->w;
	o.input_name = "stdin";
	o.walk = walk;
	o.walk_qry = walk ? 2 : 0;
	fuzz_in_set(data, size, 0);
	fuzz_out_reset();
	r->ret = ptd_decode_perf(FUZZ_FD_IN, open_out, NULL, &o, &r->st);
	memcpy(r->errmsg, o.errmsg, sizeof r->errmsg);
	if (cur_w) {
		if (r->ret == 0)
			FUZZ_ASSERT(mtev_writer_finish(cur_w) == 0, "finish");
		mtev_writer_free(cur_w);
		cur_w = NULL;
	}
	out = fuzz_out(&len);
	if (len > r->cap) {
		free(r->out);
		r->cap = len;
		r->out = malloc(len);
		FUZZ_ASSERT(r->out, "out of memory");
	}
	if (len)
		memcpy(r->out, out, len);
	r->outlen = len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result *a = &ra, *b = &rb;
	size_t i;

	decode(data, size, 0, a);
	decode(data, size, 1, b);
	FUZZ_ASSERT(a->ret == b->ret, "return: libipt %d, walk %d", a->ret, b->ret);
	FUZZ_ASSERT(!strcmp(a->errmsg, b->errmsg), "error: libipt '%s', walk '%s'", a->errmsg,
		    b->errmsg);
	FUZZ_ASSERT(a->w.n == b->w.n && a->w.len == b->w.len && !memcmp(a->w.buf, b->w.buf, a->w.len),
		    "warnings: libipt %u:\n%.*s\nwalk %u:\n%.*s", a->w.n, (int)a->w.len, a->w.buf,
		    b->w.n, (int)b->w.len, b->w.buf);
	FUZZ_ASSERT(a->st.blocks == b->st.blocks && a->st.insns == b->st.insns &&
			    a->st.branches == b->st.branches && a->st.gaps == b->st.gaps &&
			    a->st.retracted == b->st.retracted && a->st.degraded == b->st.degraded &&
			    a->st.records == b->st.records,
		    "stats: libipt blocks %llu insns %llu branches %llu gaps %llu, walk %llu %llu %llu %llu",
		    (unsigned long long)a->st.blocks, (unsigned long long)a->st.insns,
		    (unsigned long long)a->st.branches, (unsigned long long)a->st.gaps,
		    (unsigned long long)b->st.blocks, (unsigned long long)b->st.insns,
		    (unsigned long long)b->st.branches, (unsigned long long)b->st.gaps);
	for (i = 0; i < a->outlen && i < b->outlen && a->out[i] == b->out[i]; i++)
		;
	FUZZ_ASSERT(a->outlen == b->outlen && i == a->outlen,
		    "output: libipt %zu bytes, walk %zu, first difference at byte %zu", a->outlen,
		    b->outlen, i);
	return 0;
}
