/* MTEV codec: round trips of every kind, truncation at every byte, corrupt
 * bytes, unknown kinds passed through, version range. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mtev.h"
#include "t.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Writes through a pipe-less path: a temp file. */
static uint8_t *encode(const struct mtev_rec *recs, size_t n, size_t *len)
{
	FILE *f = tmpfile();
	int err;
	mtev_writer *w = mtev_writer_alloc(fileno(f), "test", MTEV_F_SORTED, &err);
	for (size_t i = 0; i < n; i++)
		if (mtev_write(w, &recs[i]))
			return NULL;
	mtev_writer_finish(w);
	mtev_writer_free(w);
	long sz = ftell(f);
	uint8_t *buf = malloc((size_t)sz);
	rewind(f);
	if (fread(buf, 1, (size_t)sz, f) != (size_t)sz)
		return NULL;
	fclose(f);
	*len = (size_t)sz;
	return buf;
}

static int str_eq(struct mtev_str a, struct mtev_str b);
static void test_short_waypoints(void);

/* Span names by reference: a span whose name_id names a string record written
 * before it carries no text; the reader gives the text back. */
static void test_name_refs(void)
{
	static const char long_name[] =
		"std::vector<std::basic_string<char>, std::allocator<std::basic_string<char> > >::_M_realloc_insert";
	struct mtev_rec recs[8];
	memset(recs, 0, sizeof recs);
	recs[0].kind = MTEV_STRING;
	recs[0].string.id = 0x80000001u;
	recs[0].string.text = mtev_cstr(long_name);
	for (int i = 1; i <= 4; i++) {
		recs[i].kind = MTEV_SPAN;
		recs[i].span.tid = 1;
		recs[i].span.depth = (uint32_t)i;
		recs[i].span.begin = 10;
		recs[i].span.end = 20;
		recs[i].span.flags = MTEV_SPAN_INLINE;
		recs[i].span.name = mtev_cstr(long_name);
		recs[i].span.name_id = 0x80000001u;
	}
	/* an id never defined: the writer falls back to the text */
	recs[4].span.name_id = 99;
	recs[4].span.name = mtev_cstr("plain");
	/* a redefinition: later references mean the new text */
	recs[5].kind = MTEV_STRING;
	recs[5].string.id = 0x80000001u;
	recs[5].string.text = mtev_cstr("again");
	recs[6] = recs[1];
	recs[6].span.name = mtev_cstr("again");
	/* a text that is not the string record's: the text is written */
	recs[7] = recs[1];
	recs[7].span.name = mtev_cstr("edited");
	size_t len = 0, len_text = 0;
	uint8_t *buf = encode(recs, 8, &len);
	struct mtev_rec plain[8];
	memcpy(plain, recs, sizeof plain);
	for (int i = 1; i < 8; i++)
		if (plain[i].kind == MTEV_SPAN)
			plain[i].span.name_id = 0;
	uint8_t *buf_text = encode(plain, 8, &len_text);
	T_CHECK(buf && buf_text && len + 3 * (sizeof long_name - 1) - 20 < len_text,
		"names by reference: %zu bytes, %zu with the text repeated", len, len_text);
	int err, n, ok = 1, i = 0;
	mtev_reader *r = buf ? mtev_reader_alloc_mem(buf, len, &err) : NULL;
	struct mtev_rec x;
	while (r && (n = mtev_read(r, &x)) == 1) {
		const struct mtev_rec *e = &recs[i];
		if (x.kind != e->kind)
			ok = 0;
		else if (x.kind == MTEV_SPAN)
			ok &= str_eq(x.span.name, e->span.name) &&
			      x.span.name_id == (i == 4 || i == 7 ? 0 : e->span.name_id) &&
			      x.span.depth == e->span.depth;
		i++;
	}
	T_CHECK(r && n == 0 && i == 8 && ok, "references read back as their text (%d records, ok %d)", i, ok);
	mtev_reader_free(r);
	/* a reference to an id no string record defined: the reader says so */
	if (buf) {
		/* drop the first string record: header 21 bytes, then kind, size, payload */
		size_t hl = 17 + 4, rl = 2 + buf[hl + 1];
		uint8_t *cut = malloc(len);
		memcpy(cut, buf, hl);
		memcpy(cut + hl, buf + hl + rl, len - hl - rl);
		r = mtev_reader_alloc_mem(cut, len - rl, &err);
		n = r ? mtev_read(r, &x) : err;
		T_CHECK(n == -MTEV_EREF, "dangling name reference rejected: %s", mtev_strerror(n));
		mtev_reader_free(r);
		free(cut);
	}
	/* the writer refuses a reference to nothing with no text to fall back on */
	FILE *f = tmpfile();
	mtev_writer *w = mtev_writer_alloc(fileno(f), "t", 0, &err);
	struct mtev_rec bad = recs[1];
	bad.span.name = mtev_cstr("");
	T_CHECK(mtev_write(w, &bad) == -MTEV_EINVAL, "reference without a string record or text refused");
	mtev_writer_free(w);
	fclose(f);
	free(buf);
	free(buf_text);
}

