/* ptsim_synth: the execution log -> PT packets, true branches, true spans.
 *
 * Timing (the contract with mt-decode, formats/mtev-semantics.md): a CYC
 * packet brings a stream's time up to the clock before every TNT, TIP and
 * TIP.PGE packet, and before OVF.  Packets that end tracing (TIP.PGD, and the
 * FUP of an asynchronous exit) get no CYC: libipt applies the timing packets
 * in front of an event eagerly, before the instructions that precede the
 * event, so they must not move time.  PSB+ (with TSC = clock) is only
 * emitted at the same clock as the packet before it.  Hence every branch's
 * time is the time of the packet that carries it, and a branch carried by
 * no packet has the time of the last packet that carried an earlier branch
 * of its thread (for a TNT bit: the TNT packet holding it). */
#include "ptsim.h"
#include "elfinfo.h"
#include "mtev.h"
#include "x86br.h"

#include <capstone/capstone.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { K_OTHER, K_JCC, K_JMP, K_JMPI, K_CALL, K_CALLI, K_RET, K_SYS, K_FAR, K_BAD };

struct cls {
	uint64_t ip;
	uint64_t func; /* runtime start of the containing symbol, 0 unknown */
	uint8_t len, kind, nopush, used;
	uint8_t stub; /* in a PLT stub section (func: the stub's entry) */
	uint8_t cold; /* in a ".cold" part of a function (gcc's hot/cold split) */
};

struct frame {
	uint64_t func, callsite, slotaddr;
	uint64_t ret; /* the return address in its slot, 0 unknown (the call chain) */
	uint32_t bslot;
	int64_t bseq;
	int32_t depth;
	uint32_t flags;
	const char *name;
	int stub; /* entered a PLT stub: becomes the stub's target (docs/exactness.md) */
};

#define RS_SIZE 64

struct sth {
	uint32_t tid;
	size_t ts; /* index in res->ts */
	int started, traced, enabled, dis_async;
	uint64_t ninsn, win_start, total;
	uint8_t tnt_n;
	uint64_t tnt_bits;
	uint32_t tnt_slot;
	uint32_t cur_slot;
	int have_slot;
	uint64_t last_timing; /* clock of the last timing packet in the stream */
	uint64_t last_ip;
	uint64_t rs[RS_SIZE + 1];
	uint8_t rs_top, rs_bot;
	size_t psb_last;
	uint64_t next_ip;
	/* faults */
	int loss_armed;
	uint64_t loss_left;
	int in_loss, force_psb;
	/* spans */
	struct frame *st;
	size_t nst, stcap;
	struct frame sys; /* open [syscall]/[interrupt] span */
	int sys_open;
	struct {
		uint64_t func, slotaddr;
	} pend[8];
	int npend;
	uint32_t first_slot;
	int64_t disc; /* discovered-frame counter */
	int root_inferred;
	/* PSB offsets, for truncate-aux */
	size_t *psbs;
	size_t npsbs, psbcap;
};

struct symimg {
	const struct ptsim_map *m;
	struct elfinfo ei;
	int ok;
};

struct synth {
	const struct ptsim_run *run;
	const struct ptsim_synth_opts *o;
	struct ptsim_result *res;
	csh cs;
	struct cls *ct;
	size_t ctmask, ctn;
	struct sth *th;
	size_t nth;
	uint64_t clock;
	int64_t seq;
	struct pt_encoder *enc;
	uint8_t encbuf[64];
	struct pt_config cfg;
	struct symimg *si;
	size_t nsi;
	char *err;
	size_t errlen;
	int oom;
	uint64_t trunc_off[PTSIM_MAX_FAULTS];
};

uint64_t ptsim_tsc_to_perf(uint64_t tsc)
{
	uint64_t quot = tsc >> PTSIM_TIME_SHIFT, rem = tsc & ((1ull << PTSIM_TIME_SHIFT) - 1);
	return PTSIM_TIME_ZERO + quot * PTSIM_TIME_MULT + ((rem * PTSIM_TIME_MULT) >> PTSIM_TIME_SHIFT);
}

/* ---- symbols (for tail calls and frames entered without a call) ---- */
static struct symimg *symimg_of(struct synth *s, const struct ptsim_map *m)
{
	for (size_t i = 0; i < s->nsi; i++)
		if (s->si[i].m == m)
			return &s->si[i];
	struct symimg *n = realloc(s->si, (s->nsi + 1) * sizeof(*n));
	if (!n)
		return NULL;
	s->si = n;
	struct symimg *x = &s->si[s->nsi++];
	memset(x, 0, sizeof(*x));
	x->m = m;
	if (m->path[0] == '/') {
		x->ok = elfinfo_load(&x->ei, m->path) == 0;
	} else if (!strcmp(m->path, "[vdso]")) {
		char tmp[] = "/tmp/mt-ptsim-vdso.XXXXXX";
		int fd = mkstemp(tmp);
		if (fd >= 0) {
			FILE *f = fdopen(fd, "w");
			if (f) {
				fwrite(m->bytes, 1, m->len, f);
				fclose(f);
				x->ok = elfinfo_load(&x->ei, tmp) == 0;
			} else {
				close(fd);
			}
			unlink(tmp);
		}
	}
	return x;
}

/* The runtime entry of the function (or PLT stub) containing @ip, 0 unknown;
 * *kind: 1 a PLT stub, 2 a ".cold" part, else 0.  With @owner, a .cold
 * part's function is the one it belongs to. */
