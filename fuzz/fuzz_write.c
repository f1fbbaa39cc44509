/* libFuzzer target: mt-write's library (libcommon/tracewrite.c, fxt.c) fed
 * arbitrary span streams.
 *
 * Input: an MTEV stream (when it starts with the MTEV magic: the records
 * before the first error are fed, as mt-write --partial does), or else bytes
 * that a small generator turns into records: spans with any tid, depth and
 * times (backwards, overlapping, orphaned, zero-length, end = 2^64 - 1), many
 * threads (to evict FXT thread slots), names with any bytes (invalid UTF-8,
 * quotes, NULs) and names longer than the FXT and JSON limits, symbols with
 * inline frames, processes, threads, gaps and triggers, and records mt-write
 * ignores.  The same records are written as FXT and as JSON, and each output
 * is checked:
 *  - JSON: parses (jansson); per thread the B/E events balance, an E is never
 *    before its B, and times never go back;
 *  - FXT: the magic record first, then records whose sizes tile the output
 *    exactly; every string and thread reference is registered before use;
 *    per thread, begin/end events balance, times never go back, and a
 *    complete event ends before the next event on its thread begins.
 * tw_record and tw_finish must not fail (the input decides what is dropped,
 * never whether the writer works).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memfd.h"
#include "mtev_text.h"
#include "mtev.h"
#include "tracewrite.h"
#include "zsink.h"

/* ---- the record generator ---- */

struct src {
	const uint8_t *p, *e;
};

static unsigned g8(struct src *s)
{
	return s->p < s->e ? *s->p++ : 0;
}

static uint64_t g64(struct src *s)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | g8(s);
	return v;
}

static char longbuf[20000];

/* A string: bytes of the input itself (any bytes), or a long run of 2- and
 * 3-byte UTF-8 sequences past every length limit. */
static struct mtev_str gstr(struct src *s)
{
	struct mtev_str r = {NULL, 0};
	unsigned n = g8(s);
	if (n >= 250) {
		r.p = longbuf + (n & 3);
		r.len = 7990 + (uint32_t)g8(s) * 47; /* <= sizeof longbuf - 3 */
		return r;
	}
	n %= 24;
	if (n > (size_t)(s->e - s->p))
		n = (unsigned)(s->e - s->p);
	r.p = (const char *)s->p;
	r.len = n;
	s->p += n;
	return r;
}

static struct mtev_frame frames[4];

/* Next generated record into *r; 0 at the end of the input. */
static int gen(struct src *s, struct mtev_rec *r, uint64_t *tbase)
{
	if (s->p >= s->e)
		return 0;
	unsigned op = g8(s) % 12;
	memset(r, 0, sizeof *r);
	switch (op) {
	case 0: case 1: case 2: case 3: case 4: {
		unsigned x = g8(s);
		r->kind = MTEV_SPAN;
		r->span.tid = op == 4 ? (uint32_t)(g8(s) << 8 | g8(s)) : 1 + x % 4;
		r->span.depth = g8(s) % 10;
		unsigned d = g8(s);
		if (d & 0x80)
			*tbase -= d & 0x7f;
		else
			*tbase += d;
		r->span.begin = *tbase;
		unsigned l = g8(s);
		r->span.end = l == 255 ? UINT64_MAX : l > 240 ? r->span.begin + g64(s) : r->span.begin + l;
		if (r->span.end < r->span.begin) /* mtev_read refuses a wrapped interval */
			r->span.end = UINT64_MAX;
		r->span.func = 0x400000 + (g8(s) % 16) * 0x10;
		r->span.callsite = g8(s);
		r->span.flags = (g8(s) | g8(s) << 8) & 0x3ff;
		if (x & 0x40)
			r->span.name = gstr(s);
		break;
	}
	case 5: {
		r->kind = MTEV_SYMBOL;
		r->symbol.addr = 0x400000 + (g8(s) % 16) * 0x10;
		r->symbol.entry = g8(s) & 1 ? r->symbol.addr : 0;
		r->symbol.nframes = g8(s) % 4;
		for (uint32_t i = 0; i < r->symbol.nframes; i++) {
			frames[i].name = gstr(s);
			frames[i].file = gstr(s);
			frames[i].line = g8(s);
			frames[i].column = g8(s);
		}
		r->symbol.frames = frames;
		break;
	}
	case 6:
		r->kind = MTEV_PROCESS;
		r->process.pid = 1 + g8(s) % 3;
		r->process.name = gstr(s);
		break;
	case 7:
		r->kind = MTEV_THREAD;
		r->thread.pid = 1 + g8(s) % 3;
		r->thread.tid = 1 + g8(s) % 6;
		r->thread.name = gstr(s);
		break;
	case 8:
		r->kind = MTEV_GAP;
		r->gap.tid = 1 + g8(s) % 4;
		r->gap.begin = *tbase + g8(s);
		r->gap.end = r->gap.begin + g8(s);
		r->gap.reason = g8(s) % 7;
		r->gap.code = -(int32_t)g8(s);
		r->gap.offset = UINT64_MAX;
		r->gap.message = gstr(s);
		break;
	case 9:
		r->kind = MTEV_TRIGGER;
		r->trigger.pid = 1;
		r->trigger.tid = 1 + g8(s) % 4;
		r->trigger.time = *tbase + g8(s);
		r->trigger.addr = g64(s);
		r->trigger.symbol = gstr(s);
		break;
	case 10:
		r->kind = MTEV_WAYPOINT;
		r->waypoint.tid = 1 + g8(s) % 4;
		r->waypoint.depth = g8(s) % 10;
		r->waypoint.time = *tbase;
		r->waypoint.addr = 0x400000 + g8(s);
		break;
	default:
		r->kind = MTEV_SEGMENT;
		r->segment.tid = 1 + g8(s) % 4;
		r->segment.begin = *tbase;
		r->segment.end = *tbase + g8(s);
		r->segment.reason = g8(s) % 6;
		break;
	}
	return 1;
}

