/* ptcheck DIR [--fault]: decode DIR/perf.data's PT with libipt's instruction
 * decoder (independently of mt-decode and of mt-ptsim's code), turn the
 * instruction flow into taken-branch records and compare them, with their
 * times, to DIR/truth.mt.
 *
 * Default: every thread's decoded records must equal the truth exactly, no
 * decode error allowed.  Exit 0 if so, 1 with the first difference.
 *
 * --fault: the stream has an injected fault.  Per thread: the records before
 * the first error/overflow must be a prefix of the truth; libipt must report
 * the fault (an error or an overflow event) at or after the byte offset given
 * by --at-offset N (if given); after it resyncs, the decoded records must be
 * the truth's records from some point on, to the end ("decodes the rest").
 * Prints one line per thread: "tid T fault-at OFFSET code CODE resumed R".
 */
#include <errno.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtev.h"

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

struct rec {
	int type;
	uint64_t from, to, time;
	uint64_t off; /* decoder position when it was produced */
};
struct recs {
	struct rec *r;
	size_t n, cap;
};
static uint64_t cur_off;

static void add(struct recs *v, int type, uint64_t from, uint64_t to, uint64_t time)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 1024;
		v->r = realloc(v->r, v->cap * sizeof(*v->r));
		if (!v->r)
			exit(111);
	}
	v->r[v->n++] = (struct rec){type, from, to, time, cur_off};
	if (getenv("PTCHECK_TRACE") && v->n > (size_t)atol(getenv("PTCHECK_TRACE")))
		fprintf(stderr, "rec %zu %s %llx %llx %llu off %llu\n", v->n - 1, mtev_branch_name((unsigned)type),
			(unsigned long long)from, (unsigned long long)to, (unsigned long long)time,
			(unsigned long long)cur_off);
}

struct queue {
	uint32_t tid;
	uint8_t *pt;
	size_t len;
	struct recs truth, dec;
	int64_t fault_off;
	int fault_code;
	size_t resumed; /* decoded records after the fault */
	size_t prefix;	/* decoded records before the fault */
	struct { uint64_t orig, pos, len; } run[64]; /* contiguous AUX data */
	int nrun;
	unsigned time_mismatch;
};

static struct queue q[64];
static int nq;
static uint64_t t_zero, t_mult, t_shift;

static struct queue *queue_of(uint32_t tid)
{
	for (int i = 0; i < nq; i++)
		if (q[i].tid == tid)
			return &q[i];
	if (nq == 64)
		exit(2);
	memset(&q[nq], 0, sizeof q[nq]);
	q[nq].tid = tid;
	q[nq].fault_off = -1;
	return &q[nq++];
}

static uint64_t to_perf(uint64_t tsc)
{
	uint64_t quot = tsc >> t_shift, rem = tsc & ((1ull << t_shift) - 1);
	return t_zero + quot * t_mult + ((rem * t_mult) >> t_shift);
}

static uint64_t now_time(struct pt_insn_decoder *d)
{
	uint64_t tsc = 0;
	uint32_t lm, lc;
	pt_insn_time(d, &tsc, &lm, &lc);
	return to_perf(tsc);
}

/* The record of a branch instruction, once its successor is known. */
static int br_type(enum pt_insn_class c)
{
	switch (c) {
	case ptic_call: return MTEV_BR_CALL;
	case ptic_return: return MTEV_BR_RETURN;
	case ptic_jump: return MTEV_BR_JUMP;
	case ptic_cond_jump: return MTEV_BR_JCC;
	default: return -1;
	}
}

struct pending {
	int valid;
	struct pt_insn in;
	uint64_t time;
};

static void resolve(struct queue *qu, struct pending *p, uint64_t next)
{
	if (!p->valid)
		return;
	int t = br_type(p->in.iclass);
	if (t >= 0 && (next != p->in.ip + p->in.size || t == MTEV_BR_CALL || t == MTEV_BR_JUMP))
		add(&qu->dec, t, p->in.ip, next, p->time);
	p->valid = 0;
}

