/* mt-write: MTEV spans -> a Perfetto trace (Fuchsia FXT or Chrome JSON). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "err.h"
#include "io.h"
#include "mtev.h"
#include "tracewrite.h"
#include "zsink.h"

#define MAX_WARN 10

static void usage(FILE *f)
{
	fputs("usage: mt-write [-f fxt|json] [-o FILE] [options] [[-i] INPUT]\n"
	      "Writes the spans of an MTEV stream (INPUT or stdin; mt-stitch or mt-symbolize\n"
	      "output) as a trace for Perfetto (ui.perfetto.dev) and other viewers.\n"
	      "\n"
	      "  -i, --input FILE  read FILE (default: stdin; a bare INPUT argument is the same)\n"
	      "  -f, --format F    fxt (Fuchsia trace format, the default) or json (Chrome\n"
	      "                    trace event format); by default taken from the output name\n"
	      "                    (*.json, *.json.gz, *.fxt, ...)\n"
	      "  -o, --output FILE write FILE (default: stdout).  FILE appears only when it is\n"
	      "                    complete: it is written as FILE.tmp.PID and renamed at the end\n"
	      "  -z, --compress C  none, gzip or zstd; by default from the name (*.gz, *.zst)\n"
	      "  -l, --level N     compression level (default: gzip 6, zstd 3)\n"
	      "      --no-args     slices without arguments (smaller)\n"
	      "      --partial     on a truncated input, still write what was read (exit 1)\n"
	      "      --force       write binary data even to a terminal\n"
	      "  -s, --stats       print counts and sizes to stderr at the end\n"
	      "  -h, --help        this help\n"
	      "\n"
	      "Each span becomes a slice on its thread (category \"span\"; begin/end events, or\n"
	      "one complete event for an FXT leaf), named by the span's name, else the symbol\n"
	      "record of its function, else its address; argument \"loc\" is \"0xADDR file:line\",\n"
	      "\"inline\" marks inline frames, \"flags\" lists other span flags.  Process and\n"
	      "thread records name processes and threads.  Gaps and trigger hits become\n"
	      "instants.  Times are perf-clock ns (FXT: 1e9 ticks per second).\n"
	      "Spans that break the MTEV span contract (time going backwards, not nested in\n"
	      "their parent, overlapping siblings, orphans) are left out with a warning, so the\n"
	      "output always loads as it reads.\n"
	      "\n"
	      "Limits (docs/limits.md): records at most 16 MiB; times up to 2^63-1 ns (what\n"
	      "trace readers take): a span ending later is left out with a warning (exit 1),\n"
	      "a gap or trigger there is left out with a warning.\n"
	      "\n"
	      "Exit status: 0 ok; 1 spans were left out (output written); 2 usage or unusable\n"
	      "input (not MTEV, corrupt or truncated stream, no spans: no output file is left);\n"
	      "111 system error (no output file is left).\n",
	      f);
}

struct warn_state {
	unsigned shown;
};

static void on_warn(void *ctx, const char *msg)
{
	struct warn_state *w = ctx;
	if (w->shown++ < MAX_WARN)
		mt_warn("%s", msg);
}

enum { OPT_NO_ARGS = 256, OPT_PARTIAL, OPT_FORCE };

/* What a fatal exit must release: the partial output first (so no file that
 * looks complete is left), then memory (so leak checkers stay quiet). */
static struct {
	struct io_out *out;
	tw *t;
	zsink *z;
	mtev_reader *r;
} g;

static void release(void)
{
	int e = errno;
	if (g.out)
		io_out_abort(g.out);
	tw_free(g.t);
	zsink_free(g.z);
	mtev_reader_free(g.r);
	memset(&g, 0, sizeof g);
	errno = e;
}

/* The message is formatted before anything is released (it may read the
 * reader's offset or errno). */
static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	release();
	mt_fatal(code, "%s", msg);
}

/* The stream comes from a stage that writes spans (so zero spans means
 * nothing was recorded, not the wrong input). */
static int stage_output(const mtev_reader *r)
{
	const struct mtev_header *h = mtev_reader_header(r);
	return h && (!strcmp(h->producer, "mt-segment") || !strcmp(h->producer, "mt-stitch") ||
		     !strcmp(h->producer, "mt-symbolize"));
}

