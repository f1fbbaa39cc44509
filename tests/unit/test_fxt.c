/* FXT encoder: byte layout against the spec's constants, and slot reuse
 * checked by an independent minimal reader that replays the string and thread
 * tables the way a viewer does (the real viewer check is tests/write.bats). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxt.h"
#include "t.h"

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int sink(void *ctx, const void *p, size_t n)
{
	struct buf *b = ctx;
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static uint64_t word(const struct buf *b, size_t i)
{
	uint64_t v = 0;
	for (int k = 7; k >= 0; k--)
		v = v << 8 | b->p[i * 8 + (size_t)k];
	return v;
}

/* The reader's state: what each string and thread slot holds now. */
static char *strtab[0x8000];
static uint64_t thr_pid[256], thr_tid[256];

struct seen {
	char name[64];
	uint64_t pid, tid, ts;
	char loc[64];
};

static size_t replay(const struct buf *b, struct seen *ev, size_t max, int *bad)
{
	size_t n = 0, i = 0, nw = b->len / 8;
	*bad = 0;
	while (i < nw) {
		uint64_t h = word(b, i);
		unsigned type = h & 15, size = (h >> 4) & 0xfff;
		if (!size || i + size > nw) {
			(*bad)++;
			break;
		}
		if (type == 2) { /* string */
			unsigned idx = (h >> 16) & 0x7fff, len = (h >> 32) & 0x7fff;
			free(strtab[idx]);
			strtab[idx] = strndup((const char *)b->p + (i + 1) * 8, len);
		} else if (type == 3) { /* thread */
			unsigned idx = (h >> 16) & 0xff;
			thr_pid[idx] = word(b, i + 1);
			thr_tid[idx] = word(b, i + 2);
		} else if (type == 4 && n < max) { /* event */
			unsigned th = (h >> 24) & 0xff, nref = h >> 48, nargs = (h >> 20) & 15;
			struct seen *e = &ev[n++];
			if (!th || (nref & 0x8000) || !strtab[nref]) {
				(*bad)++;
				continue;
			}
			snprintf(e->name, sizeof e->name, "%s", strtab[nref]);
			e->pid = thr_pid[th];
			e->tid = thr_tid[th];
			e->ts = word(b, i + 1);
			e->loc[0] = 0;
			size_t a = i + 2;
			for (unsigned k = 0; k < nargs; k++) {
				uint64_t ah = word(b, a);
				unsigned asz = (ah >> 4) & 0xfff, vref = (ah >> 32) & 0xffff;
				if ((ah & 15) == 6 && !(vref & 0x8000) && strtab[vref])
					snprintf(e->loc, sizeof e->loc, "%s", strtab[vref]);
				a += asz;
			}
		}
		i += size;
	}
	return n;
}

/* The hot paths (cached references, fxt_eventp, memos) against the general
 * path: writer u gets every string without a cache (each one looked up by
 * its text), writer m gets caches, kept argument objects and one memo per
 * function, as mt-write uses them.  Functions are drawn at random from a pool
 * whose names and locations overflow the string table, over more threads
 * than the thread table holds, so slots are reused all along and memos go
 * stale.  Both must write the same bytes. */
enum { POOL = 24000, MT = 300, EVENTS = 150000 };

