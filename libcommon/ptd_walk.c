/* ptd_walk: the cached walk stepper (issue 20, first step).
 *
 * The libipt stepper asks libipt's block decoder for every block; most of
 * that decoder's cost is walking the code (its block cache, its section
 * lookups, its proceed logic), not reading the trace (docs/decode.md,
 * "Cost").  This stepper keeps libipt's query decoder for the trace (TNT,
 * TIP, events, timing: the same queries in the same order, so libipt's own
 * time computation gives every branch its time) and walks the code itself
 * from a cache: per start address, the straight-line run up to the next
 * instruction that needs trace or ends a block, decoded once.  It emulates
 * the block decoder's contract as the libipt stepper uses it (blocks end at
 * every branch, direct calls and jumps included, and where the section
 * changes; events bind where libipt binds them) and feeds the libipt
 * stepper's own record logic (ptd_handle_block, ptd_handle_event), so the
 * records, gaps, retractions and times are made by the same code.
 *
 * What it does not emulate is never walked: a queue whose trace holds any
 * packet outside the set below (overflow, an FUP outside PSB+ -- interrupts,
 * TSX -- paging, VMCS, PTWRITE, power events, a non-64-bit mode, or a packet
 * that does not parse), a queue with trace (TNT, TIP.*, any FUP) between
 * a PSB and the next MODE.Exec (libipt decodes in an unknown mode there, and
 * what it makes of the code then is not emulated) is decoded by the libipt
 * stepper from its start; the decision is made per queue before its first
 * record (per-thread and per-cpu queues alike: a cpu's queue hands its
 * blocks to the thread its switch records name, as the libipt stepper's
 * does).  Code bytes come from the image files only (mt-decode never reads
 * process memory), which do not change while mapped; the cache is dropped
 * whenever the queue's image changes (exec, fork, a new map): code that
 * changes (JIT, perf-map regions) has no image file, is a no-image gap on
 * both paths and is never cached. */
#include "ptd_int.h"
#include "ptq.h"
#include "vec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cache sizes (log2 entries): a fixed cap; blocks made in order into one
 * array, all dropped when it is full (blk_at: 2^16 entries hold the ~20 k
 * blocks of the 50M trace, made once each; the 2-way hash table before it
 * missed 48 k times), instructions direct-mapped (a new entry evicts the
 * one in its slot); the fuzz build makes them small (mk/fuzz.mk) */
#ifndef WB_BITS
#define WB_BITS 16 /* blocks, 64 bytes each: 4 MiB; their index 512 KiB */
#endif
#define ILD_PRE 256 /* instructions sized ahead (ild_run), direct-mapped */
#ifndef WI_BITS
#define WI_BITS 13 /* instructions, 48 bytes each: 384 KiB */
#endif

/* how a cached block ends */
enum {
	K_COND,	  /* jcc: a TNT bit */
	K_DJMP,	  /* direct jmp: to next */
	K_DCALL,  /* direct call: to next, pushes the return unless a call to the next insn */
	K_ICALL,  /* indirect call: pushes, a TIP */
	K_RET,	  /* ret: a TNT bit (compressed) or a TIP */
	K_IND,	  /* indirect jmp, far transfers: a TIP */
	K_SECEND, /* no branch: the next instruction (next) is in another section */
	K_ERR,	  /* the instruction at next cannot be decoded: err */
};

/* pseudo error: something the walk does not emulate (never for an input
 * the pre-scan let through, short of code the classifier cannot size) */
#define WK_UNSUP (-1000)
#define WK_AGAIN (-1001) /* wd_first: go on as for a known block */

struct wblk {
	uint64_t ip, end_ip, next;
	const struct pt_image *img; /* valid for this image */
	size_t gen;		    /* with this many sections */
	int32_t isid;
	int32_t err;
	uint16_t ninsn;
	uint8_t kind, isize, iclass, push;
	uint8_t known; /* libipt's block cache knows ip (it never forgets) */
	/* where the walk went next, as entry number + 1 (0 none): the
	 * branch's target (a jcc's when taken), else the next instruction or
	 * the last target of an indirect branch or a return; a hint, checked
	 * (blk_next) */
	uint32_t link[2];
};

struct winsn {
	uint64_t ip, target;
	const struct pt_image *img;
	size_t gen;
	int32_t isid, err;
	uint8_t size, cls, direct, valid;
};

/* What all queues share: whether the walk runs at all (every queue
 * walkable, else none: libipt's block cache is shared by all its decoders,
 * so a queue decoded by libipt would change where the others' blocks end),
 * and, per section, which instructions libipt's block cache knows (a bit
 * per byte of code: 128 KiB per MiB of code mapped), because libipt ends a
 * block early the first time it walks into code it walked before. */
struct ptd_walk {
	int walk;
	uint8_t **known; /* by isid */
	size_t nknown;
	/* the caches, shared by all queues, an entry valid for the image and
	 * section count it was made with */
	struct wblk *bc;   /* 2^WB_BITS, nbc of them made */
	uint32_t *bix;	   /* the index: 2^WB_BITS sets of two */
	uint32_t nbc;
	/* a first walk stopped at 1,024 instructions: only then can libipt
	 * know a run's start and not its end (wd_unknown_in) */
	int split;
	struct winsn *ic;
	/* libipt's instruction decoder, asked about one instruction at a
	 * time (ild_decode) */
	struct pt_insn_decoder *ild;
	uint8_t ild_trace[32];
	const uint8_t *ild_code;
	size_t ild_n;
	/* instructions libipt's decoder sized ahead, in one run (ild_run) */
	struct ild_pre {
		uint64_t ip;
		int32_t isid;
		uint8_t size, cls, valid;
	} pre[ILD_PRE];
};

struct ptd_walkq {
	struct ptd *d;
	int decided, libipt, skd022;
	/* the trace: the project's query decoder (fq, fast) or libipt's
	 * (qry); both in lockstep with --decoder walk-check */
	int fast, check;
	struct ptqd fq;
	struct pt_query_decoder *qry;
	/* the emulated block decoder */
	uint64_t ip;
	int enabled, status, process_event, mode;
	struct pt_event ev;
	uint64_t rs[65];
	uint8_t top, bottom;
	/* caches, for the image img with nisids sections */
	const struct pt_image *img;
	size_t nisids;
	int pidx; /* d->proc index of img's process, -2 - k: d->oldimgs[k], -1 none */
	struct winsn *ic;
};

void ptd_walk_free(struct ptq *q)
{
	struct ptd_walkq *w = q->walk;
	if (!w)
		return;
	if (w->qry)
		pt_qry_free_decoder(w->qry);
	free(w);
	q->walk = NULL;
}

void ptd_walk_fini(struct ptd *d)
{
	size_t i;
	if (!d->walk)
		return;
	for (i = 0; i < d->walk->nknown; i++)
		free(d->walk->known[i]);
	free(d->walk->known);
	free(d->walk->bc);
	free(d->walk->bix);
	free(d->walk->ic);
	if (d->walk->ild)
		pt_insn_free_decoder(d->walk->ild);
	free(d->walk);
	d->walk = NULL;
}

/* ---- the trace: one query decoder or the other ----
 *
 * wq_* are pt_qry_* on the queue's query decoder: the project's (ptq.c)
 * when w->fast, else libipt's.  With --decoder walk-check both run in
 * lockstep and every answer (status, value, event, time and offset after
 * it) must be the same, else exit 3 naming the query. */

static void wq_differs(const struct ptd_walkq *w, const char *what, int a, int b, uint64_t va,
		       uint64_t vb)
{
	uint64_t off = 0;
	pt_qry_get_offset(w->qry, &off);
	fprintf(stderr,
		"mt-decode: walk-check: %s differs at offset %" PRIu64 ": libipt %d 0x%" PRIx64
		", ptq %d 0x%" PRIx64 "\n",
		what, off, a, va, b, vb);
	exit(3);
}

/* after a query: the time and offset must agree */
static void wq_after(const struct ptd_walkq *w, const char *what)
{
	uint64_t ta = 0, tb = 0, oa = 0, ob = 0;
	uint32_t ma = 0, ca = 0, mb = 0, cb = 0;
	int a = pt_qry_time(w->qry, &ta, &ma, &ca), b = ptq_time(&w->fq, &tb, &mb, &cb);
	if (a != b || ta != tb || ma != mb || ca != cb)
		wq_differs(w, what, a, b, ta ^ ((uint64_t)ma << 32) ^ ca,
			   tb ^ ((uint64_t)mb << 32) ^ cb);
	a = pt_qry_get_offset(w->qry, &oa);
	b = ptq_get_offset(&w->fq, &ob);
	if (a != b || oa != ob)
		wq_differs(w, "offset", a, b, oa, ob);
	a = pt_qry_get_sync_offset(w->qry, &oa);
	b = ptq_get_sync_offset(&w->fq, &ob);
	if (a != b || oa != ob)
		wq_differs(w, "sync offset", a, b, oa, ob);
}

static int wq_check_ip(struct ptd_walkq *w, const char *what, int a, int b, uint64_t ia,
		       uint64_t ib, uint64_t *ip)
{
	if (a != b || ia != ib)
		wq_differs(w, what, a, b, ia, ib);
	wq_after(w, what);
	*ip = ia;
	return a;
}

static int wq_cond_qry(struct ptd_walkq *w, int *taken)
{
	int a, b, ta = 0, tb = 0;
	a = pt_qry_cond_branch(w->qry, &ta);
	if (w->check) {
		b = ptq_cond_branch(&w->fq, &tb);
		if (a != b || ta != tb)
			wq_differs(w, "cond_branch", a, b, (uint64_t)ta, (uint64_t)tb);
		wq_after(w, "cond_branch");
	}
	*taken = ta;
	return a;
}

static inline int wq_cond(struct ptd_walkq *w, int *taken)
{
	if (w->fast)
		return ptq_cond_branch(&w->fq, taken);
	return wq_cond_qry(w, taken);
}

