/* ptd_resync: going on after damaged trace without waiting for the next
 * PSB.  libipt can synchronize at a PSB only, so a decode error (or data
 * lost at the start of a segment) used to cost everything up to the next
 * PSB.  Between the damage and that PSB the recording still holds good
 * packets; some of them say where the code went with all its address bits
 * (a TIP or TIP.PGE whose IP does not depend on the last IP).  From such a
 * packet on, the flow is known exactly, and when the recording's timing
 * allows it, so is every branch's time.  This file finds that packet and
 * hands libipt a copy of the segment that begins there, behind a PSB+
 * made for it: libipt does the packet and flow work as after any PSB.
 *
 * The rules (docs/decode.md, "Resynchronizing before the next PSB"):
 *
 * - where packets begin: from every offset after the damage, packets are
 *   parsed up to the next PSB; the starts whose packets end exactly at the
 *   PSB are the candidates.  The true packet boundaries after the damage
 *   are one of these chains.  All candidates that begin within 32 bytes of
 *   the first (a lost stretch ends within one packet, at most 16 bytes,
 *   of the first true boundary) must pass through one offset: from there
 *   on, every chain is the true one.  No such offset: no resync.
 * - the resync packet: the first TIP or TIP.PGE on that chain whose IP is
 *   independent of the last IP (sext-48, update-48 in canonical form, full).
 *   It becomes a TIP.PGE (tracing starts there: a trace-start, the branch
 *   that led there is in the gap); the return stack is empty, so a
 *   compressed return to a call before it is an error (err_keeps keeps
 *   what came before it, nothing is guessed).
 * - time: only in a cycle-accurate recording (CYC on, core:bus ratio at the
 *   PSB equal to the nominal one, so one CYC cycle is one TSC tick) with no
 *   other timing packet between the resync packet and the PSB: the resync
 *   packet's time is then the PSB's TSC minus the cycles counted after it,
 *   the time a decode from the previous PSB gives it when the cycle counts
 *   add up to the TSC (as mt-ptsim's model makes them).  Any other timing:
 *   no resync (the time is not known exactly).
 * - mode: the MODE.exec of the PSB's PSB+ (none between the resync packet
 *   and the PSB), or the last one before the resync packet. */
#include "ptd_int.h"

#include <stdlib.h>
#include <string.h>

#include "vec.h"

/* a lost stretch ends within one packet of a true boundary (PSB: 16 bytes) */
#define RS_WINDOW 32
/* the longest stretch looked at (perf's default PSB period is 16 KB):
 * every offset in it is parsed once */
#define RS_MAX (1u << 20)
/* the PSB+ made for the resync: PSB 16, MODE 2, TSC 8, CBR 4, PSBEND 2 */
#define RS_PSBPLUS 32

struct rs_psb { /* what the PSB+ at the next PSB says */
	int have_tsc, have_cbr, have_mode, have_fup;
	uint64_t tsc, fup; /* fup: where tracing is (none: tracing is off) */
	uint8_t cbr;
	struct pt_packet_mode_exec mode;
};

static int rs_read_psbplus(struct pt_packet_decoder *pd, uint64_t off, struct rs_psb *ps)
{
	struct pt_packet p;
	int n, k;
	memset(ps, 0, sizeof *ps);
	if (pt_pkt_sync_set(pd, off) < 0)
		return -1;
	for (k = 0; k < 64; k++) {
		n = pt_pkt_next(pd, &p, sizeof p);
		if (n < 0)
			return -1;
		switch (p.type) {
		case ppt_psbend:
			return ps->have_tsc && ps->have_cbr && ps->have_mode ? 0 : -1;
		case ppt_tsc:
			ps->have_tsc = 1;
			ps->tsc = p.payload.tsc.tsc;
			break;
		case ppt_cbr:
			ps->have_cbr = 1;
			ps->cbr = p.payload.cbr.ratio;
			break;
		case ppt_mode:
			if (p.payload.mode.leaf == pt_mol_exec) {
				ps->have_mode = 1;
				ps->mode = p.payload.mode.bits.exec;
			}
			break;
		case ppt_fup:
			/* the last IP is 0 after a PSB: the payload is the
			 * address, sign-extended from bit 47 */
			if (p.payload.ip.ipc == pt_ipc_suppressed)
				return -1;
			ps->have_fup = 1;
			ps->fup = p.payload.ip.ip;
			if (p.payload.ip.ipc != pt_ipc_full && (ps->fup >> 47) & 1)
				ps->fup |= 0xffffULL << 48;
			break;
		case ppt_psb:
		case ppt_pad:
		case ppt_tma:
		case ppt_vmcs:
		case ppt_pip:
		case ppt_mnt:
		case ppt_cyc:
		case ppt_mtc:
			break;
		default:
			return -1; /* not a PSB+ this rule knows */
		}
	}
	return -1;
}

