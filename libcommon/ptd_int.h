/* ptd_int.h: the decoder's shared state, inside libcommon only (ptdecode.h
 * is the API).  Data flows one way:
 *
 *   ptd_read.c   perf.data -> sideband (sorted by time) and per-queue trace
 *   ptd_step.c   a queue's trace -> records in the queue's ring (a stepper)
 *   ptd_queue.c  the ring: records decoded since the last PSB wait there
 *                until a PSB confirms them (or an error retracts them)
 *   ptd_merge.c  confirmed ring records + sideband records, by time -> MTEV
 *                (write_rec: the only place a record leaves the decoder)
 *
 * beside them: ptd_proc.c (threads, processes, their maps), ptd_image.c
 * (finding image files, libipt's images, code bytes for the classifier),
 * ptd_sideband.c (sideband records as MTEV records, sampling stacks),
 * ptd_list.c (--records) and ptdecode.c (the entry points).  docs/decode.md
 * says why. */
#ifndef MT_PTD_INT_H
#define MT_PTD_INT_H

#include <intel-pt.h>
#include <stddef.h>
#include <stdint.h>

#include "mtev.h"
#include "perfdata.h"
#include "ptdecode.h"
#include "strpool.h"
#include "unwind.h"
#include "x86br.h"

#define PROT_X 4 /* PROT_EXEC */

enum sb_kind { SB_MMAP, SB_COMM, SB_FORK, SB_EXIT, SB_SAMPLE, SB_TRIGGER };

struct sb {
	uint64_t time;
	uint32_t seq;
	uint8_t kind;
	uint32_t pid, tid;
	union {
		struct {
			uint64_t addr, len, pgoff;
			uint32_t prot;
			uint8_t bid[20], bidlen;
			const char *path;
		} mmap;
		struct {
			const char *name;
			int exec;
		} comm;
		struct {
			uint32_t ppid;
		} fork;
		struct {
			uint32_t nips;
			size_t ips;  /* index into the ips arena */
			size_t ustk; /* 1 + offset of its user regs and stack in d->ustk; 0 none */
			uint8_t fp;  /* a frame-pointer walk's chain (no stack copy, no LBR) */
		} sample;
		struct {
			uint64_t addr, arg0, arg1;
			const char *sym;
		} trig;
	};
};

struct sw { /* from time on, the cpu runs pid/tid */
	uint64_t time;
	uint32_t pid, tid;
	uint32_t seq;
};

struct cpuline {
	struct sw *v;
	size_t n, cap;
};

struct qbuf {
	uint64_t offset, size;
	const uint8_t *data;
	uint64_t file_off;
};

enum { TS_NONE, TS_ON, TS_SYSCALL, TS_ASYNC, TS_GAP };

struct thr {
	uint32_t tid, pid;
	int state;	    /* TS_*: how tracing last stopped */
	uint64_t last_ip;   /* TS_ON: last executed instruction; TS_ASYNC: the FUP ip */
	uint64_t last_time; /* time of its last record */
	uint64_t async_time;
	int gap_pending;
	struct mtev_rec gap;
	int announced;
	int has_rec;
	int ended;  /* its last record is a trace-end: nothing runs traced */
	int lastq;
	uint64_t out_time; /* time of its last record written (per-cpu clamp) */
	/* sampling: the thread's root chain (ptd_sideband.c, sb_roots) by
	 * generation (a new one at its fork and at each exec), counted by the
	 * learning pass [0] and the writing pass [1] alike */
	uint32_t rgen[2];
	struct rchain *rc;
	size_t nrc, rccap;
};

/* The return addresses, root first, that every whole unwound stack of a
 * thread (one generation of it) began with. */
struct rchain {
	uint32_t gen, nseen, n;
	uint64_t *ra;
};

struct mapent {
	uint64_t start, end;
	const char *path;
};

struct proc {
	uint32_t pid;
	struct pt_image *img;
	struct mapent *maps;
	size_t nmaps, mapcap;
	const char *name;
	int announced;
	int anon_exec;	   /* has anonymous executable memory (not in maps) */
	struct sb *sbmaps; /* sampling: the executable mmaps it has */
	size_t nsbmaps, sbmapcap;
	/* the iscache sections of img, in the order they were added (the
	 * cached walk finds an address's section itself: newest first) */
	int32_t *isids;
	size_t nisids, isidcap;
};

