/* ptdecode: Intel PT (perf.data or raw) to MTEV with libipt.  See ptdecode.h
 * and formats/mtev-semantics.md.
 *
 * Plan: read the whole perf.data first (sideband sorted by time, AUX data
 * gathered per queue), then run one libipt block decoder per queue as a
 * resumable step machine and merge their records with the sideband by time.
 * The block decoder is configured to end blocks at every direct call and
 * jump (end_on_call / end_on_jump), so a block holds at most one branch, its
 * last instruction; a small cached x86 classifier says what that instruction
 * is and how long, and the next block's ip says where it went.
 */
#include "ptdecode.h"

#include <errno.h>
#include <fcntl.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfinfo.h"
#include "imgfind.h"
#include "io.h"
#include "perfdata.h"
#include "unwind.h"

#define PROT_X 4 /* PROT_EXEC */

/* ------------------------------------------------------------------ */
/* x86 branch classifier                                               */

static size_t modrm_len(const uint8_t *b, size_t n, size_t i, int addr16, int *ok)
{
	uint8_t modrm, mod, rm;
	size_t len = 1;
	*ok = 0;
	if (i >= n)
		return 0;
	modrm = b[i];
	mod = modrm >> 6;
	rm = modrm & 7;
	if (mod == 3) {
		*ok = 1;
		return 1;
	}
	if (addr16) {
		if (mod == 0 && rm == 6)
			len += 2;
		else if (mod == 1)
			len += 1;
		else if (mod == 2)
			len += 2;
	} else {
		if (rm == 4) {
			uint8_t base;
			if (i + 1 >= n)
				return 0;
			base = b[i + 1] & 7;
			len += 1;
			if (mod == 0 && base == 5)
				len += 4;
		}
		if (mod == 0 && rm == 5)
			len += 4;
		else if (mod == 1)
			len += 1;
		else if (mod == 2)
			len += 4;
	}
	*ok = 1;
	return len;
}

enum ptd_brclass ptd_classify(const uint8_t *b, size_t n, int bits, uint8_t *size)
{
	size_t i = 0, sz = 0;
	int opsz16 = bits == 16, addr16 = bits == 16, ok;
	enum ptd_brclass cls = PTD_BR_NONE;

	*size = 0;
	for (; i < n && i < 15; i++) {
		uint8_t p = b[i];
		if (p == 0x66)
			opsz16 = bits != 16;
		else if (p == 0x67)
			addr16 = bits == 32;
		else if (p == 0xf0 || p == 0xf2 || p == 0xf3 || p == 0x2e || p == 0x36 ||
			 p == 0x3e || p == 0x26 || p == 0x64 || p == 0x65)
			;
		else if (bits == 64 && (p & 0xf0) == 0x40)
			; /* REX (only the last one before the opcode counts) */
		else
			break;
	}
	if (bits == 64)
		opsz16 = 0; /* near branches ignore 0x66 in 64-bit mode (Intel) */
	if (i >= n)
		return PTD_BR_NONE;
	switch (b[i]) {
	case 0x70 ... 0x7f:
	case 0xe0 ... 0xe3:
		cls = PTD_BR_JCC;
		sz = i + 2;
		break;
	case 0xe8:
		cls = PTD_BR_CALL;
		sz = i + 1 + (opsz16 ? 2 : 4);
		break;
	case 0xe9:
		cls = PTD_BR_JMP;
		sz = i + 1 + (opsz16 ? 2 : 4);
		break;
	case 0xeb:
		cls = PTD_BR_JMP;
		sz = i + 2;
		break;
	case 0xc3:
		cls = PTD_BR_RET;
		sz = i + 1;
		break;
	case 0xc2:
		cls = PTD_BR_RET;
		sz = i + 3;
		break;
	case 0xcb:
	case 0xcf:
		cls = PTD_BR_SYSRET;
		sz = i + 1;
		break;
	case 0xca:
		cls = PTD_BR_SYSRET;
		sz = i + 3;
		break;
	case 0xcc:
	case 0xce:
	case 0xf1:
		cls = PTD_BR_SYSCALL;
		sz = i + 1;
		break;
	case 0xcd:
		cls = PTD_BR_SYSCALL;
		sz = i + 2;
		break;
	case 0x9a:
		if (bits == 64)
			return PTD_BR_NONE;
		cls = PTD_BR_SYSCALL;
		sz = i + 1 + (opsz16 ? 4 : 6);
		break;
	case 0xea:
		if (bits == 64)
			return PTD_BR_NONE;
		cls = PTD_BR_FARJMP;
		sz = i + 1 + (opsz16 ? 4 : 6);
		break;
	case 0x0f:
		if (i + 1 >= n)
			return PTD_BR_NONE;
		switch (b[i + 1]) {
		case 0x80 ... 0x8f:
			cls = PTD_BR_JCC;
			sz = i + 2 + (opsz16 ? 2 : 4);
			break;
		case 0x05:
		case 0x34:
			cls = PTD_BR_SYSCALL;
			sz = i + 2;
			break;
		case 0x07:
		case 0x35:
			cls = PTD_BR_SYSRET;
			sz = i + 2;
			break;
		default:
			return PTD_BR_NONE;
		}
		break;
	case 0xff: {
		uint8_t reg;
		size_t ml;
		if (i + 1 >= n)
			return PTD_BR_NONE;
		reg = (b[i + 1] >> 3) & 7;
		if (reg == 2)
			cls = PTD_BR_CALL;
		else if (reg == 3)
			cls = PTD_BR_SYSCALL; /* far call */
		else if (reg == 4)
			cls = PTD_BR_JMP;
		else if (reg == 5)
			cls = PTD_BR_FARJMP;
		else
			return PTD_BR_NONE;
		ml = modrm_len(b, n, i + 1, addr16, &ok);
		if (!ok)
			return cls;
		sz = i + 1 + ml;
		break;
	}
	default:
		return PTD_BR_NONE;
	}
	if (sz <= 15)
		*size = (uint8_t)sz;
	return cls;
}

/* ------------------------------------------------------------------ */
/* small utilities                                                     */

struct strtab { /* interned strings, alive until the decode ends */
	char **v;
	size_t n, cap;
	/* open-addressing index */
	uint32_t *idx;
	size_t icap;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	while (n--)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

static const char *strtab_intern(struct strtab *t, const char *s)
{
	size_t n = strlen(s), i;
	uint64_t h = hash_bytes(s, n);
	char *p;
	if (t->n * 2 >= t->icap) {
		size_t ncap = t->icap ? 2 * t->icap : 256, k;
		uint32_t *ni = malloc(ncap * sizeof *ni);
		if (!ni)
			return NULL;
		memset(ni, 0xff, ncap * sizeof *ni);
		for (k = 0; k < t->n; k++) {
			size_t j = hash_bytes(t->v[k], strlen(t->v[k])) & (ncap - 1);
			while (ni[j] != UINT32_MAX)
				j = (j + 1) & (ncap - 1);
			ni[j] = (uint32_t)k;
		}
		free(t->idx);
		t->idx = ni;
		t->icap = ncap;
	}
	for (i = h & (t->icap - 1); t->idx[i] != UINT32_MAX; i = (i + 1) & (t->icap - 1))
		if (!strcmp(t->v[t->idx[i]], s))
			return t->v[t->idx[i]];
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		char **v = realloc(t->v, cap * sizeof *v);
		if (!v)
			return NULL;
		t->v = v;
		t->cap = cap;
	}
	p = strdup(s);
	if (!p)
		return NULL;
	t->v[t->n] = p;
	t->idx[i] = (uint32_t)t->n++;
	return p;
}

static void strtab_fini(struct strtab *t)
{
	size_t i;
	for (i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	free(t->idx);
}

/* ------------------------------------------------------------------ */
/* session state                                                       */

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
			uint32_t ppid, ptid;
		} fork;
		struct {
			uint32_t nips;
			size_t ips;  /* index into the ips arena */
			size_t ustk; /* 1 + offset of its user regs and stack in d->ustk; 0 none */
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
	int lastq;
	uint64_t out_time; /* time of its last record written (per-cpu clamp) */
};

struct mapent {
	uint64_t start, end;
	const char *path;
	int missing;
};

struct proc {
	uint32_t pid;
	struct pt_image *img;
	struct mapent *maps;
	size_t nmaps, mapcap;
	const char *name;
	int announced;
	struct sb *sbmaps; /* sampling: the executable mmaps it has */
	size_t nsbmaps, sbmapcap;
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
};

enum { Q_SEG, Q_SYNC, Q_RUN, Q_DONE };

/* entries of the classifier's hot table (16 bytes each, in struct ptd) */
#define PTD_CC1 8192

struct ccache_ent {
	uint64_t ip;
	int32_t isid;
	uint8_t cls, size, valid;
};

struct secview { /* an iscache section as libipt sees it (pt_mk_section) */
	const uint8_t *data; /* its first byte; NULL: ask pt_iscache_read */
	uint64_t addr, size; /* load address, size cut at the end of the file */
};

struct filemap { /* an image file, mapped once */
	char *file;
	uint8_t *base; /* NULL: could not be mapped */
	size_t len;
};

/* The input's name in messages: the file, "stdin", or "perf.data". */
#define INNAME(o) ((o)->input_name ? (o)->input_name : "perf.data")

struct ptd {
	struct ptd_options *opts;
	struct ptd_stats *st;
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
	uint8_t *ustk; /* per sample: have u64, regs u64[UNW_NREGS], len u64, bytes */
	size_t nustk, ustkcap;
	size_t sb_emit, sb_apply;
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
	struct pt_image **oldimgs;
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

	struct strtab strs;
	mtev_writer *w;

	pd_reader *reader;

	/* final records */
	struct mtev_rec *fin;
	size_t nfin, fincap;
	char msg[1024];
	unsigned nkmissing; /* kernel images not found */
	const char *kmissing_first;
};

static void ptd_warn(struct ptd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ptd_warn(struct ptd *d, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	d->st->warnings++;
	if (d->opts->warn)
		d->opts->warn(d->opts->warn_ctx, buf);
}

static int ptd_fail(struct ptd *d, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int ptd_fail(struct ptd *d, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->opts->errmsg, sizeof d->opts->errmsg, fmt, ap);
	va_end(ap);
	if (!d->err)
		d->err = -code;
	return -code;
}

static int grow(void *pv, size_t *cap, size_t n, size_t elem)
{
	void **p = pv;
	size_t c;
	void *np;
	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 16;
	while (c <= n)
		c *= 2;
	np = realloc(*p, c * elem);
	if (!np)
		return -1;
	*p = np;
	*cap = c;
	return 0;
}

/* Section @isid is @len bytes of @file from @pgoff, loaded at @addr: keep a
 * view of its bytes.  The same rules as libipt's: the section is cut at the
 * end of the file; an offset at or past the end is no section (libipt
 * refuses it too).  Anything unusual leaves the view empty, and
 * classify_ip_slow asks libipt instead. */
static void sec_note(struct ptd *d, const char *file, uint64_t pgoff, uint64_t len, uint64_t addr,
		     int isid)
{
	struct filemap *f = NULL;
	size_t i;

	if (isid <= 0)
		return;
	if ((size_t)isid >= d->nsecs) {
		if (grow(&d->secs, &d->seccap, (size_t)isid, sizeof *d->secs) < 0)
			return;
		memset(d->secs + d->nsecs, 0, ((size_t)isid + 1 - d->nsecs) * sizeof *d->secs);
		d->nsecs = (size_t)isid + 1;
	}
	d->secs[isid].data = NULL;
	for (i = 0; i < d->nfmaps; i++)
		if (!strcmp(d->fmaps[i].file, file)) {
			f = &d->fmaps[i];
			break;
		}
	if (!f) {
		struct stat st;
		int fd;
		if (grow(&d->fmaps, &d->fmapcap, d->nfmaps, sizeof *d->fmaps) < 0)
			return;
		f = &d->fmaps[d->nfmaps];
		f->file = strdup(file);
		f->base = NULL;
		f->len = 0;
		if (!f->file)
			return;
		d->nfmaps++;
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
				void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
				if (m != MAP_FAILED) {
					f->base = m;
					f->len = (size_t)st.st_size;
				}
			}
			close(fd);
		}
	}
	if (!f->base || pgoff >= f->len)
		return;
	d->secs[isid].data = f->base + pgoff;
	d->secs[isid].addr = addr;
	d->secs[isid].size = len < f->len - pgoff ? len : f->len - pgoff;
}

static uint64_t ptd_conv(const struct ptd *d, uint64_t tsc)
{
	if (!d->have_clock)
		return tsc;
	return pd_tsc_to_perf_time(tsc, d->t_shift, d->t_mult, d->t_zero);
}

/* ---- threads and processes ---- */

static int thr_get(struct ptd *d, uint32_t tid, uint32_t pid)
{
	size_t i;
	if (d->nthr * 2 >= d->thr_icap) {
		size_t ncap = d->thr_icap ? 2 * d->thr_icap : 64, k;
		uint32_t *ni = malloc(ncap * sizeof *ni);
		if (!ni)
			return -1;
		memset(ni, 0xff, ncap * sizeof *ni);
		for (k = 0; k < d->nthr; k++) {
			size_t j = (d->thr[k].tid * 2654435761u) & (ncap - 1);
			while (ni[j] != UINT32_MAX)
				j = (j + 1) & (ncap - 1);
			ni[j] = (uint32_t)k;
		}
		free(d->thr_idx);
		d->thr_idx = ni;
		d->thr_icap = ncap;
	}
	for (i = (tid * 2654435761u) & (d->thr_icap - 1); d->thr_idx[i] != UINT32_MAX;
	     i = (i + 1) & (d->thr_icap - 1))
		if (d->thr[d->thr_idx[i]].tid == tid) {
			struct thr *t = &d->thr[d->thr_idx[i]];
			if (pid != UINT32_MAX && t->pid == UINT32_MAX)
				t->pid = pid;
			return (int)d->thr_idx[i];
		}
	if (grow(&d->thr, &d->thrcap, d->nthr, sizeof *d->thr) < 0)
		return -1;
	memset(&d->thr[d->nthr], 0, sizeof d->thr[0]);
	d->thr[d->nthr].tid = tid;
	d->thr[d->nthr].pid = pid;
	d->thr[d->nthr].lastq = -1;
	d->thr_idx[i] = (uint32_t)d->nthr;
	return (int)d->nthr++;
}