/* Whether an IP packet's address needs nothing of the last IP. */
static int rs_full_ip(const struct pt_packet_ip *ip)
{
	switch (ip->ipc) {
	case pt_ipc_sext_48:
	case pt_ipc_full:
		return 1;
	case pt_ipc_update_48:
		/* bits 63:48 come from the last IP; an executed address is
		 * canonical, so they are bit 47's copies: known unless the
		 * address is in the kernel half (not traced here) */
		return !(ip->ip >> 47);
	default:
		return 0;
	}
}

/* Whether a packet after the resync packet puts its time or state out of
 * the rule's reach: other timing, a mode change, another PSB. */
static int rs_bad_after(const struct pt_packet *p)
{
	switch (p->type) {
	case ppt_mode:
		return p->payload.mode.leaf == pt_mol_exec;
	case ppt_tsc:
	case ppt_mtc:
	case ppt_tma:
	case ppt_cbr:
	case ppt_ovf:
	case ppt_psb:
	case ppt_psbend:
	case ppt_pip:
	case ppt_vmcs:
	case ppt_stop:
	case ppt_unknown:
		return 1;
	default:
		return 0;
	}
}

/* The address with low 32 bits @low in process @pid's executable mappings,
 * when there is exactly one (1); 0 when none or several, or the process
 * has anonymous executable memory (JIT code) that no mapping names. */
static int rs_ip32(struct ptd *d, uint32_t pid, uint64_t low, uint64_t *ip)
{
	const struct proc *p = NULL;
	unsigned n = 0;
	size_t i;
	low &= 0xffffffffULL;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == pid)
			p = &d->proc[i];
	if (!p || p->anon_exec)
		return 0;
	for (i = 0; i < p->nmaps && n < 2; i++) {
		uint64_t a = (p->maps[i].start & ~0xffffffffULL) | low;
		if (a < p->maps[i].start)
			a += 1ULL << 32;
		for (; a >= p->maps[i].start && a < p->maps[i].end && n < 2; a += 1ULL << 32) {
			if (!n || a != *ip)
				n++;
			*ip = a;
		}
	}
	return n == 1;
}

/* Encodes @p with @enc: 0, or -1 (no room). */
static int rs_put(struct pt_encoder *enc, const struct pt_packet *p)
{
	return pt_enc_next(enc, p) < 0 ? -1 : 0;
}

/* Where packets begin again in [@lo, @psb): *@nxtp[x - lo] is the offset
 * (- lo) after the packet at x when packets from x end exactly at the PSB,
 * 0 otherwise; *@bp the first offset that every such chain starting within
 * RS_WINDOW of the first one passes through (chains only go forward, so
 * it is at or after every start).  1 found, 0 not, -1 out of memory. */
static int rs_meet(struct pt_packet_decoder *pd, uint64_t lo, uint64_t psb, uint32_t **nxtp,
		   uint64_t *bp)
{
	struct pt_packet p;
	uint32_t *nxt = calloc(psb - lo, sizeof *nxt), *cnt = calloc(psb - lo + 1, sizeof *cnt);
	uint32_t nstart = 0;
	uint64_t x, hi, b;
	int n;

	*nxtp = nxt;
	if (!nxt || !cnt) {
		free(cnt);
		return -1;
	}
	for (x = psb; x-- > lo;) {
		uint64_t e;
		if (pt_pkt_sync_set(pd, x) < 0)
			continue;
		n = pt_pkt_next(pd, &p, sizeof p);
		if (n <= 0)
			continue;
		e = x + (uint64_t)n;
		if (e == psb || (e < psb && nxt[e - lo]))
			nxt[x - lo] = (uint32_t)(e - lo);
	}
	for (x = lo; x < psb && !nxt[x - lo]; x++)
		;
	hi = x + RS_WINDOW < psb ? x + RS_WINDOW : psb;
	for (; x < hi; x++) {
		uint64_t y;
		if (!nxt[x - lo])
			continue;
		nstart++;
		for (y = x; y < psb; y = lo + nxt[y - lo])
			cnt[y - lo]++;
		cnt[psb - lo]++;
	}
	for (b = lo; nstart && b <= psb && cnt[b - lo] != nstart; b++)
		;
	free(cnt);
	*bp = b;
	return nstart && b < psb;
}