struct pend {
	int valid;
	uint8_t cls, size; /* size 0 with cls JCC: not looked up yet */
	int32_t isid;
	uint8_t mode;
	uint64_t from, time;
};

struct seg {
	uint64_t begin, end; /* in the queue's stream */
	int lost_before;     /* trace data was lost just before it */
	uint64_t lost_at;    /* AUX offset of the loss */
};

struct auxlost { /* an AUX record flagged truncated */
	uint32_t tid, cpu;
	uint64_t offset; /* aux_offset + aux_size */
};

struct ptq {
	uint32_t idx;
	int32_t cpu;
	uint32_t tid0, pid0; /* per-thread queue: its thread */
	struct qbuf *bufs;
	size_t nbufs, bufcap;
	uint8_t *stream; /* concatenated data */
	int stream_owned;
	uint64_t len;
	struct seg *segs;
	size_t nsegs, curseg;

	struct pt_block_decoder *dec;
	int state; /* Q_* */
	int status;
	int need_start;
	uint64_t start_time;
	struct pend pend;
	int th; /* current thread index, -1 none */
	uint64_t time;
	struct pt_image *img;
	size_t swi;
	int synced_once;
	uint64_t last_sync_off;
	uint32_t lost_timing; /* libipt's lost mtc + cyc count */
	uint64_t last_tsc;    /* q->time is its perf time (or later) */
	uint64_t nblocks, ninsns;
	/* blocks that ended at a branch (a pending branch was set): the PSB
	 * and spin checks run at every 16th, a count that does not depend on
	 * where libipt splits straight-line code (its block cache), so that
	 * chunks decoded on other threads check at the same places (-j N);
	 * decided: the last block was one */
	uint64_t ndec;
	int decided;
	int untimed;	      /* after an overflow, until timing is exact again */
	/* spinning, checked every 16 blocks (q_spinning): the offset and the
	 * instruction count at the last check, and how many instructions ran
	 * since a check first saw the offset where it still is */
	uint64_t spin_off, spin_mark, spin_insns;

	/* output: fcount records from fhead; the first nready are final, the
	 * rest (decoded since the last PSB) are dropped if the decoder finds
	 * the trace corrupt before the next PSB confirms them */
	struct mtev_rec *fifo;
	size_t fhead, fcount, fcap, nready;
	uint64_t ready_time; /* time of the last record made final */
	uint64_t *psbs;	     /* PSB offsets in the current segment */
	size_t npsbs, psbi;
	struct ptd_walkq *walk; /* the cached walk's state (ptd_walk.c), or NULL */
	/* after a resync before the next PSB (ptd_resync.c): q->dec decodes
	 * rsbuf: a PSB+ made for the resync packet, the segment's bytes from
	 * it to that PSB (rs_psb), and when tracing is on there (at rs_fup),
	 * FUP + TIP.PGD, so that libipt stops exactly where the PSB takes
	 * over; segdec, the segment's own decoder, goes on from rs_psb.  A
	 * decoder offset + dec_bias is the offset in the segment.  rs_active:
	 * a copy is decoded; rs_end: it reached its end */
	uint8_t *rsbuf;
	int64_t dec_bias;
	int rs_active, rs_end;
	uint64_t rs_psb, rs_start, rs_fup; /* rs_start: the resync packet's offset */
	struct pt_block_decoder *segdec;
	int rs_th;		/* the thread whose gap the resync closed (-1 none) */
	struct mtev_rec rs_gap; /* that gap, open again if the copy fails */

	/* PSB-parallel decoding (ptd_par.c): while set, the stepper's libipt
	 * calls on dec are answered from chunks decoded ahead on other
	 * threads; par_seg: 1 + the segment it was last considered for */
	struct parq *par;
	size_t par_seg;
};

enum { Q_SEG, Q_SYNC, Q_RUN, Q_DONE };

