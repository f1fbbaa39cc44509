/* ptq: the project's PT query decoder (ptq.h; docs/decode.md, "The
 * project query decoder").
 *
 * The model (libipt 2.0.5's query decoder, as documented and observed):
 * the decoder keeps the kind of the packet at its position ("next") and,
 * after every query, reads ahead over status packets (timing, PAD, PSB+)
 * up to the next packet a query needs: a TNT or TIP, or a packet that
 * makes an event (TIP.PGE/PGD, MODE, CBR; a PSBEND or FUP or TIP with
 * events bound to it).  Events wait in three queues by the packet they
 * bind to (PSBEND for PSB+ status, TIP for MODE.Exec and an FUP's async
 * branch, FUP); a packet that completes events is decoded again, one
 * event at a time, until its queue is empty, and only then consumed.  The
 * time a query reports is the decoder's time when the query's own packet
 * was decoded (timing packets read ahead after it count for the next
 * query): TSC, CBR, CYC, MTC and TMA with libipt's arithmetic.  TNT
 * bits are cached one packet at a time, and no event is reported while
 * bits are left. */
#include "ptq.h"

#include <stddef.h>
#include <string.h>

enum {
	F_TIP = 1, F_TNT = 2, F_EVENT = 4, F_PSBEND = 8, F_FUP = 16, F_TIMING = 64, F_PAD = 128,
};

static const uint8_t pflags[P_MAX] = {
	[P_PAD] = F_PAD,       [P_PSB] = 0,		   [P_TIP] = F_TIP,
	[P_TNT8] = F_TNT,      [P_TNT64] = F_TNT,	   [P_PGE] = F_EVENT,
	[P_PGD] = F_EVENT,     [P_FUP] = F_FUP,	   [P_MODE] = F_EVENT,
	[P_PSBEND] = F_PSBEND, [P_TSC] = F_TIMING,	   [P_CBR] = F_TIMING | F_EVENT,
	[P_CYC] = F_TIMING,    [P_UNKNOWN] = 0,	   [P_OVF] = F_PSBEND | F_EVENT,
	[P_PIP] = F_EVENT,     [P_MTC] = F_TIMING,	   [P_TMA] = F_TIMING,
	[P_OEVENT] = F_EVENT,  [P_OHEAD] = F_EVENT,
};

enum { B_PSBEND, B_TIP, B_FUP };

#define FCR_SHR 8

int ptq_usable(const struct pt_config *cfg)
{
	/* an MTC period past 23 overflows libipt's 32-bit CTC arithmetic
	 * (only a damaged AUXTRACE_INFO gives one) */
	return !cfg->decode.callback && cfg->mtc_freq <= 23;
}

void ptq_init(struct ptqd *d, const struct pt_config *cfg)
{
	memset(d, 0, sizeof *d);
	d->begin = cfg->begin;
	d->end = cfg->end;
	d->nom_freq = cfg->nom_freq;
	d->mtc_freq = cfg->mtc_freq;
	d->ctc_num = cfg->cpuid_0x15_ebx;
	d->ctc_den = cfg->cpuid_0x15_eax;
	d->bdm70 = cfg->errata.bdm70;
	d->skd007 = cfg->errata.skd007;
	d->skl168 = cfg->errata.skl168;
	d->skz84 = cfg->errata.skz84;
	d->min_fcr = UINT64_MAX;
}

/* ---- the event queues ---- */

static struct pt_event *ev_one(struct ptqd *d)
{
	memset(&d->evq.one, 0, sizeof d->evq.one);
	return &d->evq.one;
}

static struct pt_event *ev_add(struct ptqd *d, int b)
{
	uint8_t i = d->evq.e[b], n = (uint8_t)((i + 1) % 8);
	if (d->evq.b[b] == (n + 1) % 8)
		return NULL; /* full: six events */
	d->evq.e[b] = n;
	memset(&d->evq.q[b][i], 0, sizeof d->evq.q[b][i]);
	return &d->evq.q[b][i];
}

static struct pt_event *ev_take(struct ptqd *d, int b)
{
	uint8_t i = d->evq.b[b];
	if (i == d->evq.e[b])
		return NULL;
	d->evq.b[b] = (uint8_t)((i + 1) % 8);
	return &d->evq.q[b][i];
}

static inline int ev_pending(const struct ptqd *d, int b)
{
	return d->evq.b[b] != d->evq.e[b];
}

/* ---- time ---- */

static void cal_reset(struct ptqd *d)
{
	d->fcr = d->max_fcr = d->cal_tsc = d->cyc_tsc = d->cyc_mtc = 0;
	d->min_fcr = UINT64_MAX;
	d->cal_ctc = 0;
	d->cal_mtc = d->skl168_check = 0;
}

static inline int cal_have(const struct ptqd *d)
{
	return d->min_fcr <= d->max_fcr;
}

static void cal_set(struct ptqd *d, uint64_t fcr)
{
	d->fcr = fcr;
	if (fcr < d->min_fcr)
		d->min_fcr = fcr;
	if (fcr > d->max_fcr)
		d->max_fcr = fcr;
}

/* a TSC: the time, whole (the CTC the next CYC counts from stays) */
static void time_tsc(struct ptqd *d, uint64_t tsc)
{
	d->time.have_tsc = 1;
	d->time.have_tma = d->time.have_mtc = 0;
	d->time.tsc = d->time.base = tsc;
	d->time.ctc = 0;
	d->time.fc = 0;
	d->time.lost_mtc = d->time.lost_cyc = 0;
}

static int time_cbr(struct ptqd *d, uint8_t cbr)
{
	if (!cbr)
		return -pte_bad_packet;
	d->time.have_cbr = 1;
	d->time.cbr = cbr;
	return 0;
}

