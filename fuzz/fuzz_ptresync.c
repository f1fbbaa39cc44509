/* libFuzzer target: fuzz_ptdecode with `--resync` (ptd_options.resync):
 * after damaged or lost trace the decoder goes on before the next PSB
 * (libcommon/ptd_resync.c), the path mt-decode takes only when asked.  The
 * input, image and every check of the output are fuzz_ptdecode's (its source
 * is compiled again here, its one call of ptd_decode_raw routed through
 * resync_decode below), so the two targets judge one contract and
 * fuzz_ptdecode's own binary does not change. */
#include "ptdecode.h"

static int resync_decode(const char *path,
			 int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w), void *ctx,
			 struct ptd_options *o, struct ptd_stats *st)
{
	o->resync = 1;
	return ptd_decode_raw(path, open_out, ctx, o, st);
}

#define ptd_decode_raw resync_decode
#include "fuzz_ptdecode.c"
