/* mt-summary: what a person wants to see before opening a viewer — per
 * thread, the calls live at the trigger (the stack) and the longest calls of
 * the window, with durations and source locations.  Reads the stages' MTEV
 * (symbolize.mt: spans, their names and symbol records), not the trace file.
 *
 * Two passes over the file: the first finds the trigger and each thread's
 * extent, the second keeps, per thread, the spans live at that thread's
 * moment (an array by depth) and the N longest complete calls (a min-heap), so
 * memory is the threads, the symbols and N, not the spans. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver.h"
#include "err.h"
#include "mtev.h"

static const char usage_text[] =
	"usage: mt-summary [options] FILE|DIR\n"
	"Prints, per thread of a span stream (FILE, or DIR/symbolize.mt of an mt capture\n"
	"or `make trace` directory), the calls live at the trigger — the stack, outermost\n"
	"first — and the N longest calls that began and ended in the traced window, with\n"
	"durations and source locations (from mt-symbolize's symbol records).  With no\n"
	"trigger record (a snapshot at exit or Ctrl-C), or on threads whose trace ends\n"
	"before it, the stack is the one at the end of the thread's trace.  When\n"
	"several triggers fired (--multi-snapshot), the last one counts.\n"
	"\n"
	"  -n, --top N   longest calls per thread (default 5; 0: none)\n"
	"  -t, --tsv     machine-readable lines instead:\n"
	"                  trigger TID TIME SYMBOL\n"
	"                  stack TID DEPTH FUNC INLINE NAME   (at the thread's moment)\n"
	"                  top TID DURATION BEGIN DEPTH FUNC NAME\n"
	"                (tab-separated; FUNC in hex, INLINE 0/1, times in ns)\n"
	"  -h, --help    this help\n"
	"\n"
	"Exit status: 0 ok; 2 usage or unusable input (not MTEV, truncated, corrupt);\n"
	"111 system error.\n";

struct sym {
	uint64_t addr;
	char *name, *file; /* the physical function's name and file:line for an
			      entry; the innermost frame's for a call site */
	uint32_t line;
	char *inner_file;
	uint32_t inner_line;
};

struct kept { /* a span kept for printing */
	uint64_t begin, end, func, callsite;
	uint32_t depth, flags;
	char *name;
};

struct thr {
	uint32_t tid, pid;
	char *name;
	uint64_t first, last; /* extent of the thread's spans */
	uint64_t nspans;
	uint64_t at;	      /* its moment: min(trigger, last) */
	struct kept *stack;   /* by depth; .name NULL: none */
	uint32_t nstack;
	struct kept *top;     /* min-heap on duration */
	uint32_t ntop;
};

/* deeper than any real stack (Linux's default 8 MiB stack holds ~260k of the
 * smallest frames): a corrupt depth is refused, not allocated */
#define MAX_DEPTH (1u << 20)

static struct thr *thr;
static size_t nthr;
static struct sym *syms;
static size_t nsyms, capsyms;
static unsigned topn = 5;

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		mt_fatal(MT_EXIT_SYS, "out of memory");
	return p;
}

static char *xstrndup(const char *p, size_t n)
{
	char *s = xrealloc(NULL, n + 1);
	if (n)
		memcpy(s, p, n);
	s[n] = 0;
	return s;
}

static struct thr *thr_get(uint32_t tid)
{
	static size_t last;
	if (last < nthr && thr[last].tid == tid)
		return &thr[last];
	for (size_t i = 0; i < nthr; i++)
		if (thr[i].tid == tid)
			return &thr[last = i];
	thr = xrealloc(thr, (nthr + 1) * sizeof *thr);
	memset(&thr[nthr], 0, sizeof *thr);
	thr[nthr].tid = tid;
	thr[nthr].first = UINT64_MAX;
	last = nthr;
	return &thr[nthr++];
}

static int sym_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct sym *)a)->addr, y = ((const struct sym *)b)->addr;
	return x < y ? -1 : x > y;
}

static const struct sym *sym_find(uint64_t addr)
{
	struct sym key = {.addr = addr};
	return addr ? bsearch(&key, syms, nsyms, sizeof *syms, sym_cmp) : NULL;
}

static void kept_set(struct kept *k, const struct mtev_rec *r)
{
	free(k->name);
	k->begin = r->span.begin;
	k->end = r->span.end;
	k->func = r->span.func;
	k->callsite = r->span.callsite;
	k->depth = r->span.depth;
	k->flags = r->span.flags;
	k->name = xstrndup(r->span.name.p, r->span.name.len);
}