/* The offset in the queue's current segment of decoder offset @off. */
static inline uint64_t q_off(const struct ptq *q, uint64_t off)
{
	return (uint64_t)((int64_t)off + q->dec_bias);
}

/* Code that loops through direct branches only (`hlt; jmp .-1` in abort())
 * needs no packets: libipt would decode it forever from a trace that leads
 * there (a corrupt one: real hardware faults on the hlt).  No real code runs
 * this many instructions without a conditional or indirect branch, which
 * consume trace.  Checked with the PSB check, every 16 blocks that end at
 * a branch (asking libipt for the offset after every block cost 2% of all
 * instructions): the count starts at the first check that sees the offset
 * where it stays, so a loop is caught at most 16 branches after it passes
 * the limit.  Both steppers (ptd_step.c, ptd_walk.c) check the same way. */
#ifndef PTD_MAX_SPIN /* the fuzz build lowers it (mk/fuzz.mk): same paths, shorter runs */
#define PTD_MAX_SPIN (1u << 17)
#endif

/* At a check (q->ndec a multiple of 16), the decoder at @off (0 if
 * unknown): whether the queue is spinning. */
static inline int q_spin_check(uint64_t off, uint64_t ninsns, uint64_t *spin_off,
			       uint64_t *spin_mark, uint64_t *spin_insns)
{
	if (off != *spin_off) {
		*spin_off = off;
		*spin_insns = 0;
	} else {
		*spin_insns += ninsns - *spin_mark;
	}
	*spin_mark = ninsns;
	return *spin_insns > PTD_MAX_SPIN;
}


/* entries of the classifier's hot table (16 bytes each, in struct ptd,
 * zeroed per decode) */
#ifndef PTD_CC1
#define PTD_CC1 8192
#endif
/* entries of the second-level cache, allocated per decode: log2 (the fuzz
 * build makes both small, mk/fuzz.mk: caches, their size changes no result) */
#ifndef PTD_CC2_BITS
#define PTD_CC2_BITS 16
#endif

/* an instruction's class and length: by address, section and mode (a
 * corrupt MODE.Exec can have the same bytes decoded as 16-bit code) */
struct ccache_ent {
	uint64_t ip;
	int32_t isid;
	uint8_t cls, size, valid, mode;
};

/* Classifies the instruction at @ip (its first @n bytes in @buf, execution
 * mode @mode) into cache entry @e; *size its length. */
static inline enum x86br cc_classify(struct ccache_ent *e, const uint8_t *buf, int n,
				     uint64_t ip, int32_t isid, uint8_t mode, uint8_t *size)
{
	int bits = mode == ptem_64bit ? 64 : mode == ptem_32bit ? 32 : 16;
	enum x86br cls = x86br_classify(buf, (size_t)n, bits, size);
	e->ip = ip;
	e->isid = isid;
	e->cls = (uint8_t)cls;
	e->size = *size;
	e->mode = mode;
	e->valid = 1;
	return cls;
}

/* What block @b's instruction class says of its last instruction, or -1
 * when only its bytes can say (a conditional jump cut by the block's end,
 * a far transfer, an unknown class). */
static inline int iclass_br(const struct pt_block *b)
{
	switch (b->iclass) {
	case ptic_call:
		return X86BR_CALL;
	case ptic_return:
		return X86BR_RET;
	case ptic_jump:
		return X86BR_JMP;
	case ptic_other:
	case ptic_ptwrite:
		return X86BR_NONE;
	case ptic_cond_jump:
		return b->truncated ? -1 : X86BR_JCC;
	default:
		return -1;
	}
}

struct secview { /* an iscache section as libipt sees it (pt_mk_section) */
	const uint8_t *data; /* its first byte; NULL: ask pt_iscache_read */
	uint64_t addr, size; /* load address, size cut at the end of the file */
	/* as added: a PSB-parallel worker adds the file again, a section of
	 * its own (ptd_par.c); file NULL: not known */
	const char *file;
	uint64_t pgoff, len;
	/* the section whose libipt section, and so block cache, this one
	 * shares (itself, or an earlier one: pt_iscache_add_file shares a
	 * section between load addresses when file, offset and size match) */
	int32_t bc;
};