static int wq_indirect_qry(struct ptd_walkq *w, uint64_t *ip)
{
	uint64_t ia = *ip, ib = *ip;
	int a, b;
	a = pt_qry_indirect_branch(w->qry, &ia);
	if (!w->check) {
		*ip = ia;
		return a;
	}
	b = ptq_indirect_branch(&w->fq, &ib); /* before ib is read */
	return wq_check_ip(w, "indirect_branch", a, b, ia, ib, ip);
}

static inline int wq_indirect(struct ptd_walkq *w, uint64_t *ip)
{
	if (w->fast)
		return ptq_indirect_branch(&w->fq, ip);
	return wq_indirect_qry(w, ip);
}

static int wq_event(struct ptd_walkq *w, struct pt_event *ev)
{
	struct pt_event eb;
	int a, b;
	if (w->fast)
		return ptq_event(&w->fq, ev);
	a = pt_qry_event(w->qry, ev, sizeof *ev);
	if (w->check) {
		memset(&eb, 0, sizeof eb);
		b = ptq_event(&w->fq, &eb);
		if (a != b || (a >= 0 && memcmp(ev, &eb, sizeof eb)))
			wq_differs(w, "event", a, b, ev->type, eb.type);
		wq_after(w, "event");
	}
	return a;
}

static inline int wq_time(const struct ptd_walkq *w, uint64_t *tsc, uint32_t *lm, uint32_t *lc)
{
	if (w->fast)
		return ptq_time(&w->fq, tsc, lm, lc);
	return pt_qry_time(w->qry, tsc, lm, lc);
}

static inline int wq_offset(const struct ptd_walkq *w, uint64_t *off)
{
	if (w->fast)
		return ptq_get_offset(&w->fq, off);
	return pt_qry_get_offset(w->qry, off);
}

static int wq_sync_offset(const struct ptd_walkq *w, uint64_t *off)
{
	if (w->fast)
		return ptq_get_sync_offset(&w->fq, off);
	return pt_qry_get_sync_offset(w->qry, off);
}

static int wq_sync_forward(struct ptd_walkq *w, uint64_t *ip)
{
	uint64_t ia = *ip, ib = *ip;
	int a, b;
	if (w->fast)
		return ptq_sync_forward(&w->fq, ip);
	a = pt_qry_sync_forward(w->qry, &ia);
	if (!w->check) {
		*ip = ia;
		return a;
	}
	b = ptq_sync_forward(&w->fq, &ib); /* before ib is read */
	return wq_check_ip(w, "sync_forward", a, b, ia, ib, ip);
}

static int wq_sync_set(struct ptd_walkq *w, uint64_t *ip, uint64_t off)
{
	uint64_t ia = *ip, ib = *ip;
	int a, b;
	if (w->fast)
		return ptq_sync_set(&w->fq, ip, off);
	a = pt_qry_sync_set(w->qry, &ia, off);
	if (!w->check) {
		*ip = ia;
		return a;
	}
	b = ptq_sync_set(&w->fq, &ib, off); /* before ib is read */
	return wq_check_ip(w, "sync_set", a, b, ia, ib, ip);
}

/* The bit of @ip in libipt's block cache of the section of @isid (NULL: out of
 * memory, d->err set). */
static uint8_t *known_byte(struct ptd *d, int32_t isid, uint64_t ip, uint8_t *mask)
{
	struct ptd_walk *s = d->walk;
	const struct secview *v = &d->secs[isid];
	uint64_t off = ip - v->addr;

	isid = v->bc; /* the cache is the libipt section's */
	v = &d->secs[isid];
	if ((size_t)isid >= s->nknown) {
		size_t n = (size_t)isid + 1;
		uint8_t **k = realloc(s->known, n * sizeof *k);
		if (!k)
			goto oom;
		memset(k + s->nknown, 0, (n - s->nknown) * sizeof *k);
		s->known = k;
		s->nknown = n;
	}
	if (!s->known[isid]) {
		s->known[isid] = calloc((size_t)(v->size + 7) / 8, 1);
		if (!s->known[isid])
			goto oom;
	}
	*mask = (uint8_t)(1u << (off & 7));
	return &s->known[isid][off >> 3];
oom:
	ptd_fail(d, PTD_ESYS, "out of memory");
	return NULL;
}

/* ---- the pre-scan: may this queue be walked? ----
 *
 * Every packet the query decoder may read must be one the walk emulates.
 * It reads on from the PSB it syncs to, through later PSBs, and after an
 * error syncs forward again with libipt's search, which can find a PSB
 * inside bytes the packet decoder read as other packets (PSBs that
 * overlap).  So the stretch from every PSB of that search's chain is read
 * as libipt's packet decoder reads it, up to a later PSB of the chain (read
 * from there anyway), an error or the end. */

struct scan {
	int in_psb, fup, psb_fup, mode;
};

/* One packet (@size bytes, pd->pos just after it): may the walk meet it
 * here? */
static int scan_pkt(struct scan *s, const struct ptqd *pd, const uint8_t *end,
		    enum pt_packet_type type, uint8_t mb, int size, int skd007)
{
	switch (type) {
	case ppt_psb:
		if (s->fup) /* an FUP binds to a TIP.PGD only (an async disable) */
			return 0;
		s->in_psb = 1;
		s->psb_fup = s->mode = 0;
		return 1;
	case ppt_psbend:
		s->in_psb = 0;
		return s->mode || !s->psb_fup;
	case ppt_cyc:
		/* SKD007 (libipt's query decoder applies it): a 2-byte CYC
		 * whose last byte and the next are an OVF is that OVF, which
		 * the walk does not emulate */
		return !(skd007 && size == 2 && pd->pos[-1] == 0x02 && pd->pos < end &&
			 pd->pos[0] == 0xf3);
	case ppt_pad:
	case ppt_tsc:
	case ppt_cbr:
	case ppt_tma:
	case ppt_mtc:
		return 1;
	case ppt_tnt_8:
	case ppt_tnt_64:
	case ppt_tip:
	case ppt_tip_pge:
		return !s->fup && s->mode;
	case ppt_tip_pgd:
		s->fup = 0;
		return s->mode;
	case ppt_fup:
		if (s->in_psb) {
			s->psb_fup = 1;
			return 1;
		}
		/* outside PSB+ before a MODE.Exec: libipt may start
		 * decoding there in an unknown mode (a PSB+ without an FUP
		 * takes this one's ip), which is not emulated */
		s->fup = 1;
		return s->mode;
	case ppt_mode:
		/* MODE.TSX in PSB+, outside a transaction (InTX and TXAbort
		 * clear): a status update, as MODE.Exec's */
		if ((mb & 0xe0) == 0x20)
			return s->in_psb && !(mb & 3);
		/* MODE.Exec, 64-bit: leaf 0, CS.L, not CS.D */
		s->mode = 1;
		return !s->fup && (mb & 0xe3) == 0x01;
	default:
		return 0;
	}
}

/* The segment @cfg: 1 if the walk may decode it, 0 if not, -1 out of
 * memory. */
static int seg_walkable(const struct pt_config *cfg, int skd007)
{
	static const int8_t ipsz[8] = {0, 2, 4, 6, 6, -1, 8, -1}; /* a TIP's IP bytes */
	const uint8_t **chain = NULL;
	size_t n = 0, cap = 0, i, j = 1;
	struct ptqd pd;
	int ok = 1;

	ptq_init(&pd, cfg);
	while (ptq_pkt_sync(&pd) >= 0) { /* strictly forward: each from the last */
		if (mt_grow((void **)&chain, &cap, n + 1, sizeof *chain) < 0) {
			free(chain);
			return -1;
		}
		chain[n++] = pd.pos;
	}
	for (i = 0; ok && i < n; i++) {
		struct scan s = {0};
		enum pt_packet_type type;
		uint8_t mb;
		int st = 0;

		ptq_init(&pd, cfg);
		pd.pos = pd.sync = chain[i];
		for (;;) {
			const uint8_t *at;
			if (pd.pos < cfg->end) {
				/* the common packets, as ptq_pkt_next and scan_pkt
				 * take them: TNT-8, a one- or two-byte CYC, TIP */
				uint8_t b = *pd.pos;
				if (!(b & 1) && b > 2) {
					ok = !s.fup && s.mode;
					pd.pos++;
					if (!ok)
						break;
					continue;
				}
				if ((b & 7) == 3) {
					pd.pos++;
					continue;
				}
				/* a two-byte CYC, but one SKD007 could make an OVF */
				if ((b & 7) == 7 && cfg->end - pd.pos >= 2 && !(pd.pos[1] & 1) &&
				    !(skd007 && pd.pos[1] == 0x02)) {
					pd.pos += 2;
					continue;
				}
				if ((b & 0x1f) == 0x0d && ipsz[b >> 5] >= 0 &&
				    cfg->end - pd.pos > ipsz[b >> 5]) {
					ok = !s.fup && s.mode;
					pd.pos += ipsz[b >> 5] + 1;
					if (!ok)
						break;
					continue;
				}
			}
			if ((st = ptq_pkt_next(&pd, &type, &mb)) < 0)
				break;
			at = pd.pos - st;
			if (type == ppt_psb) {
				while (j < n && chain[j] < at)
					j++;
				if (j < n && chain[j] == at && at != chain[i]) {
					ok = !s.fup; /* as scan_pkt at a PSB */
					break;
				}
			}
			ok = scan_pkt(&s, &pd, cfg->end, type, mb, st, skd007);
			if (!ok)
				break;
		}
		if (ok && st < 0 && st != -pte_eos)
			ok = 0;
	}
	free(chain);
	return ok;
}

static int walkable(struct ptq *q, int skd007)
{
	size_t k;

	for (k = 0; k < q->nsegs; k++) {
		struct pt_config cfg;
		int ok;

		pt_config_init(&cfg);
		cfg.begin = q->stream + q->segs[k].begin;
		cfg.end = q->stream + q->segs[k].end;
		if (cfg.begin == cfg.end)
			continue;
		ok = seg_walkable(&cfg, skd007);
		if (ok <= 0)
			return 0;
	}
	return 1;
}

/* ---- code: sections, instructions, blocks ---- */

