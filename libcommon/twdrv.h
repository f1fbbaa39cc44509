/* twdrv: mt-write's driver around the trace writer (libcommon/tracewrite.h):
 * its output options, the warnings it shows, its closing report; shared by
 * mt-write and by mt-symbolize --trace, which feeds its records to it in
 * process (docs/write.md, "In mt-symbolize"). */
#ifndef MT_TWDRV_H
#define MT_TWDRV_H

#include <stdint.h>

#include "mtev.h"
#include "tracewrite.h"
#include "zsink.h"

struct twdrv {
	tw *t;
	zsink *z;
	int format;	 /* TW_FXT or TW_JSON */
	unsigned shown;	 /* warnings shown */
	int err;	 /* the trace writer's error that stopped twdrv_sink, 0 */
};

/* Option values (a bad one is a usage error: exit 2). */
int twdrv_format_opt(const char *arg);	 /* "fxt", "json" */
int twdrv_compress_opt(const char *arg); /* "none", "gzip", "zstd" */
int twdrv_level_opt(const char *arg);	 /* 1..19 */
/* Fills in what was not given (-1) from the output's name (stdout: NULL),
 * and checks the level against the compression (usage error). */
void twdrv_defaults(int *format, int *compress, int level, const char *out_path);

/* A trace writer on @fd.  0, or -1 (out of memory). */
int twdrv_open(struct twdrv *d, int fd, int format, int compress, int level, int no_args);
/* tw_record as an mtev_sink_fn (mtev_writer_alloc_sink): 0, or a negative
 * MTEV_E* (-MTEV_EIO with errno set) with the trace writer's error in d->err. */
int twdrv_sink(void *d, const struct mtev_rec *rec);
/* tw_finish, then the zsink's.  0, or -1 (errno, or d->err, says why). */
int twdrv_finish(struct twdrv *d);
/* Why twdrv_sink or twdrv_finish failed. */
const char *twdrv_strerror(const struct twdrv *d);
/* Warns about spans left out and threads without a record; with @stats,
 * prints the counters on stderr, each line starting with @prefix.  Returns
 * the number of spans left out. */
uint64_t twdrv_report(const struct twdrv *d, int stats, const char *prefix);
void twdrv_free(struct twdrv *d);

#endif
