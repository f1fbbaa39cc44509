/* ptq: the project's PT query decoder, for the cached walk (issue 20).
 *
 * The same answers, in the same order, as libipt 2.0.5's query decoder
 * (pt_qry_*) gives the walk: TNT bits, TIP targets, events, the time after
 * each query and the offsets -- for the packets the walk emulates (PAD,
 * PSB, PSBEND, TNT, TIP, TIP.PGE, TIP.PGD, FUP, MODE.Exec, TSC, CBR, CYC,
 * MTC, TMA, and MODE.TSX in PSB+ outside a transaction: the status
 * update a cpu with TSX writes in every PSB+) with the timing rules libipt
 * applies to them (TSC, CBR, CYC,
 * MTC and TMA, the calibration by PSB+ TSCs, CBR or MTCs).  Written from
 * libipt's documented behaviour and the SDM, not its code (docs/decode.md,
 * "The project query decoder").  Anything else (OVF, PIP, VMCS, other TSX,
 * power and PTWRITE packets) is PTQ_UNSUP: the caller decides per
 * recording, before decoding, whether this decoder may run (its pre-scan,
 * ptq_usable).  The query decoder's errata for these packets are
 * emulated: BDM70 (a PSB+ FUP before a TIP.PGE is ignored), SKD007 (a CYC
 * overlapping an OVF), SKL168 (the first MTC after a PSB may not
 * calibrate) and SKZ84 (a TMA with reserved bits set is skipped). */
#ifndef MT_PTQ_H
#define MT_PTQ_H

#include <intel-pt.h>
#include <stdint.h>

#define PTQ_UNSUP (-1000) /* a packet this decoder does not emulate */

struct ptq_ev {
	struct pt_event q[3][8]; /* by binding: PSBEND, TIP, FUP */
	uint8_t b[3], e[3];
	struct pt_event one; /* a standalone event */
};

struct ptq_time {
	uint64_t tsc, base, fc;
	uint32_t lost_mtc, lost_cyc;
	uint32_t ctc, ctc_cyc; /* the last MTC's (or TMA's) CTC bits; the one CYC counts from */
	uint8_t cbr;
	uint8_t have_tsc, have_cbr, have_tma, have_mtc;
};

/* packet kinds (what libipt's fetch tells from the opcode) */
enum {
	P_NONE,
	P_PAD, P_PSB, P_TIP, P_TNT8, P_TNT64, P_PGE, P_PGD, P_FUP, P_MODE, P_PSBEND,
	P_TSC, P_CBR, P_CYC, P_MTC, P_TMA, P_UNKNOWN,
	/* known to libipt, not emulated */
	P_OVF, P_PIP, P_OEVENT, P_OHEAD,
	P_MAX
};

struct ptqd {
	const uint8_t *begin, *end, *pos, *sync;
	int next; /* the kind of the packet at pos (P_*), P_NONE: none */
	int enabled, consume;
	struct pt_event *event; /* published by the last decode */
	uint64_t ip;		 /* last IP */
	int have_ip, ip_supp;
	uint64_t tnt, tnt_idx; /* cached TNT bits, the next one's mask */
	struct ptq_time time, last_time;
	/* calibration: the fast-counter:cycles ratio (<<8), from the cycles
	 * between two PSB+ TSCs or two MTCs */
	uint64_t fcr, min_fcr, max_fcr, cal_tsc, cyc_tsc, cyc_mtc;
	uint32_t cal_ctc;
	uint8_t cal_mtc, skl168_check;
	/* the recording's: nominal ratio, MTC period (log2 of CTC ticks),
	 * the TSC:CTC ratio (CPUID 0x15 ebx/eax) */
	uint8_t nom_freq, mtc_freq;
	uint32_t ctc_num, ctc_den;
	uint8_t bdm70, skd007, skl168, skz84; /* errata */
	struct ptq_ev evq;
};

/* Whether ptq may decode a trace of @cfg at all (no packet callback); the
 * packets are the caller's pre-scan's. */
int ptq_usable(const struct pt_config *cfg);
void ptq_init(struct ptqd *d, const struct pt_config *cfg);
int ptq_sync_forward(struct ptqd *d, uint64_t *ip);
int ptq_sync_set(struct ptqd *d, uint64_t *ip, uint64_t off);
int ptq_cond_branch_slow(struct ptqd *d, int *taken);
int ptq_indirect_branch(struct ptqd *d, uint64_t *ip);
int ptq_event(struct ptqd *d, struct pt_event *ev);
int ptq_get_offset(const struct ptqd *d, uint64_t *off);
/* libipt's packet decoder (pt_pkt_sync_forward, pt_pkt_next) for the
 * packets ptq knows and MTC/TMA: the packet's size (*type, *mode the MODE
 * payload byte), -pte_eos, -pte_bad_packet, -pte_bad_opc or PTQ_UNSUP */
int ptq_pkt_sync(struct ptqd *d);
int ptq_pkt_next(struct ptqd *d, enum pt_packet_type *type, uint8_t *mode);
int ptq_get_sync_offset(const struct ptqd *d, uint64_t *off);

/* Whether the next pt_qry_cond_branch reads no packet and reports no
 * status: a bit that is not the packet's last (an event shows only when
 * no bit is left), or the last with another TNT read ahead (neither an
 * event nor the end) */
static inline int ptq_cond_quiet(const struct ptqd *d)
{
	return d->tnt_idx > 1 || (d->tnt_idx == 1 && (d->next == P_TNT8 || d->next == P_TNT64));
}

/* pt_qry_cond_branch */
static inline int ptq_cond_branch(struct ptqd *d, int *taken)
{
	if (ptq_cond_quiet(d)) {
		*taken = (d->tnt & d->tnt_idx) != 0;
		d->tnt_idx >>= 1;
		return 0;
	}
	return ptq_cond_branch_slow(d, taken);
}

/* pt_qry_time */
static inline int ptq_time(const struct ptqd *d, uint64_t *tsc, uint32_t *lost_mtc,
			   uint32_t *lost_cyc)
{
	*tsc = d->last_time.tsc;
	*lost_mtc = d->last_time.lost_mtc;
	*lost_cyc = d->last_time.lost_cyc;
	return d->last_time.have_tsc ? 0 : -pte_no_time;
}

#endif