static struct proc *proc_get(struct ptd *d, uint32_t pid)
{
	size_t i;
	struct proc *p;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == pid)
			return &d->proc[i];
	if (grow(&d->proc, &d->proccap, d->nproc, sizeof *d->proc) < 0)
		return NULL;
	p = &d->proc[d->nproc];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	p->img = pt_image_alloc(NULL);
	if (!p->img)
		return NULL;
	/* kernel maps apply to every process */
	for (i = 0; i < d->nkmaps; i++) {
		if (grow(&p->maps, &p->mapcap, p->nmaps, sizeof *p->maps) < 0)
			return NULL;
		p->maps[p->nmaps++] = d->kmaps[i];
	}
	d->nproc++;
	return p;
}

/* ---- images ---- */

/* Finds the file for @path with build-id @bid (imgfind.h): its interned
 * path, or NULL with *why saying what was wrong. */
static const char *find_image(struct ptd *d, const char *path, const uint8_t *bid,
			      uint8_t bidlen, const char **why)
{
	char buf[4096], whybuf[4400];

	*why = "not found";
	if (d->opts->no_images)
		return NULL;
	if (img_find(path, bid, bidlen, buf, sizeof buf, whybuf, sizeof whybuf))
		return strtab_intern(&d->strs, buf);
	*why = strtab_intern(&d->strs, whybuf);
	if (!*why)
		*why = "not found";
	return NULL;
}

static const struct pd_buildid *bid_for_path(struct ptd *d, const char *path)
{
	size_t i;
	for (i = 0; i < d->nbids; i++)
		if (!strcmp(d->bids[i].filename, path))
			return &d->bids[i];
	return NULL;
}

static void map_note(struct mapent **v, size_t *n, size_t *cap, const struct mapent *m)
{
	if (grow(v, cap, *n, sizeof **v) < 0)
		return;
	(*v)[(*n)++] = *m;
}

/* Adds an exec mapping to @p's image (or every image for pid -1). */
static void image_add(struct ptd *d, uint32_t pid, const struct sb *s)
{
	const char *path = s->mmap.path, *file, *why;
	const uint8_t *bid = s->mmap.bid;
	uint8_t bidlen = s->mmap.bidlen;
	struct mapent me;
	int isid = -1;
	size_t i;

	if (!bidlen) {
		const struct pd_buildid *b = bid_for_path(d, path);
		if (b) {
			bid = b->id;
			bidlen = b->len;
		}
	}
	me.start = s->mmap.addr;
	me.end = s->mmap.addr + s->mmap.len;
	me.path = strtab_intern(&d->strs, path);
	me.missing = 1;
	if (!strncmp(path, "//anon", 6) || !strcmp(path, "[heap]") || !strcmp(path, "[stack]"))
		return;
	file = find_image(d, path, bid, bidlen, &why);
	if (file) {
		isid = pt_iscache_add_file(d->isc, file, s->mmap.pgoff, s->mmap.len, s->mmap.addr);
		sec_note(d, file, s->mmap.pgoff, s->mmap.len, s->mmap.addr, isid);
		if (isid < 0) {
			char hex[41];
			buildid_hex(hex, bid, bidlen);
			ptd_warn(d, "cannot load image %s for %s: %s", file, path,
				 pt_errstr(pt_errcode(isid)));
		}
	} else if (!d->opts->no_images && pid == UINT32_MAX) {
		/* kernel and modules: without --kcore they are never there;
		 * one line says so */
		if (!d->nkmissing++)
			d->kmissing_first = me.path;
	} else if (!d->opts->no_images) {
		/* one warning per path */
		char kbuf[4200];
		size_t n0 = d->strs.n;
		snprintf(kbuf, sizeof kbuf, "\x01warned:%s", path);
		strtab_intern(&d->strs, kbuf);
		if (d->strs.n != n0) {
			char hex[41];
			buildid_hex(hex, bid, bidlen);
			ptd_warn(d, "image %s%s%s%s: %s; its code will be a gap", path,
				 bidlen ? " (build-id " : "", bidlen ? hex : "", bidlen ? ")" : "",
				 why);
		}
	}
	me.missing = isid < 0;
	if (pid == UINT32_MAX) {
		map_note(&d->kmaps, &d->nkmaps, &d->kmapcap, &me);
		for (i = 0; i < d->nproc; i++) {
			struct proc *p = &d->proc[i];
			map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
			if (isid >= 0)
				pt_image_add_cached(p->img, d->isc, isid, NULL);
		}
		return;
	}
	{
		struct proc *p = proc_get(d, pid);
		if (!p)
			return;
		map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
		if (isid >= 0)
			pt_image_add_cached(p->img, d->isc, isid, NULL);
	}
}

static const struct mapent *map_lookup(struct ptd *d, uint32_t pid, uint64_t ip)
{
	struct proc *p = NULL;
	size_t i;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == pid)
			p = &d->proc[i];
	if (p) {
		for (i = p->nmaps; i-- > 0;)
			if (p->maps[i].start <= ip && ip < p->maps[i].end)
				return &p->maps[i];
	}
	for (i = d->nkmaps; i-- > 0;)
		if (d->kmaps[i].start <= ip && ip < d->kmaps[i].end)
			return &d->kmaps[i];
	return NULL;
}

static void proc_exec(struct ptd *d, uint32_t pid)
{
	struct proc *p = proc_get(d, pid);
	size_t i;
	if (!p)
		return;
	if (grow(&d->oldimgs, &d->oldimgcap, d->noldimgs, sizeof *d->oldimgs) == 0)
		d->oldimgs[d->noldimgs++] = p->img;
	else
		pt_image_free(p->img);
	p->img = pt_image_alloc(NULL);
	p->nmaps = 0;
	for (i = 0; i < d->nkmaps; i++) {
		map_note(&p->maps, &p->nmaps, &p->mapcap, &d->kmaps[i]);
	}
}

static void proc_fork(struct ptd *d, uint32_t pid, uint32_t ppid)
{
	struct proc *parent, *child;
	size_t i;
	if (pid == ppid)
		return;
	parent = proc_get(d, ppid);
	if (!parent)
		return;
	child = proc_get(d, pid);
	if (!child)
		return;
	parent = proc_get(d, ppid); /* proc_get may have moved it */
	pt_image_copy(child->img, parent->img);
	child->nmaps = 0;
	for (i = 0; i < parent->nmaps; i++)
		map_note(&child->maps, &child->nmaps, &child->mapcap, &parent->maps[i]);
}

/* Applies the effects of sideband records (images) up to @time. */
static void sb_apply_until(struct ptd *d, uint64_t time)
{
	while (d->sb_apply < d->nsb && d->sb[d->sb_apply].time <= time) {
		const struct sb *s = &d->sb[d->sb_apply++];
		switch (s->kind) {
		case SB_MMAP:
			if (s->mmap.prot & PROT_X)
				image_add(d, s->pid, s);
			break;
		case SB_COMM:
			if (s->comm.exec)
				proc_exec(d, s->pid);
			break;
		case SB_FORK:
			proc_fork(d, s->pid, s->fork.ppid);
			break;
		default:
			break;
		}
	}
}

/* ------------------------------------------------------------------ */
/* record output                                                       */

static struct mtev_rec *q_grow_push(struct ptd *d, struct ptq *q);

static inline struct mtev_rec *q_push(struct ptd *d, struct ptq *q)
{
	if (q->fcount < q->fcap)
		return &q->fifo[(q->fhead + q->fcount++) & (q->fcap - 1)];
	return q_grow_push(d, q);
}

static struct mtev_rec *q_grow_push(struct ptd *d, struct ptq *q)
{
	struct mtev_rec *r;
	if (q->fcount == q->fcap) {
		size_t ncap = q->fcap ? 2 * q->fcap : 256, k;
		struct mtev_rec *nf = malloc(ncap * sizeof *nf);
		if (!nf) {
			ptd_fail(d, PTD_ESYS, "out of memory");
			return NULL;
		}
		for (k = 0; k < q->fcount; k++)
			nf[k] = q->fifo[(q->fhead + k) & (q->fcap - 1)];
		free(q->fifo);
		q->fifo = nf;
		q->fhead = 0;
		q->fcap = ncap;
	}
	r = &q->fifo[(q->fhead + q->fcount++) & (q->fcap - 1)];
	return r;
}

static inline uint64_t rec_time(const struct mtev_rec *r);

/* Everything decoded so far is final. */
static void q_commit(struct ptq *q)
{
	if (q->fcount > q->nready)
		q->ready_time = rec_time(&q->fifo[(q->fhead + q->fcount - 1) & (q->fcap - 1)]);
	q->nready = q->fcount;
}

/* The trace since the last PSB is corrupt: forget what it gave. */
static void q_retract(struct ptd *d, struct ptq *q)
{
	size_t k;
	for (k = q->nready; k < q->fcount; k++) {
		const struct mtev_rec *r = &q->fifo[(q->fhead + k) & (q->fcap - 1)];
		int th = -1;
		if (r->kind == MTEV_BRANCH)
			th = thr_get(d, r->br.tid, UINT32_MAX), d->st->branches--;
		else if (r->kind == MTEV_GAP)
			th = thr_get(d, r->gap.tid, UINT32_MAX), d->st->gaps--;
		if (th >= 0 && d->thr[th].last_time > q->ready_time)
			d->thr[th].last_time = q->ready_time;
	}
	d->st->retracted += q->fcount - q->nready;
	q->fcount = q->nready;
}

static void thr_announce(struct ptd *d, struct ptq *q, struct thr *t, uint64_t time)
{
	struct mtev_rec *r;
	if (t->announced)
		return;
	t->announced = 1;
	r = q_push(d, q);
	if (!r)
		return;
	memset(r, 0, sizeof *r);
	r->kind = MTEV_THREAD;
	r->thread.pid = t->pid == UINT32_MAX ? 0 : t->pid;
	r->thread.tid = t->tid;
	r->thread.time = time;
}

static int write_rec(struct ptd *d, const struct mtev_rec *r);

/* Emits a branch of the queue's current thread. */
static void emit_br_slow(struct ptd *d, struct ptq *q, unsigned type, uint64_t from, uint64_t to,
			 uint64_t time)
{
	struct thr *t;
	struct mtev_rec *r;
	if (q->th < 0 || q->untimed)
		return;
	t = &d->thr[q->th];
	if (!t->announced)
		thr_announce(d, q, t, time);
	if (t->gap_pending) {
		r = q_push(d, q);
		if (!r)
			return;
		*r = t->gap;
		r->gap.end = time >= r->gap.begin ? time : r->gap.begin;
		t->gap_pending = 0;
		d->st->gaps++;
		if (type != MTEV_BR_TRACE_START) {
			/* after a gap the thread's trace starts again
			 * (mtev-semantics), also when the first record after
			 * it comes from an event (an overflow whose timing came
			 * back at a TSC, not at a block): a resume becomes the
			 * start, anything else starts at its source */
			q->need_start = 0;
			if (type == MTEV_BR_SYSRET || type == MTEV_BR_IRET)
				type = MTEV_BR_TRACE_START;
			else if (from)
				emit_br_slow(d, q, MTEV_BR_TRACE_START, 0, from, time);
		}
	}
	if (!q->fcount && d->nq == 1 && !q->psbs &&
	    (d->sb_emit >= d->nsb || d->sb[d->sb_emit].time > time)) {
		/* one queue, nothing waiting before it: straight out */
		struct mtev_rec br;
		br.kind = MTEV_BRANCH;
		br.br.tid = t->tid;
		br.br.time = time;
		br.br.type = type;
		br.br.from = from;
		br.br.to = to;
		if (d->per_cpu)
			write_rec(d, &br);
		else {
			int e = mtev_write(d->w, &br);
			if (e < 0)
				ptd_fail(d, PTD_EOUTPUT, "writing MTEV: %s", mtev_strerror(e));
		}
	} else {
		r = q_push(d, q);
		if (!r)
			return;
		r->kind = MTEV_BRANCH;
		r->br.tid = t->tid;
		r->br.time = time;
		r->br.type = type;
		r->br.from = from;
		r->br.to = to;
	}
	t->last_time = time;
	t->has_rec = 1;
	t->lastq = (int)(q - d->q);
	d->st->branches++;
}

/* The common case inline: thread known and announced, no gap to close. */
static inline void emit_br(struct ptd *d, struct ptq *q, unsigned type, uint64_t from, uint64_t to,
			   uint64_t time)
{
	struct thr *t;
	struct mtev_rec *r;
	if (q->th < 0 || q->untimed) {
		emit_br_slow(d, q, type, from, to, time);
		return;
	}
	t = &d->thr[q->th];
	if (!t->announced || t->gap_pending) {
		emit_br_slow(d, q, type, from, to, time);
		return;
	}
	r = q_push(d, q);
	if (!r)
		return;
	r->kind = MTEV_BRANCH;
	r->br.tid = t->tid;
	r->br.time = time;
	r->br.type = type;
	r->br.from = from;
	r->br.to = to;
	t->last_time = time;
	t->has_rec = 1;
	t->lastq = (int)(q - d->q);
	d->st->branches++;
}

static void q_set_thread(struct ptd *d, struct ptq *q, uint64_t time);

static void set_gap(struct ptd *d, struct ptq *q, unsigned reason, int code, uint64_t offset,
		    uint64_t ip, const char *msg)
{
	struct thr *t;
	d->st->degraded = 1;
	if (q->th < 0)
		q_set_thread(d, q, q->time);
	if (!d->ngaps_set++) {
		d->gap1.reason = reason;
		d->gap1.code = code;
		d->gap1.tid = q->th >= 0 ? d->thr[q->th].tid : q->tid0;
		d->gap1.offset = offset;
		d->gap1.ip = ip;
		snprintf(d->gap1.msg, sizeof d->gap1.msg, "%s", msg ? msg : "");
	}
	if (q->th < 0)
		return;
	t = &d->thr[q->th];
	if (t->gap_pending) {
		/* consecutive errors without a good record between: each is
		 * its own gap, the earlier one ends where the next begins */
		struct mtev_rec *r = q_push(d, q);
		if (!r)
			return;
		*r = t->gap;
		r->gap.end = q->time > r->gap.begin ? q->time : r->gap.begin;
		t->last_time = r->gap.end;
		d->st->gaps++;
	} else if (!t->has_rec) {
		t->last_time = q->time;
	}
	t->gap_pending = 1;
	memset(&t->gap, 0, sizeof t->gap);
	t->gap.kind = MTEV_GAP;
	t->gap.gap.tid = t->tid;
	t->gap.gap.begin = t->last_time;
	t->gap.gap.end = t->last_time;
	t->gap.gap.reason = reason;
	t->gap.gap.code = code;
	t->gap.gap.offset = offset;
	t->gap.gap.ip = ip;
	t->gap.gap.message = mtev_cstr(strtab_intern(&d->strs, msg));
	t->state = TS_GAP;
	t->lastq = (int)(q - d->q);
}

/* ------------------------------------------------------------------ */
/* queue decoding                                                      */

