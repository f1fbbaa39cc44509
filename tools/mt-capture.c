/* mt-capture: record a program under perf, with a trigger that snapshots.
 *
 *   mt-capture run [options] -o DIR -- CMD [ARGS...]
 *   mt-capture attach [options] -p PID[,PID...] -o DIR
 *
 * Writes DIR/perf.data (the snapshot) and DIR/hits.mt (MTEV trigger records).
 * See --help. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "err.h"
#include "io.h"
#include "mtev.h"
#include "perfdata.h"
#include "perfcmd.h"
#include "symaddr.h"
#include "sysenv.h"
#include "cgpick.h"
#include "tracee.h"
#include "trigger.h"
#include "unwind.h"

#define STOP_SYMBOL "magic_trace_stop_indicator"
#define MAX_PIDS 64
#define MAX_HITS 4096

enum mode { MODE_AUTO, MODE_PT, MODE_SAMPLE, MODE_SINGLESTEP };
enum via { VIA_AUTO, VIA_HW, VIA_UPROBE };

struct opts {
	int attach;
	const char *dir;
	enum mode mode;
	const char *trigger; /* NULL: default (stop indicator if present) */
	int trigger_explicit;
	enum via via;
	int multi;
	double duration; /* seconds; 0: none */
	const char *snapshot_size;
	unsigned freq;
	const char *event;
	const char *call_graph;
	int root_freq; /* -1: the default (freq / 250, at least 10) */
	enum perfcmd_timing timing;
	int kernel;
	int per_thread;
	const char *perf;
	const char *ptsim;
	const char *ptsim_args;
	int dry_run;
	int verbose;
	pid_t pids[MAX_PIDS];
	int npids;
	char **cmd;
};

static void usage(FILE *f)
{
	fputs("usage: mt-capture run [options] -o DIR -- CMD [ARGS...]\n"
	      "       mt-capture attach [options] -p PID[,PID...] -o DIR\n"
	      "\n"
	      "Records CMD (started stopped, then released once perf is recording) or running\n"
	      "processes under perf, and takes a snapshot of the recent past when a trigger\n"
	      "fires. Writes DIR/perf.data (and DIR/perf.data.N for later snapshots with\n"
	      "--multi-snapshot), DIR/hits.mt (MTEV trigger records: time, pid, tid, address,\n"
	      "the two argument registers rdi and rsi; after each, the call chain there,\n"
	      "unwound from a copy of the user stack) and DIR/perf.log (perf's messages).\n"
	      "\n"
	      "Options:\n"
	      "  -o, --output DIR        directory to write (created if needed)\n"
	      "  -p, --pid PID[,PID...]  (attach) processes to record\n"
	      "  -m, --mode MODE         auto (default): pt where /sys/bus/event_source/devices/\n"
	      "                          intel_pt exists, else sample; pt: Intel PT snapshot mode;\n"
	      "                          sample: stack sampling (perf --call-graph); singlestep:\n"
	      "                          mt-ptsim (exact PT of a short run on any x86-64)\n"
	      "  -t, --trigger WHAT      " STOP_SYMBOL " (default, when the program\n"
	      "                          has it), SYMBOL, addr:0xADDR (runtime address), or none\n"
	      "      --trigger-via HOW   auto (default): a hardware execute breakpoint if they\n"
	      "                          work here, else a uprobe; hw; uprobe (needs root)\n"
	      "      --multi-snapshot    a snapshot at every hit (default: the first hit stops)\n"
	      "  -d, --duration SECONDS  stop recording after that long (snapshot then)\n"
	      "  -s, --snapshot-size SZ  ring size per CPU (e.g. 4M; perf's -m syntax);\n"
	      "                          default: perf's\n"
	      "  -F, --freq HZ           sample: samples per second (default 10000)\n"
	      "  -e, --event EV          sample: cpu-clock (default) or cycles\n"
	      "  -g, --call-graph CG     sample: auto (default): lbr where the CPU has it, else\n"
	      "                          dwarf where the program or a library lacks frame\n"
	      "                          pointers, else fp (says which and why; -n shows fp);\n"
	      "                          or fp, dwarf, lbr (docs/sampling.md)\n"
	      "      --root-freq HZ      -g fp: stack-copy samples per second beside the fp ones,\n"
	      "                          for each thread's root frames (default: --freq / 250,\n"
	      "                          at least 10; 0: none)\n"
	      "      --timing RES        pt: low, normal (default) or high\n"
	      "      --kernel            record the kernel too (root, or perf_event_paranoid <= 1)\n"
	      "      --per-thread        pt: one buffer per thread (-t) instead of per CPU\n"
	      "      --perf PATH         perf to run (default $MT_PERF, else perf in PATH)\n"
	      "      --ptsim PATH        singlestep backend (default: mt-ptsim beside mt-capture)\n"
	      "      --ptsim-args ARGS   extra options for mt-ptsim (split at spaces)\n"
	      "  -n, --dry-run           print the perf command that would run (pt: as on an\n"
	      "                          Intel host) and exit\n"
	      "  -v, --verbose           print the perf command line and what happens\n"
	      "  -h, --help\n"
	      "\n"
	      "Without a trigger, the snapshot is taken on Ctrl-C, when CMD exits, or at the\n"
	      "end of --duration. In run mode the program is paused (SIGSTOP) from the hit\n"
	      "until the snapshot is written, so the trace ends at the trigger.\n"
	      "\n"
	      "Exit status: run: CMD's exit status (128+N if killed by signal N) when the\n"
	      "capture worked; attach: 0. Otherwise 2: usage, CMD not found, no such process,\n"
	      "mode not available here; 111: system error (perf missing or failing, no\n"
	      "permission, perf_event_paranoid too strict).\n",
	      f);
}

/* ---- small helpers ---- */

static int parse_pids(struct opts *o, const char *s)
{
	const char *p = s;
	while (*p) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || v <= 0 || v > INT_MAX || (*end && *end != ','))
			return -1;
		if (o->npids == MAX_PIDS)
			return -1;
		o->pids[o->npids++] = (pid_t)v;
		p = *end ? end + 1 : end;
	}
	return o->npids ? 0 : -1;
}

static int read_int_file(const char *path, long *v)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	*v = strtol(buf, NULL, 10);
	return 0;
}

static int have_intel_pt(void)
{
	const char *root = getenv("MT_SYSFS_EVENT_SOURCE"); /* tests */
	char path[512];
	snprintf(path, sizeof path, "%s/intel_pt", root ? root : "/sys/bus/event_source/devices");
	return access(path, F_OK) == 0;
}

/* Last branch records for -g lbr: the cpu PMU says how many (Intel; AMD
 * with LBRv2).  Hardware counters at all: the cpu PMU exists. */
static int have_pmu_file(const char *rel)
{
	const char *root = getenv("MT_SYSFS_EVENT_SOURCE"); /* tests */
	char path[512];
	snprintf(path, sizeof path, "%s/%s", root ? root : "/sys/bus/event_source/devices", rel);
	return access(path, F_OK) == 0;
}

