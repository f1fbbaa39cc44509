/* bench/mtev_bench: write N branch records of a realistic stream to a memfd,
 * read them back, report records/s each way and bytes per branch record.
 *
 * The stream models what mt-decode emits: 4 threads switching every ~1000
 * branches; per thread a call/return structure over 3000 functions spread
 * over an 8 MiB text segment (calls to function entries, returns to the
 * instruction after the call, taken jcc and jumps within the function),
 * syscalls every ~5000 branches, times advancing 0..40 ns per branch. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mtev.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static inline uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000;
	enum { NF = 3000, NT = 4, DEPTH = 64 };
	uint64_t *fn = malloc(NF * sizeof *fn);
	for (int i = 0; i < NF; i++)
		fn[i] = 0x400000 + (rnd() % (8 << 20)) / 16 * 16;
	struct {
		uint64_t stack[DEPTH], pc, t;
		int sp;
	} th[NT];
	for (int i = 0; i < NT; i++) {
		th[i].sp = 0;
		th[i].pc = fn[i];
		th[i].t = 1000000000ull + (uint64_t)i;
	}
	struct mtev_rec *recs = malloc(sizeof *recs * (1 << 16));
	int fd = memfd_create("mtev", 0);
	int err;
	mtev_writer *w = mtev_writer_alloc(fd, "bench", MTEV_F_SORTED, &err);
	int cur = 0;
	double tw = 0;
	for (uint64_t done = 0; done < n;) {
		/* generate a batch, then time only the writes */
		uint64_t m = n - done < (1 << 16) ? n - done : (1 << 16);
		for (uint64_t i = 0; i < m; i++) {
			if (rnd() % 1000 == 0)
				cur = (int)(rnd() % NT);
			struct mtev_rec *r = &recs[i];
			r->kind = MTEV_BRANCH;
			r->br.tid = 1000 + (uint32_t)cur;
			th[cur].t += rnd() % 41;
			r->br.time = th[cur].t;
			uint64_t from = th[cur].pc + 2 + rnd() % 60;
			uint64_t x = rnd() % 100;
			r->br.from = from;
			if (x < 25 && th[cur].sp < DEPTH) {
				r->br.type = MTEV_BR_CALL;
				th[cur].stack[th[cur].sp++] = from + 5;
				r->br.to = fn[rnd() % NF];
			} else if (x < 50 && th[cur].sp > 0) {
				r->br.type = MTEV_BR_RETURN;
				r->br.to = th[cur].stack[--th[cur].sp];
			} else if (x == 99 && rnd() % 50 == 0) {
				r->br.type = MTEV_BR_SYSCALL;
				r->br.to = 0;
			} else {
				r->br.type = (x & 1) ? MTEV_BR_JCC : MTEV_BR_JUMP;
				r->br.to = from - 200 + rnd() % 400;
			}
			th[cur].pc = r->br.to ? r->br.to : from;
		}
		double t0 = now();
		for (uint64_t i = 0; i < m; i++)
			if (mtev_write(w, &recs[i]))
				return 111;
		tw += now() - t0;
		done += m;
	}
	double t0 = now();
	mtev_writer_finish(w);
	tw += now() - t0;
	uint64_t bytes = mtev_writer_bytes(w);
	mtev_writer_free(w);

	lseek(fd, 0, SEEK_SET);
	t0 = now();
	mtev_reader *r = mtev_reader_alloc(fd, &err);
	struct mtev_rec x;
	uint64_t got = 0, sum = 0;
	int k;
	while ((k = mtev_read(r, &x)) == 1) {
		got++;
		sum += x.br.to;
	}
	double tr = now() - t0;
	mtev_reader_free(r);
	if (k != 0 || got != n) {
		fprintf(stderr, "mtev_bench: read back %" PRIu64 " of %" PRIu64 " (status %d)\n", got, n, k);
		return 1;
	}
	printf("records %" PRIu64 "  bytes %" PRIu64 "  bytes/branch %.2f  write %.1f M rec/s  read %.1f M rec/s  (checksum %" PRIx64 ")\n",
	       n, bytes, (double)bytes / (double)n, (double)n / tw / 1e6, (double)n / tr / 1e6, sum & 0xffff);
	return 0;
}