static void note_fault(struct queue *qu, struct pt_insn_decoder *d, int code)
{
	if (qu->fault_off >= 0)
		return;
	uint64_t off = 0;
	pt_insn_get_offset(d, &off);
	qu->fault_off = (int64_t)off;
	qu->fault_code = code;
	qu->prefix = qu->dec.n;
}

/* Decodes one thread's stream into taken-branch records. */
static void decode(struct queue *qu, struct pt_image *img, const struct pt_config *base, size_t from,
		   size_t to, uint64_t orig, int last)
{
	struct pt_config cfg = *base;
	cfg.begin = qu->pt + from;
	cfg.end = qu->pt + to;
	struct pt_insn_decoder *d = pt_insn_alloc_decoder(&cfg);
	if (!d)
		exit(111);
	pt_insn_set_image(d, img);
	cur_off = orig;
	int st = pt_insn_sync_forward(d);
	int started = 0, dis_async = 0, pend_async = 0, enabled = 0;
	uint64_t pend_at = 0, pend_time = 0, last_time = 0;
	struct pending p = {0};
	for (;;) {
		if (st < 0) {
			if (st == -pte_eos)
				break;
			if (qu->fault_off < 0) {
				note_fault(qu, d, -st);
				qu->fault_off += (int64_t)orig;
			}
			p.valid = 0;
			pend_async = 0;
			started = 0;
			enabled = 0;
			st = pt_insn_sync_forward(d);
			continue;
		}
		while (st & pts_event_pending) {
			struct pt_event ev;
			st = pt_insn_event(d, &ev, sizeof ev);
			if (st < 0)
				break;
			uint64_t t = now_time(d);
			last_time = t;
			if (getenv("PTCHECK_TRACE") && qu->dec.n > (size_t)atol(getenv("PTCHECK_TRACE")))
				fprintf(stderr, "event %d tsc %llu time %llu\n", (int)ev.type,
					(unsigned long long)to_perf(ev.tsc), (unsigned long long)t);
			if (ev.has_tsc && to_perf(ev.tsc) != t && ev.type != ptev_exec_mode && ev.type != ptev_cbr) {
				/* The event's own time and the decoder's time after it
				 * must agree, so decoders using either are exact. */
				if (!qu->time_mismatch++)
					printf("tid %u: event %d: ev.tsc gives %llu, pt_insn_time %llu\n", qu->tid,
					       (int)ev.type, (unsigned long long)to_perf(ev.tsc),
					       (unsigned long long)t);
			}
			switch (ev.type) {
			case ptev_enabled:
				if (pend_async) {
					add(&qu->dec, MTEV_BR_INTERRUPT, pend_at, 0, pend_time);
					pend_async = 0;
				}
				add(&qu->dec, !started ? MTEV_BR_TRACE_START : dis_async ? MTEV_BR_IRET : MTEV_BR_SYSRET,
				    0, ev.variant.enabled.ip, t);
				started = 1;
				enabled = 1;
				break;
			case ptev_disabled:
				if (p.valid && p.in.iclass == ptic_far_call)
					add(&qu->dec, MTEV_BR_SYSCALL, p.in.ip, 0, t);
				p.valid = 0;
				dis_async = 0;
				enabled = 0;
				break;
			case ptev_async_disabled:
				resolve(qu, &p, ev.variant.async_disabled.at);
				pend_async = 1;
				pend_at = ev.variant.async_disabled.at;
				pend_time = t;
				dis_async = 1;
				enabled = 0;
				break;
			case ptev_overflow:
				if (qu->fault_off < 0) {
					note_fault(qu, d, 0);
					qu->fault_off += (int64_t)orig;
				}
				p.valid = 0;
				add(&qu->dec, MTEV_BR_TRACE_START, 0, ev.variant.overflow.ip, t);
				started = 1;
				enabled = 1;
				break;
			default:
				break;
			}
		}
		if (st < 0)
			continue;
		struct pt_insn in;
		memset(&in, 0, sizeof in);
		uint64_t before = now_time(d); /* the time at a sync point */
		st = pt_insn_next(d, &in, sizeof in);
		pt_insn_get_offset(d, &cur_off);
		cur_off += orig;
		if (in.iclass == ptic_error)
			continue;
		uint64_t t = now_time(d);
		last_time = t;
		if (!started || !enabled) {
			/* Synced at a PSB+ while tracing was on (a snapshot). */
			add(&qu->dec, MTEV_BR_TRACE_START, 0, in.ip, before);
			started = 1;
			enabled = 1;
		}
		resolve(qu, &p, in.ip);
		p.valid = 1;
		p.in = in;
		p.time = t;
	}
	if (!last)
		; /* the stream is cut here (lost data): no end */
	else if (pend_async)
		add(&qu->dec, MTEV_BR_TRACE_END, pend_at, 0, pend_time);
	else if (started && !enabled)
		add(&qu->dec, MTEV_BR_TRACE_END, 0, 0, last_time);
	pt_insn_free_decoder(d);
}