static int have_psb_cyc(void)
{
	long v = 0;
	if (read_int_file("/sys/bus/event_source/devices/intel_pt/caps/psb_cyc", &v) < 0)
		return 1; /* unknown (not an Intel host): assume a current CPU */
	return v != 0;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the trigger ---- */

struct capture {
	struct opts *o;
	char dir_perf[PATH_MAX];
	struct trigger *trig;
	enum trigger_mech mech;
	uint64_t trig_addr[MAX_PIDS];
	char trig_name[256];
	struct trigger_hit hits[MAX_HITS];
	size_t nhits;
	/* the call chain of each hit that has one, unwound when it was read
	 * (the process's maps are those of then): by tid and time */
	struct hit_chain {
		uint32_t tid, n;
		uint64_t time;
		size_t off; /* into chain_ips */
	} chains[MAX_HITS];
	size_t nchains;
	uint64_t *chain_ips;
	size_t nchain_ips, capchain_ips;
	/* the last /proc/PID/maps read of each watched process: a hit read
	 * after its process exited is unwound with these */
	char *maps_txt[MAX_PIDS];
	uint64_t lost;
	pid_t perf_pid;
	int perf_status;
	int perf_exited;
	int ctl_w, ack_r; /* our ends of perf's control pipes */
	int no_stop_symbol; /* the default trigger is absent: say so */
	char comm[MAX_PIDS][64];
	pid_t child;	  /* run mode */
	int child_status;
	int child_exited;
};

static enum trigger_mech choose_mech(const struct opts *o)
{
	int hw;
	switch (o->via) {
	case VIA_HW:
		return TRIGGER_HW;
	case VIA_UPROBE:
		return TRIGGER_UPROBE;
	default:
		break;
	}
	hw = trigger_hw_works();
	if (hw == 1)
		return TRIGGER_HW;
	if (geteuid() != 0)
		mt_fatal(MT_EXIT_SYS,
			 "hardware breakpoints %s on this machine and the uprobe fallback needs root: "
			 "run as root, or use --trigger none",
			 hw == 0 ? "do not fire" : "cannot be opened");
	if (o->verbose)
		mt_note("hardware breakpoints %s here: the trigger is a uprobe",
			hw == 0 ? "do not fire" : "cannot be opened");
	return TRIGGER_UPROBE;
}

static const char *trig_errstr(int r)
{
	switch (-r) {
	case EACCES:
	case EPERM:
		return "permission denied (perf_event_paranoid, another user's process, or a "
		       "uprobe without root)";
	case ENOSPC:
		return "no free debug register";
	default:
		return strerror(-r);
	}
}

/* Resolves the trigger in every process and starts watching.  0 if there
 * is a trigger, 1 if none (snapshot at exit/Ctrl-C). */
static int setup_trigger(struct capture *c)
{
	struct opts *o = c->o;
	const char *what = o->trigger ? o->trigger : STOP_SYMBOL;
	int r;

	if (o->trigger && !strcmp(o->trigger, "none"))
		return 1;
	snprintf(c->trig_name, sizeof c->trig_name, "%s", strncmp(what, "addr:", 5) ? what : "");
	struct symaddr_loc *locs = calloc((size_t)o->npids, sizeof *locs);
	if (!locs)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	for (int i = 0; i < o->npids; i++) {
		pid_t pid = o->pids[i];
		if (!strncmp(what, "addr:", 5)) {
			char *end;
			errno = 0;
			uint64_t a = strtoull(what + 5, &end, 16);
			if (errno || *end || end == what + 5 || !a)
				mt_fatal(MT_EXIT_USAGE, "bad trigger address '%s' (want addr:0xHEX)", what);
			r = symaddr_locate(pid, a, &locs[i]);
			if (r == -ENOENT) /* hardware breakpoints do not need a file */
				locs[i].addr = a, locs[i].path[0] = 0;
			else if (r < 0)
				mt_fatal(MT_EXIT_SYS, "cannot read the mappings of process %d: %s", (int)pid,
					 strerror(-r));
		} else {
			r = symaddr_resolve(pid, what, &locs[i]);
			if (r == -ENOENT) {
				if (o->trigger_explicit)
					mt_fatal(MT_EXIT_USAGE,
						 "trigger symbol '%s' is not defined in process %d's "
						 "executable or libraries",
						 what, (int)pid);
				if (o->npids == 1) {
					c->no_stop_symbol = 1;
					free(locs);
					return 1;
				}
				continue;
			}
			if (r < 0)
				mt_fatal(MT_EXIT_SYS, "cannot read the mappings of process %d: %s", (int)pid,
					 strerror(-r));
		}
	}
	c->mech = choose_mech(o);
	if ((r = trigger_alloc(&c->trig, c->mech)) < 0)
		mt_fatal(MT_EXIT_SYS, "trigger: %s", strerror(-r));
	for (int i = 0; i < o->npids; i++) {
		if (!locs[i].addr)
			continue;
		if (c->mech == TRIGGER_UPROBE && !locs[i].path[0])
			mt_fatal(MT_EXIT_USAGE, "trigger address %#" PRIx64 " is not in a file mapping of "
				 "process %d (a uprobe needs one)", locs[i].addr, (int)o->pids[i]);
		struct trigger_point pt = {locs[i].addr, locs[i].path, locs[i].offset};
		c->trig_addr[i] = locs[i].addr;
		r = trigger_watch_process(c->trig, o->pids[i], &pt);
		if (r < 0)
			mt_fatal(r == -ESRCH ? MT_EXIT_USAGE : MT_EXIT_SYS,
				 "cannot watch process %d for the trigger (%s): %s", (int)o->pids[i],
				 c->mech == TRIGGER_HW ? "hardware breakpoint" : "uprobe", trig_errstr(r));
		if (o->verbose)
			mt_note("trigger: %s at %#" PRIx64 " (%s+%#" PRIx64 ") in process %d, %d thread(s), "
				"by %s",
				what, locs[i].addr, locs[i].path[0] ? locs[i].path : "?", locs[i].offset,
				(int)o->pids[i], r, c->mech == TRIGGER_HW ? "hardware breakpoint" : "uprobe");
	}
	free(locs);
	return 0;
}

/* ---- perf ---- */

static void perf_fail_reason(const char *log, char *out, size_t len)
{
	uint8_t *buf = NULL;
	size_t n = 0;
	long paranoid = 0;

	snprintf(out, len, "see %s", log);
	if (io_slurp(log, &buf, &n) < 0 || !n) {
		free(buf);
		return;
	}
	char *s = realloc(buf, n + 1);
	if (!s) {
		free(buf);
		return;
	}
	s[n] = 0;
	if (strstr(s, "perf_event_paranoid")) {
		/* perf says the value it saw; else read it */
		const char *v = strstr(s, "perf_event_paranoid setting is ");
		if (v)
			paranoid = strtol(v + 31, NULL, 10);
		else
			read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid);
		snprintf(out, len,
			 "not allowed: kernel.perf_event_paranoid is %ld (user-space recording of your "
			 "own processes needs <= 2, the kernel needs root or <= 1)",
			 paranoid);
	} else {
		/* the first line that says what went wrong */
		const char *keys[] = {"rror", "No permission", "ermission denied", "not supported",
				      "No such", "failed", "invalid", "nvalid", NULL};
		char *best = NULL;
		for (int k = 0; keys[k] && !best; k++)
			best = strstr(s, keys[k]);
		if (!best) {
			/* the last non-empty line */
			for (char *p = s; *p; p++)
				if (*p != '\n' && (p == s || p[-1] == '\n'))
					best = p;
		}
		if (best) {
			while (best > s && best[-1] != '\n')
				best--;
			/* "Error:" alone on its line: the reason is the next line */
			if (!strncmp(best, "Error:", 6) && (best[6] == '\n' || !best[6]) && best[6] &&
			    best[7] && best[7] != '\n')
				best += 7;
			char *e = strchr(best, '\n');
			if (e)
				*e = 0;
			while (*best == ' ' || *best == '\t')
				best++;
			snprintf(out, len, "%s (full output in %s)", best, log);
		}
	}
	free(s);
}

static void perf_child(char **argv, int ctl_r, int ack_w, const char *log, int errpipe)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Ctrl-C on the terminal must reach us, not perf: we stop it. */
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	if (devnull >= 0)
		dup2(devnull, 0);
	/* the control fds must survive the exec */
	fcntl(ctl_r, F_SETFD, 0);
	fcntl(ack_w, F_SETFD, 0);
	setenv("PAGER", "cat", 1);
	execv(argv[0], argv);
	int e = errno;
	if (write(errpipe, &e, sizeof e) < 0)
		_exit(127);
	_exit(127);
}

/* Reads perf's "ack\n" (and its NUL) with a deadline.  0, or -1 if perf
 * exited or did not answer. */
