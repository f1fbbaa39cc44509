/* mt-decode: perf.data (Intel PT or sampling) or raw PT to MTEV events. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "err.h"
#include "imgfind.h"
#include "io.h"
#include "mtev.h"
#include "perfdata.h"
#include "ptdecode.h"
#include "segdrv.h"

static void usage(FILE *f)
{
	fputs("usage: mt-decode [options] [[-i] PERF.DATA]\n"
	      "       mt-decode --pt FILE --image FILE[:OFFSET[:SIZE]]@VADDR... [--cpu F/M/S]\n"
	      "       mt-decode --records [PERF.DATA]\n"
	      "Decodes a perf.data file (file or pipe mode; stdin when no file or `-`) into an\n"
	      "MTEV stream: a clock record, process/thread/map records, every taken branch\n"
	      "(call, return, jump, jcc, syscall, sysret, interrupt, iret, trace-start,\n"
	      "trace-end), gaps where the trace was lost or could not be decoded, each thread's\n"
	      "records in time order.  Intel PT is decoded with libipt's block decoder, per\n"
	      "thread or per cpu (threads from the context-switch sideband), snapshots with\n"
	      "overlapping data removed.  A sampling recording gives stack samples (callchains,\n"
	      "fp or lbr; dwarf: the user stack copies are unwound with libdw); hardware-\n"
	      "breakpoint samples give trigger records.  Beside frame-pointer samples, a\n"
	      "stream of samples with a stack copy (mt-capture -g fp) gives each thread's\n"
	      "root frames, joined to the fp stacks at the same return address\n"
	      "(docs/sampling.md).\n"
	      "\n"
	      "Code images come from the MMAP/MMAP2 records: the file of that path and\n"
	      "build-id in the --images directories, else at its path, else in ~/.debug\n"
	      "(docs/images.md).  A missing image is one warning and a gap wherever the trace\n"
	      "needed it.\n"
	      "\n"
	      "  -i, --input FILE      read FILE (same as the PERF.DATA operand); default stdin\n"
	      "  -o, --output FILE     write MTEV to FILE (atomically) instead of stdout\n"
	      "  -f, --force           write binary output even to a terminal\n"
	      "      --images DIR      look for mapped files in DIR first (repeatable; a build-id\n"
	      "                        cache, a root file system or a flat directory; also\n"
	      "                        spelled --symfs, --buildid-dir): docs/images.md\n"
	      "      --no-images       use no images at all (every traced ip becomes a gap)\n"
	      "      --pt FILE         decode raw Intel PT from FILE (ptxed style)\n"
	      "      --image SPEC      raw mode: load FILE[:OFFSET[:SIZE]]@VADDR (repeatable)\n"
	      "      --cpu F/M/S       the Intel cpu (family/model/stepping) whose errata apply\n"
	      "                        (default: the recording's CPUID; raw mode: none)\n"
	      "      --pid N, --tid N  raw mode: the thread to attribute the trace to (0)\n"
	      "      --pt-timing MTC,EBX,EAX,NOM  raw mode: the MTC period (perf's\n"
	      "                        mtc_period), CPUID 0x15 EBX/EAX (TSC:CTC) and the\n"
	      "                        nominal core:bus ratio perf would record (default\n"
	      "                        0,0,0,0: MTC adds no time; CYC is calibrated by TSC)\n"
	      "      --records         list every perf.data record as text (no decoding)\n"
	      "      --decoder NAME    walk (the default without -j: the cached code walk;\n"
	      "                        a recording it cannot walk uses libipt) or libipt\n"
	      "                        (libipt's block decoder; the default with -j N > 1),\n"
	      "                        same output, or walk-only (the walk or exit 2: a\n"
	      "                        recording it cannot walk); the walk reads the trace\n"
	      "                        with the project's query decoder where it can, MTC\n"
	      "                        timing included; walk-qry: with libipt's; walk-check:\n"
	      "                        both, exit 3 where they differ (docs/decode.md)\n"
	      "      --no-root-join    sampling: leave frame-pointer stacks as the walk ended them\n"
	      "      --partial         decode a truncated perf.data (a killed recorder) as far\n"
	      "                        as it goes (exit 1); by default it is refused (exit 2)\n"
	      "      --resync          after damaged or lost trace, go on before the next PSB\n"
	      "                        from the first TIP with a known address when its time\n"
	      "                        is known exactly (default: wait for the PSB;\n"
	      "                        docs/decode.md)\n"
	      "  -j, --jobs N          decode PT on N threads (default 1; not faster yet): each\n"
	      "                        trace cut at PSBs into chunks decoded ahead; the output\n"
	      "                        is the same as with -j 1 (docs/decode.md)\n"
	      "      --chunk-bytes N   -j: cut chunks at the first PSB N bytes on (16 KiB;\n"
	      "                        4 KiB with --par-answers)\n"
	      "      --par-fallback    -j: test the serial fallback (no chunk is switched to)\n"
	      "      --par-answers     -j: workers hand libipt's answers to the one stepper,\n"
	      "                        not branch records (the older, slower way)\n"
	      "  -s, --stats           print counts (records, AUX bytes, branches, gaps) to stderr\n"
	      "                        (walk-check: also the trace segments it checked; with\n"
	      "                        --segment, mt-segment's counters)\n"
	      "  -h, --help            this help\n"
	      "On a terminal, stderr shows how much of the recording is written.\n"
	      "\n"
	      "In process, what mt-segment does next (the output is what `mt-decode |\n"
	      "mt-segment [--stitch]` writes, without encoding the branch records and\n"
	      "decoding them again; docs/segment.md): --segment, or --stitch alone, and\n"
	      "mt-segment's own options:\n"
	      "      --segment        write segments, spans and waypoints (mt-segment's output)\n"
	      "      --segment-serial  segment in the decoder's thread (by default a thread\n"
	      "                       of its own takes the branch records in batches)\n",
	      f);
	fputs(segdrv_help, f);
	fputs("\n"
	      "Limits (docs/limits.md): perf records as perf writes them; an AUXTRACE record\n"
	      "at most 1 GiB of trace (more: exit 2, one line with its offset).  A pipe-mode\n"
	      "recording must end with perf's closing FINISHED_ROUND, else it is truncated.\n"
	      "\n"
	      "Exit status: 0 ok; 1 the data had errors (gaps, missing images; truncated\n"
	      "input with --partial): the output is complete and says where; 2 usage error or\n"
	      "unusable input (not perf.data, corrupt container, truncated: no output file is\n"
	      "left; with --segment also a sysret, iret or trace-start without its target);\n"
	      "111 system error.\n",
	      f);
}

struct out_ctx {
	const char *path;
	int force;
	struct io_out out;
	int opened;
	mtev_writer *w;
	/* --segment: the records go to sd, in process */
	int seg;
	struct segdrv_opts so;
	struct segdrv sd;
	uint64_t nrec;	/* records fed */
	int seg_err;	/* the segmenter's error, on record seg_recno */
	int seg_errno;	/* errno then (a write error's reason) */
	uint64_t seg_recno;
	struct segq *q; /* the segmenter's thread, or NULL: the decoder's */
};