static inline uint64_t q_now(struct ptd *d, struct ptq *q)
{
	uint64_t tsc;
	uint32_t lm, lc;
	if (q->dec && pt_blk_time(q->dec, &tsc, &lm, &lc) >= 0) {
		/* many blocks share one timing packet: convert once */
		if (tsc != q->last_tsc) {
			uint64_t t = ptd_conv(d, tsc);
			q->last_tsc = tsc;
			if (t > q->time)
				q->time = t;
		}
		q->lost_timing = lm + lc;
	}
	return q->time;
}

/* Picks the thread running on the queue at @time (per-cpu: from the switch
 * timeline) and points the decoder at its process image. */
static void q_set_thread(struct ptd *d, struct ptq *q, uint64_t time)
{
	uint32_t tid = q->tid0, pid = q->pid0;
	struct proc *p;
	int th;

	if (d->per_cpu && q->cpu >= 0 && (size_t)q->cpu < d->ncpus) {
		struct cpuline *cl = &d->cpus[q->cpu];
		while (q->swi + 1 < cl->n && cl->v[q->swi + 1].time <= time)
			q->swi++;
		if (cl->n && (cl->v[q->swi].time <= time || q->swi == 0)) {
			tid = cl->v[q->swi].tid;
			pid = cl->v[q->swi].pid;
		}
	}
	th = thr_get(d, tid, pid);
	if (th < 0) {
		ptd_fail(d, PTD_ESYS, "out of memory");
		return;
	}
	q->th = th;
	pid = d->thr[th].pid;
	if (pid == UINT32_MAX)
		pid = tid;
	p = proc_get(d, pid);
	if (p && p->img != q->img) {
		q->img = p->img;
		pt_blk_set_image(q->dec, p->img);
	}
}

static int q_cpu_needs_switch(struct ptd *d, struct ptq *q, uint64_t time)
{
	struct cpuline *cl;
	if (!d->per_cpu || q->cpu < 0 || (size_t)q->cpu >= d->ncpus)
		return 0;
	cl = &d->cpus[q->cpu];
	return q->swi + 1 < cl->n && cl->v[q->swi + 1].time <= time;
}

static enum ptd_brclass classify_ip_slow(struct ptd *d, uint64_t ip, int32_t isid, uint8_t mode,
					uint8_t *size);

/* Class and length of the instruction at @ip of section @isid (cached). */
static inline enum ptd_brclass classify_ip(struct ptd *d, uint64_t ip, int32_t isid, uint8_t mode,
					   uint8_t *size)
{
	const struct ccache_ent *e = &d->cc1[(ip ^ (ip >> 11)) & (PTD_CC1 - 1)];
	if (e->valid && e->ip == ip && e->isid == isid) {
		*size = e->size;
		return (enum ptd_brclass)e->cls;
	}
	return classify_ip_slow(d, ip, isid, mode, size);
}

static enum ptd_brclass classify_ip_slow(struct ptd *d, uint64_t ip, int32_t isid, uint8_t mode,
					uint8_t *size)
{
	struct ccache_ent *e = &d->cc1[(ip ^ (ip >> 11)) & (PTD_CC1 - 1)], *e2;
	uint8_t buf[16];
	int n, bits;
	enum ptd_brclass cls;

	e2 = &d->cc[(ip ^ (ip >> 13)) & d->ccmask];
	if (e2->valid && e2->ip == ip && e2->isid == isid) {
		*e = *e2;
		*size = e->size;
		return (enum ptd_brclass)e->cls;
	}
	*size = 0;
	if (isid <= 0)
		return PTD_BR_NONE;
	if ((size_t)isid < d->nsecs && d->secs[isid].data) {
		/* pt_iscache_read without the mapping and locking */
		const struct secview *v = &d->secs[isid];
		uint64_t left;
		if (ip < v->addr || ip - v->addr >= v->size)
			return PTD_BR_NONE; /* -pte_nomap */
		left = v->size - (ip - v->addr);
		n = left < sizeof buf ? (int)left : (int)sizeof buf;
		memcpy(buf, v->data + (ip - v->addr), (size_t)n);
	} else {
		n = pt_iscache_read(d->isc, buf, sizeof buf, isid, ip);
	}
	if (n <= 0)
		return PTD_BR_NONE;
	bits = mode == ptem_64bit ? 64 : mode == ptem_32bit ? 32 : 16;
	cls = ptd_classify(buf, (size_t)n, bits, size);
	e->ip = ip;
	e->isid = isid;
	e->cls = (uint8_t)cls;
	e->size = *size;
	e->valid = 1;
	*e2 = *e;
	return cls;
}

static enum ptd_brclass classify_at(struct ptd *d, const struct pt_block *b, uint8_t *size)
{
	/* libipt already knows most classes; only a jcc (its length says
	 * whether it was taken, looked up lazily), a far transfer (syscall or
	 * not) and the unknown need a look at the bytes */
	*size = 0;
	switch (b->iclass) {
	case ptic_call:
		return PTD_BR_CALL;
	case ptic_return:
		return PTD_BR_RET;
	case ptic_jump:
		return PTD_BR_JMP;
	case ptic_other:
	case ptic_ptwrite:
		return PTD_BR_NONE;
	case ptic_cond_jump:
		if (!b->truncated)
			return PTD_BR_JCC;
		break;
	default:
		break;
	}
	if (b->truncated) {
		int bits = b->mode == ptem_64bit ? 64 : b->mode == ptem_32bit ? 32 : 16;
		return ptd_classify(b->raw, b->size, bits, size);
	}
	return classify_ip(d, b->end_ip, b->isid, (uint8_t)b->mode, size);
}

static unsigned br_type(uint8_t cls)
{
	switch (cls) {
	case PTD_BR_JCC:
		return MTEV_BR_JCC;
	case PTD_BR_CALL:
		return MTEV_BR_CALL;
	case PTD_BR_RET:
		return MTEV_BR_RETURN;
	case PTD_BR_SYSCALL:
		return MTEV_BR_SYSCALL;
	case PTD_BR_SYSRET:
		return MTEV_BR_SYSRET;
	default:
		return MTEV_BR_JUMP;
	}
}

/* The instruction after the pending branch is at @next. */
static inline void resolve(struct ptd *d, struct ptq *q, uint64_t next)
{
	struct pend *p = &q->pend;
	if (!p->valid)
		return;
	p->valid = 0;
	switch (p->cls) {
	case PTD_BR_NONE:
		return;
	case PTD_BR_JCC:
		if (!p->size) {
			/* the fall-through is 2 to 15 bytes on: anything else
			 * was taken without looking at the instruction */
			uint64_t delta = next - p->from;
			if (delta >= 2 && delta <= 15)
				classify_ip(d, p->from, p->isid, p->mode, &p->size);
		}
		if (p->size && next == p->from + p->size)
			return;
		break;
	case PTD_BR_SYSCALL:
		/* a far branch that tracing went on through (no TIP.PGD: a
		 * corrupt trace, or int1/lcall staying in user code): the
		 * thread left at the instruction and came back at @next; a
		 * syscall's to and a sysret's from are 0 (mtev-semantics) */
		emit_br(d, q, MTEV_BR_SYSCALL, p->from, 0, p->time);
		emit_br(d, q, MTEV_BR_SYSRET, 0, next, p->time);
		return;
	case PTD_BR_SYSRET:
		emit_br(d, q, MTEV_BR_SYSRET, 0, next, p->time);
		return;
	default:
		break;
	}
	emit_br(d, q, br_type(p->cls), p->from, next, p->time);
}

/* Whether what was decoded before an error of libipt's @code is kept.  A
 * missing image says nothing against the trace.  A packet that does not
 * parse (bad opcode or payload, data ending inside a packet) is reported at
 * its own first byte: every packet before it parsed and fitted the code, so
 * the branches they gave stand; corruption shows there, and libipt is
 * resynchronized at the next PSB.  An error where the trace disagrees with
 * the code (a TNT where a TIP was due, no IP, a bad return compression, an
 * instruction that cannot be decoded...) is positive evidence that an
 * earlier packet was wrong, at an unknown place since the last PSB, whose
 * PSB+ checked out: that part is retracted. */
static int err_keeps(int code)
{
	switch (code) {
	case pte_nomap:
	case pte_bad_image:
	case pte_nomem:
	case pte_bad_opc:
	case pte_bad_packet:
	case pte_eos:
		return 1;
	default:
		return 0;
	}
}

static void q_error(struct ptd *d, struct ptq *q, int err, uint64_t ip)
{
	uint64_t off = 0;
	char msg[512];
	unsigned reason = MTEV_GAP_DECODE_ERROR;
	int code = pt_errcode(err);

	pt_blk_get_offset(q->dec, &off);
	off += q->segs[q->curseg].begin;
	if (err_keeps(code))
		q_commit(q);
	else
		q_retract(d, q);
	if (code == pte_nomap) {
		const struct mapent *m = q->th >= 0 ? map_lookup(d, d->thr[q->th].pid, ip) : NULL;
		reason = MTEV_GAP_NO_IMAGE;
		if (m)
			snprintf(msg, sizeof msg, "%s: no image for %s", pt_errstr(code), m->path);
		else
			snprintf(msg, sizeof msg, "%s: no mapping at 0x%" PRIx64, pt_errstr(code),
				 ip);
	} else {
		snprintf(msg, sizeof msg, "%s", pt_errstr(code));
	}
	set_gap(d, q, reason, -code, off, ip, msg);
	q->pend.valid = 0;
	q->state = Q_SYNC;
}

/* Code that loops through direct branches only (`hlt; jmp .-1` in abort())
 * needs no packets: libipt would decode it forever from a trace that leads
 * there (a corrupt one: real hardware faults on the hlt).  No real code runs
 * this many instructions without a conditional or indirect branch, which
 * consume trace.  Checked with the PSB check, every 16 blocks (asking
 * libipt for the offset after every block cost 2% of all instructions): the
 * count starts at the first check that sees the offset where it stays, so a
 * loop is caught at most 16 blocks after it passes the limit. */
#define PTD_MAX_SPIN (1u << 17)

/* At a check (q->nblocks a multiple of 16), the decoder at @off (0 if
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

static void q_spin_error(struct ptd *d, struct ptq *q, uint64_t ip)
{
	char msg[128];
	snprintf(msg, sizeof msg, "never-ending loop: %" PRIu64 " instructions without trace packets",
		 q->spin_insns);
	q_retract(d, q); /* what it decoded since the last PSB is not trusted */
	set_gap(d, q, MTEV_GAP_DECODE_ERROR, 0, q->spin_off + q->segs[q->curseg].begin, ip, msg);
	q->spin_insns = 0;
	q->pend.valid = 0;
	q->state = Q_SYNC;
}

/* The queue's thread stopped tracing or the window ended: write what ends
 * it (semantics: trace-end from the last traced address, or 0). */
static void fin_push(struct ptd *d, const struct mtev_rec *r)
{
	if (grow(&d->fin, &d->fincap, d->nfin, sizeof *d->fin) < 0) {
		ptd_fail(d, PTD_ESYS, "out of memory");
		return;
	}
	d->fin[d->nfin++] = *r;
}

static void thr_finish(struct ptd *d, struct ptq *q, struct thr *t)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	if (t->gap_pending) {
		/* nothing good came after it: it lasts to where the
		 * thread's trace ends */
		uint64_t end = t->lastq >= 0 ? d->q[t->lastq].time : 0;
		r = t->gap;
		if (end > r.gap.end)
			r.gap.end = end;
		t->gap_pending = 0;
		d->st->gaps++;
		t->state = TS_NONE;
		goto push;
	}
	if (!t->has_rec) {
		t->state = TS_NONE;
		return;
	}
	r.kind = MTEV_BRANCH;
	r.br.tid = t->tid;
	r.br.time = t->last_time;
	r.br.type = MTEV_BR_TRACE_END;
	switch (t->state) {
	case TS_ON:
		r.br.from = t->last_ip;
		break;
	case TS_ASYNC: /* FUP + TIP.PGD and nothing after: the end */
		r.br.from = t->last_ip;
		if (t->async_time > r.br.time)
			r.br.time = t->async_time;
		break;
	case TS_SYSCALL:
		r.br.from = 0;
		break;
	default:
		return;
	}
	t->state = TS_NONE;
	d->st->branches++;
push:
	if (q) {
		struct mtev_rec *p = q_push(d, q);
		if (p)
			*p = r;
	} else {
		fin_push(d, &r);
	}
}

static void handle_event(struct ptd *d, struct ptq *q, const struct pt_event *ev)
{
	uint64_t t = q_now(d, q);
	struct thr *th;

	if (q->untimed && !q->lost_timing && ev->type != ptev_overflow)
		q->untimed = 0;
	switch (ev->type) {
	case ptev_enabled:
		q_set_thread(d, q, t);
		q->need_start = 0;
		q->pend.valid = 0;
		if (q->th < 0)
			break;
		th = &d->thr[q->th];
		if (!ev->variant.enabled.ip) {
			/* no resume address (a corrupt TIP.PGE): the next block
			 * says where tracing goes on, with a trace-start */
			if (th->state == TS_ASYNC)
				emit_br(d, q, MTEV_BR_INTERRUPT, th->last_ip, 0, th->async_time);
			q->need_start = 1;
			q->start_time = t;
			th->state = TS_ON;
			break;
		}
		if (th->state == TS_SYSCALL)
			emit_br(d, q, MTEV_BR_SYSRET, 0, ev->variant.enabled.ip, t);
		else if (th->state == TS_ASYNC) {
			emit_br(d, q, MTEV_BR_INTERRUPT, th->last_ip, 0, th->async_time);
			emit_br(d, q, MTEV_BR_IRET, 0, ev->variant.enabled.ip, t);
		} else
			emit_br(d, q, MTEV_BR_TRACE_START, 0, ev->variant.enabled.ip, t);
		th->state = TS_ON;
		th->last_ip = ev->variant.enabled.ip;
		break;
	case ptev_disabled:
		if (q->th < 0)
			break;
		th = &d->thr[q->th];
		if (q->untimed) {
			q->pend.valid = 0;
			break;
		}
		if (q->pend.valid && q->pend.cls == PTD_BR_SYSCALL) {
			q->pend.valid = 0;
			emit_br(d, q, MTEV_BR_SYSCALL, q->pend.from, 0, t);
			th->state = TS_SYSCALL;
		} else {
			uint64_t from = q->pend.valid ? q->pend.from : th->last_ip;
			if (q->pend.valid && !ev->ip_suppressed)
				resolve(d, q, ev->variant.disabled.ip);
			q->pend.valid = 0;
			th->last_ip = from;
			th->state = TS_ON;
			thr_finish(d, q, th);
			th->state = TS_NONE;
		}
		break;
	case ptev_async_disabled:
		if (q->th < 0)
			break;
		th = &d->thr[q->th];
		resolve(d, q, ev->variant.async_disabled.at);
		th->state = TS_ASYNC;
		th->last_ip = ev->variant.async_disabled.at;
		th->async_time = t;
		break;
	case ptev_async_branch:
		resolve(d, q, ev->variant.async_branch.from);
		/* left and resumed at once: an interrupt's to and an iret's
		 * from are 0 */
		emit_br(d, q, MTEV_BR_INTERRUPT, ev->variant.async_branch.from, 0, t);
		if (!ev->ip_suppressed && ev->variant.async_branch.to) {
			emit_br(d, q, MTEV_BR_IRET, 0, ev->variant.async_branch.to, t);
		} else {
			/* no resume address (a suppressed or corrupt TIP): an
			 * iret needs one (mtev-semantics); the next block says
			 * where tracing goes on, with a trace-start */
			q->need_start = 1;
			q->start_time = t;
		}
		break;
	case ptev_overflow: {
		uint64_t off = 0;
		q_commit(q); /* the hardware lost what came after, not before */
		q->pend.valid = 0;
		pt_blk_get_offset(q->dec, &off);
		off += q->segs[q->curseg].begin;
		set_gap(d, q, MTEV_GAP_OVERFLOW, 0, off, 0, "overflow");
		if (!ev->ip_suppressed) {
			q->need_start = 1;
			q->start_time = t;
		}
		/* libipt drops its cycle calibration at an overflow: CYC
		 * packets count for nothing until the next PSB+ (CBR) or TSC.
		 * The branches of that stretch are known but not when they
		 * ran, so the gap lasts until timing is exact again. */
		q->untimed = 1;
		break;
	}
	default:
		break;
	}
	if (q->untimed && q->th >= 0)
		d->thr[q->th].state = TS_GAP; /* what happened is in the gap */
}

