/* ptd_par: PSB-parallel decoding (mt-decode -j N).  A queue's segment is
 * cut at PSBs into chunks; worker threads decode the chunks ahead, each
 * with a block decoder of its own synchronized at the chunk's PSB, and
 * record every answer libipt gave (the block or event, the status, the
 * time and the offset after it).  The stepper runs exactly as with one
 * thread: its libipt calls (ptd_par.h) are answered from those records, so
 * everything that links chunks (thread state, pending gap and branch,
 * trace-start owed, per-cpu thread, sideband by time) stays in the one
 * serial stepper.
 *
 * What must hold is that a decoder synchronized at a PSB answers like the
 * one that decoded up to it.  Each chunk's decoder goes on past the next
 * chunk's PSB (PAR_OVL answers); where the two agree from some answer to
 * the end of that overlap, the stepper switches chunks there (a splice).
 * Where they do not, or the stepper asks for something the records do not
 * hold (a spin error, an image change), the queue's own decoder is brought
 * to the same place by repeating the stepper's calls since the chunks
 * began (a log of them), and the segment goes on serially.  Parallel
 * decoding starts only where the rest cannot disagree by construction:
 * per-thread queues, TSC in every PSB+ and no CYC (libipt's time then
 * restarts at each PSB+, its CYC calibration would not), and no sideband
 * left that changes an image (mmap of code, exec, fork) -- the workers'
 * image copies are made when the chunks start.  docs/decode.md. */
#include "ptd_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

/* a chunk is at least this many bytes of trace (to the next PSB).  With
 * answers only (--par-answers): small, so that a chunk's answers are still
 * in the cache when the stepper reads them (64 KiB cost 1.5x the CPU of 4
 * KiB on the 50M trace, 2.6x on four threads: bench/decode-par.sh).  With
 * bodies: large enough that the head and the overlap, answers decoded
 * twice, are a small part (callgrind, the 5M trace, -j 2: 4 KiB 1.19x -j
 * 1's instructions, 16 KiB 1.14x, 64 KiB 1.14x) */
#define PAR_CHUNK_ANSWERS (4u << 10)
#define PAR_CHUNK_DEFAULT (16u << 10)
/* answers recorded past the next chunk's PSB, to find the splice */
#define PAR_OVL 64
/* with records (bodies): the overlap ends PAR_OVB bytes past the next
 * chunk's PSB, and that chunk's bodies begin after it (its head: the
 * answers the overlap is compared with).  A decoder that ran up to a PSB
 * can be far behind in its offsets after it (libipt reads packets ahead
 * at a sync): 213 bytes on the 2M mt-ptgen trace */
#define PAR_OVB 512u
/* instructions without trace after which a chunk ends (the stepper's own
 * limit, PTD_MAX_SPIN, is lower: it reports the loop) */
#define PAR_SPIN (1u << 20)

enum { PR_NEXT, PR_EVENT, PR_SYNC };

/* One libipt answer, 56 bytes (the stepper reads one a block: what moves
 * between the threads is most of the cost of -j N): a block's fields but its
 * raw bytes; a sync's offset in end_ip and its status in isid.  An event, a
 * truncated block and a block with an error are whole in the job's side
 * answers (PF_SIDE; ip is the index). */
enum { PF_SIDE = 1, PF_SPEC = 2 };

struct prec {
	uint64_t ip, end_ip;
	uint64_t tsc, off; /* pt_blk_time and pt_blk_get_offset after it */
	uint32_t lm, lc;
	int32_t isid;
	int32_t ret; /* the call's status or error */
	uint16_t ninsn;
	uint8_t op, mode, iclass, flags;
	int8_t tret, oret; /* pt_blk_time's and pt_blk_get_offset's status */
};

union pside {
	struct pt_block b;
	struct pt_event ev;
};

enum { J_TODO, J_RUN, J_DONE };

/* Records decoded on a worker (a body): a stretch of blocks after a block
 * answer, run through the fast loop's record logic (q_fast) from the
 * pending branch that block leaves, the queue's time unknown: times are w,
 * the worker's running maximum of converted TSCs, and the stepper's time
 * there is max(its time, w).  Where the checks (every 16th branch block:
 * a commit past a PSB, spinning) fall depends on the branch blocks before
 * the body, which the worker does not know: every branch block is kept
 * (bchk) and the stepper picks every 16th.  Where the stepper hands back
 * to the merge (its time passes a limit) it finds by btim: every block
 * where w grew. */
struct brec { /* a branch record: its time is max(the stepper's, w) */
	uint64_t w, from, to;
	uint32_t type, pad;
};

struct bchk { /* a block that ends at a branch: the pending branch it sets */
	uint64_t off;	 /* the decoder's offset after it */
	uint64_t ninsns; /* instructions of the body so far */
	uint64_t from;
	int32_t isid;
	uint32_t nrec, blk; /* records and blocks (with instructions) of the body so far */
	uint8_t cls, size, mode;
};

struct btim { /* a block where w grew */
	uint64_t w, last_ip, ninsns;
	uint32_t blk, nrec, nd; /* nd: its bchk so far */
};

struct pbody {
	size_t at; /* before answer at of its job */
	size_t rec0, nrec, chk0, nchk, tim0, ntim; /* its part of the job's arrays */
	struct pend pend0; /* the pending branch it starts with (time not used) */
	/* at its end (pend1.time is a w) */
	struct pend pend1;
	uint64_t w, last_ip, last_tsc, ninsns;
	uint32_t nblk, lost;
	int touched, havet;
};

struct pjob {
	uint64_t begin, end; /* from the PSB at begin; the next chunk's PSB at end */
	uint64_t ovl;	     /* answers past this offset are the overlap */
	uint64_t hlim;	     /* bodies after an answer past this offset only */
	int last;	     /* to the end of the segment */
	int state;	     /* J_*, under the pool's lock */
	struct prec *r;
	size_t n, cap;
	union pside *x; /* the side answers */
	size_t xn, xcap;
	size_t ovl0; /* first answer past end (SIZE_MAX: none) */
	int oom;
	/* bodies (records decoded here), in answer order */
	struct pbody *body;
	size_t nbody, bodycap;
	struct brec *rec;
	size_t rn, rcap;
	struct bchk *chk;
	size_t cn, ccap;
	struct btim *tim;
	size_t tn, tcap;
	int nobody; /* no more bodies in this job (code the worker cannot read) */
};

struct parq {
	struct parhot hot; /* first: ptd_int.h's par_due reads it */
	struct ptd *d;
	struct ptq *q;
	struct pt_config cfg;
	struct pt_image *img0;	     /* the stepper's image when the chunks began */
	struct pt_image **img;	     /* per thread slot: a copy */
	struct pt_block_decoder **dec; /* per thread slot */
	int status0;		     /* the decoder's status when the chunks began */
	struct pjob *job;
	size_t njob;
	size_t released; /* jobs below it may run */
	int running;	 /* jobs of this queue running (under the lock) */
	/* the stepper's side */
	size_t cur; /* the answer it reads next: job cur, record hot.pos */
	/* the bodies of job cur: bi the next (hot.bat its answer index);
	 * bon: it is partly written (the stepper handed back inside it) from
	 * its record brec, check bchk, time btim, past block bblk; the
	 * stepper's ndec, ninsns, nblocks where it began; bunits: the units
	 * (branch blocks) of the job's bodies written so far */
	size_t bi, brec, bchk, btim;
	uint32_t bblk;
	int bon;
	uint64_t bnd0, bins0, bblk0, bunits;
	int records; /* bodies wanted (not --par-answers) */
	size_t stop;	 /* switch to the next job at this record (SIZE_MAX: not known) */
	/* the fast path (take_fast): records below lim of job cur's rv are
	 * answers to take in order, with no splice, switch or end to check
	 * (set by take, 0 until then) */
	const struct prec *rv;
	size_t lim;
	size_t entry;	 /* ... at this record of the next job */
	const struct prec *last; /* the last answer (time, offset) */
	struct prec act;	 /* the decoder's answers when the chunks began, or
				  * the last answer of a job already freed */
	uint64_t soff;
	int sret;
	int last_sync; /* the last call was a sync (sync_set may repeat it) */
	/* record buffers of jobs consumed, for the next jobs (fresh memory
	 * would be page faults all over again), under the lock */
	struct spare {
		struct prec *r;
		size_t cap;
		struct brec *rec;
		struct bchk *chk;
		struct btim *tim;
		size_t rcap, ccap, tcap;
	} spare[8];
	int nspare;
};