/* What was left out, and --stats.  Returns the number of spans left out. */
static uint64_t report(const struct tw_stats *st, const struct warn_state *ws, int stats, int format,
		       uint64_t zout)
{
	uint64_t dropped = 0;
	for (unsigned i = 0; i < TW_DROP__COUNT; i++)
		dropped += st->dropped[i];
	if (dropped) {
		char buf[512];
		size_t n = 0;
		for (unsigned i = 0; i < TW_DROP__COUNT; i++)
			if (st->dropped[i])
				n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%" PRIu64 " %s",
						      n ? ", " : "", st->dropped[i], tw_drop_name(i));
		mt_warn("%" PRIu64 " of %" PRIu64 " spans left out (%s)%s", dropped, st->spans_in, buf,
			ws->shown > MAX_WARN ? "; first warnings shown above" : "");
	}
	if (st->threads_without_pid)
		mt_note("%" PRIu64 " thread(s) had no thread record: pid taken = tid",
			st->threads_without_pid);
	if (stats)
		fprintf(stderr,
			"mt-write: spans_written=%" PRIu64 " dropped=%" PRIu64 " gaps=%" PRIu64
			" triggers=%" PRIu64 " threads=%" PRIu64 " symbols=%" PRIu64 " bytes=%" PRIu64
			" bytes_per_span=%.1f bytes_out=%" PRIu64 "\n",
			st->spans_written, dropped, st->gaps, st->triggers, st->threads, st->symbols,
			st->bytes_out, st->spans_written ? (double)st->bytes_out / (double)st->spans_written : 0.0,
			zout);
	if (stats && format == TW_FXT)
		fprintf(stderr,
			"mt-write: fxt_string_records=%" PRIu64 " fxt_string_reuses=%" PRIu64
			" fxt_thread_records=%" PRIu64 " fxt_thread_reuses=%" PRIu64 "\n",
			st->fxt_string_records, st->fxt_string_reuses, st->fxt_thread_records,
			st->fxt_thread_reuses);
	return dropped;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"input", required_argument, 0, 'i'},
					   {"format", required_argument, 0, 'f'},
					   {"output", required_argument, 0, 'o'},
					   {"compress", required_argument, 0, 'z'},
					   {"level", required_argument, 0, 'l'},
					   {"no-args", no_argument, 0, OPT_NO_ARGS},
					   {"partial", no_argument, 0, OPT_PARTIAL},
					   {"force", no_argument, 0, OPT_FORCE},
					   {"stats", no_argument, 0, 's'},
					   {"help", no_argument, 0, 'h'},
					   {0, 0, 0, 0}};
	const char *out_path = NULL, *in_path = NULL;
	int format = -1, compress = -1, level = 0, no_args = 0, partial = 0, force = 0, stats = 0;
	int c;
	drv_init(argc, argv);
	while ((c = getopt_long(argc, argv, ":i:f:o:z:l:sh", lo, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "fxt"))
				format = TW_FXT;
			else if (!strcmp(optarg, "json"))
				format = TW_JSON;
			else
				drv_usage("unknown format '%s' (fxt or json)", optarg);
			break;
		case 'o': out_path = optarg; break;
		case 'i': in_path = optarg; break;
		case 'z':
			if (!strcmp(optarg, "none"))
				compress = ZSINK_PLAIN;
			else if (!strcmp(optarg, "gzip") || !strcmp(optarg, "gz"))
				compress = ZSINK_GZIP;
			else if (!strcmp(optarg, "zstd") || !strcmp(optarg, "zst"))
				compress = ZSINK_ZSTD;
			else
				drv_usage("unknown compression '%s' (none, gzip, zstd)", optarg);
			break;
		case 'l': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > 19)
				drv_usage("bad compression level '%s' (1..19)", optarg);
			level = (int)v;
			break;
		}
		case OPT_NO_ARGS: no_args = 1; break;
		case OPT_PARTIAL: partial = 1; break;
		case OPT_FORCE: force = 1; break;
		case 's': stats = 1; break;
		case 'h': usage(stdout); return 0;
		default: drv_getopt_error(c, argv);
		}
	}
	in_path = drv_input(argc, argv, in_path);
	if (!in_path)
		in_path = "-";
	if (out_path && !strcmp(out_path, "-"))
		out_path = NULL;
	if (format < 0)
		format = out_path && tw_format_from_name(out_path) == TW_JSON ? TW_JSON : TW_FXT;
	if (compress < 0)
		compress = out_path ? (int)zsink_kind_from_name(out_path, NULL) : ZSINK_PLAIN;
	if (level && compress == ZSINK_GZIP && level > 9)
		drv_usage("bad gzip level %d (1..9)", level);

	mtev_reader *r = g.r = drv_reader(in_path, drv_open_in(in_path));

	struct io_out out;
	int binary = format == TW_FXT || compress != ZSINK_PLAIN;
	drv_out_open(&out, out_path, binary, force);
	g.out = &out;
	zsink *z = g.z = zsink_alloc(out.fd, (enum zsink_kind)compress, level);
	struct warn_state ws = {0};
	struct tw_opts o = {.format = (enum tw_format)format, .no_args = no_args,
			    .warn = on_warn, .warn_ctx = &ws};
	tw *t = g.t = z ? tw_alloc(z, &o) : NULL;
	if (!t)
		die(MT_EXIT_SYS, "out of memory");

	const char *where = out_path ? out_path : "stdout";
	int progress = io_progress_enabled() && out_path;
	struct mtev_rec rec;
	int rc, wrc = 0, truncated = 0;
	uint64_t nrec = 0;
	while ((rc = mtev_read(r, &rec)) > 0) {
		if ((wrc = tw_record(t, &rec)) < 0)
			break;
		if (progress && !(++nrec & 0xfffff)) {
			struct tw_stats st;
			tw_get_stats(t, &st);
			fprintf(stderr, "\rmt-write: %" PRIu64 " spans", st.spans_written);
		}
	}
	if (progress && nrec > 0xfffff)
		fputc('\n', stderr);
	if (wrc < 0) {
		if (wrc == -TW_EIO)
			die(MT_EXIT_SYS, "unable to write %s: %s", where, strerror(errno));
		die(MT_EXIT_USAGE, "unable to write %s: %s", where, tw_strerror(wrc));
	}
	if (rc < 0) {
		int code = rc == -MTEV_EIO ? MT_EXIT_SYS : MT_EXIT_USAGE;
		if (rc == -MTEV_ETRUNC && partial) {
			mt_warn("%s: %s at byte offset %" PRIu64 "; writing what was read (--partial)",
				in_path, mtev_strerror(rc), mtev_reader_offset(r));
			truncated = 1;
		} else if (code == MT_EXIT_SYS) {
			die(code, "unable to read %s: %s", drv_name(in_path), strerror(errno));
		} else {
			die(code, "unable to read %s: %s at byte offset %" PRIu64 "%s",
			    drv_name(in_path), mtev_strerror(rc), mtev_reader_offset(r),
			    out_path ? "; no output written" : "");
		}
	}
	struct tw_stats st;
	tw_get_stats(t, &st);
	int empty_ok = 0;
	if (!st.spans_in && stage_output(r)) {
		/* a stage's output with nothing in it (no sample, no trace):
		 * the processes, threads and triggers still make a trace */
		mt_warn("%s: no spans (nothing was recorded); the trace holds only processes, "
			"threads and triggers", in_path);
		empty_ok = 1;
	}
	if (!st.spans_in && !empty_ok) {
		die(MT_EXIT_USAGE,
		    "unable to read %s: no span records (mt-write needs mt-segment, mt-stitch or "
		    "mt-symbolize output)%s",
		    drv_name(in_path), out_path ? "; no output written" : "");
	}
	if ((rc = tw_finish(t)) < 0 || zsink_finish(z) < 0) {
		die(MT_EXIT_SYS, "unable to write %s: %s", where,
		    rc < 0 && rc != -TW_EIO ? tw_strerror(rc) : strerror(errno));
	}
	uint64_t zout = zsink_bytes_out(z);
	tw_get_stats(t, &st);
	g.out = NULL;
	release();
	drv_out_commit(&out, out_path);

	uint64_t dropped = report(&st, &ws, stats, format, zout);
	return dropped || truncated || empty_ok ? MT_EXIT_DEGRADED : MT_EXIT_OK;
}