/* The rest of a block once its pending branch is resolved and the queue's
 * time is @t: thread, trace-start, the block's own branch. */
static inline __attribute__((always_inline)) void handle_block_tail(struct ptd *d, struct ptq *q,
								    const struct pt_block *b, int ok,
								    uint64_t t)
{
	uint8_t size;
	enum ptd_brclass cls;
	struct thr *th;

	if (q_cpu_needs_switch(d, q, t))
		q_set_thread(d, q, t);
	if (q->th < 0)
		return;
	th = &d->thr[q->th];
	if (q->untimed && !q->lost_timing) {
		q->untimed = 0;
		q->need_start = 1;
		q->start_time = t;
	}
	if (q->need_start) {
		q->need_start = 0;
		emit_br(d, q, MTEV_BR_TRACE_START, 0, b->ip, q->start_time);
	}
	th->state = q->untimed ? TS_GAP : TS_ON;
	th->last_ip = b->end_ip;
	if (!ok)
		return;
	cls = classify_at(d, b, &size);
	if (cls == PTD_BR_NONE)
		return;
	q->pend.valid = 1;
	q->pend.cls = (uint8_t)cls;
	q->pend.size = size;
	q->pend.isid = b->isid;
	q->pend.mode = (uint8_t)b->mode;
	q->pend.from = b->end_ip;
	q->pend.time = t;
}

static inline __attribute__((always_inline)) void handle_block(struct ptd *d, struct ptq *q,
							       const struct pt_block *b, int ok)
{
	uint64_t t;

	if (q->pend.valid)
		resolve(d, q, b->ip);
	if (!b->ninsn)
		return;
	q->nblocks++;
	q->ninsns += b->ninsn;
	t = q_now(d, q);
	handle_block_tail(d, q, b, ok, t);
}

/* Whether q_fast may run the queue: its thread is known and announced, no
 * gap waits to be closed, timing is exact and no trace-start is owed. */
static inline int q_fast_ok(const struct ptd *d, const struct ptq *q)
{
	const struct thr *t;
	if (q->th < 0 || q->untimed || q->need_start)
		return 0;
	t = &d->thr[q->th];
	return t->announced && !t->gap_pending;
}

enum { QF_EXIT, QF_CHECKS };

/* The hot loop in the steady state (q_fast_ok): the same as pt_blk_next +
 * handle_block + the checks of q_step's loop, with the per-block and
 * per-branch bookkeeping (time, counters, the thread's last ip and last
 * record) kept in locals and written back before anything else can look at
 * them.  Returns QF_EXIT when q_step's loop must end (*stp: the last status,
 * negative for pt_blk_next's error, *b the block), QF_CHECKS when a block
 * needed the general path: it has been handled (a cpu switch), q_step does
 * its checks. */
static int q_fast(struct ptd *d, struct ptq *q, uint64_t limit, struct pt_block *b, int *stp)
{
	struct pt_block_decoder *dec = q->dec;
	struct thr *th = &d->thr[q->th];
	struct pend *p = &q->pend;
	const uint32_t tid = th->tid;
	uint64_t now = q->time, last_tsc = q->last_tsc;
	uint64_t nblocks = q->nblocks, ninsns = q->ninsns;
	uint64_t spin_off = q->spin_off, spin_insns = q->spin_insns, spin_mark = q->spin_mark;
	uint32_t lost = q->lost_timing;
	uint64_t last_ip = 0, br_time = 0, nbr = 0, stop, sw_next = UINT64_MAX;
	int touched = 0, full = 0, st, ret = QF_EXIT;

	/* leave at the time limit or when sideband is due */
	stop = d->sb_apply < d->nsb ? d->sb[d->sb_apply].time : UINT64_MAX;
	if (limit < stop)
		stop = limit + 1; /* limit < UINT64_MAX here */
	if (d->per_cpu && q->cpu >= 0 && (size_t)q->cpu < d->ncpus) {
		const struct cpuline *cl = &d->cpus[q->cpu];
		if (q->swi + 1 < cl->n)
			sw_next = cl->v[q->swi + 1].time;
	}

#define QF_FLUSH_THREAD()                                                                          \
	do {                                                                                       \
		if (nbr) {                                                                         \
			th->last_time = br_time;                                                   \
			th->has_rec = 1;                                                           \
			th->lastq = (int)(q - d->q);                                               \
			d->st->branches += nbr;                                                    \
			nbr = 0;                                                                   \
		}                                                                                  \
		if (touched) {                                                                     \
			th->state = TS_ON;                                                         \
			th->last_ip = last_ip;                                                     \
			touched = 0;                                                               \
		}                                                                                  \
	} while (0)
#define QF_FLUSH()                                                                                 \
	do {                                                                                       \
		QF_FLUSH_THREAD();                                                                 \
		q->time = now;                                                                     \
		q->last_tsc = last_tsc;                                                            \
		q->lost_timing = lost;                                                             \
		q->nblocks = nblocks;                                                              \
		q->ninsns = ninsns;                                                                \
		q->spin_off = spin_off;                                                            \
		q->spin_insns = spin_insns;                                                        \
		q->spin_mark = spin_mark;                                                          \
	} while (0)

	for (;;) {
		uint64_t off, tsc;
		uint32_t lm, lc;
		uint8_t size;
		enum ptd_brclass cls;

		st = pt_blk_next(dec, b, sizeof *b);
		if (st < 0)
			break;
		q->status = st;
		if (p->valid) {
			/* resolve(): the instruction after the pending branch
			 * is at b->ip */
			uint64_t next = b->ip;
			unsigned type;
			struct mtev_rec *r;
			/* most pending branches are jcc, then calls and returns */
			if (p->cls == PTD_BR_JCC) {
				if (!p->size) {
					uint64_t delta = next - p->from;
					if (delta >= 2 && delta <= 15)
						classify_ip(d, p->from, p->isid, p->mode, &p->size);
				}
				if (p->size && next == p->from + p->size) {
					p->valid = 0;
					goto resolved;
				}
				type = MTEV_BR_JCC;
			} else if (p->cls == PTD_BR_CALL) {
				type = MTEV_BR_CALL;
			} else if (p->cls == PTD_BR_RET) {
				type = MTEV_BR_RETURN;
			} else if (p->cls == PTD_BR_JMP || p->cls == PTD_BR_FARJMP) {
				type = MTEV_BR_JUMP;
			} else {
				/* far transfers: the general path (which
				 * writes the thread's last record itself) */
				QF_FLUSH_THREAD();
				resolve(d, q, next);
				full |= d->err != 0;
				goto resolved;
			}
			p->valid = 0;
			r = q_push(d, q);
			if (r) {
				r->kind = MTEV_BRANCH;
				r->br.tid = tid;
				r->br.time = p->time;
				r->br.type = type;
				r->br.from = p->from;
				r->br.to = next;
				br_time = p->time;
				nbr++;
			} else {
				full = 1; /* out of memory: d->err is set */
			}
		}
	resolved:
		if (b->ninsn) {
			nblocks++;
			ninsns += b->ninsn;
			if (pt_blk_time(dec, &tsc, &lm, &lc) >= 0) {
				/* q_now() */
				if (tsc != last_tsc) {
					uint64_t t = ptd_conv(d, tsc);
					last_tsc = tsc;
					if (t > now)
						now = t;
				}
				lost = lm + lc;
			}
			if (now >= sw_next) {
				/* the cpu switches threads: the general path */
				QF_FLUSH();
				handle_block_tail(d, q, b, 1, now);
				ret = QF_CHECKS;
				goto out;
			}
			last_ip = b->end_ip;
			touched = 1;
			switch (b->iclass) { /* classify_at() */
			case ptic_call:
				cls = PTD_BR_CALL;
				size = 0;
				break;
			case ptic_return:
				cls = PTD_BR_RET;
				size = 0;
				break;
			case ptic_jump:
				cls = PTD_BR_JMP;
				size = 0;
				break;
			case ptic_cond_jump:
				if (!b->truncated) {
					cls = PTD_BR_JCC;
					size = 0;
					break;
				}
				/* fallthrough */
			default:
				cls = classify_at(d, b, &size);
				break;
			}
			if (cls != PTD_BR_NONE) {
				p->valid = 1;
				p->cls = (uint8_t)cls;
				p->size = size;
				p->isid = b->isid;
				p->mode = (uint8_t)b->mode;
				p->from = b->end_ip;
				p->time = now;
			}
		}
		/* q_step's checks: every 16 blocks a PSB passed and
		 * spinning; a full batch, the time limit, sideband due */
		if (!(nblocks & 15)) {
			off = 0;
			if (pt_blk_get_offset(dec, &off) >= 0 && q->psbi < q->npsbs &&
			    off > q->psbs[q->psbi]) {
				while (q->psbi < q->npsbs && off > q->psbs[q->psbi])
					q->psbi++;
				q_commit(q);
				full |= q->nready >= 256;
			}
			if (q_spin_check(off, ninsns, &spin_off, &spin_mark, &spin_insns)) {
				QF_FLUSH();
				q_spin_error(d, q, b->end_ip);
				goto out;
			}
		}
		if ((st & pts_event_pending) || full || now >= stop)
			break;
	}
	QF_FLUSH();
out:
	*stp = st;
	return ret;
#undef QF_FLUSH
#undef QF_FLUSH_THREAD
}

static int q_open_seg(struct ptd *d, struct ptq *q);

/* Runs the queue until it has output or is done. */
/* Runs the queue until it has a batch of output, its time passes @limit,
 * or it is done. */
static void q_step(struct ptd *d, struct ptq *q, uint64_t limit)
{
	struct pt_block blk;
	struct pt_event ev;
	int st;

	while (q->nready < 256 && q->state != Q_DONE && !d->err &&
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
			if (q_open_seg(d, q) < 0)
				return;
			q->state = Q_SYNC;
			break;
		case Q_SYNC:
			st = pt_blk_sync_forward(q->dec);
			if (st < 0 && st != -pte_eos) {
				/* a broken PSB+: report it and look further on; the
				 * offset check guarantees progress */
				uint64_t off = 0;
				pt_blk_get_offset(q->dec, &off);
				if (!q->synced_once || off > q->last_sync_off) {
					q->synced_once = 1;
					q->last_sync_off = off;
					q_error(d, q, st, 0);
					break;
				}
			}
			if (st < 0) {
				/* end of segment */
				q_commit(q);
				if (q->curseg + 1 < q->nsegs && q->segs[q->curseg + 1].lost_before) {
					/* data lost here: a gap, tracing resumes at
					 * the next segment's first PSB */
					const struct seg *n = &q->segs[q->curseg + 1];
					char m[128];
					snprintf(m, sizeof m,
						 "trace data lost (AUX offset %" PRIu64 ")",
						 n->lost_at);
					if (q->th >= 0)
						set_gap(d, q, MTEV_GAP_LOST, 0, n->begin,
							d->thr[q->th].last_ip, m);
					q->pend.valid = 0;
				} else if (q->curseg + 1 < q->nsegs) {
					/* the end of a snapshot window */
					size_t k;
					for (k = 0; k < d->nthr; k++)
						if (d->thr[k].lastq == (int)(q - d->q))
							thr_finish(d, q, &d->thr[k]);
				}
				pt_blk_free_decoder(q->dec);
				q->dec = NULL;
				q->img = NULL;
				q->curseg++;
				q->state = Q_SEG;
				break;
			}
			q->status = st;
			q->pend.valid = 0;
			q->need_start = 1;
			q->start_time = q_now(d, q);
			{
				/* libipt may already have looked at code while
				 * syncing: with this time's images and thread in
				 * place, sync again at the same PSB */
				size_t before = d->sb_apply;
				struct pt_image *img = q->img;
				uint64_t soff;
				sb_apply_until(d, q->time);
				q_set_thread(d, q, q->start_time);
				if ((before != d->sb_apply || img != q->img) &&
				    pt_blk_get_sync_offset(q->dec, &soff) >= 0) {
					st = pt_blk_sync_set(q->dec, soff);
					if (st < 0)
						break; /* next round: sync_forward */
					q->status = st;
				}
			}
			q->state = Q_RUN;
			break;
		case Q_RUN:
			if (q->status & pts_event_pending) {
				st = pt_blk_event(q->dec, &ev, sizeof ev);
				if (st < 0) {
					q_error(d, q, st, q->pend.valid ? q->pend.from : 0);
					break;
				}
				q->status = st;
				handle_event(d, q, &ev);
				break;
			}
			/* the hot loop: blocks until an event, an error, a full
			 * batch, the time limit or sideband to apply */
			for (;;) {
				if (q_fast_ok(d, q)) {
					if (q_fast(d, q, limit, &blk, &st) == QF_EXIT)
						break;
					goto checks;
				}
				st = pt_blk_next(q->dec, &blk, sizeof blk);
				if (st < 0)
					break;
				q->status = st;
				handle_block(d, q, &blk, 1);
			checks:
				if (!(q->nblocks & 15)) {
					/* checked every 16 blocks: a commit a few
					 * blocks late is as good */
					uint64_t off = 0;
					if (pt_blk_get_offset(q->dec, &off) >= 0 && q->psbi < q->npsbs &&
					    off > q->psbs[q->psbi]) {
						while (q->psbi < q->npsbs && off > q->psbs[q->psbi])
							q->psbi++;
						q_commit(q);
					}
					if (q_spin_check(off, q->ninsns, &q->spin_off, &q->spin_mark,
							 &q->spin_insns)) {
						q_spin_error(d, q, blk.end_ip);
						break;
					}
				}
				if ((st & pts_event_pending) || q->nready >= 256 || q->time > limit ||
				    (d->sb_apply < d->nsb && d->sb[d->sb_apply].time <= q->time) ||
				    q->state != Q_RUN || d->err)
					break;
			}
			if (st >= 0)
				break;
			if (st < 0) {
				handle_block(d, q, &blk, 0);
				if (st == -pte_eos) {
					q_commit(q);
					q->state = Q_SYNC; /* sync_forward will say eos */
					if (q->th >= 0 && q->pend.valid) {
						/* tracing ran to the end of the data */
						q->pend.valid = 0;
					}
					break;
				}
				q_error(d, q, st, blk.ninsn ? blk.end_ip : blk.ip);
				break;
			}
			break;
		default:
			q->state = Q_DONE;
		}
	}
}