struct ppool {
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	pthread_t *th;
	int nth; /* worker threads; slot 0 is the stepper's */
	/* per thread slot, sections of its own (slot_image), for every queue:
	 * libipt's block caches warm once per slot, not once per queue */
	struct pt_image_section_cache **isc;
	/* per thread slot, the workers' instruction classes (d->cc is the
	 * stepper's) */
	struct ccache_ent **cc;
	int quit;
	struct parq **act; /* queues decoded in parallel */
	size_t nact, actcap;
	size_t rr; /* round robin over them */
};

/* ---- the workers ---- */

static struct prec *rec_add(struct pjob *j)
{
	if (j->n == j->cap) {
		size_t nc = j->cap ? 2 * j->cap : 1024;
		struct prec *v = realloc(j->r, nc * sizeof *v);
		if (!v) {
			j->oom = 1;
			return NULL;
		}
		j->r = v;
		j->cap = nc;
	}
	return &j->r[j->n++];
}

/* A side answer for @r (NULL: out of memory). */
static union pside *side_add(struct pjob *j, struct prec *r)
{
	if (j->xn == j->xcap) {
		size_t nc = j->xcap ? 2 * j->xcap : 64;
		union pside *v = realloc(j->x, nc * sizeof *v);
		if (!v) {
			j->oom = 1;
			return NULL;
		}
		j->x = v;
		j->xcap = nc;
	}
	r->flags |= PF_SIDE;
	r->ip = j->xn;
	return &j->x[j->xn++];
}

/* libipt's status codes are small: pte_* errors, 0 */
static int8_t st8(int st)
{
	return st < -128 ? -128 : (int8_t)st;
}

static void rec_after(struct pt_block_decoder *dec, struct prec *r)
{
	r->tsc = 0;
	r->lm = r->lc = 0;
	r->tret = st8(pt_blk_time(dec, &r->tsc, &r->lm, &r->lc));
	r->off = 0;
	r->oret = st8(pt_blk_get_offset(dec, &r->off));
}

/* The answers to the stepper's calls, recorded in @j: a sync made (its
 * status @st), the next block, the next event.  NULL: out of memory. */
static struct prec *rec_sync(struct pt_block_decoder *dec, struct pjob *j, int st)
{
	struct prec *r = rec_add(j);
	if (!r)
		return NULL;
	memset(r, 0, sizeof *r);
	r->op = PR_SYNC;
	r->ret = st;
	r->isid = pt_blk_get_sync_offset(dec, &r->end_ip);
	rec_after(dec, r);
	return r;
}

/* Block @b with status @st, just given by @dec, as an answer. */
static struct prec *rec_put(struct pt_block_decoder *dec, struct pjob *j, int st,
			    const struct pt_block *bp)
{
	struct prec *r = rec_add(j);
	const struct pt_block b = *bp;
	union pside *x;
	if (!r)
		return NULL;
	r->op = PR_NEXT;
	r->flags = 0;
	r->ret = st;
	r->ip = b.ip;
	r->end_ip = b.end_ip;
	r->isid = b.isid;
	r->mode = (uint8_t)b.mode;
	r->iclass = (uint8_t)b.iclass;
	r->ninsn = b.ninsn;
	if (b.speculative)
		r->flags |= PF_SPEC;
	if (b.truncated || r->ret < 0) {
		if (!(x = side_add(j, r)))
			return NULL;
		x->b = b;
	}
	rec_after(dec, r);
	return r;
}

static struct prec *rec_next(struct pt_block_decoder *dec, struct pjob *j)
{
	struct pt_block b; /* zeroed by libipt first */
	int st = pt_blk_next(dec, &b, sizeof b);
	return rec_put(dec, j, st, &b);
}

static struct prec *rec_event(struct pt_block_decoder *dec, struct pjob *j)
{
	struct prec *r = rec_add(j);
	union pside *x;
	if (!r)
		return NULL;
	memset(r, 0, sizeof *r);
	r->op = PR_EVENT;
	if (!(x = side_add(j, r)))
		return NULL;
	memset(&x->ev, 0, sizeof x->ev);
	r->ret = pt_blk_event(dec, &x->ev, sizeof x->ev);
	rec_after(dec, r);
	return r;
}

/* Block @r of @j as libipt gave it (the raw bytes of an instruction not
 * truncated, which libipt leaves unset, are zero). */
static void rec_block(const struct pjob *j, const struct prec *r, struct pt_block *b)
{
	if (r->flags & PF_SIDE) {
		*b = j->x[r->ip].b;
		return;
	}
	memset(b, 0, sizeof *b);
	b->ip = r->ip;
	b->end_ip = r->end_ip;
	b->isid = r->isid;
	b->mode = (enum pt_exec_mode)r->mode;
	b->iclass = (enum pt_insn_class)r->iclass;
	b->ninsn = r->ninsn;
	b->speculative = (r->flags & PF_SPEC) != 0;
}

/* ---- bodies: the fast loop's records, on a worker ---- */

/* bytes of sections a worker slot's iscache keeps mapped */
#define PAR_ISC_LIMIT (256u << 20)

/* entries of a worker's instruction class cache */
#define PAR_CC 16384

/* classify_ip_slow (ptd_image.c) on a worker: its own cache, the code
 * bytes from d->secs only (read-only while chunks are decoded: no image
 * changes then); *fail when they are not there (pt_iscache_read would be
 * asked: the body ends). */
static enum x86br w_classify_slow(const struct ptd *d, struct ccache_ent *e, uint64_t ip,
				  int32_t isid, uint8_t mode, uint8_t *size, int *fail)
{
	const struct secview *v;
	uint8_t buf[16];
	uint64_t left;
	int n;

	*size = 0;
	if (isid <= 0)
		return X86BR_NONE;
	if ((size_t)isid >= d->nsecs || !d->secs[isid].data) {
		*fail = 1;
		return X86BR_NONE;
	}
	v = &d->secs[isid];
	if (ip < v->addr || ip - v->addr >= v->size)
		return X86BR_NONE;
	left = v->size - (ip - v->addr);
	n = left < sizeof buf ? (int)left : (int)sizeof buf;
	memcpy(buf, v->data + (ip - v->addr), (size_t)n);
	return cc_classify(e, buf, n, ip, isid, mode, size);
}

static inline __attribute__((always_inline)) enum x86br
w_classify_ip(const struct ptd *d, struct ccache_ent *cc, uint64_t ip, int32_t isid, uint8_t mode,
	      uint8_t *size, int *fail)
{
	struct ccache_ent *e = &cc[(ip ^ (ip >> 11)) & (PAR_CC - 1)];
	if (e->valid && e->ip == ip && e->isid == isid && e->mode == mode) {
		*size = e->size;
		return (enum x86br)e->cls;
	}
	return w_classify_slow(d, e, ip, isid, mode, size, fail);
}

