/* ptsim_write.h — the one way mt-ptsim and mt-ptgen write an output file:
 * DIR/NAME through the stage driver (temp file, then rename; one error line
 * and the driver's exit code on failure). */
#ifndef MT_PTSIM_WRITE_H
#define MT_PTSIM_WRITE_H

#include "driver.h"
#include "io.h"
#include "ptsim.h"

#include <stdio.h>

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