static int wait_ack(struct capture *c, int timeout_ms)
{
	char buf[16];
	size_t got = 0;
	uint64_t end = mono_ns() + (uint64_t)timeout_ms * 1000000u;
	while (got < 4) {
		struct pollfd p = {c->ack_r, POLLIN, 0};
		int left = (int)((end - mono_ns()) / 1000000u);
		if (mono_ns() >= end)
			return -1;
		int r = poll(&p, 1, left > 0 ? left : 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = read(c->ack_r, buf + got, sizeof buf - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		if (memchr(buf, 0, got) || (got >= 4 && !memcmp(buf, "ack\n", 4)))
			break;
	}
	return memcmp(buf, "ack\n", 4) ? -1 : 0;
}

static int perf_command(struct capture *c, const char *cmd)
{
	char line[32];
	int n = snprintf(line, sizeof line, "%s\n", cmd);
	if (io_write_all(c->ctl_w, line, (size_t)n) < 0)
		return -1;
	return wait_ack(c, 10000);
}

/* -g fp: the rate of the stack-copy samples that give each thread's root
 * frames (docs/sampling.md); 0 none. */
static unsigned root_freq(const struct opts *o)
{
	unsigned hz = o->freq ? o->freq : 10000;
	if (o->root_freq >= 0)
		return (unsigned)o->root_freq;
	return hz / 250 > 10 ? hz / 250 : 10;
}

static void build_perf_argv(struct capture *c, char **argv, size_t max, char *buf, size_t buflen,
			    const char *perf, enum mode mode, int ctl_r, int ack_w)
{
	struct opts *o = c->o;
	char pids[MAX_PIDS * 12] = "";
	static char tids[65536];
	size_t u = 0;

	for (int i = 0; i < o->npids; i++)
		u += (size_t)snprintf(pids + u, sizeof pids - u, "%s%d", i ? "," : "", (int)o->pids[i]);
	if (!o->npids)
		snprintf(pids, sizeof pids, "PID");
	tids[0] = 0;
	if (mode == MODE_PT && o->per_thread && o->npids) {
		/* every thread of every process, as perf's -t wants */
		size_t tu = 0;
		for (int i = 0; i < o->npids; i++) {
			char path[64];
			snprintf(path, sizeof path, "/proc/%d/task", (int)o->pids[i]);
			DIR *d = opendir(path);
			if (!d)
				continue;
			struct dirent *e;
			while ((e = readdir(d)))
				if (e->d_name[0] != '.' && tu + 16 < sizeof tids)
					tu += (size_t)snprintf(tids + tu, sizeof tids - tu, "%s%s",
							       tu ? "," : "", e->d_name);
			closedir(d);
		}
	}
	struct perfcmd_opts po = {
		.perf = perf,
		.output = c->dir_perf,
		.mode = mode == MODE_PT ? PERFCMD_PT : PERFCMD_SAMPLE,
		.snapshot_size = o->snapshot_size,
		.multi = o->multi,
		.ctl_fd = ctl_r,
		.ack_fd = ack_w,
		.pids = pids,
		.timing = o->timing,
		.psb_cyc = have_psb_cyc(),
		.kernel = o->kernel,
		.per_thread = o->per_thread,
		.tids = tids[0] ? tids : NULL,
		.event = o->event,
		.freq = o->freq,
		.call_graph = o->call_graph && strcmp(o->call_graph, "auto") ? o->call_graph : NULL,
		.root_freq = root_freq(o),
	};
	if (perfcmd_build(&po, argv, max, buf, buflen) < 0)
		mt_fatal(MT_EXIT_USAGE, "perf command line too long");
}

/* Starts perf with events disabled, then enables them and waits for the ack:
 * from then on perf records. */
static void start_perf(struct capture *c, enum mode mode, const char *perf)
{
	int ctl[2], ack[2], ep[2];
	char *argv[64], buf[8192], line[16384], log[PATH_MAX + 16];

	if (pipe2(ctl, O_CLOEXEC) < 0 || pipe2(ack, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
		mt_fatal(MT_EXIT_SYS, "pipe: %s", strerror(errno));
	build_perf_argv(c, argv, 64, buf, sizeof buf, perf, mode, ctl[0], ack[1]);
	snprintf(log, sizeof log, "%s/perf.log", c->o->dir);
	if (c->o->verbose) {
		perfcmd_format(argv, line, sizeof line);
		mt_note("running: %s", line);
	}
	c->perf_pid = fork();
	if (c->perf_pid < 0)
		mt_fatal(MT_EXIT_SYS, "fork: %s", strerror(errno));
	if (c->perf_pid == 0) {
		close(ctl[1]);
		close(ack[0]);
		close(ep[0]);
		perf_child(argv, ctl[0], ack[1], log, ep[1]);
	}
	close(ctl[0]);
	close(ack[1]);
	close(ep[1]);
	c->ctl_w = ctl[1];
	c->ack_r = ack[0];
	int e = 0;
	ssize_t n;
	do
		n = read(ep[0], &e, sizeof e);
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n == (ssize_t)sizeof e) {
		waitpid(c->perf_pid, NULL, 0);
		c->perf_pid = 0;
		errno = e;
		mt_fatal(MT_EXIT_SYS, "cannot run %s: %s (install linux-perf, or set MT_PERF or --perf)",
			 perf, strerror(e));
	}
	if (perf_command(c, "enable") < 0) {
		char why[1024];
		int st = 0;
		/* perf failed to start, or hangs: make sure it is gone */
		kill(c->perf_pid, SIGTERM);
		waitpid(c->perf_pid, &st, 0);
		c->perf_pid = 0;
		perf_fail_reason(log, why, sizeof why);
		if (c->child > 0) {
			kill(c->child, SIGKILL);
			waitpid(c->child, NULL, 0);
		}
		unlink(c->dir_perf); /* perf's empty file is no capture */
		mt_fatal(MT_EXIT_SYS, "perf record failed: %s", why);
	}
	if (c->o->verbose)
		mt_note("perf is recording (pid %d)", (int)c->perf_pid);
}

/* ---- the event loop ---- */

static void read_comm(pid_t pid, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	out[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, len - 1);
	close(fd);
	out[n > 0 ? n : 0] = 0;
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = 0;
}

static void write_hits(struct capture *c)
{
	char path[PATH_MAX + 16];
	struct io_out out;
	int err = 0;

	snprintf(path, sizeof path, "%s/hits.mt", c->o->dir);
	if (io_out_open(&out, path, 1, 1) < 0)
		mt_fatal(MT_EXIT_SYS, "cannot write %s: %s", path, strerror(errno));
	mtev_writer *w = mtev_writer_alloc(out.fd, "mt-capture", MTEV_F_SORTED, &err);
	if (!w)
		goto fail;
	for (int i = 0; i < c->o->npids; i++) {
		struct mtev_rec r = {.kind = MTEV_PROCESS};
		r.process.pid = (uint32_t)c->o->pids[i];
		r.process.name = mtev_cstr(c->comm[i]);
		if ((err = mtev_write(w, &r)) < 0)
			goto fail;
	}
	for (size_t i = 0; i < c->nhits; i++) {
		const struct trigger_hit *h = &c->hits[i];
		struct mtev_rec r = {.kind = MTEV_TRIGGER};
		r.trigger.pid = h->pid;
		r.trigger.tid = h->tid;
		r.trigger.time = h->time;
		r.trigger.addr = h->ip;
		r.trigger.arg0 = h->arg0;
		r.trigger.arg1 = h->arg1;
		r.trigger.symbol = mtev_cstr(c->trig_name);
		if ((err = mtev_write(w, &r)) < 0)
			goto fail;
		/* its call chain (docs/capture.md, "The call chain at the trigger") */
		for (size_t k = 0; k < c->nchains; k++) {
			const struct hit_chain *hc = &c->chains[k];
			if (hc->tid != h->tid || hc->time != h->time)
				continue;
			struct mtev_rec cr = {.kind = MTEV_SAMPLE};
			cr.sample.pid = h->pid;
			cr.sample.tid = h->tid;
			cr.sample.time = h->time;
			cr.sample.nips = hc->n;
			cr.sample.ips = c->chain_ips + hc->off;
			cr.sample.flags = MTEV_SAMPLE_CHAIN;
			if ((err = mtev_write(w, &cr)) < 0)
				goto fail;
			break;
		}
	}
	if ((err = mtev_writer_finish(w)) < 0)
		goto fail;
	mtev_writer_free(w);
	if (io_out_commit(&out) < 0)
		mt_fatal(MT_EXIT_SYS, "cannot write %s: %s", path, strerror(errno));
	return;
fail:
	mtev_writer_free(w);
	io_out_abort(&out);
	mt_fatal(MT_EXIT_SYS, "cannot write %s: %s", path, mtev_strerror(err));
}

static int cmp_hit_time(const void *a, const void *b)
{
	const struct trigger_hit *x = a, *y = b;
	return (x->time > y->time) - (x->time < y->time);
}

static void reap_perf(struct capture *c, int block)
{
	if (!c->perf_pid || c->perf_exited)
		return;
	int st;
	pid_t r;
	do
		r = waitpid(c->perf_pid, &st, block ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == c->perf_pid) {
		c->perf_exited = 1;
		c->perf_status = st;
	}
}

/* Ends the recording: perf writes the ring (its exit snapshot) and exits. */
static void stop_perf(struct capture *c)
{
	if (!c->perf_pid || c->perf_exited)
		return;
	if (perf_command(c, "stop") < 0) {
		reap_perf(c, 0);
		if (!c->perf_exited)
			kill(c->perf_pid, SIGINT);
	}
	reap_perf(c, 1);
}

static void snapshot_now(struct capture *c, enum mode mode)
{
	if (!c->perf_pid || c->perf_exited)
		return;
	if (mode == MODE_PT) {
		if (perf_command(c, "snapshot") < 0)
			mt_warn("perf did not acknowledge a snapshot");
	} else {
		kill(c->perf_pid, SIGUSR2); /* --switch-output=signal */
	}
}

static int sort_dumps(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --switch-output names each dump perf.data.<timestamp>: rename them, in
 * order, to perf.data, perf.data.2, ... */
static void rename_dumps(struct capture *c)
{
	char *names[1024];
	size_t n = 0;
	DIR *d = opendir(c->o->dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && n < 1024)
		if (!strncmp(e->d_name, "perf.data.", 10) && strlen(e->d_name) > 20)
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof *names, sort_dumps);
	for (size_t i = 0; i < n; i++) {
		char from[PATH_MAX], to[PATH_MAX];
		if (!names[i])
			continue;
		snprintf(from, sizeof from, "%s/%s", c->o->dir, names[i]);
		if (i == 0)
			snprintf(to, sizeof to, "%s/perf.data", c->o->dir);
		else
			snprintf(to, sizeof to, "%s/perf.data.%zu", c->o->dir, i + 1);
		if (rename(from, to) < 0)
			mt_warn("cannot rename %s: %s", from, strerror(errno));
		free(names[i]);
	}
}

static void clean_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "perf.data", 9) || !strcmp(e->d_name, "hits.mt") ||
		    (!strncmp(e->d_name, "perf-", 5) && strstr(e->d_name, ".map")) ||
		    !strcmp(e->d_name, "perf.log")) {
			char p[PATH_MAX];
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			unlink(p);
		}
	closedir(d);
}