/* classify_at (ptd_step.c) on a worker, for a block not truncated. */
static inline __attribute__((always_inline)) enum x86br w_classify_at(const struct ptd *d, struct ccache_ent *cc,
				const struct pt_block *b, uint8_t *size, int *fail)
{
	int c = iclass_br(b);
	*size = 0;
	if (c >= 0)
		return (enum x86br)c;
	if (b->iclass == ptic_cond_jump)
		return X86BR_JCC; /* the caller's block is not truncated */
	return w_classify_ip(d, cc, b->end_ip, b->isid, (uint8_t)b->mode, size, fail);
}

enum { WB_GENERAL = -2, WB_NOT_TAKEN = -1 };

/* fast_br_type (ptd_step.c) on a worker. */
static inline __attribute__((always_inline)) int w_br_type(const struct ptd *d, struct ccache_ent *cc, struct pend *p, uint64_t next,
		     int *fail)
{
	if (p->cls == X86BR_JCC) {
		if (!p->size) {
			uint64_t delta = next - p->from;
			if (delta >= 2 && delta <= 15)
				w_classify_ip(d, cc, p->from, p->isid, p->mode, &p->size, fail);
		}
		if (p->size && next == p->from + p->size)
			return WB_NOT_TAKEN;
		return MTEV_BR_JCC;
	}
	if (p->cls == X86BR_CALL)
		return MTEV_BR_CALL;
	if (p->cls == X86BR_RET)
		return MTEV_BR_RETURN;
	if (p->cls == X86BR_JMP || p->cls == X86BR_FARJMP)
		return MTEV_BR_JUMP;
	return WB_GENERAL;
}

/* One more element of *@v (cap *@cap, n *@n), NULL: out of memory. */
static void *grow1_slow(void **v, size_t *n, size_t *cap, size_t size)
{
	size_t nc = *cap ? 2 * *cap : 1024;
	void *x = realloc(*v, nc * size);
	if (!x)
		return NULL;
	*v = x;
	*cap = nc;
	return (char *)*v + (*n)++ * size;
}

static inline __attribute__((always_inline)) void *grow1(void **v, size_t *n, size_t *cap,
							  size_t size)
{
	if (*n < *cap)
		return (char *)*v + (*n)++ * size;
	return grow1_slow(v, n, cap, size);
}

/* The pending branch at the end of block @b of class @cls, at time @w. */
static inline __attribute__((always_inline)) void pend_at(struct pend *p, enum x86br cls,
							  uint8_t size, const struct pt_block *b,
							  uint64_t w)
{
	p->valid = 1;
	p->cls = (uint8_t)cls;
	p->size = size;
	p->isid = b->isid;
	p->mode = (uint8_t)b->mode;
	p->from = b->end_ip;
	p->time = w;
}

/* A new body of @j after its answer j->n, its records from @rn, its checks
 * from @cn, the pending branch @p at its start; NULL: out of memory. */
static struct pbody *body_open(struct pjob *j, size_t rn, size_t cn, const struct pend *p)
{
	struct pbody *y = grow1((void **)&j->body, &j->nbody, &j->bodycap, sizeof *j->body);
	if (!y)
		return NULL;
	memset(y, 0, sizeof *y);
	y->at = j->n;
	y->rec0 = rn;
	y->chk0 = cn;
	y->tim0 = j->tn;
	y->pend0 = *p;
	return y;
}

/* Check @c: the branch block that set pending branch @p, the decoder at
 * @off after it, the body's instructions, records and blocks so far. */
static inline __attribute__((always_inline)) void chk_note(struct bchk *c, uint64_t off,
							   uint64_t ninsns, uint32_t nrec,
							   uint32_t nblk, const struct pend *p)
{
	c->off = off;
	c->ninsns = ninsns;
	c->from = p->from;
	c->isid = p->isid;
	c->nrec = nrec;
	c->blk = nblk;
	c->cls = p->cls;
	c->size = p->size;
	c->mode = p->mode;
}

/* A block where the body's time grew to @w: it ended at @last_ip with the
 * body's counts so far.  -1: out of memory. */
static int tim_note(struct pjob *j, uint64_t w, uint64_t last_ip, uint64_t ninsns,
		    uint32_t nblk, uint32_t nrec, uint32_t nd)
{
	struct btim *t = grow1((void **)&j->tim, &j->tn, &j->tcap, sizeof *t);
	if (!t)
		return -1;
	t->w = w;
	t->last_ip = last_ip;
	t->ninsns = ninsns;
	t->blk = nblk;
	t->nrec = nrec;
	t->nd = nd;
	return 0;
}

/* A body after block answer @h of @j: blocks from @dec while the fast loop
 * would take them (status 0, no far transfer to resolve, code bytes at
 * hand, before the overlap, not spinning).  The block that ends it is not
 * in it: *@b, status *@st, for the caller to record as an answer.
 * Returns 1 (a block in *b), 0 (no body: nothing decoded), -1 (out of
 * memory). */
static int body_run(struct parq *pq, struct pjob *j, struct pt_block_decoder *dec,
		    struct ccache_ent *cc, const struct prec *h, struct pt_block *b, int *stp)
{
	const struct ptd *d = pq->d;
	struct pbody *y;
	struct pend p;
	struct pt_block hb;
	uint64_t w = 0, last_tsc = 0, ninsns = 0, last_ip = 0;
	uint32_t nblk = 0, nd = 0, lost = 0, nrec = 0;
	int touched = 0, havet = 0, fail = 0, nacc = 0, st;
	uint8_t size;
	enum x86br cls;
	/* the job's arrays in locals (written back on the way out) */
	struct brec *rv = j->rec;
	struct bchk *cv = j->chk;
	size_t rn = j->rn, rcap = j->rcap, cn = j->cn, ccap = j->ccap, c0 = j->cn;

	rec_block(j, h, &hb);
	memset(&p, 0, sizeof p);
	if (h->tret >= 0) {
		last_tsc = h->tsc;
		w = ptd_conv(d, h->tsc);
	}
	cls = w_classify_at(d, cc, &hb, &size, &fail);
	if (fail) {
		j->nobody = 1;
		return 0;
	}
	if (cls != X86BR_NONE)
		pend_at(&p, cls, size, &hb, w);
	y = body_open(j, rn, cn, &p);
	if (!y) {
		j->oom = 1;
		return -1;
	}
	for (;;) {
		uint64_t off = 0, tsc;
		uint32_t lm, lc;
		int type = WB_NOT_TAKEN;

		st = pt_blk_next(dec, b, sizeof *b);
		if (st != 0 || b->truncated)
			break;
		if (p.valid) {
			type = w_br_type(d, cc, &p, b->ip, &fail);
			if (type == WB_GENERAL || fail)
				break;
		}
		cls = X86BR_NONE;
		if (b->ninsn) {
			cls = w_classify_at(d, cc, b, &size, &fail);
			if (fail)
				break;
			/* the offset at branch blocks only (the units: a block
			 * of straight-line code past the overlap's start may be
			 * the body's); spinning: two checks 16 branch blocks
			 * apart at the same offset (q_spin_check; those with
			 * the first check of the body are the stepper's) */
			if (cls != X86BR_NONE &&
			    (pt_blk_get_offset(dec, &off) < 0 || (!j->last && off > j->ovl) ||
			     (cn - c0 >= 16 && cv[cn - 16].off == off)))
				break;
		}
		/* the block is the body's */
		nacc++;
		if (p.valid) {
			if (type != WB_NOT_TAKEN) {
				struct brec *r;
				if (rn == rcap) {
					j->rn = rn;
					if (!grow1_slow((void **)&j->rec, &j->rn, &j->rcap, sizeof *r))
						goto oom;
					rv = j->rec;
					rcap = j->rcap;
				}
				r = &rv[rn++];
				r->w = p.time;
				r->from = p.from;
				r->to = b->ip;
				r->type = (uint32_t)type;
				nrec++;
			}
			p.valid = 0;
		}
		if (b->ninsn) {
			int grew = 0;
			nblk++;
			ninsns += b->ninsn;
			if (pt_blk_time(dec, &tsc, &lm, &lc) >= 0) {
				if (tsc != last_tsc) {
					uint64_t t = ptd_conv(d, tsc);
					last_tsc = tsc;
					if (t > w) {
						w = t;
						grew = 1;
					}
				}
				lost = lm + lc;
				havet = 1;
			}
			last_ip = b->end_ip;
			touched = 1;
			if (cls != X86BR_NONE) {
				struct bchk *c;
				if (cn == ccap) {
					j->cn = cn;
					if (!grow1_slow((void **)&j->chk, &j->cn, &j->ccap, sizeof *c))
						goto oom;
					cv = j->chk;
					ccap = j->ccap;
				}
				c = &cv[cn++];
				nd++;
				pend_at(&p, cls, size, b, w);
				chk_note(c, off, ninsns, nrec, nblk, &p);
			}
			if (grew && tim_note(j, w, b->end_ip, ninsns, nblk, nrec, nd) < 0)
				goto oom;
		}
	}
	*stp = st;
	j->rn = rn;
	j->cn = cn;
	if (!nacc) {
		j->nbody--;
		return 1;
	}
	y->nrec = j->rn - y->rec0;
	y->nchk = j->cn - y->chk0;
	y->ntim = j->tn - y->tim0;
	y->pend1 = p;
	y->w = w;
	y->last_ip = last_ip;
	y->last_tsc = last_tsc;
	y->ninsns = ninsns;
	y->nblk = nblk;
	y->lost = lost;
	y->touched = touched;
	y->havet = havet;
	return 1;
oom:
	j->oom = 1;
	return -1;
}

