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
#include "twdrv.h"


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

enum { OPT_NO_ARGS = 256, OPT_PARTIAL, OPT_FORCE };

/* What a fatal exit must release: the partial output first (so no file that
 * looks complete is left), then memory (so leak checkers stay quiet). */
static struct {
	struct io_out *out;
	struct twdrv *d;
	mtev_reader *r;
} g;

static void release(void)
{
	int e = errno;
	if (g.out)
		io_out_abort(g.out);
	if (g.d)
		twdrv_free(g.d);
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
		case 'f': format = twdrv_format_opt(optarg); break;
		case 'o': out_path = optarg; break;
		case 'i': in_path = optarg; break;
		case 'z': compress = twdrv_compress_opt(optarg); break;
		case 'l': level = twdrv_level_opt(optarg); break;
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
	twdrv_defaults(&format, &compress, level, out_path);

	mtev_reader *r = g.r = drv_reader(in_path, drv_open_in(in_path));

	struct io_out out;
	int binary = format == TW_FXT || compress != ZSINK_PLAIN;
	drv_out_open(&out, out_path, binary, force);
	g.out = &out;
	struct twdrv d;
	g.d = &d;
	if (twdrv_open(&d, out.fd, format, compress, level, no_args) < 0)
		die(MT_EXIT_SYS, "out of memory");
	tw *t = d.t;

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
			mt_progress("%" PRIu64 " spans", st.spans_written);
		}
	}
	mt_progress_end();
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
	if (twdrv_finish(&d) < 0)
		die(MT_EXIT_SYS, "unable to write %s: %s", where, twdrv_strerror(&d));
	g.out = NULL;
	drv_out_commit(&out, out_path);
	uint64_t dropped = twdrv_report(&d, stats, "mt-write");
	release();
	return dropped || truncated || empty_ok ? MT_EXIT_DEGRADED : MT_EXIT_OK;
}