/* Short waypoints (kinds 0x40-0x47): the thread of the previous waypoint,
 * its depth changed by -3..+4; a waypoint of another thread or a bigger step
 * is written in full. */
static void test_short_waypoints(void)
{
	static const int steps[] = {0, 1, 1, -1, 4, -3, 5, -4, 0, 2, -2};
	enum { NS = sizeof steps / sizeof steps[0] };
	struct mtev_rec recs[NS + 2];
	memset(recs, 0, sizeof recs);
	int64_t depth = 10;
	size_t nshort = 0;
	for (size_t i = 0; i < NS; i++) {
		depth += steps[i];
		recs[i].kind = MTEV_WAYPOINT;
		recs[i].waypoint.tid = 7;
		recs[i].waypoint.depth = (uint32_t)depth;
		recs[i].waypoint.time = 100 + i;
		recs[i].waypoint.addr = 0x401000 + 3 * i;
		nshort += i > 0 && steps[i] >= -3 && steps[i] <= 4;
	}
	recs[NS] = recs[NS - 1];
	recs[NS].waypoint.tid = 8; /* another thread: full form */
	recs[NS + 1] = recs[NS - 1];
	recs[NS + 1].waypoint.time += 5; /* back to thread 7: full form again */
	size_t len = 0;
	uint8_t *buf = encode(recs, NS + 2, &len);
	size_t hl = 17 + 4, nk[256] = {0};
	for (size_t o = hl; buf && o + 1 < len; o += 2 + buf[o + 1])
		nk[buf[o]]++;
	size_t ns = 0;
	for (int k = 0x40; k <= 0x47; k++)
		ns += nk[k];
	T_CHECK(buf && ns == nshort && nk[MTEV_WAYPOINT] == NS + 2 - nshort,
		"%zu of %d waypoints in the short form (want %zu), the rest in full", ns, NS + 2, nshort);
	int err, n;
	mtev_reader *r = mtev_reader_alloc_mem(buf, len, &err);
	struct mtev_rec x;
	size_t i = 0, bad = 0;
	while ((n = mtev_read(r, &x)) == 1) {
		const struct mtev_rec *e = &recs[i++];
		bad += x.kind != MTEV_WAYPOINT || x.waypoint.tid != e->waypoint.tid ||
		       x.waypoint.depth != e->waypoint.depth || x.waypoint.time != e->waypoint.time ||
		       x.waypoint.addr != e->waypoint.addr;
	}
	T_CHECK(n == 0 && i == NS + 2 && !bad, "short and full waypoints read back (%zu differ)", bad);
	mtev_reader_free(r);

	/* a short waypoint with no waypoint before it, and one below depth 0 */
	uint8_t b1[64], b2[64];
	memcpy(b1, buf, hl);
	const uint8_t orphan[] = {0x43, 2, 0, 0, 0, 0};
	memcpy(b1 + hl, orphan, sizeof orphan);
	r = mtev_reader_alloc_mem(b1, hl + sizeof orphan, &err);
	n = mtev_read(r, &x);
	T_CHECK(n == -MTEV_ECORRUPT, "short waypoint without a previous waypoint: %s", mtev_strerror(n));
	mtev_reader_free(r);
	memcpy(b2, buf, hl);
	const uint8_t under[] = {MTEV_WAYPOINT, 4, 7, 1, 0, 0, 0x40, 2, 0, 0, 0, 0};
	memcpy(b2 + hl, under, sizeof under);
	r = mtev_reader_alloc_mem(b2, hl + sizeof under, &err);
	int n1 = mtev_read(r, &x);
	n = mtev_read(r, &x);
	T_CHECK(n1 == 1 && x.waypoint.depth == 1 && n == -MTEV_ECORRUPT,
		"short waypoint to depth -2: %s", mtev_strerror(n));
	mtev_reader_free(r);
	free(buf);

	FILE *f = tmpfile();
	mtev_writer *w = mtev_writer_alloc(fileno(f), "t", 0, &err);
	struct mtev_rec raw = {.kind = MTEV_KIND_RAW};
	raw.raw.kind = 0x44;
	T_CHECK(mtev_write(w, &raw) == -MTEV_EINVAL, "raw record with a short-waypoint kind refused");
	mtev_writer_free(w);
	fclose(f);
}

