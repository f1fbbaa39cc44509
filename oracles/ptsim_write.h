/* ptsim_write.h — the one way mt-ptsim and mt-ptgen write an output file:
 * DIR/NAME through the stage driver (temp file, then rename; one error line
 * and the driver's exit code on failure). */
#ifndef MT_PTSIM_WRITE_H
#define MT_PTSIM_WRITE_H

#include "driver.h"
#include "io.h"
#include "ptsim.h"

#include <stdio.h>

/* --help lines of the perf.data layout options (struct ptsim_result's
 * per_cpu and fake_switch), as mt-ptsim and mt-ptgen spell them */
#define PTSIM_LAYOUT_HELP \
"      --per-cpu         perf.data with per-cpu buffers (what perf records\n" \
"                        without --per-thread), thread k alone on cpu k\n" \
"      --fake-switch NS  with --per-cpu: every NS ns of a thread's trace its\n" \
"                        cpu switches for NS/2 ns, then back, to a thread that\n" \
"                        does not exist, in turn of the same process and of\n" \
"                        another with other code at the same addresses; the\n" \
"                        trace in between is decoded as that thread's (not\n" \
"                        the truth: for tests that compare decoders)\n"

typedef int (*ptsim_writer_fn)(int, const struct ptsim_run *, const struct ptsim_result *, char *,
			       size_t);

static inline void ptsim_write_out(const char *dir, const char *name, ptsim_writer_fn fn,
				   const struct ptsim_run *run, const struct ptsim_result *res)
{
	char path[4096], err[512];
	struct io_out o;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	drv_out_open(&o, path, 1, 1);
	if (fn(o.fd, run, res, err, sizeof err) < 0)
		drv_write_failed(&o, path, err);
	drv_out_commit(&o, path);
}

#endif