static uint64_t func_of_stub(struct synth *s, uint64_t ip, uint8_t *stub, int owner)
{
	*stub = 0;
	const struct ptsim_map *m = ptsim_find_map(s->run, ip);
	if (!m)
		return 0;
	struct symimg *x = symimg_of(s, m);
	if (!x || !x->ok)
		return 0;
	int64_t va = elfinfo_offset_to_vaddr(&x->ei, ip - m->start + m->pgoff);
	if (va < 0)
		return 0;
	uint64_t se, sx;
	if (elfinfo_stub(&x->ei, (uint64_t)va, &se, &sx)) {
		*stub = 1;
		return ip - ((uint64_t)va - se);
	}
	const struct elf_sym *sym = elfinfo_lookup(&x->ei, (uint64_t)va);
	if (!sym)
		return 0;
	const char *cp = strstr(sym->name, ".cold");
	*stub = cp && (cp[5] == 0 || cp[5] == '.') ? 2 : 0;
	if (*stub && owner && (size_t)(cp - sym->name) < 512) {
		/* the function a .cold part belongs to, by name in the same file */
		char base[512];
		memcpy(base, sym->name, (size_t)(cp - sym->name));
		base[cp - sym->name] = 0;
		const struct elf_sym *o = elfinfo_find(&x->ei, base);
		if (o)
			return ip - ((uint64_t)va - o->addr);
	}
	return ip - ((uint64_t)va - sym->addr);
}

/* The function whose frame runs @ip: a .cold part's is its owner's. */
static uint64_t func_of(struct synth *s, uint64_t ip)
{
	uint8_t stub;
	return func_of_stub(s, ip, &stub, 1);
}

/* ---- instruction classes ---- */
static struct cls *classify(struct synth *s, uint64_t ip)
{
	size_t h = (size_t)((ip * 0x9E3779B97F4A7C15ull) >> 20) & s->ctmask;
	while (s->ct[h].used) {
		if (s->ct[h].ip == ip)
			return &s->ct[h];
		h = (h + 1) & s->ctmask;
	}
	if ((s->ctn + 1) * 2 > s->ctmask + 1) {
		size_t nmask = s->ctmask * 2 + 1;
		struct cls *n = calloc(nmask + 1, sizeof(*n));
		if (!n) {
			s->oom = 1;
			return NULL;
		}
		for (size_t i = 0; i <= s->ctmask; i++)
			if (s->ct[i].used) {
				size_t k = (size_t)((s->ct[i].ip * 0x9E3779B97F4A7C15ull) >> 20) & nmask;
				while (n[k].used)
					k = (k + 1) & nmask;
				n[k] = s->ct[i];
			}
		free(s->ct);
		s->ct = n;
		s->ctmask = nmask;
		return classify(s, ip);
	}
	struct cls *c = &s->ct[h];
	memset(c, 0, sizeof(*c));
	c->ip = ip;
	c->used = 1;
	s->ctn++;
	c->kind = K_BAD;
	const struct ptsim_map *m = ptsim_find_map(s->run, ip);
	if (!m)
		return c;
	const uint8_t *code = m->bytes + (ip - m->start);
	size_t avail = m->len - (ip - m->start);
	uint8_t buf[16];
	if (avail < 16) {
		/* The instruction may continue in an adjacent mapping. */
		memset(buf, 0, sizeof buf);
		memcpy(buf, code, avail);
		const struct ptsim_map *m2 = ptsim_find_map(s->run, m->start + m->len);
		if (m2)
			memcpy(buf + avail, m2->bytes + (m->start + m->len - m2->start),
			       16 - avail < m2->len ? 16 - avail : m2->len);
		code = buf;
		avail = 16;
	}
	/* capstone for the length (and whether it decodes at all), the
	 * project's classifier for the branches */
	cs_insn *in = NULL;
	size_t n = cs_disasm(s->cs, code, avail < 16 ? avail : 16, ip, 1, &in);
	if (n != 1)
		return c;
	c->len = (uint8_t)in->size;
	c->kind = K_OTHER;
	struct x86br_insn xi;
	x86br_decode(code, avail < 16 ? avail : 16, 64, ip, &xi);
	switch (xi.cls) {
	case X86BR_NONE:
		break;
	case X86BR_JCC: /* jcc, loop*, jrcxz */
		c->kind = K_JCC;
		break;
	case X86BR_JMP:
		c->kind = xi.direct ? K_JMP : K_JMPI;
		break;
	case X86BR_CALL:
		c->kind = xi.direct ? K_CALL : K_CALLI;
		if (xi.direct && xi.target == ip + in->size)
			c->nopush = 1;
		break;
	case X86BR_RET:
		c->kind = K_RET;
		break;
	case X86BR_SYSCALL: /* syscall, sysenter, int n; traps and far calls are far */
		c->kind = xi.trap ? K_FAR : K_SYS;
		break;
	default: /* sysret, sysexit, iret, far ret, far jmp */
		c->kind = K_FAR;
		break;
	}
	cs_free(in, 1);
	c->func = func_of_stub(s, ip, &c->stub, 0);
	c->cold = c->stub == 2;
	c->stub = c->stub == 1;
	return c;
}

/* ---- time slots ---- */
static uint32_t new_slot(struct synth *s, uint64_t clock)
{
	struct ptsim_result *r = s->res;
	if (r->ntimes == r->tcap) {
		size_t ncap = r->tcap ? r->tcap * 2 : 4096;
		uint64_t *n = realloc(r->times, ncap * sizeof(*n));
		if (!n) {
			s->oom = 1;
			return 0;
		}
		r->times = n;
		r->tcap = ncap;
	}
	r->times[r->ntimes] = clock;
	return (uint32_t)r->ntimes++;
}