struct filemap { /* an image file, mapped once */
	char *file;
	uint8_t *base; /* NULL: could not be mapped */
	size_t len;
};
/* Unmaps a filemap's base (ptd_image.c). */
void ptd_fmap_free(uint8_t *base, size_t len);

/* The input's name in messages: the file, "stdin", or "perf.data". */
#define INNAME(o) ((o)->input_name ? (o)->input_name : "perf.data")

struct ptd {
	struct ptd_options *opts;
	struct ptd_stats *st;
	const struct ptd_stepper *step; /* how queues are decoded */
	int err; /* sticky negative error */
	/* the first gap, for the one line that says what was damaged and where */
	uint64_t ngaps_set;
	struct {
		unsigned reason;
		int code;
		uint32_t tid;
		uint64_t offset, ip;
		char msg[96];
	} gap1;

	/* recording facts */
	int have_clock;
	uint64_t t_shift, t_mult, t_zero;
	int have_info;
	uint64_t priv[64];
	size_t npriv;
	const struct pd_attr *pt_attr;
	struct pd_attr pt_attr_copy;
	int per_cpu, snapshot;
	char cpuid[128];
	struct pd_buildid *bids;
	size_t nbids;

	/* sideband */
	struct sb *sb;
	size_t nsb, sbcap;
	uint64_t *ips;
	size_t nips, ipscap;
	unw *unw;      /* --call-graph dwarf: the stack unwinder */
	int roots;     /* frame-pointer samples and a stack-copy stream of roots */
	uint8_t *ustk; /* per sample: have u64, regs u64[UNW_NREGS], len u64, bytes */
	size_t nustk, ustkcap;
	size_t sb_emit, sb_apply;
	uint64_t rec_t0, rec_t9; /* least and greatest time of any perf record */
	struct cpuline *cpus;
	size_t ncpus;
	uint32_t seq;

	/* queues */
	struct ptq *q;
	size_t nq;
	struct auxlost *auxlost;
	size_t nauxlost, auxlostcap;

	/* threads, processes */
	struct thr *thr;
	size_t nthr, thrcap;
	uint32_t *thr_idx;
	size_t thr_icap;
	struct proc *proc;
	size_t nproc, proccap;
	/* the images execs replaced, kept while a queue may still decode with
	 * one (until it sets its thread again), with their sections */
	struct oldimg {
		struct pt_image *img;
		int32_t *isids;
		size_t nisids;
	} *oldimgs;
	size_t noldimgs, oldimgcap;
	struct pt_image_section_cache *isc;
	struct mapent *kmaps; /* pid -1 maps */
	size_t nkmaps, kmapcap;

	/* classifier cache: a small hot table in front of a bigger one */
	struct ccache_ent cc1[PTD_CC1];
	struct ccache_ent *cc;
	size_t ccmask;
	/* the bytes of each iscache section (by isid), read in place by the
	 * classifier instead of through pt_iscache_read (which maps the
	 * section and takes its locks on every call) */
	struct secview *secs;
	size_t nsecs, seccap;
	struct filemap *fmaps;
	size_t nfmaps, fmapcap;

	struct strpool strs;
	mtev_writer *w;

	pd_reader *reader;

	/* final records */
	struct mtev_rec *fin;
	size_t nfin, fincap;
	/* sb_to_rec's records, for the merge to write */
	struct mtev_rec *sbout;
	size_t nsbout, sboutcap;
	struct ptd_walk *walk; /* the cached walk's shared state (ptd_walk.c), or NULL */
	struct ppool *pool; /* PSB-parallel decoding: worker threads (ptd_par.c) */
	size_t sb_imglast;  /* 1 + the last sideband record that changes an image */
	int sb_imgscan;	    /* sb_imglast is known */
	unsigned nkmissing; /* kernel images not found */
	const char *kmissing_first;
};

/* Records a queue holds before the merge must take them (a batch). */
#define PTD_BATCH 256