static int memo_run(struct buf *bu, struct buf *bm, struct fxt_stats *st)
{
	fxt_writer *u = fxt_writer_alloc(sink, bu), *m = fxt_writer_alloc(sink, bm);
	struct fxt_ref_cache *name_c = calloc(POOL, sizeof *name_c), *loc_c = calloc(POOL, sizeof *loc_c);
	struct fxt_memo *memo = calloc(POOL, sizeof *memo);
	struct fxt_ref_cache tu[MT] = {{0}}, tm[MT] = {{0}}, c_span = {0}, c_loc = {0}, c_in = {0};
	struct fxt_str span_u = {"span", 4, NULL, 0}, span_m = {"span", 4, &c_span, 0};
	struct fxt_arg loc_m = {.type = FXT_ARG_STRING, .name = {"loc", 3, &c_loc, 0}};
	struct fxt_arg in_m = {.type = FXT_ARG_BOOL, .name = {"inline", 6, &c_in, 0}, .b = 1};
	int ok = u && m && name_c && loc_c && memo && fxt_begin(u, 1000000000) == 0 &&
		 fxt_begin(m, 1000000000) == 0;
	uint64_t x = 12345;
	for (unsigned k = 0; ok && k < EVENTS; k++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		unsigned id = (unsigned)(x >> 33) % POOL, t = (unsigned)(x >> 20) % MT;
		unsigned type = (x >> 60) & 1 ? FXT_EV_COMPLETE : FXT_EV_INSTANT;
		unsigned na = 1 + (id % 3 == 0); /* some shapes have a second argument */
		uint64_t pid = 7000 + t / 10, tid = 100000 + t;
		char name[32], loc[32];
		int nl = snprintf(name, sizeof name, "fn_%u", id);
		int ll = snprintf(loc, sizeof loc, "0x%x src/f%u.c:%u", 0x400000 + id, id, id % 97);
		struct fxt_str nm_u = {name, (size_t)nl, NULL, 0}, nm_m = {name, (size_t)nl, &name_c[id], 0};
		struct fxt_arg au[2] = {{.type = FXT_ARG_STRING, .name = {"loc", 3, NULL, 0},
					 .s = {loc, (size_t)ll, NULL, 0}},
					{.type = FXT_ARG_BOOL, .name = {"inline", 6, NULL, 0}, .b = 1}};
		loc_m.s = (struct fxt_str){loc, (size_t)ll, &loc_c[id], 0};
		const struct fxt_arg *am[2] = {&loc_m, &in_m};
		if (fxt_event(u, type, pid, tid, &tu[t], span_u, nm_u, k, au, na, k + 5) != 0)
			ok = 0;
		int r = fxt_event_memo(m, &memo[id], type, &tm[t], k, k + 5);
		if (r == 1)
			r = fxt_eventp_memo(m, &memo[id], type, pid, tid, &tm[t], &span_m, &nm_m, k, am,
					    na, k + 5);
		if (r != 0)
			ok = 0;
		if (k % 7 == 0 && (fxt_event(u, FXT_EV_END, pid, tid, &tu[t], (struct fxt_str){0},
					     (struct fxt_str){0}, k + 1, NULL, 0, 0) != 0 ||
				   fxt_eventp(m, FXT_EV_END, pid, tid, &tm[t], NULL, NULL, k + 1, NULL,
					      0, 0) != 0))
			ok = 0;
	}
	ok = ok && fxt_flush(u) == 0 && fxt_flush(m) == 0;
	if (m)
		fxt_writer_stats(m, st);
	fxt_writer_free(u);
	fxt_writer_free(m);
	free(name_c);
	free(loc_c);
	free(memo);
	return ok;
}

