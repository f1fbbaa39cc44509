/* mt-ptgen: big, valid Intel PT for a real binary, fast, with its truth.
 * Walks the binary's code (oracles/ptgen.c) and feeds mt-ptsim's
 * synthesizer and writers (oracles/ptsim_synth.c, ptsim_out.c). */
#include "driver.h"
#include "err.h"
#include "io.h"
#include "ptgen.h"
#include "ptsim.h"
#include "ptsim_write.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fputs(
"usage: mt-ptgen [options] -o DIR BINARY\n"
"\n"
"Generates a big, valid Intel PT recording of BINARY (an x86-64 ELF executable\n"
"with function symbols) without running it: a seeded walk through the binary's\n"
"own code.  Conditional branches go either way at random, direct branches\n"
"where the code says, returns to the instruction after their call, indirect\n"
"jumps and calls to the entry of a random function that can return, system\n"
"calls return to the next instruction.  No path the code does not allow is\n"
"taken: a static analysis (capstone) keeps the walk away from code that\n"
"cannot return, steers back to a return at --max-depth or after --budget\n"
"instructions in one frame, and keeps each thread's outermost frame in a loop\n"
"that calls, so it never returns.  The instructions go through mt-ptsim's\n"
"synthesizer and writers, so DIR has mt-ptsim's layout and cycle model:\n"
"  DIR/perf.data        PT (libipt encoder), sideband, build-ids, CPUID\n"
"  DIR/images/          BINARY in perf's build-id cache layout\n"
"  DIR/truth.mt         MTEV: every taken branch (formats/mtev-semantics.md)\n"
"  DIR/truth-spans.mt   MTEV: the call tree of every thread (unless --no-spans)\n"
"\n"
"Options:\n"
"  -o, --output DIR      output directory (created)\n"
"  -n, --insns N         instructions to generate, all threads (default\n"
"                        50000000; suffixes k, M, G)\n"
"      --seed N          seed of the walk (default 1)\n"
"      --threads N       threads (1..64, default 1); they take turns in slices\n"
"                        of 1000..21000 instructions, one PT queue each\n"
"      --root SYM        the outermost function of the first thread (default:\n"
"                        chosen by the seed among the functions that qualify)\n"
"      --max-depth N     call depth at which the walk steers to returns\n"
"                        (default 24)\n"
"      --budget N        instructions in one frame after which the walk steers\n"
"                        to its return (default 3000)\n"
"      --psb-period B    bytes between PSB packets (default 16384)\n"
"      --noretcomp       no return compression (every ret is a TIP)\n"
"      --tsx             a MODE.TSX packet (outside a transaction) in every\n"
"                        PSB+, as a cpu with TSX writes\n"
PTSIM_LAYOUT_HELP

"      --no-spans        do not write truth-spans.mt\n"
"      --stats           print what was analysed and generated, and times, on\n"
"                        stderr\n"
"  -h, --help            this help\n"
"\n"
"Memory: about 45 bytes per instruction while generating (the execution log).\n"
"\n"
"Exit codes: 0 ok; 2 usage error, BINARY unusable (not ELF, no symbols, no\n"
"function that loops through a call); 111 system error (out of memory, cannot\n"
"write DIR).\n",
	      f);
}

static int parse_count(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 0);
	if (errno || end == s || s[0] == '-')
		return -1;
	uint64_t mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1000, end++;
	else if (*end == 'M')
		mul = 1000000, end++;
	else if (*end == 'G')
		mul = 1000000000, end++;
	if (*end)
		return -1;
	*v = x * mul;
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct opts {
	const char *out;
	struct ptgen_opts go;
	struct ptsim_synth_opts so;
	int stats, spans, per_cpu;
	uint64_t fake_switch;
};