/* Whether a body may begin after answer @r of @j: a block with status 0
 * and instructions, before the overlap, past the head (the answers the
 * previous chunk's overlap is compared with: to PAR_OVB bytes past its
 * start). */
static int body_may(const struct parq *pq, const struct pjob *j, const struct prec *r)
{
	return pq->records && !j->nobody && r->op == PR_NEXT && r->ret == 0 &&
	       !(r->flags & PF_SIDE) && r->ninsn && r->oret >= 0 &&
	       (j->last || r->off <= j->ovl) && (j->nbody || r->off > j->hlim);
}

/* Decodes job @j as the stepper's libipt stepper would call libipt: blocks
 * and events by the status, after an error a sync to the next PSB; where
 * the fast loop would run, records (bodies). */
static void job_run(struct parq *pq, struct pjob *j, int slot)
{
	struct pt_block_decoder *dec = pq->dec[slot];
	uint64_t failoff = UINT64_MAX, spinoff = UINT64_MAX, spin = 0;
	size_t past = 0;
	struct prec *r;
	int st;

	j->n = j->xn = 0;
	j->nbody = j->rn = j->cn = j->tn = 0;
	j->nobody = 0;
	j->ovl0 = SIZE_MAX;
	if (!dec) {
		dec = pq->dec[slot] = pt_blk_alloc_decoder(&pq->cfg);
		if (!dec || pt_blk_set_image(dec, pq->img[slot]) < 0) {
			j->oom = 1;
			return;
		}
	}
	st = pt_blk_sync_set(dec, j->begin);
	if (!(r = rec_sync(dec, j, st)))
		return;
	for (;;) {
		if (st < 0) {
			if (r->op == PR_SYNC) {
				/* a sync failed: the end, or a broken PSB+
				 * (the stepper reports it and syncs on while
				 * the offset moves) */
				if (st == -pte_eos || r->oret < 0 || r->off == failoff)
					break;
				failoff = r->off;
			}
			st = pt_blk_sync_forward(dec);
			if (!(r = rec_sync(dec, j, st)))
				return;
		} else {
			struct pt_block b;
			int bst = 0, k = 0;
			if (!(st & pts_event_pending) && body_may(pq, j, r) &&
			    (k = body_run(pq, j, dec, pq->d->pool->cc[slot], r, &b, &bst)) < 0)
				return;
			if (k)
				r = rec_put(dec, j, bst, &b);
			else
				r = (st & pts_event_pending) ? rec_event(dec, j) : rec_next(dec, j);
			if (!r)
				return;
			st = r->ret;
			/* code that loops without trace: the stepper stops it
			 * (q_spin_error), here it ends the chunk */
			if (r->op == PR_NEXT && r->off == spinoff) {
				spin += r->ninsn;
				if (spin > PAR_SPIN)
					break;
			} else {
				spinoff = r->off;
				spin = 0;
			}
		}
		if (!j->last && r->oret >= 0 && r->off > j->ovl) {
			if (pq->records && r->off - j->ovl > PAR_OVB) {
				/* the next job's head ends there: not compared */
				j->n--;
				break;
			}
			if (!past++)
				j->ovl0 = j->n - 1;
			if (past >= PAR_OVL)
				break;
		}
	}
}

static struct pjob *pick(struct ppool *p, struct parq **pqp)
{
	size_t k, i;
	for (k = 0; k < p->nact; k++) {
		struct parq *pq = p->act[(p->rr + k) % p->nact];
		for (i = pq->cur; i < pq->released; i++)
			if (pq->job[i].state == J_TODO) {
				p->rr = (p->rr + k + 1) % p->nact;
				*pqp = pq;
				return &pq->job[i];
			}
	}
	return NULL;
}

/* Runs @j of @pq on thread slot @slot; the lock is held on entry and exit. */
static void job_do(struct ppool *p, struct parq *pq, struct pjob *j, int slot)
{
	j->state = J_RUN;
	pq->running++;
	if (!j->r && pq->nspare) {
		const struct spare *x = &pq->spare[--pq->nspare];
		j->r = x->r;
		j->cap = x->cap;
		j->rec = x->rec;
		j->rcap = x->rcap;
		j->chk = x->chk;
		j->ccap = x->ccap;
		j->tim = x->tim;
		j->tcap = x->tcap;
	}
	if (!j->r && !j->last) {
		/* about 1.3 blocks a byte of trace: no growing on the way */
		size_t cap = (size_t)(2 * (j->end - j->begin)) + 2 * PAR_OVL + 256;
		j->r = malloc(cap * sizeof *j->r);
		j->cap = j->r ? cap : 0;
	}
	pthread_mutex_unlock(&p->mu);
	job_run(pq, j, slot);
	pthread_mutex_lock(&p->mu);
	j->state = J_DONE;
	pq->running--;
	pthread_cond_broadcast(&p->done);
}

struct wctx {
	struct ppool *p;
	int slot;
};