int main(void)
{
	struct buf b = {0};
	fxt_writer *w = fxt_writer_alloc(sink, &b);
	T_CHECK(w != NULL, "alloc");
	T_CHECK(fxt_begin(w, 1000000000) == 0, "begin");
	fxt_flush(w);
	T_CHECK(b.len == 24, "magic + init record are 3 words (%zu bytes)", b.len);
	static const uint8_t magic[8] = {0x10, 0x00, 0x04, 0x46, 0x78, 0x54, 0x16, 0x00};
	T_CHECK(!memcmp(b.p, magic, 8), "magic number record bytes as in the spec");
	T_CHECK(word(&b, 1) == (1 | 2 << 4), "initialization record header: type 1, size 2");
	T_CHECK(word(&b, 2) == 1000000000, "ticks per second");

	/* 40000 distinct names over 300 threads, each event with a string arg;
	 * names come back twice, so the LRU must re-register evicted ones */
	enum { N = 40000, NT = 300, TOTAL = N + N / 2 };
	struct seen *ev = calloc(TOTAL, sizeof *ev);
	struct fxt_ref_cache *tc = calloc(NT, sizeof *tc);
	int ok = 1;
	for (unsigned k = 0; k < TOTAL; k++) {
		unsigned id = k < N ? k : (k - N) * 2, t = id % NT;
		char name[32], loc[32];
		int nl = snprintf(name, sizeof name, "fn_%u", id);
		int ll = snprintf(loc, sizeof loc, "loc_%u", id % 1000);
		struct fxt_arg a = {.type = FXT_ARG_STRING, .name = {"loc", 3, NULL, 0},
				    .s = {loc, (size_t)ll, NULL, 0}};
		struct fxt_str cat = {"span", 4, NULL, 0}, nm = {name, (size_t)nl, NULL, 0};
		if (fxt_event(w, FXT_EV_INSTANT, 7000 + t / 10, 100000 + t, &tc[t], cat, nm, k, &a, 1,
			      0) != 0)
			ok = 0;
	}
	T_CHECK(ok, "every event written");
	T_CHECK(fxt_flush(w) == 0, "flush");
	struct fxt_stats st;
	fxt_writer_stats(w, &st);
	T_CHECK(st.string_evictions > 0, "string slots were reused (%llu)",
		(unsigned long long)st.string_evictions);
	T_CHECK(st.thread_evictions > 0, "thread slots were reused (%llu)",
		(unsigned long long)st.thread_evictions);
	T_CHECK(st.bytes == b.len, "stats count every byte");

	int bad;
	size_t n = replay(&b, ev, TOTAL, &bad);
	T_CHECK(bad == 0, "every record well-formed, every reference registered (%d bad)", bad);
	T_CHECK(n == TOTAL, "%zu events read back", n);
	unsigned wrong = 0;
	for (unsigned k = 0; k < n; k++) {
		unsigned id = k < N ? k : (k - N) * 2, t = id % NT;
		char name[32], loc[32];
		snprintf(name, sizeof name, "fn_%u", id);
		snprintf(loc, sizeof loc, "loc_%u", id % 1000);
		if (strcmp(ev[k].name, name) || strcmp(ev[k].loc, loc) || ev[k].ts != k ||
		    ev[k].tid != 100000 + t || ev[k].pid != 7000 + t / 10)
			wrong++;
	}
	T_CHECK(wrong == 0, "every event reads back its own name, arg, thread and time (%u wrong)",
		wrong);

	{
		struct buf bu = {0}, bm = {0};
		struct fxt_stats ms;
		T_CHECK(memo_run(&bu, &bm, &ms), "hot paths: every event written");
		T_CHECK(ms.string_evictions > 10000 && ms.thread_evictions > 100,
			"hot paths: slots were reused (%llu strings, %llu threads)",
			(unsigned long long)ms.string_evictions,
			(unsigned long long)ms.thread_evictions);
		T_CHECK(bu.len == bm.len && !memcmp(bu.p, bm.p, bu.len),
			"hot paths (caches, memos) write the same bytes as the general path "
			"(%zu and %zu bytes)",
			bu.len, bm.len);
		free(bu.p);
		free(bm.p);
	}

	/* a string longer than the limit is cut, not refused */
	size_t big = FXT_MAX_STRING_LEN + 100;
	char *s = malloc(big);
	memset(s, 'x', big);
	struct fxt_str cat = {"c", 1, NULL, 0}, nm = {s, big, NULL, 0};
	T_CHECK(fxt_event(w, FXT_EV_INSTANT, 1, 1, NULL, cat, nm, 1, NULL, 0, 0) == 0,
		"an over-long name is written (cut)");
	nm.inline_ = 1;
	T_CHECK(fxt_event(w, FXT_EV_INSTANT, 1, 1, NULL, cat, nm, 1, NULL, 0, 0) == 0,
		"an over-long inline name is written (cut)");
	T_CHECK(fxt_event(w, 9, 1, 1, NULL, cat, cat, 1, NULL, 0, 0) < 0, "unknown event type refused");
	free(s);
	fxt_writer_free(w);
	for (unsigned i = 0; i < 0x8000; i++)
		free(strtab[i]);
	free(ev);
	free(tc);
	free(b.p);
	return T_DONE();
}