/* ---- packet output ---- */
static void put_bytes(struct synth *s, struct sth *t, const uint8_t *p, size_t n)
{
	struct ptsim_tstream *ts = &s->res->ts[t->ts];
	if (t->in_loss)
		return;
	if (ts->len + n > ts->cap) {
		size_t ncap = ts->cap ? ts->cap * 2 : 65536;
		while (ncap < ts->len + n)
			ncap *= 2;
		uint8_t *b = realloc(ts->pt, ncap);
		if (!b) {
			s->oom = 1;
			return;
		}
		ts->pt = b;
		ts->cap = ncap;
	}
	memcpy(ts->pt + ts->len, p, n);
	ts->len += n;
}

static void emit(struct synth *s, struct sth *t, struct pt_packet *pkt)
{
	pt_enc_sync_set(s->enc, 0);
	int n = pt_enc_next(s->enc, pkt);
	if (n <= 0) {
		s->oom = 1; /* cannot happen with valid packets */
		return;
	}
	put_bytes(s, t, s->encbuf, (size_t)n);
}

static void emit_simple(struct synth *s, struct sth *t, enum pt_packet_type type)
{
	struct pt_packet p;
	memset(&p, 0, sizeof p);
	p.type = type;
	emit(s, t, &p);
}

static void emit_ip(struct synth *s, struct sth *t, enum pt_packet_type type, uint64_t ip, int suppressed)
{
	struct pt_packet p;
	memset(&p, 0, sizeof p);
	p.type = type;
	if (suppressed) {
		p.payload.ip.ipc = pt_ipc_suppressed;
	} else {
		uint64_t x = ip ^ t->last_ip;
		if (!(x >> 16))
			p.payload.ip.ipc = pt_ipc_update_16;
		else if (!(x >> 32))
			p.payload.ip.ipc = pt_ipc_update_32;
		else
			p.payload.ip.ipc = pt_ipc_sext_48;
		p.payload.ip.ip = ip;
		if (!t->in_loss)
			t->last_ip = ip;
	}
	emit(s, t, &p);
}

static void emit_cyc(struct synth *s, struct sth *t)
{
	if (s->clock <= t->last_timing)
		return;
	struct pt_packet p;
	memset(&p, 0, sizeof p);
	p.type = ppt_cyc;
	p.payload.cyc.value = s->clock - t->last_timing;
	emit(s, t, &p);
	if (!t->in_loss)
		t->last_timing = s->clock;
}

static void emit_mode(struct synth *s, struct sth *t)
{
	struct pt_packet p;
	memset(&p, 0, sizeof p);
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	emit(s, t, &p);
}

static void flush_tnt(struct synth *s, struct sth *t)
{
	if (!t->tnt_n)
		return;
	emit_cyc(s, t);
	struct pt_packet p;
	memset(&p, 0, sizeof p);
	p.type = ppt_tnt_8;
	p.payload.tnt.bit_size = t->tnt_n;
	p.payload.tnt.payload = t->tnt_bits;
	emit(s, t, &p);
	s->res->times[t->tnt_slot] = s->clock;
	t->tnt_n = 0;
	t->tnt_bits = 0;
}

static void add_tnt(struct synth *s, struct sth *t, int taken)
{
	if (!t->tnt_n)
		t->tnt_slot = new_slot(s, UINT64_MAX);
	t->tnt_bits = (t->tnt_bits << 1) | (taken ? 1 : 0);
	t->tnt_n++;
	t->cur_slot = t->tnt_slot;
	if (t->tnt_n == 6)
		flush_tnt(s, t);
}

/* A timing point: time slot at the current clock. */
static void mark_time(struct synth *s, struct sth *t)
{
	t->cur_slot = new_slot(s, s->clock);
	t->have_slot = 1;
}

/* PSB+: PSB, [MODE.TSX], MODE.exec, TSC, CBR, [FUP], PSBEND.  @now: TSC at the clock
 * (after a CYC), else at the stream's last timing packet. */
static void emit_psb_at(struct synth *s, struct sth *t, int with_fup, uint64_t ip, int now)
{
	struct ptsim_tstream *ts = &s->res->ts[t->ts];
	if (now)
		emit_cyc(s, t);
	if (!t->in_loss) {
		if (t->npsbs == t->psbcap) {
			size_t ncap = t->psbcap ? t->psbcap * 2 : 64;
			size_t *n = realloc(t->psbs, ncap * sizeof(*n));
			if (!n) {
				s->oom = 1;
				return;
			}
			t->psbs = n;
			t->psbcap = ncap;
		}
		t->psbs[t->npsbs++] = ts->len;
	}
	t->psb_last = ts->len;
	t->last_ip = 0;
	t->rs_top = t->rs_bot = 0;
	emit_simple(s, t, ppt_psb);
	if (s->o->tsx) {
		struct pt_packet x;
		memset(&x, 0, sizeof x);
		x.type = ppt_mode;
		x.payload.mode.leaf = pt_mol_tsx; /* InTX and TXAbort clear */
		emit(s, t, &x);
	}
	emit_mode(s, t);
	struct pt_packet p;
	memset(&p, 0, sizeof p);
	p.type = ppt_tsc;
	p.payload.tsc.tsc = PTSIM_TSC0 + (now ? s->clock : t->last_timing);
	emit(s, t, &p);
	memset(&p, 0, sizeof p);
	p.type = ppt_cbr;
	p.payload.cbr.ratio = PTSIM_NOM_RATIO;
	emit(s, t, &p);
	if (with_fup)
		emit_ip(s, t, ppt_fup, ip, 0);
	emit_simple(s, t, ppt_psbend);
	if (now && !t->in_loss)
		t->last_timing = s->clock;
	t->force_psb = 0;
}