static void cache_check(struct ptd *d, struct ptq *q, struct ptd_walkq *w)
{
	size_t i;
	const struct proc *p = NULL;
	if (w->img == q->img && w->pidx >= 0 && (size_t)w->pidx < d->nproc &&
	    d->proc[w->pidx].img == q->img && d->proc[w->pidx].nisids == w->nisids)
		return;
	if (w->img == q->img && w->pidx <= -2)
		return; /* an image an exec replaced: it changes no more */
	w->pidx = -1;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].img == q->img && q->img) {
			w->pidx = (int)i;
			p = &d->proc[i];
		}
	w->img = q->img;
	w->nisids = p ? p->nisids : 0;
	/* a queue goes on with the image an exec replaced until it sets its
	 * thread again (the libipt stepper's q->img): its sections */
	for (i = 0; !p && q->img && i < d->noldimgs; i++)
		if (d->oldimgs[i].img == q->img) {
			w->pidx = -2 - (int)i;
			w->nisids = d->oldimgs[i].nisids;
			break;
		}
}

/* ---- instruction length and class: libipt's own decoder ----
 *
 * The walk must size and classify every instruction exactly as libipt's
 * block decoder does, also where a corrupt trace sends it into the middle
 * of an instruction or into data: invalid encodings included (far call
 * and jmp 9a/ea in 64-bit mode, x87 escapes reached mid-instruction, 0f
 * opcodes that do not exist, REX.W beside 66, VMCALL as a far call...),
 * where libipt's table-driven decoder gives lengths no ISA manual does.
 * An own length decoder agreed with objdump on compiled code but not with
 * libipt on such bytes (fuzz_ptwalk: a return into the middle of a call
 * walked into "ea", which libipt decodes as a 7-byte far jmp and the own
 * decoder refused).  So each instruction the cache has not seen goes to
 * libipt's instruction decoder: one decoder for the walk, over a fixed
 * trace (PSB, MODE.Exec 64-bit, PSBEND, TIP.PGE to ILD_IP) whose image is
 * a callback serving the instruction's bytes; pt_insn_next decodes the one
 * instruction there (its query for trace then fails: there is none).
 * About 1 us per instruction, once per cache entry. */
#define ILD_IP 0x1000

static int ild_read(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip,
		    void *ctx)
{
	const struct ptd_walk *s = ctx;
	size_t n;

	(void)asid;
	if (ip < ILD_IP || ip - ILD_IP >= s->ild_n)
		return -pte_nomap;
	n = s->ild_n - (size_t)(ip - ILD_IP);
	if (n > size)
		n = size;
	memcpy(buf, s->ild_code + (ip - ILD_IP), n);
	return (int)n;
}

static int ild_init(struct ptd_walk *s)
{
	struct pt_config cfg;
	struct pt_encoder *e;
	struct pt_packet pk[4];
	uint64_t len = 0;
	size_t k;
	int ok = 1;

	memset(pk, 0, sizeof pk);
	pk[0].type = ppt_psb;
	pk[1].type = ppt_mode;
	pk[1].payload.mode.leaf = pt_mol_exec;
	pk[1].payload.mode.bits.exec.csl = 1;
	pk[2].type = ppt_psbend;
	pk[3].type = ppt_tip_pge;
	pk[3].payload.ip.ipc = pt_ipc_sext_48;
	pk[3].payload.ip.ip = ILD_IP;
	pt_config_init(&cfg);
	cfg.begin = s->ild_trace;
	cfg.end = s->ild_trace + sizeof s->ild_trace;
	e = pt_alloc_encoder(&cfg);
	if (!e)
		return -pte_nomem;
	for (k = 0; k < 4 && ok; k++)
		ok = pt_enc_next(e, &pk[k]) > 0;
	ok = ok && pt_enc_get_offset(e, &len) >= 0;
	pt_free_encoder(e);
	if (!ok)
		return -pte_internal;
	cfg.end = s->ild_trace + len;
	s->ild = pt_insn_alloc_decoder(&cfg);
	if (!s->ild)
		return -pte_nomem;
	if (pt_image_set_callback(pt_insn_get_image(s->ild), ild_read, s) < 0)
		return -pte_internal;
	return 0;
}

/* libipt's size and class of the 64-bit instruction in @b (@n bytes): 0,
 * -pte_bad_insn when it does not decode (or needs more than @n bytes), or
 * another error. */
static int ild_decode(struct ptd_walk *s, const uint8_t *b, size_t n, uint8_t *size,
		      enum pt_insn_class *cls)
{
	struct pt_insn in;
	struct pt_event ev;
	int st;

	if (!s->ild && (st = ild_init(s)) < 0)
		return st;
	s->ild_code = b;
	s->ild_n = n;
	st = pt_insn_sync_set(s->ild, 0);
	while (st >= 0 && (st & pts_event_pending))
		st = pt_insn_event(s->ild, &ev, sizeof ev);
	if (st < 0)
		return -pte_internal;
	memset(&in, 0, sizeof in);
	st = pt_insn_next(s->ild, &in, sizeof in);
	s->ild_code = NULL;
	/* a branch's query fails (no trace follows): the instruction is
	 * decoded all the same */
	if (st < 0 && (st == -pte_bad_insn || st == -pte_nomap || !in.size))
		return -pte_bad_insn;
	if (in.ip != ILD_IP || !in.size || in.size > n)
		return -pte_internal;
	*size = in.size;
	*cls = in.iclass;
	return 0;
}

/* Sizes the straight-line run of section @isid from @ip (the section's
 * bytes @b, @n of them to its end) with one sync of libipt's decoder, into
 * s->pre: pt_insn_next goes on without trace from one instruction to the
 * next and stops at the first branch (its query fails: the branch is
 * decoded all the same) or at an instruction that does not decode.  Each
 * instruction sees the bytes ild_decode would give it (at most 15, to the
 * section's end): a run cut before the section's end stops 15 bytes
 * short of the cut.  The sync and its events are most of the cost of
 * sizing one instruction, shared here by the run. */
static void ild_run(struct ptd_walk *s, int32_t isid, uint64_t ip, const uint8_t *b, size_t n)
{
	struct pt_insn in;
	struct pt_event ev;
	uint64_t cur = 0;
	size_t cap = n > 2048 ? 2048 : n;
	int st, k;

	if (!s->ild && ild_init(s) < 0)
		return;
	s->ild_code = b;
	s->ild_n = cap;
	st = pt_insn_sync_set(s->ild, 0);
	while (st >= 0 && (st & pts_event_pending))
		st = pt_insn_event(s->ild, &ev, sizeof ev);
	for (k = 0; st >= 0 && k < 64; k++) {
		struct ild_pre *p;
		if (cap < n && cur + 15 > cap)
			break;
		memset(&in, 0, sizeof in);
		st = pt_insn_next(s->ild, &in, sizeof in);
		if (st < 0 && (st == -pte_bad_insn || st == -pte_nomap || !in.size))
			break;
		if (in.ip != ILD_IP + cur || !in.size || cur + in.size > cap)
			break;
		p = &s->pre[(ip + cur) % ILD_PRE];
		p->ip = ip + cur;
		p->isid = isid;
		p->size = in.size;
		p->cls = (uint8_t)in.iclass;
		p->valid = 1;
		if (in.iclass != ptic_other)
			break;
		cur += in.size;
	}
	s->ild_code = NULL;
}

/* libipt's class as the walk's (x86br's names; far transfers as the
 * classifier calls them) */
static uint8_t cls_of(enum pt_insn_class c)
{
	switch (c) {
	case ptic_call:
		return X86BR_CALL;
	case ptic_return:
		return X86BR_RET;
	case ptic_jump:
		return X86BR_JMP;
	case ptic_cond_jump:
		return X86BR_JCC;
	case ptic_far_call:
		return X86BR_SYSCALL;
	case ptic_far_return:
		return X86BR_SYSRET;
	case ptic_far_jump:
		return X86BR_FARJMP;
	default:
		return X86BR_NONE;
	}
}

/* Up to 15 bytes of code at @ip from its section in the queue's image
 * (the newest section holding it, as in libipt's image): how many (0: no
 * section, *isid -1), *isid its section. */
static int code_at(struct ptd *d, const struct ptd_walkq *w, uint64_t ip, uint8_t *buf,
		   int32_t *isid)
{
	const int32_t *isids = NULL;
	const struct secview *v = NULL;
	size_t k = 0;
	int n;

	if (w->pidx >= 0) {
		isids = d->proc[w->pidx].isids;
		k = d->proc[w->pidx].nisids;
	} else if (w->pidx <= -2) {
		isids = d->oldimgs[-2 - w->pidx].isids;
		k = d->oldimgs[-2 - w->pidx].nisids;
	}
	*isid = -1;
	while (k-- > 0) {
		int32_t s = isids[k];
		if (s > 0 && (size_t)s < d->nsecs && d->secs[s].addr <= ip &&
		    ip - d->secs[s].addr < d->secs[s].size) {
			*isid = s;
			v = &d->secs[s];
			break;
		}
	}
	if (!v)
		return 0;
	if (v->data) {
		uint64_t left = v->size - (ip - v->addr);
		n = left < 15 ? (int)left : 15;
		memcpy(buf, v->data + (ip - v->addr), (size_t)n);
		return n;
	}
	n = pt_iscache_read(d->isc, buf, 15, *isid, ip);
	if (n <= 0)
		*isid = -1;
	return n > 0 ? n : 0;
}

/* Erratum SKD022: an async disable at VMLAUNCH/VMRESUME is a sync one
 * (libipt rewrites the event; not emulated). */
static int vmentry_at(struct ptd_walkq *w, uint64_t ip)
{
	uint8_t buf[16];
	int32_t isid;
	int n = code_at(w->d, w, ip, buf, &isid);
	return n >= 3 && buf[0] == 0x0f && buf[1] == 0x01 && (buf[2] == 0xc2 || buf[2] == 0xc3);
}