static void *worker(void *arg)
{
	struct wctx *w = arg;
	struct ppool *p = w->p;
	pthread_mutex_lock(&p->mu);
	while (!p->quit) {
		struct parq *pq;
		struct pjob *j = pick(p, &pq);
		if (!j) {
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		job_do(p, pq, j, w->slot);
	}
	pthread_mutex_unlock(&p->mu);
	free(w);
	return NULL;
}

static int pool_start(struct ptd *d)
{
	struct ppool *p;
	int n = d->opts->jobs, i;
	if (d->pool)
		return 0;
	p = calloc(1, sizeof *p);
	if (!p)
		return -1;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->th = calloc((size_t)n, sizeof *p->th);
	p->isc = calloc((size_t)n, sizeof *p->isc);
	p->cc = calloc((size_t)n, sizeof *p->cc);
	for (i = 0; p->th && p->isc && p->cc && i < n; i++) {
		if (!(p->cc[i] = calloc(PAR_CC, sizeof *p->cc[i])))
			break;
		if (!(p->isc[i] = pt_iscache_alloc(NULL))) {
			free(p->cc[i]);
			break;
		}
		/* sections stay mapped, with their block caches */
		pt_iscache_set_limit(p->isc[i], PAR_ISC_LIMIT);
	}
	if (!p->th || !p->isc || !p->cc || i < n) {
		while (p->isc && p->cc && i > 0) {
			pt_iscache_free(p->isc[--i]);
			free(p->cc[i]);
		}
		free(p->cc);
		free(p->isc);
		free(p->th);
		free(p);
		return -1;
	}
	d->pool = p;
	for (i = 0; i + 1 < n; i++) {
		struct wctx *w = malloc(sizeof *w);
		if (!w)
			break;
		w->p = p;
		w->slot = i + 1;
		if (pthread_create(&p->th[i], NULL, worker, w)) {
			free(w);
			break;
		}
		p->nth++;
	}
	return 0;
}

/* ---- the stepper's side ---- */

/* Lets the workers run up to 2 chunks per thread ahead of the stepper. */
static void release(struct ppool *p, struct parq *pq)
{
	size_t want = pq->cur + 2 * (size_t)(p->nth + 1);
	if (want > pq->njob)
		want = pq->njob;
	if (want > pq->released) {
		pq->released = want;
		pthread_cond_broadcast(&p->work);
	}
}

/* Job @k of @pq, decoded: by a worker, or here when none has begun it;
 * while a worker has it, this thread runs others. */
static struct pjob *job_wait(struct ptd *d, struct parq *pq, size_t k)
{
	struct ppool *p = d->pool;
	struct pjob *j = &pq->job[k];
	pthread_mutex_lock(&p->mu);
	if (k >= pq->released) {
		pq->released = k + 1;
		pthread_cond_broadcast(&p->work);
	}
	while (j->state != J_DONE) {
		struct parq *o;
		struct pjob *x;
		if (j->state == J_TODO) {
			job_do(p, pq, j, 0);
			continue;
		}
		x = pick(p, &o);
		if (x)
			job_do(p, o, x, 0);
		else
			pthread_cond_wait(&p->done, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return j;
}

/* The answers that matter to the stepper: events, syncs, errors and blocks
 * that end at a branch.  libipt ends other blocks (straight-line code) at
 * places that depend on its block cache, shared by the decoders of a
 * section: the stepper does the same with or without them (ptd_int.h,
 * ndec), so chunks are compared and counted by these units only. */
static int unit(struct ptd *d, const struct pjob *j, const struct prec *r)
{
	struct pt_block b;
	if (r->op != PR_NEXT || r->ret < 0)
		return 1;
	rec_block(j, r, &b);
	return ptd_block_branches(d, &b);
}

/* Events by what they say (libipt leaves bytes of the union unset). */
static int ev_eq(const struct pt_event *a, const struct pt_event *b)
{
	if (a->type != b->type || a->ip_suppressed != b->ip_suppressed ||
	    a->status_update != b->status_update || a->has_tsc != b->has_tsc ||
	    (a->has_tsc && (a->tsc != b->tsc || a->lost_mtc != b->lost_mtc ||
			    a->lost_cyc != b->lost_cyc)))
		return 0;
	switch (a->type) {
	case ptev_enabled:
		return a->variant.enabled.ip == b->variant.enabled.ip &&
		       a->variant.enabled.resumed == b->variant.enabled.resumed;
	case ptev_disabled:
		return a->variant.disabled.ip == b->variant.disabled.ip;
	case ptev_async_disabled:
		return a->variant.async_disabled.at == b->variant.async_disabled.at &&
		       a->variant.async_disabled.ip == b->variant.async_disabled.ip;
	case ptev_async_branch:
		return a->variant.async_branch.from == b->variant.async_branch.from &&
		       a->variant.async_branch.to == b->variant.async_branch.to;
	case ptev_overflow:
		return a->variant.overflow.ip == b->variant.overflow.ip;
	case ptev_exec_mode:
		return a->variant.exec_mode.ip == b->variant.exec_mode.ip &&
		       a->variant.exec_mode.mode == b->variant.exec_mode.mode;
	default:
		return 1; /* the stepper reads nothing else */
	}
}

static int unit_eq(const struct pjob *ja, const struct prec *a, const struct pjob *jb,
		   const struct prec *b)
{
	if (a->op != b->op || a->ret != b->ret || a->tret != b->tret || a->oret != b->oret ||
	    a->off != b->off || a->tsc != b->tsc || a->lm != b->lm || a->lc != b->lc)
		return 0;
	switch (a->op) {
	case PR_NEXT:
		return a->ret < 0 ||
		       (a->end_ip == b->end_ip && a->isid == b->isid && a->mode == b->mode);
	case PR_EVENT:
		return ev_eq(&ja->x[a->ip].ev, &jb->x[b->ip].ev);
	default: /* the sync offset is asked for after a successful sync only */
		return a->ret < 0 || (a->end_ip == b->end_ip && a->isid == b->isid);
	}
}

/* The first answer of @b whose offset is @off or more (offsets only grow
 * along a decoder's answers). */
static size_t find_off(const struct pjob *b, uint64_t off)
{
	size_t lo = 1, hi = b->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (b->r[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The next unit of @j at or after @k (j->n: none). */
static size_t next_unit(struct ptd *d, const struct pjob *j, size_t k)
{
	while (k < j->n && !unit(d, j, &j->r[k]))
		k++;
	return k;
}

/* Where the stepper leaves job cur for job cur + 1: a unit of cur's
 * overlap from which on cur's units are the next job's, to the end of the
 * overlap.  0: found; -1 none. */
static int splice(struct ptd *d, struct parq *pq)
{
	const struct pjob *a = &pq->job[pq->cur], *b;
	size_t j, i, x, y, bn;
	if (pq->cur + 1 >= pq->njob || d->opts->par_fallback)
		return -1;
	b = job_wait(d, pq, pq->cur + 1);
	if (a->oom || b->oom)
		return -1;
	/* the next job is entered before its first body (its head) */
	bn = b->nbody ? b->body[0].at : b->n;
	for (j = next_unit(d, a, a->ovl0 > pq->hot.pos ? a->ovl0 : pq->hot.pos); j < a->n;
	     j = next_unit(d, a, j + 1)) {
		if (a->r[j].oret < 0)
			continue;
		for (i = find_off(b, a->r[j].off); i < bn && b->r[i].off == a->r[j].off; i++) {
			if (!unit(d, b, &b->r[i]) || !unit_eq(a, &a->r[j], b, &b->r[i]))
				continue;
			x = j;
			y = i;
			for (;;) {
				x = next_unit(d, a, x + 1);
				y = next_unit(d, b, y + 1);
				if (x == a->n || y >= bn || !unit_eq(a, &a->r[x], b, &b->r[y]))
					break;
			}
			if (x == a->n) {
				d->st->par_spliced++;
				/* after the unit, not at it: the stepper has
				 * the block of this job, whose start may differ
				 * from the next job's (libipt's block caches
				 * split straight-line code differently), so the
				 * branch pending before it is resolved at the
				 * right address; the blocks after a unit start
				 * where it went in both */
				pq->stop = j + 1;
				pq->entry = i + 1;
				return 0;
			}
		}
	}
	return -1;
}

static void pq_free(struct ptd *d, struct parq *pq)
{
	size_t i;
	int s, ns = d->pool->nth + 1;
	for (i = 0; i < pq->njob; i++) {
		free(pq->job[i].r);
		free(pq->job[i].x);
		free(pq->job[i].body);
		free(pq->job[i].rec);
		free(pq->job[i].chk);
		free(pq->job[i].tim);
	}
	while (pq->nspare) {
		const struct spare *x = &pq->spare[--pq->nspare];
		free(x->r);
		free(x->rec);
		free(x->chk);
		free(x->tim);
	}
	free(pq->job);
	for (s = 0; s < ns; s++) {
		if (pq->dec && pq->dec[s])
			pt_blk_free_decoder(pq->dec[s]);
		if (pq->img && pq->img[s])
			pt_image_free(pq->img[s]);
	}
	free(pq->dec);
	free(pq->img);
	free(pq);
}

void ptd_par_stop(struct ptd *d, struct ptq *q)
{
	struct parq *pq = q->par;
	struct ppool *p = d->pool;
	size_t i;
	if (!pq)
		return;
	q->par = NULL;
	pthread_mutex_lock(&p->mu);
	for (i = 0; i < p->nact; i++)
		if (p->act[i] == pq) {
			p->act[i] = p->act[--p->nact];
			break;
		}
	p->rr = 0;
	while (pq->running)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
	pq_free(d, pq);
}

/* The records cannot answer: the queue's own decoder is synchronized where
 * the current job began and run, as the job's worker ran, to the units the
 * stepper has had; it answers from there on (the rest of the segment is
 * decoded serially). */
static void fallback(struct ptd *d, struct ptq *q)
{
	struct parq *pq = q->par;
	struct pt_block_decoder *dec = q->dec;
	const struct pjob *j = &pq->job[pq->cur];
	const struct prec *want = NULL, *r;
	struct pjob t; /* the last answer only */
	size_t k, target = 0, n = 0;
	uint64_t failoff = UINT64_MAX;
	int st, lost = 0;

	size_t wk = 0;
	for (k = 1; k < pq->hot.pos && k < j->n; k++)
		if (unit(d, j, &j->r[k])) {
			target++;
			want = &j->r[k];
			wk = k;
		}
	/* and the branch blocks of the bodies written (in part: bon) */
	target += pq->bunits;
	if (pq->bon)
		target += q->ndec - pq->bnd0;
	if ((pq->bi || pq->bon) && j->body[pq->bon ? pq->bi : pq->bi - 1].at > wk)
		want = NULL; /* the last unit was a body's */
	pq->bon = 0;
	d->st->par_fallbacks++;
	memset(&t, 0, sizeof t);
	st = pt_blk_sync_set(dec, j->begin);
	r = rec_sync(dec, &t, st);
	while (r && n < target) {
		if (st < 0 && r->op == PR_SYNC) {
			/* as job_run: the end, or a broken PSB+ */
			if (st == -pte_eos || r->oret < 0 || r->off == failoff)
				break;
			failoff = r->off;
		}
		t.n = t.xn = 0;
		if (st < 0)
			r = rec_sync(dec, &t, pt_blk_sync_forward(dec));
		else if (st & pts_event_pending)
			r = rec_event(dec, &t);
		else
			r = rec_next(dec, &t);
		if (r && unit(d, &t, r))
			n++;
		if (r)
			st = r->ret;
	}
	lost = !r || n != target || (want && !unit_eq(&t, r, j, want));
	free(t.r);
	free(t.x);
	if (lost)
		ptd_fail(d, PTD_ESYS, "parallel decoding: queue %u lost its place", q->idx);
	ptd_par_stop(d, q);
}

/* Job cur's first body (its answers were just switched to). */
static void body_first(struct parq *pq)
{
	const struct pjob *j = &pq->job[pq->cur];
	pq->bi = 0;
	pq->bon = 0;
	pq->bunits = 0;
	pq->hot.bat = j->nbody && !j->oom ? j->body[0].at : SIZE_MAX;
}

/* The pending branches the stepper and a body start with are the same
 * (a jcc's size is looked up late: not compared). */
static int pend_same(const struct pend *a, const struct pend *b)
{
	if (a->valid != b->valid)
		return 0;
	return !a->valid || (a->cls == b->cls && a->isid == b->isid && a->mode == b->mode &&
			     a->from == b->from);
}

/* Body @y's records up to (not including) @n into the ring, their times
 * not before @S; the thread's last record. */
static void body_push(struct ptd *d, struct ptq *q, struct parq *pq, const struct pjob *j,
		      const struct pbody *y, size_t n, uint64_t S)
{
	struct thr *th = &d->thr[q->th];
	const struct brec *v = j->rec + y->rec0;
	const uint32_t tid = th->tid;
	size_t k = pq->brec;
	uint64_t t = 0;
	if (k >= n)
		return;
	while (k < n) {
		/* the ring's free run from its tail: no check per record */
		size_t tail, room, e;
		struct mtev_rec *r;
		if (q->fcount == q->fcap) {
			if (!(r = q_grow_push(d, q)))
				break;
			q->fcount--;
		}
		tail = (q->fhead + q->fcount) & (q->fcap - 1);
		room = q->fcap - q->fcount;
		if (room > q->fcap - tail)
			room = q->fcap - tail;
		e = n - k < room ? n : k + room;
		r = &q->fifo[tail];
		q->fcount += e - k;
		for (; k < e; k++, r++) {
			t = v[k].w > S ? v[k].w : S;
			r->kind = MTEV_BRANCH;
			r->br.tid = tid;
			r->br.time = t;
			r->br.type = v[k].type;
			r->br.from = v[k].from;
			r->br.to = v[k].to;
		}
	}
	d->st->branches += k - pq->brec;
	d->st->par_body_recs += k - pq->brec;
	pq->brec = k;
	th->last_time = t;
	th->has_rec = 1;
	th->ended = 0;
	th->lastq = (int)(q - d->q);
}

int par_body(struct ptd *d, struct ptq *q, uint64_t stop)
{
	struct parq *pq = q->par;
	const struct pjob *j = &pq->job[pq->cur];
	const struct pbody *y = &j->body[pq->bi];
	const struct bchk *cv = j->chk + y->chk0;
	const struct btim *tv = j->tim + y->tim0;
	struct thr *th = &d->thr[q->th];
	uint64_t S = q->time, w;
	size_t c, ti, tw;
	uint32_t yblk = UINT32_MAX;
	/* where it hands back: a block, its records, branch blocks,
	 * instructions and last instruction; the pending branch it leaves
	 * (xc: its bchk, or none) */
	uint32_t xblk, xnrec, xnd;
	uint64_t xins, xip;
	const struct bchk *xc;

	if (!pq->bon) {
		size_t c0 = 15 - (size_t)(q->ndec & 15); /* the first check */
		if (S >= stop || !pend_same(&q->pend, &y->pend0) ||
		    (c0 < y->nchk && q_off(q, cv[c0].off) == q->spin_off)) {
			/* the stepper's own decoder takes over here */
			fallback(d, q);
			return 0;
		}
		pq->bon = 1;
		pq->bnd0 = q->ndec;
		pq->bins0 = q->ninsns;
		pq->bblk0 = q->nblocks;
		pq->brec = 0;
		pq->btim = 0;
		pq->bblk = 0;
		pq->bchk = c0;
		d->st->par_bodies++;
	}
	/* the first block where the time reaches @stop */
	for (ti = pq->btim; ti < y->ntim; ti++)
		if (tv[ti].blk > pq->bblk && tv[ti].w >= stop) {
			yblk = tv[ti].blk;
			break;
		}
	/* the checks before it: commits, a full batch */
	for (c = pq->bchk; c < y->nchk && cv[c].blk <= yblk; c += 16) {
		uint64_t off = q_off(q, cv[c].off);
		body_push(d, q, pq, j, y, cv[c].nrec, S);
		q_psb_passed(q, off);
		/* never spinning: par_body's first check, body_run the rest */
		q_spin_check(off, pq->bins0 + cv[c].ninsns, &q->spin_off, &q->spin_mark,
			     &q->spin_insns);
		if (q->nready >= PTD_BATCH || d->err) {
			pq->bchk = c + 16;
			xc = &cv[c];
			xblk = xc->blk;
			xnrec = xc->nrec;
			xnd = (uint32_t)(c + 1);
			xins = xc->ninsns;
			xip = xc->from;
			goto yield;
		}
	}
	pq->bchk = c;
	if (yblk != UINT32_MAX) {
		const struct btim *t = &tv[ti];
		xblk = t->blk;
		xnrec = t->nrec;
		xnd = t->nd;
		xins = t->ninsns;
		xip = t->last_ip;
		xc = xnd && cv[xnd - 1].blk == xblk ? &cv[xnd - 1] : NULL;
		goto yield;
	}
	/* to the end */
	body_push(d, q, pq, j, y, y->nrec, S);
	q->time = y->w > S ? y->w : S;
	q->ndec = pq->bnd0 + y->nchk;
	q->ninsns = pq->bins0 + y->ninsns;
	q->nblocks = pq->bblk0 + y->nblk;
	if (y->touched) {
		th->state = TS_ON;
		th->last_ip = y->last_ip;
	}
	q->pend = y->pend1;
	if (q->pend.valid && q->pend.time < S)
		q->pend.time = S;
	if (y->havet) {
		q->last_tsc = y->last_tsc;
		q->lost_timing = y->lost;
	}
	q->status = 0;
	pq->bunits += y->nchk;
	pq->bon = 0;
	pq->bi++;
	pq->hot.bat = pq->bi < j->nbody ? j->body[pq->bi].at : SIZE_MAX;
	pq->lim = 0; /* take_slow sets the fast path's end again */
	return 0;
yield:
	body_push(d, q, pq, j, y, xnrec, S);
	/* the time at that block: the last growth of w at or before it */
	w = 0;
	for (tw = pq->btim; tw < y->ntim && tv[tw].blk <= xblk; tw++)
		w = tv[tw].w;
	pq->btim = tw;
	pq->bblk = xblk;
	if (w > q->time)
		q->time = w;
	q->ndec = pq->bnd0 + xnd;
	q->ninsns = pq->bins0 + xins;
	q->nblocks = pq->bblk0 + xblk;
	th->state = TS_ON;
	th->last_ip = xip;
	if (xc) {
		q->pend.valid = 1;
		q->pend.cls = xc->cls;
		q->pend.size = xc->size;
		q->pend.isid = xc->isid;
		q->pend.mode = xc->mode;
		q->pend.from = xc->from;
		q->pend.time = q->time;
	} else {
		q->pend.valid = 0;
	}
	q->status = 0;
	return 1;
}

/* The next answer, of kind @op: NULL when the records have none (then the
 * queue's decoder has taken over). */
static const struct prec *take_slow(struct ptq *q, uint8_t op)
{
	struct parq *pq = q->par;
	struct ptd *d = pq->d;
	pq->lim = 0;
	for (;;) {
		const struct pjob *j = &pq->job[pq->cur];
		const struct prec *r;
		if (pq->hot.pos == pq->hot.bat)
			break; /* a body is due: only the fast loop writes it */
		if (pq->hot.pos >= j->ovl0 && pq->stop == SIZE_MAX && splice(d, pq) < 0)
			break;
		if (pq->hot.pos == pq->stop) {
			struct ppool *p = d->pool;
			if (pq->last != &pq->act) {
				pq->act = *pq->last;
				pq->last = &pq->act;
			}
			struct pjob *o = &pq->job[pq->cur];
			pthread_mutex_lock(&p->mu);
			if (pq->nspare < (int)(sizeof pq->spare / sizeof pq->spare[0])) {
				struct spare *x = &pq->spare[pq->nspare++];
				x->r = o->r;
				x->cap = o->cap;
				x->rec = o->rec;
				x->rcap = o->rcap;
				x->chk = o->chk;
				x->ccap = o->ccap;
				x->tim = o->tim;
				x->tcap = o->tcap;
			} else {
				free(o->r);
				free(o->rec);
				free(o->chk);
				free(o->tim);
			}
			o->r = NULL;
			o->n = o->cap = 0;
			o->rec = NULL;
			o->chk = NULL;
			o->tim = NULL;
			o->rn = o->rcap = o->cn = o->ccap = o->tn = o->tcap = 0;
			free(o->x);
			o->x = NULL;
			o->xn = o->xcap = 0;
			free(o->body);
			o->body = NULL;
			o->nbody = o->bodycap = 0;
			pq->cur++;
			pq->hot.pos = pq->entry;
			pq->stop = SIZE_MAX;
			release(p, pq);
			pthread_mutex_unlock(&p->mu);
			job_wait(d, pq, pq->cur);
			body_first(pq);
			continue;
		}
		if (j->oom || pq->hot.pos >= j->n)
			break;
		r = &j->r[pq->hot.pos];
		if (r->op != op)
			break;
		pq->hot.pos++;
		pq->last = r;
		pq->rv = j->r;
		pq->lim = pq->stop != SIZE_MAX ? pq->stop : j->ovl0;
		if (pq->lim > j->n)
			pq->lim = j->n;
		if (pq->lim > pq->hot.bat)
			pq->lim = pq->hot.bat;
		return r;
	}
	fallback(d, q);
	return NULL;
}

static inline const struct prec *take(struct ptq *q, uint8_t op)
{
	struct parq *pq = q->par;
	if (pq->hot.pos < pq->lim && pq->rv[pq->hot.pos].op == op) {
		/* inside a job, before its overlap or splice: the answer */
		pq->last = &pq->rv[pq->hot.pos++];
		return pq->last;
	}
	return take_slow(q, op);
}

int par_next(struct ptq *q, struct pt_block *b)
{
	struct parq *pq = q->par;
	const struct prec *r = take(q, PR_NEXT);
	if (!r)
		return pt_blk_next(q->dec, b, sizeof *b);
	pq->last_sync = 0;
	rec_block(&pq->job[pq->cur], r, b);
	return r->ret;
}

int par_event(struct ptq *q, struct pt_event *ev)
{
	struct parq *pq = q->par;
	const struct prec *r = take(q, PR_EVENT);
	if (!r)
		return pt_blk_event(q->dec, ev, sizeof *ev);
	pq->last_sync = 0;
	*ev = pq->job[pq->cur].x[r->ip].ev;
	return r->ret;
}

int par_sync_forward(struct ptq *q)
{
	struct parq *pq = q->par;
	const struct prec *r = take(q, PR_SYNC);
	if (!r)
		return pt_blk_sync_forward(q->dec);
	pq->soff = r->end_ip;
	pq->sret = r->isid;
	pq->last_sync = 1;
	return r->ret;
}

int par_time(struct ptq *q, uint64_t *tsc, uint32_t *lm, uint32_t *lc)
{
	const struct prec *r = q->par->last;
	*tsc = r->tsc;
	*lm = r->lm;
	*lc = r->lc;
	return r->tret;
}

int par_offset(struct ptq *q, uint64_t *off)
{
	const struct prec *r = q->par->last;
	*off = r->off;
	return r->oret;
}

int par_sync_offset(struct ptq *q, uint64_t *off)
{
	*off = q->par->soff;
	return q->par->sret;
}

/* The stepper synchronizes again where it just did (its images changed
 * with sideband that changes none of them: the same answers). */
int par_sync_set(struct ptq *q, uint64_t off)
{
	struct parq *pq = q->par;
	if (pq->last_sync && pq->sret >= 0 && off == pq->soff && pq->last->ret >= 0) {
		return pq->last->ret;
	}
	fallback(pq->d, q);
	return pt_blk_sync_set(q->dec, off);
}

int par_set_image(struct ptq *q, struct pt_image *img)
{
	struct parq *pq = q->par;
	if (img != pq->img0)
		fallback(pq->d, q);
	return pt_blk_set_image(q->dec, img);
}

/* A worker's copy of @img in @dst, with sections of its own in @isc:
 * libipt keeps a block cache per section, written as it decodes, so
 * decoders on several threads must not share sections (a shared one gave a
 * wrong call target under load, 2 runs in 120).  Every section of the
 * serial iscache is added again in isid order, so that a block's isid means
 * the same section (the classifier reads d->secs by it); 0, or -1 when a
 * section is not known that way (the queue then decodes serially). */
static int slot_image(struct ptd *d, const struct pt_image *img,
		      struct pt_image_section_cache *isc, struct pt_image *dst)
{
	const struct proc *p = NULL;
	size_t i;
	if (!img)
		return 0;
	for (i = 0; i < d->nproc && !p; i++)
		if (d->proc[i].img == img)
			p = &d->proc[i];
	if (!p)
		return -1;
	for (i = 1; i < d->nsecs; i++) {
		const struct secview *v = &d->secs[i];
		if (!v->file ||
		    pt_iscache_add_file(isc, v->file, v->pgoff, v->len, v->addr) != (int)i)
			return -1;
	}
	for (i = 0; i < p->nisids; i++)
		if (p->isids[i] <= 0 || (size_t)p->isids[i] >= d->nsecs ||
		    pt_image_add_cached(dst, isc, p->isids[i], NULL) < 0)
			return -1;
	return 0;
}

/* Whether sideband after the stepper's position may change an image. */
static int sb_images_change(struct ptd *d)
{
	if (!d->sb_imgscan) {
		size_t i;
		for (i = 0; i < d->nsb; i++) {
			const struct sb *s = &d->sb[i];
			if ((s->kind == SB_MMAP && (s->mmap.prot & PROT_X)) ||
			    (s->kind == SB_COMM && s->comm.exec) ||
			    (s->kind == SB_FORK && s->pid != s->fork.ppid))
				d->sb_imglast = i + 1;
		}
		d->sb_imgscan = 1;
	}
	return d->sb_apply < d->sb_imglast;
}

void ptd_par_start(struct ptd *d, struct ptq *q)
{
	struct parq *pq;
	struct ppool *p;
	uint64_t soff = 0, last, chunk;
	size_t i, nj = 0, ns;
	int ok = 1, cyc;

	if (d->opts->jobs < 2 || q->par || q->par_seg == q->curseg + 1 || d->err)
		return;
	q->par_seg = q->curseg + 1;
	/* per-cpu queues change threads (and images) inside a chunk;
	 * without TSC in PSB+ a decoder synchronized at a PSB times blocks
	 * differently until the next TSC */
	if (d->per_cpu || q->cpu >= 0 || !d->pt_attr || !(d->pt_attr->config & (1u << 10)) ||
	    sb_images_change(d))
		return;
	/* the cached walk and the resync before a PSB drive their own
	 * decoders: those decode serially */
	if (d->opts->walk || d->opts->resync)
		return;
	cyc = (d->pt_attr->config & (1u << 1)) != 0;
	if (pt_blk_get_sync_offset(q->dec, &soff) < 0)
		return;
	/* chunks: from the sync, cut at the first PSB chunk bytes on; with
	 * CYC, whose overlap is a PSB interval more, at least 8 intervals */
	chunk = d->opts->chunk_bytes ? d->opts->chunk_bytes
		: d->opts->par_answers ? PAR_CHUNK_ANSWERS
				       : PAR_CHUNK_DEFAULT;
	if (cyc && !d->opts->chunk_bytes && q->npsbs &&
	    chunk < 8 * (q->segs[q->curseg].end - q->segs[q->curseg].begin) / q->npsbs)
		chunk = 8 * (q->segs[q->curseg].end - q->segs[q->curseg].begin) / q->npsbs;
	last = soff;
	for (i = 0; i < q->npsbs; i++)
		if (q->psbs[i] >= last + chunk) {
			nj++;
			last = q->psbs[i];
		}
	if (!nj)
		return;
	if (pool_start(d) < 0)
		return;
	p = d->pool;
	ns = (size_t)p->nth + 1;
	pq = calloc(1, sizeof *pq);
	if (!pq)
		return;
	pq->d = d;
	pq->q = q;
	pq->cfg = *pt_blk_get_config(q->dec);
	/* the block flags are not in the copy libipt keeps: q_open_seg's */
	pq->cfg.flags.variant.block.end_on_call = 1;
	pq->cfg.flags.variant.block.end_on_jump = 1;
	pq->img0 = q->img;
	pq->status0 = q->status;
	pq->job = calloc(nj + 1, sizeof *pq->job);
	pq->img = calloc(ns, sizeof *pq->img);
	pq->dec = calloc(ns, sizeof *pq->dec);
	ok = pq->job && pq->img && pq->dec;
	for (i = 0; ok && i < ns; i++) {
		pq->img[i] = pt_image_alloc(NULL);
		ok = pq->img[i] && slot_image(d, q->img, p->isc[i], pq->img[i]) == 0;
	}
	if (!ok) {
		pq_free(d, pq);
		return;
	}
	last = soff;
	pq->job[0].begin = soff;
	for (i = 0; i < q->npsbs; i++)
		if (q->psbs[i] >= last + chunk) {
			struct pjob *j = &pq->job[pq->njob];
			j->end = j->ovl = q->psbs[i];
			if (cyc) /* the overlap from the PSB after */
				j->ovl = i + 1 < q->npsbs ? q->psbs[i + 1] : UINT64_MAX - 1;
			pq->job[++pq->njob].begin = q->psbs[i];
			pq->job[pq->njob].hlim = j->ovl > UINT64_MAX - PAR_OVB ? UINT64_MAX : j->ovl + PAR_OVB;
			last = q->psbs[i];
		}
	pq->job[pq->njob++].last = 1;
	d->st->par_chunks += pq->njob;
	/* the stepper has synchronized: its answers so far */
	memset(&pq->act, 0, sizeof pq->act);
	pq->act.op = PR_SYNC;
	pq->act.ret = q->status;
	pq->act.tret = st8(pt_blk_time(q->dec, &pq->act.tsc, &pq->act.lm, &pq->act.lc));
	pq->act.oret = st8(pt_blk_get_offset(q->dec, &pq->act.off));
	pq->sret = pt_blk_get_sync_offset(q->dec, &pq->soff);
	pq->last = &pq->act;
	pq->last_sync = 1;
	pq->hot.pos = 1; /* job 0's sync is the one the stepper made */
	pq->hot.bat = SIZE_MAX;
	pq->stop = SIZE_MAX;
	pq->records = !d->opts->par_answers;
	pthread_mutex_lock(&p->mu);
	if (mt_grow((void **)&p->act, &p->actcap, p->nact + 1, sizeof *p->act) < 0) {
		pthread_mutex_unlock(&p->mu);
		pq_free(d, pq);
		return;
	}
	p->act[p->nact++] = pq;
	q->par = pq;
	release(p, pq);
	pthread_mutex_unlock(&p->mu);
	job_wait(d, pq, 0);
	body_first(pq);
}

void ptd_par_fini(struct ptd *d)
{
	struct ppool *p = d->pool;
	size_t i;
	int t, n = d->opts->jobs; /* the slots of pool_start */
	if (!p)
		return;
	for (i = 0; i < d->nq; i++)
		ptd_par_stop(d, &d->q[i]);
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (t = 0; t < p->nth; t++)
		pthread_join(p->th[t], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	for (t = 0; t < n; t++) {
		pt_iscache_free(p->isc[t]);
		free(p->cc[t]);
	}
	free(p->cc);
	free(p->isc);
	free(p->th);
	free(p->act);
	free(p);
	d->pool = NULL;
}
