/* ptsim: an exact Intel PT synthesizer driven by ptrace single-stepping.
 *
 * Three steps, each usable alone:
 *   ptsim_trace()  runs a program under ptrace, single-steps every thread and
 *                  fills a struct ptsim_run: the execution log (one event per
 *                  executed instruction, system call return, signal delivery,
 *                  thread start/end) plus a memory dump of every executable
 *                  mapping that ran.  ptsim_run_save()/ptsim_run_load() store
 *                  it in a file so that outputs can be re-synthesized without
 *                  stepping again (mt-ptsim --save-run / --replay).
 *   ptsim_synth()  turns a run into per-thread PT packet streams (libipt's
 *                  encoder), the true branch stream and the true span tree,
 *                  following formats/mtev-semantics.md and the cycle model
 *                  below.
 *   ptsim_write_*  writes perf.data, truth.mt, truth-spans.mt and images/.
 *
 * Cycle model (documented in docs/ptsim.md): one global clock shared by
 * all threads (the tracer runs one instruction at a time); every executed
 * instruction costs PTSIM_CYC_INSN cycles, every system call PTSIM_CYC_SYSCALL
 * more, every signal delivery PTSIM_CYC_SIGNAL.  The core:bus ratio equals the
 * maximum non-turbo ratio, so one CYC cycle is one TSC tick:
 *   tsc = PTSIM_TSC0 + clock.
 *
 * Library code: never prints, never exits; errors are negative values with a
 * message in the caller's buffer.
 */
#ifndef MT_PTSIM_H
#define MT_PTSIM_H

#include <stddef.h>
#include <stdint.h>

#define PTSIM_CYC_INSN 1
#define PTSIM_CYC_SYSCALL 500
#define PTSIM_CYC_SIGNAL 1000
#define PTSIM_TSC0 1000000000000ull /* TSC at clock 0 */

/* The simulated CPU (a real Intel model: Ice Lake server, no libipt errata). */
#define PTSIM_CPU_FAMILY 6
#define PTSIM_CPU_MODEL 0x6a
#define PTSIM_CPU_STEPPING 6
#define PTSIM_NOM_RATIO 22	  /* max non-turbo ratio = CBR: 2.2 GHz */
#define PTSIM_TSC_HZ 2200000000ull
#define PTSIM_CTC_D 2		  /* CPUID.15H EAX */
#define PTSIM_CTC_N 176		  /* CPUID.15H EBX: 25 MHz crystal */
#define PTSIM_TIME_SHIFT 31
#define PTSIM_TIME_MULT 976128930ull /* (1e9 << 31) / TSC_HZ */
#define PTSIM_TIME_ZERO 0ull
#define PTSIM_PMU_TYPE 8	  /* intel_pt PMU type number */

enum ptsim_ev_kind {
	PTSIM_EV_INSN = 1,   /* ip executed; next = following ip; sp = rsp after;
			      * flags SYSCALL: a system call was issued (arg = nr,
			      * next = 0: see the thread's next SYSRET/SIGNAL/END) */
	PTSIM_EV_SYSRET = 2, /* system call returned to user: ip = resume ip */
	PTSIM_EV_SIGNAL = 3, /* signal delivered to a handler: ip = where the thread
			      * was (next unexecuted ip), next = handler, sp = rsp at
			      * the handler, sig; flags INSYSCALL: the thread was in a
			      * system call (untraced) when it arrived */
	PTSIM_EV_THREAD = 4, /* thread starts being stepped at ip (arg = parent) */
	PTSIM_EV_END = 5,    /* thread ends: ip = next unexecuted ip, or 0 */
	PTSIM_EV_MAP = 6,    /* executable mapping arg = index in run->maps */
	PTSIM_EV_STOP = 7,   /* the stop symbol is reached by tid: ip = its address,
			      * next = rdi, sp = rsi */
};
enum { PTSIM_F_SYSCALL = 1, PTSIM_F_INSYSCALL = 2 };

struct ptsim_ev {
	uint8_t kind, flags;
	uint16_t sig;
	uint32_t tid;
	uint64_t ip, next, sp, arg;
};

struct ptsim_map {
	uint64_t start, len, pgoff;
	uint32_t prot; /* PROT_* */
	uint32_t maj, min;
	uint64_t ino;
	char *path;    /* "[vdso]" for the vdso */
	uint8_t build_id[20];
	uint8_t build_id_len;
	uint8_t *bytes; /* len bytes: the mapping's memory when first seen */
};