/* The instruction at @ip (cached). */
static const struct winsn *insn_at(struct ptd *d, struct ptd_walkq *w, uint64_t ip)
{
	struct winsn *in = &w->ic[(ip ^ (ip >> WI_BITS)) & ((1u << WI_BITS) - 1)];
	uint8_t buf[16];
	int n;
	int32_t isid;

	if (in->valid && in->ip == ip && in->img == w->img && in->gen == w->nisids)
		return in;
	memset(in, 0, sizeof *in);
	in->ip = ip;
	in->img = w->img;
	in->gen = w->nisids;
	in->valid = 1;
	in->err = -pte_nomap;
	n = code_at(d, w, ip, buf, &isid);
	if (isid < 0)
		return in;
	in->isid = isid;
	{
		struct x86br_insn xi;
		enum pt_insn_class ic = ptic_error;
		struct ptd_walk *s = d->walk;
		struct ild_pre *p = &s->pre[ip % ILD_PRE];
		int st;

		if (!(p->valid && p->ip == ip && p->isid == isid) && d->secs[isid].data) {
			const struct secview *v = &d->secs[isid];
			ild_run(s, isid, ip, v->data + (ip - v->addr), (size_t)(v->size - (ip - v->addr)));
		}
		if (p->valid && p->ip == ip && p->isid == isid) {
			in->size = p->size;
			ic = (enum pt_insn_class)p->cls;
			p->valid = 0;
			st = 0;
		} else {
			st = ild_decode(s, buf, (size_t)n, &in->size, &ic);
		}

		if (st < 0) {
			in->err = st;
			if (st == -pte_bad_insn && n < 15) {
				/* cut by its section's end: libipt reads on into
				 * a section that maps the next byte (not
				 * emulated); with none, it fails so too */
				uint8_t nb[16];
				int32_t nisid;
				code_at(d, w, ip + (unsigned)n, nb, &nisid);
				if (nisid >= 0)
					in->err = WK_UNSUP;
			}
			return in;
		}
		in->cls = cls_of(ic);
		if (in->cls == X86BR_JCC || in->cls == X86BR_JMP || in->cls == X86BR_CALL) {
			/* a direct branch's target: the classifier's, which
			 * sizes and classes every branch as libipt does
			 * (tests/unit/test_walk.c) */
			x86br_decode(buf, (size_t)n, 64, ip, &xi);
			if (xi.cls != in->cls || xi.size != in->size) {
				in->err = WK_UNSUP; /* never seen */
				return in;
			}
			in->direct = xi.direct;
			in->target = xi.target;
		}
	}
	in->err = 0;
	return in;
}

static uint8_t iclass_of(uint8_t cls, int direct)
{
	switch (cls) {
	case X86BR_JCC:
		return ptic_cond_jump;
	case X86BR_JMP:
		return ptic_jump;
	case X86BR_CALL:
		return ptic_call;
	case X86BR_RET:
		return ptic_return;
	case X86BR_NONE:
		return ptic_other;
	default:
		(void)direct;
		return ptic_error; /* libipt's cached blocks: class unknown */
	}
}

/* The block cache: entries allocated in order in one array (bc: a block
 * lives where it was made until the array is full, then all are dropped),
 * found through an index of two ways a set (bix: entry number + 1, 0
 * empty; way 0 the most recently used).  Dense, so the blocks a trace
 * walks lie on as few lines and pages as they can: on this VM a load from
 * 19 k entries spread over 4 MB cost ~35 ns, from the same entries side by
 * side ~20 ns (docs/decode.md, "Cost"). */
static inline uint32_t *blk_set(const struct ptd_walk *s, uint64_t ip)
{
	return &s->bix[((ip ^ (ip >> WB_BITS)) & ((1u << WB_BITS) - 1)) * 2];
}

/* Whether entry @b holds the block at @ip, for the current image. */
static inline int blk_hit(const struct ptd_walkq *w, const struct wblk *b, uint64_t ip)
{
	return b->ip == ip && b->img == w->img && b->gen == w->nisids;
}

/* The cached block starting at @ip. */
static const struct wblk *blk_at(struct ptd *d, struct ptd_walkq *w, uint64_t ip)
{
	struct ptd_walk *s = d->walk;
	uint32_t *set = blk_set(s, ip), i;
	struct wblk *b;
	uint64_t cur = ip;
	uint32_t n = 0;

	if ((i = set[0]) && blk_hit(w, &s->bc[i - 1], ip))
		return &s->bc[i - 1];
	if ((i = set[1]) && blk_hit(w, &s->bc[i - 1], ip)) {
		set[1] = set[0];
		set[0] = i;
		return &s->bc[i - 1];
	}
	if (s->nbc == (1u << WB_BITS)) {
		/* full: every block is dropped (its set may be anywhere) */
		memset(s->bix, 0, ((size_t)2 << WB_BITS) * sizeof *s->bix);
		s->nbc = 0;
	}
	b = &s->bc[s->nbc++];
	set[1] = set[0];
	set[0] = s->nbc;
	memset(b, 0, sizeof *b);
	b->ip = ip;
	b->img = w->img;
	b->gen = w->nisids;
	b->isid = 0;
	b->iclass = ptic_error;
	for (;;) {
		const struct winsn *in = insn_at(d, w, cur);
		if (n && in->err == -pte_nomap) {
			/* no section there: libipt ends the block where its
			 * section ends, and fails at the next one, empty */
			b->kind = K_SECEND;
			b->next = cur;
			break;
		}
		if (in->err) {
			b->kind = K_ERR;
			b->err = in->err;
			b->next = cur;
			break;
		}
		if (n && in->isid != b->isid) {
			b->kind = K_SECEND;
			b->next = cur;
			break;
		}
		if (n == 0xffff) {
			/* libipt's block is full: it ends here */
			b->kind = K_SECEND;
			b->next = cur;
			break;
		}
		b->isid = in->isid;
		b->end_ip = cur;
		b->isize = in->size;
		b->iclass = iclass_of(in->cls, in->direct);
		n++;
		if (in->cls == X86BR_NONE) {
			cur += in->size;
			continue;
		}
		b->next = in->target;
		switch (in->cls) {
		case X86BR_JCC:
			b->kind = K_COND;
			break;
		case X86BR_JMP:
			b->kind = in->direct ? K_DJMP : K_IND;
			break;
		case X86BR_CALL:
			b->kind = in->direct ? K_DCALL : K_ICALL;
			/* a call to the next instruction (position-independent
			 * code) is not a call to return from */
			b->push = !in->direct || in->target != cur + in->size;
			break;
		case X86BR_RET:
			b->kind = K_RET;
			break;
		default:
			b->kind = K_IND;
		}
		break;
	}
	b->ninsn = (uint16_t)n;
	return b;
}

/* The cached block at w->ip, where the walk went from @prev by its link
 * @k: the link if it still holds (an entry is never changed once made,
 * only dropped with all the others, so one that matches the address and
 * image is the block), else from the index, and the link set. */
static inline const struct wblk *blk_next(struct ptd *d, struct ptd_walkq *w,
					  const struct wblk *prev, unsigned k)
{
	struct ptd_walk *s = d->walk;
	uint32_t l = prev->link[k];
	const struct wblk *c;

	if (l && blk_hit(w, &s->bc[l - 1], w->ip))
		return &s->bc[l - 1];
	c = blk_at(d, w, w->ip);
	((struct wblk *)prev)->link[k] = (uint32_t)(c - s->bc) + 1;
	return c;
}

/* ---- the emulated block decoder (pt_blk_* as the libipt stepper uses it) ---- */

static void rs_push(struct ptd_walkq *w, uint64_t ip)
{
	w->rs[w->top] = ip;
	w->top = w->top == 64 ? 0 : (uint8_t)(w->top + 1);
	if (w->bottom == w->top)
		w->bottom = w->bottom == 64 ? 0 : (uint8_t)(w->bottom + 1);
}

static int rs_pop(struct ptd_walkq *w, uint64_t *ip)
{
	if (w->top == w->bottom)
		return -pte_retstack_empty;
	w->top = w->top ? (uint8_t)(w->top - 1) : 64;
	*ip = w->rs[w->top];
	return 0;
}

static int wd_status(const struct ptd_walkq *w, int flags)
{
	if (!w->enabled)
		flags |= pts_ip_suppressed;
	if ((w->status & pts_eos) && !w->process_event)
		flags |= pts_eos;
	return flags;
}

static int wd_fetch_event(struct ptd_walkq *w)
{
	int st;
	if (w->process_event)
		return 1;
	if (!(w->status & pts_event_pending))
		return 0;
	st = wq_event(w, &w->ev);
	if (st < 0)
		return st;
	w->process_event = 1;
	w->status = st;
	return 1;
}

static int wd_trailing_event(struct ptd_walkq *w)
{
	int st = wd_fetch_event(w);
	if (st <= 0)
		return st < 0 ? st : wd_status(w, 0);
	switch (w->ev.type) {
	case ptev_disabled:
		break; /* bound on the event flow */
	case ptev_enabled:
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
		return wd_status(w, pts_event_pending);
	case ptev_exec_mode:
		if (!w->ev.ip_suppressed && w->ip != w->ev.variant.exec_mode.ip)
			break;
		return wd_status(w, pts_event_pending);
	case ptev_tsx:
		/* not aborted (the pre-scan): BDM64 does not apply */
		if (!w->ev.ip_suppressed && w->ip != w->ev.variant.tsx.ip)
			break;
		return wd_status(w, pts_event_pending);
	case ptev_async_disabled:
		if (w->ip != w->ev.variant.async_disabled.at)
			break;
		if (w->skd022 && vmentry_at(w, w->ev.variant.async_disabled.at))
			return WK_UNSUP;
		return wd_status(w, pts_event_pending);
	default:
		return WK_UNSUP;
	}
	return wd_status(w, 0);
}

/* What follows a block: an event fetched when one is pending (its status
 * then), else the status (the common case, inline). */
static inline int wd_trailing(struct ptd_walkq *w)
{
	if (!w->process_event && !(w->status & pts_event_pending))
		return wd_status(w, 0);
	return wd_trailing_event(w);
}

static void wd_reset(struct ptd_walkq *w)
{
	w->ip = 0;
	w->enabled = 0;
	w->status = 0;
	w->process_event = 0;
	w->mode = ptem_unknown;
	w->top = w->bottom = 0;
	memset(&w->ev, 0, sizeof w->ev);
}