/* a TSC in PSB+: calibrates from the cycles since the last TSC */
static int cal_header_tsc(struct ptqd *d, uint64_t tsc)
{
	uint64_t last = d->cal_tsc, cyc = d->cyc_tsc, delta;

	d->cal_tsc = tsc;
	d->cyc_tsc = 0;
	if (!last || !cyc || d->cal_mtc)
		return 0; /* MTCs calibrate, where there are */
	if (tsc < last) {
		tsc += 1ull << 56;
		if (tsc < last)
			return -pte_bad_packet;
	}
	delta = tsc - last;
	if (delta & ~(~0ull >> FCR_SHR))
		return -pte_internal;
	cal_set(d, (delta << FCR_SHR) / cyc);
	return 0;
}

static int cal_header_cbr(struct ptqd *d, uint8_t cbr)
{
	if (!d->nom_freq)
		return 0;
	if (!cbr)
		return -pte_bad_packet;
	cal_set(d, ((uint64_t)d->nom_freq << FCR_SHR) / cbr);
	return 0;
}

/* ---- MTC and TMA: the crystal clock (CTC) ----
 *
 * An MTC carries 8 bits of the CTC, bits mtc_freq and up; a TMA (after a
 * TSC) the CTC's low 16 bits and the fast counter (TSC) bits the TSC
 * lacked.  CTC ticks are TSC ticks * den / num (CPUID 0x15).  A bad
 * configuration (no ratio) is no error: that MTC or CYC just adds no
 * time (libipt's rule). */

/* the CTC ticks from @last to @ctc, one wrap of the MTC's bits corrected */
static int ctc_delta(const struct ptqd *d, uint32_t ctc, uint32_t last, uint32_t *delta)
{
	if (ctc < last) {
		ctc += 1u << (d->mtc_freq + 8);
		if (ctc < last)
			return -pte_bad_packet;
	}
	*delta = ctc - last;
	return 0;
}

static int ctc_to_fc(const struct ptqd *d, uint64_t ctc, uint64_t *fc)
{
	if (!d->ctc_num || !d->ctc_den)
		return -pte_bad_config;
	*fc = ctc * d->ctc_num / d->ctc_den;
	return 0;
}

/* an MTC calibrates: the fast counter over the cycles since the last one */
static int cal_mtc(struct ptqd *d, uint32_t ctc)
{
	uint64_t cyc = d->cyc_mtc, fc, fcr;
	uint32_t last = d->cal_ctc, delta;
	int check = d->skl168_check, err;

	d->skl168_check = 0;
	if (!d->cal_mtc) {
		d->cyc_mtc = 0;
		d->cal_ctc = ctc;
		d->cal_mtc = 1;
		return 0;
	}
	if (!cyc)
		return 0; /* the next MTC spans both periods */
	d->cyc_mtc = 0;
	d->cal_ctc = ctc;
	err = ctc_delta(d, ctc, last, &delta);
	if (err < 0)
		return err;
	err = ctc_to_fc(d, delta, &fc);
	if (err < 0)
		return err;
	if (fc & ~(~0ull >> FCR_SHR))
		return -pte_internal;
	fcr = (fc << FCR_SHR) / cyc;
	/* SKL168: a CYC right before a PSB may be lost.  The first MTC after
	 * a PSB does not calibrate if MTCs were lost or a CYC wrap (4096
	 * cycles) seems to be */
	if (check) {
		if ((1u << d->mtc_freq) < delta)
			return 0;
		if (d->mtc_freq < 10 && cal_have(d) &&
		    (d->fcr * (cyc + 0xf00)) >> FCR_SHR < fc)
			return 0;
	}
	cal_set(d, fcr);
	return 0;
}

/* an MTC moves the time to its CTC */
static int time_mtc(struct ptqd *d, uint32_t ctc)
{
	struct ptq_time *t = &d->time;
	uint32_t last = t->ctc, delta;
	uint64_t fc;
	int had = t->have_mtc, err;

	if (t->have_tsc && !t->have_tma)
		return 0; /* between a TSC and its TMA */
	if (t->fc || t->lost_cyc || !had)
		t->ctc_cyc = ctc;
	t->have_mtc = 1;
	t->fc = 0;
	t->ctc = ctc;
	t->lost_cyc = 0;
	if (!had) {
		uint32_t hi = ctc & ~0xffffu;
		/* the first after a TMA: the CTC's high bits from this MTC
		 * (no MTC lost between them), else nothing to go by */
		if (!t->have_tma)
			return 0;
		if (last & ~0xffffu)
			return -pte_internal;
		if ((ctc & 0xffffu) < last) {
			hi -= 1u << 16;
			hi &= 0xffu << d->mtc_freq;
		}
		last |= hi;
	}
	err = ctc_delta(d, ctc, last, &delta);
	if (err < 0) {
		t->lost_mtc++;
		return err;
	}
	err = ctc_to_fc(d, delta, &fc);
	if (err < 0)
		return err;
	t->tsc = t->base = t->base + fc;
	return 0;
}

/* a CYC: cycles since the last CYC-eligible packet, in fast-counter units
 * by the calibration.  The first after an MTC that counts over earlier
 * MTC periods gives those periods' estimated cycles back. */