static void parse_args(struct opts *op, int argc, char **argv)
{
	enum { O_SEED = 256, O_THREADS, O_ROOT, O_DEPTH, O_BUDGET, O_PSB, O_NORETCOMP, O_TSX, O_NOSPANS,
	       O_STATS, O_PERCPU, O_FAKESW };
	static const struct option lo[] = {
		{"output", required_argument, 0, 'o'},	    {"insns", required_argument, 0, 'n'},
		{"seed", required_argument, 0, O_SEED},	    {"threads", required_argument, 0, O_THREADS},
		{"root", required_argument, 0, O_ROOT},	    {"max-depth", required_argument, 0, O_DEPTH},
		{"budget", required_argument, 0, O_BUDGET}, {"psb-period", required_argument, 0, O_PSB},
		{"noretcomp", no_argument, 0, O_NORETCOMP}, {"tsx", no_argument, 0, O_TSX}, {"no-spans", no_argument, 0, O_NOSPANS},
		{"stats", no_argument, 0, O_STATS},	    {"help", no_argument, 0, 'h'},
		{"per-cpu", no_argument, 0, O_PERCPU},	    {"fake-switch", required_argument, 0, O_FAKESW},
		{0, 0, 0, 0},
	};
	struct ptgen_opts *go = &op->go;
	int c;
	uint64_t v;
	while ((c = getopt_long(argc, argv, ":o:n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			op->out = optarg;
			break;
		case 'n':
			if (parse_count(optarg, &go->insns) < 0 || !go->insns)
				drv_usage("--insns: expected a positive count, got '%s'", optarg);
			break;
		case O_SEED:
			if (parse_count(optarg, &go->seed) < 0)
				drv_usage("--seed: expected a number, got '%s'", optarg);
			break;
		case O_THREADS:
			if (parse_count(optarg, &v) < 0 || v < 1 || v > 64)
				drv_usage("--threads: expected 1..64, got '%s'", optarg);
			go->threads = (unsigned)v;
			break;
		case O_ROOT:
			go->root = optarg;
			break;
		case O_DEPTH:
			if (parse_count(optarg, &v) < 0 || v < 1 || v > 100000)
				drv_usage("--max-depth: expected 1..100000, got '%s'", optarg);
			go->max_depth = (unsigned)v;
			break;
		case O_BUDGET:
			if (parse_count(optarg, &v) < 0 || v < 1 || v > 1000000000)
				drv_usage("--budget: expected 1..1e9, got '%s'", optarg);
			go->budget = (unsigned)v;
			break;
		case O_PSB:
			if (parse_count(optarg, &op->so.psb_period) < 0 || op->so.psb_period < 256)
				drv_usage("--psb-period: expected at least 256, got '%s'", optarg);
			break;
		case O_NORETCOMP:
			op->so.noretcomp = 1;
			break;
		case O_TSX:
			op->so.tsx = 1;
			break;
		case O_NOSPANS:
			op->spans = 0;
			break;
		case O_STATS:
			op->stats = 1;
			break;
		case O_PERCPU:
			op->per_cpu = 1;
			break;
		case O_FAKESW:
			if (parse_count(optarg, &op->fake_switch) < 0 || op->fake_switch < 2)
				drv_usage("--fake-switch: expected at least 2 (ns), got '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			drv_getopt_error(c, argv);
		}
	}
	if (!op->out)
		drv_usage("-o DIR is required");
	if (op->fake_switch && !op->per_cpu)
		drv_usage("--fake-switch needs --per-cpu");
	if (optind + 1 != argc)
		drv_usage("expected one BINARY");
	go->path = argv[optind];
	op->so.seed = go->seed;
}

static void print_stats(const struct ptgen_stats *st, const struct ptsim_run *run,
			const struct ptsim_result *res, const double t[4])
{
	size_t pt = 0;
	for (size_t i = 0; i < res->nts; i++)
		pt += res->ts[i].len;
	fprintf(stderr,
		"mt-ptgen: %zu functions, %zu instructions decoded, %zu can return, %zu roots\n"
		"mt-ptgen: %llu instructions, %llu calls, %llu returns, %llu syscalls, depth <= %llu\n"
		"mt-ptgen: %zu branches, %zu spans, %zu bytes of PT in %zu threads\n"
		"mt-ptgen: walk %.2f s, synthesis %.2f s, writing %.2f s, total %.2f s\n",
		st->functions, st->nodes, st->returning, st->roots, (unsigned long long)run->insns,
		(unsigned long long)st->calls, (unsigned long long)st->returns,
		(unsigned long long)st->syscalls, (unsigned long long)st->max_depth, res->nbr,
		res->nspans, pt, res->nts, t[1] - t[0], t[2] - t[1], t[3] - t[2], t[3] - t[0]);
}

int main(int argc, char **argv)
{
	drv_init(argc, argv);
	struct opts op = {.go = {.insns = 50000000, .seed = 1, .threads = 1},
			  .so = {.psb_period = 16384}, .spans = 1};
	parse_args(&op, argc, argv);
	const char *out = op.out;
	close(drv_open_in(op.go.path)); /* "unable to open BINARY: ..." */

	char err[512];
	struct ptsim_run run;
	struct ptgen_stats st;
	double t[4];
	t[0] = now();
	int rc = ptgen_walk(&run, &op.go, &st, err, sizeof err);
	if (rc == PTGEN_E_INPUT)
		drv_input_error(MT_EXIT_USAGE, op.go.path, "%s", err);
	if (rc < 0)
		mt_fatal(rc == PTSIM_E_USAGE ? MT_EXIT_USAGE : MT_EXIT_SYS, "%s", err);
	t[1] = now();
	struct ptsim_result res;
	if (ptsim_synth(&res, &run, &op.so, err, sizeof err) < 0)
		mt_fatal(MT_EXIT_SYS, "synthesis: %s", err);
	t[2] = now();
	res.per_cpu = op.per_cpu;
	res.fake_switch = op.fake_switch;
	/* The log is no longer needed, except the MAP events at its head that
	 * the perf.data writer reads (it stops after the last map). */
	size_t keep = 0;
	while (keep < run.nev && run.ev[keep].kind == PTSIM_EV_MAP)
		keep++;
	struct ptsim_ev *e = realloc(run.ev, (keep ? keep : 1) * sizeof(*e));
	if (e) {
		run.ev = e;
		run.nev = run.cap = keep;
	}
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		mt_fatal(MT_EXIT_SYS, "unable to create %s: %s", out, strerror(errno));
	ptsim_write_out(out, "perf.data", ptsim_write_perf, &run, &res);
	ptsim_write_out(out, "truth.mt", ptsim_write_truth, &run, &res);
	if (op.spans)
		ptsim_write_out(out, "truth-spans.mt", ptsim_write_spans, &run, &res);
	if (ptsim_write_images(out, &run, err, sizeof err) < 0)
		mt_fatal(MT_EXIT_SYS, "%s", err);
	t[3] = now();
	if (op.stats)
		print_stats(&st, &run, &res, t);
	ptsim_result_fini(&res);
	ptsim_run_fini(&run);
	return 0;
}