/* The first PSB (@psb, 16 bytes) in [p, e): what memmem finds, faster (a
 * PSB is 02 82 repeated: every one has an 0x82 second byte, and memchr
 * skips to those). */
static const uint8_t *find_psb(const uint8_t *p, const uint8_t *e, const uint8_t *psb)
{
	while (e - p >= 16) {
		const uint8_t *x = memchr(p + 1, 0x82, (size_t)(e - p - 1));
		if (!x || e - (x - 1) < 16)
			return NULL;
		if (!memcmp(x - 1, psb, 16))
			return x - 1;
		p = x;
	}
	return NULL;
}

static int q_open_seg(struct ptd *d, struct ptq *q)
{
	struct pt_config cfg;
	const struct seg *s = &q->segs[q->curseg];

	pt_config_init(&cfg);
	cfg.begin = q->stream + s->begin;
	cfg.end = q->stream + s->end;
	if (d->opts->cpu_family) {
		cfg.cpu.vendor = pcv_intel;
		cfg.cpu.family = (uint16_t)d->opts->cpu_family;
		cfg.cpu.model = (uint8_t)d->opts->cpu_model;
		cfg.cpu.stepping = (uint8_t)d->opts->cpu_stepping;
	} else if (!strncmp(d->cpuid, "GenuineIntel,", 13)) {
		unsigned fam = 0, mod = 0, step = 0;
		if (sscanf(d->cpuid + 13, "%u,%u,%u", &fam, &mod, &step) >= 2) {
			cfg.cpu.vendor = pcv_intel;
			cfg.cpu.family = (uint16_t)fam;
			cfg.cpu.model = (uint8_t)mod;
			cfg.cpu.stepping = (uint8_t)step;
		}
	}
	if (cfg.cpu.vendor == pcv_intel && pt_cpu_errata(&cfg.errata, &cfg.cpu) < 0)
		memset(&cfg.errata, 0, sizeof cfg.errata);
	if (d->have_info && d->npriv > 15) {
		uint64_t mtc_bits = d->priv[11];
		uint64_t config = d->pt_attr ? d->pt_attr->config : 0;
		if (mtc_bits) {
			unsigned shift = (unsigned)__builtin_ctzll(mtc_bits);
			cfg.mtc_freq = (uint8_t)((config & mtc_bits) >> shift);
		}
		cfg.cpuid_0x15_ebx = (uint32_t)d->priv[12];
		cfg.cpuid_0x15_eax = (uint32_t)d->priv[13];
		cfg.nom_freq = (uint8_t)d->priv[15];
	}
	cfg.flags.variant.block.end_on_call = 1;
	cfg.flags.variant.block.end_on_jump = 1;
	q->dec = pt_blk_alloc_decoder(&cfg);
	if (!q->dec)
		return ptd_fail(d, PTD_ESYS, "cannot allocate a PT decoder");
	{
		/* where the PSBs are: passing one confirms what came before */
		static const uint8_t psb[16] = {2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
						2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82};
		const uint8_t *p = cfg.begin, *e = cfg.end;
		size_t cap = 0;
		free(q->psbs);
		q->psbs = NULL;
		q->npsbs = q->psbi = 0;
		while (e - p >= 16 && (p = find_psb(p, e, psb)) != NULL) {
			if (grow(&q->psbs, &cap, q->npsbs, sizeof *q->psbs) < 0)
				return ptd_fail(d, PTD_ESYS, "out of memory");
			q->psbs[q->npsbs++] = (uint64_t)(p - cfg.begin);
			p += 16;
		}
		if (!q->psbs) {
			/* no PSB at all: nothing will decode; keep the
			 * retraction machinery on anyway */
			q->psbs = malloc(sizeof *q->psbs);
			if (!q->psbs)
				return ptd_fail(d, PTD_ESYS, "out of memory");
		}
	}
	q->img = NULL;
	q->swi = 0;
	return 0;
}

/* ------------------------------------------------------------------ */
/* output merge                                                        */

static int write_rec(struct ptd *d, const struct mtev_rec *r)
{
	int e;
	if (d->per_cpu && (r->kind == MTEV_BRANCH || r->kind == MTEV_GAP)) {
		/* threads move between cpus: keep each one's records sorted
		 * even where the queues' clocks disagree */
		uint32_t tid = r->kind == MTEV_BRANCH ? r->br.tid : r->gap.tid;
		int th = thr_get(d, tid, UINT32_MAX);
		if (th >= 0) {
			struct thr *t = &d->thr[th];
			uint64_t tm = r->kind == MTEV_BRANCH ? r->br.time : r->gap.begin;
			if (tm < t->out_time) {
				struct mtev_rec c = *r;
				if (c.kind == MTEV_BRANCH)
					c.br.time = t->out_time;
				else {
					c.gap.begin = t->out_time;
					if (c.gap.end < c.gap.begin)
						c.gap.end = c.gap.begin;
				}
				e = mtev_write(d->w, &c);
				goto done;
			}
			t->out_time = r->kind == MTEV_BRANCH ? tm : r->gap.end;
		}
	}
	e = mtev_write(d->w, r);
done:
	if (e < 0)
		return ptd_fail(d, PTD_EOUTPUT, "writing MTEV: %s", mtev_strerror(e));
	return 0;
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

/* Sideband record @i as MTEV (0: nothing to write). */
/* Sampling recordings (no trace, no images loaded): each process's
 * executable maps as of the record being written, for smap_chain_end(). */
static void smap_apply(struct ptd *d, const struct sb *s)
{
	struct proc *p;
	if (s->pid == UINT32_MAX)
		return;
	if (s->kind == SB_MMAP && (s->mmap.prot & PROT_X) && (p = proc_get(d, s->pid))) {
		struct mapent me = {s->mmap.addr, s->mmap.addr + s->mmap.len, NULL, 0};
		map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
	} else if (s->kind == SB_COMM && s->comm.exec && (p = proc_get(d, s->pid))) {
		p->nmaps = 0;
	} else if (s->kind == SB_FORK) {
		proc_fork(d, s->pid, s->fork.ppid);
	}
}

/* A callchain's return addresses (all but the leaf) must be in executable
 * code: the frame-pointer walk through code without frame pointers goes on
 * with whatever rbp points at (stack or data words).  Returns how many
 * entries are a real stack (all of them when the process's maps are not
 * known). */
static uint32_t smap_chain_end(struct ptd *d, uint32_t pid, const uint64_t *ips, uint32_t n)
{
	const struct proc *p = NULL;
	uint32_t k;
	size_t i;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == pid)
			p = &d->proc[i];
	if (!p || !p->nmaps)
		return n;
	/* the kernel's frames (innermost, first) and the user leaf are kept */
	for (k = 0; k < n && ips[k] >> 63; k++)
		;
	for (k++; k < n; k++) {
		for (i = 0; i < p->nmaps; i++)
			if (p->maps[i].start <= ips[k] && ips[k] < p->maps[i].end)
				break;
		if (i == p->nmaps)
			return k;
	}
	return n;
}

/* Sampling: the executable maps of each process as sideband records, so
 * that a forked child gets its parent's (the kernel writes no MMAP record
 * for inherited maps). */
static void sb_note_map(struct ptd *d, const struct sb *s)
{
	struct proc *p;
	if (d->nq || d->have_info || s->pid == UINT32_MAX || !(p = proc_get(d, s->pid)))
		return;
	if (grow(&p->sbmaps, &p->sbmapcap, p->nsbmaps, sizeof *p->sbmaps) < 0)
		return;
	p->sbmaps[p->nsbmaps++] = *s;
}

static void map_rec(struct ptd *d, const struct sb *s, struct mtev_rec *r);

/* The parent's maps, again as the child's, at the fork's time. */
static int sb_fork_maps(struct ptd *d, uint32_t pid, uint32_t ppid, uint64_t time)
{
	struct proc *c = proc_get(d, pid), *pp = NULL;
	size_t i, k;
	if (!c)
		return 0;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == ppid)
			pp = &d->proc[i];
	if (!pp || pp == c)
		return 0;
	c = proc_get(d, pid);
	c->nsbmaps = 0;
	for (k = 0; k < pp->nsbmaps; k++) {
		struct sb m = pp->sbmaps[k];
		struct mtev_rec r;
		m.pid = m.tid = pid;
		m.time = time;
		if (grow(&c->sbmaps, &c->sbmapcap, c->nsbmaps, sizeof *c->sbmaps) < 0)
			return -1;
		c->sbmaps[c->nsbmaps++] = m;
		map_rec(d, &m, &r);
		if (write_rec(d, &r) < 0)
			return -1;
	}
	return 0;
}

/* Sampling: a FORK record (kept by the never-overwritten tracking ring) is
 * where a thread or process begins: its record, named as its parent is
 * until a COMM record renames it. */
static int sb_fork_rec(struct ptd *d, const struct sb *s, struct mtev_rec *r, struct mtev_rec *r2)
{
	int n = 0, th;
	size_t i;
	if (d->nq || d->have_info || s->pid == UINT32_MAX)
		return 0;
	th = thr_get(d, s->tid, s->pid);
	if (th < 0 || d->thr[th].announced)
		return 0;
	d->thr[th].announced = 1;
	const char *name = "";
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == s->fork.ppid && d->proc[i].name)
			name = d->proc[i].name;
	if (s->pid != s->fork.ppid) { /* a new process */
		struct proc *cp = proc_get(d, s->pid);
		if (cp && *name)
			cp->name = name;
		if (sb_fork_maps(d, s->pid, s->fork.ppid, s->time) < 0)
			return 0;
		r->kind = MTEV_PROCESS;
		r->process.pid = s->pid;
		r->process.name = mtev_cstr(name);
		r = r2;
		n = 1;
	}
	r->kind = MTEV_THREAD;
	r->thread.pid = s->pid;
	r->thread.tid = s->tid;
	r->thread.time = s->time;
	r->thread.name = mtev_cstr(name);
	return n + 1;
}

static void map_rec(struct ptd *d, const struct sb *s, struct mtev_rec *r)
{
	memset(r, 0, sizeof *r);
	r->kind = MTEV_MAP;
	r->map.pid = s->pid;
	r->map.time = s->time;
	r->map.start = s->mmap.addr;
	r->map.len = s->mmap.len;
	r->map.pgoff = s->mmap.pgoff;
	r->map.prot = s->mmap.prot;
	r->map.path = mtev_cstr(s->mmap.path);
	if (s->mmap.bidlen) {
		r->map.build_id_len = s->mmap.bidlen;
		r->map.build_id = s->mmap.bid;
	} else {
		const struct pd_buildid *b = bid_for_path(d, s->mmap.path);
		if (b) {
			r->map.build_id_len = b->len;
			r->map.build_id = b->id;
		}
	}
}

/* --call-graph dwarf: the unwinder learns the maps in time order ... */
static void unw_note(struct ptd *d, const struct sb *s)
{
	if (s->kind == SB_MMAP && (s->mmap.prot & PROT_X)) {
		const uint8_t *bid = s->mmap.bid;
		uint8_t bidlen = s->mmap.bidlen;
		const char *why;
		if (!bidlen) {
			const struct pd_buildid *b = bid_for_path(d, s->mmap.path);
			if (b)
				bid = b->id, bidlen = b->len;
		}
		unw_map(d->unw, s->pid, s->mmap.addr, s->mmap.len, s->mmap.pgoff,
			find_image(d, s->mmap.path, bid, bidlen, &why));
	} else if (s->kind == SB_COMM && s->comm.exec) {
		unw_exec(d->unw, s->pid);
	} else if (s->kind == SB_FORK) {
		unw_fork(d->unw, s->pid, s->fork.ppid);
	}
}

/* ... and unwinds each sample's stack copy with them: its chain replaces
 * the one perf recorded (the ip alone, in dwarf mode) when longer. */
static void unw_chain(struct ptd *d, const struct sb *s, struct mtev_rec *r)
{
	const uint8_t *u = d->ustk + s->sample.ustk - 1;
	uint64_t have, len, regs[UNW_NREGS];
	memcpy(&have, u, 8);
	memcpy(regs, u + 8, sizeof regs);
	memcpy(&len, u + 8 + sizeof regs, 8);
	if (grow(&d->ips, &d->ipscap, d->nips + 512 + 128, sizeof *d->ips) < 0)
		return;
	r->sample.ips = d->ips + s->sample.ips; /* the arena may have moved */
	/* --kernel: the kernel's frames (innermost first) stay before the
	 * unwound user stack */
	uint32_t nk = 0;
	while (nk < r->sample.nips && nk < 128 && r->sample.ips[nk] >> 63)
		nk++;
	memcpy(d->ips + d->nips, r->sample.ips, nk * sizeof *d->ips);
	size_t n = unw_sample(d->unw, s->pid, s->tid, regs, have, u + 16 + sizeof regs, len,
			      d->ips + d->nips + nk, 512);
	if (nk + n > r->sample.nips) {
		r->sample.ips = d->ips + d->nips;
		r->sample.nips = (uint32_t)(nk + n);
		d->st->unwound++;
	}
}

