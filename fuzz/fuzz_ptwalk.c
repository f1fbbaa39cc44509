/* libFuzzer target: the cached walk (issue 20, libcommon/ptd_walk.c) against
 * the libipt stepper, its oracle.  Each input is raw PT, decoded twice like
 * `mt-decode --pt FILE --image ...` with fuzz_ptdecode's image (ptfuzz.h:
 * fuzz/ptprog.c's code, or FUZZ_PT_IMAGE=FILE:OFFSET:SIZE@VADDR):
 * --decoder libipt, then --decoder walk-check (the walk, its trace read by
 * the project's query decoder and libipt's in lockstep: a query whose
 * answer, time or offset differs exits 3).  Any difference aborts: the return
 * value, the error message, every warning, the statistics (blocks,
 * instructions, branches, gaps, retracted, records) and every byte of the
 * MTEV output, per-branch times included (fuzz/walkcmp.c).  Inputs the walk does not emulate go to libipt
 * in both runs (identical by construction); the seeds (mt-ptsim's clean and
 * faulted recordings of the program) and their mutations are walked. */
#include <stdint.h>

#include "memfd.h"
#include "ptdecode.h"
#include "ptfuzz.h"
#include "walkcmp.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ptfuzz_init("ptwalk");
	return 0;
}

static struct walk_result ra, rb; /* libipt's, the walk's */

/* Decodes @path with libipt (@walk 0) or the walk into @r. */
static void decode(const char *path, int walk, struct walk_result *r)
{
	static struct ptd_options o;
	int ret;

	walkcmp_begin(r);
	ptfuzz_options(&o, walkcmp_warn, &r->w);
	o.walk = walk;
	o.walk_qry = walk ? 2 : 0; /* ptq checked against libipt, query by query */
	/* MTC/TMA time too: perf's default MTC period, a 2:1 TSC:CTC ratio */
	o.raw_mtc_freq = 3;
	o.raw_ctc_num = 2;
	o.raw_ctc_den = 1;
	ret = ptd_decode_raw(path, ptfuzz_open_out, NULL, &o, &r->st);
	walkcmp_end(r, ret, &o, ptfuzz_take_out());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = ptfuzz_input(data, size);

	decode(path, 0, &ra);
	decode(path, 1, &rb);
	walkcmp_check(&ra, &rb);
	return 0;
}
