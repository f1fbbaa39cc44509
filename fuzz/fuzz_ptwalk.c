/* libFuzzer target: the cached walk (issue 20, libcommon/ptd_walk.c) against
 * the libipt stepper, its oracle.  Each input is raw PT, decoded twice like
 * `mt-decode --pt FILE --image ...` with fuzz_ptdecode's image (the recursion
 * test program at 0x401000, or FUZZ_PT_IMAGE=FILE:OFFSET:SIZE@VADDR):
 * --decoder libipt, then --decoder walk.  Any difference aborts: the return
 * value, the error message, every warning, the statistics (blocks,
 * instructions, branches, gaps, retracted) and every byte of the MTEV output,
 * per-branch times included.  Inputs the walk does not emulate go to libipt
 * in both runs (identical by construction); the seeds (mt-ptsim's clean and
 * faulted recordings of the program) and their mutations are walked. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memfd.h"
#include "mtev.h"
#include "ptdecode.h"

static char pt_path[64];
static struct ptd_image_spec image;
static int have_image;
static mtev_writer *cur_w;

/* one run's warnings, concatenated */
struct warns {
	char buf[8192];
	size_t len;
	unsigned n;
};

static int open_out(void *ctx, uint32_t flags, mtev_writer **w)
{
	int err;
	(void)ctx;
	FUZZ_ASSERT(!cur_w, "output opened twice");
	*w = cur_w = mtev_writer_alloc(FUZZ_FD_OUT, "mt-decode", flags, &err);
	return *w ? 0 : -1;
}

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

static void init(void)
{
	snprintf(pt_path, sizeof pt_path, "/dev/shm/mt-fuzz-ptwalk.%d", (int)getpid());
	const char *spec = getenv("FUZZ_PT_IMAGE");
	if (spec) {
		FUZZ_ASSERT(ptd_parse_image_spec(spec, &image) == 0, "bad FUZZ_PT_IMAGE %s", spec);
		have_image = 1;
	} else if (access("build/programs/recursion", R_OK) == 0) {
		image = (struct ptd_image_spec){"build/programs/recursion", 0x1000, 0x78000, 0x401000};
		have_image = 1;
	}
}

struct result {
	int ret;
	char errmsg[512];
	struct ptd_stats st;
	struct warns w;
	uint8_t *out;
	size_t outlen;
};

static void decode(int walk, struct result *r)
{
	static struct ptd_options o;
	const uint8_t *out;

	memset(&o, 0, sizeof o);
	memset(r, 0, sizeof *r);
	o.images = have_image ? &image : NULL;
	o.nimages = have_image ? 1 : 0;
	o.raw_pid = 1;
	o.raw_tid = 1;
	o.cpu_family = 6;
	o.cpu_model = 0x5e;
	o.warn = warn_cb;
	o.warn_ctx = &r->w;
	o.walk = walk;
	fuzz_out_reset();
	r->ret = ptd_decode_raw(pt_path, open_out, NULL, &o, &r->st);
	memcpy(r->errmsg, o.errmsg, sizeof r->errmsg);
	if (cur_w) {
		if (r->ret == 0)
			FUZZ_ASSERT(mtev_writer_finish(cur_w) == 0, "finish");
		mtev_writer_free(cur_w);
		cur_w = NULL;
	}
	out = fuzz_out(&r->outlen);
	r->out = malloc(r->outlen + 1);
	FUZZ_ASSERT(r->out, "out of memory");
	memcpy(r->out, out, r->outlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result *a = malloc(sizeof *a), *b = malloc(sizeof *b);
	size_t i;

	FUZZ_ASSERT(a && b, "out of memory");
	if (!pt_path[0])
		init();
	int fd = open(pt_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_ASSERT(fd >= 0, "%s: %s", pt_path, strerror(errno));
	FUZZ_ASSERT(!size || write(fd, data, size) == (ssize_t)size, "write %s", pt_path);
	close(fd);

	decode(0, a);
	decode(1, b);
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
	free(a->out);
	free(b->out);
	free(a);
	free(b);
	unlink(pt_path);
	return 0;
}