static int sb_to_rec(struct ptd *d, const struct sb *s, struct mtev_rec *r, struct mtev_rec *r2)
{
	int n = 0;
	memset(r, 0, sizeof *r);
	memset(r2, 0, sizeof *r2);
	if (!d->nq && !d->have_info) {
		smap_apply(d, s);
		if (d->unw || (d->unw = unw_new()))
			unw_note(d, s);
	}
	switch (s->kind) {
	case SB_MMAP:
		if (!(s->mmap.prot & PROT_X))
			return 0;
		sb_note_map(d, s);
		map_rec(d, s, r);
		return 1;
	case SB_COMM: {
		int th = thr_get(d, s->tid, s->pid);
		struct proc *cp;
		if ((s->pid == s->tid || s->comm.exec) && (cp = proc_get(d, s->pid))) {
			cp->name = s->comm.name;
			if (s->comm.exec)
				cp->nsbmaps = 0;
		}
		if (th >= 0)
			d->thr[th].announced = 1;
		if (s->pid == s->tid || s->comm.exec) {
			r->kind = MTEV_PROCESS;
			r->process.pid = s->pid;
			r->process.name = mtev_cstr(s->comm.name);
			n = 1;
		}
		{
			struct mtev_rec *t = n ? r2 : r;
			t->kind = MTEV_THREAD;
			t->thread.pid = s->pid;
			t->thread.tid = s->tid;
			t->thread.time = s->time;
			t->thread.name = mtev_cstr(s->comm.name);
			(void)th;
			n++;
		}
		return n;
	}
	case SB_FORK:
		return sb_fork_rec(d, s, r, r2);
	case SB_SAMPLE:
		if (!d->nq && !d->have_info) {
			/* a thread known only by its samples (its fork and comm
			 * were before the recording, or lost): its record first, so
			 * it is a thread of its process */
			int th = thr_get(d, s->tid, s->pid);
			if (th >= 0 && !d->thr[th].announced) {
				d->thr[th].announced = 1;
				r->kind = MTEV_THREAD;
				r->thread.pid = s->pid;
				r->thread.tid = s->tid;
				r->thread.time = s->time;
				r = r2;
				n = 1;
			}
		}
		r->kind = MTEV_SAMPLE;
		r->sample.pid = s->pid;
		r->sample.tid = s->tid;
		r->sample.time = s->time;
		r->sample.ips = d->ips + s->sample.ips;
		r->sample.nips = s->sample.nips;
		if (s->sample.ustk && d->unw)
			unw_chain(d, s, r);
		r->sample.nips = smap_chain_end(d, s->pid, r->sample.ips, r->sample.nips);
		{
			/* kernel frames only go under a user frame: a chain
			 * left with none says nothing of the user stack */
			uint32_t k = 0;
			while (k < r->sample.nips && r->sample.ips[k] >> 63)
				k++;
			if (k == r->sample.nips)
				return n;
		}
		d->st->samples++;
		return n + 1;
	case SB_TRIGGER:
		r->kind = MTEV_TRIGGER;
		r->trigger.pid = s->pid;
		r->trigger.tid = s->tid;
		r->trigger.time = s->time;
		r->trigger.addr = s->trig.addr;
		r->trigger.arg0 = s->trig.arg0;
		r->trigger.arg1 = s->trig.arg1;
		r->trigger.symbol = mtev_cstr(s->trig.sym);
		d->st->triggers++;
		return 1;
	default:
		return 0;
	}
}

/* Writes records (queue heads and sideband) with time <= @safe, earliest
 * first. */
static int emit_upto(struct ptd *d, uint64_t safe)
{
	for (;;) {
		int best = -1; /* -1: sideband */
		uint64_t bt = UINT64_MAX;
		int have = 0;
		size_t i;

		if (d->sb_emit < d->nsb && d->sb[d->sb_emit].time <= safe) {
			bt = d->sb[d->sb_emit].time;
			have = 1;
		}
		for (i = 0; i < d->nq; i++) {
			struct ptq *q = &d->q[i];
			uint64_t t;
			if (!q->nready)
				continue;
			t = rec_time(&q->fifo[q->fhead]);
			if (t <= safe && (!have || t < bt)) {
				bt = t;
				best = (int)i;
				have = 1;
			}
		}
		if (!have)
			return 0;
		if (best < 0) {
			struct mtev_rec r, r2;
			int n = sb_to_rec(d, &d->sb[d->sb_emit], &r, &r2);
			d->sb_emit++;
			if (n > 0 && write_rec(d, &r) < 0)
				return d->err;
			if (n > 1 && write_rec(d, &r2) < 0)
				return d->err;
			continue;
		}
		{
			/* drain this queue while it stays the earliest */
			struct ptq *q = &d->q[best];
			uint64_t limit = safe;
			if (d->sb_emit < d->nsb && d->sb[d->sb_emit].time < limit)
				limit = d->sb[d->sb_emit].time;
			for (i = 0; i < d->nq; i++)
				if ((int)i != best && d->q[i].nready) {
					uint64_t t = rec_time(&d->q[i].fifo[d->q[i].fhead]);
					if (t < limit)
						limit = t;
				}
			if (d->per_cpu) {
				do {
					if (write_rec(d, &q->fifo[q->fhead]) < 0)
						return d->err;
					q->fhead = (q->fhead + 1) & (q->fcap - 1);
					q->fcount--;
					q->nready--;
				} while (q->nready && rec_time(&q->fifo[q->fhead]) <= limit);
			} else {
				/* the common case, with the ring in locals */
				const struct mtev_rec *fifo = q->fifo, *end = fifo + q->fcap;
				const struct mtev_rec *r = fifo + q->fhead;
				mtev_writer *w = d->w;
				size_t n = q->nready, k = 0, head;
				int e;
				for (;;) {
					e = mtev_write(w, r);
					if (e < 0)
						break;
					k++;
					if (++r == end)
						r = fifo;
					if (k == n ||
					    (r->kind == MTEV_BRANCH ? r->br.time : rec_time(r)) > limit)
						break;
				}
				head = (size_t)(r - fifo);
				q->fhead = head;
				q->fcount -= k;
				q->nready -= k;
				if (e < 0)
					return ptd_fail(d, PTD_EOUTPUT, "writing MTEV: %s",
							mtev_strerror(e));
			}
		}
	}
}

/* Decodes all queues in time order: the queue furthest behind runs until it
 * passes the next one, so every thread's state changes in time order even
 * when it moves between cpus; what is older than every queue's position is
 * written. */
static int merge(struct ptd *d)
{
	size_t i;
	for (;;) {
		struct ptq *run = NULL;
		uint64_t t1 = UINT64_MAX, t2 = UINT64_MAX;
		for (i = 0; i < d->nq; i++) {
			struct ptq *q = &d->q[i];
			if (q->state == Q_DONE)
				continue;
			if (!run || q->time < t1) {
				t2 = t1;
				t1 = q->time;
				run = q;
			} else if (q->time < t2) {
				t2 = q->time;
			}
		}
		if (!run)
			break;
		q_step(d, run, t2);
		if (d->err)
			return d->err;
		/* everything older than the slowest live queue is final */
		t1 = UINT64_MAX;
		for (i = 0; i < d->nq; i++)
			if (d->q[i].state != Q_DONE && d->q[i].time < t1)
				t1 = d->q[i].time;
		if (t1 > 0 && emit_upto(d, t1 == UINT64_MAX ? t1 : t1 - 1) < 0)
			return d->err;
		/* a full batch must go out even at equal times */
		if (run->nready >= 256 && emit_upto(d, run->time) < 0)
			return d->err;
	}
	for (i = 0; i < d->nq; i++)
		q_commit(&d->q[i]);
	if (emit_upto(d, UINT64_MAX) < 0)
		return d->err;
	if (d->nkmissing)
		ptd_warn(d, "%u kernel image%s (%s%s) not found; kernel code will be gaps", d->nkmissing,
			 d->nkmissing > 1 ? "s" : "", d->kmissing_first, d->nkmissing > 1 ? ", ..." : "");
	/* threads still open at the end of all data */
	for (i = 0; i < d->nthr; i++)
		thr_finish(d, NULL, &d->thr[i]);
	for (i = 0; i < d->nfin; i++)
		if (write_rec(d, &d->fin[i]) < 0)
			return d->err;
	return 0;
}

/* ------------------------------------------------------------------ */
/* reading perf.data                                                   */

static int sb_add(struct ptd *d, const struct sb *s)
{
	if (grow(&d->sb, &d->sbcap, d->nsb, sizeof *d->sb) < 0)
		return ptd_fail(d, PTD_ESYS, "out of memory");
	d->sb[d->nsb] = *s;
	d->sb[d->nsb].seq = d->seq++;
	d->nsb++;
	return 0;
}

static int sw_add(struct ptd *d, uint32_t cpu, uint64_t time, uint32_t pid, uint32_t tid)
{
	struct cpuline *cl;
	if (cpu >= 4096)
		return 0;
	if (cpu >= d->ncpus) {
		struct cpuline *nc = realloc(d->cpus, (cpu + 1) * sizeof *nc);
		if (!nc)
			return ptd_fail(d, PTD_ESYS, "out of memory");
		memset(nc + d->ncpus, 0, (cpu + 1 - d->ncpus) * sizeof *nc);
		d->cpus = nc;
		d->ncpus = cpu + 1;
	}
	cl = &d->cpus[cpu];
	if (grow(&cl->v, &cl->cap, cl->n, sizeof *cl->v) < 0)
		return ptd_fail(d, PTD_ESYS, "out of memory");
	cl->v[cl->n].time = time;
	cl->v[cl->n].pid = pid;
	cl->v[cl->n].tid = tid;
	cl->v[cl->n].seq = d->seq++;
	cl->n++;
	return 0;
}

static struct ptq *q_get(struct ptd *d, uint32_t idx)
{
	size_t i;
	for (i = 0; i < d->nq; i++)
		if (d->q[i].idx == idx)
			return &d->q[i];
	{
		struct ptq *nq = realloc(d->q, (d->nq + 1) * sizeof *nq);
		if (!nq)
			return NULL;
		d->q = nq;
		memset(&d->q[d->nq], 0, sizeof d->q[0]);
		d->q[d->nq].idx = idx;
		d->q[d->nq].th = -1;
		d->q[d->nq].cpu = -1;
		return &d->q[d->nq++];
	}
}

