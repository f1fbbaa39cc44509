/* mt-symbolize: names, source lines and inline frames for a span stream. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"
#include "err.h"
#include "imgfind.h"
#include "io.h"
#include "mtev.h"
#include "symbolize.h"
#include "sysenv.h"
#include "twdrv.h"

static void usage(FILE *f)
{
	fputs("usage: mt-symbolize [options] [FILE]\n"
	      "Reads a span stream (mt-segment / mt-stitch output; FILE, -i FILE or stdin) and\n"
	      "writes it with names: one symbol record per unique address (name, file, line,\n"
	      "inline chain) before the first span that needs it, every span's name filled in\n"
	      "(by reference to a string record), and each function span expanded into nested\n"
	      "inline spans (flag `inline`) from its waypoints, which are consumed.  Other\n"
	      "records pass through unchanged.  The input is read as it comes, and spans are\n"
	      "written (per thread, in pre-order) as soon as nothing still to come can change\n"
	      "them or come before them: per thread, records are taken to be in time order\n"
	      "(span at its begin, waypoint at its time); memory is bounded by what is not\n"
	      "settled yet (the open frames), not by the segment.  Records that break the\n"
	      "order are counted (-s) and noted; what they make may then come late.\n"
	      "\n"
	      "Addresses are resolved through one `llvm-symbolizer --output-style=JSON\n"
	      "--inlines --demangle` coprocess and cached by build-id.  An inline frame begins\n"
	      "at the first waypoint inside it and ends at the first later waypoint outside it:\n"
	      "frames change only where an address was observed.  Fallbacks: the ELF symbol\n"
	      "(`name+0xoff`), /tmp/perf-PID.map for JIT code, `[uprobes]` for the kernel's\n"
	      "uprobe page, else `[unknown @ 0xADDR (binary)]`.\n"
	      "\n"
	      "  -i, --input FILE      read FILE (same as the FILE operand); default stdin\n"
	      "  -o, --output FILE     write to FILE (appears only when complete); default stdout\n"
	      "  -f, --force           write binary to a terminal\n"
	      "      --symbolizer PROG llvm-symbolizer to run (default: llvm-symbolizer in PATH)\n"
	      "      --no-symbolizer   ELF symbol tables only\n"
	      "      --timeout SECS    no answer for this long: kill the symbolizer\n"
	      "                        and use fallback names (default 30)\n"
	      "      --images DIR      look for mapped files in DIR first (repeatable; a build-id\n"
	      "                        cache, a root file system or a flat directory; also\n"
	      "                        spelled --symfs, --buildid-dir): docs/images.md\n"
	      "      --perf-map-dir DIR  where perf-PID.map files are (default /tmp)\n"
	      "      --cache-dir DIR   cache directory (default $XDG_CACHE_HOME/mt, else\n"
	      "                        ~/.cache/mt); entries are keyed by build-id and address\n"
	      "      --no-cache        neither read nor write the cache\n"
	      "      --window N        records per batch: their new addresses are resolved in\n"
	      "                        one symbolizer request, then what settled is written\n"
	      "                        (default: batches of 65536, written every 1024); the\n"
	      "                        spans written (and so mt-write's trace) are the\n"
	      "                        same for every N; where the string and symbol\n"
	      "                        records fall between them is not\n"
	      "      --partial         on a truncated or corrupt input, still write what was\n"
	      "                        read (exit 1); by default nothing is (exit 2)\n"
	      "  -s, --stats           print counts (addresses, cache hits, requests, records\n"
	      "                        out of time order, most spans held at once) to stderr\n"
	      "  -h, --help            this help\n"
	      "\n"
	      "In process, what mt-write does next (the output is what `mt-symbolize |\n"
	      "mt-write` writes, without encoding the records and decoding them again;\n"
	      "docs/write.md), with mt-write's output options:\n"
	      "      --trace[=F]       write the trace: F fxt (Fuchsia trace format) or json\n"
	      "                        (Chrome trace event format); by default taken from\n"
	      "                        the output name (*.json, *.json.gz, *.fxt, ...), else fxt\n"
	      "      --compress C      none, gzip or zstd; by default from the name (*.gz, *.zst)\n"
	      "      --level N         compression level (default: gzip 6, zstd 3)\n"
	      "      --no-args         slices without arguments (smaller)\n"
	      "An output named as a trace (*.fxt, *.json, ...) needs --trace.\n"
	      "\n"
	      "Limits (docs/limits.md): records at most 16 MiB; any depth (memory follows the\n"
	      "spans held, not the depth numbers); a symbolizer reply line at most 16 MiB\n"
	      "(longer, or no whole reply for --timeout: it and its process group are\n"
	      "killed, fallback names, exit 1).\n"
	      "\n"
	      "Exit status: 0 ok; 1 names degraded (missing or stripped binary, symbolizer\n"
	      "missing, hung or dead: fallback names used; output complete; --partial and\n"
	      "the input was truncated or corrupt after its header; --trace: spans left out\n"
	      "or none recorded, as mt-write); 2 usage or unusable input (not MTEV, corrupt\n"
	      "or truncated, no spans: no output file is left); 111 system error.\n",
	      f);
}

static void on_warn(void *ctx, int degraded, const char *msg)
{
	(void)ctx;
	if (degraded)
		mt_warn("%s", msg);
	else
		mt_note("%s", msg);
}

/* The progress line on a terminal (symz_opts.progress): at most four times
 * a second; mt_progress ends it before any diagnostic. */
