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
#include <stdlib.h>
#include <string.h>

#include "imgfind.h"
#include "memfd.h"
#include "mtev.h"
#include "ptdecode.h"
#include "walkcmp.h"

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

static struct walk_result ra, rb; /* libipt's, the walk's */

static void decode(const uint8_t *data, size_t size, int walk, struct walk_result *r)
{
	static struct ptd_options o;
	mtev_writer *w;
	int ret;

	walkcmp_begin(r);
	memset(&o, 0, sizeof o);
	o.warn = walkcmp_warn;
	o.warn_ctx = &r->w;
	o.input_name = "stdin";
	o.walk = walk;
	o.walk_qry = walk ? 2 : 0;
	fuzz_in_set(data, size, 0);
	ret = ptd_decode_perf(FUZZ_FD_IN, open_out, NULL, &o, &r->st);
	w = cur_w;
	cur_w = NULL;
	walkcmp_end(r, ret, &o, w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode(data, size, 0, &ra);
	decode(data, size, 1, &rb);
	walkcmp_check(&ra, &rb);
	return 0;
}
