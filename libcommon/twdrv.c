/* twdrv: mt-write's driver, shared with mt-symbolize --trace. */
#include "twdrv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "err.h"

#define MAX_WARN 10

int twdrv_format_opt(const char *arg)
{
	if (!strcmp(arg, "fxt"))
		return TW_FXT;
	if (!strcmp(arg, "json"))
		return TW_JSON;
	drv_usage("unknown format '%s' (fxt or json)", arg);
}

int twdrv_compress_opt(const char *arg)
{
	if (!strcmp(arg, "none"))
		return ZSINK_PLAIN;
	if (!strcmp(arg, "gzip") || !strcmp(arg, "gz"))
		return ZSINK_GZIP;
	if (!strcmp(arg, "zstd") || !strcmp(arg, "zst"))
		return ZSINK_ZSTD;
	drv_usage("unknown compression '%s' (none, gzip, zstd)", arg);
}

int twdrv_level_opt(const char *arg)
{
	char *end;
	long v = strtol(arg, &end, 10);
	if (*end || v < 1 || v > 19)
		drv_usage("bad compression level '%s' (1..19)", arg);
	return (int)v;
}

void twdrv_defaults(int *format, int *compress, int level, const char *out_path)
{
	if (*format < 0)
		*format = out_path && tw_format_from_name(out_path) == TW_JSON ? TW_JSON : TW_FXT;
	if (*compress < 0)
		*compress = out_path ? (int)zsink_kind_from_name(out_path, NULL) : ZSINK_PLAIN;
	if (level && *compress == ZSINK_GZIP && level > 9)
		drv_usage("bad gzip level %d (1..9)", level);
}

static void on_warn(void *ctx, const char *msg)
{
	struct twdrv *d = ctx;
	if (d->shown++ < MAX_WARN)
		mt_warn("%s", msg);
}

int twdrv_open(struct twdrv *d, int fd, int format, int compress, int level, int no_args)
{
	memset(d, 0, sizeof *d);
	d->format = format;
	d->z = zsink_alloc(fd, (enum zsink_kind)compress, level);
	struct tw_opts o = {.format = (enum tw_format)format, .no_args = no_args,
			    .warn = on_warn, .warn_ctx = d};
	d->t = d->z ? tw_alloc(d->z, &o) : NULL;
	return d->t ? 0 : -1;
}

int twdrv_sink(void *ctx, const struct mtev_rec *rec)
{
	struct twdrv *d = ctx;
	int r = tw_record(d->t, rec);
	if (r >= 0)
		return 0;
	d->err = r;
	return r == -TW_EIO ? -MTEV_EIO : r == -TW_ENOMEM ? -MTEV_ENOMEM : -MTEV_EINVAL;
}

int twdrv_finish(struct twdrv *d)
{
	int r = tw_finish(d->t);
	if (r < 0) {
		d->err = r;
		return -1;
	}
	return zsink_finish(d->z) < 0 ? -1 : 0;
}

const char *twdrv_strerror(const struct twdrv *d)
{
	return d->err && d->err != -TW_EIO ? tw_strerror(d->err) : strerror(errno);
}

uint64_t twdrv_report(const struct twdrv *d, int stats, const char *prefix)
{
	struct tw_stats st;
	uint64_t dropped = 0;
	tw_get_stats(d->t, &st);
	for (unsigned i = 0; i < TW_DROP__COUNT; i++)
		dropped += st.dropped[i];
	if (dropped) {
		char buf[512];
		size_t n = 0;
		for (unsigned i = 0; i < TW_DROP__COUNT; i++)
			if (st.dropped[i])
				n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%" PRIu64 " %s",
						      n ? ", " : "", st.dropped[i], tw_drop_name(i));
		mt_warn("%" PRIu64 " of %" PRIu64 " spans left out (%s)%s", dropped, st.spans_in, buf,
			d->shown > MAX_WARN ? "; first warnings shown above" : "");
	}
	if (st.threads_without_pid)
		mt_note("%" PRIu64 " thread(s) had no thread record: pid taken = tid",
			st.threads_without_pid);
	if (stats)
		fprintf(stderr,
			"%s: spans_written=%" PRIu64 " dropped=%" PRIu64 " gaps=%" PRIu64
			" triggers=%" PRIu64 " threads=%" PRIu64 " symbols=%" PRIu64 " bytes=%" PRIu64
			" bytes_per_span=%.1f bytes_out=%" PRIu64 "\n",
			prefix, st.spans_written, dropped, st.gaps, st.triggers, st.threads, st.symbols,
			st.bytes_out, st.spans_written ? (double)st.bytes_out / (double)st.spans_written : 0.0,
			zsink_bytes_out(d->z));
	if (stats && d->format == TW_FXT)
		fprintf(stderr,
			"%s: fxt_string_records=%" PRIu64 " fxt_string_reuses=%" PRIu64
			" fxt_thread_records=%" PRIu64 " fxt_thread_reuses=%" PRIu64 "\n",
			prefix, st.fxt_string_records, st.fxt_string_reuses, st.fxt_thread_records,
			st.fxt_thread_reuses);
	return dropped;
}

void twdrv_free(struct twdrv *d)
{
	tw_free(d->t);
	zsink_free(d->z);
	d->t = NULL;
	d->z = NULL;
}