static void on_progress(void *ctx, uint64_t records)
{
	static struct timespec last;
	(void)ctx;
	if (drv_progress_due(&last))
		mt_progress("%" PRIu64 " records read", records);
}

int main(int argc, char **argv)
{
	enum { O_SYMBOLIZER = 256, O_NOSYM, O_TIMEOUT, O_IMAGES, O_PERFMAP, O_CACHEDIR,
	       O_NOCACHE, O_WINDOW, O_PARTIAL, O_TRACE, O_COMPRESS, O_LEVEL, O_NOARGS };
	static const struct option lo[] = {{"output", required_argument, 0, 'o'},
					   {"force", no_argument, 0, 'f'},
					   {"symbolizer", required_argument, 0, O_SYMBOLIZER},
					   {"no-symbolizer", no_argument, 0, O_NOSYM},
					   {"timeout", required_argument, 0, O_TIMEOUT},
					   {"images", required_argument, 0, O_IMAGES},
					   {"symfs", required_argument, 0, O_IMAGES},
					   {"buildid-dir", required_argument, 0, O_IMAGES},
					   {"perf-map-dir", required_argument, 0, O_PERFMAP},
					   {"cache-dir", required_argument, 0, O_CACHEDIR},
					   {"no-cache", no_argument, 0, O_NOCACHE},
					   {"window", required_argument, 0, O_WINDOW},
					   {"partial", no_argument, 0, O_PARTIAL},
					   {"trace", optional_argument, 0, O_TRACE},
					   {"compress", required_argument, 0, O_COMPRESS},
					   {"level", required_argument, 0, O_LEVEL},
					   {"no-args", no_argument, 0, O_NOARGS},
					   {"input", required_argument, 0, 'i'},
					   {"stats", no_argument, 0, 's'},
					   {"help", no_argument, 0, 'h'},
					   {0, 0, 0, 0}};
	struct symz_opts o = {0};
	const char *out_path = NULL, *cache_dir = NULL, *in_opt = NULL;
	int force = 0, stats = 0, no_cache = 0, c;
	int trace = 0, format = -1, compress = -1, level = 0, no_args = 0, tw_opt = 0;
	char defcache[PATH_MAX];
	drv_init(argc, argv);
	o.timeout_ms = 30000;
	o.warn = on_warn;
	while ((c = getopt_long(argc, argv, ":i:o:fsh", lo, NULL)) != -1) {
		switch (c) {
		case 'o': out_path = optarg; break;
		case 'f': force = 1; break;
		case O_SYMBOLIZER: o.symbolizer = optarg; break;
		case O_NOSYM: o.symbolizer = ""; break;
		case O_TIMEOUT: {
			char *e;
			double s = strtod(optarg, &e);
			if (e == optarg || *e || s <= 0 || s > 86400)
				drv_usage("bad --timeout '%s' (seconds, > 0)", optarg);
			o.timeout_ms = (int)(s * 1000);
			if (o.timeout_ms < 1)
				o.timeout_ms = 1;
			break;
		}
		case O_IMAGES:
			if (img_dirs_add(optarg) < 0)
				mt_fatal(MT_EXIT_SYS, "out of memory");
			break;
		case O_PERFMAP: o.perf_map_dir = optarg; break;
		case O_CACHEDIR: cache_dir = optarg; break;
		case O_NOCACHE: no_cache = 1; break;
		case O_WINDOW: {
			char *e;
			unsigned long long n = strtoull(optarg, &e, 10);
			if (e == optarg || *e || n < 1 || n > (1u << 30) || optarg[0] == '-')
				drv_usage("bad --window '%s' (records, 1 to 2^30)", optarg);
			o.window = (size_t)n;
			break;
		}
		case O_PARTIAL: o.partial = 1; break;
		case O_TRACE:
			trace = 1;
			if (optarg)
				format = twdrv_format_opt(optarg);
			break;
		case O_COMPRESS: compress = twdrv_compress_opt(optarg), tw_opt = 1; break;
		case O_LEVEL: level = twdrv_level_opt(optarg), tw_opt = 1; break;
		case O_NOARGS: no_args = 1, tw_opt = 1; break;
		case 'i': in_opt = optarg; break;
		case 's': stats = 1; break;
		case 'h': usage(stdout); return 0;
		default: drv_getopt_error(c, argv);
		}
	}
	const char *in_path = drv_input(argc, argv, in_opt);
	if (!in_path)
		in_path = "-";
	if (out_path && !strcmp(out_path, "-"))
		out_path = NULL;
	if (tw_opt && !trace)
		drv_usage("--compress, --level and --no-args need --trace");
	if (!trace && out_path && tw_format_from_name(out_path) >= 0)
		drv_usage("'%s' is named as a trace: add --trace (or name it *.mt)", out_path);
	if (trace)
		twdrv_defaults(&format, &compress, level, out_path);
	if (!no_cache) {
		if (cache_dir)
			o.cache_dir = cache_dir;
		else if (mt_cache_dir(defcache, sizeof defcache) == 0)
			o.cache_dir = defcache;
	}
	/* a symbolizer that dies must not kill us */
	signal(SIGPIPE, SIG_IGN);

	/* read as it comes (memory is bounded by what is not settled) */
	int in_fd = drv_open_in(in_path);
	mtev_reader *rd = drv_reader(in_path, in_fd);
	struct io_out out;
	drv_out_open(&out, out_path, !trace || format == TW_FXT || compress != ZSINK_PLAIN, force);
	struct twdrv td = {0};
	if (trace) {
		if (twdrv_open(&td, out.fd, format, compress, level, no_args) < 0)
			mt_fatal(MT_EXIT_SYS, "out of memory");
		o.sink = twdrv_sink;
		o.sink_ctx = &td;
	}
	struct symz_stats st;
	if (io_progress_enabled())
		o.progress = on_progress;
	int r = symz_run_reader(rd, out.fd, &o, &st);
	mt_progress_end();
	mtev_reader_free(rd);
	if (in_fd != 0)
		close(in_fd);
	if (r < 0) {
		const char *msg = st.err;
		if (r == -SYMZ_EINPUT) {
			if (!strncmp(msg, "input: ", 7))
				msg += 7;
			drv_input_error(MT_EXIT_USAGE, in_path, "%s", msg);
		}
		if (!strncmp(msg, "cannot write output: ", 21)) {
			msg += 21;
			if (td.err && td.err != -TW_EIO) /* the trace writer's */
				msg = tw_strerror(td.err);
			else if (!strncmp(msg, "I/O error: ", 11)) /* the reason follows */
				msg += 11;
			drv_write_failed(&out, out_path, msg);
		}
		mt_fatal(MT_EXIT_SYS, "%s", msg);
	}
	uint64_t dropped = 0;
	int empty = 0;
	if (trace) {
		struct tw_stats ts;
		tw_get_stats(td.t, &ts);
		if (!ts.spans_in) { /* as mt-write on a stage's output */
			mt_warn("%s: no spans (nothing was recorded); the trace holds only processes, "
				"threads and triggers", in_path);
			empty = 1;
		}
		if (twdrv_finish(&td) < 0)
			drv_write_failed(&out, out_path, twdrv_strerror(&td));
	}
	drv_out_commit(&out, out_path);
	if (trace) {
		dropped = twdrv_report(&td, stats, "mt-symbolize: trace");
		twdrv_free(&td);
	}
	if (stats)
		fprintf(stderr,
			"mt-symbolize: records=%" PRIu64 " spans_in=%" PRIu64 " waypoints_in=%" PRIu64
			" spans_out=%" PRIu64 " inline_spans=%" PRIu64 " symbols=%" PRIu64
			" unique_addrs=%" PRIu64 " unique_binaddrs=%" PRIu64 " cache_hits=%" PRIu64
			" symbolizer_requests=%" PRIu64 " fallback_names=%" PRIu64 " unknown_names=%" PRIu64
			" waypoints_unmatched=%" PRIu64 " json_slow=%" PRIu64 " waypoints_late=%" PRIu64
			" spans_late=%" PRIu64 " spans_live_max=%" PRIu64 " inodes_live_max=%" PRIu64
			" read_s=%.3f resolve_s=%.3f tree_s=%.3f write_s=%.3f\n",
			st.records_in, st.spans_in, st.waypoints_in, st.spans_out, st.inline_spans,
			st.symbols_out, st.unique_addrs, st.unique_binaddrs, st.cache_hits,
			st.symbolizer_requests, st.fallback_names, st.unknown_names,
			st.waypoints_unmatched, st.json_slow, st.waypoints_late, st.spans_late,
			st.spans_live_max, st.inodes_live_max, st.t_read, st.t_resolve, st.t_tree, st.t_write);
	return st.degraded || dropped || empty ? MT_EXIT_DEGRADED : MT_EXIT_OK;
}