/* Feeds @n records to the segmenter: 0, or -1 with its error kept. */
static int seg_feed_kept(struct out_ctx *o, const struct mtev_rec *r, size_t n)
{
	size_t at = 0;
	int e = n == 1 ? seg_feed(o->sd.s, r) : seg_feed_n(o->sd.s, r, n, &at);
	if (e) {
		o->seg_err = e;
		o->seg_errno = errno;
		o->seg_recno = o->nrec + at + 1;
		return -1;
	}
	o->nrec += n;
	return 0;
}

/* How many records of @r[0..@n) are branches with time <= @limit, from the
 * first (mtev_write_upto's rule). */
static size_t run_len(const struct mtev_rec *r, size_t n, uint64_t limit)
{
	size_t m = 0;
	while (m < n && r[m].kind == MTEV_BRANCH && r[m].br.time <= limit)
		m++;
	return m;
}

/* The decoder's sink with --segment, serial: into the segmenter at once. */
static int seg_rec(void *ctx, const struct mtev_rec *r)
{
	return seg_feed_kept(ctx, r, 1);
}

static long seg_run(void *ctx, const struct mtev_rec *r, size_t n, uint64_t limit)
{
	size_t m = run_len(r, n, limit);
	return m && seg_feed_kept(ctx, r, m) < 0 ? -1 : (long)m;
}

