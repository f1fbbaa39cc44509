/* mt-ptsim: run a program under ptrace single-step and write the Intel PT
 * perf.data a real recording would have produced, plus the exact truth. */
#include "driver.h"
#include "sysenv.h"
#include "err.h"
#include "io.h"
#include "ptsim.h"
#include "ptsim_write.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs(
"usage: mt-ptsim [options] -o DIR -- PROG [ARGS...]\n"
"       mt-ptsim [options] -o DIR --replay RUNFILE\n"
"\n"
"Runs PROG under ptrace, single-steps every thread and writes what\n"
"`perf record -e intel_pt/cyc=1,mtc=0/u --per-thread` would have recorded on an\n"
"Intel CPU, and the exact ground truth:\n"
"  DIR/perf.data        PT (libipt encoder), sideband, build-ids, CPUID\n"
"  DIR/images/          every executable mapping, perf build-id cache layout\n"
"                       (perf --buildid-dir DIR/images script ...)\n"
"  DIR/truth.mt         MTEV: every taken branch (formats/mtev-semantics.md)\n"
"  DIR/truth-spans.mt   MTEV: the call tree of every thread, whole run\n"
"  DIR/hits.mt          MTEV, as mt-capture writes it: the trigger (when stopped\n"
"                       at the stop symbol) and each thread's call chain at its\n"
"                       end (what a DWARF unwind there gives; mt-segment joins\n"
"                       it to the trace's stack: docs/exactness.md)\n"
"\n"
"Options:\n"
"  -o, --output DIR      output directory (created)\n"
"      --window N        keep only the PT of the last N instructions of each\n"
"                        thread (a snapshot); truth.mt holds that window's\n"
"                        branches, truth-spans.mt the whole tree less the\n"
"                        frames that ended before the window\n"
"      --start-at SYM    run freely to SYM (a symbol of PROG), then step\n"
"      --stop-at SYM     stop when a thread reaches SYM (default:\n"
"                        magic_trace_stop_indicator when PROG has it)\n"
"      --psb-period B    bytes between PSB packets (default 16384)\n"
"      --noretcomp       no return compression (every ret is a TIP)\n"
"      --tsx             a MODE.TSX packet (outside a transaction) in every\n"
"                        PSB+, as a cpu with TSX writes\n"
PTSIM_LAYOUT_HELP

"      --seed N          seed (reserved: faults are deterministic)\n"
"      --max-insns N     give up after N instructions (default 2000000)\n"
"      --inject FAULT    change the PT, never the truth (repeatable).  K is the\n"
"                        index of an executed instruction (from 0, all threads,\n"
"                        in execution order, within the run; P% means P percent\n"
"                        of the run's instructions); the fault lands in\n"
"                        the PT of the thread that executed it, where that\n"
"                        instruction's packets begin:\n"
"                          overflow@K[:N]  packets of N instructions (default\n"
"                                          64) after the first packet at or\n"
"                                          after K are lost, then OVF, FUP\n"
"                          drop@K:LEN      LEN bytes removed\n"
"                          corrupt@K:LEN   LEN bytes overwritten (02 04 ...)\n"
"                          garble@K:LEN    LEN bytes overwritten with pseudo-\n"
"                                          random ones (most parse as packets)\n"
"                          truncate-aux@K  the AUX record ends there, flagged\n"
"                                          truncated; data up to the next PSB\n"
"                                          is lost\n"
"                        DIR/faults.txt lists where each fault landed.\n"
"      --save-run FILE   save the execution log (replayable)\n"
"      --replay FILE     synthesize from a saved log instead of running PROG\n"
"      --stats           print steps, instructions and steps/second on stderr\n"
"                        (and how many code bytes were uprobes' int3s: code\n"
"                        is the mapped file's where memory has another tool's\n"
"                        uprobe, as a recording's decoder reads it)\n"
"      --inline-truth    also write DIR/truth-inline.mt: the inline frames of\n"
"                        every executed instruction of the window (chains\n"
"                        from llvm-symbolizer; flag inline, depth = level)\n"
"  -h, --help            this help\n"
"\n"
"Cycle model (decoded times are exact): one global clock; each instruction\n"
"costs 1 cycle, each system call 500 more, each signal delivery 1000; the\n"
"core:bus ratio (CBR) is the maximum non-turbo ratio (22), so one CYC cycle is\n"
"one TSC tick, TSC = 1e12 + clock.  PSB+ carries TSC; a CYC precedes every TNT,\n"
"TIP, TIP.PGE and OVF packet.  See docs/ptsim.md.\n"
"\n"
"Not handled: self-modifying code, fork/exec (children are not traced),\n"
"stack switching (makecontext), 32-bit code, symbols outside PROG for\n"
"--start-at/--stop-at.\n"
"\n"
"Exit codes: 0 ok; 1 PROG crashed, ran past --max-insns or executed another\n"
"program (execve: exec is not followed; outputs cover the run up to there);\n"
"2 usage error, PROG missing or not executable, bad run\n"
"file; 111 system error.\n",
	      f);
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*v = x;
	return 0;
}