struct ptsim_thread {
	uint32_t tid;
	char comm[16];
};

enum ptsim_end {
	PTSIM_END_EXITED = 1,	/* all threads exited; status = exit code */
	PTSIM_END_SIGNALED = 2, /* killed by signal status (a crash) */
	PTSIM_END_STOPPED = 3,	/* the stop symbol was reached */
	PTSIM_END_RUNAWAY = 4,	/* --max-insns reached */
	PTSIM_END_EXEC = 5,	/* the process executed another program (a
				 * successful execve): not followed, the run
				 * ends in that system call */
};

struct ptsim_run {
	uint32_t pid;
	char comm[16];
	char *cmdline;	      /* argv joined by spaces */
	struct ptsim_ev *ev;  /* the log, in execution order */
	size_t nev, cap;
	struct ptsim_map *maps;
	size_t nmaps;
	struct ptsim_thread *threads;
	size_t nthreads;
	uint64_t steps;	      /* single-steps taken (rep iterations included) */
	uint64_t insns;	      /* instructions in the log */
	double seconds;	      /* wall time of the stepping */
	int end, status;      /* enum ptsim_end and exit code / signal */
	uint64_t end_ip;      /* crash: where */
	size_t unprobed;      /* code bytes given back their file's byte: uprobes'
			       * int3s in memory (not saved by --save-run) */
	char stop_symbol[128];
	char start_symbol[128]; /* --start-at, or empty */
};

/* What stepping has done so far (ptsim_trace_opts.progress). */
struct ptsim_progress {
	uint64_t insns;	    /* instructions logged */
	uint64_t max_insns; /* the limit */
	double rate;	    /* instructions per second of wall time */
	double left;	    /* seconds to max_insns at that rate (0: past it) */
};

struct ptsim_trace_opts {
	char *const *argv;	 /* PROG ARGS..., NULL-terminated */
	const char *path;	 /* the file to execute (no PATH search, no
				  * shell fallback); NULL: argv[0] */
	const char *start_at;	 /* symbol or NULL */
	const char *stop_at;	 /* symbol or NULL: magic_trace_stop_indicator if present */
	uint64_t max_insns;
	/* Called about twice a second while stepping, and with NULL when
	 * stepping ends (not on an error); NULL: never.  The tool prints. */
	void (*progress)(void *ctx, const struct ptsim_progress *p);
	void *progress_ctx;
};

enum {
	PTSIM_E_USAGE = -2, /* the program or a symbol is unusable */
	PTSIM_E_SYS = -111, /* a system call failed */
};

/* 0 on success (run->end says how it ended), or PTSIM_E_*; @err gets the
 * message.  The tracee never outlives this call. */
int ptsim_trace(struct ptsim_run *run, const struct ptsim_trace_opts *o, char *err,
		size_t errlen);
void ptsim_run_fini(struct ptsim_run *run);
int ptsim_run_save(const struct ptsim_run *run, const char *path, char *err, size_t errlen);
/* 0, or PTSIM_E_USAGE (not a run file, or a damaged one) or PTSIM_E_SYS (it
 * cannot be read) with the reason in @err. */
int ptsim_run_load(struct ptsim_run *run, const char *path, char *err, size_t errlen);
/* The map containing @ip, or NULL. */
const struct ptsim_map *ptsim_find_map(const struct ptsim_run *run, uint64_t ip);

/* ---- synthesis ---- */
enum ptsim_fault_kind {
	PTSIM_FAULT_OVERFLOW = 1, /* OVF + FUP; packets of len instructions lost */
	PTSIM_FAULT_DROP = 2,	  /* len bytes removed from the stream */
	PTSIM_FAULT_CORRUPT = 3,  /* len bytes overwritten with bad opcodes */
	PTSIM_FAULT_TRUNCATE = 4, /* AUX record flagged truncated, data up to the
				   * next PSB lost */
	PTSIM_FAULT_GARBLE = 5,	  /* len bytes overwritten with pseudo-random bytes
				   * (most of which parse as packets) */
};

struct ptsim_fault {
	int kind;
	uint64_t at;  /* K: index of the instruction (0-based, all threads, in
		       * execution order, as counted by the log) */
	uint64_t len;
};

#define PTSIM_MAX_FAULTS 16