static int wd_start(struct ptd_walkq *w, int st)
{
	if (st < 0)
		return st;
	w->status = st;
	if (!(st & pts_ip_suppressed))
		w->enabled = 1;
	return wd_trailing(w);
}

static int wd_sync_forward(struct ptd_walkq *w)
{
	wd_reset(w);
	return wd_start(w, wq_sync_forward(w, &w->ip));
}

static int wd_sync_set(struct ptd_walkq *w, uint64_t off)
{
	wd_reset(w);
	return wd_start(w, wq_sync_set(w, &w->ip, off));
}

/* One instruction of the event flow (pt_blk_proceed_one_insn): 1 added, 0
 * the block ends before it (another section), or an error. */
static int wd_one_insn(struct ptd *d, struct ptd_walkq *w, struct pt_block *b,
		       const struct winsn **pin)
{
	const struct winsn *in = insn_at(d, w, w->ip);
	if (in->err)
		return in->err;
	if (in->isid != b->isid) {
		if (b->ninsn)
			return 0;
		b->isid = in->isid;
	}
	if (in->cls == X86BR_CALL && (!in->direct || in->target != in->ip + in->size))
		rs_push(w, in->ip + in->size);
	b->iclass = in->cls == X86BR_SYSCALL ? ptic_far_call
		    : in->cls == X86BR_SYSRET ? ptic_far_return
		    : in->cls == X86BR_FARJMP ? ptic_far_jump
					      : iclass_of(in->cls, in->direct);
	b->end_ip = in->ip;
	b->ninsn++;
	*pin = in;
	return 1;
}

/* pt_insn_next_ip: where @in goes without trace, or -pte_bad_query. */
static int wd_next_ip(const struct winsn *in, uint64_t *ip)
{
	switch (in->cls) {
	case X86BR_NONE:
		*ip = in->ip + in->size;
		return 0;
	case X86BR_JMP:
	case X86BR_CALL:
		if (in->direct) {
			*ip = in->target;
			return 0;
		}
		return -pte_bad_query;
	default:
		return -pte_bad_query;
	}
}

static int wd_ends_block(const struct winsn *in)
{
	return in->cls == X86BR_JMP || in->cls == X86BR_CALL;
}

/* To a synchronous disable: the next instruction that needs trace (ip
 * suppressed), or the disable ip.  1 reached, 0 the block ended first,
 * -pte_bad_query: it binds to *pin (needs trace), or an error. */
static int wd_to_disabled(struct ptd *d, struct ptd_walkq *w, struct pt_block *b,
			  const struct winsn **pin)
{
	int st;
	if (w->ev.ip_suppressed) {
		for (;;) {
			st = wd_one_insn(d, w, b, pin);
			if (st <= 0)
				return st;
			st = wd_next_ip(*pin, &w->ip);
			if (st < 0)
				return st;
			if (wd_ends_block(*pin))
				return 0;
		}
	}
	for (;;) {
		if (w->ip == w->ev.variant.disabled.ip)
			return 1;
		st = wd_one_insn(d, w, b, pin);
		if (st <= 0)
			return st;
		st = wd_next_ip(*pin, &w->ip);
		if (st < 0)
			return st;
		if (wd_ends_block(*pin))
			return w->ip == w->ev.variant.disabled.ip;
	}
}

/* To @ip without trace (pt_blk_proceed_to_ip): 1 reached, 0 the block
 * ended first (another section, a direct call or jump), -pte_bad_query:
 * *pin needs trace (w->ip is its ip), or an error. */
static int wd_to_ip(struct ptd *d, struct ptd_walkq *w, struct pt_block *b,
		    const struct winsn **pin, uint64_t ip)
{
	int st;
	for (;;) {
		if (w->ip == ip)
			return 1;
		st = wd_one_insn(d, w, b, pin);
		if (st <= 0)
			return st;
		st = wd_next_ip(*pin, &w->ip);
		if (st < 0)
			return st;
		if (wd_ends_block(*pin))
			return w->ip == ip;
	}
}

/* The one query that takes @in (an instruction that needs trace, already
 * in the block, its call pushed) to its successor, which ends the block
 * (pt_blk_proceed_with_trace): 0 and w->ip, or an error. */
static int wd_with_trace(struct ptd_walkq *w, const struct winsn *in)
{
	int st, taken;

	if (!in)
		return -pte_internal;
	switch (in->cls) {
	case X86BR_JCC:
		st = wq_cond(w, &taken);
		if (st < 0)
			return st;
		w->ip = taken ? in->target : in->ip + in->size;
		break;
	case X86BR_RET:
		st = wq_cond(w, &taken);
		if (st >= 0) {
			if (!taken)
				return -pte_bad_retcomp;
			taken = rs_pop(w, &w->ip);
			if (taken < 0)
				return taken;
			break;
		}
		if (st != -pte_bad_query)
			return st;
		/* not compressed: a TIP */
		/* fallthrough */
	default:
		st = wq_indirect(w, &w->ip);
		if (st < 0)
			return st;
	}
	w->status = st;
	return (st & pts_ip_suppressed) ? -pte_noip : 0;
}

static int wd_proceed_event(struct ptd *d, struct ptd_walkq *w, struct pt_block *b)
{
	const struct winsn *in = NULL;
	int st;

	switch (w->ev.type) {
	case ptev_enabled:
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
		break;
	case ptev_disabled:
		st = wd_to_disabled(d, w, b, &in);
		if (st <= 0) {
			if (st != -pte_bad_query)
				return st;
			/* it binds to the instruction that needs trace: tracing
			 * is expected back after a call, else who knows */
			if (in && (in->cls == X86BR_CALL || in->cls == X86BR_SYSCALL))
				w->ip = in->ip + in->size;
			else
				w->ip = 0;
		}
		break;
	case ptev_async_disabled:
		/* to the FUP's ip without trace; needing trace is an error */
		st = wd_to_ip(d, w, b, &in, w->ev.variant.async_disabled.at);
		if (st <= 0)
			return st;
		if (w->skd022 && vmentry_at(w, w->ev.variant.async_disabled.at))
			return WK_UNSUP;
		break;
	case ptev_tsx:
		/* to its ip without trace, as an async disable's */
		if (w->ev.ip_suppressed)
			break;
		st = wd_to_ip(d, w, b, &in, w->ev.variant.tsx.ip);
		if (st <= 0)
			return st;
		break;
	case ptev_exec_mode:
		if (w->ev.ip_suppressed)
			break;
		/* to the mode's ip (a PSB+ FUP that is not where the walk
		 * is: a corrupt trace): without trace as far as it goes, then
		 * one query ends the block */
		st = wd_to_ip(d, w, b, &in, w->ev.variant.exec_mode.ip);
		if (st == -pte_bad_query) {
			st = wd_with_trace(w, in);
			if (st < 0)
				return st;
			st = w->ip == w->ev.variant.exec_mode.ip;
		}
		if (st <= 0)
			return st;
		break;
	default:
		return WK_UNSUP;
	}
	return wd_status(w, pts_event_pending);
}

/* Marks the instructions from @ip through @last (one straight-line run of
 * section @isid) known to libipt's block cache. */
static int wd_mark(struct ptd *d, struct ptd_walkq *w, int32_t isid, uint64_t ip, uint64_t last)
{
	for (;;) {
		uint8_t m, *kb = known_byte(d, isid, ip, &m);
		if (!kb)
			return -pte_nomem;
		*kb |= m;
		if (ip == last)
			return 0;
		ip += insn_at(d, w, ip)->size;
	}
}

/* A TIP's status for cached block @c's indirect branch.  An ip-suppressed
 * TIP leaves libipt's block decoder at the branch (its cached path reports
 * the block and no error): the next block starts there, with the branch
 * again (fuzz-ptwalk-suppressed-tip-ret.pt). */
static inline void wd_tip_status(struct ptd_walkq *w, const struct wblk *c, int st)
{
	w->status = st;
	if (st & pts_ip_suppressed)
		w->ip = c->end_ip;
}

/* The query that ends cached block @c (any kind but K_ERR): the status,
 * w->ip where the block goes; the return stack as the block decoder's. */
static inline __attribute__((always_inline)) int wd_query(struct ptd_walkq *w, const struct wblk *c)
{
	int st, taken;

	switch (c->kind) {
	case K_COND:
		st = wq_cond(w, &taken);
		if (st >= 0) {
			w->status = st;
			w->ip = taken ? c->next : c->end_ip + c->isize;
		}
		return st;
	case K_DJMP:
		w->ip = c->next;
		return 0;
	case K_DCALL:
		if (c->push)
			rs_push(w, c->end_ip + c->isize);
		w->ip = c->next;
		return 0;
	case K_ICALL:
		rs_push(w, c->end_ip + c->isize);
		st = wq_indirect(w, &w->ip);
		if (st >= 0)
			wd_tip_status(w, c, st);
		return st;
	case K_RET:
		st = wq_cond(w, &taken);
		if (st >= 0) {
			w->status = st;
			st = !taken ? -pte_bad_retcomp : rs_pop(w, &w->ip);
		} else if (st == -pte_bad_query) {
			st = wq_indirect(w, &w->ip);
			if (st >= 0)
				wd_tip_status(w, c, st);
		}
		return st;
	case K_IND:
		st = wq_indirect(w, &w->ip);
		if (st >= 0)
			wd_tip_status(w, c, st);
		return st;
	default: /* K_SECEND */
		w->ip = c->next;
		return 0;
	}
}

/* The query that ends cached block @c on its first walk (wd_first): an
 * indirect branch's TIP must carry an ip; WK_AGAIN: no query. */
static int wd_first_query(struct ptd_walkq *w, const struct wblk *c)
{
	int st;

	if (c->kind != K_COND && c->kind != K_ICALL && c->kind != K_IND && c->kind != K_RET)
		return WK_AGAIN; /* as cached */
	st = wd_query(w, c);
	if (st < 0)
		return st;
	return c->kind != K_COND && (st & pts_ip_suppressed) ? -pte_noip : 0;
}