static void make_dir(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", dir);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0755);
			*s = '/';
		}
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		mt_fatal(MT_EXIT_SYS, "cannot create %s: %s", dir, strerror(errno));
	struct stat st;
	if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
		mt_fatal(MT_EXIT_USAGE, "%s is not a directory", dir);
	/* said now, before perf runs: no message may point to a perf.log that
	 * cannot exist there */
	if (access(p, W_OK) < 0)
		mt_fatal(MT_EXIT_SYS, "unable to write to %s: %s", dir, strerror(errno));
}

/* The call chain at hit @h: its registers and stack copy unwound with the
 * call frame information of the files the process maps now (read from
 * /proc/PID/maps while the process is still there; the trigger holds it
 * still).  Kept when it says more than the ip. */
/* /proc/PID/maps as one string (malloc'd), or NULL when it cannot be read or
 * is empty (the process is gone, or a zombie without its memory). */
static char *read_maps(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *txt = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&txt, &len);
	if (m) {
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof buf, f)) > 0)
			fwrite(buf, 1, n, m);
		fclose(m);
	}
	fclose(f);
	if (txt && !len) {
		free(txt);
		txt = NULL;
	}
	return txt;
}

/* Keeps a copy of each watched process's maps while it lives. */
static void remember_maps(struct capture *c)
{
	for (int i = 0; i < c->o->npids && i < MAX_PIDS; i++) {
		char *t = read_maps(c->o->pids[i]);
		if (t) {
			free(c->maps_txt[i]);
			c->maps_txt[i] = t;
		}
	}
}

static void keep_chain(struct capture *c, const struct trigger_hit *h)
{
	enum { MAXF = 512 };
	if (!h->ustack_len || !h->uregs || c->nchains == MAX_HITS)
		return;
	char line[PATH_MAX + 160];
	char *txt = read_maps((pid_t)h->pid);
	const char *maps = txt;
	for (int i = 0; !maps && i < c->o->npids && i < MAX_PIDS; i++)
		if (c->o->pids[i] == (pid_t)h->pid)
			maps = c->maps_txt[i]; /* it has exited since the hit */
	if (!maps)
		return;
	unw *u = unw_new();
	if (!u) {
		free(txt);
		return;
	}
	for (const char *p = maps; *p;) {
		size_t n = strcspn(p, "\n");
		if (n >= sizeof line)
			n = sizeof line - 1;
		memcpy(line, p, n);
		line[n] = 0;
		p += strcspn(p, "\n");
		if (*p)
			p++;
		unsigned long long a, b, off;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &a, &b, perms, &off, &pos) < 4 ||
		    !pos || perms[2] != 'x' || line[pos] != '/')
			continue;
		unw_map(u, h->pid, a, b - a, off, line + pos);
	}
	free(txt);
	if (c->nchain_ips + MAXF > c->capchain_ips) {
		size_t n = c->capchain_ips ? 2 * c->capchain_ips : 4 * MAXF;
		while (n < c->nchain_ips + MAXF)
			n *= 2;
		uint64_t *v = realloc(c->chain_ips, n * sizeof *v);
		if (!v) {
			unw_free(u);
			return;
		}
		c->chain_ips = v;
		c->capchain_ips = n;
	}
	uint64_t *ips = c->chain_ips + c->nchain_ips;
	size_t n = unw_sample(u, h->pid, h->tid, h->uregs, h->have, h->ustack, h->ustack_len, ips,
			      MAXF, NULL);
	unw_free(u);
	if (n < 2)
		return;
	c->chains[c->nchains++] = (struct hit_chain){h->tid, (uint32_t)n, h->time, c->nchain_ips};
	c->nchain_ips += n;
}

static void drain_hits(struct capture *c)
{
	if (!c->trig)
		return;
	for (;;) {
		size_t room = MAX_HITS - c->nhits;
		struct trigger_hit tmp[64];
		int n = trigger_read(c->trig, tmp, 64, &c->lost);
		if (n <= 0)
			break;
		for (int i = 0; i < n && room; i++, room--) {
			keep_chain(c, &tmp[i]);
			c->hits[c->nhits] = tmp[i];
			/* (the registers and stack live until the next read) */
			c->hits[c->nhits].uregs = NULL;
			c->hits[c->nhits].ustack = NULL;
			c->nhits++;
		}
		if (n < 64)
			break;
	}
}

static int exit_code_of(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return MT_EXIT_SYS;
}