/* The copy libipt decodes after a resync: a PSB+ made for it (tracing off,
 * no FUP; the mode, the time counted back from the next PSB's TSC, its core
 * ratio), the resync packet @rp (at @rsp) as a TIP.PGE, the segment's bytes
 * after it up to the PSB, and when tracing is on there, FUP + TIP.PGD so
 * that libipt stops exactly at the PSB's instruction.  *@bias: a copy
 * offset + bias is the segment offset; *@size its bytes.  NULL: no copy
 * (d->err set when memory ran out). */
static uint8_t *rs_copy(struct ptd *d, struct pt_packet_decoder *pd, const uint8_t *base,
			uint64_t rsp, uint64_t psb, const struct rs_psb *ps,
			struct pt_packet_mode_exec mode, uint64_t ncyc, const struct pt_packet *rp,
			int64_t *bias, size_t *size)
{
	struct pt_config ec;
	struct pt_encoder *enc;
	struct pt_packet e, p;
	uint64_t off = 0, eoff = 0;
	size_t cap;
	uint8_t *buf;
	int n, ok;

	if (pt_pkt_sync_set(pd, rsp) < 0 || (n = pt_pkt_next(pd, &p, sizeof p)) <= 0)
		return NULL;
	cap = RS_PSBPLUS + 16 + (size_t)(psb - rsp - (uint64_t)n) + 16;
	buf = malloc(cap);
	if (!buf) {
		ptd_fail(d, PTD_ESYS, "out of memory");
		return NULL;
	}
	pt_config_init(&ec);
	ec.begin = buf;
	ec.end = buf + cap;
	enc = pt_alloc_encoder(&ec);
	if (!enc)
		goto fail;
	memset(&e, 0, sizeof e);
	e.type = ppt_psb;
	ok = rs_put(enc, &e) == 0;
	e.type = ppt_mode;
	e.payload.mode.leaf = pt_mol_exec;
	e.payload.mode.bits.exec = mode;
	ok = ok && rs_put(enc, &e) == 0;
	memset(&e, 0, sizeof e);
	e.type = ppt_tsc;
	e.payload.tsc.tsc = ps->tsc - ncyc;
	ok = ok && rs_put(enc, &e) == 0;
	e.type = ppt_cbr;
	e.payload.cbr.ratio = ps->cbr;
	ok = ok && rs_put(enc, &e) == 0;
	memset(&e, 0, sizeof e);
	e.type = ppt_psbend;
	ok = ok && rs_put(enc, &e) == 0;
	e = *rp;
	ok = ok && rs_put(enc, &e) == 0;
	ok = ok && pt_enc_get_offset(enc, &off) >= 0;
	pt_free_encoder(enc);
	if (!ok)
		goto fail;
	/* buffer offset + bias = segment offset (the PSB+ sits before the
	 * resync packet's end) */
	*bias = (int64_t)(rsp + (uint64_t)n) - (int64_t)off;
	memcpy(buf + off, base + rsp + (uint64_t)n, (size_t)(psb - rsp - (uint64_t)n));
	off += psb - rsp - (uint64_t)n;
	if (ps->have_fup) {
		/* tracing is on at the PSB, at ps->fup: the copy ends there
		 * with an asynchronous disable, libipt decodes up to that
		 * instruction exactly, and the segment's decoder goes on at
		 * the PSB */
		ec.begin = buf + off;
		ec.end = buf + cap;
		enc = pt_alloc_encoder(&ec);
		if (!enc)
			goto fail;
		memset(&e, 0, sizeof e);
		e.type = ppt_fup;
		e.payload.ip.ipc = pt_ipc_sext_48;
		e.payload.ip.ip = ps->fup;
		ok = rs_put(enc, &e) == 0;
		memset(&e, 0, sizeof e);
		e.type = ppt_tip_pgd;
		e.payload.ip.ipc = pt_ipc_suppressed;
		ok = ok && rs_put(enc, &e) == 0;
		ok = ok && pt_enc_get_offset(enc, &eoff) >= 0;
		pt_free_encoder(enc);
		if (!ok)
			goto fail;
		off += eoff;
	}
	*size = (size_t)off;
	return buf;
fail:
	free(buf);
	return NULL;
}