static uint64_t dur(const struct kept *k)
{
	return k->end - k->begin;
}

static void heap_down(struct kept *h, uint32_t n, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && dur(&h[l]) < dur(&h[m]))
			m = l;
		if (r < n && dur(&h[r]) < dur(&h[m]))
			m = r;
		if (m == i)
			return;
		struct kept t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void top_offer(struct thr *t, const struct mtev_rec *r)
{
	uint64_t d = r->span.end - r->span.begin;
	if (!topn)
		return;
	if (!t->top)
		t->top = xrealloc(NULL, topn * sizeof *t->top), memset(t->top, 0, topn * sizeof *t->top);
	if (t->ntop < topn) {
		/* append, then sift up */
		uint32_t i = t->ntop++;
		kept_set(&t->top[i], r);
		while (i && dur(&t->top[(i - 1) / 2]) > dur(&t->top[i])) {
			struct kept x = t->top[i];
			t->top[i] = t->top[(i - 1) / 2];
			t->top[(i - 1) / 2] = x;
			i = (i - 1) / 2;
		}
	} else if (d > dur(&t->top[0])) {
		kept_set(&t->top[0], r);
		heap_down(t->top, t->ntop, 0);
	}
}

static void die_read(const char *path, mtev_reader *r, int e)
{
	drv_read_failed(path, r, e, NULL);
}

/* Pass 1: threads, processes, the last trigger, each thread's extent. */
static int pass1(int fd, const char *path, struct mtev_rec *trig, char **trig_sym)
{
	int e;
	mtev_reader *r = drv_reader(path, fd);
	if (!(mtev_reader_header(r)->flags & MTEV_F_SPANS))
		drv_input_error(MT_EXIT_USAGE, path,
				"no spans in this stream (producer %s): give symbolize.mt or stitch.mt",
				mtev_reader_header(r)->producer);
	int have = 0;
	struct mtev_rec rec;
	while ((e = mtev_read(r, &rec)) > 0) {
		switch (rec.kind) {
		case MTEV_THREAD: {
			struct thr *t = thr_get(rec.thread.tid);
			t->pid = rec.thread.pid;
			if (rec.thread.name.len) {
				free(t->name);
				t->name = xstrndup(rec.thread.name.p, rec.thread.name.len);
			}
			break;
		}
		case MTEV_TRIGGER:
			if (!have || rec.trigger.time >= trig->trigger.time) {
				*trig = rec;
				free(*trig_sym);
				*trig_sym = xstrndup(rec.trigger.symbol.p, rec.trigger.symbol.len);
				have = 1;
			}
			break;
		case MTEV_SPAN: {
			struct thr *t = thr_get(rec.span.tid);
			if (rec.span.begin < t->first)
				t->first = rec.span.begin;
			if (rec.span.end > t->last)
				t->last = rec.span.end;
			t->nspans++;
			break;
		}
		case MTEV_SYMBOL: {
			if (nsyms == capsyms)
				syms = xrealloc(syms, (capsyms = capsyms ? 2 * capsyms : 256) * sizeof *syms);
			struct sym *s = &syms[nsyms++];
			memset(s, 0, sizeof *s);
			s->addr = rec.symbol.addr;
			if (rec.symbol.nframes) {
				const struct mtev_frame *ph = &rec.symbol.frames[rec.symbol.nframes - 1];
				const struct mtev_frame *in = &rec.symbol.frames[0];
				s->name = xstrndup(ph->name.p, ph->name.len);
				s->file = xstrndup(ph->file.p, ph->file.len);
				s->line = ph->line;
				s->inner_file = xstrndup(in->file.p, in->file.len);
				s->inner_line = in->line;
			}
			break;
		}
		default:
			break;
		}
	}
	if (e < 0)
		die_read(path, r, e);
	mtev_reader_free(r);
	qsort(syms, nsyms, sizeof *syms, sym_cmp);
	return have;
}