/* A program started stopped must not run on untraced when we fail. */
static pid_t unreleased_child;

static void kill_unreleased(void)
{
	if (unreleased_child > 0) {
		kill(unreleased_child, SIGKILL);
		waitpid(unreleased_child, NULL, 0);
	}
}

static void child_setup(void *arg)
{
	(void)arg;
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
}

/* What sampling asks of the hardware, checked before anything runs: one
 * line saying what is missing and what to use instead. */
static void check_sampling(const struct opts *o)
{
	int cpu_pmu = have_pmu_file("cpu");
	if (o->call_graph && !strcmp(o->call_graph, "lbr") && !have_pmu_file("cpu/caps/branches"))
		mt_fatal(MT_EXIT_USAGE,
			 "-g lbr needs last branch records (LBR), which this machine does not have "
			 "(%s: not an Intel CPU, or a VM that hides them); use -g fp (frame pointers) "
			 "or -g dwarf (stack copies)",
			 cpu_pmu ? "the cpu PMU lists no branches" : "no hardware PMU");
	if (o->event && !strcmp(o->event, "cycles") && !cpu_pmu)
		mt_fatal(MT_EXIT_USAGE,
			 "-e cycles needs hardware counters, which this machine does not have "
			 "(/sys/bus/event_source/devices/cpu is absent, as in most VMs); use -e cpu-clock");
}

/* --kernel in sampling mode: DIR/perf-PID.map for each recorded process,
 * the kernel's text symbols from /proc/kallsyms (mt-symbolize names the
 * addresses of a map without a file from such a file), then the process's
 * own /tmp/perf-PID.map (JIT code; later lines win).  One line when the
 * kernel hides its addresses. */
struct ksym {
	uint64_t addr;
	char *name;
};

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

static void write_kernel_maps(const struct capture *c)
{
	const char *kpath = getenv("MT_KALLSYMS") ? getenv("MT_KALLSYMS") : "/proc/kallsyms";
	FILE *f = fopen(kpath, "r");
	struct ksym *v = NULL;
	size_t n = 0, cap = 0, nonzero = 0;
	char line[512];
	if (!f) {
		mt_warn("--kernel: cannot read %s (%s): kernel frames stay unnamed", kpath,
			strerror(errno));
		return;
	}
	while (fgets(line, sizeof line, f)) {
		char type, name[256];
		unsigned long long a;
		if (sscanf(line, "%llx %c %255s", &a, &type, name) != 3)
			continue;
		if (type != 't' && type != 'T')
			continue;
		if (n == cap) {
			struct ksym *nv = realloc(v, (cap = cap ? 2 * cap : 4096) * sizeof *v);
			if (!nv)
				break;
			v = nv;
		}
		v[n].addr = a;
		v[n].name = strdup(name);
		if (!v[n].name)
			break;
		nonzero += a != 0;
		n++;
	}
	fclose(f);
	if (!nonzero) {
		long kr = -1;
		read_int_file("/proc/sys/kernel/kptr_restrict", &kr);
		mt_warn("--kernel: %s hides the kernel's addresses (kernel.kptr_restrict is %ld; "
			"run as root with kptr_restrict <= 1): kernel frames stay unnamed",
			kpath, kr);
	} else {
		qsort(v, n, sizeof *v, cmp_ksym);
	}
	for (int i = 0; nonzero && i < c->o->npids; i++) {
		char path[PATH_MAX + 32], jit[64];
		snprintf(path, sizeof path, "%s/perf-%d.map", c->o->dir, (int)c->o->pids[i]);
		FILE *o = fopen(path, "w");
		if (!o) {
			mt_warn("cannot write %s: %s", path, strerror(errno));
			break;
		}
		for (size_t k = 0; k + 1 < n; k++)
			if (v[k].addr && v[k + 1].addr > v[k].addr)
				fprintf(o, "%" PRIx64 " %" PRIx64 " %s\n", v[k].addr,
					v[k + 1].addr - v[k].addr, v[k].name);
		snprintf(jit, sizeof jit, "/tmp/perf-%d.map", (int)c->o->pids[i]);
		FILE *j = fopen(jit, "r");
		if (j) {
			while (fgets(line, sizeof line, j))
				fputs(line, o);
			fclose(j);
		}
		if (fclose(o) != 0)
			mt_warn("cannot write %s: %s", path, strerror(errno));
	}
	for (size_t k = 0; k < n; k++)
		free(v[k].name);
	free(v);
}

/* How many samples a sampling snapshot holds, and how many of them are
 * at or before @until (-1: unreadable). */
static long count_samples(const char *path, uint64_t until, long *before)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	pd_reader *r;
	struct pd_event ev;
	long n = 0;
	*before = 0;
	if (fd < 0)
		return -1;
	if (pd_open(&r, fd) < 0) {
		close(fd);
		return -1;
	}
	while (pd_next(r, &ev) > 0)
		if (ev.type == PD_REC_SAMPLE) {
			n++;
			struct pd_sample ps;
			if (until == UINT64_MAX ||
			    (pd_parse_sample(&ev, &ps) == 0 && ps.time <= until))
				(*before)++;
		}
	pd_close(r);
	close(fd);
	return n;
}

/* A sampling snapshot with nothing (or next to nothing) before its
 * trigger: say why, in one line. */
static void say_few_samples(const struct capture *c)
{
	const struct opts *o = c->o;
	unsigned hz = o->freq ? o->freq : 10000;
	long before;
	uint64_t until = c->nhits && !o->multi ? c->hits[0].time : UINT64_MAX;
	long n = count_samples(c->dir_perf, until, &before);
	if (n < 0)
		return;
	if (o->attach) {
		if (!n)
			mt_warn("no samples: the process did not run while recorded (it was idle or "
				"blocked); the trace holds its threads%s",
				c->nhits ? " and the trigger" : "");
		return;
	}
	if (c->nhits && !o->multi && before == 0)
		mt_warn("no samples before the trigger: %s reached it in less than 1/%u s of CPU "
			"time, too short for sampling; use --mode singlestep for an exact trace of a "
			"short run",
			o->cmd[0], hz);
	else if (before < 10)
		mt_warn("%s: %s ran too briefly for sampling (less than 10/%u s of CPU time); use "
			"--mode singlestep for an exact trace of a short run",
			before ? "few samples" : "no samples", o->cmd[0], hz);
}