/* With a thread of its own (the default), the segmenter takes branch
 * records in batches of SQ_RECS, SQ_N batches queued at most, while the
 * decoder goes on; any other record (rare: a gap, a map, a sample; they
 * point into the decoder's memory) waits until the queue is empty and goes
 * to the segmenter from the decoder's thread, so the order is the serial
 * one.  The segmenter is never used by both threads at once: the mutex
 * hands it over.  A sleeping segmenter is woken when SQ_WAKE batches wait
 * (or the decoder needs the queue empty, or ends): it is faster than the
 * decoder, and each wake-up costs the idle cpu a trip through the
 * hypervisor (with a wake-up per batch of 4,096 the thread cost 0.07 s of
 * CPU on the 50M trace). */
enum { SQ_RECS = 16384, SQ_N = 6, SQ_WAKE = 4, SQ_FEED = 256 };

/* A branch record as it crosses between the threads: 32 bytes, not the 80
 * of a struct mtev_rec (the copies and the cache lines that move between
 * the cpus were most of what the thread cost). */
struct qbr {
	uint32_t tid, type;
	uint64_t time, from, to;
};

/* Feeds @n queued branches, SQ_FEED at a time: 0, or -1 (seg_feed_kept). */
static int feed_qbr(struct out_ctx *o, const struct qbr *b, size_t n)
{
	struct mtev_rec r[SQ_FEED];
	for (size_t i = 0; i < n; i += SQ_FEED) {
		size_t k = n - i < SQ_FEED ? n - i : SQ_FEED;
		for (size_t j = 0; j < k; j++) {
			r[j].kind = MTEV_BRANCH;
			r[j].br.tid = b[i + j].tid;
			r[j].br.type = b[i + j].type;
			r[j].br.time = b[i + j].time;
			r[j].br.from = b[i + j].from;
			r[j].br.to = b[i + j].to;
		}
		if (seg_feed_kept(o, r, k) < 0)
			return -1;
	}
	return 0;
}

struct segq {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* any change of what follows */
	struct qbr *buf[SQ_N];
	size_t len[SQ_N];
	unsigned head, count; /* queued: buf[head], ... (count of them) */
	int busy;	      /* the thread feeds buf[head] */
	int done;	      /* no more batches will come */
	int failed;	      /* the segmenter failed (its error in o): batches are dropped */
	unsigned fill;	      /* the decoder's: the batch it fills, (head + count) % SQ_N */
	size_t nfill;	      /* records in it */
	struct out_ctx *o;
};