/* The first time libipt walks from @from, the first instruction of
 * cached block @c its block cache knows no entry for (c->ip, or one past
 * the @pre instructions before it that it knows: those it passes through
 * its cache): it ends the block after an instruction whose successor it
 * knew already, or after 1024 instructions from @from, and then knows
 * every instruction it passed.  A block that reaches its branch is the
 * cached one, but an indirect branch's TIP must then carry an ip; libipt
 * adds the branch to its cache before the query and the instructions
 * before it only once the query succeeded (none at all when the
 * instruction after the run does not decode, K_ERR): after a failed query
 * the next walk from @from ends at the branch. */
static int wd_first(struct ptd *d, struct ptd_walkq *w, struct pt_block *b, const struct wblk *c,
		    uint64_t from, unsigned pre)
{
	uint64_t cur = from;
	unsigned n = 0;
	int st;

	for (;;) {
		uint64_t next = cur + insn_at(d, w, cur)->size;
		uint8_t m, *kb;
		n++;
		if (cur == c->end_ip)
			break; /* the whole run */
		if (n == 0x400 || !(kb = known_byte(d, c->isid, next, &m)) || (*kb & m)) {
			if (n < 0x400 && !kb)
				return -pte_nomem;
			if (n == 0x400)
				d->walk->split = 1;
			st = wd_mark(d, w, c->isid, from, cur);
			if (st < 0)
				return st;
			b->ninsn = (uint16_t)(pre + n);
			b->end_ip = cur;
			b->iclass = ptic_other;
			w->ip = next;
			return 0;
		}
		cur = next;
	}
	if (c->kind == K_ERR)
		return WK_AGAIN;
	st = wd_mark(d, w, c->isid, c->end_ip, c->end_ip);
	if (st < 0)
		return st;
	st = wd_first_query(w, c);
	if (st < 0 && st != WK_AGAIN)
		return st;
	if (c->end_ip != from) {
		int err = wd_mark(d, w, c->isid, from, c->end_ip);
		if (err < 0)
			return err;
	}
	return st;
}

/* Where libipt's block cache, which knows @c->ip, first knows no
 * instruction of @c's run: the instruction after a first walk that
 * stopped at 1024 instructions (its last entry leads there) and whose
 * rest was never learnt (its branch's query failed).  0: it knows the
 * whole run; else the instruction (*pre: how many come before it), or
 * -pte_nomem.  Only such a stop leaves a run known in part (a first walk
 * otherwise learns all it passed, or only its branch when the query
 * fails), so this is asked only once one happened (d->walk->split). */
static int wd_unknown_in(struct ptd *d, struct ptd_walkq *w, const struct wblk *c, uint64_t *at,
			 unsigned *pre)
{
	uint64_t cur = c->ip;
	unsigned n = 0;

	while (cur != c->end_ip) {
		uint8_t m, *kb;
		cur += insn_at(d, w, cur)->size;
		n++;
		kb = known_byte(d, c->isid, cur, &m);
		if (!kb)
			return -pte_nomem;
		if (!(*kb & m)) {
			*at = cur;
			*pre = n;
			return 1;
		}
	}
	return 0;
}

/* The steady state (libipt's cached path): one block from the cache. */
static inline int wd_no_event(struct ptd *d, struct ptd_walkq *w, struct pt_block *b)
{
	const struct wblk *c;
	int st;

	if (w->mode != ptem_64bit)
		return WK_UNSUP;
	c = blk_at(d, w, w->ip);
	b->isid = c->isid;
	b->ninsn = c->ninsn;
	b->end_ip = c->end_ip;
	b->iclass = (enum pt_insn_class)c->iclass;
	if (!c->known && c->ninsn) {
		uint8_t m, *kb = known_byte(d, c->isid, c->ip, &m);
		if (!kb)
			return -pte_nomem;
		if (!(*kb & m)) {
			st = wd_first(d, w, b, c, c->ip, 0);
			if (st != WK_AGAIN)
				return st;
		} else if (d->walk->split) {
			uint64_t at;
			unsigned pre;
			st = wd_unknown_in(d, w, c, &at, &pre);
			if (st < 0)
				return st;
			if (st) {
				st = wd_first(d, w, b, c, at, pre);
				if (st != WK_AGAIN)
					return st;
			}
		}
		if (c->kind != K_ERR)
			((struct wblk *)c)->known = 1;
	}
	if (c->kind == K_ERR) {
		w->ip = c->next;
		return c->err;
	}
	st = wd_query(w, c);
	return st < 0 ? st : 0;
}

static int wd_next(struct ptd *d, struct ptd_walkq *w, struct pt_block *b)
{
	int st;

	memset(b, 0, sizeof *b);
	b->ip = w->ip;
	b->mode = (enum pt_exec_mode)w->mode;
	st = wd_fetch_event(w);
	if (st != 0)
		return st < 0 ? st : wd_proceed_event(d, w, b);
	if (!w->enabled)
		return (w->status & pts_eos) ? -pte_eos : -pte_no_enable;
	st = wd_no_event(d, w, b);
	if (st < 0)
		return st;
	return wd_trailing(w);
}

static int wd_event(struct ptd_walkq *w, struct pt_event *ev)
{
	struct pt_event *e = &w->ev;
	if (!w->process_event)
		return -pte_bad_query;
	switch (e->type) {
	case ptev_enabled:
		if (e->variant.enabled.ip == w->ip)
			e->variant.enabled.resumed = 1;
		if (e->status_update)
			return -pte_bad_context;
		if (e->ip_suppressed)
			return -pte_noip;
		if (w->enabled)
			return -pte_bad_context;
		w->ip = e->variant.enabled.ip;
		w->enabled = 1;
		w->process_event = 0;
		break;
	case ptev_async_disabled:
		if (w->ip != e->variant.async_disabled.at)
			return -pte_bad_query;
		/* fallthrough */
	case ptev_disabled:
		if (e->status_update || !w->enabled)
			return -pte_bad_context;
		w->enabled = 0;
		w->process_event = 0;
		break;
	case ptev_exec_mode:
		if (!e->ip_suppressed && w->ip != e->variant.exec_mode.ip)
			return -pte_bad_query;
		if (e->status_update && w->enabled && w->mode != ptem_unknown &&
		    w->mode != (int)e->variant.exec_mode.mode)
			return -pte_bad_status_update;
		w->mode = e->variant.exec_mode.mode;
		w->process_event = 0;
		break;
	case ptev_tsx:
		/* outside a transaction (the pre-scan): blocks stay
		 * non-speculative */
		if (!e->ip_suppressed && w->ip != e->variant.tsx.ip)
			return -pte_bad_query;
		w->process_event = 0;
		break;
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
		w->process_event = 0;
		break;
	default:
		return WK_UNSUP;
	}
	*ev = *e;
	return wd_trailing(w);
}

/* ---- the stepper: ptd_step.c's q_step with the walk for pt_blk_* ---- */

/* q_now with the query decoder's time (what pt_blk_time returns). */
static inline void wk_now(struct ptd *d, struct ptq *q, struct ptd_walkq *w)
{
	uint64_t tsc;
	uint32_t lm, lc;
	if (wq_time(w, &tsc, &lm, &lc) >= 0) {
		if (tsc != q->last_tsc) {
			uint64_t t = ptd_conv(d, tsc);
			q->last_tsc = tsc;
			if (t > q->time)
				q->time = t;
		}
		q->lost_timing = lm + lc;
	}
}

static void wk_error(struct ptd *d, struct ptq *q, struct ptd_walkq *w, int err, uint64_t ip)
{
	uint64_t off = 0;
	if (err == WK_UNSUP) {
		ptd_warn(d, "cached walk: code or trace it does not emulate at 0x%" PRIx64
			    " (use --decoder libipt)", ip);
		err = -pte_internal;
	}
	wq_offset(w, &off);
	ptd_q_error_at(d, q, err, ip, off);
}

static int wk_open_seg(struct ptd *d, struct ptq *q, struct ptd_walkq *w)
{
	struct pt_config cfg;

	ptd_seg_config(d, q, &cfg);
	memset(&cfg.flags, 0, sizeof cfg.flags); /* what the block decoder gives its query decoder */
	w->skd022 = cfg.errata.skd022;
	w->fast = w->check = 0;
	if (ptq_usable(&cfg)) {
		w->fast = d->opts->walk_qry == 0;
		w->check = d->opts->walk_qry == 2;
		d->st->walk_checked += (uint64_t)w->check;
	}
	ptq_init(&w->fq, &cfg);
	w->qry = pt_qry_alloc_decoder(&cfg);
	if (!w->qry)
		return ptd_fail(d, PTD_ESYS, "cannot allocate a PT decoder");
	if (ptd_seg_psbs(d, q, cfg.begin, cfg.end) < 0)
		return -1;
	q->img = NULL;
	q->swi = 0;
	wd_reset(w);
	return 0;
}

static void wk_sync(struct ptd *d, struct ptq *q, struct ptd_walkq *w)
{
	int st = wd_sync_forward(w);
	if (st < 0 && st != -pte_eos) {
		uint64_t off = 0;
		wq_offset(w, &off);
		if (q_sync_error_new(q, off)) {
			wk_error(d, q, w, st, 0);
			return;
		}
	}
	if (st < 0) {
		ptd_seg_end(d, q);
		pt_qry_free_decoder(w->qry);
		w->qry = NULL;
		q->img = NULL;
		q->curseg++;
		q->state = Q_SEG;
		return;
	}
	q->status = st;
	q->pend.valid = 0;
	q->need_start = 1;
	wk_now(d, q, w);
	q->start_time = q->time;
	{
		size_t before = d->sb_apply;
		struct pt_image *img = q->img;
		uint64_t soff;
		sb_apply_until(d, q->time);
		ptd_set_thread(d, q, q->start_time);
		if ((before != d->sb_apply || img != q->img) &&
		    wq_sync_offset(w, &soff) >= 0) {
			st = wd_sync_set(w, soff);
			if (st < 0)
				return;
			q->status = st;
		}
	}
	q->state = Q_RUN;
}

/* Whether wk_fast may run: q_fast's conditions (thread known and
 * announced, no gap waiting, timing exact, no trace-start owed), no far
 * branch pending, no event, tracing on. */