static void emit_psb(struct synth *s, struct sth *t, int with_fup, uint64_t ip)
{
	emit_psb_at(s, t, with_fup, ip, 1);
}

/* After a TIP.PGD: a PSB+ (no FUP: tracing is off) that repeats the time of
 * the disable.  libipt fetches the event after a disable before the caller
 * reads the time; this PSB+ is that event, so the disable's time does not
 * depend on whether a decoder reads it from the event or from pt_*_time(). */
static void emit_psb_off(struct synth *s, struct sth *t)
{
	emit_psb_at(s, t, 0, 0, 0);
}

/* Right after a packet that moved time: a periodic PSB if one is due. */
static void maybe_psb(struct synth *s, struct sth *t, uint64_t next_ip)
{
	struct ptsim_tstream *ts = &s->res->ts[t->ts];
	if (!t->traced || !t->enabled || t->tnt_n || t->in_loss)
		return;
	if (t->force_psb || ts->len - t->psb_last >= s->o->psb_period)
		emit_psb(s, t, 1, next_ip);
}

static void rs_push(struct sth *t, uint64_t ip)
{
	t->rs[t->rs_top] = ip;
	t->rs_top = t->rs_top == RS_SIZE ? 0 : t->rs_top + 1;
	if (t->rs_top == t->rs_bot)
		t->rs_bot = t->rs_bot == RS_SIZE ? 0 : t->rs_bot + 1;
}

static int rs_pop_if(struct sth *t, uint64_t ip)
{
	if (t->rs_top == t->rs_bot)
		return 0;
	uint8_t top = t->rs_top ? t->rs_top - 1 : RS_SIZE;
	if (t->rs[top] != ip)
		return 0;
	t->rs_top = top;
	return 1;
}

/* ---- truth records ---- */
static void add_branch(struct synth *s, struct sth *t, int type, uint64_t from, uint64_t to, uint32_t slot)
{
	struct ptsim_result *r = s->res;
	if (!t->traced)
		return;
	if (r->nbr == r->brcap) {
		size_t ncap = r->brcap ? r->brcap * 2 : 65536;
		struct ptsim_branch *n = realloc(r->br, ncap * sizeof(*n));
		if (!n) {
			s->oom = 1;
			return;
		}
		r->br = n;
		r->brcap = ncap;
	}
	struct ptsim_branch *b = &r->br[r->nbr++];
	b->tid = t->tid;
	b->type = (uint8_t)type;
	b->from = from;
	b->to = to;
	b->slot = slot;
}

static void add_span(struct synth *s, struct sth *t, const struct frame *f, uint32_t eslot, uint32_t extra)
{
	struct ptsim_result *r = s->res;
	if (r->nspans == r->spcap) {
		size_t ncap = r->spcap ? r->spcap * 2 : 16384;
		struct ptsim_span *n = realloc(r->spans, ncap * sizeof(*n));
		if (!n) {
			s->oom = 1;
			return;
		}
		r->spans = n;
		r->spcap = ncap;
	}
	struct ptsim_span *p = &r->spans[r->nspans++];
	p->tid = t->tid;
	p->depth = f->depth;
	p->flags = f->flags | extra;
	p->bslot = f->bslot;
	p->eslot = eslot;
	p->func = f->func;
	p->callsite = f->callsite;
	p->bseq = (uint64_t)f->bseq;
	p->name = f->name;
}

static struct frame *push_frame(struct synth *s, struct sth *t)
{
	if (t->nst == t->stcap) {
		size_t ncap = t->stcap ? t->stcap * 2 : 64;
		struct frame *n = realloc(t->st, ncap * sizeof(*n));
		if (!n) {
			s->oom = 1;
			return NULL;
		}
		t->st = n;
		t->stcap = ncap;
	}
	struct frame *f = &t->st[t->nst++];
	memset(f, 0, sizeof(*f));
	f->bseq = s->seq++;
	f->depth = t->nst > 1 ? t->st[t->nst - 2].depth + 1 : 0;
	return f;
}

static void pop_frame(struct synth *s, struct sth *t, uint32_t eslot, uint32_t extra)
{
	add_span(s, t, &t->st[t->nst - 1], eslot, extra);
	t->nst--;
}

/* A tail call (or a jump into a PLT stub, @stub): the top frame ends and a
 * frame of @func takes its place, at the same depth and return slot. */
static void tail_call(struct synth *s, struct sth *t, uint64_t func, uint64_t callsite, int stub)
{
	struct frame old = t->st[t->nst - 1];
	pop_frame(s, t, t->cur_slot, 0);
	struct frame *f = push_frame(s, t);
	if (f) {
		f->func = func;
		f->callsite = callsite;
		f->slotaddr = old.slotaddr;
		f->ret = old.ret;
		f->bslot = t->cur_slot;
		f->depth = old.depth;
		f->stub = (uint8_t)stub;
	}
}

static int32_t top_depth(struct sth *t)
{
	return t->nst ? t->st[t->nst - 1].depth : -1;
}