static int run_singlestep(struct opts *o)
{
	char self[PATH_MAX], ptsim[PATH_MAX + 16];
	char *argv[256];
	int n = 0;

	if (o->attach)
		mt_fatal(MT_EXIT_USAGE, "--mode singlestep runs a program: it cannot attach");
	if (o->ptsim) {
		snprintf(ptsim, sizeof ptsim, "%s", o->ptsim);
	} else {
		ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
		self[l > 0 ? l : 0] = 0;
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = 0;
		snprintf(ptsim, sizeof ptsim, "%s/mt-ptsim", self);
		if (access(ptsim, X_OK) < 0 && mt_find_in_path("mt-ptsim", ptsim, sizeof ptsim) < 0)
			mt_fatal(MT_EXIT_SYS, "--mode singlestep needs mt-ptsim, which is not built "
					      "(expected beside mt-capture or in PATH)");
	}
	argv[n++] = ptsim;
	if (o->trigger && strcmp(o->trigger, "none")) {
		if (!strncmp(o->trigger, "addr:", 5))
			mt_fatal(MT_EXIT_USAGE, "--mode singlestep stops at a symbol, not an address");
		argv[n++] = "--stop-at";
		argv[n++] = (char *)o->trigger;
	}
	char *extra = o->ptsim_args ? strdup(o->ptsim_args) : NULL;
	for (char *tok = extra ? strtok(extra, " ") : NULL; tok && n < 200; tok = strtok(NULL, " "))
		argv[n++] = tok;
	argv[n++] = "-o";
	argv[n++] = (char *)o->dir;
	argv[n++] = "--";
	for (char **a = o->cmd; *a && n < 255; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	if (o->verbose || o->dry_run) {
		char line[16384];
		perfcmd_format(argv, line, sizeof line);
		if (o->dry_run) {
			printf("%s\n", line);
			return 0;
		}
		mt_note("running: %s", line);
	}
	make_dir(o->dir);
	execv(ptsim, argv);
	mt_fatal(MT_EXIT_SYS, "cannot run %s: %s", ptsim, strerror(errno));
}

/* The long options without a short form. */
enum {
	O_VIA = 256,
	O_MULTI,
	O_TIMING,
	O_KERNEL,
	O_PERTHREAD,
	O_PERF,
	O_PTSIM,
	O_PTSIM_ARGS,
	O_ROOTFREQ,
};

/* One option of the command line into @o. */
static void parse_option(struct opts *o, int ch, const char **pidlist, char **argv)
{
	switch (ch) {
	case 'o':
		o->dir = optarg;
		break;
	case 'p':
		*pidlist = optarg;
		break;
	case 'm':
		if (!strcmp(optarg, "auto"))
			o->mode = MODE_AUTO;
		else if (!strcmp(optarg, "pt"))
			o->mode = MODE_PT;
		else if (!strcmp(optarg, "sample") || !strcmp(optarg, "sampling"))
			o->mode = MODE_SAMPLE;
		else if (!strcmp(optarg, "singlestep"))
			o->mode = MODE_SINGLESTEP;
		else
			drv_usage("unknown mode '%s' (auto, pt, sample, singlestep)",
				 optarg);
		break;
	case 't':
		o->trigger = optarg;
		o->trigger_explicit = 1;
		break;
	case O_VIA:
		if (!strcmp(optarg, "auto"))
			o->via = VIA_AUTO;
		else if (!strcmp(optarg, "hw"))
			o->via = VIA_HW;
		else if (!strcmp(optarg, "uprobe"))
			o->via = VIA_UPROBE;
		else
			drv_usage("unknown --trigger-via '%s' (auto, hw, uprobe)", optarg);
		break;
	case O_MULTI:
		o->multi = 1;
		break;
	case 'd': {
		char *end;
		o->duration = strtod(optarg, &end);
		if (*end || !(o->duration > 0) || o->duration > 1e6)
			drv_usage("bad --duration '%s' (seconds)", optarg);
		break;
	}
	case 's':
		o->snapshot_size = optarg;
		if (!*optarg || strspn(optarg, "0123456789kKmMgGbB") != strlen(optarg))
			drv_usage("bad --snapshot-size '%s' (e.g. 4M)", optarg);
		break;
	case 'F': {
		char *end;
		unsigned long v = strtoul(optarg, &end, 10);
		if (*end || !v || v > 1000000)
			drv_usage("bad --freq '%s'", optarg);
		o->freq = (unsigned)v;
		break;
	}
	case 'e':
		if (strcmp(optarg, "cpu-clock") && strcmp(optarg, "cycles"))
			drv_usage("bad --event '%s' (cpu-clock or cycles)", optarg);
		o->event = optarg;
		break;
	case 'g':
		if (strcmp(optarg, "fp") && strcmp(optarg, "dwarf") && strcmp(optarg, "lbr") &&
		    strcmp(optarg, "auto"))
			drv_usage("bad --call-graph '%s' (auto, fp, dwarf or lbr)",
				 optarg);
		o->call_graph = optarg;
		break;
	case O_ROOTFREQ: {
		char *end;
		unsigned long v = strtoul(optarg, &end, 10);
		if (*end || !*optarg || v > 10000)
			drv_usage("bad --root-freq '%s'", optarg);
		o->root_freq = (int)v;
		break;
	}
	case O_TIMING:
		if (!strcmp(optarg, "low"))
			o->timing = PERFCMD_TIMING_LOW;
		else if (!strcmp(optarg, "normal"))
			o->timing = PERFCMD_TIMING_NORMAL;
		else if (!strcmp(optarg, "high"))
			o->timing = PERFCMD_TIMING_HIGH;
		else
			drv_usage("bad --timing '%s' (low, normal, high)", optarg);
		break;
	case O_KERNEL:
		o->kernel = 1;
		break;
	case O_PERTHREAD:
		o->per_thread = 1;
		break;
	case O_PERF:
		o->perf = optarg;
		break;
	case O_PTSIM:
		o->ptsim = optarg;
		break;
	case O_PTSIM_ARGS:
		o->ptsim_args = optarg;
		break;
	case 'n':
		o->dry_run = 1;
		break;
	case 'v':
		o->verbose = 1;
		break;
	case 'h':
		usage(stdout);
		exit(0);
	default:
		drv_getopt_error(ch, argv);
	}
}

/* The command line into @o (exits on misuse); the -p list, or NULL. */
static const char *parse_args(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{"output", required_argument, 0, 'o'},
		{"pid", required_argument, 0, 'p'},
		{"mode", required_argument, 0, 'm'},
		{"trigger", required_argument, 0, 't'},
		{"trigger-via", required_argument, 0, O_VIA},
		{"multi-snapshot", no_argument, 0, O_MULTI},
		{"duration", required_argument, 0, 'd'},
		{"snapshot-size", required_argument, 0, 's'},
		{"freq", required_argument, 0, 'F'},
		{"event", required_argument, 0, 'e'},
		{"call-graph", required_argument, 0, 'g'},
		{"timing", required_argument, 0, O_TIMING},
		{"root-freq", required_argument, 0, O_ROOTFREQ},
		{"kernel", no_argument, 0, O_KERNEL},
		{"per-thread", no_argument, 0, O_PERTHREAD},
		{"perf", required_argument, 0, O_PERF},
		{"ptsim", required_argument, 0, O_PTSIM},
		{"ptsim-args", required_argument, 0, O_PTSIM_ARGS},
		{"dry-run", no_argument, 0, 'n'},
		{"verbose", no_argument, 0, 'v'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *pidlist = NULL;
	int ch;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		exit(0);
	}
	if (argc < 2 || (strcmp(argv[1], "run") && strcmp(argv[1], "attach")))
		drv_usage(argc < 2 ? "missing the subcommand: run or attach"
				   : "unknown subcommand '%s': run or attach", argv[1]);
	o->attach = !strcmp(argv[1], "attach");
	argv++;
	argc--;
	/* "+": options end at the first non-option (CMD) */
	while ((ch = getopt_long(argc, argv, "+:o:p:m:t:d:s:F:e:g:nvh", lo, NULL)) != -1) {
		parse_option(o, ch, &pidlist, argv);
	}
	if (!o->dir)
		drv_usage("-o DIR is required");
	if (o->attach) {
		if (optind < argc)
			drv_usage("attach takes no command (got '%s')", argv[optind]);
		if (!pidlist)
			drv_usage("attach needs -p PID[,PID...]");
		if (parse_pids(o, pidlist) < 0)
			drv_usage("bad process list '%s' (want PID[,PID...])", pidlist);
	} else {
		if (pidlist)
			drv_usage("-p is for attach; run starts CMD itself");
		if (optind >= argc || !*argv[optind])
			drv_usage("run needs a command: mt-capture run [options] -o DIR -- CMD [ARGS...]");
		o->cmd = argv + optind;
	}
	return pidlist;
}

/* The mode to record in (auto resolved), after checking it can work here;
 * *@auto_notice: say that auto chose sampling. */
static enum mode pick_mode(struct opts *o, int *auto_notice)
{
	enum mode mode = o->mode;
	*auto_notice = 0;
	if (mode == MODE_AUTO) {
		mode = have_intel_pt() ? MODE_PT : MODE_SAMPLE;
		*auto_notice = mode == MODE_SAMPLE && !o->dry_run;
	}
	if (mode == MODE_PT && !o->dry_run && !have_intel_pt())
		mt_fatal(MT_EXIT_USAGE,
			 "--mode pt needs Intel PT, which this machine does not have "
			 "(/sys/bus/event_source/devices/intel_pt is absent: not an Intel CPU, or a VM "
			 "that hides it); use --mode sample, or --mode singlestep for a short program");
	if (mode != MODE_PT && o->per_thread)
		mt_fatal(MT_EXIT_USAGE, "--per-thread is for --mode pt");
	if (mode == MODE_SAMPLE && !o->dry_run)
		check_sampling(o);
	return mode;
}

/* Recording needs perf_event_paranoid <= 2 (<= 1 with --kernel) or root. */
static void check_permission(const struct opts *o)
{
	long paranoid = 0;
	if (geteuid() != 0 && read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid) == 0 &&
	    (paranoid > 2 || (o->kernel && paranoid > 1)))
		mt_fatal(MT_EXIT_SYS,
			 "not allowed: kernel.perf_event_paranoid is %ld; recording your own processes "
			 "needs <= 2%s (sysctl kernel.perf_event_paranoid=2, or run as root)",
			 paranoid, o->kernel ? ", and the kernel <= 1" : "");
	if (o->kernel && geteuid() != 0 && paranoid > 1)
		mt_fatal(MT_EXIT_SYS, "--kernel needs root");
}