/* ---- output checks ---- */

#define MAXT 4096 /* threads tracked by the checkers */

struct tstack {
	uint64_t key;
	uint64_t last_ts;  /* last event time (begin, end or complete begin) */
	uint64_t min_next; /* a complete event's end: the next event must not precede it */
	uint32_t depth;
	int used;
	uint64_t *st;
	uint32_t cap;
};

static struct tstack ts_tab[MAXT];
static uint32_t ts_n;

static struct tstack *tstack_get(uint64_t key)
{
	for (uint32_t i = 0; i < ts_n; i++)
		if (ts_tab[i].key == key)
			return &ts_tab[i];
	FUZZ_ASSERT(ts_n < MAXT, "too many threads for the checker");
	struct tstack *t = &ts_tab[ts_n++];
	uint64_t *st = t->st;
	uint32_t cap = t->cap;
	memset(t, 0, sizeof *t);
	t->st = st;
	t->cap = cap;
	t->key = key;
	return t;
}

static void tstack_reset(void)
{
	ts_n = 0;
}

static void push(struct tstack *t, uint64_t ts)
{
	if (t->depth == t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 64;
		uint64_t *n = realloc(t->st, nc * sizeof *n);
		if (!n)
			abort();
		t->st = n;
		t->cap = nc;
	}
	t->st[t->depth++] = ts;
}

/* An event at @ts on thread @t (begin, end, or the begin of a complete). */
static void in_order(struct tstack *t, uint64_t ts, const char *what)
{
	FUZZ_ASSERT(!t->used || ts >= t->last_ts, "%s: time goes back on its thread (%llu < %llu)",
		    what, (unsigned long long)ts, (unsigned long long)t->last_ts);
	FUZZ_ASSERT(ts >= t->min_next, "%s at %llu overlaps a complete event ending at %llu", what,
		    (unsigned long long)ts, (unsigned long long)t->min_next);
	t->used = 1;
	t->last_ts = ts;
}