struct ptsim_synth_opts {
	uint64_t window;     /* 0: everything; else last N instructions per thread */
	uint64_t psb_period; /* bytes between PSBs (approximate) */
	int noretcomp;
	int tsx; /* MODE.TSX (outside a transaction) in every PSB+, as a cpu with TSX */
	uint64_t seed;
	struct ptsim_fault faults[PTSIM_MAX_FAULTS];
	int nfaults;
};

enum { PTSIM_AUX_TRUNCATED = 1 };

struct ptsim_aux {
	uint64_t offset, size, flags;
	uint64_t time; /* perf time of the record */
};

struct ptsim_tstream {
	uint32_t tid;
	uint8_t *pt;
	size_t len, cap;
	struct ptsim_aux *aux;
	size_t naux;
	uint64_t first_time; /* perf time tracing of this thread began */
	uint64_t start_time; /* perf time the thread was first seen */
	uint64_t end_time;
	uint64_t fault_offset[PTSIM_MAX_FAULTS]; /* where each fault landed, or ~0 */
	/* the call chain at the thread's end (next ip, then return addresses,
	 * innermost first) and the time slot of that end; NULL: none */
	uint64_t *chain;
	uint32_t nchain, chain_slot;
};

struct ptsim_branch {
	uint32_t tid;
	uint8_t type; /* enum mtev_branch_type */
	uint64_t from, to;
	uint32_t slot; /* index into times[] */
};

struct ptsim_span {
	uint32_t tid;
	int32_t depth; /* relative; normalized when written */
	uint32_t flags;
	uint32_t bslot, eslot;
	uint64_t func, callsite;
	uint64_t bseq;	 /* order of the beginning (pre-order) */
	const char *name; /* synthetic spans */
};

struct ptsim_result {
	struct ptsim_tstream *ts; /* one per thread, in run->threads order */
	size_t nts;
	struct ptsim_branch *br;
	size_t nbr, brcap;
	struct ptsim_span *spans;
	size_t nspans, spcap;
	uint64_t *times; /* perf time of each time slot */
	size_t ntimes, tcap;
	uint64_t trigger_slot; /* UINT64_MAX: no trigger */
	uint32_t trigger_tid;
	uint64_t end_clock;
	uint64_t config; /* the PT event's config (RTIT_CTL bits) */
	/* ptsim_write_perf's layout: per-thread buffers (0, what `perf record
	 * --per-thread` writes), or per-cpu ones (1) with thread k alone on
	 * cpu k (ITRACE_START); with fake_switch > 0 (per-cpu only), every
	 * fake_switch ns of each thread's trace a SWITCH_CPU_WIDE hands its cpu
	 * for fake_switch / 2 ns, then back, to a thread that does not exist:
	 * in turn one of the same process (tid | 1 << 22) and one of another
	 * process (pid and tid | 1 << 23) whose maps hold other code at the
	 * same addresses (the same files 16 bytes further on): its trace is
	 * decoded as that thread's (decoder differential tests only: not the
	 * truth) */
	int per_cpu;
	uint64_t fake_switch;
};

int ptsim_synth(struct ptsim_result *res, const struct ptsim_run *run,
		const struct ptsim_synth_opts *o, char *err, size_t errlen);
void ptsim_result_fini(struct ptsim_result *res);

/* perf time of a TSC value (TIME_CONV rule) and of a clock value. */
uint64_t ptsim_tsc_to_perf(uint64_t tsc);

/* ---- outputs ---- */
/* Each returns 0 or -1 with @err set. */
int ptsim_write_perf(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		     char *err, size_t errlen);
int ptsim_write_truth(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		      char *err, size_t errlen);
/* hits.mt, as mt-capture writes it: the trigger (when stopped at the stop
 * symbol), then each thread's call chain at its end (a sample record with
 * flag MTEV_SAMPLE_CHAIN). */
int ptsim_write_hits(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		     char *err, size_t errlen);
int ptsim_write_spans(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		      char *err, size_t errlen);
/* truth-inline.mt: the inline frames of the window's executed instructions
 * (each thread's last @window, 0: all; oracles/ptsim_inline.c), chains
 * from @symbolizer (NULL: llvm-symbolizer in PATH). */
int ptsim_write_inline(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		       uint64_t window, const char *symbolizer, char *err, size_t errlen);
/* Creates DIR/images/ (perf build-id cache layout, see docs/ptsim.md). */
int ptsim_write_images(const char *dir, const struct ptsim_run *run, char *err, size_t errlen);
/* Relative path of a map's image under images/ into @out. */
void ptsim_image_relpath(char *out, size_t n, const struct ptsim_map *m);

#endif