/* Signals arrive through a signalfd (returned); children get a clean mask. */
static int setup_signals(void)
{
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN); /* perf may be gone when we write to its control pipe */
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		mt_fatal(MT_EXIT_SYS, "signalfd: %s", strerror(errno));

	/* Many threads x CPUs of breakpoint events need file descriptors. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return sfd;
}

/* The processes: those to attach to checked, or CMD started (stopped
 * before its first instruction); DIR made and cleaned. */
static void start_processes(struct capture *c, struct opts *o)
{
	if (o->attach) {
		for (int i = 0; i < o->npids; i++) {
			if (kill(o->pids[i], 0) < 0) {
				if (errno == ESRCH)
					mt_fatal(MT_EXIT_USAGE, "no process %d", (int)o->pids[i]);
				if (errno == EPERM)
					mt_fatal(MT_EXIT_SYS,
						 "no permission to attach to process %d (it belongs to "
						 "another user: run as root or as its owner)",
						 (int)o->pids[i]);
			}
			/* perf and the trigger need ptrace-read access: the maps
			 * file tells (readable only with that access) */
			struct symaddr_maps m;
			int r = symaddr_maps_read(&m, o->pids[i]);
			if (r == -ESRCH)
				mt_fatal(MT_EXIT_USAGE, "no process %d", (int)o->pids[i]);
			if (r < 0)
				mt_fatal(MT_EXIT_SYS,
					 "no permission to attach to process %d (%s: run as root or as "
					 "its owner)",
					 (int)o->pids[i], strerror(-r));
			symaddr_maps_fini(&m);
		}
		make_dir(o->dir);
		clean_dir(o->dir);
	} else {
		make_dir(o->dir);
		clean_dir(o->dir);
		c->child = tracee_spawn(o->cmd, child_setup, NULL);
		if (c->child < 0) {
			int e = -c->child;
			if (e == ENOENT || e == EACCES || e == ENOEXEC || e == EISDIR || e == ENOTDIR)
				mt_fatal(MT_EXIT_USAGE, "cannot run '%s': %s", o->cmd[0], strerror(e));
			mt_fatal(MT_EXIT_SYS, "cannot start '%s': %s", o->cmd[0],
				 e == ECHILD ? "it died before its first instruction" : strerror(e));
		}
		unreleased_child = c->child;
		atexit(kill_unreleased);
		o->pids[0] = c->child;
		o->npids = 1;
	}
}

/* Everything known, the recording starts: the unwinder picked (sampling),
 * the trigger armed, perf started, then CMD released. */
static void start_recording(struct capture *c, struct opts *o, enum mode mode, const char *perf,
			    int auto_notice, const char *pidlist)
{
	for (int i = 0; i < o->npids; i++)
		read_comm(o->pids[i], c->comm[i], sizeof c->comm[i]);
	char cg_why[512] = "";
	if (mode == MODE_SAMPLE && (!o->call_graph || !strcmp(o->call_graph, "auto"))) {
		/* the program and its libraries are mapped now: pick the unwinder */
		o->call_graph = cg_pick(o->pids[0], cg_why, sizeof cg_why);
		/* 8 KiB of stack per sample: a ring of perf's default size would
		 * hold a few milliseconds; as root (no mlock limit) a bigger one,
		 * at most 256 MiB over all CPUs */
		if (!strcmp(o->call_graph, "dwarf") && !o->snapshot_size && geteuid() == 0) {
			long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
			o->snapshot_size = ncpu <= 8 ? "32M" : ncpu <= 16 ? "16M" : ncpu <= 32 ? "8M" : "4M";
		}
	}
	/* -g fp with the root stream: perf's default ring holds ~0.3 s at 10 kHz,
	 * a thread's share of it too few stack copies to learn its root from
	 * (two whole ones); as root a ring four times as big */
	if (mode == MODE_SAMPLE && o->call_graph && !strcmp(o->call_graph, "fp") && root_freq(o) &&
	    !o->snapshot_size && geteuid() == 0)
		o->snapshot_size = sysconf(_SC_NPROCESSORS_ONLN) <= 16 ? "2M" : "1M";
	int have_trigger = setup_trigger(c) == 0;
	/* React to a hit before the program runs far past it: a real-time
	 * priority when allowed (root), not passed on to perf or CMD. */
	if (have_trigger) {
		struct sched_param sp = {.sched_priority = 1};
		if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) < 0 && o->verbose)
			mt_note("no real-time priority (%s): the snapshot may end a little after the "
				"trigger", strerror(errno));
	}
	start_perf(c, mode, perf);
	if (auto_notice) /* once everything is known to work: errors stay one line */
		mt_note("no Intel PT on this machine (/sys/bus/event_source/devices/intel_pt is "
			"absent): recording by stack sampling");
	if (cg_why[0])
		mt_note("%s", cg_why);
	if (c->no_stop_symbol)
		mt_note("no %s in the program: snapshot at exit%s or Ctrl-C", STOP_SYMBOL,
			o->duration > 0 ? ", end of --duration" : "");
	if (!o->attach) {
		if (tracee_release(c->child) < 0)
			mt_fatal(MT_EXIT_SYS, "cannot release '%s': %s", o->cmd[0], strerror(errno));
		unreleased_child = 0;
	}
	if (o->verbose)
		mt_note("%s %s; snapshot %s", o->attach ? "attached to" : "started",
			o->attach ? pidlist : o->cmd[0],
			have_trigger ? (o->multi ? "at every trigger hit" : "at the first trigger hit")
				     : "at exit or Ctrl-C");
}

/* Waits for the snapshot's moment (a trigger hit, a signal, --duration, the
 * processes' end, perf's end) and stops perf there.  *@interrupted: the
 * signal that ended it, or 0.  Returns whether CMD was frozen (SIGSTOP) at
 * the trigger. */