static void *segq_main(void *arg)
{
	struct segq *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->count && !q->done)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->count)
			break;
		int skip = q->failed;
		q->busy = 1;
		pthread_mutex_unlock(&q->mu);
		int bad = !skip && feed_qbr(q->o, q->buf[q->head], q->len[q->head]) < 0;
		pthread_mutex_lock(&q->mu);
		q->failed |= bad;
		q->busy = 0;
		q->head = (q->head + 1) % SQ_N;
		q->count--;
		pthread_cond_broadcast(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Queues the batch being filled, if any. */
static void segq_publish(struct segq *q)
{
	if (!q->nfill)
		return;
	pthread_mutex_lock(&q->mu);
	q->len[q->fill] = q->nfill;
	q->count++;
	q->nfill = 0;
	if (q->count >= SQ_WAKE)
		pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static long segq_run(void *ctx, const struct mtev_rec *r, size_t n, uint64_t limit)
{
	struct out_ctx *o = ctx;
	struct segq *q = o->q;
	size_t m = run_len(r, n, limit), i = 0;
	while (i < m) {
		if (!q->nfill) { /* a free batch to fill */
			pthread_mutex_lock(&q->mu);
			while (q->count == SQ_N && !q->failed)
				pthread_cond_wait(&q->cv, &q->mu);
			int failed = q->failed;
			q->fill = (q->head + q->count) % SQ_N;
			pthread_mutex_unlock(&q->mu);
			if (failed)
				return -1;
		}
		struct qbr *b = q->buf[q->fill] + q->nfill;
		size_t k = SQ_RECS - q->nfill < m - i ? SQ_RECS - q->nfill : m - i;
		for (size_t j = 0; j < k; j++, i++) {
			b[j].tid = r[i].br.tid;
			b[j].type = r[i].br.type;
			b[j].time = r[i].br.time;
			b[j].from = r[i].br.from;
			b[j].to = r[i].br.to;
		}
		q->nfill += k;
		if (q->nfill == SQ_RECS)
			segq_publish(q);
	}
	return (long)m;
}

static int segq_rec(void *ctx, const struct mtev_rec *r)
{
	struct out_ctx *o = ctx;
	struct segq *q = o->q;
	segq_publish(q);
	pthread_mutex_lock(&q->mu);
	pthread_cond_broadcast(&q->cv); /* the segmenter may sleep on fewer than SQ_WAKE */
	while ((q->count || q->busy) && !q->failed)
		pthread_cond_wait(&q->cv, &q->mu);
	int failed = q->failed;
	pthread_mutex_unlock(&q->mu);
	return failed ? -1 : seg_feed_kept(o, r, 1);
}

/* Starts the segmenter's thread; NULL when it cannot (then serial). */
static struct segq *segq_start(struct out_ctx *o)
{
	struct segq *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->o = o;
	for (unsigned i = 0; i < SQ_N; i++)
		if (!(q->buf[i] = malloc(SQ_RECS * sizeof *q->buf[i])))
			goto fail;
	if (pthread_mutex_init(&q->mu, NULL))
		goto fail;
	if (pthread_cond_init(&q->cv, NULL)) {
		pthread_mutex_destroy(&q->mu);
		goto fail;
	}
	if (pthread_create(&q->th, NULL, segq_main, q)) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		goto fail;
	}
	return q;
fail:
	for (unsigned i = 0; i < SQ_N; i++)
		free(q->buf[i]);
	free(q);
	return NULL;
}

/* Feeds what is queued and ends the thread. */
static void segq_stop(struct segq *q)
{
	segq_publish(q);
	pthread_mutex_lock(&q->mu);
	q->done = 1;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->th, NULL);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	for (unsigned i = 0; i < SQ_N; i++)
		free(q->buf[i]);
	free(q);
}

static int open_out(void *ctx, uint32_t flags, mtev_writer **w)
{
	struct out_ctx *o = ctx;
	int err;
	drv_out_open(&o->out, o->path, 1, o->force);
	o->opened = 1;
	if (o->seg) /* mt-segment's header: spans, the decoder's flags kept */
		flags = MTEV_F_SPANS | (flags & (MTEV_F_SORTED | MTEV_F_SAMPLING | MTEV_F_SYMBOLS));
	o->w = mtev_writer_alloc(o->out.fd,
				 !o->seg ? "mt-decode"
				 : o->so.stitch ? "mt-decode --stitch" : "mt-decode --segment",
				 flags, &err);
	if (!o->w)
		return -1;
	if (o->seg)
		segdrv_open(&o->sd, &o->so, o->w);
	*w = o->w;
	return 0;
}

/* The progress line on a terminal (ptd_options.progress): at its first
 * call, then at most four times a second (mt_progress: ended before any
 * diagnostic and at the end). */