/* Pass 2: the stack at each thread's moment, the longest complete calls. */
static void pass2(int fd, const char *path)
{
	int e;
	mtev_reader *r = drv_reader(path, fd);
	struct mtev_rec rec;
	while ((e = mtev_read(r, &rec)) > 0) {
		if (rec.kind != MTEV_SPAN)
			continue;
		struct thr *t = thr_get(rec.span.tid);
		uint64_t at = t->at;
		if (rec.span.depth >= MAX_DEPTH)
			mt_fatal(MT_EXIT_USAGE, "%s: a span of depth %" PRIu32 " (more than %u frames deep) at byte %" PRIu64,
				 path, rec.span.depth, MAX_DEPTH, mtev_reader_offset(r));
		/* live at its moment: begun by then, and not yet left — or left
		 * only by the end of the trace (open-at-end) */
		if (rec.span.begin <= at &&
		    (at < rec.span.end || (at == rec.span.end && (rec.span.flags & MTEV_SPAN_OPEN_AT_END)))) {
			uint32_t d = rec.span.depth;
			if (d >= t->nstack) {
				t->stack = xrealloc(t->stack, ((size_t)d + 1) * sizeof *t->stack);
				memset(&t->stack[t->nstack], 0, ((size_t)d + 1 - t->nstack) * sizeof *t->stack);
				t->nstack = d + 1;
			}
			/* one live span per depth; a later one (a child of
			 * a later parent) replaces an earlier */
			if (!t->stack[d].name || rec.span.begin >= t->stack[d].begin)
				kept_set(&t->stack[d], &rec);
		}
		if (!(rec.span.flags & (MTEV_SPAN_INFERRED_START | MTEV_SPAN_OPEN_AT_END)))
			top_offer(t, &rec);
	}
	if (e < 0)
		die_read(path, r, e);
	mtev_reader_free(r);
}

static const char *span_name(const struct kept *k, char *buf, size_t n)
{
	if (k->name && k->name[0])
		return k->name;
	const struct sym *s = sym_find(k->func);
	if (s && s->name && s->name[0])
		return s->name;
	snprintf(buf, n, "0x%" PRIx64, k->func);
	return buf;
}

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* "demo.c:41, called from demo.c:70" */
static const char *span_where(const struct kept *k, char *buf, size_t n)
{
	const struct sym *f = sym_find(k->func), *c = sym_find(k->callsite);
	size_t o = 0;
	buf[0] = 0;
	if (f && f->file && f->file[0])
		o += (size_t)snprintf(buf + o, n - o, "%s:%u", base(f->file), f->line);
	if (o < n && c && c->inner_file && c->inner_file[0])
		o += (size_t)snprintf(buf + o, n - o, "%scalled from %s:%u", o ? ", " : "", base(c->inner_file), c->inner_line);
	if (!buf[0] && (k->flags & MTEV_SPAN_INLINE))
		snprintf(buf, n, "inlined");
	return buf;
}

static const char *fmt_dur(uint64_t ns, char *buf, size_t n)
{
	if (ns >= 1000000000)
		snprintf(buf, n, "%.3f s", ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, n, "%.3f ms", ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, n, "%.3f us", ns / 1e3);
	else
		snprintf(buf, n, "%" PRIu64 " ns", ns);
	return buf;
}

static int top_cmp(const void *a, const void *b)
{
	uint64_t x = dur(a), y = dur(b);
	if (x != y)
		return x > y ? -1 : 1;
	uint64_t p = ((const struct kept *)a)->begin, q = ((const struct kept *)b)->begin;
	return p < q ? -1 : p > q;
}

/* The stream to summarize: FILE, or DIR/symbolize.mt (into @path); an open
 * descriptor of a regular file (it is read twice). */
