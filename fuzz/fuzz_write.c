/* libFuzzer target: any bytes as an MTEV stream into mt-write's library
 * (tracewrite + FXT/JSON encoders), output discarded.  Build and run:
 *   make fuzz-write && build/fuzz/fuzz_write -max_total_time=60 fuzz/corpus-write
 * The first input byte picks the format, the rest is the stream. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "mtev.h"
#include "tracewrite.h"
#include "zsink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int devnull = -1;
	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY);
	if (size < 1)
		return 0;
	struct tw_opts o = {.format = data[0] & 1 ? TW_JSON : TW_FXT, .no_args = (data[0] >> 1) & 1};
	int err;
	mtev_reader *r = mtev_reader_alloc_mem(data + 1, size - 1, &err);
	if (!r)
		return 0;
	zsink *z = zsink_alloc(devnull, ZSINK_PLAIN, 0);
	tw *t = tw_alloc(z, &o);
	struct mtev_rec rec;
	while (mtev_read(r, &rec) > 0)
		if (tw_record(t, &rec) < 0)
			break;
	tw_finish(t);
	tw_free(t);
	zsink_free(z);
	mtev_reader_free(r);
	return 0;
}