static void progress_cb(void *ctx, uint64_t done, uint64_t total)
{
	static struct timespec last;
	(void)ctx;
	if (!drv_progress_due(&last))
		return;
	int ms = total < 1000000000u;
	mt_progress("%3.0f%% of the recording (%.*f of %.*f %s)",
		    total ? 100.0 * (double)done / (double)total : 100.0, ms ? 1 : 3,
		    (double)done / (ms ? 1e6 : 1e9), ms ? 1 : 3, (double)total / (ms ? 1e6 : 1e9),
		    ms ? "ms" : "s");
}

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	mt_warn("%s", msg);
}

static uint32_t parse_id(const char *s, const char *opt)
{
	char *e;
	errno = 0;
	unsigned long v = strtoul(s, &e, 0);
	if (errno || e == s || *e || s[0] == '-' || v > UINT32_MAX)
		drv_usage("bad %s '%s' (a thread or process id)", opt, s);
	return (uint32_t)v;
}

/* Exits for the decoder's error @ret: "unable to read IN: MESSAGE" for an
 * unusable input, the message alone for the rest. */
static void input_failed(int ret, const char *in, const char *msg) __attribute__((noreturn));
static void input_failed(int ret, const char *in, const char *msg)
{
	if (ret == -PTD_EINPUT) {
		/* the decoder names the input itself ("NAME: ...", "NAME is ..."):
		 * the driver's "unable to read NAME: " says it once */
		const char *name = in && strcmp(in, "-") ? in : "stdin";
		size_t k = strlen(name);
		if (!strncmp(msg, name, k) && !strncmp(msg + k, ": ", 2))
			msg += k + 2;
		else if (!strncmp(msg, name, k) && !strncmp(msg + k, " is ", 4))
			msg += k + 4;
		else if (!strncmp(msg, "perf.data: ", 11))
			msg += 11;
		drv_input_error(MT_EXIT_USAGE, in, "%s", msg);
	}
	mt_fatal(ret == -PTD_EUSAGE ? MT_EXIT_USAGE : MT_EXIT_SYS, "%s", msg);
}

enum { O_IMAGES = 256, O_NOIMG, O_PT, O_IMAGE, O_CPU, O_PID, O_TID, O_RECORDS,
       O_PARTIAL, O_DECODER, O_RESYNC, O_NOROOT, O_CHUNK, O_PARFB,
       O_PARANS, O_PTTIME, O_SEGMENT, O_SEGSERIAL };

/* The options with a value that set how PT is decoded: --cpu, --decoder,
 * --chunk-bytes, -j. */
static void decoder_opt(int c, const char *arg, struct ptd_options *opts)
{
	char *e;
	switch (c) {
	case O_CPU:
		if (sscanf(arg, "%d/%d/%d", &opts->cpu_family, &opts->cpu_model,
			   &opts->cpu_stepping) < 2 ||
		    opts->cpu_family <= 0)
			drv_usage("bad --cpu %s (want FAMILY/MODEL[/STEPPING])", arg);
		break;
	case O_DECODER:
		opts->walk_qry = 0;
		if (!strcmp(arg, "walk"))
			opts->walk = 1;
		else if (!strcmp(arg, "walk-only"))
			opts->walk = 2;
		else if (!strcmp(arg, "walk-qry"))
			opts->walk = 1, opts->walk_qry = 1;
		else if (!strcmp(arg, "walk-check"))
			opts->walk = 1, opts->walk_qry = 2;
		else if (!strcmp(arg, "libipt"))
			opts->walk = 0;
		else
			drv_usage("bad --decoder %s (want libipt, walk, walk-only, walk-qry or "
				  "walk-check)", arg);
		break;
	case O_CHUNK: {
		unsigned long long n = strtoull(arg, &e, 0);
		if (e == arg || *e || !n)
			drv_usage("bad --chunk-bytes %s", arg);
		opts->chunk_bytes = n;
		break;
	}
	default: { /* -j */
		long n = strtol(arg, &e, 10);
		if (e == arg || *e || n < 1 || n > 256)
			drv_usage("bad --jobs %s (want 1 to 256)", arg);
		opts->jobs = (int)n;
		break;
	}
	}
}