static void open_sys(struct synth *s, struct sth *t, const char *name, uint32_t flags,
		     uint64_t callsite)
{
	memset(&t->sys, 0, sizeof t->sys);
	t->sys.callsite = callsite;
	t->sys.bseq = s->seq++;
	t->sys.depth = top_depth(t) + 1;
	t->sys.bslot = t->cur_slot;
	t->sys.flags = flags;
	t->sys.name = name;
	t->sys_open = 1;
}

/* ---- the state machine ---- */
static struct sth *th_of(struct synth *s, uint32_t tid)
{
	for (size_t i = 0; i < s->nth; i++)
		if (s->th[i].tid == tid)
			return &s->th[i];
	return NULL;
}

/* The thread executes user code at @ip while tracing was off: enable. */
static void enable(struct synth *s, struct sth *t, uint64_t ip)
{
	int first = !t->started;
	if (!t->started) {
		emit_psb(s, t, 0, 0);
		t->started = 1;
	} else {
		emit_cyc(s, t);
		emit_mode(s, t);
	}
	emit_ip(s, t, ppt_tip_pge, ip, 0);
	t->enabled = 1;
	mark_time(s, t);
	if (first)
		t->first_slot = t->cur_slot;
	add_branch(s, t, first ? MTEV_BR_TRACE_START : t->dis_async ? MTEV_BR_IRET : MTEV_BR_SYSRET, 0,
		   ip, t->cur_slot);
	if (t->sys_open) {
		add_span(s, t, &t->sys, t->cur_slot, 0);
		t->sys_open = 0;
	}
	if (!t->nst) {
		struct frame *f = push_frame(s, t);
		if (f) {
			uint64_t fn = func_of(s, ip);
			f->func = fn ? fn : ip;
			f->slotaddr = UINT64_MAX;
			f->bslot = t->cur_slot;
			f->flags = t->root_inferred ? MTEV_SPAN_INFERRED_START : 0;
		}
	}
	for (int i = 0; i < t->npend; i++) {
		struct frame *f = push_frame(s, t);
		if (!f)
			break;
		f->func = t->pend[i].func;
		f->slotaddr = t->pend[i].slotaddr;
		f->bslot = t->cur_slot;
	}
	t->npend = 0;
}

/* Tracing stops at an asynchronous point: FUP(ip), TIP.PGD. */
static void async_disable(struct synth *s, struct sth *t, uint64_t ip)
{
	flush_tnt(s, t);
	emit_ip(s, t, ppt_fup, ip, 0);
	emit_ip(s, t, ppt_tip_pgd, 0, 1);
	t->enabled = 0;
	t->dis_async = 1;
}

static void after_disable(struct synth *s, struct sth *t)
{
	emit_psb_off(s, t);
}

/* The window of thread @t begins before this instruction. */
static void window_start(struct synth *s, struct sth *t, uint64_t ip)
{
	struct ptsim_tstream *ts = &s->res->ts[t->ts];
	flush_tnt(s, t);
	ts->len = 0;
	t->npsbs = 0;
	t->psb_last = 0;
	t->traced = 1;
	if (t->enabled) {
		emit_psb(s, t, 1, ip);
		mark_time(s, t);
		add_branch(s, t, MTEV_BR_TRACE_START, 0, ip, t->cur_slot);
	} else {
		t->started = 0; /* the next enable is this stream's first */
	}
	ts->first_time = ptsim_tsc_to_perf(PTSIM_TSC0 + s->clock);
}

/* An overflow ends right after a packet that moved time (at its clock, so the
 * time of what follows is what it would have been): OVF, FUP(resume ip). */
static void end_loss(struct synth *s, struct sth *t, uint64_t ip)
{
	if (!t->in_loss || t->loss_left || !t->enabled)
		return;
	t->in_loss = 0;
	emit_cyc(s, t);
	emit_simple(s, t, ppt_ovf);
	t->last_ip = 0;
	emit_ip(s, t, ppt_fup, ip, 0);
	t->rs_top = t->rs_bot = 0;
	t->tnt_n = 0;
	t->tnt_bits = 0;
	/* libipt forgets its CYC calibration at OVF: a PSB+ (CBR) restores it. */
	emit_psb(s, t, 1, ip);
	mark_time(s, t);
}