static int parse_fault(const char *s, struct ptsim_fault *f, int *pct)
{
	const char *at = strchr(s, '@');
	if (!at)
		return -1;
	size_t n = (size_t)(at - s);
	if (n == 8 && !strncmp(s, "overflow", n))
		f->kind = PTSIM_FAULT_OVERFLOW;
	else if (n == 4 && !strncmp(s, "drop", n))
		f->kind = PTSIM_FAULT_DROP;
	else if (n == 7 && !strncmp(s, "corrupt", n))
		f->kind = PTSIM_FAULT_CORRUPT;
	else if (n == 6 && !strncmp(s, "garble", n))
		f->kind = PTSIM_FAULT_GARBLE;
	else if (n == 12 && !strncmp(s, "truncate-aux", n))
		f->kind = PTSIM_FAULT_TRUNCATE;
	else
		return -1;
	char k[64];
	snprintf(k, sizeof k, "%s", at + 1);
	char *colon = strchr(k, ':');
	if (colon)
		*colon = 0;
	size_t kl = strlen(k);
	*pct = kl > 1 && k[kl - 1] == '%';
	if (*pct)
		k[kl - 1] = 0;
	if (parse_u64(k, &f->at) < 0 || (*pct && f->at > 100))
		return -1;
	f->len = f->kind == PTSIM_FAULT_OVERFLOW ? 64 : 0;
	if (colon && parse_u64(colon + 1, &f->len) < 0)
		return -1;
	if ((f->kind == PTSIM_FAULT_DROP || f->kind == PTSIM_FAULT_CORRUPT ||
	     f->kind == PTSIM_FAULT_GARBLE) &&
	    (!colon || !f->len))
		return -1;
	if (f->kind == PTSIM_FAULT_TRUNCATE && colon)
		return -1;
	return 0;
}

/* The progress line on a terminal, rewritten in place; erased at the end. */
static void show_progress(void *ctx, const struct ptsim_progress *p)
{
	(void)ctx;
	if (!p) {
		fprintf(stderr, "\r%60s\r", "");
		return;
	}
	fprintf(stderr, "\rmt-ptsim: %llu instructions, %.0f/s; --max-insns %llu in <= %.0f s   ",
		(unsigned long long)p->insns, p->rate, (unsigned long long)p->max_insns, p->left);
}


struct opts {
	const char *out, *save, *replay;
	int inline_truth, stats, per_cpu;
	uint64_t fake_switch;
	struct ptsim_trace_opts to;
	struct ptsim_synth_opts so;
	int fault_pct[PTSIM_MAX_FAULTS]; /* K of fault i was given as P% */
};