static void check_json(const uint8_t *out, size_t len)
{
	json_error_t je;
	/* \u0000 (a NUL in a name) is valid JSON; jansson wants to be told */
	json_t *root = json_loadb((const char *)out, len, JSON_ALLOW_NUL, &je);
	FUZZ_ASSERT(root, "JSON does not parse: %s (line %d col %d)", je.text, je.line, je.column);
	json_t *ev = json_object_get(root, "traceEvents");
	FUZZ_ASSERT(json_is_array(ev), "no traceEvents array");
	tstack_reset();
	size_t i;
	json_t *e;
	json_array_foreach (ev, i, e) {
		const char *ph = json_string_value(json_object_get(e, "ph"));
		FUZZ_ASSERT(ph, "event %zu without ph", i);
		if (strcmp(ph, "B") && strcmp(ph, "E"))
			continue;
		json_t *jp = json_object_get(e, "pid"), *jt = json_object_get(e, "tid");
		json_t *jts = json_object_get(e, "ts");
		FUZZ_ASSERT(json_is_integer(jp) && json_is_integer(jt) && json_is_number(jts),
			    "event %zu: pid, tid, ts", i);
		uint64_t key = (uint64_t)json_integer_value(jp) << 32 | (uint32_t)json_integer_value(jt);
		/* ts is in microseconds with three decimals: compare in ns */
		double us = json_number_value(jts);
		FUZZ_ASSERT(us >= 0, "negative ts");
		double nsd = us * 1000.0 + 0.5;
		uint64_t ns = nsd >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)nsd;
		struct tstack *t = tstack_get(key);
		/* doubles round large times; allow their precision */
		uint64_t slack = us > 4e12 ? (uint64_t)(us * 1000.0 / 4e15) + 4096 : 0;
		uint64_t hi = ns > UINT64_MAX - slack ? UINT64_MAX : ns + slack;
		FUZZ_ASSERT(!t->used || hi >= t->last_ts, "JSON event %zu: time goes back", i);
		t->used = 1;
		if (ns > t->last_ts)
			t->last_ts = ns;
		if (*ph == 'B') {
			push(t, ns);
		} else {
			FUZZ_ASSERT(t->depth > 0, "JSON event %zu: E without B", i);
			t->depth--;
		}
	}
	for (uint32_t k = 0; k < ts_n; k++)
		FUZZ_ASSERT(ts_tab[k].depth == 0, "JSON: %u B events never ended", ts_tab[k].depth);
	json_decref(root);
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint8_t str_reg[0x8000];
static uint64_t thr_koid[256][2];
static uint8_t thr_reg[256];

/* A string reference at word position: 0 empty, 0x8000|n inline (n bytes
 * padded to words), else a registered index.  Returns the words it takes. */
static size_t str_ref(unsigned ref, const char *what)
{
	if (ref & 0x8000)
		return ((ref & 0x7fff) + 7) / 8;
	FUZZ_ASSERT(ref == 0 || str_reg[ref], "%s: string index %u used before it is registered",
		    what, ref);
	return 0;
}

static void check_fxt(const uint8_t *out, size_t len)
{
	FUZZ_ASSERT(len % 8 == 0, "FXT size %zu not a multiple of 8", len);
	FUZZ_ASSERT(len >= 8 && le64(out) == 0x0016547846040010ull, "no FXT magic record");
	memset(str_reg, 0, sizeof str_reg);
	memset(thr_reg, 0, sizeof thr_reg);
	tstack_reset();
	size_t nw = len / 8, w = 0;
	while (w < nw) {
		uint64_t h = le64(out + 8 * w);
		unsigned type = h & 15, size = (h >> 4) & 0xfff;
		FUZZ_ASSERT(size > 0 && w + size <= nw, "FXT record at word %zu: size %u of %zu left", w,
			    size, nw - w);
		const uint8_t *rec = out + 8 * w;
		if (type == 2) { /* string */
			unsigned idx = (h >> 16) & 0x7fff, sl = (h >> 32) & 0x7fff;
			FUZZ_ASSERT(idx != 0, "string record with index 0");
			FUZZ_ASSERT(size == 1 + (sl + 7) / 8, "string record size %u for %u bytes", size, sl);
			str_reg[idx] = 1;
		} else if (type == 3) { /* thread */
			unsigned idx = (h >> 16) & 0xff;
			FUZZ_ASSERT(idx != 0 && size == 3, "thread record index %u size %u", idx, size);
			thr_reg[idx] = 1;
			thr_koid[idx][0] = le64(rec + 8);
			thr_koid[idx][1] = le64(rec + 16);
		} else if (type == 4) { /* event */
			unsigned et = (h >> 16) & 15, nargs = (h >> 20) & 15, tref = (h >> 24) & 0xff;
			unsigned cref = (h >> 32) & 0xffff, nref = (h >> 48) & 0xffff;
			size_t p = 1;
			FUZZ_ASSERT(size >= 2, "event too short");
			uint64_t ts = le64(rec + 8 * p++);
			uint64_t pk, tk;
			if (tref == 0) {
				FUZZ_ASSERT(p + 2 <= size, "inline thread past the record");
				pk = le64(rec + 8 * p);
				tk = le64(rec + 8 * (p + 1));
				p += 2;
			} else {
				FUZZ_ASSERT(thr_reg[tref], "thread ref %u used before it is registered", tref);
				pk = thr_koid[tref][0];
				tk = thr_koid[tref][1];
			}
			p += str_ref(cref, "category");
			p += str_ref(nref, "name");
			for (unsigned a = 0; a < nargs; a++) {
				FUZZ_ASSERT(p < size, "argument %u past the record", a);
				uint64_t ah = le64(rec + 8 * p);
				unsigned at = ah & 15, as = (ah >> 4) & 0xfff;
				FUZZ_ASSERT(as > 0 && p + as <= size, "argument %u size %u", a, as);
				size_t q = 1 + str_ref((ah >> 16) & 0xffff, "argument name");
				if (at == 6) /* string */
					q += str_ref((ah >> 32) & 0xffff, "argument value");
				else if (at == 3 || at == 4 || at == 5 || at == 7 || at == 8)
					q += 1;
				FUZZ_ASSERT(q == as, "argument %u type %u: size %u, contents %zu words", a,
					    at, as, q);
				p += as;
			}
			if (et == 4 || et == 1 || (et >= 5 && et <= 10))
				p += 1; /* complete end / counter id / async or flow id */
			FUZZ_ASSERT(p == size, "event type %u: size %u, contents %zu words", et, size, p);
			FUZZ_ASSERT(pk == (uint32_t)pk && tk == (uint32_t)tk, "koids beyond 32 bits");
			struct tstack *t = tstack_get(pk << 32 | tk);
			if (et == 2) { /* begin */
				in_order(t, ts, "begin");
				push(t, ts);
			} else if (et == 3) { /* end */
				FUZZ_ASSERT(t->depth > 0, "end event without a begin");
				in_order(t, ts, "end");
				t->depth--;
				t->min_next = 0;
			} else if (et == 4) { /* complete */
				uint64_t end = le64(rec + 8 * (size - 1));
				in_order(t, ts, "complete");
				FUZZ_ASSERT(end >= ts, "complete event ends before it begins");
				t->last_ts = end;
				t->min_next = end;
			}
		}
		w += size;
	}
	for (uint32_t k = 0; k < ts_n; k++)
		FUZZ_ASSERT(ts_tab[k].depth == 0, "FXT: %u begin events never ended", ts_tab[k].depth);
}