static int sb_cmp(const void *a, const void *b)
{
	const struct sb *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int sw_cmp(const void *a, const void *b)
{
	const struct sw *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int qbuf_cmp(const void *a, const void *b)
{
	const struct qbuf *x = a, *y = b;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->file_off < y->file_off ? -1 : x->file_off > y->file_off;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Builds each queue's stream: buffers in offset order; an overlap that is
 * the previous buffer's zero padding (perf pads AUXTRACE to 8 bytes but
 * counts offsets unpadded) is trimmed, an overlap that repeats data (the
 * next snapshot) is skipped; a hole starts a new segment, and so does every
 * place an AUX record flags as truncated (data lost there). */
static int q_build(struct ptd *d, struct ptq *q)
{
	uint64_t total = 0, end_off = 0, pos = 0;
	uint64_t *bpos; /* stream position of each buffer's offset */
	size_t i, k, cap;

	if (q->nbufs > 1) /* qsort(NULL, 0) is undefined */
		qsort(q->bufs, q->nbufs, sizeof *q->bufs, qbuf_cmp);
	for (i = 0; i < q->nbufs; i++)
		total += q->bufs[i].size;
	cap = q->nbufs + d->nauxlost + 1;
	if (q->nbufs == 1 && !(q->bufs[0].file_off >> 63)) {
		/* one buffer in the mapped file: decode it in place */
		q->segs = calloc(cap, sizeof *q->segs);
		if (!q->segs)
			return ptd_fail(d, PTD_ESYS, "out of memory");
		q->stream = (uint8_t *)(uintptr_t)q->bufs[0].data;
		q->len = q->bufs[0].size;
		q->segs[0].end = q->len;
		q->nsegs = 1;
		bpos = NULL;
		pos = q->len;
		goto lost;
	}
	q->stream_owned = 1;
	q->stream = malloc(total ? total : 1);
	q->segs = calloc(cap, sizeof *q->segs);
	bpos = calloc(q->nbufs + 1, sizeof *bpos);
	if (!q->stream || !q->segs || !bpos) {
		free(bpos);
		return ptd_fail(d, PTD_ESYS, "out of memory for %" PRIu64 " bytes of trace", total);
	}
	for (i = 0; i < q->nbufs; i++) {
		const struct qbuf *b = &q->bufs[i];
		uint64_t skip = 0;
		int newseg = i == 0, lost = 0;
		if (i > 0 && b->offset < end_off) {
			uint64_t ov = end_off - b->offset, z;
			if (ov > pos)
				ov = pos;
			for (z = 0; z < ov && !q->stream[pos - ov + z]; z++)
				;
			if (z == ov && (ov > b->size || memcmp(q->stream + pos - ov, b->data, ov))) {
				pos -= ov; /* the padding of the previous buffer */
			} else if (ov <= b->size && !memcmp(q->stream + pos - ov, b->data, ov)) {
				skip = ov;
			} else {
				newseg = 1; /* overlapping but different: decode apart */
			}
		} else if (i > 0 && b->offset > end_off) {
			newseg = 1;
			lost = !d->snapshot;
		}
		if (newseg) {
			if (q->nsegs)
				q->segs[q->nsegs - 1].end = pos;
			q->segs[q->nsegs].begin = pos;
			q->segs[q->nsegs].lost_before = lost;
			q->segs[q->nsegs].lost_at = b->offset;
			q->nsegs++;
		}
		bpos[i] = pos - skip;
		memcpy(q->stream + pos, b->data + skip, b->size - skip);
		pos += b->size - skip;
		if (b->offset + b->size > end_off)
			end_off = b->offset + b->size;
	}
	if (q->nsegs)
		q->segs[q->nsegs - 1].end = pos;
	q->len = pos;

lost:
	/* data the kernel dropped: the AUX record's end is where it was lost */
	for (k = 0; k < d->nauxlost; k++) {
		const struct auxlost *l = &d->auxlost[k];
		uint64_t at = l->offset, sp = UINT64_MAX;
		size_t j;
		if (d->per_cpu ? l->cpu != (uint32_t)q->cpu : l->tid != q->tid0)
			continue;
		for (i = 0; i < q->nbufs; i++)
			if (q->bufs[i].offset <= at && at <= q->bufs[i].offset + q->bufs[i].size)
				sp = (bpos ? bpos[i] : 0) + (at - q->bufs[i].offset);
		if (sp == UINT64_MAX || sp == 0 || sp >= pos)
			continue;
		for (j = 0; j < q->nsegs; j++)
			if (q->segs[j].begin < sp && sp < q->segs[j].end)
				break;
		if (j == q->nsegs || q->nsegs >= cap)
			continue;
		q->segs[q->nsegs].begin = sp;
		q->segs[q->nsegs].end = q->segs[j].end;
		q->segs[q->nsegs].lost_before = 1;
		q->segs[q->nsegs].lost_at = at;
		q->segs[j].end = sp;
		q->nsegs++;
		qsort(q->segs, q->nsegs, sizeof *q->segs, seg_cmp);
	}
	free(bpos);
	return 0;
}

static int read_perf(struct ptd *d, int fd)
{
	pd_reader *r;
	struct pd_event ev;
	int ret, pipe_mode;
	uint64_t ip_n;

	ret = pd_open(&r, fd);
	if (ret < 0) {
		if (ret == -PD_EIO)
			return ptd_fail(d, PTD_ESYS, "reading %s: %s", INNAME(d->opts), strerror(errno));
		return ptd_fail(d, PTD_EINPUT, "%s: %s (in the header)", INNAME(d->opts),
				 pd_strerror(ret));
	}
	pipe_mode = pd_info(r)->pipe;
	(void)pipe_mode;
	while ((ret = pd_next(r, &ev)) > 0 || ret == -PD_ETRUNC) {
		struct sb s;
		int trunc = ret == -PD_ETRUNC;
		if (trunc && !ev.raw)
			break;
		if (trunc && ev.type != PD_REC_AUXTRACE)
			break;
		d->st->records++;
		if (ev.type < 128)
			d->st->rec_by_type[ev.type]++;
		memset(&s, 0, sizeof s);
		s.time = (ev.sid.have & PD_HAVE_TIME) ? ev.sid.time : 0;
		s.pid = ev.sid.pid;
		s.tid = ev.sid.tid;
		switch (ev.type) {
		case PD_REC_MMAP:
		case PD_REC_MMAP2: {
			struct pd_mmap m;
			if (pd_parse_mmap(&ev, &m) < 0)
				goto corrupt;
			s.kind = SB_MMAP;
			s.pid = m.pid;
			s.tid = m.tid;
			s.mmap.addr = m.addr;
			s.mmap.len = m.len;
			s.mmap.pgoff = m.pgoff;
			s.mmap.prot = m.prot;
			memcpy(s.mmap.bid, m.build_id, 20);
			s.mmap.bidlen = m.build_id_len;
			s.mmap.path = strtab_intern(&d->strs, m.filename);
			if (!s.mmap.path || sb_add(d, &s) < 0)
				goto nomem;
			break;
		}
		case PD_REC_COMM: {
			struct pd_comm c;
			if (pd_parse_comm(&ev, &c) < 0)
				goto corrupt;
			s.kind = SB_COMM;
			s.pid = c.pid;
			s.tid = c.tid;
			s.comm.exec = c.exec;
			s.comm.name = strtab_intern(&d->strs, c.comm);
			if (!s.comm.name || sb_add(d, &s) < 0)
				goto nomem;
			break;
		}
		case PD_REC_FORK: {
			struct pd_fork f;
			if (pd_parse_fork(&ev, &f) < 0)
				goto corrupt;
			s.kind = SB_FORK;
			s.time = f.time;
			s.pid = f.pid;
			s.tid = f.tid;
			s.fork.ppid = f.ppid;
			s.fork.ptid = f.ptid;
			if (sb_add(d, &s) < 0)
				goto nomem;
			break;
		}
		case PD_REC_SWITCH:
		case PD_REC_SWITCH_CPU_WIDE: {
			struct pd_switch sw;
			if (pd_parse_switch(&ev, &sw) < 0)
				goto corrupt;
			if (!(ev.sid.have & PD_HAVE_CPU))
				break;
			if (sw.cpu_wide) {
				if (sw.out)
					ret = sw_add(d, ev.sid.cpu, s.time, sw.next_prev_pid,
						     sw.next_prev_tid);
				else
					ret = sw_add(d, ev.sid.cpu, s.time, ev.sid.pid, ev.sid.tid);
			} else if (!sw.out) {
				ret = sw_add(d, ev.sid.cpu, s.time, ev.sid.pid, ev.sid.tid);
			} else {
				ret = 0;
			}
			if (ret < 0)
				goto nomem;
			break;
		}
		case PD_REC_ITRACE_START: {
			struct pd_itrace_start is;
			if (pd_parse_itrace_start(&ev, &is) < 0)
				goto corrupt;
			if ((ev.sid.have & PD_HAVE_CPU) &&
			    sw_add(d, ev.sid.cpu, s.time, is.pid, is.tid) < 0)
				goto nomem;
			break;
		}
		case PD_REC_AUX: {
			struct pd_aux a;
			if (pd_parse_aux(&ev, &a) < 0)
				goto corrupt;
			if (a.flags & PD_AUX_TRUNCATED) {
				struct auxlost *l;
				d->st->degraded = 1;
				ptd_warn(d, "the kernel lost trace data after AUX offset %" PRIu64
					    " (%s %u): a gap there",
					 a.aux_offset + a.aux_size, d->per_cpu ? "cpu" : "tid",
					 d->per_cpu ? ev.sid.cpu : ev.sid.tid);
				if (grow(&d->auxlost, &d->auxlostcap, d->nauxlost, sizeof *l) < 0)
					goto nomem;
				l = &d->auxlost[d->nauxlost++];
				l->tid = ev.sid.tid;
				l->cpu = ev.sid.cpu;
				l->offset = a.aux_offset + a.aux_size;
			}
			break;
		}
		case PD_REC_TIME_CONV: {
			struct pd_time_conv tc;
			if (pd_parse_time_conv(&ev, &tc) < 0)
				goto corrupt;
			d->t_shift = tc.time_shift;
			d->t_mult = tc.time_mult;
			d->t_zero = tc.time_zero;
			d->have_clock = tc.cap_user_time_zero && tc.time_mult;
			break;
		}
		case PD_REC_AUXTRACE_INFO: {
			struct pd_auxtrace_info ai;
			size_t k;
			if (pd_parse_auxtrace_info(&ev, &ai) < 0)
				goto corrupt;
			if (ai.type != 1) {
				ptd_warn(d, "AUXTRACE_INFO of type %u is not Intel PT; ignored",
					 ai.type);
				break;
			}
			d->have_info = 1;
			d->npriv = ai.npriv < 64 ? ai.npriv : 64;
			for (k = 0; k < d->npriv; k++)
				d->priv[k] = ai.priv[k];
			if (!d->have_clock && d->npriv > 4 && d->priv[4] && d->priv[2] && d->priv[1] < 64) {
				d->t_shift = d->priv[1];
				d->t_mult = d->priv[2];
				d->t_zero = d->priv[3];
				d->have_clock = 1;
			}
			if (d->npriv > 9) {
				d->snapshot = !!d->priv[8];
				d->per_cpu = !!d->priv[9];
			}
			break;
		}
		case PD_REC_AUXTRACE: {
			struct pd_auxtrace a;
			struct ptq *q;
			struct qbuf *b;
			if (pd_parse_auxtrace(&ev, &a) < 0)
				goto corrupt;
			q = q_get(d, a.idx);
			if (!q)
				goto nomem;
			if (grow(&q->bufs, &q->bufcap, q->nbufs, sizeof *q->bufs) < 0)
				goto nomem;
			b = &q->bufs[q->nbufs++];
			b->offset = a.offset;
			b->size = ev.payload_size;
			b->file_off = ev.offset;
			d->st->aux_bytes += ev.payload_size;
			if (a.cpu >= 0)
				q->cpu = a.cpu;
			if (a.tid != UINT32_MAX && a.tid) {
				q->tid0 = a.tid;
				q->pid0 = UINT32_MAX;
			}
			if (pd_info(r)->pipe || !ev.payload) {
				uint8_t *copy = malloc(ev.payload_size ? ev.payload_size : 1);
				if (!copy)
					goto nomem;
				if (ev.payload_size)
					memcpy(copy, ev.payload, ev.payload_size);
				b->data = copy;
				/* remember to free: mark with file_off high bit */
				b->file_off |= 1ull << 63;
			} else {
				b->data = ev.payload;
			}
			if (trunc && !d->opts->partial) {
				ptd_fail(d, PTD_EINPUT, "%s is truncated: it ends inside the AUXTRACE "
					 "data at offset 0x%" PRIx64 " (%" PRIu64 " of %" PRIu64 " bytes; "
					 "--partial decodes what is there)",
					 INNAME(d->opts), ev.offset, ev.payload_size, a.size);
				goto out;
			}
			if (trunc) {
				d->st->degraded = 1;
				ptd_warn(d, "%s ends inside the AUXTRACE data at offset 0x%" PRIx64
					    ": %" PRIu64 " of %" PRIu64 " bytes present",
					 INNAME(d->opts), ev.offset, ev.payload_size, a.size);
			}
			break;
		}
		case PD_REC_SAMPLE: {
			struct pd_sample sm;
			size_t k, n = 0;
			if (!ev.attr)
				break;
			if (pd_parse_sample(&ev, &sm) < 0)
				goto corrupt;
			if (d->pt_attr && ev.attr == d->pt_attr)
				break;
			s.time = sm.time;
			s.pid = sm.pid;
			s.tid = sm.tid;
			if (ev.attr->type == PD_TYPE_BREAKPOINT) {
				int ok;
				s.kind = SB_TRIGGER;
				s.trig.addr = sm.ip ? sm.ip : ev.attr->config1;
				s.trig.arg0 = pd_sample_reg(&sm, ev.attr, 5, &ok);
				s.trig.arg1 = pd_sample_reg(&sm, ev.attr, 4, &ok);
				s.trig.sym = ev.attr->name ? strtab_intern(&d->strs, ev.attr->name)
							   : NULL;
				if (sb_add(d, &s) < 0)
					goto nomem;
				break;
			}
			/* an Intel PT recording carries cycles samples too: keep
			 * them only for sampling recordings */
			if (d->have_info)
				break;
			ip_n = sm.nr_ips + sm.nr_lbr + 1;
			if (grow(&d->ips, &d->ipscap, d->nips + ip_n, sizeof *d->ips) < 0)
				goto nomem;
			s.kind = SB_SAMPLE;
			s.sample.ips = d->nips;
			if (sm.nr_ips) {
				/* PERF_CONTEXT_* markers switch the context of the
				 * entries after them: keep the user stack only (a
				 * chain without markers is taken as user).  The
				 * kernel's frame-pointer walk stores whatever is at
				 * rbp+8, so through code without frame pointers the
				 * user part can go on with 0 or garbage: it ends at
				 * the first entry that cannot be a user return
				 * address (0, or in the upper half: kernel space). */
				int user = 1, user_seen = 0, walk_end = 0, kernel = 0;
				for (k = 0; k < sm.nr_ips; k++) {
					uint64_t ip = sm.ips[k];
					if (ip >= PD_CONTEXT_MAX) {
						user = ip == PD_CONTEXT_USER;
						kernel = ip == PD_CONTEXT_KERNEL;
						user_seen |= user;
						continue;
					}
					/* the kernel's frames (--kernel), innermost
					 * first, come before the user stack: they
					 * go under the system call's user frame */
					if (kernel && !user_seen && !walk_end && ip >> 63) {
						d->ips[d->nips + n++] = ip;
						continue;
					}
					if (!user || walk_end)
						continue;
					if (ip == 0 || ip >> 63) {
						walk_end = 1;
						continue;
					}
					d->ips[d->nips + n++] = ip;
				}
				if (sm.nr_lbr && (ev.attr->branch_sample_type & (1u << 11))) {
					/* lbr call stack: the user part is ip then the
					 * call sites, innermost first */
					if ((!user_seen || n == 0) && !(sm.ip >> 63))
						d->ips[d->nips + n++] = sm.ip;
					for (k = 0; k < sm.nr_lbr; k++)
						d->ips[d->nips + n++] = sm.lbr[k].from;
				}
			} else if (!(sm.ip >> 63)) {
				d->ips[d->nips + n++] = sm.ip;
			}
			/* no user frame at all (a kernel-only chain): the user
			 * stack is unknown, not empty; an empty sample would end
			 * every open frame of the thread */
			if (n == 0)
				break;
			s.sample.nips = (uint32_t)n;
			d->nips += n;
			if (sm.stack_user && sm.stack_size && sm.regs_abi) {
				/* --call-graph dwarf: keep the registers and the stack
				 * copy for the unwinder (run in time order, with the
				 * maps of that time) */
				uint64_t have = 0, regs[UNW_NREGS] = {0};
				for (unsigned g = 0; g < UNW_NREGS; g++) {
					int ok;
					regs[g] = pd_sample_reg(&sm, ev.attr, g, &ok);
					have |= (uint64_t)ok << g;
				}
				size_t need = 16 + sizeof regs + sm.stack_size;
				if (grow(&d->ustk, &d->ustkcap, d->nustk + need, 1) < 0)
					goto nomem;
				uint8_t *u = d->ustk + d->nustk;
				memcpy(u, &have, 8);
				memcpy(u + 8, regs, sizeof regs);
				memcpy(u + 8 + sizeof regs, &sm.stack_size, 8);
				memcpy(u + 16 + sizeof regs, sm.stack_user, sm.stack_size);
				s.sample.ustk = d->nustk + 1;
				d->nustk += need;
			}
			if (sb_add(d, &s) < 0)
				goto nomem;
			break;
		}
		default:
			break;
		}
		if (trunc)
			break;
		/* attrs arrive before data; find the PT event once we can */
		if (!d->pt_attr && d->have_info && d->npriv > 0) {
			const struct pd_info *in = pd_info(r);
			size_t k;
			for (k = 0; k < in->nattrs; k++)
				if (in->attrs[k].type == d->priv[0])
					d->pt_attr = &in->attrs[k];
		}
	}
	if (ret < 0) {
		if (ret == -PD_ETRUNC && !d->opts->partial) {
			/* a killed recorder: no output that looks complete */
			ptd_fail(d, PTD_EINPUT, "%s is truncated at offset 0x%" PRIx64
				 " (--partial decodes what is there)", INNAME(d->opts), pd_offset(r));
			goto out;
		} else if (ret == -PD_ETRUNC) {
			d->st->degraded = 1;
			ptd_warn(d, "%s is truncated at offset 0x%" PRIx64
				    "; decoding what is there",
				 INNAME(d->opts), pd_offset(r));
		} else if (ret == -PD_EIO) {
			ptd_fail(d, PTD_ESYS, "reading %s: %s", INNAME(d->opts), strerror(errno));
			goto out;
		} else {
			ptd_fail(d, PTD_EINPUT, "%s: %s at offset 0x%" PRIx64, INNAME(d->opts),
				 pd_strerror(ret), pd_offset(r));
			goto out;
		}
	}
	{
		const struct pd_info *in = pd_info(r);
		size_t k;
		if (in->cpuid)
			snprintf(d->cpuid, sizeof d->cpuid, "%s", in->cpuid);
		if (in->nbuildids) {
			d->bids = calloc(in->nbuildids, sizeof *d->bids);
			if (!d->bids)
				goto nomem;
			for (k = 0; k < in->nbuildids; k++) {
				d->bids[k] = in->buildids[k];
				d->bids[k].filename = strtab_intern(&d->strs, in->buildids[k].filename);
			}
			d->nbids = in->nbuildids;
		}
		/* the pt attr pointer dies with the reader: keep a copy */
		if (d->pt_attr) {
			d->pt_attr_copy = *d->pt_attr;
			d->pt_attr_copy.ids = NULL;
			d->pt_attr_copy.name = NULL;
			d->pt_attr = &d->pt_attr_copy;
		}
	}
	/* stream-mode payloads were copied; memory-mode ones point into the
	 * mapping, which must stay: we keep the reader open until the end */
	d->msg[0] = 0;
	if (d->nsb > 1) /* qsort(NULL, 0) is undefined */
		qsort(d->sb, d->nsb, sizeof *d->sb, sb_cmp);
	{
		size_t k;
		for (k = 0; k < d->ncpus; k++)
			if (d->cpus[k].n > 1)
				qsort(d->cpus[k].v, d->cpus[k].n, sizeof *d->cpus[k].v, sw_cmp);
		for (k = 0; k < d->nq; k++)
			if (q_build(d, &d->q[k]) < 0)
				goto out;
	}
out:
	d->reader = r; /* AUX payloads may point into its mapping */
	return d->err;
corrupt:
	ptd_fail(d, PTD_EINPUT, "%s: corrupt %s record at offset 0x%" PRIx64, INNAME(d->opts),
		 pd_rec_name(ev.type) ? pd_rec_name(ev.type) : "unknown", ev.offset);
	pd_close(r);
	return d->err;
nomem:
	ptd_fail(d, PTD_ESYS, "out of memory");
	pd_close(r);
	return d->err;
}

/* ------------------------------------------------------------------ */
/* driver                                                              */

static int ptd_init(struct ptd *d, struct ptd_options *opts, struct ptd_stats *st)
{
	memset(d, 0, sizeof *d);
	memset(st, 0, sizeof *st);
	opts->errmsg[0] = 0;
	d->opts = opts;
	d->st = st;
	d->isc = pt_iscache_alloc(NULL);
	d->ccmask = (1u << 16) - 1;
	d->cc = calloc(d->ccmask + 1, sizeof *d->cc);
	if (!d->isc || !d->cc)
		return ptd_fail(d, PTD_ESYS, "out of memory");
	return 0;
}

static void ptd_fini(struct ptd *d)
{
	size_t i;
	for (i = 0; i < d->nq; i++) {
		struct ptq *q = &d->q[i];
		size_t k;
		d->st->blocks += q->nblocks;
		d->st->insns += q->ninsns;
		if (q->dec)
			pt_blk_free_decoder(q->dec);
		for (k = 0; k < q->nbufs; k++)
			if (q->bufs[k].file_off >> 63)
				free((void *)q->bufs[k].data);
		free(q->bufs);
		if (q->stream_owned)
			free(q->stream);
		free(q->segs);
		free(q->fifo);
		free(q->psbs);
	}
	free(d->q);
	free(d->auxlost);
	pd_close(d->reader);
	for (i = 0; i < d->nproc; i++) {
		pt_image_free(d->proc[i].img);
		free(d->proc[i].maps);
		free(d->proc[i].sbmaps);
	}
	free(d->proc);
	for (i = 0; i < d->noldimgs; i++)
		pt_image_free(d->oldimgs[i]);
	free(d->oldimgs);
	free(d->kmaps);
	pt_iscache_free(d->isc);
	free(d->cc);
	for (i = 0; i < d->nfmaps; i++) {
		if (d->fmaps[i].base)
			munmap(d->fmaps[i].base, d->fmaps[i].len);
		free(d->fmaps[i].file);
	}
	free(d->fmaps);
	free(d->secs);
	free(d->sb);
	free(d->ips);
	free(d->ustk);
	unw_free(d->unw);
	for (i = 0; i < d->ncpus; i++)
		free(d->cpus[i].v);
	free(d->cpus);
	free(d->thr);
	free(d->thr_idx);
	free(d->bids);
	free(d->fin);
	strtab_fini(&d->strs);
}

static int write_head(struct ptd *d)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_CLOCK;
	if (d->have_clock) {
		r.clock.time_zero = d->t_zero;
		r.clock.time_mult = d->t_mult;
		r.clock.time_shift = d->t_shift;
		if (d->t_mult)
			r.clock.tsc_hz = (uint64_t)((1000000000.0 * (double)(1ull << d->t_shift)) /
						    (double)d->t_mult + 0.5);
	} else {
		r.clock.time_mult = 1;
	}
	return write_rec(d, &r);
}

/* Degraded output (exit 1) always comes with a line saying what and where:
 * the gaps are summed up in one warning, naming the first. */
static void gap_summary(struct ptd *d)
{
	if (d->err || !d->ngaps_set)
		return;
	const char *why = mtev_gap_name(d->gap1.reason);
	char off[48] = "";
	if (d->gap1.offset != UINT64_MAX)
		snprintf(off, sizeof off, " at trace offset 0x%" PRIx64, d->gap1.offset);
	ptd_warn(d, "the trace has %" PRIu64 " gap(s); the first (%s, tid %u%s, ip 0x%" PRIx64 ")%s%s",
		 d->ngaps_set, why ? why : "?", d->gap1.tid, off, d->gap1.ip,
		 d->gap1.msg[0] ? ": " : "", d->gap1.msg);
}

int ptd_decode_perf(int fd_in, int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w),
		    void *out_ctx, struct ptd_options *opts, struct ptd_stats *st)
{
	struct ptd d;
	uint32_t flags = MTEV_F_SORTED;
	size_t i;
	int ret;

	if (ptd_init(&d, opts, st) < 0)
		goto out;
	if (read_perf(&d, fd_in) < 0)
		goto out;
	if (!d.have_info && d.nq == 0)
		flags |= MTEV_F_SAMPLING;
	if (d.nq && !d.have_info) {
		ptd_warn(&d, "AUXTRACE data without AUXTRACE_INFO: assuming Intel PT");
	}
	/* queue threads: per-thread queues know theirs */
	for (i = 0; i < d.nq; i++) {
		struct ptq *q = &d.q[i];
		if (!d.per_cpu && q->tid0) {
			size_t k;
			for (k = 0; k < d.nsb; k++)
				if (d.sb[k].tid == q->tid0 && d.sb[k].kind == SB_COMM) {
					q->pid0 = d.sb[k].pid;
					break;
				}
			if (q->pid0 == UINT32_MAX)
				q->pid0 = q->tid0;
		}
		q->state = Q_SEG;
	}
	/* threads named by COMM records are announced by them (sampling:
	 * announced in time order, by the first of fork, comm, sample) */
	for (i = 0; i < d.nsb && d.nq; i++)
		if (d.sb[i].kind == SB_COMM) {
			int th = thr_get(&d, d.sb[i].tid, d.sb[i].pid);
			if (th >= 0)
				d.thr[th].announced = 1;
		}
	ret = open_out(out_ctx, flags, &d.w);
	if (ret < 0) {
		ptd_fail(&d, PTD_EOUTPUT, "cannot open the output");
		goto out;
	}
	if (write_head(&d) < 0)
		goto out;
	merge(&d);
	gap_summary(&d);
out:
	ret = d.err;
	ptd_fini(&d);
	return ret;
}

