/* libFuzzer target: the raw-PT decode path (libcommon/ptd_*.c, libipt's
 * block decoder), `mt-decode --pt FILE --image ...`, fed arbitrary bytes as PT
 * with a fixed image (ptfuzz.h: fuzz/ptprog.c's code, or FUZZ_PT_IMAGE).
 *
 * The decoder must return 0 (it reports damage as gaps, never fails on bad PT),
 * and its output must be a valid MTEV stream that keeps the contract of
 * formats/mtev-semantics.md: each thread's records in time order (the header
 * says sorted), gaps with begin <= end, a gap's end the time of the thread's
 * next branch (unless end = begin: unknown), a gap's PT offset inside the
 * input (or ~0), from/to zero exactly where the branch type says so (a
 * syscall's and an interrupt's to, a sysret's and an iret's from), an
 * interrupt with its from (the FUP), call/return/jump/jcc/syscall sources
 * inside the image, a
 * sysret, iret or trace-start with its target (where tracing resumes), after a
 * trace-end the thread's next branch is a trace-start, after a gap a
 * trace-start or a trace-end (tracing stopped at the gap's end), a sysret only
 * right after its syscall and an iret only right after its interrupt, and
 * after a syscall (interrupt) the next branch is its sysret (iret), a
 * trace-end, or a trace-start (tracing went on where it went on), or a gap.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <intel-pt.h>

#include "memfd.h"
#include "mtev.h"
#include "ptdecode.h"
#include "ptfuzz.h"

/* libipt's section cache, kept for the process: the image's section and its
 * block cache are built once, not per input (a cache: same output) */
static struct pt_image_section_cache *isc;

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	FUZZ_ASSERT(msg && *msg, "empty warning");
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ptfuzz_init("ptdecode");
	isc = pt_iscache_alloc("fuzz_ptdecode");
	FUZZ_ASSERT(isc, "pt_iscache_alloc");
	return 0;
}

#define MAXT 64

struct tstate {
	uint32_t tid;
	uint64_t time;
	int seen;
	int need_start; /* 1: only a trace-start may come; 2 (after a gap): or a trace-end */
	uint64_t gapend; /* end of the gap just before, ~0: none or unknown */
	unsigned prev; /* type of the previous branch, or ~0u (none, or a gap since) */
};

static struct tstate tst[MAXT];
static unsigned ntst;

static struct tstate *tget(uint32_t tid)
{
	for (unsigned i = 0; i < ntst; i++)
		if (tst[i].tid == tid)
			return &tst[i];
	FUZZ_ASSERT(ntst < MAXT, "too many threads");
	tst[ntst] = (struct tstate){.tid = tid, .need_start = 1, .prev = ~0u, .gapend = ~0ull};
	return &tst[ntst++];
}