static void show(const char *what, const struct rec *r)
{
	printf("  %s: %s 0x%llx -> 0x%llx at %llu\n", what, mtev_branch_name((unsigned)r->type),
	       (unsigned long long)r->from, (unsigned long long)r->to, (unsigned long long)r->time);
}

static int flow_only; /* after the fault, compare without times */

static int same(const struct rec *a, const struct rec *b)
{
	return a->type == b->type && a->from == b->from && a->to == b->to && a->time == b->time;
}

static int same_after(const struct rec *a, const struct rec *b)
{
	if (flow_only)
		return a->type == b->type && a->from == b->from && a->to == b->to;
	return same(a, b);
}

/* Exact comparison. */
static int compare(struct queue *qu)
{
	size_t n = qu->dec.n < qu->truth.n ? qu->dec.n : qu->truth.n;
	for (size_t i = 0; i < n; i++)
		if (!same(&qu->dec.r[i], &qu->truth.r[i])) {
			printf("tid %u: record %zu differs\n", qu->tid, i);
			show("libipt", &qu->dec.r[i]);
			show("truth ", &qu->truth.r[i]);
			return 1;
		}
	if (qu->dec.n != qu->truth.n) {
		printf("tid %u: libipt gives %zu records, the truth %zu\n", qu->tid, qu->dec.n, qu->truth.n);
		if (n < qu->truth.n)
			show("truth next", &qu->truth.r[n]);
		if (n < qu->dec.n)
			show("libipt next", &qu->dec.r[n]);
		return 1;
	}
	return 0;
}