static int wait_snapshot(struct capture *c, enum mode mode, int sfd, int *interrupted)
{
	struct opts *o = c->o;
	int pidfds[MAX_PIDS], nalive = o->npids;
	for (int i = 0; i < o->npids; i++) {
		pidfds[i] = pidfd_open_(o->pids[i]);
		if (pidfds[i] < 0)
			nalive--;
	}
	int tfd = -1;
	if (o->duration > 0) {
		tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
		struct itimerspec its = {{0, 0}, {(time_t)o->duration,
						   (long)((o->duration - (double)(time_t)o->duration) * 1e9)}};
		if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) < 0)
			mt_fatal(MT_EXIT_SYS, "timerfd: %s", strerror(errno));
	}
	int tfds[64];
	size_t ntfds = c->trig ? trigger_poll_fds(c->trig, tfds, 64) : 0;
	int stopped = 0, frozen = 0;
	size_t snapped = 0;

	while (!stopped) {
		struct pollfd pf[64 + MAX_PIDS + 2];
		int np = 0;
		pf[np++] = (struct pollfd){sfd, POLLIN, 0};
		if (tfd >= 0)
			pf[np++] = (struct pollfd){tfd, POLLIN, 0};
		/* the rings: their wakeups can come late (see the poll timeout) */
		for (size_t i = 0; i < ntfds; i++)
			pf[np++] = (struct pollfd){tfds[i], POLLIN, 0};
		int first_p = np;
		for (int i = 0; i < o->npids; i++)
			pf[np++] = (struct pollfd){pidfds[i], POLLIN, 0};
		if (poll(pf, (nfds_t)np, ntfds ? 10 : -1) < 0) {
			if (errno == EINTR)
				continue;
			mt_fatal(MT_EXIT_SYS, "poll: %s", strerror(errno));
		}
		/* trigger hits first: they may come just before the exit */
		int hit = ntfds > 0; /* look every time: see the poll timeout */
		if (hit)
			remember_maps(c);
		if (hit) {
			size_t before = c->nhits;
			drain_hits(c);
			if (c->nhits > before) {
				if (!o->multi) {
					/* one snapshot: the earliest hit is its trigger */
					qsort(c->hits, c->nhits, sizeof *c->hits, cmp_hit_time);
					c->nhits = 1;
					/* the trace ends at the trigger: hold the program still
					 * while perf writes the snapshot */
					if (!o->attach && !c->child_exited)
						frozen = kill(c->child, SIGSTOP) == 0;
					if (o->verbose)
						mt_note("trigger hit in thread %u: snapshot",
							c->hits[before].tid);
					stop_perf(c);
					stopped = 1;
				} else {
					for (size_t k = before; k < c->nhits; k++)
						if (o->verbose)
							mt_note("trigger hit in thread %u: snapshot %zu",
								c->hits[k].tid, snapped + k - before + 1);
					snapped += c->nhits - before;
					snapshot_now(c, mode);
				}
			}
		}
		if (pf[0].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				if (si.ssi_signo == SIGCHLD) {
					reap_perf(c, 0);
					continue;
				}
				*interrupted = (int)si.ssi_signo;
			}
			if (c->perf_exited && !stopped) {
				char why[1024], log[PATH_MAX + 16];
				snprintf(log, sizeof log, "%s/perf.log", o->dir);
				if (!(WIFEXITED(c->perf_status) && WEXITSTATUS(c->perf_status) == 0)) {
					perf_fail_reason(log, why, sizeof why);
					mt_warn("perf exited early: %s", why);
				}
				stopped = 1;
			}
			if (*interrupted) {
				if (o->verbose)
					mt_note("%s: snapshot", strsignal(*interrupted));
				stop_perf(c);
				stopped = 1;
			}
		}
		if (tfd >= 0 && pf[1].revents && !stopped) {
			if (o->verbose)
				mt_note("--duration is over: snapshot");
			stop_perf(c);
			stopped = 1;
		}
		for (int i = 0; i < o->npids; i++)
			if (pf[first_p + i].revents) {
				close(pidfds[i]);
				pidfds[i] = -1;
				nalive--;
			}
		if (nalive <= 0 && !stopped) {
			drain_hits(c);
			/* perf notices its targets are gone, writes and exits */
			if (o->verbose)
				mt_note("%s exited: snapshot", o->attach ? "every process" : o->cmd[0]);
			stop_perf(c);
			stopped = 1;
		}
	}
	return frozen;
}

/* After the snapshot: hits.mt, the checks of perf's output, and the exit
 * code (CMD's status, for run). */
static int finish(struct capture *c, enum mode mode, int interrupted, int frozen)
{
	struct opts *o = c->o;
	stop_perf(c);
	if (o->multi || !c->nhits)
		drain_hits(c);
	if (frozen)
		kill(c->child, SIGCONT);
	qsort(c->hits, c->nhits, sizeof *c->hits, cmp_hit_time);
	if (o->multi && mode != MODE_PT)
		rename_dumps(c);
	/* each process's name as it is now (an exec while it was traced
	 * renamed it; the trace's last moments are the new program's), the
	 * one read at the start if it is gone */
	for (int i = 0; i < o->npids; i++) {
		char now[sizeof c->comm[i]];
		read_comm(o->pids[i], now, sizeof now);
		if (now[0])
			memcpy(c->comm[i], now, sizeof now);
	}
	write_hits(c);
	if (c->lost)
		mt_warn("%" PRIu64 " trigger hits were lost (ring full)", c->lost);

	int perf_ok = WIFEXITED(c->perf_status) && WEXITSTATUS(c->perf_status) == 0;
	struct stat st;
	if (stat(c->dir_perf, &st) < 0) {
		char why[1024], log[PATH_MAX + 16];
		snprintf(log, sizeof log, "%s/perf.log", o->dir);
		perf_fail_reason(log, why, sizeof why);
		if (!o->attach) { /* still pass CMD through, but say it */
			int cst;
			while (waitpid(c->child, &cst, 0) < 0 && errno == EINTR)
				;
		}
		mt_fatal(MT_EXIT_SYS, "perf wrote no %s: %s", c->dir_perf, why);
	}
	if (!perf_ok && !interrupted)
		mt_warn("perf exited with status %d (see %s/perf.log)", exit_code_of(c->perf_status), o->dir);
	if (mode == MODE_SAMPLE)
		say_few_samples(c);
	if (mode == MODE_SAMPLE && o->kernel)
		write_kernel_maps(c);
	if (o->verbose)
		mt_note("wrote %s (%lld bytes) and %s/hits.mt (%zu hits)", c->dir_perf,
			(long long)st.st_size, o->dir, c->nhits);
	if (o->attach)
		return 0;
	/* run: pass CMD's exit status through */
	int cst = 0;
	pid_t r;
	/* let CMD's own Ctrl-C handling decide; we only wait */
	while ((r = waitpid(c->child, &cst, 0)) < 0 && errno == EINTR)
		;
	return r == c->child ? exit_code_of(cst) : 0;
}

int main(int argc, char **argv)
{
	static struct opts o = {.mode = MODE_AUTO, .freq = 10000, .root_freq = -1, .timing = PERFCMD_TIMING_NORMAL};
	static struct capture c;
	drv_init(argc, argv);
	const char *pidlist = parse_args(&o, argc, argv);
	c.o = &o;

	/* ---- the mode ---- */
	if (o.mode == MODE_SINGLESTEP)
		return run_singlestep(&o);
	int auto_notice;
	enum mode mode = pick_mode(&o, &auto_notice);

	/* ---- perf ---- */
	const char *perfname = o.perf ? o.perf : getenv("MT_PERF") ? getenv("MT_PERF") : "perf";
	static char perf[PATH_MAX];
	if (mt_find_in_path(perfname, perf, sizeof perf) < 0 && !o.dry_run)
		mt_fatal(MT_EXIT_SYS, "perf not found ('%s'): install linux-perf, or set MT_PERF or --perf",
			 perfname);
	if (o.dry_run) /* as given: it is what would run on another host */
		snprintf(perf, sizeof perf, "%s", perfname);
	snprintf(c.dir_perf, sizeof c.dir_perf, "%s/perf.data", o.dir);

	if (o.dry_run) {
		char *pargv[64], buf[8192], line[16384];
		/* what mt-capture would run: the control fds are whatever
		 * numbers the pipes get; show them as they would be */
		build_perf_argv(&c, pargv, 64, buf, sizeof buf, perf, mode, 3, 4);
		perfcmd_format(pargv, line, sizeof line);
		printf("%s\n", line);
		return 0;
	}

	check_permission(&o);
	int sfd = setup_signals();
	start_processes(&c, &o);
	start_recording(&c, &o, mode, perf, auto_notice, pidlist);
	int interrupted = 0;
	int frozen = wait_snapshot(&c, mode, sfd, &interrupted);
	return finish(&c, mode, interrupted, frozen);
}