static int str_eq(struct mtev_str a, struct mtev_str b)
{
	return a.len == b.len && (!a.len || !memcmp(a.p, b.p, a.len));
}

/* the pointed-to data of the random records (make_records, check_round_trip) */
static const uint8_t k_bid[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
static const uint64_t k_ips[3] = {0x401000, 0x400000, 0x7fffffffe000};
static const struct mtev_frame k_fr[2] = {{{"sq", 2}, {"a.c", 3}, 2, 71}, {{"poly", 4}, {"a.c", 3}, 5, 3}};
static const uint8_t k_raw[3] = {9, 8, 7};

enum { N_RECS = 20000 };

/* @n random records of every kind, times rising per thread */
static void make_records(struct mtev_rec *recs, size_t n)
{
	uint64_t t[4] = {1000, 1000, 1000, 1000};
	uint32_t wdepth = 5;
	for (size_t i = 0; i < n; i++) {
		struct mtev_rec *r = &recs[i];
		unsigned sel = (unsigned)(rnd() % 16);
		uint32_t tid = 100 + (uint32_t)(rnd() % 4);
		t[tid - 100] += rnd() % 50;
		switch (sel) {
		default:
			r->kind = MTEV_BRANCH;
			r->br.tid = tid;
			r->br.time = t[tid - 100];
			r->br.type = (unsigned)(rnd() % MTEV_BR__COUNT);
			r->br.from = 0x400000 + rnd() % 0x100000;
			r->br.to = (rnd() & 1) ? 0 : 0x7f0000000000 + rnd() % 0x1000000;
			break;
		case 1: r->kind = MTEV_CLOCK; r->clock.time_zero = rnd(); r->clock.time_mult = 123; r->clock.time_shift = 10; break;
		case 2: r->kind = MTEV_THREAD; r->thread.pid = 5; r->thread.tid = tid; r->thread.time = rnd(); r->thread.name = mtev_cstr("w\"o\\rk"); break;
		case 3: r->kind = MTEV_MAP; r->map.pid = 5; r->map.start = rnd(); r->map.len = 4096; r->map.prot = 5;
			r->map.build_id = k_bid; r->map.build_id_len = 20; r->map.path = mtev_cstr("/usr/lib/x.so"); break;
		case 4: r->kind = MTEV_SAMPLE; r->sample.tid = tid; r->sample.time = rnd(); r->sample.nips = 3; r->sample.ips = k_ips; break;
		case 5: r->kind = MTEV_GAP; r->gap.tid = tid; r->gap.begin = 10; r->gap.end = 20; r->gap.reason = MTEV_GAP_OVERFLOW;
			r->gap.code = -(int32_t)(rnd() % 30); r->gap.offset = (rnd() & 1) ? UINT64_MAX : rnd(); r->gap.message = mtev_cstr("bad packet"); break;
		case 6: r->kind = MTEV_SPAN; r->span.tid = tid; r->span.depth = 3; r->span.begin = 5; r->span.end = 5 + rnd() % 100;
			r->span.func = rnd(); r->span.callsite = rnd(); r->span.flags = 3; r->span.name = mtev_cstr("[syscall]"); break;
		case 7: /* depth steps inside and outside the short form's -3..+4 */
			wdepth = (rnd() & 3) ? (uint32_t)((int64_t)wdepth + (int64_t)(rnd() % 10) - 4)
					     : (uint32_t)(rnd() % 3 ? rnd() % 40 : rnd());
			if (wdepth > 0x80000000u && (rnd() & 1))
				wdepth = 0;
			r->kind = MTEV_WAYPOINT; r->waypoint.tid = (rnd() & 3) ? 100 : tid; r->waypoint.depth = wdepth;
			r->waypoint.time = t[r->waypoint.tid - 100]; r->waypoint.addr = (rnd() & 1) ? rnd() : 0x401000 + rnd() % 300; break;
		case 8: r->kind = MTEV_SYMBOL; r->symbol.addr = rnd(); r->symbol.entry = 7; r->symbol.nframes = 2; r->symbol.frames = k_fr; break;
		case 9: r->kind = MTEV_KIND_RAW; r->raw.kind = 0x77; r->raw.len = 3; r->raw.data = k_raw; break;
		case 10: r->kind = MTEV_TRIGGER; r->trigger.tid = tid; r->trigger.addr = rnd(); r->trigger.arg0 = rnd(); r->trigger.symbol = mtev_cstr("magic_trace_stop_indicator"); break;
		case 11: r->kind = MTEV_SEGMENT; r->segment.tid = tid; r->segment.begin = 1; r->segment.end = 9; r->segment.reason = 1; break;
		case 12: r->kind = MTEV_PROCESS; r->process.pid = (uint32_t)rnd(); r->process.name = mtev_cstr(""); break;
		case 13: r->kind = MTEV_STRING; r->string.id = 4; r->string.text = mtev_cstr("hello"); break;
		}
	}
}

/* @buf (@len bytes) reads back as @recs (@n) */
static void check_round_trip(const struct mtev_rec *recs, size_t nrecs, const uint8_t *buf,
			     size_t len)
{
	int err;
	mtev_reader *r = mtev_reader_alloc_mem(buf, len, &err);
	T_CHECK(r && !strcmp(mtev_reader_header(r)->producer, "test") &&
			mtev_reader_header(r)->flags == MTEV_F_SORTED,
		"header read back");
	size_t i = 0, bad = 0;
	struct mtev_rec x;
	int n;
	while ((n = mtev_read(r, &x)) == 1) {
		const struct mtev_rec *e = &recs[i++];
		int ok = x.kind == e->kind;
		if (ok) switch (x.kind) {
		case MTEV_BRANCH: ok = x.br.tid == e->br.tid && x.br.time == e->br.time && x.br.type == e->br.type && x.br.from == e->br.from && x.br.to == e->br.to; break;
		case MTEV_THREAD: ok = x.thread.tid == e->thread.tid && x.thread.time == e->thread.time && str_eq(x.thread.name, e->thread.name); break;
		case MTEV_MAP: ok = x.map.start == e->map.start && x.map.build_id_len == 20 && !memcmp(x.map.build_id, k_bid, 20) && str_eq(x.map.path, e->map.path); break;
		case MTEV_SAMPLE: ok = x.sample.nips == 3 && !memcmp(x.sample.ips, k_ips, sizeof k_ips) && x.sample.time == e->sample.time; break;
		case MTEV_GAP: ok = x.gap.code == e->gap.code && x.gap.offset == e->gap.offset && x.gap.end == 20 && str_eq(x.gap.message, e->gap.message); break;
		case MTEV_SPAN: ok = x.span.end == e->span.end && x.span.func == e->span.func && x.span.callsite == e->span.callsite && x.span.flags == 3 && str_eq(x.span.name, e->span.name); break;
		case MTEV_WAYPOINT: ok = x.waypoint.tid == e->waypoint.tid && x.waypoint.depth == e->waypoint.depth && x.waypoint.time == e->waypoint.time && x.waypoint.addr == e->waypoint.addr; break;
		case MTEV_SYMBOL: ok = x.symbol.nframes == 2 && str_eq(x.symbol.frames[1].name, k_fr[1].name) && x.symbol.frames[0].column == 71; break;
		case MTEV_KIND_RAW: ok = x.raw.kind == 0x77 && x.raw.len == 3 && !memcmp(x.raw.data, k_raw, 3); break;
		case MTEV_TRIGGER: ok = x.trigger.addr == e->trigger.addr && x.trigger.arg0 == e->trigger.arg0 && str_eq(x.trigger.symbol, e->trigger.symbol); break;
		case MTEV_CLOCK: ok = x.clock.time_zero == e->clock.time_zero && x.clock.time_mult == 123; break;
		default: break;
		}
		bad += !ok;
	}
	T_CHECK(n == 0 && i == nrecs && bad == 0, "round trip of %zu records of every kind (%zu differ, last status %d)", i, bad, n);
	mtev_reader_free(r);

}

/* every prefix of @buf is reported truncated */
static void check_truncation(const uint8_t *buf, size_t len)
{
	mtev_reader *r;
	struct mtev_rec x;
	int n, err;

	/* truncation at every byte: never a record past the cut, always ETRUNC (or
	 * EMAGIC while the magic itself is cut) */
	size_t wrong = 0;
	for (size_t cut = 0; cut < len; cut += (cut < 4000 ? 1 : 997)) {
		r = mtev_reader_alloc_mem(buf, cut, &err);
		if (!r) {
			if (!(err == -MTEV_ETRUNC || (err == -MTEV_EMAGIC && cut < MTEV_MAGIC_LEN + 1)))
				wrong++;
			continue;
		}
		while ((n = mtev_read(r, &x)) == 1)
			;
		if (n != -MTEV_ETRUNC)
			wrong++;
		if (mtev_reader_offset(r) > cut)
			wrong++;
		mtev_reader_free(r);
	}
	T_CHECK(wrong == 0, "every truncation reported as truncated, with an offset inside the data");

}

/* corrupted copies of @buf: no crash, every reader ends; bad headers, data
 * after END and an impossible size are reported */
static void check_corruption(const uint8_t *buf, size_t len)
{
	mtev_reader *r;
	struct mtev_rec x;
	int n, err;

	/* random corruption: no crash, and the reader always terminates */
	uint8_t *cb = malloc(len);
	size_t finished = 0;
	for (int k = 0; k < 3000; k++) {
		memcpy(cb, buf, len);
		for (int j = 0; j < 4; j++)
			cb[17 + rnd() % (len - 17)] = (uint8_t)rnd();
		r = mtev_reader_alloc_mem(cb, len, &err);
		if (!r)
			continue;
		size_t steps = 0;
		while ((n = mtev_read(r, &x)) == 1 && steps < 2 * N_RECS)
			steps++;
		finished += steps < 2 * N_RECS;
		mtev_reader_free(r);
	}
	T_CHECK(finished == 3000, "3000 corrupted streams read to an end or an error without crashing");

	/* header checks */
	memcpy(cb, buf, len);
	cb[8] = 9;
	r = mtev_reader_alloc_mem(cb, len, &err);
	T_CHECK(!r && err == -MTEV_EVERSION, "version 9 rejected: %s", mtev_strerror(err));
	memcpy(cb, buf, len);
	cb[0] = 'M';
	r = mtev_reader_alloc_mem(cb, len, &err);
	T_CHECK(!r && err == -MTEV_EMAGIC, "bad magic rejected: %s", mtev_strerror(err));

	/* data after END */
	uint8_t *eb = malloc(len + 3);
	memcpy(eb, buf, len);
	eb[len] = 0x02; eb[len + 1] = 0; eb[len + 2] = 0;
	r = mtev_reader_alloc_mem(eb, len + 3, &err);
	while ((n = mtev_read(r, &x)) == 1)
		;
	T_CHECK(n == -MTEV_EAFTEREND, "data after END reported: %s", mtev_strerror(n));
	mtev_reader_free(r);

	/* impossible size */
	uint8_t hdr_only[64];
	size_t hl = 17 + 4;
	memcpy(hdr_only, buf, hl);
	uint8_t big[] = {0x01, 0xff, 0xff, 0xff, 0xff, 0x0f};
	memcpy(hdr_only + hl, big, sizeof big);
	r = mtev_reader_alloc_mem(hdr_only, hl + sizeof big, &err);
	n = r ? mtev_read(r, &x) : err;
	T_CHECK(n == -MTEV_ESIZE, "4 GiB record size rejected: %s", mtev_strerror(n));
	mtev_reader_free(r);

	free(cb);
	free(eb);
}

/* the writer refuses records it could not read back */
static void check_writer_refuses(void)
{
	int err;
	/* writer refuses invalid records */
	FILE *f = tmpfile();
	mtev_writer *w = mtev_writer_alloc(fileno(f), "t", 0, &err);
	struct mtev_rec bad_span = {.kind = MTEV_SPAN};
	bad_span.span.begin = 10;
	bad_span.span.end = 5;
	T_CHECK(mtev_write(w, &bad_span) == -MTEV_EINVAL, "span ending before it begins refused");
	struct mtev_rec bad_raw = {.kind = MTEV_KIND_RAW};
	bad_raw.raw.kind = MTEV_SPAN;
	T_CHECK(mtev_write(w, &bad_raw) == -MTEV_EINVAL, "raw record with a known kind refused");
	mtev_writer_free(w);
	fclose(f);

}

/* mtev_write_upto (the decoder's merge writes its runs of branches with it):
 * the bytes of mtev_write record by record, and it stops at the first record
 * that is not a branch or whose time is past the limit.  Random runs of
 * branches of three threads (big and small deltas, the writer's buffer
 * flushed in the middle of runs), thread and gap records between them, and a
 * limit that cuts some runs; the caller's loop is the merge's. */
static uint8_t *file_bytes(FILE *f, size_t *len)
{
	long sz = ftell(f);
	uint8_t *buf = malloc((size_t)sz + 1);
	rewind(f);
	if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz)
		return NULL;
	*len = (size_t)sz;
	return buf;
}

