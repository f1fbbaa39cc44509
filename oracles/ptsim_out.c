/* ptsim_out: perf.data (what `perf record -e intel_pt/cyc=1,mtc=0/u
 * --per-thread` writes), truth.mt, truth-spans.mt and images/. */
#include "ptsim.h"
#include "io.h"
#include "mtev.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a growable little-endian byte buffer ---- */
struct buf {
	uint8_t *p;
	size_t len, cap;
	int bad;
};

static void b_need(struct buf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return;
	size_t ncap = b->cap ? b->cap * 2 : 65536;
	while (ncap < b->len + n)
		ncap *= 2;
	uint8_t *q = realloc(b->p, ncap);
	if (!q) {
		b->bad = 1;
		return;
	}
	b->p = q;
	b->cap = ncap;
}
static void b_put(struct buf *b, const void *p, size_t n)
{
	b_need(b, n);
	if (b->bad)
		return;
	memcpy(b->p + b->len, p, n);
	b->len += n;
}
static void b_zero(struct buf *b, size_t n)
{
	b_need(b, n);
	if (b->bad)
		return;
	memset(b->p + b->len, 0, n);
	b->len += n;
}
static void b_u8(struct buf *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u16(struct buf *b, uint16_t v)
{
	uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	b_put(b, x, 2);
}
static void b_u32(struct buf *b, uint32_t v)
{
	uint8_t x[4];
	for (int i = 0; i < 4; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	b_put(b, x, 4);
}
static void b_u64(struct buf *b, uint64_t v)
{
	uint8_t x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	b_put(b, x, 8);
}
static void b_set_u16(struct buf *b, size_t at, uint16_t v)
{
	if (!b->bad) {
		b->p[at] = (uint8_t)v;
		b->p[at + 1] = (uint8_t)(v >> 8);
	}
}
static void b_set_u32(struct buf *b, size_t at, uint32_t v)
{
	if (!b->bad)
		for (int i = 0; i < 4; i++)
			b->p[at + i] = (uint8_t)(v >> (8 * i));
}
static void b_set_u64(struct buf *b, size_t at, uint64_t v)
{
	if (!b->bad)
		for (int i = 0; i < 8; i++)
			b->p[at + i] = (uint8_t)(v >> (8 * i));
}
/* A NUL-terminated string padded with zeros to a multiple of @align. */
static void b_padstr(struct buf *b, const char *s, size_t align)
{
	size_t n = strlen(s) + 1, len = (n + align - 1) / align * align;
	b_put(b, s, n - 1);
	b_zero(b, len - (n - 1));
}
/* perf's header string: u32 len (aligned to 64), then the bytes. */
static void b_hstr(struct buf *b, const char *s)
{
	size_t len = (strlen(s) + 1 + 63) / 64 * 64;
	b_u32(b, (uint32_t)len);
	b_put(b, s, strlen(s));
	b_zero(b, len - strlen(s));
}

/* ---- perf.data ---- */
enum {
	REC_MMAP2 = 10, REC_COMM = 3, REC_FORK = 7, REC_AUX = 11, REC_ITRACE_START = 12,
	REC_SWITCH_CPU_WIDE = 15,
	REC_FINISHED_ROUND = 68, REC_ID_INDEX = 69, REC_AUXTRACE_INFO = 70, REC_AUXTRACE = 71,
	REC_TIME_CONV = 79,
};
#define MISC_USER 2
#define MISC_COMM_EXEC (1u << 13)
#define MISC_MMAP_BUILD_ID (1u << 14)
#define MISC_BUILD_ID_SIZE (1u << 15)
#define SAMPLE_TYPE (0x1ull | 0x2ull | 0x4ull | 0x80ull | 0x10000ull) /* IP TID TIME CPU IDENTIFIER */
#define ATTR_SIZE 128
#define ID_PT(i) (1000 + (uint64_t)(i))
#define ID_DUMMY(i) (2000 + (uint64_t)(i))

static size_t rec_begin(struct buf *b, uint32_t type, uint16_t misc)
{
	size_t at = b->len;
	b_u32(b, type);
	b_u16(b, misc);
	b_u16(b, 0);
	return at;
}
static void rec_end(struct buf *b, size_t at)
{
	b_set_u16(b, at + 6, (uint16_t)(b->len - at));
}
#define FAKE_TID(tid) ((tid) | 1u << 22)  /* a thread of the same process */
#define FAKE_PID(pid) ((pid) | 1u << 23)  /* another process, its thread */
#define FAKE_PTID(tid) ((tid) | 1u << 23)
/* the other process maps the same files this many bytes further on: other
 * code at the same addresses (its trace decodes to errors and gaps) */
#define FAKE_SHIFT 16

static void trailer(struct buf *b, uint32_t pid, uint32_t tid, uint64_t time, uint64_t id,
		    uint32_t cpu)
{
	b_u32(b, pid);
	b_u32(b, tid);
	b_u64(b, time);
	b_u32(b, cpu);
	b_u32(b, 0);
	b_u64(b, id);
}

static void put_attr(struct buf *b, int pt, uint64_t config)
{
	size_t at = b->len;
	b_zero(b, ATTR_SIZE);
	if (b->bad)
		return;
	uint8_t *a = b->p + at;
	uint64_t flags;
	if (pt) {
		b_set_u32(b, at + 0, PTSIM_PMU_TYPE);
		b_set_u64(b, at + 8, config);
		b_set_u64(b, at + 16, 1); /* sample_period */
		/* disabled, exclude_kernel, exclude_hv, enable_on_exec, sample_id_all */
		flags = 1ull << 0 | 1ull << 5 | 1ull << 6 | 1ull << 12 | 1ull << 18;
	} else {
		b_set_u32(b, at + 0, 1);      /* PERF_TYPE_SOFTWARE */
		b_set_u64(b, at + 8, 9);      /* PERF_COUNT_SW_DUMMY */
		b_set_u64(b, at + 16, 1);
		/* disabled, exclude_kernel, exclude_hv, mmap, comm, enable_on_exec,
		 * task, sample_id_all, mmap2, comm_exec */
		flags = 1ull << 0 | 1ull << 5 | 1ull << 6 | 1ull << 8 | 1ull << 9 | 1ull << 12 |
			1ull << 13 | 1ull << 18 | 1ull << 23 | 1ull << 24;
	}
	(void)a;
	b_set_u32(b, at + 4, ATTR_SIZE);
	b_set_u64(b, at + 24, SAMPLE_TYPE);
	b_set_u64(b, at + 40, flags);
}

static uint64_t slot_time(const struct ptsim_result *res, uint32_t slot)
{
	return ptsim_tsc_to_perf(PTSIM_TSC0 + res->times[slot]);
}

struct sb { /* a sideband record to sort by time */
	uint64_t time;
	size_t order;
	int kind; /* 0 comm-exec, 1 map (b: of the fake process), 2 itrace_start,
		   * 3 fork+comm, 4 aux, 5 a fake switch (b: 1 to the fake thread,
		   * 2 to the fake process's, 0 and 3 back from them) */
	size_t a, b;
};

/* Appends a record whose order is its index (n is read before it grows). */
static void sb_push(struct sb *sb, size_t *n, uint64_t time, int kind, size_t a, size_t b)
{
	sb[*n] = (struct sb){time, *n, kind, a, b};
	++*n;
}

static int sb_cmp(const void *x, const void *y)
{
	const struct sb *p = x, *q = y;
	if (p->time != q->time)
		return p->time < q->time ? -1 : 1;
	return p->order < q->order ? -1 : p->order > q->order;
}

/* Where the header's fields point, filled in as the file is laid out. */
struct perf_layout {
	size_t h_attrs;			/* the header's attrs, data, features fields */
	size_t attrs_off, attrs_size;
	size_t data_off, data_size;
	size_t *idx_off, *idx_sz, nidx; /* the AUXTRACE records (feature 18) */
};

/* The header (its offsets left zero), the two attrs and their ids. */
static void put_header(struct buf *b, struct perf_layout *l, const struct ptsim_result *res)
{
	size_t nthr = res->nts;
	b_put(b, "PERFILE2", 8);
	b_u64(b, 104);
	b_u64(b, ATTR_SIZE + 16);
	l->h_attrs = b->len;
	b_zero(b, 16 * 3 + 32);
	l->attrs_off = b->len;
	size_t ids_field[2];
	for (int i = 0; i < 2; i++) {
		put_attr(b, i == 0, res->config);
		ids_field[i] = b->len;
		b_zero(b, 16);
	}
	l->attrs_size = b->len - l->attrs_off;
	for (int i = 0; i < 2; i++) {
		b_set_u64(b, ids_field[i], b->len);
		b_set_u64(b, ids_field[i] + 8, nthr * 8);
		for (size_t k = 0; k < nthr; k++)
			b_u64(b, i == 0 ? ID_PT(k) : ID_DUMMY(k));
	}
}

/* The data section's first records: ID_INDEX, AUXTRACE_INFO, TIME_CONV. */
static void put_setup(struct buf *b, const struct ptsim_result *res)
{
	size_t nthr = res->nts;
	size_t at = rec_begin(b, REC_ID_INDEX, 0);
	b_u64(b, nthr * 2);
	for (size_t k = 0; k < nthr; k++)
		for (int i = 0; i < 2; i++) {
			b_u64(b, i == 0 ? ID_PT(k) : ID_DUMMY(k));
			b_u64(b, k);
			b_u64(b, res->per_cpu ? k : UINT64_MAX); /* cpu */
			b_u64(b, res->per_cpu ? UINT64_MAX : res->ts[k].tid);
		}
	rec_end(b, at);

	at = rec_begin(b, REC_AUXTRACE_INFO, 0);
	b_u32(b, 1); /* PERF_AUXTRACE_INTEL_PT */
	b_u32(b, 0);
	uint64_t priv[17] = {
		PTSIM_PMU_TYPE, PTSIM_TIME_SHIFT, PTSIM_TIME_MULT, PTSIM_TIME_ZERO, 1 /* cap_user_time_zero */,
		0x400 /* tsc */, 0x800 /* noretcomp */, 0 /* sched switch */, 0 /* snapshot */,
		(uint64_t)!!res->per_cpu /* per-cpu mmaps */, 0x200 /* mtc */, 0x3c000 /* mtc freq bits */, PTSIM_CTC_N,
		PTSIM_CTC_D, 0x2 /* cyc */, PTSIM_NOM_RATIO, 0 /* filter string length */,
	};
	for (int i = 0; i < 17; i++)
		b_u64(b, priv[i]);
	rec_end(b, at);

	at = rec_begin(b, REC_TIME_CONV, 0);
	b_u64(b, PTSIM_TIME_SHIFT);
	b_u64(b, PTSIM_TIME_MULT);
	b_u64(b, PTSIM_TIME_ZERO);
	b_u64(b, 0); /* time_cycles */
	b_u64(b, 0); /* time_mask */
	b_u8(b, 1);  /* cap_user_time_zero */
	b_u8(b, 0);  /* cap_user_time_short */
	b_zero(b, 6);
	rec_end(b, at);
}

/* One sideband record. */
static void put_sb(struct buf *b, const struct sb *e, const struct ptsim_run *run,
		   const struct ptsim_result *res)
{
	uint32_t pid = run->pid;
	uint32_t cpu = res->per_cpu ? (uint32_t)e->a : 0; /* kinds 2-5: thread e->a's */
	size_t at;
	switch (e->kind) {
	case 0:
		if (e->b)
			pid = FAKE_PID(pid);
		at = rec_begin(b, REC_COMM, MISC_USER | MISC_COMM_EXEC);
		b_u32(b, pid);
		b_u32(b, pid);
		b_padstr(b, run->comm, 8);
		trailer(b, pid, pid, e->time, ID_DUMMY(0), 0);
		rec_end(b, at);
		break;
	case 1: {
		const struct ptsim_map *m = &run->maps[e->a];
		if (e->b)
			pid = FAKE_PID(pid);
		at = rec_begin(b, REC_MMAP2, MISC_USER | MISC_MMAP_BUILD_ID);
		b_u32(b, pid);
		b_u32(b, pid);
		b_u64(b, m->start);
		b_u64(b, m->len);
		b_u64(b, m->pgoff + (e->b ? FAKE_SHIFT : 0));
		b_u8(b, m->build_id_len);
		b_u8(b, 0);
		b_u16(b, 0);
		b_put(b, m->build_id, 20);
		b_u32(b, m->prot);
		b_u32(b, 2); /* MAP_PRIVATE */
		b_padstr(b, m->path, 8);
		trailer(b, pid, pid, e->time, ID_DUMMY(0), 0);
		rec_end(b, at);
		break;
	}
	case 2:
		at = rec_begin(b, REC_ITRACE_START, 0);
		b_u32(b, pid);
		b_u32(b, res->ts[e->a].tid);
		trailer(b, pid, res->ts[e->a].tid, e->time, ID_PT(e->a), cpu);
		rec_end(b, at);
		break;
	case 3: {
		uint32_t tid = res->ts[e->a].tid;
		at = rec_begin(b, REC_FORK, 0);
		b_u32(b, pid);
		b_u32(b, pid);
		b_u32(b, tid);
		b_u32(b, pid);
		b_u64(b, e->time);
		trailer(b, pid, tid, e->time, ID_DUMMY(e->a), cpu);
		rec_end(b, at);
		at = rec_begin(b, REC_COMM, MISC_USER);
		b_u32(b, pid);
		b_u32(b, tid);
		b_padstr(b, run->threads[e->a].comm[0] ? run->threads[e->a].comm : run->comm, 8);
		trailer(b, pid, tid, e->time, ID_DUMMY(e->a), cpu);
		rec_end(b, at);
		break;
	}
	case 4: {
		const struct ptsim_aux *a = &res->ts[e->a].aux[e->b];
		at = rec_begin(b, REC_AUX, 0);
		b_u64(b, a->offset);
		b_u64(b, a->size);
		b_u64(b, a->flags);
		trailer(b, pid, res->ts[e->a].tid, e->time, ID_PT(e->a), cpu);
		rec_end(b, at);
		break;
	}
	case 5: { /* switched in: the thread of the trailer; out: next_prev */
		int other = e->b == 2 || e->b == 3;
		uint32_t tid = res->ts[e->a].tid, ftid = other ? FAKE_PTID(tid) : FAKE_TID(tid);
		uint32_t fpid = other ? FAKE_PID(pid) : pid;
		int to_fake = e->b == 1 || e->b == 2;
		at = rec_begin(b, REC_SWITCH_CPU_WIDE, 0);
		b_u32(b, to_fake ? pid : fpid);
		b_u32(b, to_fake ? tid : ftid);
		trailer(b, to_fake ? fpid : pid, to_fake ? ftid : tid, e->time, ID_DUMMY(e->a), cpu);
		rec_end(b, at);
		break;
	}
	}
}

/* The sideband (COMM, MMAP2, ITRACE_START, FORK+COMM, AUX), in time order.
 * -1: out of memory. */
static int put_sideband(struct buf *b, const struct ptsim_run *run, const struct ptsim_result *res)
{
	size_t nthr = res->nts;
	size_t nsb = 2 * (1 + run->nmaps) + 3 * nthr + 8;
	for (size_t k = 0; k < nthr; k++) {
		const struct ptsim_tstream *ts = &res->ts[k];
		nsb += ts->naux;
		if (res->per_cpu && res->fake_switch && ts->end_time > ts->first_time)
			nsb += 2 * ((ts->end_time - ts->first_time) / res->fake_switch + 1);
	}
	struct sb *sb = calloc(nsb, sizeof(*sb));
	if (!sb)
		return -1;
	size_t n = 0;
	uint64_t t0 = ptsim_tsc_to_perf(PTSIM_TSC0);
	sb_push(sb, &n, t0, 0, 0, 0);
	/* A map appears before any code in it runs; its time is that of the
	 * first thread event after it, at most. */
	int fake = res->per_cpu && res->fake_switch; /* the fake process: its COMM, its maps */
	if (fake)
		sb_push(sb, &n, t0, 0, 0, 1);
	size_t mi = 0;
	for (size_t i = 0; i < run->nev && mi < run->nmaps; i++)
		if (run->ev[i].kind == PTSIM_EV_MAP) {
			sb_push(sb, &n, t0, 1, run->ev[i].arg, 0);
			if (fake)
				sb_push(sb, &n, t0, 1, run->ev[i].arg, 1);
			mi++;
		}
	for (size_t k = 0; k < nthr; k++) {
		const struct ptsim_tstream *ts = &res->ts[k];
		uint64_t st = ts->start_time ? ts->start_time : t0;
		if (k > 0)
			sb_push(sb, &n, st, 3, k, 0);
		sb_push(sb, &n, st, 2, k, 0);
		for (size_t j = 0; j < ts->naux; j++)
			sb_push(sb, &n, ts->end_time, 4, k, j);
		/* to the fake thread and to the fake process's in turn */
		if (fake)
			for (uint64_t t = ts->first_time + res->fake_switch, i = 0; t < ts->end_time;
			     t += res->fake_switch, i++) {
				sb_push(sb, &n, t, 5, k, 1 + (i & 1));
				sb_push(sb, &n, t + res->fake_switch / 2, 5, k, i & 1 ? 3 : 0);
			}
	}
	qsort(sb, n, sizeof(*sb), sb_cmp);
	for (size_t i = 0; i < n; i++)
		put_sb(b, &sb[i], run, res);
	free(sb);
	return 0;
}

/* The trace: one AUXTRACE record per AUX record, queue = thread; their
 * offsets go to @l for the AUXTRACE feature. */
static void put_auxtrace(struct buf *b, struct perf_layout *l, const struct ptsim_result *res)
{
	size_t nthr = res->nts, nidx = 0;
	for (size_t k = 0; k < nthr; k++)
		nidx += res->ts[k].naux;
	l->idx_off = calloc(nidx + 1, sizeof(*l->idx_off));
	l->idx_sz = calloc(nidx + 1, sizeof(*l->idx_sz));
	if (!l->idx_off || !l->idx_sz)
		b->bad = 1;
	l->nidx = 0;
	for (size_t k = 0; k < nthr; k++) {
		const struct ptsim_tstream *ts = &res->ts[k];
		for (size_t j = 0; j < ts->naux; j++) {
			const struct ptsim_aux *a = &ts->aux[j];
			uint64_t padded = (a->size + 7) & ~7ull;
			size_t at = rec_begin(b, REC_AUXTRACE, 0);
			if (l->idx_off) {
				l->idx_off[l->nidx] = at;
				l->idx_sz[l->nidx++] = 48; /* perf checks sz == header.size */
			}
			b_u64(b, padded);
			b_u64(b, a->offset);
			b_u64(b, ts->end_time); /* reference */
			b_u32(b, (uint32_t)k);
			b_u32(b, res->per_cpu ? UINT32_MAX : ts->tid);
			b_u32(b, res->per_cpu ? (uint32_t)k : UINT32_MAX); /* cpu */
			b_u32(b, 0);
			rec_end(b, at);
			b_put(b, ts->pt + a->offset, a->size);
			b_zero(b, padded - a->size);
		}
	}
}

/* Feature BUILD_ID: one record per distinct (path, build-id). */
static void put_build_ids(struct buf *b, const struct ptsim_run *run)
{
	for (size_t i = 0; i < run->nmaps; i++) {
		const struct ptsim_map *m = &run->maps[i];
		if (!m->build_id_len)
			continue;
		int dup = 0;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(run->maps[j].path, m->path) &&
			    run->maps[j].build_id_len == m->build_id_len &&
			    !memcmp(run->maps[j].build_id, m->build_id, m->build_id_len))
				dup = 1;
		if (dup)
			continue;
		size_t at = rec_begin(b, 0, MISC_USER | MISC_BUILD_ID_SIZE);
		b_u32(b, UINT32_MAX); /* pid -1: host */
		b_put(b, m->build_id, 20);
		b_u8(b, m->build_id_len);
		b_zero(b, 3);
		b_padstr(b, m->path, 64);
		rec_end(b, at);
	}
}

/* The body of feature section @feat. */
static void put_feature(struct buf *b, int feat, const struct perf_layout *l,
			const struct ptsim_run *run, const struct ptsim_result *res)
{
	size_t nthr = res->nts;
	switch (feat) {
	case 2:
		put_build_ids(b, run);
		break;
	case 6:
		b_hstr(b, "x86_64");
		break;
	case 7: {
		uint32_t ncpu = res->per_cpu && nthr > 2 ? (uint32_t)nthr : 2;
		b_u32(b, ncpu);
		b_u32(b, ncpu);
		break;
	}
	case 9: {
		char s[64];
		snprintf(s, sizeof s, "GenuineIntel,%d,%d,%d", PTSIM_CPU_FAMILY, PTSIM_CPU_MODEL,
			 PTSIM_CPU_STEPPING);
		b_hstr(b, s);
		break;
	}
	case 11: {
		b_u32(b, 8);
		const char *args[] = {"perf", "record", "-e", "intel_pt/cyc=1,mtc=0/u",
				      res->per_cpu ? "--all-cpus" : "--per-thread", "--", run->comm,
				      "(mt-ptsim)"};
		for (int i = 0; i < 8; i++)
			b_hstr(b, args[i]);
		break;
	}
	case 12:
		b_u32(b, 2);
		b_u32(b, ATTR_SIZE);
		for (int i = 0; i < 2; i++) {
			put_attr(b, i == 0, res->config);
			b_u32(b, (uint32_t)nthr);
			b_hstr(b, i == 0 ? "intel_pt/cyc=1,mtc=0/u" : "dummy:u");
			for (size_t k = 0; k < nthr; k++)
				b_u64(b, i == 0 ? ID_PT(k) : ID_DUMMY(k));
		}
		break;
	case 18:
		b_u64(b, l->nidx);
		for (size_t i = 0; i < l->nidx && l->idx_off; i++) {
			b_u64(b, l->idx_off[i]);
			b_u64(b, l->idx_sz[i]);
		}
		break;
	case 16:
		b_u32(b, 2);
		b_u32(b, PTSIM_PMU_TYPE);
		b_hstr(b, "intel_pt");
		b_u32(b, 1);
		b_hstr(b, "software");
		break;
	}
}

/* The feature sections (their table, then each) and the header's fields. */
static void put_features(struct buf *b, const struct perf_layout *l, const struct ptsim_run *run,
			 const struct ptsim_result *res)
{
	static const int feats[] = {2 /* BUILD_ID */, 6 /* ARCH */, 7 /* NRCPUS */, 9 /* CPUID */,
				    11 /* CMDLINE */, 12 /* EVENT_DESC */, 16 /* PMU_MAPPINGS */,
				    18 /* AUXTRACE */};
	enum { NFEAT = sizeof feats / sizeof feats[0] };
	size_t table = b->len;
	b_zero(b, NFEAT * 16);
	for (int f = 0; f < NFEAT; f++) {
		size_t start = b->len;
		put_feature(b, feats[f], l, run, res);
		b_set_u64(b, table + (size_t)f * 16, start);
		b_set_u64(b, table + (size_t)f * 16 + 8, b->len - start);
	}
	b_set_u64(b, l->h_attrs, l->attrs_off);
	b_set_u64(b, l->h_attrs + 8, l->attrs_size);
	b_set_u64(b, l->h_attrs + 16, l->data_off);
	b_set_u64(b, l->h_attrs + 24, l->data_size);
	uint64_t bits = 0;
	for (int f = 0; f < NFEAT; f++)
		bits |= 1ull << feats[f];
	b_set_u64(b, l->h_attrs + 48, bits);
}

int ptsim_write_perf(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		     char *err, size_t errlen)
{
	struct buf b = {0};
	struct perf_layout l = {0};
	put_header(&b, &l, res);
	l.data_off = b.len;
	put_setup(&b, res);
	if (put_sideband(&b, run, res) < 0) {
		free(b.p);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	put_auxtrace(&b, &l, res);
	size_t at = rec_begin(&b, REC_FINISHED_ROUND, 0);
	rec_end(&b, at);
	l.data_size = b.len - l.data_off;
	put_features(&b, &l, run, res);
	free(l.idx_off);
	free(l.idx_sz);
	if (b.bad) {
		free(b.p);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = io_write_all(fd, b.p, b.len);
	free(b.p);
	if (rc < 0) {
		snprintf(err, errlen, "write: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- truth.mt ---- */
/* The trigger record, when the run stopped at the stop symbol. */
static int write_trigger(mtev_writer *w, const struct ptsim_run *run, const struct ptsim_result *res)
{
	if (res->trigger_slot == UINT64_MAX || !run->stop_symbol[0])
		return 0;
	for (size_t i = 0; i < run->nev; i++)
		if (run->ev[i].kind == PTSIM_EV_STOP) {
			struct mtev_rec r;
			memset(&r, 0, sizeof r);
			r.kind = MTEV_TRIGGER;
			r.trigger.pid = run->pid;
			r.trigger.tid = run->ev[i].tid;
			r.trigger.time = slot_time(res, (uint32_t)res->trigger_slot);
			r.trigger.addr = run->ev[i].ip;
			r.trigger.arg0 = run->ev[i].next;
			r.trigger.arg1 = run->ev[i].sp;
			r.trigger.symbol = mtev_cstr(run->stop_symbol);
			return mtev_write(w, &r);
		}
	return 0;
}

static int write_context(mtev_writer *w, const struct ptsim_run *run, const struct ptsim_result *res)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_CLOCK;
	r.clock.time_zero = PTSIM_TIME_ZERO;
	r.clock.time_mult = PTSIM_TIME_MULT;
	r.clock.time_shift = PTSIM_TIME_SHIFT;
	r.clock.tsc_hz = PTSIM_TSC_HZ;
	int rc = mtev_write(w, &r);
	memset(&r, 0, sizeof r);
	r.kind = MTEV_PROCESS;
	r.process.pid = run->pid;
	r.process.name = mtev_cstr(run->comm);
	if (!rc)
		rc = mtev_write(w, &r);
	for (size_t k = 0; k < res->nts && !rc; k++) {
		memset(&r, 0, sizeof r);
		r.kind = MTEV_THREAD;
		r.thread.pid = run->pid;
		r.thread.tid = res->ts[k].tid;
		r.thread.time = res->ts[k].start_time;
		r.thread.name = mtev_cstr(run->threads[k].comm);
		rc = mtev_write(w, &r);
	}
	uint64_t t0 = ptsim_tsc_to_perf(PTSIM_TSC0);
	for (size_t i = 0; i < run->nmaps && !rc; i++) {
		const struct ptsim_map *m = &run->maps[i];
		memset(&r, 0, sizeof r);
		r.kind = MTEV_MAP;
		r.map.pid = run->pid;
		r.map.time = t0;
		r.map.start = m->start;
		r.map.len = m->len;
		r.map.pgoff = m->pgoff;
		r.map.prot = m->prot;
		r.map.build_id_len = m->build_id_len;
		r.map.build_id = m->build_id;
		r.map.path = mtev_cstr(m->path);
		rc = mtev_write(w, &r);
	}
	return rc ? rc : write_trigger(w, run, res);
}

static const struct ptsim_result *cmp_res;
static int br_cmp(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	uint64_t ta = cmp_res->times[cmp_res->br[a].slot], tb = cmp_res->times[cmp_res->br[b].slot];
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return a < b ? -1 : a > b;
}

int ptsim_write_truth(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		      char *err, size_t errlen)
{
	int e = 0;
	mtev_writer *w = mtev_writer_alloc(fd, "mt-ptsim", MTEV_F_SORTED | MTEV_F_TRUTH, &e);
	if (!w) {
		snprintf(err, errlen, "truth.mt: %s", mtev_strerror(e));
		return -1;
	}
	int rc = write_context(w, run, res);
	/* In time order across threads (each thread's records already are;
	 * ties keep execution order): a stable sort. */
	size_t *ord = malloc((res->nbr ? res->nbr : 1) * sizeof(*ord));
	if (!ord) {
		mtev_writer_free(w);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < res->nbr; i++)
		ord[i] = i;
	cmp_res = res;
	qsort(ord, res->nbr, sizeof(*ord), br_cmp);
	for (size_t k = 0; k < res->nbr && !rc; k++) {
		const struct ptsim_branch *b = &res->br[ord[k]];
		struct mtev_rec r;
		memset(&r, 0, sizeof r);
		r.kind = MTEV_BRANCH;
		r.br.tid = b->tid;
		r.br.time = slot_time(res, b->slot);
		r.br.type = b->type;
		r.br.from = b->from;
		r.br.to = b->to;
		rc = mtev_write(w, &r);
	}
	free(ord);
	if (!rc)
		rc = mtev_writer_finish(w);
	mtev_writer_free(w);
	if (rc) {
		snprintf(err, errlen, "truth.mt: %s", mtev_strerror(-rc));
		return -1;
	}
	return 0;
}

/* ---- truth-spans.mt ---- */
static int span_cmp(const void *x, const void *y)
{
	const struct ptsim_span *p = *(const struct ptsim_span *const *)x;
	const struct ptsim_span *q = *(const struct ptsim_span *const *)y;
	size_t ip = 0, iq = 0;
	for (size_t k = 0; k < cmp_res->nts; k++) {
		if (cmp_res->ts[k].tid == p->tid)
			ip = k;
		if (cmp_res->ts[k].tid == q->tid)
			iq = k;
	}
	if (ip != iq)
		return ip < iq ? -1 : 1;
	if ((int64_t)p->bseq != (int64_t)q->bseq)
		return (int64_t)p->bseq < (int64_t)q->bseq ? -1 : 1;
	return 0;
}

int ptsim_write_spans(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		      char *err, size_t errlen)
{
	int e = 0;
	mtev_writer *w = mtev_writer_alloc(fd, "mt-ptsim", MTEV_F_SORTED | MTEV_F_TRUTH | MTEV_F_SPANS, &e);
	if (!w) {
		snprintf(err, errlen, "truth-spans.mt: %s", mtev_strerror(e));
		return -1;
	}
	const struct ptsim_span **v = malloc((res->nspans ? res->nspans : 1) * sizeof(*v));
	if (!v) {
		mtev_writer_free(w);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < res->nspans; i++)
		v[i] = &res->spans[i];
	cmp_res = res;
	qsort(v, res->nspans, sizeof(*v), span_cmp);
	int rc = write_context(w, run, res);
	/* Each thread's first traced instruction's slot (the first branch's),
	 * in one pass over the branches: threads are few, and a thread's
	 * branches come in runs */
	uint32_t *ftid = malloc((res->nbr ? res->nbr : 1) * 2 * sizeof *ftid), *fslot;
	size_t nf = 0, last = 0;
	if (!ftid) {
		free(v);
		mtev_writer_free(w);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	fslot = ftid + (res->nbr ? res->nbr : 1);
	for (size_t b = 0; b < res->nbr; b++) {
		size_t f = last;
		if (f >= nf || ftid[f] != res->br[b].tid)
			for (f = 0; f < nf && ftid[f] != res->br[b].tid; f++)
				;
		if (f == nf) {
			ftid[nf] = res->br[b].tid;
			fslot[nf++] = res->br[b].slot;
		} else if (res->br[b].slot < fslot[f]) {
			fslot[f] = res->br[b].slot;
		}
		last = f;
	}
	/* Depths are relative to the first frame; frames discovered later sit
	 * below it. */
	size_t i = 0;
	while (i < res->nspans && !rc) {
		size_t j = i;
		int32_t mind = 0;
		while (j < res->nspans && v[j]->tid == v[i]->tid) {
			if (v[j]->depth < mind)
				mind = v[j]->depth;
			j++;
		}
		/* A frame that ended before the thread's first traced
		 * instruction (a window's trace-start: its first branch) is in
		 * no trace of it, even when it ended at that instruction's time;
		 * the time slots still tell (docs/ptsim.md).  So is a system
		 * call or interrupt that began before it and ended with it
		 * (the window began in the kernel: the return to user mode is
		 * the trace-start). */
		uint32_t first = UINT32_MAX;
		for (size_t f = 0; f < nf; f++)
			if (ftid[f] == v[i]->tid)
				first = fslot[f];
		for (size_t k = i; k < j && !rc; k++) {
			const struct ptsim_span *s = v[k];
			struct mtev_rec r;
			if (first != UINT32_MAX &&
			    (s->eslot < first || ((s->flags & MTEV_SPAN_UNTRACED) &&
						   s->bslot < first && s->eslot == first)))
				continue;
			memset(&r, 0, sizeof r);
			r.kind = MTEV_SPAN;
			r.span.tid = s->tid;
			r.span.depth = (uint32_t)(s->depth - mind);
			r.span.begin = slot_time(res, s->bslot);
			r.span.end = slot_time(res, s->eslot);
			r.span.func = s->func;
			r.span.callsite = s->callsite;
			r.span.flags = s->flags;
			r.span.name = mtev_cstr(s->name);
			rc = mtev_write(w, &r);
		}
		i = j;
	}
	free(ftid);
	free(v);
	if (!rc)
		rc = mtev_writer_finish(w);
	mtev_writer_free(w);
	if (rc) {
		snprintf(err, errlen, "truth-spans.mt: %s", mtev_strerror(-rc));
		return -1;
	}
	return 0;
}

/* ---- hits.mt ---- */
int ptsim_write_hits(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		     char *err, size_t errlen)
{
	int e = 0;
	mtev_writer *w = mtev_writer_alloc(fd, "mt-ptsim", MTEV_F_SORTED, &e);
	if (!w) {
		snprintf(err, errlen, "hits.mt: %s", mtev_strerror(e));
		return -1;
	}
	int rc = write_trigger(w, run, res);
	for (size_t k = 0; k < res->nts && !rc; k++) {
		const struct ptsim_tstream *ts = &res->ts[k];
		if (!ts->chain)
			continue;
		struct mtev_rec r;
		memset(&r, 0, sizeof r);
		r.kind = MTEV_SAMPLE;
		r.sample.pid = run->pid;
		r.sample.tid = ts->tid;
		r.sample.time = slot_time(res, ts->chain_slot);
		r.sample.nips = ts->nchain;
		r.sample.ips = ts->chain;
		r.sample.flags = MTEV_SAMPLE_CHAIN;
		rc = mtev_write(w, &r);
	}
	if (!rc)
		rc = mtev_writer_finish(w);
	mtev_writer_free(w);
	if (rc) {
		snprintf(err, errlen, "hits.mt: %s", mtev_strerror(-rc));
		return -1;
	}
	return 0;
}

/* ---- images/ ---- */
void ptsim_image_relpath(char *out, size_t n, const struct ptsim_map *m)
{
	char hex[41];
	for (size_t i = 0; i < m->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
	hex[2 * m->build_id_len] = 0;
	if (!m->build_id_len)
		snprintf(hex, sizeof hex, "nobuildid-%llx", (unsigned long long)m->start);
	if (!strcmp(m->path, "[vdso]"))
		snprintf(out, n, "[vdso]/%s/vdso", hex);
	else
		snprintf(out, n, "%s/%s/elf", m->path[0] == '/' ? m->path + 1 : m->path, hex);
}

static int mkdirs(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s", path);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

int ptsim_write_images(const char *dir, const struct ptsim_run *run, char *err, size_t errlen)
{
	char base[4096];
	snprintf(base, sizeof base, "%s/images", dir);
	if (mkdirs(base) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", base, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < run->nmaps; i++) {
		const struct ptsim_map *m = &run->maps[i];
		char rel[2048], path[8192], d[8192];
		ptsim_image_relpath(rel, sizeof rel, m);
		snprintf(path, sizeof path, "%s/%s", base, rel);
		snprintf(d, sizeof d, "%s", path);
		*strrchr(d, '/') = 0;
		if (mkdirs(d) < 0) {
			snprintf(err, errlen, "cannot create %s: %s", d, strerror(errno));
			return -1;
		}
		/* The original file (symbols, other segments) with the executable
		 * range replaced by the memory dump; the vdso is its dump. */
		uint8_t *file = NULL;
		size_t flen = 0;
		struct stat sst;
		if (m->path[0] == '/' && stat(path, &sst) == 0) {
			if (io_slurp(path, &file, &flen) < 0)
				file = NULL;
		}
		if (!file && m->path[0] == '/' && io_slurp(m->path, &file, &flen) < 0)
			file = NULL;
		if (!file) {
			flen = m->pgoff + m->len;
			file = calloc(1, flen ? flen : 1);
			if (!file) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
		}
		if (m->pgoff < flen) {
			size_t n = m->len < flen - m->pgoff ? m->len : flen - m->pgoff;
			memcpy(file + m->pgoff, m->bytes, n);
		}
		struct io_out o;
		if (io_out_open(&o, path, 1, 1) < 0 || io_write_all(o.fd, file, flen) < 0 ||
		    io_out_commit(&o) < 0) {
			snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
			free(file);
			return -1;
		}
		free(file);
		chmod(path, 0755);
		if (m->build_id_len) {
			char hex[41], link[8300], target[8192];
			for (size_t k = 0; k < m->build_id_len; k++)
				snprintf(hex + 2 * k, 3, "%02x", m->build_id[k]);
			snprintf(d, sizeof d, "%s/.build-id/%.2s", base, hex);
			if (mkdirs(d) < 0) {
				snprintf(err, errlen, "cannot create %s: %s", d, strerror(errno));
				return -1;
			}
			snprintf(link, sizeof link, "%s/%s", d, hex + 2);
			snprintf(target, sizeof target, "../../%s", rel);
			*strrchr(target, '/') = 0; /* the build-id directory */
			unlink(link);
			if (symlink(target, link) < 0) {
				snprintf(err, errlen, "cannot create %s: %s", link, strerror(errno));
				return -1;
			}
		}
	}
	return 0;
}