static inline int wk_fast_ok(const struct ptd *d, const struct ptq *q, const struct ptd_walkq *w)
{
	const struct thr *t;
	if (q->pend.valid && q->pend.cls != X86BR_JCC && q->pend.cls != X86BR_CALL &&
	    q->pend.cls != X86BR_RET && q->pend.cls != X86BR_JMP && q->pend.cls != X86BR_FARJMP)
		return 0;
	if (q->th < 0 || q->untimed || q->need_start || w->process_event ||
	    (w->status & pts_event_pending) || !w->enabled || w->mode != ptem_64bit)
		return 0;
	t = &d->thr[q->th];
	return t->announced && !t->gap_pending;
}

/* The steady state without the block and pend structures: ptd_step.c's
 * q_fast over cached blocks.  A block's branch is known when its query
 * returns, but its record is pushed where the libipt stepper pushes it,
 * when the next block has been decoded (before that block's checks), so
 * commits hold the same records.  Leaves (1: do the checks of wk_blocks,
 * 0: exit to the merge, *stp the status) before any block it does not
 * handle: one not yet in libipt's block cache, far branches.  Returns
 * WF_EXIT (the batch, time limit, sideband or an event: *stp the status),
 * WF_GENERAL (the next block is the general path's), WF_ERROR (the block
 * in *blk failed with *stp) or WF_CHECKS (per-cpu: the block in *blk
 * reached the time its cpu switches threads; the libipt stepper's block
 * tail has handled it, as q_fast does: the caller does the checks). */
enum { WF_EXIT, WF_GENERAL, WF_ERROR, WF_CHECKS };

#define WF_INLINE static inline __attribute__((always_inline))

/* wk_fast's held branch: the last block's, recorded when the next block
 * has been decoded (the libipt stepper's q->pend, without the structure) */
struct wf_held {
	unsigned type;	 /* MTEV_BR_* */
	int valid, rec;	 /* a branch pending; with a record */
	uint8_t cls, size; /* for q->pend */
	int32_t isid;
	uint64_t from, to, time;
};

/* Takes over the general path's pending branch, to the next block
 * (fast_br_type); the original goes to *saved, given back if no block is
 * decoded. */
WF_INLINE void wf_take_pend(struct ptd *d, struct ptq *q, const struct ptd_walkq *w,
			    struct wf_held *h, struct pend *saved)
{
	struct pend *p = &q->pend;

	*saved = *p;
	h->valid = 1;
	h->rec = 1;
	h->to = w->ip;
	h->from = p->from;
	h->time = p->time;
	if (p->cls == X86BR_JCC) {
		h->type = MTEV_BR_JCC;
		if (!p->size) {
			uint64_t delta = w->ip - p->from;
			if (delta >= 2 && delta <= 15)
				classify_ip_slow(d, p->from, p->isid, p->mode, &p->size);
		}
		h->rec = !(p->size && w->ip == p->from + p->size);
	} else {
		h->type = p->cls == X86BR_CALL	  ? MTEV_BR_CALL
			  : p->cls == X86BR_RET ? MTEV_BR_RETURN
						: MTEV_BR_JUMP;
	}
	p->valid = 0;
}

/* The block from @ip as pt_blk_next reports it with an error. */
static void wf_error_block(struct pt_block *blk, uint64_t ip, const struct wblk *c)
{
	memset(blk, 0, sizeof *blk);
	blk->ip = ip;
	blk->mode = ptem_64bit;
	blk->isid = c->isid;
	blk->ninsn = c->ninsn;
	blk->end_ip = c->end_ip;
	blk->iclass = (enum pt_insn_class)c->iclass;
}

/* Holds the branch that ends block @c (to w->ip, at @now), if it has one. */
WF_INLINE void wf_hold(struct wf_held *h, const struct wblk *c, uint64_t to, uint64_t now)
{
	switch (c->kind) {
	case K_COND:
		/* a jcc that fell through stays pending too (an event could
		 * resolve it elsewhere), without a record */
		h->type = MTEV_BR_JCC;
		h->rec = to != c->end_ip + c->isize;
		h->cls = X86BR_JCC;
		break;
	case K_DJMP:
	case K_IND:
		h->type = MTEV_BR_JUMP;
		h->rec = 1;
		h->cls = X86BR_JMP;
		break;
	case K_DCALL:
	case K_ICALL:
		h->type = MTEV_BR_CALL;
		h->rec = 1;
		h->cls = X86BR_CALL;
		break;
	case K_RET:
		h->type = MTEV_BR_RETURN;
		h->rec = 1;
		h->cls = X86BR_RET;
		break;
	default:
		return;
	}
	h->valid = 1;
	h->from = c->end_ip;
	h->to = to;
	h->time = now;
	h->size = c->kind == K_COND ? c->isize : 0;
	h->isid = c->isid;
}

/* The held branch's record, into the queue's ring at @r. */
WF_INLINE void wf_rec(struct mtev_rec *r, uint32_t tid, const struct wf_held *h)
{
	r->kind = MTEV_BRANCH;
	r->br.tid = tid;
	r->br.time = h->time;
	r->br.type = h->type;
	r->br.from = h->from;
	r->br.to = h->to;
}

/* Hands the held branch to the general path (q->pend), which resolves it
 * at the next block or event. */
static void wf_give_pend(struct ptq *q, const struct wf_held *h)
{
	struct pend *p = &q->pend;

	p->valid = 1;
	p->cls = h->cls;
	p->size = h->size;
	p->isid = h->isid;
	p->mode = ptem_64bit;
	p->from = h->from;
	p->time = h->time;
}

static int wk_fast(struct ptd *d, struct ptq *q, struct ptd_walkq *w, uint64_t limit,
		   struct pt_block *blk, int *stp)
{
	struct thr *th = &d->thr[q->th];
	const uint32_t tid = th->tid;
	uint64_t now = q->time, last_tsc = q->last_tsc;
	uint64_t nblocks = q->nblocks, ninsns = q->ninsns, ndec = q->ndec;
	uint64_t spin_off = q->spin_off, spin_insns = q->spin_insns, spin_mark = q->spin_mark;
	uint32_t lost = q->lost_timing;
	uint64_t last_ip = 0, br_time = 0, nbr = 0, stop, sw_next = UINT64_MAX;
	struct wf_held h = {0};
	struct pend saved = {0}; /* the general path's, taken over */
	const struct wblk *prev = NULL; /* the last block, its link pk to w->ip */
	unsigned pk = 0;
	int touched = 0, full = 0, spin = 0, st = q->status, ret = WF_EXIT;
	int timed = 0; /* the time read after a query: blocks that read no packet keep it */
	/* the TNT bits ptq holds: its own (w->fast), or libipt's checked
	 * against them (w->check: the bit is libipt's, asked in lockstep) */
	const int fastq = w->fast || w->check;