/* @n records, mostly branches of three threads in runs, with thread and
 * gap records between them; some times and addresses far apart. */
static void branch_mix(struct mtev_rec *recs, size_t n)
{
	uint64_t time = 1000, addr = 0x401000;
	size_t i;

	for (i = 0; i < n; i++) {
		struct mtev_rec *r = &recs[i];
		unsigned x = (unsigned)(rnd() % 100);
		if (x < 3) {
			r->kind = MTEV_THREAD;
			r->thread.pid = 5;
			r->thread.tid = 5 + (uint32_t)(rnd() % 3);
			r->thread.time = time;
			continue;
		}
		if (x < 5) {
			r->kind = MTEV_GAP;
			r->gap.tid = 5 + (uint32_t)(rnd() % 3);
			r->gap.begin = time;
			r->gap.end = time + 10;
			r->gap.offset = ~0ull;
			continue;
		}
		r->kind = MTEV_BRANCH;
		r->br.tid = x < 15 ? 5 + (uint32_t)(rnd() % 3) : i && recs[i - 1].kind == MTEV_BRANCH
									 ? recs[i - 1].br.tid
									 : 5;
		r->br.type = (uint32_t)(rnd() % MTEV_BR__COUNT);
		time += rnd() % 4 ? 0 : rnd() % (x < 50 ? 100 : 1u << 30);
		r->br.time = time;
		r->br.from = addr + rnd() % (x < 60 ? 64 : 1u << 20);
		r->br.to = x == 99 ? 0 : r->br.from - (1u << 19) + rnd() % (1u << 20) + (x < 20 ? (1ull << 40) : 0);
		addr = r->br.to ? r->br.to : r->br.from;
	}

}