static void do_insn(struct synth *s, struct sth *t, const struct ptsim_ev *e, uint64_t gidx)
{
	struct ptsim_tstream *ts = &s->res->ts[t->ts];
	uint64_t idx = t->ninsn++;
	if (idx == t->win_start && !t->traced)
		window_start(s, t, e->ip);
	for (int i = 0; i < s->o->nfaults; i++) {
		const struct ptsim_fault *f = &s->o->faults[i];
		if (f->at != gidx || !t->traced)
			continue;
		ts->fault_offset[i] = ts->len;
		if (f->kind == PTSIM_FAULT_OVERFLOW) {
			t->loss_armed = 1;
			t->loss_left = f->len;
		}
	}
	if (t->in_loss && t->loss_left)
		t->loss_left--;
	if (!t->enabled) {
		enable(s, t, e->ip);
		end_loss(s, t, e->ip);
	}
	s->clock += PTSIM_CYC_INSN;
	struct cls *c = classify(s, e->ip);
	if (!c)
		return;
	int emitted = 0;
	uint64_t next = e->next, fall = e->ip + c->len;
	switch (c->kind) {
	case K_JCC:
		add_tnt(s, t, next != fall);
		if (next != fall)
			add_branch(s, t, MTEV_BR_JCC, e->ip, next, t->cur_slot);
		emitted = t->tnt_n == 0;
		break;
	case K_JMP:
		add_branch(s, t, MTEV_BR_JUMP, e->ip, next, t->cur_slot);
		break;
	case K_CALL:
		if (!c->nopush)
			rs_push(t, fall);
		add_branch(s, t, MTEV_BR_CALL, e->ip, next, t->cur_slot);
		break;
	case K_JMPI:
	case K_CALLI:
		if (c->kind == K_CALLI)
			rs_push(t, fall);
		flush_tnt(s, t);
		emit_cyc(s, t);
		emit_ip(s, t, ppt_tip, next, 0);
		mark_time(s, t);
		add_branch(s, t, c->kind == K_CALLI ? MTEV_BR_CALL : MTEV_BR_JUMP, e->ip, next, t->cur_slot);
		emitted = 1;
		break;
	case K_RET:
		if (!s->o->noretcomp && !t->in_loss && rs_pop_if(t, next)) {
			/* The TNT packet goes out at once: a return then has the
			 * same time compressed or not, so clearing the return
			 * stack (PSB, OVF) or --noretcomp never moves time. */
			add_tnt(s, t, 1);
			flush_tnt(s, t);
			emitted = 1;
		} else {
			flush_tnt(s, t);
			emit_cyc(s, t);
			emit_ip(s, t, ppt_tip, next, 0);
			mark_time(s, t);
			emitted = 1;
		}
		add_branch(s, t, MTEV_BR_RETURN, e->ip, next, t->cur_slot);
		break;
	case K_SYS:
		flush_tnt(s, t);
		emit_ip(s, t, ppt_tip_pgd, 0, 1);
		after_disable(s, t);
		add_branch(s, t, MTEV_BR_SYSCALL, e->ip, 0, t->cur_slot);
		t->enabled = 0;
		t->dis_async = 0;
		s->clock += PTSIM_CYC_SYSCALL;
		open_sys(s, t, "[syscall]", MTEV_SPAN_SYSCALL | MTEV_SPAN_UNTRACED, e->ip);
		break;
	default:
		break;
	}
	if (c->kind != K_SYS)
		t->next_ip = next;
	/* Spans: calls push; a frame ends when the stack pointer rises above
	 * its return address (ret, longjmp, unwinding, sigreturn). */
	if (c->kind == K_CALL || c->kind == K_CALLI) {
		struct frame *f = push_frame(s, t);
		if (f) {
			struct cls *tc = classify(s, next);
			f->func = next;
			f->callsite = e->ip;
			f->slotaddr = e->sp;
			f->ret = fall;
			f->bslot = t->cur_slot;
			f->stub = tc && tc->stub;
		}
	} else {
		int popped = 0;
		while (t->nst && t->st[t->nst - 1].slotaddr < e->sp) {
			pop_frame(s, t, t->cur_slot, 0);
			popped = 1;
		}
		if (c->kind == K_RET && !popped && t->nst == 1 && t->st[0].slotaddr == UINT64_MAX) {
			/* Return past the outermost known frame: its caller is
			 * discovered, live since the thread's trace began. */
			int32_t d = t->st[0].depth - 1;
			pop_frame(s, t, t->cur_slot, 0);
			struct frame *f = push_frame(s, t);
			if (f) {
				uint64_t fn = func_of(s, next);
				f->func = fn ? fn : next;
				f->slotaddr = UINT64_MAX;
				f->bslot = t->first_slot;
				f->bseq = -(++t->disc);
				f->depth = d;
				f->flags = MTEV_SPAN_INFERRED_START;
			}
		} else if ((c->kind == K_JMP || c->kind == K_JMPI) && t->nst) {
			struct cls *tc = classify(s, next);
			struct frame *cf = &t->st[t->nst - 1];
			if (cf->stub) {
				/* Stubs are invisible: the frame entered through a
				 * stub is its target's from the stub's entry on. */
				if (tc && !tc->stub) {
					cf->func = tc->func ? tc->func : next;
					cf->stub = 0;
				}
			} else if (tc && tc->stub && !c->stub) {
				/* A jump into a stub: a tail call to its target. */
				tail_call(s, t, next, e->ip, 1);
			} else if (tc && tc->func == next && c->func != next && !tc->cold) {
				/* (a .cold part is its function's code, reached by a
				 * jump from it or by the unwinder: never a call) */
				/* A tail call: the frame now runs another function. */
				tail_call(s, t, next, e->ip, 0);
			}
		}
	}
	if (emitted && t->in_loss)
		end_loss(s, t, next);
	if (t->loss_armed && emitted) {
		t->loss_armed = 0;
		t->in_loss = 1;
	}
	if (emitted)
		maybe_psb(s, t, next);
}

/* The call chain at the thread's end, as an unwinder stopped there sees it:
 * the next ip, then the return address of each frame from the top down, up to
 * the first frame whose return address the truth does not know (the root, a
 * frame a return discovered, a signal handler). */
static void end_chain(struct synth *s, struct sth *t, struct ptsim_tstream *ts)
{
	if (!t->nst || !t->have_slot)
		return;
	uint64_t *c = malloc((t->nst + 1) * sizeof *c);
	if (!c) {
		s->oom = 1;
		return;
	}
	size_t n = 0;
	c[n++] = t->next_ip;
	for (size_t k = t->nst; k-- > 1 && t->st[k].ret;)
		c[n++] = t->st[k].ret;
	ts->chain = c;
	ts->nchain = (uint32_t)n;
	ts->chain_slot = t->cur_slot;
}

