#include "perfcmd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct acc {
	char **argv;
	size_t n, max;
	char *buf;
	size_t used, len;
	int err;
};

/* Appends the word @prefix @value (value may be NULL). */
static void add(struct acc *a, const char *prefix, const char *value)
{
	if (a->err)
		return;
	if (a->n + 1 >= a->max) {
		a->err = -ENOSPC;
		return;
	}
	int k = snprintf(a->buf + a->used, a->len - a->used, "%s%s", prefix, value ? value : "");
	if (k < 0 || (size_t)k >= a->len - a->used) {
		a->err = -ENOSPC;
		return;
	}
	a->argv[a->n++] = a->buf + a->used;
	a->used += (size_t)k + 1;
}

int perfcmd_pt_event(const struct perfcmd_opts *o, char *out, size_t len)
{
	/* cyc=1 with cyc_thresh=1 and no MTC: a CYC packet on nearly every
	 * branch packet, so times are exact to a few cycles.  Without CYC
	 * support, only TSC/MTC: about 1 us resolution. */
	const char *cfg = "";
	if (o->timing != PERFCMD_TIMING_LOW && o->psb_cyc)
		cfg = o->timing == PERFCMD_TIMING_HIGH ? "cyc=1,cyc_thresh=1,mtc_period=0,noretcomp=1"
						       : "cyc=1,cyc_thresh=1,mtc_period=0";
	else if (o->timing == PERFCMD_TIMING_HIGH)
		cfg = "noretcomp=1";
	int k = snprintf(out, len, "intel_pt/%s/%s", cfg, o->kernel ? "uk" : "u");
	return k < 0 || (size_t)k >= len ? -ENOSPC : k;
}

int perfcmd_build(const struct perfcmd_opts *o, char **argv, size_t max, char *buf, size_t buflen)
{
	struct acc a = {argv, 0, max, buf, 0, buflen, 0};
	char tmp[128];

	if (!o->perf || !o->output || !o->pids || (o->mode != PERFCMD_PT && o->mode != PERFCMD_SAMPLE))
		return -EINVAL;
	add(&a, "", o->perf);
	add(&a, "record", NULL);
	add(&a, "--output=", o->output);
	if (o->mode == PERFCMD_PT) {
		if (perfcmd_pt_event(o, tmp, sizeof tmp) < 0)
			return -ENOSPC;
		add(&a, "--event=", tmp);
		add(&a, "--timestamp", NULL);
		/* AUX snapshot mode; "e" also takes one when perf exits, which is
		 * how the single snapshot is taken (perf is stopped at the hit). */
		add(&a, "--snapshot=e", NULL);
		if (o->snapshot_size)
			add(&a, "--mmap-pages=,", o->snapshot_size);
	} else {
		/* Two events.  A dummy event carries the tracking records (mmap,
		 * comm, fork, exit) in perf's ordinary ring, written to the file as
		 * they come, so the names of the whole run survive.  The samples go
		 * to an overwritten (backward) ring read only at a snapshot: the
		 * last samples before it, like PT's snapshot mode.  (perf's global
		 * --overwrite would put the tracking records in that ring too, and
		 * would synthesize the maps of the processes only at the end, after
		 * a program that exited is gone.) */
		char cg[64];
		const char *g = o->call_graph ? o->call_graph : "fp";
		const char *ev = o->event ? o->event : "cpu-clock";
		const char *pl = o->kernel ? "uk" : "u";
		if (!strcmp(g, "dwarf"))
			snprintf(cg, sizeof cg, "call-graph=dwarf,stack-size=%u",
				 o->stack_size ? o->stack_size : 8192);
		else
			snprintf(cg, sizeof cg, "call-graph=%s", g);
		snprintf(tmp, sizeof tmp, "dummy:%s", pl);
		add(&a, "--event=", tmp);
		snprintf(tmp, sizeof tmp, "%s/overwrite,%s,freq=%u/%s", ev, cg, o->freq ? o->freq : 10000, pl);
		add(&a, "--event=", tmp);
		/* fp: a sparse stream of samples with a stack copy, in the same
		 * ring, from which mt-decode learns each thread's root frames
		 * (glibc's start code keeps no frame pointer: no fp walk gets
		 * there; docs/sampling.md) */
		if (!strcmp(g, "fp") && o->root_freq) {
			snprintf(tmp, sizeof tmp,
				 "%s/overwrite,call-graph=dwarf,stack-size=%u,freq=%u/u", ev,
				 o->stack_size ? o->stack_size : 8192, o->root_freq);
			add(&a, "--event=", tmp);
		}
		add(&a, "--timestamp", NULL);
		if (o->multi)
			add(&a, "--switch-output=signal", NULL);
		if (o->snapshot_size)
			add(&a, "--mmap-pages=", o->snapshot_size);
	}
	/* Start with events disabled; mt-capture enables them through the
	 * control fd and waits for perf's ack before letting the program run. */
	add(&a, "--delay=-1", NULL);
	if (o->ctl_fd >= 0) {
		snprintf(tmp, sizeof tmp, "fd:%d,%d", o->ctl_fd, o->ack_fd);
		add(&a, "--control=", tmp);
	}
	if (o->mode == PERFCMD_PT && o->per_thread) {
		add(&a, "--per-thread", NULL);
		add(&a, "--tid=", o->tids ? o->tids : o->pids);
	} else {
		add(&a, "--pid=", o->pids);
	}
	if (a.err)
		return a.err;
	argv[a.n] = NULL;
	return (int)a.n;
}

int perfcmd_format(char *const *argv, char *out, size_t len)
{
	size_t u = 0;
	for (size_t i = 0; argv[i]; i++) {
		const char *s = argv[i];
		int plain = *s != 0;
		for (const char *p = s; *p; p++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				    "_-+=/.,:%@",
				    *p))
				plain = 0;
		if (i && u + 1 < len)
			out[u++] = ' ';
		if (plain) {
			for (const char *p = s; *p && u + 1 < len; p++)
				out[u++] = *p;
		} else {
			if (u + 1 < len)
				out[u++] = '\'';
			for (const char *p = s; *p; p++) {
				const char *piece = *p == '\'' ? "'\\''" : NULL;
				if (piece) {
					for (; *piece && u + 1 < len; piece++)
						out[u++] = *piece;
				} else if (u + 1 < len) {
					out[u++] = *p;
				}
			}
			if (u + 1 < len)
				out[u++] = '\'';
		}
	}
	if (!len)
		return -ENOSPC;
	out[u] = 0;
	return u + 1 >= len ? -ENOSPC : (int)u;
}