static int open_input(const char *arg, char *path, size_t n)
{
	struct stat st;
	if (stat(arg, &st) < 0)
		mt_fatal(drv_exit_errno(errno), "unable to open %s: %s", arg, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		if ((size_t)snprintf(path, n, "%s/symbolize.mt", arg) >= n)
			mt_fatal(MT_EXIT_USAGE, "unable to open %s: path too long", arg);
	} else {
		snprintf(path, n, "%s", arg);
	}
	int fd = drv_open_in(path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		drv_input_error(MT_EXIT_USAGE, path, "not a regular file (the summary reads it twice)");
	return fd;
}

int main(int argc, char **argv)
{
	drv_init(argc, argv);
	static const struct option opts[] = {
		{"top", required_argument, 0, 'n'},
		{"tsv", no_argument, 0, 't'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	int tsv = 0, c;
	while ((c = getopt_long(argc, argv, ":n:th", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'n': {
			errno = 0;
			unsigned long v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || v > 100000)
				drv_usage("--top: '%s' is not a count (0..100000)", optarg);
			topn = (unsigned)v;
			break;
		}
		case 't': tsv = 1; break;
		case 'h': fputs(usage_text, stdout); return 0;
		default: drv_getopt_error(c, argv);
		}
	}
	if (optind != argc - 1)
		drv_usage(optind < argc ? "expected one FILE or DIR" : "missing FILE or DIR");
	char path[4096];
	int fd = open_input(argv[optind], path, sizeof path);

	struct mtev_rec trig;
	char *trig_sym = NULL;
	memset(&trig, 0, sizeof trig);
	int have_trig = pass1(fd, path, &trig, &trig_sym);
	for (size_t i = 0; i < nthr; i++)
		thr[i].at = have_trig && trig.trigger.time < thr[i].last ? trig.trigger.time : thr[i].last;
	if (lseek(fd, 0, SEEK_SET) < 0)
		drv_input_error(MT_EXIT_SYS, path, "lseek: %s", strerror(errno));
	pass2(fd, path);
	close(fd);

	uint64_t t0 = UINT64_MAX, t1 = 0;
	for (size_t i = 0; i < nthr; i++)
		if (thr[i].nspans) {
			if (thr[i].first < t0)
				t0 = thr[i].first;
			if (thr[i].last > t1)
				t1 = thr[i].last;
		}
	char nb[64], db[64], wb[1024];
	if (tsv) {
		if (have_trig)
			printf("trigger\t%" PRIu32 "\t%" PRIu64 "\t%s\n", trig.trigger.tid, trig.trigger.time, trig_sym);
	} else if (!t1) {
		printf("no spans: nothing was traced\n");
	} else {
		printf("traced window: %s", fmt_dur(t1 - t0, db, sizeof db));
		if (have_trig) {
			printf("; trigger %s on thread %" PRIu32 " at +%s", trig_sym[0] ? trig_sym : "(unnamed)",
			       trig.trigger.tid, fmt_dur(trig.trigger.time > t0 ? trig.trigger.time - t0 : 0, db, sizeof db));
		} else {
			printf("; no trigger: stacks at the end of each thread's trace");
		}
		printf("\n");
	}
	for (size_t i = 0; i < nthr; i++) {
		struct thr *t = &thr[i];
		if (!t->nspans)
			continue;
		if (!tsv) {
			printf("\nthread %" PRIu32 "%s%s (pid %" PRIu32 "): %" PRIu64 " spans, +%s", t->tid,
			       t->name ? " " : "", t->name ? t->name : "", t->pid, t->nspans,
			       fmt_dur(t->first - t0, db, sizeof db));
			printf(" .. +%s\n", fmt_dur(t->last - t0, db, sizeof db));
			int at_trig = have_trig && t->at == trig.trigger.time;
			if (have_trig && trig.trigger.time < t->first)
				printf("  (began after the trigger) stack at its end:\n");
			else
				printf("  stack %s, outermost first:\n",
				       at_trig ? "at the trigger" : "at the end of its trace");
		}
		uint32_t shown = 0;
		for (uint32_t d = 0; d < t->nstack; d++) {
			const struct kept *k = &t->stack[d];
			if (!k->name)
				continue;
			shown++;
			if (tsv)
				printf("stack\t%" PRIu32 "\t%" PRIu32 "\t%" PRIx64 "\t%d\t%s\n", t->tid, d, k->func,
				       !!(k->flags & MTEV_SPAN_INLINE), span_name(k, nb, sizeof nb));
			else
				printf("  %4" PRIu32 "  %-32s  %s\n", d, span_name(k, nb, sizeof nb),
				       span_where(k, wb, sizeof wb));
		}
		if (!tsv && !shown)
			printf("        (none)\n");
		qsort(t->top, t->ntop, sizeof *t->top, top_cmp);
		if (!tsv && t->ntop)
			printf("  longest calls that began and ended in the window:\n");
		for (uint32_t j = 0; j < t->ntop; j++) {
			const struct kept *k = &t->top[j];
			if (tsv)
				printf("top\t%" PRIu32 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu32 "\t%" PRIx64 "\t%s\n", t->tid,
				       dur(k), k->begin, k->depth, k->func, span_name(k, nb, sizeof nb));
			else
				printf("  %12s  %-32s  %s (at +%s)\n", fmt_dur(dur(k), db, sizeof db),
				       span_name(k, nb, sizeof nb), span_where(k, wb, sizeof wb),
				       fmt_dur(k->begin - t0, nb + 32, sizeof nb - 32));
		}
	}
	if (fflush(stdout) == EOF || ferror(stdout))
		drv_write_failed(NULL, NULL, NULL);
	return 0;
}