static void do_end(struct synth *s, struct sth *t, const struct ptsim_ev *e)
{
	(void)e;
	if (!t->traced)
		return;
	if (t->in_loss) {
		t->in_loss = 0;
		emit_cyc(s, t);
		emit_simple(s, t, ppt_ovf);
		t->last_ip = 0;
		if (t->enabled) {
			emit_ip(s, t, ppt_fup, t->next_ip, 0);
			mark_time(s, t);
		}
	}
	if (t->enabled) {
		async_disable(s, t, t->next_ip);
		add_branch(s, t, MTEV_BR_TRACE_END, t->next_ip, 0, t->cur_slot);
		t->enabled = 0;
	} else if (t->started) {
		add_branch(s, t, MTEV_BR_TRACE_END, 0, 0, t->cur_slot);
	}
	struct ptsim_tstream *ts = &s->res->ts[t->ts];
	ts->end_time = ptsim_tsc_to_perf(PTSIM_TSC0 + s->clock);
	end_chain(s, t, ts);
	if (t->sys_open) {
		add_span(s, t, &t->sys, t->cur_slot, MTEV_SPAN_OPEN_AT_END);
		t->sys_open = 0;
	}
	while (t->nst)
		pop_frame(s, t, t->cur_slot, MTEV_SPAN_OPEN_AT_END);
}

static void do_signal(struct synth *s, struct sth *t, const struct ptsim_ev *e)
{
	if (t->enabled && !(e->flags & PTSIM_F_INSYSCALL)) {
		async_disable(s, t, e->ip);
		after_disable(s, t);
		add_branch(s, t, MTEV_BR_INTERRUPT, e->ip, 0, t->cur_slot);
		open_sys(s, t, "[interrupt]", MTEV_SPAN_INTERRUPT | MTEV_SPAN_UNTRACED, 0);
	}
	s->clock += PTSIM_CYC_SIGNAL;
	if (t->npend < 8) {
		t->pend[t->npend].func = e->next;
		t->pend[t->npend].slotaddr = e->sp;
		t->npend++;
	}
}

/* Lost bytes are holes in the AUX offsets (as when perf loses data): the
 * stream is cut into AUX pieces around them; the piece before a truncation is
 * flagged truncated.  Corruption overwrites bytes in place. */
struct hole {
	uint64_t a, b;
	int truncated;
};

static int hole_cmp(const void *x, const void *y)
{
	const struct hole *p = x, *q = y;
	return p->a < q->a ? -1 : p->a > q->a;
}

static void apply_faults(struct synth *s)
{
	for (size_t i = 0; i < s->nth; i++) {
		struct sth *t = &s->th[i];
		struct ptsim_tstream *ts = &s->res->ts[t->ts];
		struct hole h[PTSIM_MAX_FAULTS];
		int nh = 0;
		for (int k = 0; k < s->o->nfaults; k++) {
			const struct ptsim_fault *f = &s->o->faults[k];
			uint64_t off = ts->fault_offset[k];
			if (off == UINT64_MAX || off > ts->len)
				continue;
			if (f->kind == PTSIM_FAULT_DROP) {
				uint64_t n = f->len < ts->len - off ? f->len : ts->len - off;
				h[nh++] = (struct hole){off, off + n, 0};
			} else if (f->kind == PTSIM_FAULT_CORRUPT) {
				/* 02 04: an extended opcode no packet uses. */
				for (uint64_t j = 0; j < f->len && off + j < ts->len; j++)
					ts->pt[off + j] = (j & 1) ? 0x04 : 0x02;
			} else if (f->kind == PTSIM_FAULT_GARBLE) {
				/* bytes of an xorshift64 seeded by the fault's
				 * instruction and offset: corruption that does not
				 * announce itself (most random bytes are valid
				 * packets: TNT, CYC, TIP...) */
				uint64_t x = (f->at * 0x9e3779b97f4a7c15ull) ^ (off + 1) ^ 0x6a09e667f3bcc908ull;
				for (uint64_t j = 0; j < f->len && off + j < ts->len; j++) {
					x ^= x << 13;
					x ^= x >> 7;
					x ^= x << 17;
					ts->pt[off + j] = (uint8_t)(x >> 32);
				}
			} else if (f->kind == PTSIM_FAULT_TRUNCATE) {
				size_t cut = ts->len;
				for (size_t j = 0; j < t->npsbs; j++)
					if (t->psbs[j] > off) {
						cut = t->psbs[j];
						break;
					}
				h[nh++] = (struct hole){off, cut, 1};
			}
		}
		if (!nh || !ts->len)
			continue;
		qsort(h, (size_t)nh, sizeof h[0], hole_cmp);
		struct ptsim_aux *a = calloc((size_t)nh + 1, sizeof(*a));
		if (!a) {
			s->oom = 1;
			return;
		}
		size_t na = 0;
		uint64_t pos = 0;
		for (int k = 0; k < nh; k++) {
			if (h[k].b <= pos)
				continue;
			if (h[k].a > pos) {
				a[na++] = (struct ptsim_aux){pos, h[k].a - pos, 0, ts->end_time};
			}
			if (h[k].truncated && na)
				a[na - 1].flags |= PTSIM_AUX_TRUNCATED;
			pos = h[k].b > pos ? h[k].b : pos;
		}
		if (pos < ts->len)
			a[na++] = (struct ptsim_aux){pos, ts->len - pos, 0, ts->end_time};
		free(ts->aux);
		ts->aux = a;
		ts->naux = na;
	}
}