static void test_write_upto(void)
{
	enum { N = 60000 };
	struct mtev_rec *recs = calloc(N, sizeof *recs);
	size_t wrong_count = 0, runs = 0, cut = 0;
	int err;

	branch_mix(recs, N);
	FILE *fa = tmpfile(), *fb = tmpfile();
	mtev_writer *wa = mtev_writer_alloc(fileno(fa), "t", 0, &err);
	mtev_writer *wb = mtev_writer_alloc(fileno(fb), "t", 0, &err);
	size_t k = 0;
	int e = 0;
	while (k < N && e >= 0) {
		/* a limit somewhere in the next run's times, or past them */
		uint64_t limit = recs[k].kind == MTEV_BRANCH ? recs[k].br.time + rnd() % 2000 : 0;
		if (rnd() % 4 == 0)
			limit = UINT64_MAX;
		size_t piece = 1 + (size_t)(rnd() % 700);
		if (piece > N - k)
			piece = N - k;
		size_t want = 0;
		while (want < piece && recs[k + want].kind == MTEV_BRANCH && recs[k + want].br.time <= limit)
			want++;
		long m = mtev_write_upto(wb, &recs[k], piece, limit);
		runs++;
		wrong_count += m != (long)want;
		cut += want < piece && recs[k + want].kind == MTEV_BRANCH;
		for (size_t j = 0; j < want && e >= 0; j++)
			e = mtev_write(wa, &recs[k + j]);
		k += want;
		if (k < N && (!want || recs[k].kind != MTEV_BRANCH)) {
			/* what stopped it goes out alone, as the merge writes it */
			int ea = mtev_write(wa, &recs[k]), eb = mtev_write(wb, &recs[k]);
			e = ea < 0 ? ea : eb;
			k++;
		}
	}
	mtev_writer_finish(wa);
	mtev_writer_finish(wb);
	size_t la = 0, lb = 0;
	uint8_t *a = file_bytes(fa, &la), *b = file_bytes(fb, &lb);
	T_CHECK(e >= 0 && a && b && la == lb && la > 200000 && !memcmp(a, b, la),
		"mtev_write_upto: %zu bytes as mtev_write writes them (%zu and %zu bytes, %zu calls)", la,
		la, lb, runs);
	T_CHECK(!wrong_count && cut > 100,
		"mtev_write_upto stops at the first non-branch or branch past the limit (%zu wrong counts, "
		"%zu runs cut by the limit)",
		wrong_count, cut);

	/* an invalid branch type: the error, what came before it written */
	struct mtev_rec bad[3];
	memcpy(bad, recs, sizeof bad);
	for (size_t i = 0; i < 3; i++) {
		bad[i].kind = MTEV_BRANCH;
		bad[i].br.type = MTEV_BR_JCC;
		bad[i].br.time = 1;
	}
	bad[1].br.type = MTEV_BR__COUNT;
	long m = mtev_write_upto(wb, bad, 3, UINT64_MAX);
	T_CHECK(m == -MTEV_EINVAL, "mtev_write_upto: an invalid branch type is refused (%ld)", m);
	mtev_writer_free(wa);
	mtev_writer_free(wb);
	fclose(fa);
	fclose(fb);
	free(a);
	free(b);
	free(recs);
}