/* With a fault: prefix before it, suffix after the resync. */
static int compare_fault(struct queue *qu, int64_t at_off)
{
	if (qu->fault_off < 0) {
		if (compare(qu))
			return 1;
		printf("tid %u no-fault records %zu\n", qu->tid, qu->dec.n);
		return 0;
	}
	/* Records decoded from the bytes before the injected place are exact
	 * (after it, until libipt notices, they may be garbage). */
	for (size_t i = 0; i < qu->prefix; i++) {
		if (at_off >= 0 && qu->dec.r[i].off > (uint64_t)at_off)
			break;
		if (i >= qu->truth.n || !same(&qu->dec.r[i], &qu->truth.r[i])) {
			printf("tid %u: before the fault, record %zu differs\n", qu->tid, i);
			show("libipt", &qu->dec.r[i]);
			if (i < qu->truth.n)
				show("truth ", &qu->truth.r[i]);
			return 1;
		}
	}
	if (at_off >= 0 && qu->fault_off < at_off) {
		printf("tid %u: fault reported at %lld, before the injected offset %lld\n", qu->tid,
		       (long long)qu->fault_off, (long long)at_off);
		return 1;
	}
	/* After the fault the decoder resumes with a trace-start; from the
	 * record after it on, the decoded records must be the truth's, exactly
	 * (times included), to the end. */
	size_t first = qu->dec.n;
	for (size_t i = qu->prefix; i < qu->dec.n; i++)
		if (qu->dec.r[i].type == MTEV_BR_TRACE_START) {
			first = i + 1;
			break;
		}
	if (first >= qu->dec.n) {
		printf("tid %u: nothing decoded after the fault at %lld\n", qu->tid, (long long)qu->fault_off);
		return 1;
	}
	size_t j = qu->prefix;
	j = 0;
	while (j < qu->truth.n && !same_after(&qu->dec.r[first], &qu->truth.r[j]))
		j++;
	if (j == qu->truth.n) {
		printf("tid %u: the first record after the resync is not in the truth\n", qu->tid);
		show("libipt", &qu->dec.r[first]);
		return 1;
	}
	size_t lost = j > qu->prefix ? j - qu->prefix : 0;
	for (size_t i = first; i < qu->dec.n; i++, j++)
		if (j >= qu->truth.n || !same_after(&qu->dec.r[i], &qu->truth.r[j])) {
			printf("tid %u: after the resync, record %zu differs\n", qu->tid, i);
			show("libipt", &qu->dec.r[i]);
			if (j < qu->truth.n)
				show("truth ", &qu->truth.r[j]);
			return 1;
		}
	if (j != qu->truth.n) {
		printf("tid %u: the decode ends %zu records before the truth\n", qu->tid, qu->truth.n - j);
		return 1;
	}
	printf("tid %u fault-at %lld code %d prefix %zu lost %zu resumed %zu truth %zu\n", qu->tid,
	       (long long)qu->fault_off, qu->fault_code, qu->prefix, lost, qu->dec.n - first, qu->truth.n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: ptcheck DIR [--fault [--at-offset N]]\n");
		return 2;
	}
	const char *dir = argv[1];
	int fault = 0;
	int64_t at_off = -1;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--fault"))
			fault = 1;
		else if (!strcmp(argv[i], "--flow-after"))
			flow_only = 1;
		else if (!strcmp(argv[i], "--at-offset") && i + 1 < argc)
			at_off = strtoll(argv[++i], NULL, 0);
	}
	char path[4096];
	size_t len;
	snprintf(path, sizeof path, "%s/perf.data", dir);
	uint8_t *pd = slurp(path, &len);
	if (!pd || len < 104 || memcmp(pd, "PERFILE2", 8)) {
		fprintf(stderr, "ptcheck: %s: not a perf.data file\n", path);
		return 2;
	}
	struct pt_image *img = pt_image_alloc("ptcheck");
	uint64_t data_off = le64(pd + 40), data_size = le64(pd + 48);
	uint8_t nom = 0;
	for (uint64_t off = data_off; off + 8 <= data_off + data_size;) {
		const uint8_t *r = pd + off;
		uint32_t type = le32(r);
		uint16_t size = le16(r + 6);
		if (size < 8)
			return 2;
		if (type == 70) {
			t_shift = le64(r + 16 + 8 * 1);
			t_mult = le64(r + 16 + 8 * 2);
			t_zero = le64(r + 16 + 8 * 3);
			nom = (uint8_t)le64(r + 16 + 8 * 15);
		} else if (type == 10) {
			uint64_t start = le64(r + 16), mlen = le64(r + 24), pgoff = le64(r + 32);
			uint8_t bl = r[40];
			const char *name = (const char *)r + 72;
			char hex[41] = "";
			for (int i = 0; i < bl; i++)
				snprintf(hex + 2 * i, 3, "%02x", r[44 + i]);
			char file[4096];
			if (!strcmp(name, "[vdso]"))
				snprintf(file, sizeof file, "%s/images/[vdso]/%s/vdso", dir, hex);
			else
				snprintf(file, sizeof file, "%s/images/%s/%s/elf", dir, name + 1, hex);
			int e = pt_image_add_file(img, file, pgoff, mlen, NULL, start);
			if (e < 0) {
				fprintf(stderr, "ptcheck: %s: %s\n", file, pt_errstr(pt_errcode(e)));
				return 1;
			}
		} else if (type == 71) {
			uint64_t sz = le64(r + 8), aoff = le64(r + 16);
			uint32_t tid = le32(r + 36);
			struct queue *qu = queue_of(tid);
			/* A new run where the AUX offsets do not continue (lost
			 * data); the payload's padding is not part of the trace when
			 * the next record's offset says so. */
			if (qu->nrun && qu->run[qu->nrun - 1].orig + qu->run[qu->nrun - 1].len > aoff) {
				uint64_t keep = aoff - qu->run[qu->nrun - 1].orig;
				qu->len -= qu->run[qu->nrun - 1].len - keep;
				qu->run[qu->nrun - 1].len = keep;
			}
			if (!qu->nrun || qu->run[qu->nrun - 1].orig + qu->run[qu->nrun - 1].len != aoff) {
				if (qu->nrun == 64)
					return 2;
				qu->run[qu->nrun].orig = aoff;
				qu->run[qu->nrun].pos = qu->len;
				qu->run[qu->nrun].len = 0;
				qu->nrun++;
			}
			qu->run[qu->nrun - 1].len += sz;
			qu->pt = realloc(qu->pt, qu->len + sz);
			memcpy(qu->pt + qu->len, r + size, sz);
			qu->len += sz;
			off += sz;
		}
		off += size;
	}
	/* The truth. */
	snprintf(path, sizeof path, "%s/truth.mt", dir);
	size_t tlen;
	uint8_t *tb = slurp(path, &tlen);
	int err = 0;
	mtev_reader *mr = tb ? mtev_reader_alloc_mem(tb, tlen, &err) : NULL;
	if (!mr) {
		fprintf(stderr, "ptcheck: cannot read %s\n", path);
		return 2;
	}
	struct mtev_rec rec;
	int rc;
	while ((rc = mtev_read(mr, &rec)) == 1)
		if (rec.kind == MTEV_BRANCH)
			add(&queue_of(rec.br.tid)->truth, (int)rec.br.type, rec.br.from, rec.br.to, rec.br.time);
	if (rc < 0) {
		fprintf(stderr, "ptcheck: %s: %s\n", path, mtev_strerror(-rc));
		return 2;
	}
	struct pt_config cfg;
	pt_config_init(&cfg);
	cfg.cpu.vendor = pcv_intel;
	cfg.cpu.family = 6;
	cfg.cpu.model = 0x6a;
	cfg.cpu.stepping = 6;
	pt_cpu_errata(&cfg.errata, &cfg.cpu);
	cfg.nom_freq = nom;
	cfg.cpuid_0x15_eax = 2;
	cfg.cpuid_0x15_ebx = 176;
	int bad = 0;
	for (int i = 0; i < nq; i++) {
		struct queue *qu = &q[i];
		if (!qu->len) {
			if (qu->truth.n) {
				printf("tid %u: no PT but %zu true branches\n", qu->tid, qu->truth.n);
				bad = 1;
			}
			continue;
		}
		/* Runs of contiguous AUX data decode apart: between them data
		 * was lost (that is the fault, where the offsets jump). */
		for (int k = 0; k < qu->nrun; k++) {
			if (k && qu->fault_off < 0) {
				qu->fault_off = (int64_t)(qu->run[k - 1].orig + qu->run[k - 1].len);
				qu->fault_code = 0;
				qu->prefix = qu->dec.n;
			}
			decode(qu, img, &cfg, qu->run[k].pos, qu->run[k].pos + qu->run[k].len,
			       qu->run[k].orig, k == qu->nrun - 1);
		}
		if (fault ? compare_fault(qu, at_off) : compare(qu))
			bad = 1;
		if (qu->time_mismatch && !fault)
			bad = 1;
		else if (!fault)
			printf("tid %u: %zu records equal\n", qu->tid, qu->dec.n);
	}
	if (bad)
		return 1;
	return 0;
}
