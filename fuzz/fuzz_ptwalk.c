/* libFuzzer target: the cached walk (issue 20, libcommon/ptd_walk.c) against
 * the libipt stepper, its oracle.  Each input is raw PT, decoded twice like
 * `mt-decode --pt FILE --image ...` with fuzz_ptdecode's image (ptfuzz.h:
 * fuzz/ptprog.c's code, or FUZZ_PT_IMAGE=FILE:OFFSET:SIZE@VADDR):
 * --decoder libipt, then --decoder walk-check (the walk, its trace read by
 * the project's query decoder and libipt's in lockstep: a query whose
 * answer, time or offset differs exits 3).  Any difference aborts: the return
 * value, the error message, every warning, the statistics (blocks,
 * instructions, branches, gaps, retracted) and every byte of the MTEV output,
 * per-branch times included.  Inputs the walk does not emulate go to libipt
 * in both runs (identical by construction); the seeds (mt-ptsim's clean and
 * faulted recordings of the program) and their mutations are walked. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memfd.h"
#include "mtev.h"
#include "ptdecode.h"
#include "ptfuzz.h"

/* one run's warnings, concatenated */
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

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ptfuzz_init("ptwalk");
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

/* Decodes @path with libipt (@walk 0) or the walk into @r.  The output is
 * kept in r->out, a buffer kept between inputs. */
static void decode(const char *path, int walk, struct result *r)
{
	static struct ptd_options o;
	const uint8_t *out;
	mtev_writer *w;
	size_t len;

	memset(&r->st, 0, sizeof r->st);
	r->w.len = 0;
	r->w.n = 0;
	ptfuzz_options(&o, warn_cb, &r->w);
	o.walk = walk;
	o.walk_qry = walk ? 2 : 0; /* ptq checked against libipt, query by query */
	/* MTC/TMA time too: perf's default MTC period, a 2:1 TSC:CTC ratio */
	o.raw_mtc_freq = 3;
	o.raw_ctc_num = 2;
	o.raw_ctc_den = 1;
	fuzz_out_reset();
	r->ret = ptd_decode_raw(path, ptfuzz_open_out, NULL, &o, &r->st);
	memcpy(r->errmsg, o.errmsg, sizeof r->errmsg);
	w = ptfuzz_take_out();
	if (w) {
		if (r->ret == 0)
			FUZZ_ASSERT(mtev_writer_finish(w) == 0, "finish");
		mtev_writer_free(w);
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
	const char *path = ptfuzz_input(data, size);
	size_t i;

	decode(path, 0, a);
	decode(path, 1, b);
	FUZZ_ASSERT(a->ret == b->ret, "return: libipt %d, walk %d", a->ret, b->ret);
	FUZZ_ASSERT(!strcmp(a->errmsg, b->errmsg), "error: libipt '%s', walk '%s'", a->errmsg,
		    b->errmsg);
	FUZZ_ASSERT(a->w.n == b->w.n && a->w.len == b->w.len && !memcmp(a->w.buf, b->w.buf, a->w.len),
		    "warnings: libipt %u:\n%.*s\nwalk %u:\n%.*s", a->w.n, (int)a->w.len, a->w.buf,
		    b->w.n, (int)b->w.len, b->w.buf);
	FUZZ_ASSERT(a->st.blocks == b->st.blocks && a->st.insns == b->st.insns &&
			    a->st.branches == b->st.branches && a->st.gaps == b->st.gaps &&
			    a->st.retracted == b->st.retracted && a->st.degraded == b->st.degraded,
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