/* --image FILE[:OFFSET[:SIZE]]@VADDR, appended to *@v. */
static void add_image(struct ptd_image_spec **v, size_t *n, const char *arg)
{
	struct ptd_image_spec *w = realloc(*v, (*n + 1) * sizeof *w);
	if (!w)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	*v = w;
	if (ptd_parse_image_spec(arg, &w[*n]) < 0)
		drv_usage("bad --image %s (want FILE[:OFFSET[:SIZE]]@VADDR)", arg);
	(*n)++;
}

/* Exits for the segmenter's error on the decoded record oc->seg_recno (the
 * number it has in mt-decode's output read by mt-segment). */
static void seg_failed(struct out_ctx *oc) __attribute__((noreturn));
static void seg_failed(struct out_ctx *oc)
{
	if (oc->seg_err == -SEG_EBRANCH)
		mt_fatal(MT_EXIT_USAGE, "decoded record %llu: %s with to=0: %s",
			 (unsigned long long)oc->seg_recno,
			 mtev_branch_name(seg_error_detail(oc->sd.s)), seg_strerror(oc->seg_err));
	if (oc->seg_err == -SEG_EKIND || oc->seg_err == -SEG_EORDER)
		mt_fatal(MT_EXIT_SYS, "decoded record %llu: %s (a decoder bug)",
			 (unsigned long long)oc->seg_recno, seg_strerror(oc->seg_err));
	errno = oc->seg_errno; /* maybe the other thread's */
	segdrv_fail(&oc->sd, &oc->out, oc->path, oc->seg_err);
}

/* --stats: the counts, one line, and one more for each option used. */
static void print_stats(const struct ptd_stats *st)
{
	fprintf(stderr,
		"mt-decode: records=%" PRIu64 " aux_bytes=%" PRIu64 " blocks=%" PRIu64
		" instructions=%" PRIu64 " branches=%" PRIu64 " gaps=%" PRIu64
		" samples=%" PRIu64 " triggers=%" PRIu64 " unwound=%" PRIu64,
		st->records, st->aux_bytes, st->blocks, st->insns, st->branches, st->gaps,
		st->samples, st->triggers, st->unwound); /* unwound: samples from their stack copy */
	if (st->roots) /* root samples beside fp ones: whole, fp samples joined */
		fprintf(stderr, " roots=%" PRIu64 " roots_whole=%" PRIu64 " rooted=%" PRIu64,
			st->roots, st->roots_whole, st->rooted);
	fputc('\n', stderr);
	if (st->resync_tries)
		fprintf(stderr,
			"mt-decode: resync before a PSB: tried=%" PRIu64 " done=%" PRIu64
			" bytes-skipped=%" PRIu64 "\n",
			st->resync_tries, st->resyncs, st->resync_skipped);
	if (st->par_chunks)
		fprintf(stderr,
			"mt-decode: parallel: chunks=%" PRIu64 " spliced=%" PRIu64
			" fallbacks=%" PRIu64 " bodies=%" PRIu64 " body-records=%" PRIu64 "\n",
			st->par_chunks, st->par_spliced, st->par_fallbacks, st->par_bodies,
			st->par_body_recs);
}