static inline __attribute__((always_inline)) int time_cyc(struct ptqd *d, uint64_t cyc)
{
	struct ptq_time *t = &d->time;
	uint64_t fcr = cal_have(d) ? d->fcr : 0;

	d->cyc_mtc += cyc;
	d->cyc_tsc += cyc;
	if (!fcr) {
		t->lost_cyc++;
		return 0;
	}
	if (!t->fc && t->ctc != t->ctc_cyc) {
		uint32_t delta;
		uint64_t fc, old;
		int err = ctc_delta(d, t->ctc, t->ctc_cyc, &delta);
		if (err < 0)
			return err;
		err = ctc_to_fc(d, delta, &fc);
		if (err < 0)
			return err;
		old = (fc << FCR_SHR) / fcr;
		cyc = cyc < old ? 0 : cyc - old;
	}
	t->fc += (cyc * fcr) >> FCR_SHR;
	t->tsc = t->base + t->fc;
	return 0;
}

static void ev_time(const struct ptqd *d, struct pt_event *ev)
{
	ev->tsc = d->time.tsc;
	ev->lost_mtc = d->time.lost_mtc;
	ev->lost_cyc = d->time.lost_cyc;
	ev->has_tsc = d->time.have_tsc ? 1 : 0;
}

/* ---- packets ---- */

/* The kind of the packet at @pos (libipt's fetch): 0, -pte_eos, -pte_nosync. */
static int fetch(struct ptqd *d, const uint8_t *pos)
{
	uint8_t opc, ext;

	d->next = P_NONE;
	if (!pos || pos < d->begin || pos > d->end)
		return -pte_nosync;
	if (pos == d->end)
		return -pte_eos;
	opc = *pos++;
	if (!(opc & 1)) {
		if (opc != 0x02) {
			d->next = opc ? P_TNT8 : P_PAD;
			return 0;
		}
	} else if ((opc & 3) == 3) {
		d->next = P_CYC;
		return 0;
	} else {
		switch (opc) {
		case 0x99: d->next = P_MODE; return 0;
		case 0x19: d->next = P_TSC; return 0;
		case 0x59: d->next = P_MTC; return 0;
		default:
			switch (opc & 0x1f) {
			case 0x0d: d->next = P_TIP; return 0;
			case 0x1d: d->next = P_FUP; return 0;
			case 0x11: d->next = P_PGE; return 0;
			case 0x01: d->next = P_PGD; return 0;
			default: d->next = P_UNKNOWN; return 0;
			}
		}
	}
	if (pos == d->end)
		return -pte_eos;
	ext = *pos++;
	switch (ext) {
	case 0x82: d->next = P_PSB; return 0;
	case 0xf3: d->next = P_OVF; return 0;
	case 0xa3: d->next = P_TNT64; return 0;
	case 0x23: d->next = P_PSBEND; return 0;
	case 0x03: d->next = P_CBR; return 0;
	case 0x43: d->next = P_PIP; return 0;
	case 0x73: d->next = P_TMA; return 0;
	case 0x83: /* STOP */
	case 0x62: /* EXSTOP */
	case 0xe2:
	case 0xc2: /* MWAIT */
	case 0x22: /* PWRE */
	case 0xa2: /* PWRX */
		d->next = P_OEVENT;
		return 0;
	case 0xc8: /* VMCS */
		d->next = P_OHEAD;
		return 0;
	case 0xc3:
		if (pos == d->end)
			return -pte_eos;
		d->next = *pos == 0x88 ? P_OHEAD : P_UNKNOWN; /* MNT */
		return 0;
	default:
		d->next = (ext & 0x1f) == 0x12 ? P_OEVENT : P_UNKNOWN; /* PTW */
		return 0;
	}
}