/* q->dec becomes a decoder of the copy @buf (@cfg), the segment's own kept
 * in q->segdec; 1, or 0 (d->err set when it could not be made). */
static int rs_start(struct ptd *d, struct ptq *q, const struct pt_config *cfg, uint8_t *buf,
		    uint64_t psb, uint64_t rsp)
{
	struct pt_block_decoder *dec = pt_blk_alloc_decoder(cfg);
	int st;
	if (!dec) {
		ptd_fail(d, PTD_ESYS, "cannot allocate a PT decoder");
		return 0;
	}
	if (q->segdec)
		pt_blk_free_decoder(q->dec); /* an earlier copy */
	else
		q->segdec = q->dec;
	q->dec = dec;
	free(q->rsbuf);
	q->rsbuf = buf;
	q->rs_psb = psb;
	q->rs_start = rsp;
	q->rs_active = 1;
	if (q->img)
		pt_blk_set_image(q->dec, q->img);
	st = pt_blk_sync_set(q->dec, 0);
	if (st < 0) {
		/* cannot happen with the PSB+ rs_copy makes; the queue syncs
		 * at the next PSB of the copy */
		q->state = Q_SYNC;
		return 0;
	}
	q->status = st;
	d->st->resyncs++;
	return 1;
}

/* The TSC of the PSB+ at the first PSB at or after @lo in @q's current
 * segment: 1 and *@tsc if that PSB+ has one, else 0 (none, or no PSB). */
int q_next_psb_tsc(struct ptd *d, struct ptq *q, uint64_t lo, uint64_t *tsc)
{
	struct pt_config cfg;
	struct pt_packet_decoder *pd;
	struct pt_packet p;
	size_t a = 0, b = q->npsbs;
	int k, found = 0;

	while (a < b) { /* the first PSB at or after lo (an error at each PSB: not quadratic) */
		size_t m = a + (b - a) / 2;
		if (q->psbs[m] < lo)
			a = m + 1;
		else
			b = m;
	}
	if (a == q->npsbs)
		return 0;
	ptd_seg_config(d, q, &cfg);
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd)
		return 0;
	if (pt_pkt_sync_set(pd, q->psbs[a]) >= 0)
		for (k = 0; k < 64; k++) {
			if (pt_pkt_next(pd, &p, sizeof p) < 0 || p.type == ppt_psbend)
				break;
			if (p.type == ppt_tsc) {
				*tsc = p.payload.tsc.tsc;
				found = 1;
				break;
			}
		}
	pt_pkt_free_decoder(pd);
	return found;
}

/* The queue's current segment has damage ending somewhere after @lo (an
 * offset in the segment: the byte after a bad packet, or the segment's
 * first byte after lost data).  Sets up q->dec to go on from the resync
 * packet and returns 1, or returns 0 (no resync: the caller syncs at the
 * next PSB as before). */