int main(int argc, char **argv)
{
	static const struct option own[] = {
		{"output", required_argument, NULL, 'o'},
		{"input", required_argument, NULL, 'i'},
		{"force", no_argument, NULL, 'f'},
		{"images", required_argument, NULL, O_IMAGES},
		{"symfs", required_argument, NULL, O_IMAGES},
		{"buildid-dir", required_argument, NULL, O_IMAGES},
		{"no-images", no_argument, NULL, O_NOIMG},
		{"partial", no_argument, NULL, O_PARTIAL},
		{"resync", no_argument, NULL, O_RESYNC},
		{"pt", required_argument, NULL, O_PT},
		{"image", required_argument, NULL, O_IMAGE},
		{"cpu", required_argument, NULL, O_CPU},
		{"pid", required_argument, NULL, O_PID},
		{"pt-timing", required_argument, NULL, O_PTTIME},
		{"tid", required_argument, NULL, O_TID},
		{"records", no_argument, NULL, O_RECORDS},
		{"decoder", required_argument, NULL, O_DECODER},
		{"no-root-join", no_argument, NULL, O_NOROOT},
		{"stats", no_argument, NULL, 's'},
		{"jobs", required_argument, NULL, 'j'},
		{"chunk-bytes", required_argument, NULL, O_CHUNK},
		{"par-fallback", no_argument, NULL, O_PARFB},
		{"par-answers", no_argument, NULL, O_PARANS},
		{"help", no_argument, NULL, 'h'},
		{"segment", no_argument, NULL, O_SEGMENT},
		{"segment-serial", no_argument, NULL, O_SEGSERIAL},
	};
	enum { NOWN = sizeof own / sizeof own[0] };
	struct option lo[NOWN + 16];
	memcpy(lo, own, sizeof own);
	memcpy(lo + NOWN, segdrv_longopts, (segdrv_nlongopts() + 1) * sizeof *lo);
	static struct ptd_options opts;
	static const struct ptd_sink sink = {seg_rec, seg_run, NULL};
	static const struct ptd_sink qsink = {segq_rec, segq_run, NULL};
	struct ptd_sink oc_sink;
	int seg_serial = 0;
	struct ptd_stats st;
	struct out_ctx oc;
	struct ptd_image_spec *images = NULL;
	size_t nimages = 0;
	const char *pt = NULL, *in = NULL;
	int c, records = 0, stats = 0, pttime = 0, fd, ret;

	drv_init(argc, argv);
	memset(&oc, 0, sizeof oc);
	segdrv_opts_init(&oc.so);
	/* serial by default: -j 2 costs 1.4-1.5x the CPU and, measured on
	 * this 2-cpu machine, is not faster in wall time yet (docs/decode.md) */
	opts.jobs = 1;
	opts.walk = -1; /* unset: the walk, or libipt's parallel path with -j (below) */
	opts.warn = warn_cb;
	if (io_progress_enabled())
		opts.progress = progress_cb;
	while ((c = getopt_long(argc, argv, ":i:o:fshj:", lo, NULL)) != -1) {
		switch (c) {
		case 'i':
			in = optarg;
			break;
		case 'o':
			oc.path = optarg;
			break;
		case 'f':
			oc.force = 1;
			break;
		case O_IMAGES:
			if (img_dirs_add(optarg) < 0)
				mt_fatal(MT_EXIT_SYS, "out of memory");
			break;
		case O_PARTIAL:
			opts.partial = 1;
			break;
		case O_RESYNC:
			opts.resync = 1;
			break;
		case O_NOIMG:
			opts.no_images = 1;
			break;
		case O_PT:
			pt = optarg;
			break;
		case O_IMAGE:
			add_image(&images, &nimages, optarg);
			break;
		case O_PTTIME: {
			char x;
			if (sscanf(optarg, "%u,%u,%u,%u%c", &opts.raw_mtc_freq, &opts.raw_ctc_num,
				   &opts.raw_ctc_den, &opts.raw_nom_freq, &x) != 4 ||
			    opts.raw_mtc_freq > 15 || opts.raw_nom_freq > 255)
				drv_usage("bad --pt-timing %s (want MTC,EBX,EAX,NOM)", optarg);
			pttime = 1;
			break;
		}
		case O_PID:
			opts.raw_pid = parse_id(optarg, "--pid");
			break;
		case O_TID:
			opts.raw_tid = parse_id(optarg, "--tid");
			break;
		case O_RECORDS:
			records = 1;
			break;
		case O_NOROOT:
			opts.no_root_join = 1;
			break;
		case 's':
			stats = 1;
			break;
		case O_PARFB:
			opts.par_fallback = 1;
			break;
		case O_PARANS:
			opts.par_answers = 1;
			break;
		case O_CPU:
		case O_DECODER:
		case O_CHUNK:
		case 'j':
			decoder_opt(c, optarg, &opts);
			break;
		case O_SEGMENT:
			oc.seg = 1;
			break;
		case O_SEGSERIAL:
			seg_serial = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			if (!segdrv_opt(&oc.so, c, optarg))
				drv_getopt_error(c, argv);
		}
	}
	in = drv_input(argc, argv, in);
	if (oc.so.stitch)
		oc.seg = 1;
	if ((oc.so.any || seg_serial) && !oc.seg)
		drv_usage("mt-segment's options and --segment-serial need --segment or --stitch");
	if (oc.seg && records)
		drv_usage("--segment and --stitch do not go with --records");
	if (oc.seg) {
		segdrv_cache(&oc.so);
		oc_sink = sink;
		if (!seg_serial && (oc.q = segq_start(&oc)))
			oc_sink = qsink;
		oc_sink.ctx = &oc;
		opts.sink = &oc_sink;
	}
	if (nimages && !pt)
		drv_usage("--image needs --pt");
	if (pttime && !pt)
		drv_usage("--pt-timing needs --pt");
	if (pt && in)
		drv_usage("--pt and a perf.data file are exclusive");
	opts.images = images;
	opts.nimages = nimages;
	/* the cached walk by default (same output as libipt's path, checked
	 * against it by fuzz_ptwalk: docs/decode.md); with -j N, libipt's
	 * path, the one decoded in parallel */
	if (opts.walk < 0)
		opts.walk = opts.jobs == 1;

	if (pt) {
		close(drv_open_in(pt)); /* a missing file or a directory: said the same way */
		ret = ptd_decode_raw(pt, open_out, &oc, &opts, &st);
	} else {
		opts.input_name = in && strcmp(in, "-") ? in : "stdin";
		fd = drv_open_in(in);
		if (records) {
			ret = ptd_list_records(fd, stdout, &opts);
			if (fflush(stdout) != 0)
				drv_write_failed(NULL, "stdout", NULL);
			if (ret < 0)
				input_failed(ret, in, opts.errmsg);
			return 0;
		}
		ret = ptd_decode_perf(fd, open_out, &oc, &opts, &st);
	}
	mt_progress_end();
	for (size_t i = 0; i < nimages; i++) /* ptd_parse_image_spec's copies */
		free((char *)images[i].file);
	if (oc.q) { /* the segmenter's thread has the records it was given */
		segq_stop(oc.q);
		oc.q = NULL;
	}
	if (oc.seg_err)
		seg_failed(&oc);
	if (ret < 0) {
		if (ret == -PTD_EOUTPUT)
			drv_write_failed(oc.opened ? &oc.out : NULL, oc.path, opts.errmsg);
		input_failed(ret, pt ? pt : in, opts.errmsg);
	}
	if (oc.seg)
		segdrv_finish(&oc.sd, &oc.out, oc.path);
	int e = mtev_writer_finish(oc.w);
	if (e < 0)
		drv_write_failed(&oc.out, oc.path, e == -MTEV_EIO ? NULL : mtev_strerror(-e));
	drv_out_commit(&oc.out, oc.path);
	if (stats) {
		print_stats(&st);
		if (opts.walk_qry == 2) /* what was checked (not what libipt's stepper decoded) */
			fprintf(stderr, "mt-decode: walk-check: checked=%" PRIu64 " trace segments\n",
				st.walk_checked);
	}
	if (oc.seg) {
		segdrv_report(&oc.sd, stats, "mt-decode: segment");
		segdrv_free(&oc.sd);
	}
	mtev_writer_free(oc.w);
	free(images);
	return st.degraded || st.warnings ? MT_EXIT_DEGRADED : MT_EXIT_OK;
}