static inline int fits(const struct ptqd *d, const uint8_t *pos, size_t n)
{
	return (size_t)(d->end - pos) >= n;
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;
	for (i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* An IP packet at pos into the last IP: its size, or an error. */
static int read_ip(struct ptqd *d)
{
	static const int8_t sz[8] = {0, 2, 4, 6, 6, -1, 8, -1};
	unsigned ipc = d->pos[0] >> 5;
	int n = sz[ipc];
	uint64_t v;

	if (n < 0)
		return -pte_bad_packet;
	if (!fits(d, d->pos + 1, (size_t)n))
		return -pte_eos;
	v = le(d->pos + 1, n);
	switch (ipc) {
	case 0:
		d->ip_supp = 1;
		return 1;
	case 1:
		d->ip = (d->ip & ~0xffffull) | v;
		break;
	case 2:
		d->ip = (d->ip & ~0xffffffffull) | v;
		break;
	case 3:
		d->ip = (v & (1ull << 47)) ? v | ~0xffffffffffffull : v;
		break;
	case 4:
		d->ip = (d->ip & ~0xffffffffffffull) | v;
		break;
	default:
		d->ip = v;
	}
	d->have_ip = 1;
	d->ip_supp = 0;
	return n + 1;
}

static inline int last_ip(const struct ptqd *d, uint64_t *ip)
{
	if (!d->have_ip || d->ip_supp) {
		if (ip)
			*ip = 0;
		return !d->have_ip ? -pte_noip : -pte_ip_suppressed;
	}
	if (ip)
		*ip = d->ip;
	return 0;
}

/* an event's ip: suppressed when there is none */
static void ev_ip(const struct ptqd *d, struct pt_event *ev, uint64_t *ip)
{
	if (last_ip(d, ip) < 0)
		ev->ip_suppressed = 1;
}

/* MODE.Exec (*mode), or with @tsx a MODE.TSX (*tsx its InTX and TXAbort
 * bits, *mode untouched): its size; a MODE.TSX without @tsx is PTQ_UNSUP. */
static int read_mode(struct ptqd *d, enum pt_exec_mode *mode, int *tsx)
{
	struct pt_packet_mode_exec x;
	uint8_t b;

	if (!fits(d, d->pos, 2))
		return -pte_eos;
	b = d->pos[1];
	if ((b & 0xe0) == 0x20) {
		if (!tsx)
			return PTQ_UNSUP;
		*tsx = b & 3;
		return 2;
	}
	if (tsx)
		*tsx = -1;
	if (b & 0xe0)
		return -pte_bad_packet;
	x.csl = b & 1;
	x.csd = (b >> 1) & 1;
	*mode = pt_get_exec_mode(&x);
	return 2;
}

static inline __attribute__((always_inline)) int read_cyc(const struct ptqd *d, uint64_t *val)
{
	const uint8_t *p = d->pos;
	uint64_t v = *p >> 3;
	unsigned shl = 5;
	int ext = *p++ & 4;

	while (ext) {
		uint64_t bits;
		if (p >= d->end)
			return -pte_eos;
		bits = *p++;
		ext = bits & 1;
		bits = (bits >> 1) << shl;
		shl += 7;
		if (shl > 64)
			return -pte_bad_packet;
		v |= bits;
	}
	*val = v;
	return (int)(p - d->pos);
}

static int read_psb(const struct ptqd *d, const uint8_t *p)
{
	int i;
	if (!fits(d, p, 16))
		return -pte_eos;
	for (i = 0; i < 16; i += 2)
		if (p[i] != 0x02 || p[i + 1] != 0x82)
			return -pte_bad_packet;
	return 16;
}

/* ---- decoding one packet (a query's or a read-ahead's) ---- */

static int dec_tsc(struct ptqd *d, int header)
{
	uint64_t tsc;
	int err;
	if (!fits(d, d->pos, 8))
		return -pte_eos;
	tsc = le(d->pos + 1, 7);
	if (header) {
		err = cal_header_tsc(d, tsc);
		if (err < 0)
			return err;
	} else {
		d->cal_tsc = tsc;
		d->cyc_tsc = 0;
	}
	time_tsc(d, tsc);
	d->pos += 8;
	return 0;
}

static int dec_mtc(struct ptqd *d)
{
	uint32_t ctc;
	int err;

	if (!fits(d, d->pos, 2))
		return -pte_eos;
	ctc = (uint32_t)d->pos[1] << d->mtc_freq;
	err = cal_mtc(d, ctc);
	if (err < 0 && err != -pte_bad_config)
		return err;
	err = time_mtc(d, ctc);
	if (err < 0 && err != -pte_bad_config)
		return err;
	d->pos += 2;
	return 0;
}

static int dec_tma(struct ptqd *d)
{
	struct ptq_time *t = &d->time;
	uint32_t ctc, fc, bits = d->mtc_freq + 8u;

	if (!fits(d, d->pos, 7))
		return -pte_eos;
	ctc = (uint32_t)le(d->pos + 2, 2);
	fc = (uint32_t)le(d->pos + 5, 2);
	if ((fc & ~0x1ffu) || d->pos[4]) {
		/* SKZ84 (reserved bits of a corrupted TMA): skipped, one
		 * byte more than its size, as libipt does */
		if (d->skz84) {
			d->pos += 8;
			return 0;
		}
		return -pte_bad_packet;
	}
	if (!t->have_tsc || t->have_tma)
		return -pte_bad_context;
	if (t->have_mtc)
		return -pte_internal;
	t->have_tma = 1;
	t->base -= fc;
	t->fc += fc;
	/* its CTC bits include all an MTC has: it is one */
	if (bits <= 16)
		t->have_mtc = 1;
	t->ctc = t->ctc_cyc = ctc & ((1u << bits) - 1u);
	d->pos += 7;
	return 0;
}

static int dec_cbr(struct ptqd *d, int header)
{
	struct pt_event *ev;
	uint8_t cbr;
	int err;

	if (!fits(d, d->pos, 4))
		return -pte_eos;
	cbr = d->pos[2];
	if (!header)
		cal_reset(d);
	err = cal_header_cbr(d, cbr);
	if (err < 0)
		return err;
	err = time_cbr(d, cbr);
	if (err < 0)
		return err;
	if (header) {
		ev = ev_add(d, B_PSBEND);
		if (!ev)
			return -pte_nomem;
	} else {
		ev = ev_one(d);
		d->event = ev;
	}
	ev->type = ptev_cbr;
	ev->variant.cbr.ratio = cbr;
	if (!header)
		ev_time(d, ev);
	d->pos += 4;
	return 0;
}

static inline __attribute__((always_inline)) int dec_cyc(struct ptqd *d)
{
	uint64_t v;
	int n = read_cyc(d, &v), err;
	if (n < 0)
		return n;
	/* SKD007: a 2-byte CYC whose second byte is an OVF's first, an OVF's
	 * second after it: the OVF is the packet, one byte in */
	if (d->skd007 && n == 2 && (v & 0xffe0) == 0x20 && d->pos + 2 < d->end &&
	    d->pos[2] == 0xf3) {
		d->pos++;
		return 0;
	}
	err = time_cyc(d, v);
	if (err < 0 && err != -pte_bad_config)
		return err;
	d->pos += n;
	return 0;
}

/* The size of the packet at @p as libipt's packet decoder reads it (its
 * kind in *kind): for the packets ptq knows, PTQ_UNSUP for the others. */
static int pkt_size(struct ptqd *d, const uint8_t *p, int *kind)
{
	static const int8_t ipsz[8] = {0, 2, 4, 6, 6, -1, 8, -1};
	int err = fetch(d, p), n;
	uint64_t v;

	*kind = d->next;
	if (err)
		return err;
	switch (d->next) {
	case P_PAD:
	case P_TNT8:
		if (d->next == P_TNT8 && (*p >> 1) < 2)
			return -pte_bad_packet;
		return 1;
	case P_TIP:
	case P_FUP:
	case P_PGE:
	case P_PGD:
		n = ipsz[*p >> 5];
		if (n < 0)
			return -pte_bad_packet;
		return fits(d, p + 1, (size_t)n) ? n + 1 : -pte_eos;
	case P_TNT64:
		if (!fits(d, p, 8))
			return -pte_eos;
		return le(p + 2, 6) < 2 ? -pte_bad_packet : 8;
	case P_MODE:
		if (!fits(d, p, 2))
			return -pte_eos;
		return (p[1] & 0xe0) > 0x20 ? -pte_bad_packet : 2;
	case P_PSBEND:
		return 2;
	case P_TSC:
		return fits(d, p, 8) ? 8 : -pte_eos;
	case P_CBR:
		return fits(d, p, 4) ? 4 : -pte_eos;
	case P_PSB:
		return read_psb(d, p);
	case P_CYC: {
		const uint8_t *save = d->pos;
		d->pos = p;
		n = read_cyc(d, &v);
		d->pos = save;
		return n;
	}
	case P_MTC:
		return fits(d, p, 2) ? 2 : -pte_eos;
	case P_TMA:
		if (!fits(d, p, 7))
			return -pte_eos;
		return p[4] || (le(p + 5, 2) & ~0x1ffull) ? -pte_bad_packet : 7;
	case P_UNKNOWN:
		return -pte_bad_opc;
	default:
		return PTQ_UNSUP;
	}
}

/* BDM70: a PSB+ FUP while tracing is off that only PSB+ and timing
 * packets separate from a TIP.PGE is ignored: its size if so, 0 if not,
 * or an error (libipt's scan with its packet decoder: running out of
 * trace is no error). */
static int bdm70(struct ptqd *d)
{
	const uint8_t *p = d->pos;
	int next = d->next, kind, n, self;

	self = pkt_size(d, p, &kind);
	if (self < 0) {
		d->next = next;
		return self;
	}
	for (p += self;;) {
		n = pkt_size(d, p, &kind);
		if (n < 0)
			break;
		if (kind == P_PGE) {
			n = self;
			break;
		}
		if (kind != P_PAD && kind != P_TSC && kind != P_CBR && kind != P_PSBEND &&
		    kind != P_MODE && kind != P_CYC && kind != P_MTC && kind != P_TMA) {
			n = 0;
			break;
		}
		p += n;
	}
	d->next = next;
	return n == -pte_eos ? 0 : n;
}

/* A packet ptq does not emulate at d->pos: libipt reads it first, so a
 * truncated or malformed one is that error (an MTC cut by the end of the
 * trace is -pte_eos), else PTQ_UNSUP. */
static int unsup(struct ptqd *d)
{
	int kind, n = pkt_size(d, d->pos, &kind);
	return n < 0 && n != PTQ_UNSUP ? n : PTQ_UNSUP;
}

static int dec_header(struct ptqd *d)
{
	const uint8_t *start;
	struct pt_event *ev;
	enum pt_exec_mode mode = ptem_unknown;
	int n, tsx;

	switch (d->next) {
	case P_PAD:
		d->pos++;
		return 0;
	case P_FUP:
		start = d->pos;
		if (d->bdm70 && !d->enabled) {
			n = bdm70(d);
			if (n < 0)
				return n;
			if (n) {
				d->pos += n;
				return 0;
			}
		}
		n = read_ip(d);
		if (n < 0)
			return n;
		if (start[0] >> 5)
			d->enabled = 1;
		d->pos += n;
		return 0;
	case P_MODE:
		/* a MODE.TSX in PSB+ is a status update too; only outside a
		 * transaction (what a cpu with TSX writes in every PSB+) */
		n = read_mode(d, &mode, &tsx);
		if (n < 0)
			return n;
		if (tsx > 0)
			return PTQ_UNSUP;
		ev = ev_add(d, B_PSBEND);
		if (!ev)
			return -pte_nomem;
		if (tsx == 0) {
			ev->type = ptev_tsx;
		} else {
			ev->type = ptev_exec_mode;
			ev->variant.exec_mode.mode = mode;
		}
		d->pos += n;
		return 0;
	case P_TSC:
		return dec_tsc(d, 1);
	case P_CBR:
		return dec_cbr(d, 1);
	case P_CYC:
		return dec_cyc(d);
	case P_MTC:
		return dec_mtc(d);
	case P_TMA:
		return dec_tma(d);
	case P_UNKNOWN:
		return -pte_bad_opc;
	case P_PIP:
	case P_OHEAD:
		return unsup(d);
	default:
		return -pte_bad_context;
	}
}

static int dec_psb(struct ptqd *d)
{
	const uint8_t *at = d->pos;
	int err = read_psb(d, at);

	if (err < 0)
		return err;
	if (d->skl168)
		d->skl168_check = 1;
	d->pos += 16;
	d->have_ip = d->ip_supp = 0;
	d->ip = 0;
	for (;;) {
		err = fetch(d, d->pos);
		if (err)
			break;
		if (d->next == P_PSBEND)
			return 0;
		err = dec_header(d);
		if (err)
			break;
	}
	d->pos = at;
	d->evq.b[B_PSBEND] = d->evq.e[B_PSBEND] = 0;
	d->next = P_PSB;
	return err;
}

static int dec_psbend(struct ptqd *d)
{
	struct pt_event *ev = ev_take(d, B_PSBEND);

	if (!ev) {
		d->pos += 2;
		return 0;
	}
	ev->status_update = 1;
	ev_time(d, ev);
	switch (ev->type) {
	case ptev_exec_mode:
		ev_ip(d, ev, &ev->variant.exec_mode.ip);
		break;
	case ptev_tsx:
		ev_ip(d, ev, &ev->variant.tsx.ip);
		break;
	case ptev_cbr:
		break;
	default:
		return -pte_internal;
	}
	d->event = ev;
	return 0;
}

/* TIP and TIP.PGD: the IP completes the event bound to it, or (PGD alone) is the
 * disable itself. */
static int dec_tip(struct ptqd *d, int pgd)
{
	struct pt_event *ev;
	int n = read_ip(d);

	if (n < 0)
		return n;
	ev = ev_take(d, B_TIP);
	if (ev) {
		switch (ev->type) {
		case ptev_async_branch:
			if (pgd) {
				uint64_t at = ev->variant.async_branch.from;
				ev->type = ptev_async_disabled;
				ev->variant.async_disabled.at = at;
				ev_ip(d, ev, &ev->variant.async_disabled.ip);
			} else {
				d->consume = 1;
				ev_ip(d, ev, &ev->variant.async_branch.to);
			}
			break;
		case ptev_exec_mode:
			if (pgd)
				ev->ip_suppressed = 1;
			else
				ev_ip(d, ev, &ev->variant.exec_mode.ip);
			break;
		default:
			return -pte_bad_context;
		}
	} else if (pgd) {
		ev = ev_one(d);
		ev->type = ptev_disabled;
		ev_ip(d, ev, &ev->variant.disabled.ip);
		ev_time(d, ev);
	} else {
		d->pos += n;
		return 0;
	}
	d->event = ev;
	if (ev_pending(d, B_TIP))
		return 0;
	if (pgd) {
		d->enabled = 0;
	} else {
		if (!d->consume)
			return 0;
		d->consume = 0;
	}
	d->pos += n;
	return 0;
}

static int dec_pge(struct ptqd *d)
{
	struct pt_event *ev;
	int n = read_ip(d);

	if (n < 0)
		return n;
	if (!d->consume) {
		ev = ev_one(d);
		ev->type = ptev_enabled;
		if (last_ip(d, &ev->variant.enabled.ip) < 0)
			return -pte_bad_packet;
		ev_time(d, ev);
		d->tnt = d->tnt_idx = 0;
		d->consume = 1;
		d->enabled = 1;
	} else {
		ev = ev_take(d, B_TIP);
		if (ev) {
			if (ev->type != ptev_exec_mode)
				return -pte_bad_context;
			ev_ip(d, ev, &ev->variant.exec_mode.ip);
		}
	}
	if (!ev)
		return -pte_internal;
	d->event = ev;
	if (ev_pending(d, B_TIP))
		return 0;
	if (!d->consume)
		return -pte_internal;
	d->consume = 0;
	d->pos += n;
	return 0;
}

static int dec_fup(struct ptqd *d)
{
	struct pt_event *ev;
	uint64_t ip;
	int n = read_ip(d), err;

	if (n < 0)
		return n;
	if (ev_pending(d, B_FUP))
		return PTQ_UNSUP; /* only OVF, TSX, EXSTOP, MWAIT, PTW bind there */
	err = last_ip(d, &ip);
	if (err < 0)
		return err;
	ev = ev_add(d, B_TIP);
	if (!ev)
		return -pte_nomem;
	ev->type = ptev_async_branch;
	ev->variant.async_branch.from = ip;
	ev_time(d, ev);
	d->pos += n;
	return 0;
}

static int dec_mode(struct ptqd *d)
{
	struct pt_event *ev;
	enum pt_exec_mode mode;
	int n = read_mode(d, &mode, NULL);

	if (n < 0)
		return n;
	ev = ev_add(d, B_TIP);
	if (!ev)
		return -pte_nomem;
	ev->type = ptev_exec_mode;
	ev->variant.exec_mode.mode = mode;
	ev_time(d, ev);
	d->pos += n;
	return 0;
}

static int dec_tnt(struct ptqd *d, int wide)
{
	uint64_t v;
	int bits;

	if (wide) {
		if (!fits(d, d->pos, 8))
			return -pte_eos;
		v = le(d->pos + 2, 6);
	} else {
		v = d->pos[0] >> 1;
	}
	if (v < 2)
		return -pte_bad_packet; /* no bit before the stop bit */
	bits = 63 - __builtin_clzll(v);
	if (d->tnt_idx)
		return -pte_bad_context;
	d->tnt = v & ~(1ull << bits);
	d->tnt_idx = 1ull << (bits - 1);
	d->pos += wide ? 8 : 1;
	return 0;
}

static int decode(struct ptqd *d)
{
	switch (d->next) {
	case P_PAD:
		d->pos++;
		return 0;
	case P_PSB:
		return dec_psb(d);
	case P_TIP:
		return dec_tip(d, 0);
	case P_TNT8:
		return dec_tnt(d, 0);
	case P_TNT64:
		return dec_tnt(d, 1);
	case P_PGE:
		return dec_pge(d);
	case P_PGD:
		return dec_tip(d, 1);
	case P_FUP:
		return dec_fup(d);
	case P_MODE:
		return dec_mode(d);
	case P_PSBEND:
		return dec_psbend(d);
	case P_TSC:
		return dec_tsc(d, 0);
	case P_CBR:
		return dec_cbr(d, 0);
	case P_CYC:
		return dec_cyc(d);
	case P_MTC:
		return dec_mtc(d);
	case P_TMA:
		return dec_tma(d);
	case P_UNKNOWN:
		return -pte_bad_opc;
	case P_NONE:
		return -pte_internal;
	default:
		return unsup(d);
	}
}

/* ---- the query layer ---- */

static inline __attribute__((always_inline)) int will_event(const struct ptqd *d)
{
	unsigned f = pflags[d->next];
	if (f & F_EVENT)
		return 1;
	if (f & F_PSBEND)
		return ev_pending(d, B_PSBEND);
	if (f & F_TIP)
		return ev_pending(d, B_TIP);
	if (f & F_FUP)
		return ev_pending(d, B_FUP);
	return 0;
}

static int will_eos(const struct ptqd *d)
{
	struct ptqd t;
	if (d->next)
		return 0;
	t.begin = d->begin;
	t.end = d->end;
	return fetch(&t, d->pos) == -pte_eos;
}

static int status(const struct ptqd *d)
{
	int f = 0;
	if (!d->tnt_idx) {
		if (will_event(d))
			f |= pts_event_pending;
		if (will_eos(d))
			f |= pts_eos;
	}
	return f;
}

static int fetch_error(const struct ptqd *d)
{
	struct ptqd t;
	int err;
	t.begin = d->begin;
	t.end = d->end;
	err = fetch(&t, d->pos);
	return err < 0 ? err : -pte_internal;
}

static int read_ahead(struct ptqd *d)
{
	for (;;) {
		int err;
		/* the common packets first, as fetch and decode take them:
		 * a TNT8 ends the read, PAD and CYC (timing, no event) are
		 * decoded */
		if (__builtin_expect(d->pos && d->pos >= d->begin && d->pos < d->end, 1)) {
			uint8_t opc = *d->pos;
			if (!(opc & 1) && opc != 0x02) {
				if (opc) {
					d->next = P_TNT8;
					return 0;
				}
				d->next = P_PAD;
				d->pos++;
				continue;
			}
			if ((opc & 3) == 3) {
				d->next = P_CYC;
				err = dec_cyc(d);
				if (!err)
					continue;
				if (err == -pte_eos) {
					d->pos = d->end;
					d->next = P_NONE;
				}
				return err;
			}
		}
		err = fetch(d, d->pos);
		if (err)
			return err;
		if (pflags[d->next] & (F_TIP | F_TNT))
			return 0;
		if (will_event(d))
			return 0;
		err = decode(d);
		if (err) {
			if (err == -pte_eos) {
				d->pos = d->end;
				d->next = P_NONE;
			}
			return err;
		}
	}
}

static void reset(struct ptqd *d)
{
	d->enabled = d->consume = 0;
	d->event = NULL;
	d->ip = 0;
	d->have_ip = d->ip_supp = 0;
	d->tnt = d->tnt_idx = 0;
	memset(&d->time, 0, sizeof d->time);
	memset(&d->last_time, 0, sizeof d->last_time);
	cal_reset(d);
	memset(d->evq.b, 0, sizeof d->evq.b);
	memset(d->evq.e, 0, sizeof d->evq.e);
}

static int start(struct ptqd *d, const uint8_t *at, uint64_t *ip)
{
	int st, err;

	reset(d);
	d->sync = d->pos = at;
	err = fetch(d, at);
	if (err)
		return err;
	if (d->next != P_PSB)
		return -pte_nosync;
	err = dec_psb(d);
	if (err < 0)
		return err;
	if (ip && !last_ip(d, ip))
		ip = NULL;
	err = read_ahead(d);
	if (err < 0)
		return err;
	st = status(d);
	if (last_ip(d, ip) < 0 && ip)
		st |= pts_ip_suppressed;
	return st;
}

/* libipt's search for a PSB whose payload ends around @p (after an
 * 8-byte match) */
static const uint8_t *find_psb(const struct ptqd *d, const uint8_t *p)
{
	if (p >= d->end || *p != 0x02)
		p++;
	for (; p + 1 < d->end; p += 2)
		if (p[0] != 0x02 || p[1] != 0x82)
			break;
	p -= 16;
	if (p < d->begin || p[0] != 0x02 || p[1] != 0x82)
		return NULL;
	return read_psb(d, p) < 0 ? NULL : p;
}

/* libipt's sync forward from d->pos: the PSB, or NULL and *err */
static const uint8_t *sync_fwd(const struct ptqd *d, int *err)
{
	const uint8_t *pos = d->pos ? d->pos : d->begin, *from;
	uintptr_t a;
	ptrdiff_t space;

	*err = -pte_internal;
	if (pos == d->sync)
		pos += 16;
	if (pos < d->begin)
		return NULL;
	space = pos - d->begin;
	if (space >= 16)
		space = 15;
	pos -= space;
	if (pos > d->end)
		return NULL;
	from = pos;
	/* 8-byte words at 8-byte aligned addresses, as libipt reads them */
	a = ((uintptr_t)pos + 7) & ~(uintptr_t)7;
	pos = (const uint8_t *)a;
	*err = -pte_eos;
	for (;;) {
		const uint8_t *cur = pos, *psb;
		uint64_t w;
		pos += 8;
		if (pos > d->end)
			return NULL;
		memcpy(&w, cur, 8); /* 02 82 02 82 ... or 82 02 82 02 ... */
		if (w != 0x8202820282028202ull && w != 0x0282028202820282ull)
			continue;
		psb = find_psb(d, pos);
		if (!psb || psb < from)
			continue;
		return psb;
	}
}

int ptq_sync_forward(struct ptqd *d, uint64_t *ip)
{
	int err;
	const uint8_t *psb = sync_fwd(d, &err);
	return psb ? start(d, psb, ip) : err;
}

int ptq_pkt_sync(struct ptqd *d)
{
	int err;
	const uint8_t *psb = sync_fwd(d, &err);
	if (!psb)
		return err;
	d->sync = d->pos = psb;
	return 0;
}

int ptq_pkt_next(struct ptqd *d, enum pt_packet_type *type, uint8_t *mode)
{
	static const uint8_t types[P_MAX] = {
		[P_PAD] = ppt_pad,     [P_PSB] = ppt_psb,     [P_TIP] = ppt_tip,
		[P_TNT8] = ppt_tnt_8,  [P_TNT64] = ppt_tnt_64, [P_PGE] = ppt_tip_pge,
		[P_PGD] = ppt_tip_pgd, [P_FUP] = ppt_fup,     [P_MODE] = ppt_mode,
		[P_PSBEND] = ppt_psbend, [P_TSC] = ppt_tsc,   [P_CBR] = ppt_cbr,
		[P_CYC] = ppt_cyc,     [P_MTC] = ppt_mtc,     [P_TMA] = ppt_tma,
	};
	int kind, n;

	if (!d->pos)
		return -pte_nosync;
	if (d->pos < d->end) {
		/* the common packets first: TNT8, CYC without extension, TIP */
		uint8_t b = *d->pos;
		if (!(b & 1) && b > 2) {
			if ((b >> 1) < 2)
				return -pte_bad_packet;
			*type = ppt_tnt_8;
			*mode = 0;
			d->pos++;
			return 1;
		}
		if ((b & 7) == 3) {
			*type = ppt_cyc;
			*mode = 0;
			d->pos++;
			return 1;
		}
	}
	n = pkt_size(d, d->pos, &kind);
	if (n < 0)
		return n;
	*type = (enum pt_packet_type)types[kind];
	*mode = kind == P_MODE ? d->pos[1] : 0;
	d->pos += n;
	return n;
}

int ptq_sync_set(struct ptqd *d, uint64_t *ip, uint64_t off)
{
	const uint8_t *p = d->begin + off;
	int err;

	if (p < d->begin || p > d->end || d->end - p < 2)
		return -pte_eos;
	if (p[0] != 0x02 || p[1] != 0x82)
		return -pte_nosync;
	err = read_psb(d, p);
	if (err < 0)
		return err;
	return start(d, p, ip);
}

int ptq_get_offset(const struct ptqd *d, uint64_t *off)
{
	if (!d->pos)
		return -pte_nosync;
	*off = (uint64_t)(d->pos - d->begin);
	return 0;
}

int ptq_get_sync_offset(const struct ptqd *d, uint64_t *off)
{
	if (!d->sync)
		return -pte_nosync;
	*off = (uint64_t)(d->sync - d->begin);
	return 0;
}

static int cache_tnt(struct ptqd *d)
{
	int err;
	for (;;) {
		if (!d->next)
			return fetch_error(d);
		if (will_event(d) || (pflags[d->next] & F_TIP))
			return -pte_bad_query;
		d->event = NULL;
		err = decode(d);
		if (err)
			return err;
		if (d->event)
			return -pte_event_ignored;
		if (pflags[d->next] & F_TNT)
			break;
		err = read_ahead(d);
		if (err)
			return err;
	}
	d->last_time = d->time;
	err = read_ahead(d);
	return err < 0 && err != -pte_eos ? err : 0;
}

int ptq_cond_branch_slow(struct ptqd *d, int *taken)
{
	if (!d->tnt_idx && d->next == P_TNT8 && (d->pos[0] >> 1) >= 2) {
		/* cache_tnt's loop for the common packet: a TNT-8 read
		 * ahead (no event binds to it) */
		uint64_t v = d->pos[0] >> 1;
		int bits = 63 - __builtin_clzll(v), err;
		d->tnt = v & ~(1ull << bits);
		d->tnt_idx = 1ull << (bits - 1);
		d->pos++;
		d->event = NULL;
		d->last_time = d->time;
		err = read_ahead(d);
		if (err < 0 && err != -pte_eos)
			return err;
	} else if (!d->tnt_idx) {
		int err = cache_tnt(d);
		if (err < 0)
			return err;
	}
	if (!d->tnt_idx)
		return -pte_bad_query;
	*taken = (d->tnt & d->tnt_idx) != 0;
	d->tnt_idx >>= 1;
	return status(d);
}

int ptq_indirect_branch(struct ptqd *d, uint64_t *ip)
{
	int err, f = 0;
	for (;;) {
		if (!d->next)
			return fetch_error(d);
		if (will_event(d))
			return -pte_bad_query;
		d->event = NULL;
		if ((pflags[d->next] & F_TNT) && d->tnt_idx)
			return -pte_bad_query;
		err = decode(d);
		if (err)
			return err;
		if (d->event)
			return -pte_event_ignored;
		if (pflags[d->next] & F_TIP) {
			uint64_t to;
			if (last_ip(d, &to) < 0)
				f |= pts_ip_suppressed;
			else
				*ip = to;
			break;
		}
		err = read_ahead(d);
		if (err)
			return err;
	}
	d->last_time = d->time;
	err = read_ahead(d);
	if (err < 0 && err != -pte_eos)
		return err;
	return f | status(d);
}

int ptq_event(struct ptqd *d, struct pt_event *ev)
{
	int err;
	if (d->tnt_idx)
		return -pte_bad_query;
	for (;;) {
		if (!d->next)
			return fetch_error(d);
		if ((pflags[d->next] & (F_TIP | F_TNT)) && !will_event(d))
			return -pte_bad_query;
		d->event = NULL;
		err = decode(d);
		if (err)
			return err;
		if (d->event) {
			*ev = *d->event;
			break;
		}
		err = read_ahead(d);
		if (err)
			return err;
	}
	d->last_time = d->time;
	err = read_ahead(d);
	if (err < 0 && err != -pte_eos)
		return err;
	return status(d);
}