int ptsim_synth(struct ptsim_result *res, const struct ptsim_run *run,
		const struct ptsim_synth_opts *o, char *err, size_t errlen)
{
	struct synth s;
	memset(&s, 0, sizeof s);
	memset(res, 0, sizeof(*res));
	s.run = run;
	s.o = o;
	s.res = res;
	s.err = err;
	s.errlen = errlen;
	int rc = -1;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &s.cs) != CS_ERR_OK) {
		snprintf(err, errlen, "capstone: cannot open the x86-64 disassembler");
		return -1;
	}
	cs_option(s.cs, CS_OPT_DETAIL, CS_OPT_ON);
	s.ctmask = (1u << 16) - 1;
	s.ct = calloc(s.ctmask + 1, sizeof(*s.ct));
	pt_config_init(&s.cfg);
	s.cfg.begin = s.encbuf;
	s.cfg.end = s.encbuf + sizeof s.encbuf;
	s.enc = pt_alloc_encoder(&s.cfg);
	s.th = calloc(run->nthreads ? run->nthreads : 1, sizeof(*s.th));
	res->ts = calloc(run->nthreads ? run->nthreads : 1, sizeof(*res->ts));
	if (!s.ct || !s.enc || !s.th || !res->ts) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	res->nts = run->nthreads;
	s.nth = run->nthreads;
	for (size_t i = 0; i < run->nthreads; i++) {
		s.th[i].tid = run->threads[i].tid;
		s.th[i].ts = i;
		res->ts[i].tid = run->threads[i].tid;
		for (int k = 0; k < PTSIM_MAX_FAULTS; k++)
			res->ts[i].fault_offset[k] = UINT64_MAX;
	}
	/* Per-thread instruction counts give each window's start. */
	for (size_t i = 0; i < run->nev; i++)
		if (run->ev[i].kind == PTSIM_EV_INSN) {
			struct sth *t = th_of(&s, run->ev[i].tid);
			if (t)
				t->total++;
		}
	for (size_t i = 0; i < s.nth; i++) {
		struct sth *t = &s.th[i];
		t->win_start = o->window && t->total > o->window ? t->total - o->window : 0;
	}
	res->trigger_slot = UINT64_MAX;
	res->config = 1ull /* pt */ | 2ull /* cyc */ | (1ull << 10) /* tsc */ |
		      (1ull << 13) /* branch */ | (o->noretcomp ? 1ull << 11 : 0);
	{
		unsigned p = 0;
		while (p < 15 && (2048ull << p) < o->psb_period)
			p++;
		res->config |= (uint64_t)p << 24;
	}
	uint64_t gidx = 0;
	for (size_t i = 0; i < run->nev && !s.oom; i++) {
		const struct ptsim_ev *e = &run->ev[i];
		struct sth *t = e->kind == PTSIM_EV_MAP ? NULL : th_of(&s, e->tid);
		if (e->kind != PTSIM_EV_MAP && !t)
			continue;
		switch (e->kind) {
		case PTSIM_EV_INSN:
			do_insn(&s, t, e, gidx++);
			break;
		case PTSIM_EV_SYSRET:
			t->next_ip = e->ip;
			break;
		case PTSIM_EV_SIGNAL:
			do_signal(&s, t, e);
			break;
		case PTSIM_EV_THREAD:
			res->ts[t->ts].start_time = ptsim_tsc_to_perf(PTSIM_TSC0 + s.clock);
			t->next_ip = e->ip;
			/* Threads that exist when stepping begins were entered
			 * before: their outermost frame's start is inferred. */
			t->root_inferred = run->start_symbol[0] && e->arg == 0;
			break;
		case PTSIM_EV_END:
			do_end(&s, t, e);
			break;
		case PTSIM_EV_STOP:
			res->trigger_tid = e->tid;
			res->trigger_slot = t->have_slot ? t->cur_slot : UINT64_MAX;
			break;
		default:
			break;
		}
	}
	if (s.oom) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	res->end_clock = s.clock;
	for (size_t i = 0; i < res->nts; i++) {
		struct ptsim_tstream *ts = &res->ts[i];
		if (!ts->naux && ts->len) {
			ts->aux = calloc(1, sizeof(*ts->aux));
			if (!ts->aux) {
				snprintf(err, errlen, "out of memory");
				goto out;
			}
			ts->aux[0] = (struct ptsim_aux){0, ts->len, 0, ts->end_time};
			ts->naux = 1;
		}
	}
	apply_faults(&s);
	if (s.oom) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* Unresolved slots (cannot happen: every TNT is flushed at the end). */
	for (size_t i = 0; i < res->ntimes; i++)
		if (res->times[i] == UINT64_MAX)
			res->times[i] = s.clock;
	rc = 0;
out:
	for (size_t i = 0; i < s.nth; i++) {
		free(s.th[i].st);
		free(s.th[i].psbs);
	}
	for (size_t i = 0; i < s.nsi; i++)
		if (s.si[i].ok)
			elfinfo_fini(&s.si[i].ei);
	free(s.si);
	free(s.th);
	free(s.ct);
	if (s.enc)
		pt_free_encoder(s.enc);
	cs_close(&s.cs);
	return rc;
}

void ptsim_result_fini(struct ptsim_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->nts; i++) {
		free(res->ts[i].pt);
		free(res->ts[i].aux);
		free(res->ts[i].chain);
	}
	free(res->ts);
	free(res->br);
	free(res->spans);
	free(res->times);
	memset(res, 0, sizeof(*res));
}
