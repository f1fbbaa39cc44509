/* ptsim: the synthesizer on hand-made execution logs (no ptrace): packets
 * (decoded back with libipt's packet decoder), truth records and their times
 * per the cycle model, the return stack ring, and the run file round trip. */
#include "ptsim.h"
#include "mtev.h"
#include "t.h"

#include <intel-pt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ptsim_run run;
static uint8_t code[4096];

static void add_ev(int kind, int flags, uint64_t ip, uint64_t next, uint64_t sp)
{
	run.ev = realloc(run.ev, (run.nev + 1) * sizeof(*run.ev));
	struct ptsim_ev *e = &run.ev[run.nev++];
	memset(e, 0, sizeof(*e));
	e->kind = (uint8_t)kind;
	e->flags = (uint8_t)flags;
	e->tid = 100;
	e->ip = ip;
	e->next = next;
	e->sp = sp;
}

static void setup(void)
{
	ptsim_run_fini(&run);
	memset(&run, 0, sizeof run);
	run.pid = 100;
	run.cmdline = strdup("t");
	run.threads = calloc(1, sizeof(*run.threads));
	run.threads[0].tid = 100;
	run.nthreads = 1;
	run.maps = calloc(1, sizeof(*run.maps));
	run.maps[0].start = 0x400000;
	run.maps[0].len = sizeof code;
	run.maps[0].prot = 5;
	run.maps[0].path = strdup("/nonexistent/t");
	run.maps[0].bytes = malloc(sizeof code);
	memcpy(run.maps[0].bytes, code, sizeof code);
	run.nmaps = 1;
	add_ev(PTSIM_EV_MAP, 0, 0, 0, 0);
	add_ev(PTSIM_EV_THREAD, 0, 0x400000, 0, 0x7000);
}

static uint64_t T(uint64_t clock)
{
	return ptsim_tsc_to_perf(PTSIM_TSC0 + clock);
}

/* Packet types of a stream, in order. */
static int packets(const struct ptsim_tstream *ts, enum pt_packet_type *out, int max, uint64_t *cyc_sum)
{
	struct pt_config cfg;
	pt_config_init(&cfg);
	cfg.begin = ts->pt;
	cfg.end = ts->pt + ts->len;
	struct pt_packet_decoder *d = pt_pkt_alloc_decoder(&cfg);
	int n = 0;
	*cyc_sum = 0;
	if (pt_pkt_sync_forward(d) < 0)
		return -1;
	struct pt_packet p;
	while (n < max && pt_pkt_next(d, &p, sizeof p) > 0) {
		if (p.type == ppt_cyc)
			*cyc_sum += p.payload.cyc.value;
		out[n++] = p.type;
	}
	pt_pkt_free_decoder(d);
	return n;
}

