/* seg_gen N [THREADS] [CALLPCT]: a synthetic, well-formed branch stream for
 * benchmarking mt-segment / mt-stitch: N branch records over THREADS threads
 * (default 1), of which CALLPCT percent are calls (default 30; as many
 * returns; the rest jcc and jumps inside the current function), stack depth
 * kept between 1 and 200, a timestamp shared by runs of 1..8 records, one
 * trace-start per thread.  Functions are 4 KiB apart; no map records, so
 * mt-segment uses call targets only.  MTEV on stdout. */
#include "mtev.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct gth {
	uint64_t stk[256]; /* function entry per level */
	uint64_t cs[256];  /* call site per level */
	int n;
	uint64_t time, ip;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: seg_gen N [THREADS] [CALLPCT]\n");
		return 2;
	}
	uint64_t n = strtoull(argv[1], NULL, 0);
	int nth = argc > 2 ? atoi(argv[2]) : 1;
	int callpct = argc > 3 ? atoi(argv[3]) : 30;
	if (nth < 1 || nth > 64 || callpct < 1 || callpct > 50) {
		fprintf(stderr, "seg_gen: bad arguments\n");
		return 2;
	}
	int err;
	mtev_writer *w = mtev_writer_alloc(1, "seg_gen", MTEV_F_SORTED, &err);
	if (!w)
		return 111;
	struct gth th[64];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	struct mtev_rec r = {0};
	r.kind = MTEV_BRANCH;
	for (int i = 0; i < nth; i++) {
		th[i].n = 1;
		th[i].stk[0] = 0x400000;
		th[i].time = 1000;
		th[i].ip = 0x400010;
		r.br.tid = (uint32_t)(100 + i);
		r.br.time = th[i].time;
		r.br.type = MTEV_BR_TRACE_START;
		r.br.from = 0;
		r.br.to = th[i].ip;
		if (mtev_write(w, &r))
			return 111;
	}
	int run = 0;
	for (uint64_t k = 0; k < n; k++) {
		int i = (int)(k / 64 % (uint64_t)nth); /* threads interleave in blocks */
		struct gth *t = &th[i];
		uint64_t x = rnd(&seed);
		if (--run <= 0) {
			t->time += 1 + x % 7;
			run = 1 + (int)((x >> 8) % 8);
		}
		unsigned p = (unsigned)((x >> 16) % 100);
		uint64_t fn = t->stk[t->n - 1];
		uint64_t from = fn + 0x10 + (x >> 24) % 0x800;
		r.br.tid = (uint32_t)(100 + i);
		r.br.time = t->time;
		if ((p < (unsigned)callpct && t->n < 200) || t->n == 1) {
			uint64_t to = 0x400000 + ((x >> 32) % 4096) * 0x1000;
			r.br.type = MTEV_BR_CALL;
			r.br.from = from;
			r.br.to = to;
			t->cs[t->n] = from;
			t->stk[t->n++] = to;
		} else if (p < 2u * (unsigned)callpct) {
			r.br.type = MTEV_BR_RETURN;
			r.br.from = from;
			r.br.to = t->cs[--t->n] + 5;
		} else {
			r.br.type = p & 1 ? MTEV_BR_JCC : MTEV_BR_JUMP;
			r.br.from = from;
			r.br.to = fn + 0x10 + (x >> 40) % 0x800;
		}
		if (mtev_write(w, &r))
			return 111;
	}
	return mtev_writer_finish(w) ? 111 : 0;
}