/* A stepper turns a queue's trace into records.  step() runs @q until it
 * has a batch of confirmed records (q->nready >= PTD_BATCH), its time
 * passes @limit, or it is done (q->state == Q_DONE); it may apply sideband
 * up to the queue's time (sb_apply_until).  Its records go into the
 * queue's ring only (q_push; q_commit confirms, q_retract drops what a
 * later error disproves), each thread's in time order; it never writes.
 * The merge calls it on the queue furthest behind.  Today there is one,
 * libipt's block decoder (ptd_step.c); issue 20's cached walk and the
 * PSB-parallel decoder are meant to be others (docs/decode.md). */
struct ptd_stepper {
	const char *name;
	void (*step)(struct ptd *d, struct ptq *q, uint64_t limit);
};
extern const struct ptd_stepper ptd_step_libipt;
extern const struct ptd_stepper ptd_step_walk; /* ptd_walk.c */
void ptd_walk_free(struct ptq *q);
void ptd_walk_fini(struct ptd *d);

/* ---- ptdecode.c ---- */
void ptd_warn(struct ptd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ptd_fail(struct ptd *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline uint64_t ptd_conv(const struct ptd *d, uint64_t tsc)
{
	if (!d->have_clock)
		return tsc;
	return pd_tsc_to_perf_time(tsc, d->t_shift, d->t_mult, d->t_zero);
}

/* ---- ptd_read.c ---- */
/* Reads the whole perf.data from @fd: sideband sorted, queues built. */
int read_perf(struct ptd *d, int fd);
/* The queue with AUX index @idx (created empty); NULL: out of memory. */
struct ptq *q_get(struct ptd *d, uint32_t idx);

/* ---- ptd_proc.c ---- */
int thr_get(struct ptd *d, uint32_t tid, uint32_t pid);
struct proc *proc_get(struct ptd *d, uint32_t pid);
void proc_exec(struct ptd *d, uint32_t pid);
void proc_fork(struct ptd *d, uint32_t pid, uint32_t ppid);
void map_note(struct mapent **v, size_t *n, size_t *cap, const struct mapent *m);
const struct mapent *map_lookup(struct ptd *d, uint32_t pid, uint64_t ip);

/* ---- ptd_image.c ---- */
const char *find_image(struct ptd *d, const char *path, const uint8_t *bid, uint8_t bidlen,
		       const char **why);
const struct pd_buildid *bid_for_path(struct ptd *d, const char *path);
void sec_note(struct ptd *d, const char *file, uint64_t pgoff, uint64_t len, uint64_t addr,
	      int isid);
void sb_apply_until(struct ptd *d, uint64_t time);
enum x86br classify_ip_slow(struct ptd *d, uint64_t ip, int32_t isid, uint8_t mode,
			    uint8_t *size);

/* ---- ptd_queue.c ---- */
struct mtev_rec *q_grow_push(struct ptd *d, struct ptq *q);
void q_retract(struct ptd *d, struct ptq *q);

/* A new record at the end of @q's ring (NULL: out of memory, d->err set). */
static inline struct mtev_rec *q_push(struct ptd *d, struct ptq *q)
{
	if (q->fcount < q->fcap)
		return &q->fifo[(q->fhead + q->fcount++) & (q->fcap - 1)];
	return q_grow_push(d, q);
}

static inline uint64_t rec_time(const struct mtev_rec *r)
{
	switch (r->kind) {
	case MTEV_BRANCH:
		return r->br.time;
	case MTEV_GAP:
		return r->gap.begin;
	case MTEV_THREAD:
		return r->thread.time;
	case MTEV_MAP:
		return r->map.time;
	case MTEV_SAMPLE:
		return r->sample.time;
	case MTEV_TRIGGER:
		return r->trigger.time;
	default:
		return 0;
	}
}

/* Everything decoded so far is final.  ready_time is where a retract
 * puts the threads' last time back: a gap's end, not its begin (a gap
 * after a retract must not begin before the last final one ends). */
static inline void q_commit(struct ptq *q)
{
	if (q->fcount > q->nready) {
		const struct mtev_rec *r = &q->fifo[(q->fhead + q->fcount - 1) & (q->fcap - 1)];
		q->ready_time = r->kind == MTEV_GAP ? r->gap.end : rec_time(r);
	}
	q->nready = q->fcount;
}

/* The decoder is at @off: when it passed the next PSB, what came before is
 * final (q_commit).  1 if it did.  Both steppers check so, every 16 blocks
 * that end at a branch. */
static inline int q_psb_passed(struct ptq *q, uint64_t off)
{
	if (q->psbi >= q->npsbs || off <= q->psbs[q->psbi])
		return 0;
	while (q->psbi < q->npsbs && off > q->psbs[q->psbi])
		q->psbi++;
	q_commit(q);
	return 1;
}

/* The check every 16 blocks that end at a branch (q->ndec), with the
 * decoder at @off (@have: whether it could say): a PSB passed commits what
 * came before; 1 if the queue spins (its stepper reports it). */
static inline int q_check16(struct ptq *q, int have, uint64_t off)
{
	if (!have)
		off = 0;
	else if (!q->rs_active)
		q_psb_passed(q, off);
	return q_spin_check(off, q->ninsns, &q->spin_off, &q->spin_mark, &q->spin_insns);
}

/* A sync that failed with the decoder at @off (a broken PSB+): 1 if it is
 * to be reported (the first, or past the last one reported, recorded; the
 * offset check guarantees progress), 0 if the search goes on. */
static inline int q_sync_error_new(struct ptq *q, uint64_t off)
{
	if (q->synced_once && off <= q->last_sync_off)
		return 0;
	q->synced_once = 1;
	q->last_sync_off = off;
	return 1;
}

/* A stepper's loop hands back to the merge (see "A stepper" above): after an
 * event-pending status @st, a batch, past @limit, sideband due at the
 * queue's time, the queue no longer running, or an error. */
static inline int q_step_yield(const struct ptd *d, const struct ptq *q, int st, uint64_t limit)
{
	return (st & pts_event_pending) || q->nready >= PTD_BATCH || q->time > limit ||
	       (d->sb_apply < d->nsb && d->sb[d->sb_apply].time <= q->time) ||
	       q->state != Q_RUN || d->err;
}

/* A stepper's states (see "A stepper" above): open the current segment
 * (Q_SEG, then Q_SYNC; < 0 on failure), find the next PSB (Q_SYNC), decode
 * (Q_RUN). */
struct q_states {
	int (*open)(struct ptd *d, struct ptq *q);
	void (*sync)(struct ptd *d, struct ptq *q);
	void (*run)(struct ptd *d, struct ptq *q, uint64_t limit);
};

/* A stepper's outer loop: the states, until a batch, @limit, the end or an
 * error (inline: each stepper gets its own copy, its calls direct). */
static inline void q_states_run(struct ptd *d, struct ptq *q, uint64_t limit,
				const struct q_states *s)
{
	while (q->nready < PTD_BATCH && q->state != Q_DONE && !d->err &&
	       (q->time <= limit || q->state == Q_SEG)) {
		if (d->sb_apply < d->nsb && d->sb[d->sb_apply].time <= q->time)
			sb_apply_until(d, q->time);
		switch (q->state) {
		case Q_SEG:
			q_commit(q);
			if (q->curseg >= q->nsegs) {
				q->state = Q_DONE;
				break;
			}
			if (s->open(d, q) < 0)
				return;
			break;
		case Q_SYNC:
			s->sync(d, q);
			break;
		case Q_RUN:
			s->run(d, q, limit);
			break;
		default:
			q->state = Q_DONE;
		}
	}
}

/* ---- ptd_step.c ---- */
/* Whether block @b ends at a branch (the stepper's classifier). */
int ptd_block_branches(struct ptd *d, const struct pt_block *b);
/* The thread's trace ends: its closing record (trace-end, or its pending
 * gap) into @q's ring, or with @q NULL into d->fin (the end of all data). */
void thr_finish(struct ptd *d, struct ptq *q, struct thr *t);
/* For the cached walk: the libipt stepper's record logic, fed blocks and
 * events from elsewhere (q->dec NULL: q->time is the caller's). */
void ptd_seg_config(struct ptd *d, struct ptq *q, struct pt_config *cfg);
void ptd_cpu_config(const struct ptd *d, struct pt_config *cfg);
int ptd_seg_psbs(struct ptd *d, struct ptq *q, const uint8_t *b, const uint8_t *e);
void ptd_seg_end(struct ptd *d, struct ptq *q);
void ptd_handle_block(struct ptd *d, struct ptq *q, const struct pt_block *b, int ok);
/* The rest of block @b once its pending branch is resolved and the queue's
 * time is @t (a per-cpu thread switch, the block's own branch pending). */
void ptd_block_tail(struct ptd *d, struct ptq *q, const struct pt_block *b, uint64_t t);
void ptd_handle_event(struct ptd *d, struct ptq *q, const struct pt_event *ev);
void ptd_set_thread(struct ptd *d, struct ptq *q, uint64_t time);
void ptd_spin_error(struct ptd *d, struct ptq *q, uint64_t ip);
void ptd_set_gap(struct ptd *d, struct ptq *q, unsigned reason, int code, uint64_t offset,
		 uint64_t ip, const char *msg);
void ptd_q_error_at(struct ptd *d, struct ptq *q, int err, uint64_t ip, uint64_t off);
/* A section joins process @p's image (pt_image_add_cached and the list). */
void proc_add_isid(struct ptd *d, struct proc *p, int32_t isid);

/* ---- ptd_resync.c ---- */
/* The thread running on @q at @time, its process image for the decoder. */
void q_set_thread(struct ptd *d, struct ptq *q, uint64_t time);
/* Damage ends somewhere after offset @lo of the current segment: q->dec set
 * up to go on from the first packet after it with a full IP, behind a PSB+
 * made for it (1), or nothing changed (0; d->err may be set). */
int q_resync(struct ptd *d, struct ptq *q, uint64_t lo);
int q_next_psb_tsc(struct ptd *d, struct ptq *q, uint64_t lo, uint64_t *tsc);

/* ---- ptd_par.c: PSB-parallel decoding (docs/decode.md) ---- */
/* After @q's first sync in a segment: decode the rest of the segment in
 * chunks on the worker threads if that gives the same output. */
void ptd_par_start(struct ptd *d, struct ptq *q);
/* Ends @q's parallel decoding (its decoder is about to be freed). */
void ptd_par_stop(struct ptd *d, struct ptq *q);
/* Stops every queue's parallel decoding and the threads. */
void ptd_par_fini(struct ptd *d);
/* The stepper's libipt calls while q->par is set (ptd_par.h maps them). */
int par_next(struct ptq *q, struct pt_block *b);
int par_event(struct ptq *q, struct pt_event *ev);
int par_time(struct ptq *q, uint64_t *tsc, uint32_t *lm, uint32_t *lc);
int par_offset(struct ptq *q, uint64_t *off);
int par_sync_forward(struct ptq *q);
int par_sync_offset(struct ptq *q, uint64_t *off);
int par_sync_set(struct ptq *q, uint64_t off);
int par_set_image(struct ptq *q, struct pt_image *img);
/* The first member of a queue's struct parq: the answer the stepper takes
 * next, and where the next body of records decoded on a worker is (the
 * fast loop writes it at that answer: par_body). */
struct parhot {
	size_t pos, bat;
};
static inline int par_due(const struct ptq *q)
{
	const struct parhot *h = (const struct parhot *)(const void *)q->par;
	return h && h->pos == h->bat;
}
/* The fast loop (q_fast, its state written back) at a body: writes its
 * records until the queue's time reaches @stop or a batch is confirmed
 * (1: hand back to the merge, the body goes on at the next call), or to
 * its end (0); 0 too when the body does not fit the queue's state (the
 * queue's own decoder then goes on: serial). */
int par_body(struct ptd *d, struct ptq *q, uint64_t stop);

/* ---- ptd_sideband.c ---- */
/* Sideband record @s as MTEV records appended to d->sbout (0 or more). */
int sb_to_rec(struct ptd *d, const struct sb *s);
/* Sampling recordings, before the first record is written: learns each
 * thread's root chain from the samples with a stack copy when there are
 * frame-pointer samples to complete with it. */
void sb_roots(struct ptd *d);

/* ---- ptd_merge.c ---- */
int write_rec(struct ptd *d, const struct mtev_rec *r);
int write_head(struct ptd *d);
int merge(struct ptd *d);

#endif