int q_resync(struct ptd *d, struct ptq *q, uint64_t lo)
{
	const struct seg *s = &q->segs[q->curseg];
	const uint8_t *base = q->stream + s->begin;
	uint64_t len = s->end - s->begin, psb = UINT64_MAX, x, b, rsp = 0, ncyc = 0, ip = 0;
	struct {
		uint64_t off, cyc; /* cyc: counted after the packet */
		int bad;	   /* a packet rs_bad_after() refuses follows */
	} *ch = NULL;
	size_t m = 0, k;
	int64_t bias = 0;
	struct pt_config cfg;
	struct pt_packet_decoder *pd = NULL;
	struct pt_packet p, rp;
	struct rs_psb ps;
	struct pt_packet_mode_exec mode;
	int have_mode = 0, found = 0, ok = 0, n;
	uint32_t *nxt = NULL;
	uint8_t *buf = NULL;
	size_t i, size = 0;

	if (!d->opts->resync || !q->dec || (q->rsbuf && lo >= q->rs_psb))
		return 0; /* (a copy's end: its PSB is next) */
	d->st->resync_tries++;
	/* the next PSB */
	for (i = 0; i < q->npsbs; i++)
		if (q->psbs[i] >= lo) {
			psb = q->psbs[i];
			break;
		}
	if (psb == UINT64_MAX || psb - lo < 2 || psb - lo > RS_MAX)
		return 0;
	/* timing: cycle-accurate, and the config's nominal ratio known */
	if (!d->have_info || d->npriv <= 15 || !d->pt_attr || !(d->pt_attr->config & d->priv[14]))
		return 0;
	cfg = *pt_blk_get_config(q->segdec ? q->segdec : q->dec);
	cfg.begin = (uint8_t *)base;
	cfg.end = (uint8_t *)base + len;
	if (!cfg.nom_freq)
		return 0;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd)
		return ptd_fail(d, PTD_ESYS, "cannot allocate a PT packet decoder"), 0;
	if (rs_read_psbplus(pd, psb, &ps) < 0 || ps.cbr != cfg.nom_freq)
		goto out;

	n = rs_meet(pd, lo, psb, &nxt, &b);
	if (n < 0)
		ptd_fail(d, PTD_ESYS, "out of memory");
	if (n <= 0)
		goto out;
	d->st->resync_skipped += b - lo;

	/* the chain from b, and after each packet: the cycles counted, whether
	 * a packet the time rule does not cover follows */
	for (x = b; x < psb; x = lo + nxt[x - lo])
		m++;
	ch = malloc(m * sizeof *ch);
	if (!ch) {
		ptd_fail(d, PTD_ESYS, "out of memory");
		goto out;
	}
	for (k = 0, x = b; x < psb; x = lo + nxt[x - lo])
		ch[k++].off = x;
	for (k = m; k-- > 0;) {
		ch[k].cyc = k + 1 < m ? ch[k + 1].cyc : 0;
		ch[k].bad = k + 1 < m ? ch[k + 1].bad : 0;
		if (k + 1 < m) {
			if (pt_pkt_sync_set(pd, ch[k + 1].off) < 0 || pt_pkt_next(pd, &p, sizeof p) <= 0)
				goto out;
			if (p.type == ppt_cyc)
				ch[k].cyc += p.payload.cyc.value;
			else if (rs_bad_after(&p))
				ch[k].bad = 1;
		}
	}
	/* the first TIP or TIP.PGE whose address is known */
	for (k = 0; k < m && !found; k++) {
		if (pt_pkt_sync_set(pd, ch[k].off) < 0 || pt_pkt_next(pd, &p, sizeof p) <= 0)
			goto out;
		if (p.type == ppt_mode && p.payload.mode.leaf == pt_mol_exec) {
			have_mode = 1;
			mode = p.payload.mode.bits.exec;
		}
		if ((p.type != ppt_tip && p.type != ppt_tip_pge) || ch[k].bad || ch[k].cyc > ps.tsc)
			continue;
		ncyc = ch[k].cyc;
		if (rs_full_ip(&p.payload.ip)) {
			ip = p.payload.ip.ip;
			if (p.payload.ip.ipc != pt_ipc_full && (ip >> 47))
				ip |= 0xffffULL << 48;
			found = 1;
		} else if (p.payload.ip.ipc == pt_ipc_update_32) {
			/* the high bits: the one executable mapping of the
			 * process at that time with an address of these low bits */
			uint64_t t = ptd_conv(d, ps.tsc - ncyc);
			if (t > q->time)
				sb_apply_until(d, t);
			q_set_thread(d, q, t > q->time ? t : q->time);
			if (q->th >= 0 && rs_ip32(d, d->thr[q->th].pid == UINT32_MAX ? d->thr[q->th].tid : d->thr[q->th].pid,
						   p.payload.ip.ip, &ip))
				found = 1;
		}
		if (found) {
			rsp = ch[k].off;
			rp = p;
		}
	}
	if (!found)
		goto out;
	if (!have_mode)
		mode = ps.mode;
	rp.type = ppt_tip_pge;
	rp.payload.ip.ipc = pt_ipc_sext_48;
	rp.payload.ip.ip = ip;

	buf = rs_copy(d, pd, base, rsp, psb, &ps, mode, ncyc, &rp, &bias, &size);
	if (!buf)
		goto out;
	q->dec_bias = bias;
	q->rs_fup = ps.have_fup ? ps.fup : 0;
	cfg.begin = buf;
	cfg.end = buf + size;
	/* as q_open_seg: a block ends at every direct call and jump */
	cfg.flags.variant.block.end_on_call = 1;
	cfg.flags.variant.block.end_on_jump = 1;
	ok = rs_start(d, q, &cfg, buf, psb, rsp);
	if (q->rsbuf == buf)
		buf = NULL; /* the queue's now, even when it could not sync */
out:
	free(ch);
	free(nxt);
	free(buf);
	pt_pkt_free_decoder(pd);
	return ok;
}