/* Varints of every width (1 to 10 bytes) in every field of spans and in
 * the deltas of branches: the reader gives every value back, and the
 * writer's bytes are the shortest LEB128 (the file's size is the sum of
 * the records' sizes counted byte by byte).  Fields near a record's end
 * have fewer than 8 bytes after them, those before it more: both of the
 * reader's paths. */
static unsigned uvlen(uint64_t v)
{
	unsigned n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint64_t of_width(unsigned k, unsigned pick)
{
	uint64_t lo = k ? 1ull << (7 * k) : 0;
	uint64_t hi = k == 9 ? UINT64_MAX : (1ull << (7 * (k + 1))) - 1;
	switch (pick % 3) {
	case 0: return lo;
	case 1: return hi;
	default: return lo + rnd() % (hi - lo);
	}
}

static void test_varint_widths(void)
{
	enum { N = 3000 };
	struct mtev_rec *recs = calloc(N, sizeof *recs);
	size_t i, base = 0, len = 0, want = 0, bad = 0, got = 0;
	uint64_t time = 0, addr = 0;
	uint8_t *buf = encode(recs, 0, &base);
	int err;

	free(buf);
	for (i = 0; i < N; i++) {
		struct mtev_rec *r = &recs[i];
		unsigned k = (unsigned)(i % 10), j = (unsigned)(i / 10);
		if (i & 1) {
			r->kind = MTEV_SPAN;
			r->span.tid = (uint32_t)of_width(k < 5 ? k : j % 5, j);
			r->span.depth = (uint32_t)of_width((k + 1) % 5, j + 1);
			r->span.begin = of_width(k, j);
			uint64_t dur = of_width((k + 3) % 10, j + 2);
			if (dur > UINT64_MAX - r->span.begin)
				dur = UINT64_MAX - r->span.begin;
			r->span.end = r->span.begin + dur;
			r->span.func = of_width((k + 5) % 10, j + 1);
			r->span.callsite = of_width((k + 7) % 10, j);
			r->span.flags = (uint32_t)of_width((k + 2) % 5, j);
			r->span.name = mtev_cstr("");
			want += 2 + uvlen(r->span.tid) + uvlen(r->span.depth) + uvlen(r->span.begin) +
				uvlen(dur) + uvlen(r->span.func) + uvlen(r->span.callsite) +
				uvlen(r->span.flags) + 1;
		} else {
			r->kind = MTEV_BRANCH;
			r->br.type = MTEV_BR_JUMP;
			r->br.tid = 7;
			r->br.time = time += of_width(k, j) >> 1;
			r->br.from = of_width((k + 4) % 10, j);
			r->br.to = (j & 1) ? r->br.from - of_width((k + 6) % 10, j + 1) : of_width((k + 8) % 10, j);
			if (!r->br.to)
				r->br.to = 1;
			addr = r->br.to;
		}
	}
	(void)addr;
	buf = encode(recs, N, &len);
	mtev_reader *rd = buf ? mtev_reader_alloc_mem(buf, len, &err) : NULL;
	struct mtev_rec x;
	while (rd && mtev_read(rd, &x) > 0 && got < N) {
		const struct mtev_rec *e = &recs[got++];
		if (x.kind != e->kind)
			bad++;
		else if (x.kind == MTEV_SPAN)
			bad += x.span.tid != e->span.tid || x.span.depth != e->span.depth ||
			       x.span.begin != e->span.begin || x.span.end != e->span.end ||
			       x.span.func != e->span.func || x.span.callsite != e->span.callsite ||
			       x.span.flags != e->span.flags;
		else
			bad += x.br.time != e->br.time || x.br.from != e->br.from || x.br.to != e->br.to;
	}
	T_CHECK(rd && got == N && !bad, "every width: %zu records read back, %zu differ", got, bad);
	/* spans counted byte by byte; the branches are the rest */
	size_t spans_and_base = base + want, rest = len - spans_and_base;
	size_t bwant = 0;
	uint64_t t0 = 0, a0 = 0;
	for (i = 0; i < N; i += 2) {
		const struct mtev_rec *r = &recs[i];
		size_t pl = (i ? 0 : uvlen(7)) + uvlen((uint64_t)((r->br.time - t0) << 1)) +
			    uvlen(((uint64_t)(r->br.from - a0) << 1) ^ (uint64_t)((int64_t)(r->br.from - a0) >> 63)) +
			    uvlen(((uint64_t)(r->br.to - r->br.from) << 1) ^
				  (uint64_t)((int64_t)(r->br.to - r->br.from) >> 63));
		bwant += 2 + pl;
		t0 = r->br.time;
		a0 = r->br.to;
	}
	T_CHECK(len > spans_and_base && rest == bwant,
		"the shortest encodings: %zu bytes, %zu counted", len, spans_and_base + bwant);
	mtev_reader_free(rd);
	free(buf);
	free(recs);
}

/* What a reader gives, step by step, folded into a hash: every return value,
 * record kind, branch field and offset.  @batch: runs of branches through
 * mtev_read_branches (up to a random count each time), the rest through
 * mtev_read; *nbatched counts what the batches gave. */
static uint64_t read_digest(const uint8_t *buf, size_t len, int fd, int batch, size_t *nbatched)
{
	int err, n = 1;
	mtev_reader *r = fd >= 0 ? mtev_reader_alloc(fd, &err) : mtev_reader_alloc_mem(buf, len, &err);
	uint64_t h = 1469598103934665603ull, steps = 0;
	struct mtev_rec one, many[300];
	uint64_t off[300];
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
	if (!r)
		return (uint64_t)err;
	while (n > 0 && steps < 1000000) {
		size_t k = batch ? mtev_read_branches(r, many, off, 1 + (size_t)(rnd() % 300)) : 0;
		const struct mtev_rec *x = many;
		if (!k) {
			n = mtev_read(r, &one);
			MIX(n);
			if (n <= 0) {
				MIX(mtev_reader_offset(r));
				break;
			}
			x = &one;
			k = 1;
			off[0] = mtev_reader_offset(r);
		} else {
			*nbatched += k;
			if (mtev_reader_offset(r) != off[k - 1])
				MIX(0xbad);
		}
		for (size_t i = 0; i < k; i++, steps++) {
			if (x != &one)
				MIX(1); /* as mtev_read's return */
			MIX(x[i].kind);
			MIX(off[i]);
			if (x[i].kind == MTEV_BRANCH) {
				MIX(x[i].br.type);
				MIX(x[i].br.tid);
				MIX(x[i].br.time);
				MIX(x[i].br.from);
				MIX(x[i].br.to);
			}
		}
	}
#undef MIX
	mtev_reader_free(r);
	return h;
}

/* mtev_read_branches against mtev_read: the same records, offsets and end
 * (or error, at the same offset) on a stream of branch runs, read from
 * memory and through a file descriptor (the reader's buffer ends inside
 * records), cut at random points and with random bytes changed. */
static void test_read_branches(void)
{
	enum { N = 20000 };
	struct mtev_rec *recs = calloc(N, sizeof *recs);
	size_t len = 0, nb = 0, nb_fd = 0, differ = 0, k;
	branch_mix(recs, N);
	uint8_t *buf = encode(recs, N, &len), *cb = malloc(len);
	T_CHECK(buf && cb && len > 100000, "a stream of %zu bytes of branch runs", len);
	if (!buf || !cb)
		return;
	uint64_t ha = read_digest(buf, len, -1, 0, &nb), hb = read_digest(buf, len, -1, 1, &nb);
	FILE *f = tmpfile();
	fwrite(buf, 1, len, f);
	fflush(f);
	rewind(f);
	uint64_t hc = read_digest(NULL, 0, fileno(f), 1, &nb_fd);
	fclose(f);
	T_CHECK(ha == hb && ha == hc && nb > N * 8 / 10 && nb_fd > N * 7 / 10,
		"mtev_read_branches reads what mtev_read reads (%zu of %d records in batches from memory, "
		"%zu through a file)", nb, N, nb_fd);
	for (k = 0; k < 400; k++) {
		size_t cut = 17 + (size_t)(rnd() % (len - 17)), dummy = 0;
		memcpy(cb, buf, len);
		if (k % 2)
			for (int j = 0; j < 3; j++)
				cb[17 + rnd() % (len - 17)] = (uint8_t)rnd();
		size_t l = k % 2 ? len : cut;
		differ += read_digest(cb, l, -1, 0, &dummy) != read_digest(cb, l, -1, 1, &dummy);
	}
	T_CHECK(differ == 0, "the same records, offsets and errors on 200 cut and 200 corrupted streams "
		"(%zu differ)", differ);
	free(cb);
	free(buf);
	free(recs);
}

int main(void)
{
	struct mtev_rec *recs = calloc(N_RECS, sizeof *recs);
	size_t len = 0;
	uint8_t *buf;

	make_records(recs, N_RECS);
	buf = encode(recs, N_RECS, &len);
	T_CHECK(buf != NULL, "encoded %d records into %zu bytes", N_RECS, len);
	check_round_trip(recs, N_RECS, buf, len);
	check_truncation(buf, len);
	check_corruption(buf, len);
	check_writer_refuses();
	test_name_refs();
	test_short_waypoints();
	test_write_upto();
	test_varint_widths();
	test_read_branches();
	free(buf);
	free(recs);
	return T_DONE();
}