static void check_output(size_t in_size)
{
	size_t len;
	const uint8_t *out = fuzz_out(&len);
	int err;
	mtev_reader *r = mtev_reader_alloc_mem(out, len, &err);
	FUZZ_ASSERT(r, "output header: %s", mtev_strerror(err));
	FUZZ_ASSERT(mtev_reader_header(r)->flags & MTEV_F_SORTED, "output not marked sorted");
	struct mtev_rec rec;
	int n;
	ntst = 0;
	while ((n = mtev_read(r, &rec)) > 0) {
		struct tstate *t;
		uint64_t time;
		switch (rec.kind) {
		case MTEV_BRANCH: {
			t = tget(rec.br.tid);
			time = rec.br.time;
			unsigned ty = rec.br.type;
			uint64_t from = rec.br.from, to = rec.br.to;
			FUZZ_ASSERT(!t->need_start || ty == MTEV_BR_TRACE_START ||
					    (t->need_start == 2 && ty == MTEV_BR_TRACE_END),
				    "tid %u: a %s at %llu where a trace-start must come first", t->tid,
				    mtev_branch_name(ty), (unsigned long long)time);
			/* a gap's end is the time of the first good record after
			 * it (or equal to its begin when unknown) */
			FUZZ_ASSERT(t->gapend == ~0ull || time == t->gapend,
				    "tid %u: a gap ends at %llu, the next branch is at %llu", t->tid,
				    (unsigned long long)t->gapend, (unsigned long long)time);
			t->gapend = ~0ull;
			t->need_start = ty == MTEV_BR_TRACE_END;
			FUZZ_ASSERT(t->prev != MTEV_BR_SYSCALL || ty == MTEV_BR_SYSRET ||
					    ty == MTEV_BR_TRACE_END || ty == MTEV_BR_TRACE_START,
				    "tid %u: a %s after a syscall at %llu", t->tid, mtev_branch_name(ty),
				    (unsigned long long)time);
			FUZZ_ASSERT(t->prev != MTEV_BR_INTERRUPT || ty == MTEV_BR_IRET ||
					    ty == MTEV_BR_TRACE_END || ty == MTEV_BR_TRACE_START,
				    "tid %u: a %s after an interrupt at %llu", t->tid,
				    mtev_branch_name(ty), (unsigned long long)time);
			FUZZ_ASSERT(ty != MTEV_BR_SYSRET || t->prev == MTEV_BR_SYSCALL,
				    "tid %u: a sysret at %llu not after a syscall", t->tid,
				    (unsigned long long)time);
			FUZZ_ASSERT(ty != MTEV_BR_IRET || t->prev == MTEV_BR_INTERRUPT,
				    "tid %u: an iret at %llu not after an interrupt", t->tid,
				    (unsigned long long)time);
			t->prev = ty;
			switch (ty) {
			case MTEV_BR_CALL:
			case MTEV_BR_RETURN:
			case MTEV_BR_JUMP:
			case MTEV_BR_JCC:
				/* to may be 0: a call through a null pointer is
				 * a real branch (then a fault) */
				FUZZ_ASSERT(from && ptfuzz_in_image(from), "%s 0x%llx -> 0x%llx",
					    mtev_branch_name(ty), (unsigned long long)from,
					    (unsigned long long)to);
				break;
			case MTEV_BR_SYSCALL:
				/* to is always 0 (mtev-semantics); a trace that goes on
				 * through the far branch (corrupt, or a far branch to
				 * traced code) is syscall + sysret */
				FUZZ_ASSERT(from && ptfuzz_in_image(from) && !to, "syscall 0x%llx -> 0x%llx",
					    (unsigned long long)from, (unsigned long long)to);
				break;
			case MTEV_BR_INTERRUPT:
				/* from: the next unexecuted instruction (the FUP) */
				FUZZ_ASSERT(from && !to, "interrupt 0x%llx -> 0x%llx",
					    (unsigned long long)from, (unsigned long long)to);
				break;
			case MTEV_BR_SYSRET:
			case MTEV_BR_IRET:
				FUZZ_ASSERT(!from && to, "%s 0x%llx -> 0x%llx", mtev_branch_name(ty),
					    (unsigned long long)from, (unsigned long long)to);
				break;
			case MTEV_BR_TRACE_START:
				FUZZ_ASSERT(!from && to, "%s 0x%llx -> 0x%llx", mtev_branch_name(ty),
					    (unsigned long long)from, (unsigned long long)to);
				break;
			case MTEV_BR_TRACE_END:
				FUZZ_ASSERT(!to, "trace-end to 0x%llx", (unsigned long long)to);
				break;
			}
			break;
		}
		case MTEV_GAP:
			t = tget(rec.gap.tid);
			time = rec.gap.begin;
			FUZZ_ASSERT(rec.gap.begin <= rec.gap.end, "gap ends before it begins");
			FUZZ_ASSERT(rec.gap.reason >= 1 && rec.gap.reason < MTEV_GAP__COUNT,
				    "gap reason %u", rec.gap.reason);
			/* offset: where in the PT the error was found, or ~0 */
			FUZZ_ASSERT(rec.gap.offset == ~0ull || rec.gap.offset <= in_size, "gap at PT offset %llu of %zu",
				    (unsigned long long)rec.gap.offset, in_size);
			t->need_start = 2;
			t->prev = ~0u;
			if (t->seen && t->time > time)
				break; /* reported below */
			/* end: the time of the first good record after it */
			t->seen = 1;
			t->time = rec.gap.end;
			t->gapend = rec.gap.end == rec.gap.begin ? ~0ull : rec.gap.end;
			continue;
		default:
			continue;
		}
		FUZZ_ASSERT(!t->seen || time >= t->time,
			    "tid %u: time goes back from %llu to %llu (the header says sorted)", t->tid,
			    (unsigned long long)t->time, (unsigned long long)time);
		t->seen = 1;
		t->time = time;
	}
	FUZZ_ASSERT(n == 0, "output: %s at %llu", mtev_strerror(n),
		    (unsigned long long)mtev_reader_offset(r));
	mtev_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ptd_options o;
	struct ptd_stats st;
	const char *path = ptfuzz_input(data, size);
	mtev_writer *w;

	ptfuzz_options(&o, warn_cb, NULL);
	o.iscache = isc;
	fuzz_out_reset();
	int ret = ptd_decode_raw(path, ptfuzz_open_out, NULL, &o, &st);
	w = ptfuzz_take_out();
	FUZZ_ASSERT(ret == 0, "ptd_decode_raw: %d: %s", ret, o.errmsg);
	/* the caller finishes the stream after a successful return (mt-decode does) */
	FUZZ_ASSERT(w, "no output opened");
	FUZZ_ASSERT(mtev_writer_finish(w) == 0, "finish");
	mtev_writer_free(w);
	check_output(size);
	return 0;
}