	stop = d->sb_apply < d->nsb ? d->sb[d->sb_apply].time : UINT64_MAX;
	if (limit < stop)
		stop = limit + 1;
	if (d->per_cpu && q->cpu >= 0 && (size_t)q->cpu < d->ncpus) {
		const struct cpuline *cl = &d->cpus[q->cpu];
		if (q->swi + 1 < cl->n)
			sw_next = cl->v[q->swi + 1].time;
	}
	if (q->pend.valid)
		wf_take_pend(d, q, w, &h, &saved);
	for (;;) {
		const struct wblk *c = NULL;
		uint64_t from_ip, tsc;
		uint32_t lm, lc;
		int slow = 0, taken;

		if (timed && w->fast && prev) {
			/* The chain: while the blocks read no packet (a jcc or
			 * a compressed return on a quiet TNT bit, ptq_cond_quiet;
			 * direct jumps and calls, a section's end) and the next
			 * one is the last block's link, they are done here as
			 * the loop below does them with the time read (timed),
			 * no check due and room in the ring; anything else (the
			 * block that is the 16th branch, one not linked yet)
			 * leaves for the loop below, the block found kept in c.
			 * Only ptq's bits (w->fast): walk-check asks libipt too. */
			const struct wblk *bc = d->walk->bc;
			for (;;) {
				uint32_t l = prev->link[pk];
				const struct wblk *n;
				if (!l)
					break;
				n = &bc[l - 1];
				if (!blk_hit(w, n, w->ip))
					break;
				c = n;
				if (!n->known)
					break;
				if (n->kind == K_COND) {
					if (!ptq_cond_quiet(&w->fq))
						break;
				} else if (n->kind == K_RET) {
					/* compressed, to the return stack's top */
					if (!ptq_cond_quiet(&w->fq) || !(w->fq.tnt & w->fq.tnt_idx) ||
					    w->top == w->bottom)
						break;
				} else if (n->kind != K_DJMP && n->kind != K_DCALL && n->kind != K_SECEND) {
					break;
				}
				if ((n->kind != K_SECEND && !((ndec + 1) & 15)) ||
				    (h.rec && q->fcount >= q->fcap))
					break;
				switch (n->kind) {
				case K_COND:
					taken = (w->fq.tnt & w->fq.tnt_idx) != 0;
					w->fq.tnt_idx >>= 1;
					w->status = 0;
					w->ip = taken ? n->next : n->end_ip + n->isize;
					break;
				case K_RET:
					w->fq.tnt_idx >>= 1;
					w->status = 0;
					(void)rs_pop(w, &w->ip);
					break;
				case K_DCALL:
					if (n->push)
						rs_push(w, n->end_ip + n->isize);
					/* fall through */
				default:
					w->ip = n->next;
				}
				st = wd_status(w, 0);
				if (h.rec) {
					wf_rec(&q->fifo[(q->fhead + q->fcount++) & (q->fcap - 1)], tid, &h);
					br_time = h.time;
					nbr++;
				}
				h.valid = 0;
				h.rec = 0;
				saved.valid = 0;
				nblocks++;
				ninsns += n->ninsn;
				last_ip = n->end_ip;
				wf_hold(&h, n, w->ip, now);
				if (h.valid)
					ndec++;
				prev = n;
				pk = n->kind == K_COND ? w->ip != n->next : n->kind == K_RET;
				c = NULL;
			}
			q->status = st;
		}
		if (!c)
			c = prev ? blk_next(d, w, prev, pk) : blk_at(d, w, w->ip);
		from_ip = w->ip;
		if (!c->known || c->kind == K_ERR || (c->kind == K_IND && c->iclass == ptic_error)) {
			ret = WF_GENERAL;
			break;
		}
		/* Blocks that read no packet (a jcc or, with ptq, a compressed
		 * return on a quiet bit; direct jumps and calls, a section's
		 * end) change no time, status flag or event: their branch is
		 * held here, the checks those need are skipped.  The rest query
		 * as the block decoder does (wd_query, wd_trailing). */
		switch (c->kind) {
		case K_COND:
			if (!fastq || !ptq_cond_quiet(&w->fq)) {
				slow = 1;
				break;
			}
			if (w->fast) {
				taken = (w->fq.tnt & w->fq.tnt_idx) != 0;
				w->fq.tnt_idx >>= 1;
			} else {
				/* walk-check: libipt's bit, in lockstep with ptq,
				 * which answers 0 here (exit 3 where libipt differs) */
				(void)wq_cond_qry(w, &taken);
			}
			w->status = 0;
			w->ip = taken ? c->next : c->end_ip + c->isize;
			break;
		case K_RET:
			/* compressed, quiet (as a jcc's bit), to the return
			 * stack's top */
			if (!w->fast || !ptq_cond_quiet(&w->fq) || !(w->fq.tnt & w->fq.tnt_idx) ||
			    w->top == w->bottom) {
				slow = 1;
				break;
			}
			w->fq.tnt_idx >>= 1;
			w->status = 0;
			(void)rs_pop(w, &w->ip);
			break;
		case K_DCALL:
			if (c->push)
				rs_push(w, c->end_ip + c->isize);
			w->ip = c->next;
			break;
		case K_DJMP:
		case K_SECEND:
			w->ip = c->next;
			break;
		default:
			slow = 1;
		}
		if (slow) {
			st = wd_query(w, c);
			if (st >= 0)
				st = wd_trailing(w);
			if (st < 0) {
				wf_error_block(blk, from_ip, c);
				ret = WF_ERROR;
				break;
			}
		} else {
			st = wd_status(w, 0);
		}
		q->status = st;
		/* the held branch goes to the ring (resolve) */
		if (h.rec) {
			struct mtev_rec *r = q_push(d, q);
			if (r) {
				wf_rec(r, tid, &h);
				br_time = h.time;
				nbr++;
			} else {
				full = 1;
			}
		}
		h.valid = 0;
		h.rec = 0;
		saved.valid = 0;
		nblocks++;
		ninsns += c->ninsn;
		if (slow || !timed) {
			if (wq_time(w, &tsc, &lm, &lc) >= 0) {
				if (tsc != last_tsc) {
					uint64_t t = ptd_conv(d, tsc);
					last_tsc = tsc;
					if (t > now)
						now = t;
				}
				lost = lm + lc;
			}
			if (now >= sw_next) {
				/* the cpu switches threads: the general path's
				 * block tail, after the write-back */
				wf_error_block(blk, from_ip, c);
				ret = WF_CHECKS;
				break;
			}
		}
		last_ip = c->end_ip;
		touched = 1;
		wf_hold(&h, c, w->ip, now);
		prev = c;
		pk = c->kind == K_COND ? w->ip != c->next : c->kind >= K_ICALL && c->kind <= K_IND;
		/* the stepper's checks: every 16 blocks that end at a branch */
		if (h.valid && !(++ndec & 15)) {
			uint64_t off = 0;
			if (wq_offset(w, &off) >= 0 && q_psb_passed(q, off))
				full |= q->nready >= PTD_BATCH;
			if (q_spin_check(off, ninsns, &spin_off, &spin_mark, &spin_insns)) {
				spin = 1;
				break;
			}
		}
		if (full)
			break;
		if (slow || !timed) {
			timed = 1;
			if ((st & pts_event_pending) || now >= stop)
				break;
			if (!w->enabled || w->process_event) {
				ret = WF_GENERAL;
				break;
			}
		}
	}
	/* write back (q_fast's QF_FLUSH) */
	if (nbr) {
		th->last_time = br_time;
		th->has_rec = 1;
		th->ended = 0;
		th->lastq = (int)(q - d->q);
		d->st->branches += nbr;
	}
	if (touched) {
		th->state = TS_ON;
		th->last_ip = last_ip;
	}
	q->time = now;
	q->last_tsc = last_tsc;
	q->lost_timing = lost;
	q->nblocks = nblocks;
	q->ninsns = ninsns;
	q->ndec = ndec;
	q->decided = h.valid;
	q->spin_off = spin_off;
	q->spin_insns = spin_insns;
	q->spin_mark = spin_mark;
	if (saved.valid)
		q->pend = saved; /* given back untouched */
	else if (h.valid)
		wf_give_pend(q, &h);
	if (spin)
		ptd_spin_error(d, q, last_ip);
	if (ret == WF_CHECKS)
		ptd_block_tail(d, q, blk, now);
	*stp = st;
	return ret;
}

static int wk_blocks(struct ptd *d, struct ptq *q, struct ptd_walkq *w, uint64_t limit,
		     struct pt_block *blk)
{
	int st;

	for (;;) {
		cache_check(d, q, w);
		if (wk_fast_ok(d, q, w)) {
			switch (wk_fast(d, q, w, limit, blk, &st)) {
			case WF_EXIT:
				return st;
			case WF_ERROR:
				return st;
			case WF_CHECKS:
				goto checks;
			default:
				break;
			}
		}
		st = wd_next(d, w, blk);
		if (st < 0)
			return st;
		q->status = st;
		if (blk->ninsn)
			wk_now(d, q, w);
		ptd_handle_block(d, q, blk, 1);
	checks:
		if (q->decided && !(q->ndec & 15)) {
			uint64_t off = 0;
			int have = wq_offset(w, &off) >= 0;
			if (q_check16(q, have, off)) {
				ptd_spin_error(d, q, blk->end_ip);
				return st;
			}
		}
		if (q_step_yield(d, q, st, limit))
			return st;
	}
}

static void wk_run(struct ptd *d, struct ptq *q, struct ptd_walkq *w, uint64_t limit)
{
	struct pt_block blk;
	struct pt_event ev;
	int st;

	if (q->status & pts_event_pending) {
		st = wd_event(w, &ev);
		if (st < 0) {
			wk_error(d, q, w, st, q->pend.valid ? q->pend.from : 0);
			return;
		}
		q->status = st;
		wk_now(d, q, w);
		ptd_handle_event(d, q, &ev);
		return;
	}
	st = wk_blocks(d, q, w, limit, &blk);
	if (st >= 0)
		return;
	if (blk.ninsn)
		wk_now(d, q, w);
	ptd_handle_block(d, q, &blk, 0);
	if (st == -pte_eos) {
		q_commit(q);
		q->state = Q_SYNC;
		if (q->th >= 0 && q->pend.valid)
			q->pend.valid = 0;
		return;
	}
	wk_error(d, q, w, st, blk.ninsn ? blk.end_ip : blk.ip);
}

static struct ptd_walkq *wk_new(void)
{
	struct ptd_walkq *w = calloc(1, sizeof *w);
	if (w)
		w->pidx = -1;
	return w;
}

/* The walk's states for q_states_run (its queue state in q->walk). */
static int wk_open(struct ptd *d, struct ptq *q)
{
	if (wk_open_seg(d, q, q->walk) < 0)
		return -1;
	q->state = Q_SYNC;
	return 0;
}

static void wk_state_sync(struct ptd *d, struct ptq *q)
{
	wk_sync(d, q, q->walk);
}

static void wk_state_run(struct ptd *d, struct ptq *q, uint64_t limit)
{
	wk_run(d, q, q->walk, limit);
}

static void wk_step(struct ptd *d, struct ptq *q, uint64_t limit)
{
	struct ptd_walkq *w = q->walk;

	if (!w) {
		w = q->walk = wk_new();
		if (!w) {
			ptd_fail(d, PTD_ESYS, "out of memory");
			return;
		}
		w->d = d;
	}
	if (!d->walk) {
		struct pt_config ec;
		size_t k;
		d->walk = calloc(1, sizeof *d->walk);
		if (!d->walk) {
			ptd_fail(d, PTD_ESYS, "out of memory");
			return;
		}
		/* a caller's section cache keeps libipt's block cache
		 * from earlier decodes: not emulated */
		d->walk->walk = !d->opts->resync && !d->opts->iscache;
		pt_config_init(&ec);
		ptd_cpu_config(d, &ec);
		for (k = 0; k < d->nq && d->walk->walk; k++)
			d->walk->walk = walkable(&d->q[k], ec.errata.skd007);
		if (!d->walk->walk && d->opts->walk > 1) {
			ptd_fail(d, PTD_EINPUT,
				 "the cached walk cannot decode this recording (%s)",
				 d->opts->resync ? "--resync"
					    : "packets it does not emulate: overflow, interrupts, "
					      "TSX, paging, power events, trace before its execution "
					      "mode or a damaged packet");
			return;
		}
		/* the caches only when the walk runs (4.4 MB) */
		if (d->walk->walk) {
			d->walk->bc = mt_huge_zalloc((size_t)1 << WB_BITS, sizeof *d->walk->bc);
			d->walk->bix = mt_huge_zalloc((size_t)2 << WB_BITS, sizeof *d->walk->bix);
			d->walk->ic = calloc((size_t)1 << WI_BITS, sizeof *d->walk->ic);
			if (!d->walk->bc || !d->walk->bix || !d->walk->ic) {
				ptd_fail(d, PTD_ESYS, "out of memory");
				return;
			}
		}
	}
	if (!w->decided) {
		w->decided = 1;
		w->libipt = !d->walk->walk;
		w->ic = d->walk->ic;
	}
	if (w->libipt) {
		ptd_step_libipt.step(d, q, limit);
		return;
	}
	static const struct q_states states = {wk_open, wk_state_sync, wk_state_run};
	q_states_run(d, q, limit, &states);
}

const struct ptd_stepper ptd_step_walk = {"walk", wk_step};
