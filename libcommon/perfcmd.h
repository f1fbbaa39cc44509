/* The `perf record` command line mt-capture runs, built from options, so
 * that what would run on an Intel host can be printed and tested anywhere.
 * Functions return >= 0 or a negative errno; they never print. */
#ifndef MT_PERFCMD_H
#define MT_PERFCMD_H

#include <stddef.h>

enum perfcmd_mode { PERFCMD_PT = 1, PERFCMD_SAMPLE = 2 };
enum perfcmd_timing { PERFCMD_TIMING_LOW = 0, PERFCMD_TIMING_NORMAL = 1, PERFCMD_TIMING_HIGH = 2 };

struct perfcmd_opts {
	const char *perf;	    /* the perf binary */
	const char *output;	    /* DIR/perf.data */
	enum perfcmd_mode mode;
	const char *snapshot_size;  /* ring size per CPU ("4M", "512K", pages); NULL: perf's */
	int multi;		    /* a snapshot per trigger hit, not one */
	int ctl_fd, ack_fd;	    /* perf's --control fds; -1: none */
	const char *pids;	    /* "PID[,PID...]" */
	/* PT */
	enum perfcmd_timing timing;
	int psb_cyc;		    /* the CPU has CYC packets (intel_pt/caps/psb_cyc) */
	int kernel;		    /* trace the kernel too (root) */
	int per_thread;		    /* per-thread buffers: -t TIDS instead of -p PIDS */
	const char *tids;	    /* with per_thread */
	/* sampling */
	const char *event;	    /* "cpu-clock" (default) or "cycles" */
	unsigned freq;		    /* samples per second */
	const char *call_graph;	    /* "fp", "dwarf", "lbr" */
	unsigned stack_size;	    /* dwarf: bytes of user stack per sample (0: 8192) */
	unsigned root_freq;	    /* fp: stack-copy samples per second beside (0: none) */
};

/* Fills @argv (NULL-terminated, at most @max entries including the NULL)
 * with strings stored in @buf.  Returns argc, -ENOSPC, or -EINVAL. */
int perfcmd_build(const struct perfcmd_opts *o, char **argv, size_t max, char *buf, size_t buflen);

/* The PT event string, e.g. "intel_pt/cyc=1,cyc_thresh=1,mtc_period=0/u". */
int perfcmd_pt_event(const struct perfcmd_opts *o, char *out, size_t len);

/* @argv as one line a POSIX shell reads back as the same words. */
int perfcmd_format(char *const *argv, char *out, size_t len);

#endif
