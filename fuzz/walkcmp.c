/* fuzz/walkcmp.h: a decode's result, and libipt's against the walk's. */
#include "walkcmp.h"

#include <stdlib.h>
#include <string.h>

#include "memfd.h"

void walkcmp_warn(void *ctx, const char *msg)
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

void walkcmp_begin(struct walk_result *r)
{
	memset(&r->st, 0, sizeof r->st);
	r->w.len = 0;
	r->w.n = 0;
	fuzz_out_reset();
}

void walkcmp_end(struct walk_result *r, int ret, const struct ptd_options *o, mtev_writer *w)
{
	const uint8_t *out;
	size_t len;

	r->ret = ret;
	memcpy(r->errmsg, o->errmsg, sizeof r->errmsg);
	if (w) {
		if (ret == 0)
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

void walkcmp_check(const struct walk_result *a, const struct walk_result *b)
{
	size_t i;

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
}