/* ---- the target ---- */

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	FUZZ_ASSERT(msg && *msg, "empty warning");
}

static int debug;

static void run(const uint8_t *data, size_t size, enum tw_format fmt, int no_args)
{
	fuzz_out_reset();
	zsink *z = zsink_alloc(FUZZ_FD_OUT, ZSINK_PLAIN, 0);
	FUZZ_ASSERT(z, "zsink");
	struct tw_opts o = {.format = fmt, .no_args = no_args, .warn = warn_cb};
	tw *t = tw_alloc(z, &o);
	FUZZ_ASSERT(t, "tw_alloc");
	struct mtev_rec rec;
	int e;
	if (size >= MTEV_MAGIC_LEN && !memcmp(data, MTEV_MAGIC, MTEV_MAGIC_LEN)) {
		mtev_reader *r = mtev_reader_alloc_mem(data, size, &e);
		if (r) {
			while (mtev_read(r, &rec) > 0) {
				e = tw_record(t, &rec);
				FUZZ_ASSERT(e == 0, "tw_record: %s", tw_strerror(e));
			}
			mtev_reader_free(r);
		}
	} else {
		struct src s = {data + 1, data + size};
		uint64_t tbase = (uint64_t)(size ? data[0] : 0) << 20;
		while (gen(&s, &rec, &tbase)) {
			if (debug) { /* FUZZ_DEBUG=1: show the records (triage) */
				static struct mtev_line l;
				if (!mtev_text_format(&l, &rec))
					fprintf(stderr, "%s\n", l.p);
			}
			e = tw_record(t, &rec);
			FUZZ_ASSERT(e == 0, "tw_record: %s", tw_strerror(e));
		}
	}
	e = tw_finish(t);
	FUZZ_ASSERT(e == 0, "tw_finish: %s", tw_strerror(e));
	FUZZ_ASSERT(zsink_finish(z) == 0, "zsink_finish");
	tw_free(t);
	zsink_free(z);
	size_t olen;
	const uint8_t *out = fuzz_out(&olen);
	if (debug && fmt == TW_JSON)
		fprintf(stderr, "%.*s\n", (int)olen, (const char *)out);
	if (fmt == TW_JSON)
		check_json(out, olen);
	else
		check_fxt(out, olen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!longbuf[0]) {
		debug = getenv("FUZZ_DEBUG") != NULL;
		/* "é" and "€" alternating: a cut anywhere may split a sequence */
		for (size_t i = 0; i + 5 <= sizeof longbuf; i += 5)
			memcpy(longbuf + i, "\xc3\xa9\xe2\x82\xac", 5);
	}
	int no_args = size && (data[0] & 1);
	run(data, size, TW_FXT, no_args);
	run(data, size, TW_JSON, no_args);
	return 0;
}