int main(void)
{
	char err[256];
	/* 400000 call 400010; 400005 je 400009; 400007 nop nop; 400009 syscall;
	 * 40000b jmp *rax; 400010 ret */
	const uint8_t prog[] = {0xe8, 0x0b, 0, 0, 0, 0x74, 0x02, 0x90, 0x90, 0x0f, 0x05, 0xff, 0xe0,
				0x90, 0x90, 0x90, 0xc3};
	memcpy(code, prog, sizeof prog);
	setup();
	add_ev(PTSIM_EV_INSN, 0, 0x400000, 0x400010, 0x6ff8);
	add_ev(PTSIM_EV_INSN, 0, 0x400010, 0x400005, 0x7000);
	add_ev(PTSIM_EV_INSN, 0, 0x400005, 0x400009, 0x7000);
	add_ev(PTSIM_EV_INSN, PTSIM_F_SYSCALL, 0x400009, 0, 0x7000);
	add_ev(PTSIM_EV_SYSRET, 0, 0x40000b, 0, 0x7000);
	add_ev(PTSIM_EV_INSN, 0, 0x40000b, 0x400000, 0x7000);
	add_ev(PTSIM_EV_END, 0, 0x400000, 0, 0);

	struct ptsim_synth_opts o = {.psb_period = 1 << 20};
	struct ptsim_result res;
	T_CHECK(ptsim_synth(&res, &run, &o, err, sizeof err) == 0, "synth: %s", err);
	/* clock: enable 0, call 1, ret 2 (TNT out at once), je 3, syscall 4
	 * (+500 = 504), jmp 505 */
	struct {
		int type;
		uint64_t from, to, clock;
	} want[] = {
		{MTEV_BR_TRACE_START, 0, 0x400000, 0}, {MTEV_BR_CALL, 0x400000, 0x400010, 0},
		{MTEV_BR_RETURN, 0x400010, 0x400005, 2}, {MTEV_BR_JCC, 0x400005, 0x400009, 4},
		{MTEV_BR_SYSCALL, 0x400009, 0, 4},	 {MTEV_BR_SYSRET, 0, 0x40000b, 504},
		{MTEV_BR_JUMP, 0x40000b, 0x400000, 505}, {MTEV_BR_TRACE_END, 0x400000, 0, 505},
	};
	T_CHECK(res.nbr == sizeof want / sizeof want[0], "%zu branch records", res.nbr);
	for (size_t i = 0; i < res.nbr && i < sizeof want / sizeof want[0]; i++) {
		const struct ptsim_branch *b = &res.br[i];
		uint64_t t = T(res.times[b->slot]);
		T_CHECK(b->type == want[i].type && b->from == want[i].from && b->to == want[i].to &&
				t == T(want[i].clock),
			"record %zu: %s %llx->%llx at clock %llu", i, mtev_branch_name(b->type),
			(unsigned long long)b->from, (unsigned long long)b->to,
			(unsigned long long)res.times[b->slot]);
	}
	enum pt_packet_type pk[512];
	uint64_t cyc;
	int np = packets(&res.ts[0], pk, 64, &cyc);
	/* PSB+ PGE | CYC TNT(ret) | CYC TNT(je) PGD | PSB+(off) | CYC MODE PGE |
	 * CYC TIP | FUP PGD */
	enum pt_packet_type exp[] = {ppt_psb,  ppt_mode, ppt_tsc,  ppt_cbr,    ppt_psbend, ppt_tip_pge,
				     ppt_cyc,  ppt_tnt_8, ppt_cyc, ppt_tnt_8,  ppt_tip_pgd, ppt_psb,
				     ppt_mode, ppt_tsc,  ppt_cbr,  ppt_psbend, ppt_cyc,    ppt_mode,
				     ppt_tip_pge, ppt_cyc, ppt_tip, ppt_fup,   ppt_tip_pgd};
	int ok = np == (int)(sizeof exp / sizeof exp[0]);
	for (int i = 0; ok && i < np; i++)
		ok = pk[i] == exp[i];
	T_CHECK(ok, "packet sequence (%d packets)", np);
	T_CHECK(cyc == 505, "CYC cycles add up to the clock (%llu)", (unsigned long long)cyc);
	/* spans: root (func unknown: the first ip), the call, [syscall] */
	int have_call = 0, have_sys = 0;
	for (size_t i = 0; i < res.nspans; i++) {
		const struct ptsim_span *s = &res.spans[i];
		if (s->func == 0x400010 && s->callsite == 0x400000 && res.times[s->bslot] == 0 &&
		    res.times[s->eslot] == 2 && s->depth == 1)
			have_call = 1;
		if (s->name && !strcmp(s->name, "[syscall]") && res.times[s->bslot] == 4 &&
		    res.times[s->eslot] == 504)
			have_sys = 1;
	}
	T_CHECK(have_call, "span of the called function: clock 0..2, depth 1");
	T_CHECK(have_sys, "[syscall] span: clock 4..504");
	ptsim_result_fini(&res);

	/* --noretcomp: the ret is a TIP; times are the same (a compressed ret's
	 * TNT goes out at once). */
	o.noretcomp = 1;
	T_CHECK(ptsim_synth(&res, &run, &o, err, sizeof err) == 0, "synth noretcomp");
	T_CHECK(res.nbr == 8 && res.times[res.br[2].slot] == 2, "noretcomp: the return at clock 2");
	np = packets(&res.ts[0], pk, 64, &cyc);
	T_CHECK(np > 7 && pk[6] == ppt_cyc && pk[7] == ppt_tip, "noretcomp: CYC TIP for the ret");
	ptsim_result_fini(&res);
	o.noretcomp = 0;

	/* The return stack is a 64-entry ring: 70 nested calls, 70 returns:
	 * the last 64 calls' returns are compressed, the 6 oldest are TIPs. */
	memset(code, 0x90, sizeof code);
	code[0x100] = 0xe8; /* 400100: call 400100 + 5 + 0x10 = 400115 */
	code[0x101] = 0x10;
	code[0x115] = 0xc3; /* 400115: ret */
	setup();
	uint64_t sp = 0x7000;
	for (int i = 0; i < 70; i++) {
		sp -= 8;
		add_ev(PTSIM_EV_INSN, 0, 0x400100, 0x400115, sp);
	}
	/* (a log need not be a real program: each call's next is the ret) */
	for (int i = 0; i < 70; i++) {
		sp += 8;
		add_ev(PTSIM_EV_INSN, 0, 0x400115, 0x400105, sp);
	}
	add_ev(PTSIM_EV_END, 0, 0x400105, 0, 0);
	T_CHECK(ptsim_synth(&res, &run, &o, err, sizeof err) == 0, "synth ring");
	np = packets(&res.ts[0], pk, 64 * 4, &cyc);
	int tips = 0, tnts = 0;
	for (int i = 0; i < np; i++) {
		tips += pk[i] == ppt_tip;
		tnts += pk[i] == ppt_tnt_8;
	}
	T_CHECK(tnts == 64 && tips == 6, "ring: %d TNT, %d TIP", tnts, tips);
	/* spans: 70 nested frames, each ending when rsp rises above its slot */
	int maxd = 0;
	for (size_t i = 0; i < res.nspans; i++)
		if (res.spans[i].depth > maxd)
			maxd = res.spans[i].depth;
	T_CHECK(maxd == 70, "70 nested frames (max depth %d)", maxd);
	ptsim_result_fini(&res);

	/* window: the last 10 instructions only, starting with PSB+FUP */
	o.window = 10;
	T_CHECK(ptsim_synth(&res, &run, &o, err, sizeof err) == 0, "synth window");
	np = packets(&res.ts[0], pk, 64, &cyc);
	T_CHECK(np > 5 && pk[0] == ppt_psb && pk[4] == ppt_fup && pk[5] == ppt_psbend,
		"window: the stream starts with PSB+ and a FUP");
	T_CHECK(res.nbr == 12 && res.br[0].type == MTEV_BR_TRACE_START && res.br[0].to == 0x400115,
		"window: trace-start at the window's first instruction, 10 returns, the end (%zu)", res.nbr);
	ptsim_result_fini(&res);
	o.window = 0;

	/* The run file round trip. */
	char path[] = "/tmp/test_ptsim.XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	T_CHECK(ptsim_run_save(&run, path, err, sizeof err) == 0, "save");
	struct ptsim_run back;
	T_CHECK(ptsim_run_load(&back, path, err, sizeof err) == 0, "load: %s", err);
	T_CHECK(back.nev == run.nev && !memcmp(back.ev, run.ev, run.nev * sizeof(*run.ev)) &&
			back.nmaps == 1 && !memcmp(back.maps[0].bytes, code, sizeof code),
		"round trip");
	ptsim_run_fini(&back);
	/* A truncated file is refused. */
	truncate(path, 100);
	T_CHECK(ptsim_run_load(&back, path, err, sizeof err) < 0, "truncated run file refused: %s", err);
	unlink(path);
	ptsim_run_fini(&run);
	return T_DONE();
}