static void parse_args(struct opts *op, int argc, char **argv)
{
	enum { O_WINDOW = 256, O_START, O_STOP, O_PSB, O_NORETCOMP, O_TSX, O_SEED, O_MAX, O_INJECT, O_SAVE,
	       O_REPLAY, O_STATS, O_INLINE, O_PERCPU, O_FAKESW };
	static const struct option lo[] = {
		{"output", required_argument, 0, 'o'},	 {"window", required_argument, 0, O_WINDOW},
		{"start-at", required_argument, 0, O_START}, {"stop-at", required_argument, 0, O_STOP},
		{"psb-period", required_argument, 0, O_PSB}, {"noretcomp", no_argument, 0, O_NORETCOMP}, {"tsx", no_argument, 0, O_TSX},
		{"seed", required_argument, 0, O_SEED},	 {"max-insns", required_argument, 0, O_MAX},
		{"inject", required_argument, 0, O_INJECT}, {"save-run", required_argument, 0, O_SAVE},
		{"replay", required_argument, 0, O_REPLAY}, {"stats", no_argument, 0, O_STATS},
		{"inline-truth", no_argument, 0, O_INLINE},
		{"per-cpu", no_argument, 0, O_PERCPU},	 {"fake-switch", required_argument, 0, O_FAKESW},
		{"help", no_argument, 0, 'h'},		 {0, 0, 0, 0},
	};
	struct ptsim_trace_opts *to = &op->to;
	struct ptsim_synth_opts *so = &op->so;
	int c;
	while ((c = getopt_long(argc, argv, "+:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o': op->out = optarg; break;
		case 'h': usage(stdout); exit(0);
		case O_WINDOW:
			if (parse_u64(optarg, &so->window) < 0 || !so->window)
				drv_usage("--window: expected a positive count, got '%s'", optarg);
			break;
		case O_START: to->start_at = optarg; break;
		case O_STOP: to->stop_at = optarg; break;
		case O_PSB:
			if (parse_u64(optarg, &so->psb_period) < 0 || so->psb_period < 64)
				drv_usage("--psb-period: expected bytes >= 64, got '%s'", optarg);
			break;
		case O_NORETCOMP: so->noretcomp = 1; break;
		case O_TSX: so->tsx = 1; break;
		case O_SEED:
			if (parse_u64(optarg, &so->seed) < 0)
				drv_usage("--seed: expected a number, got '%s'", optarg);
			break;
		case O_MAX:
			if (parse_u64(optarg, &to->max_insns) < 0 || !to->max_insns)
				drv_usage("--max-insns: expected a positive count, got '%s'", optarg);
			break;
		case O_INJECT:
			if (so->nfaults == PTSIM_MAX_FAULTS)
				drv_usage("--inject: at most %d faults", PTSIM_MAX_FAULTS);
			if (parse_fault(optarg, &so->faults[so->nfaults], &op->fault_pct[so->nfaults]) < 0)
				drv_usage("--inject: expected overflow@K[:N], drop@K:LEN, corrupt@K:LEN, "
					  "garble@K:LEN or truncate-aux@K, got '%s'", optarg);
			so->nfaults++;
			break;
		case O_SAVE: op->save = optarg; break;
		case O_REPLAY: op->replay = optarg; break;
		case O_STATS: op->stats = 1; break;
		case O_INLINE: op->inline_truth = 1; break;
		case O_PERCPU: op->per_cpu = 1; break;
		case O_FAKESW:
			if (parse_u64(optarg, &op->fake_switch) < 0 || op->fake_switch < 2)
				drv_usage("--fake-switch: expected at least 2 (ns), got '%s'", optarg);
			break;
		default: drv_getopt_error(c, argv);
		}
	}
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	if (!op->out && !op->save)
		drv_usage("missing -o DIR");
	if (op->fake_switch && !op->per_cpu)
		drv_usage("--fake-switch needs --per-cpu");
	if (op->replay && optind < argc)
		drv_usage("--replay takes no PROG");
	if (!op->replay && optind >= argc)
		drv_usage("missing PROG");
}

/* The run: loaded from --replay, or PROG stepped. */
static void get_run(struct ptsim_run *run, struct opts *op, char **prog_argv)
{
	char err[1024];
	if (op->replay) {
		close(drv_open_in(op->replay)); /* "unable to open RUN: ..." */
		int rc = ptsim_run_load(run, op->replay, err, sizeof err);
		if (rc < 0)
			drv_input_error(rc == PTSIM_E_SYS ? MT_EXIT_SYS : MT_EXIT_USAGE, op->replay, "%s", err);
		return;
	}
	static char path[4096];
	if (mt_find_in_path(prog_argv[0], path, sizeof path) < 0)
		mt_fatal(MT_EXIT_USAGE, "cannot execute %s: %s", prog_argv[0],
			 errno == ENOENT && !strchr(prog_argv[0], '/') ? "not found in PATH"
			 : errno == EACCES ? "not an executable file" : strerror(errno));
	op->to.argv = prog_argv;
	op->to.path = path;
	op->to.progress = io_progress_enabled() ? show_progress : NULL;
	int rc = ptsim_trace(run, &op->to, err, sizeof err);
	if (rc < 0) {
		ptsim_run_fini(run);
		mt_fatal(rc == PTSIM_E_USAGE ? MT_EXIT_USAGE : MT_EXIT_SYS, "%s", err);
	}
}

static void save_run(const struct ptsim_run *run, const char *save)
{
	char tmp[4096], err[1024];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", save, (int)getpid());
	if (ptsim_run_save(run, tmp, err, sizeof err) < 0) {
		unlink(tmp);
		mt_fatal(MT_EXIT_SYS, "%s", err);
	}
	if (rename(tmp, save) < 0)
		mt_fatal(MT_EXIT_SYS, "unable to write %s: %s", save, strerror(errno));
}

/* DIR/faults.txt: where each fault of @so landed in @pt (and on stderr). */
static void write_faults(const char *out, const struct ptsim_synth_opts *so,
			 const struct ptsim_result *pt)
{
	static const char *const kinds[] = {"", "overflow", "drop", "corrupt", "truncate-aux", "garble"};
	char fp[4096];
	snprintf(fp, sizeof fp, "%s/faults.txt", out);
	FILE *ff = fopen(fp, "we");
	if (!ff)
		mt_fatal(MT_EXIT_SYS, "unable to open %s: %s", fp, strerror(errno));
	fprintf(ff, "# fault kind instruction len tid pt-offset\n");
	for (int i = 0; i < so->nfaults; i++) {
		int landed = 0;
		for (size_t k = 0; k < pt->nts; k++)
			if (pt->ts[k].fault_offset[i] != UINT64_MAX) {
				landed = 1;
				fprintf(stderr, "mt-ptsim: fault %d: thread %u, PT offset %llu\n", i,
					pt->ts[k].tid, (unsigned long long)pt->ts[k].fault_offset[i]);
				fprintf(ff, "%d %s %llu %llu %u %llu\n", i, kinds[so->faults[i].kind],
					(unsigned long long)so->faults[i].at,
					(unsigned long long)so->faults[i].len, pt->ts[k].tid,
					(unsigned long long)pt->ts[k].fault_offset[i]);
			}
		if (!landed)
			mt_warn("fault %d: instruction %llu is not in the traced window", i,
				(unsigned long long)so->faults[i].at);
	}
	if (fclose(ff) != 0)
		mt_fatal(MT_EXIT_SYS, "unable to write %s: %s", fp, strerror(errno));
}

/* Synthesizes @run (the truth, and the faulted PT if faults are asked) and
 * writes DIR. */
static void write_outputs(const char *out, const struct ptsim_run *run, struct opts *op)
{
	char err[1024];
	struct ptsim_synth_opts *so = &op->so;
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		mt_fatal(MT_EXIT_SYS, "unable to create %s: %s", out, strerror(errno));
	for (int i = 0; i < so->nfaults; i++)
		if (op->fault_pct[i])
			so->faults[i].at = run->insns * so->faults[i].at / 100;
	struct ptsim_result truth, pt;
	struct ptsim_synth_opts clean = *so;
	clean.nfaults = 0;
	if (ptsim_synth(&truth, run, &clean, err, sizeof err) < 0)
		mt_fatal(MT_EXIT_SYS, "%s", err);
	if (so->nfaults && ptsim_synth(&pt, run, so, err, sizeof err) < 0)
		mt_fatal(MT_EXIT_SYS, "%s", err);
	truth.per_cpu = op->per_cpu;
	truth.fake_switch = op->fake_switch;
	if (so->nfaults) {
		pt.per_cpu = op->per_cpu;
		pt.fake_switch = op->fake_switch;
	}
	if (ptsim_write_images(out, run, err, sizeof err) < 0)
		mt_fatal(MT_EXIT_SYS, "%s", err);
	ptsim_write_out(out, "truth.mt", ptsim_write_truth, run, &truth);
	ptsim_write_out(out, "truth-spans.mt", ptsim_write_spans, run, &truth);
	ptsim_write_out(out, "hits.mt", ptsim_write_hits, run, &truth);
	if (op->inline_truth) {
		char path[4096], e2[512];
		snprintf(path, sizeof path, "%s/truth-inline.mt", out);
		struct io_out o;
		drv_out_open(&o, path, 1, 1);
		if (ptsim_write_inline(o.fd, run, &truth, so->window, NULL, e2, sizeof e2) < 0)
			drv_write_failed(&o, path, e2);
		drv_out_commit(&o, path);
	}
	ptsim_write_out(out, "perf.data", ptsim_write_perf, run, so->nfaults ? &pt : &truth);
	if (!so->nfaults) {
		char fp[4096];
		snprintf(fp, sizeof fp, "%s/faults.txt", out);
		unlink(fp); /* from an earlier run into the same DIR */
	} else {
		write_faults(out, so, &pt);
		ptsim_result_fini(&pt);
	}
	ptsim_result_fini(&truth);
}

int main(int argc, char **argv)
{
	drv_init(argc, argv);
	struct opts op = {.to = {.max_insns = 2000000}, .so = {.psb_period = 16384}};
	parse_args(&op, argc, argv);
	struct ptsim_run run;
	get_run(&run, &op, argv + optind);
	if (op.stats)
		fprintf(stderr, "mt-ptsim: %llu steps, %llu instructions, %zu threads, %.2f s, %.0f steps/s\n",
			(unsigned long long)run.steps, (unsigned long long)run.insns, run.nthreads,
			run.seconds, run.seconds > 0 ? (double)run.steps / run.seconds : 0.0);
	if (op.stats && run.unprobed)
		fprintf(stderr, "mt-ptsim: %zu code bytes were another tool's uprobe (int3 in memory): the file's bytes used\n",
			run.unprobed);
	if (op.save && !op.replay)
		save_run(&run, op.save);
	if (op.out)
		write_outputs(op.out, &run, &op);
	int code = MT_EXIT_OK;
	if (run.end == PTSIM_END_SIGNALED) {
		fprintf(stderr, "%s: error: %s was killed by signal %d (%s) at 0x%llx after %llu instructions\n",
			mt_progname, run.comm, run.status, strsignal(run.status),
			(unsigned long long)run.end_ip, (unsigned long long)run.insns);
		code = MT_EXIT_DEGRADED;
	} else if (run.end == PTSIM_END_EXEC) {
		fprintf(stderr,
			"%s: error: %s executed another program (execve) after %llu instructions; "
			"exec is not followed: the run ends in that system call\n",
			mt_progname, run.comm, (unsigned long long)run.insns);
		code = MT_EXIT_DEGRADED;
	} else if (run.end == PTSIM_END_RUNAWAY) {
		fprintf(stderr, "%s: error: %s still running after %llu instructions (--max-insns); stopped it\n",
			mt_progname, run.comm, (unsigned long long)run.insns);
		code = MT_EXIT_DEGRADED;
	}
	ptsim_run_fini(&run);
	return code;
}