int ptd_parse_image_spec(const char *arg, struct ptd_image_spec *spec)
{
	const char *at = strrchr(arg, '@');
	char *file, *c1, *end;
	size_t flen;

	memset(spec, 0, sizeof *spec);
	if (!at || at == arg)
		return -1;
	errno = 0;
	spec->vaddr = strtoull(at + 1, &end, 0);
	if (errno || end == at + 1 || *end)
		return -1;
	flen = (size_t)(at - arg);
	file = strndup(arg, flen);
	if (!file)
		return -1;
	c1 = strchr(file, ':');
	if (c1) {
		char *c2;
		*c1 = 0;
		spec->offset = strtoull(c1 + 1, &end, 0);
		if (end == c1 + 1 || (*end && *end != ':')) {
			free(file);
			return -1;
		}
		c2 = *end == ':' ? end : NULL;
		if (c2) {
			spec->size = strtoull(c2 + 1, &end, 0);
			if (end == c2 + 1 || *end) {
				free(file);
				return -1;
			}
		}
	}
	spec->file = file; /* owned by the caller now (lives for the run) */
	return 0;
}

int ptd_decode_raw(const char *pt_file, int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w),
		   void *out_ctx, struct ptd_options *opts, struct ptd_stats *st)
{
	struct ptd d;
	struct ptq *q;
	uint8_t *buf = NULL;
	size_t len = 0, i;
	int ret;

	if (ptd_init(&d, opts, st) < 0)
		goto out;
	if (io_slurp(pt_file, &buf, &len) < 0) {
		ptd_fail(&d, errno == ENOENT ? PTD_EINPUT : PTD_ESYS, "cannot read %s: %s",
			 pt_file, strerror(errno));
		goto out;
	}
	q = q_get(&d, 0);
	if (!q) {
		ptd_fail(&d, PTD_ESYS, "out of memory");
		goto out;
	}
	q->tid0 = opts->raw_tid;
	q->pid0 = opts->raw_pid;
	q->stream = buf;
	q->stream_owned = 1;
	buf = NULL;
	q->len = len;
	q->segs = calloc(1, sizeof *q->segs);
	if (!q->segs) {
		ptd_fail(&d, PTD_ESYS, "out of memory");
		goto out;
	}
	q->segs[0].end = len;
	q->nsegs = 1;
	q->state = Q_SEG;
	{
		struct proc *p = proc_get(&d, opts->raw_pid);
		if (!p) {
			ptd_fail(&d, PTD_ESYS, "out of memory");
			goto out;
		}
		for (i = 0; i < opts->nimages; i++) {
			const struct ptd_image_spec *im = &opts->images[i];
			uint64_t size = im->size;
			struct mapent me;
			int isid;
			if (!size) {
				struct stat sb;
				if (stat(im->file, &sb) < 0 || (uint64_t)sb.st_size < im->offset) {
					ptd_fail(&d, PTD_EINPUT, "image %s: %s", im->file,
						 strerror(errno ? errno : EINVAL));
					goto out;
				}
				size = (uint64_t)sb.st_size - im->offset;
			}
			isid = pt_iscache_add_file(d.isc, im->file, im->offset, size, im->vaddr);
			sec_note(&d, im->file, im->offset, size, im->vaddr, isid);
			if (isid < 0) {
				ptd_fail(&d, PTD_EINPUT, "image %s: %s", im->file,
					 pt_errstr(pt_errcode(isid)));
				goto out;
			}
			pt_image_add_cached(p->img, d.isc, isid, NULL);
			me.start = im->vaddr;
			me.end = im->vaddr + size;
			me.path = strtab_intern(&d.strs, im->file);
			me.missing = 0;
			map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
		}
	}
	if (thr_get(&d, opts->raw_tid, opts->raw_pid) < 0) {
		ptd_fail(&d, PTD_ESYS, "out of memory");
		goto out;
	}
	ret = open_out(out_ctx, MTEV_F_SORTED, &d.w);
	if (ret < 0) {
		ptd_fail(&d, PTD_EOUTPUT, "cannot open the output");
		goto out;
	}
	if (write_head(&d) < 0)
		goto out;
	merge(&d);
	gap_summary(&d);
out:
	free(buf);
	ret = d.err;
	ptd_fini(&d);
	return ret;
}

/* ------------------------------------------------------------------ */
/* record listing                                                      */

int ptd_list_records(int fd_in, FILE *out, struct ptd_options *opts)
{
	pd_reader *r;
	struct pd_event ev;
	int ret;

	opts->errmsg[0] = 0;
	ret = pd_open(&r, fd_in);
	if (ret < 0) {
		snprintf(opts->errmsg, sizeof opts->errmsg, "%s: %s (in the header)", INNAME(opts),
			 pd_strerror(ret));
		return ret == -PD_EIO ? -PTD_ESYS : -PTD_EINPUT;
	}
	fprintf(out, "# %s mode\n", pd_info(r)->pipe ? "pipe" : "file");
	while ((ret = pd_next(r, &ev)) > 0) {
		const char *name = pd_rec_name(ev.type);
		fprintf(out, "0x%" PRIx64 " %s type=%u size=%u", ev.offset, name ? name : "UNKNOWN",
			ev.type, ev.size);
		if (ev.sid.have & PD_HAVE_TIME)
			fprintf(out, " time=%" PRIu64, ev.sid.time);
		if (ev.sid.have & PD_HAVE_CPU)
			fprintf(out, " cpu=%u", ev.sid.cpu);
		switch (ev.type) {
		case PD_REC_AUXTRACE: {
			struct pd_auxtrace a;
			if (pd_parse_auxtrace(&ev, &a) == 0)
				fprintf(out, " idx=%u aux_size=%" PRIu64 " aux_offset=%" PRIu64
					     " tid=%u aux_cpu=%d",
					a.idx, a.size, a.offset, a.tid, a.cpu);
			break;
		}
		case PD_REC_MMAP:
		case PD_REC_MMAP2: {
			struct pd_mmap m;
			if (pd_parse_mmap(&ev, &m) == 0)
				fprintf(out, " pid=%d tid=%d addr=0x%" PRIx64 " len=0x%" PRIx64
					     " pgoff=0x%" PRIx64 " prot=%u file=%s",
					(int)m.pid, (int)m.tid, m.addr, m.len, m.pgoff, m.prot,
					m.filename);
			break;
		}
		case PD_REC_COMM: {
			struct pd_comm c;
			if (pd_parse_comm(&ev, &c) == 0)
				fprintf(out, " pid=%u tid=%u exec=%d comm=%s", c.pid, c.tid, c.exec,
					c.comm);
			break;
		}
		case PD_REC_SWITCH:
		case PD_REC_SWITCH_CPU_WIDE: {
			struct pd_switch s;
			if (pd_parse_switch(&ev, &s) == 0)
				fprintf(out, " out=%d next_prev=%u/%u", s.out, s.next_prev_pid,
					s.next_prev_tid);
			break;
		}
		default:
			break;
		}
		fputc('\n', out);
	}
	if (ret < 0)
		snprintf(opts->errmsg, sizeof opts->errmsg, "%s: %s at offset 0x%" PRIx64, INNAME(opts),
			 pd_strerror(ret), pd_offset(r));
	pd_close(r);
	if (ret == -PD_EIO)
		return -PTD_ESYS;
	return ret < 0 ? -PTD_EINPUT : 0;
}
