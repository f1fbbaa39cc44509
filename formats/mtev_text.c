/* MTEV text form: formatting and parsing. */
#include "mtev_text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const span_flag_names[] = {
	"inferred-start", "open-at-end", "untraced", "error", "inline",
	"stitched",	  "interrupt",	 "syscall",  "sampled",	"callchain",
	"min-depth",
};
#define N_SPAN_FLAGS (sizeof span_flag_names / sizeof *span_flag_names)

const char *mtev_span_flag_name(unsigned bit)
{
	return bit < N_SPAN_FLAGS ? span_flag_names[bit] : NULL;
}

/* ---- formatting ---- */

static int grow(struct mtev_line *o, size_t extra)
{
	if (o->len + extra + 1 <= o->cap)
		return 0;
	size_t nc = o->cap ? o->cap : 256;
	while (nc < o->len + extra + 1)
		nc *= 2;
	char *np = realloc(o->p, nc);
	if (!np)
		return -MTEV_ENOMEM;
	o->p = np;
	o->cap = nc;
	return 0;
}

__attribute__((format(printf, 2, 3))) static int add(struct mtev_line *o, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = o->cap - o->len;
		va_start(ap, fmt);
		int n = vsnprintf(o->p + o->len, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -MTEV_EINVAL;
		if ((size_t)n < room) {
			o->len += (size_t)n;
			return 0;
		}
		if (grow(o, (size_t)n + 1))
			return -MTEV_ENOMEM;
	}
}

static int add_str(struct mtev_line *o, const char *key, struct mtev_str s)
{
	if (grow(o, strlen(key) + 4 + (size_t)s.len * 4))
		return -MTEV_ENOMEM;
	o->len += (size_t)sprintf(o->p + o->len, " %s=\"", key);
	for (uint32_t i = 0; i < s.len; i++) {
		unsigned char c = (unsigned char)s.p[i];
		char *d = o->p + o->len;
		if (c == '"' || c == '\\') {
			d[0] = '\\';
			d[1] = (char)c;
			o->len += 2;
		} else if (c < 0x20 || c >= 0x7f) {
			o->len += (size_t)sprintf(d, "\\x%02x", c);
		} else {
			d[0] = (char)c;
			o->len++;
		}
	}
	o->p[o->len++] = '"';
	o->p[o->len] = 0;
	return 0;
}

static int add_hexbytes(struct mtev_line *o, const char *key, const uint8_t *b, size_t n)
{
	if (add(o, " %s=", key))
		return -MTEV_ENOMEM;
	if (!n)
		return add(o, "-");
	for (size_t i = 0; i < n; i++)
		if (add(o, "%02x", b[i]))
			return -MTEV_ENOMEM;
	return 0;
}

static int add_span_flags(struct mtev_line *o, uint32_t flags)
{
	if (add(o, " flags="))
		return -MTEV_ENOMEM;
	if (!flags)
		return add(o, "0");
	int first = 1;
	for (unsigned b = 0; b < 32; b++) {
		if (!(flags & (1u << b)))
			continue;
		const char *n = mtev_span_flag_name(b);
		int r = n ? add(o, "%s%s", first ? "" : ",", n)
			  : add(o, "%s0x%x", first ? "" : ",", 1u << b);
		if (r)
			return r;
		first = 0;
	}
	return 0;
}

int mtev_text_format_header(struct mtev_line *o, const struct mtev_header *h)
{
	o->len = 0;
	if (grow(o, 64))
		return -MTEV_ENOMEM;
	if (add(o, "mtev version=%u", h->version))
		return -MTEV_ENOMEM;
	if (add_str(o, "producer", mtev_cstr(h->producer)))
		return -MTEV_ENOMEM;
	return add(o, " flags=0x%" PRIx32, h->flags);
}

int mtev_text_format(struct mtev_line *o, const struct mtev_rec *r)
{
	int e = 0;
	o->len = 0;
	if (grow(o, 64))
		return -MTEV_ENOMEM;
	switch (r->kind) {
	case MTEV_CLOCK:
		e = add(o, "clock zero=%" PRIu64 " mult=%" PRIu64 " shift=%" PRIu64 " tsc_hz=%" PRIu64
			   " flags=%" PRIu64,
			r->clock.time_zero, r->clock.time_mult, r->clock.time_shift, r->clock.tsc_hz,
			r->clock.flags);
		break;
	case MTEV_PROCESS:
		e = add(o, "process pid=%" PRIu32, r->process.pid);
		e = e ? e : add_str(o, "name", r->process.name);
		break;
	case MTEV_THREAD:
		e = add(o, "thread pid=%" PRIu32 " tid=%" PRIu32 " time=%" PRIu64, r->thread.pid,
			r->thread.tid, r->thread.time);
		e = e ? e : add_str(o, "name", r->thread.name);
		break;
	case MTEV_MAP:
		e = add(o,
			"map pid=%" PRIu32 " time=%" PRIu64 " start=0x%" PRIx64 " len=0x%" PRIx64
			" pgoff=0x%" PRIx64 " prot=0x%" PRIx32,
			r->map.pid, r->map.time, r->map.start, r->map.len, r->map.pgoff, r->map.prot);
		e = e ? e : add_hexbytes(o, "build_id", r->map.build_id, r->map.build_id_len);
		e = e ? e : add_str(o, "path", r->map.path);
		break;
	case MTEV_TRIGGER:
		e = add(o,
			"trigger pid=%" PRIu32 " tid=%" PRIu32 " time=%" PRIu64 " addr=0x%" PRIx64
			" arg0=0x%" PRIx64 " arg1=0x%" PRIx64,
			r->trigger.pid, r->trigger.tid, r->trigger.time, r->trigger.addr,
			r->trigger.arg0, r->trigger.arg1);
		e = e ? e : add_str(o, "symbol", r->trigger.symbol);
		break;
	case MTEV_STRING:
		e = add(o, "string id=%" PRIu32, r->string.id);
		e = e ? e : add_str(o, "text", r->string.text);
		break;
	case MTEV_BRANCH:
		e = add(o, "branch tid=%" PRIu32 " time=%" PRIu64 " type=%s from=0x%" PRIx64 " to=0x%" PRIx64,
			r->br.tid, r->br.time, mtev_branch_name(r->br.type), r->br.from, r->br.to);
		break;
	case MTEV_SAMPLE:
		e = add(o, "sample pid=%" PRIu32 " tid=%" PRIu32 " time=%" PRIu64 " ips=", r->sample.pid,
			r->sample.tid, r->sample.time);
		if (!e && !r->sample.nips)
			e = add(o, "-");
		for (uint32_t i = 0; !e && i < r->sample.nips; i++)
			e = add(o, "%s0x%" PRIx64, i ? "," : "", r->sample.ips[i]);
		if (!e && r->sample.flags)
			e = add(o, " flags=%" PRIu32, r->sample.flags);
		break;
	case MTEV_GAP: {
		const char *rn = mtev_gap_name(r->gap.reason);
		e = add(o, "gap tid=%" PRIu32 " begin=%" PRIu64 " end=%" PRIu64, r->gap.tid,
			r->gap.begin, r->gap.end);
		if (!e)
			e = rn ? add(o, " reason=%s", rn) : add(o, " reason=%u", r->gap.reason);
		if (!e)
			e = add(o, " code=%" PRId32, r->gap.code);
		if (!e)
			e = r->gap.offset == UINT64_MAX ? add(o, " offset=-")
							: add(o, " offset=0x%" PRIx64, r->gap.offset);
		if (!e)
			e = add(o, " ip=0x%" PRIx64, r->gap.ip);
		e = e ? e : add_str(o, "message", r->gap.message);
		break;
	}
	case MTEV_SEGMENT: {
		const char *rn = r->segment.reason ? mtev_gap_name(r->segment.reason) : "start";
		e = add(o, "segment tid=%" PRIu32 " index=%" PRIu32 " begin=%" PRIu64 " end=%" PRIu64,
			r->segment.tid, r->segment.index, r->segment.begin, r->segment.end);
		if (!e)
			e = rn ? add(o, " reason=%s", rn) : add(o, " reason=%u", r->segment.reason);
		break;
	}
	case MTEV_SPAN:
		e = add(o,
			"span tid=%" PRIu32 " depth=%" PRIu32 " begin=%" PRIu64 " end=%" PRIu64
			" func=0x%" PRIx64 " callsite=0x%" PRIx64,
			r->span.tid, r->span.depth, r->span.begin, r->span.end, r->span.func,
			r->span.callsite);
		e = e ? e : add_span_flags(o, r->span.flags);
		e = e ? e : add_str(o, "name", r->span.name);
		if (!e && r->span.name_id)
			e = add(o, " name_id=%" PRIu32, r->span.name_id);
		break;
	case MTEV_WAYPOINT:
		e = add(o, "waypoint tid=%" PRIu32 " depth=%" PRIu32 " time=%" PRIu64 " addr=0x%" PRIx64,
			r->waypoint.tid, r->waypoint.depth, r->waypoint.time, r->waypoint.addr);
		break;
	case MTEV_SYMBOL:
		e = add(o, "symbol addr=0x%" PRIx64 " entry=0x%" PRIx64, r->symbol.addr, r->symbol.entry);
		for (uint32_t i = 0; !e && i < r->symbol.nframes; i++) {
			const struct mtev_frame *f = &r->symbol.frames[i];
			e = add_str(o, "frame", f->name);
			e = e ? e : add_str(o, "file", f->file);
			e = e ? e : add(o, " line=%" PRIu32 " column=%" PRIu32, f->line, f->column);
		}
		break;
	case MTEV_KIND_RAW:
		e = add(o, "raw kind=0x%02x", r->raw.kind);
		e = e ? e : add_hexbytes(o, "data", r->raw.data, r->raw.len);
		break;
	default:
		return -MTEV_EINVAL;
	}
	return e;
}

/* ---- parsing ---- */

void mtev_text_parser_fini(struct mtev_text_parser *tp)
{
	free(tp->sbuf);
	free(tp->ips);
	free(tp->frames);
	free(tp->raw);
	memset(tp, 0, sizeof *tp);
}

struct lex {
	const char *p, *end;
	struct mtev_text_parser *tp;
};

__attribute__((format(printf, 2, 3))) static int fail(struct mtev_text_parser *tp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tp->err, sizeof tp->err, fmt, ap);
	va_end(ap);
	return MTEV_TEXT_ERROR;
}

static void skip_ws(struct lex *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\r'))
		l->p++;
}

/* Next "key=value" token.  Strings are unescaped into the parser's buffer;
 * string offsets are stored because the buffer may move while growing. */
struct tok {
	const char *key;
	size_t klen;
	const char *val; /* raw (unquoted) value, for non-strings */
	size_t vlen;
	int is_str;
	size_t soff, slen; /* string value in tp->sbuf */
};

static int sbuf_put(struct mtev_text_parser *tp, char c)
{
	if (tp->slen + 1 > tp->scap) {
		size_t nc = tp->scap ? tp->scap * 2 : 256;
		char *nb = realloc(tp->sbuf, nc);
		if (!nb)
			return -1;
		tp->sbuf = nb;
		tp->scap = nc;
	}
	tp->sbuf[tp->slen++] = c;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* 1: token; 0: end of line; -1: error */
static int next_tok(struct lex *l, struct tok *t)
{
	skip_ws(l);
	if (l->p >= l->end)
		return 0;
	t->key = l->p;
	while (l->p < l->end && *l->p != '=' && *l->p != ' ' && *l->p != '\t')
		l->p++;
	t->klen = (size_t)(l->p - t->key);
	if (l->p >= l->end || *l->p != '=') {
		fail(l->tp, "expected key=value at '%.*s'", (int)t->klen, t->key);
		return -1;
	}
	l->p++;
	t->is_str = 0;
	if (l->p < l->end && *l->p == '"') {
		l->p++;
		t->is_str = 1;
		t->soff = l->tp->slen;
		for (;;) {
			if (l->p >= l->end) {
				fail(l->tp, "unterminated string for '%.*s'", (int)t->klen, t->key);
				return -1;
			}
			char c = *l->p++;
			if (c == '"')
				break;
			if (c == '\\') {
				if (l->p >= l->end) {
					fail(l->tp, "bad escape");
					return -1;
				}
				char d = *l->p++;
				if (d == 'x') {
					int h1 = l->end - l->p >= 2 ? hexval(l->p[0]) : -1;
					int h2 = l->end - l->p >= 2 ? hexval(l->p[1]) : -1;
					if (h1 < 0 || h2 < 0) {
						fail(l->tp, "bad \\x escape");
						return -1;
					}
					c = (char)(h1 * 16 + h2);
					l->p += 2;
				} else if (d == 'n') {
					c = '\n';
				} else if (d == 't') {
					c = '\t';
				} else if (d == '"' || d == '\\') {
					c = d;
				} else {
					fail(l->tp, "bad escape \\%c", d);
					return -1;
				}
			}
			if (sbuf_put(l->tp, c)) {
				fail(l->tp, "out of memory");
				return -1;
			}
		}
		t->slen = l->tp->slen - t->soff;
		t->val = NULL;
		t->vlen = 0;
		if (l->p < l->end && *l->p != ' ' && *l->p != '\t' && *l->p != '\r') {
			fail(l->tp, "junk after string for '%.*s'", (int)t->klen, t->key);
			return -1;
		}
	} else {
		t->val = l->p;
		while (l->p < l->end && *l->p != ' ' && *l->p != '\t' && *l->p != '\r')
			l->p++;
		t->vlen = (size_t)(l->p - t->val);
	}
	return 1;
}

static int keyis(const struct tok *t, const char *k)
{
	return strlen(k) == t->klen && !memcmp(t->key, k, t->klen);
}

/* Unsigned number: decimal, or hex with 0x. */
static int num(struct mtev_text_parser *tp, const struct tok *t, uint64_t max, uint64_t *out)
{
	char tmp[32];
	if (t->is_str || !t->vlen || t->vlen >= sizeof tmp)
		return fail(tp, "bad number for '%.*s'", (int)t->klen, t->key);
	memcpy(tmp, t->val, t->vlen);
	tmp[t->vlen] = 0;
	if (tmp[0] == '-' || tmp[0] == '+')
		return fail(tp, "bad number for '%.*s'", (int)t->klen, t->key);
	char *e;
	errno = 0;
	unsigned long long v = strtoull(tmp, &e, 0);
	if (errno || *e || v > max)
		return fail(tp, "bad number '%s' for '%.*s'", tmp, (int)t->klen, t->key);
	*out = v;
	return 0;
}

static int snum(struct mtev_text_parser *tp, const struct tok *t, int64_t *out)
{
	char tmp[32];
	if (t->is_str || !t->vlen || t->vlen >= sizeof tmp)
		return fail(tp, "bad number for '%.*s'", (int)t->klen, t->key);
	memcpy(tmp, t->val, t->vlen);
	tmp[t->vlen] = 0;
	char *e;
	errno = 0;
	long long v = strtoll(tmp, &e, 0);
	if (errno || *e)
		return fail(tp, "bad number '%s' for '%.*s'", tmp, (int)t->klen, t->key);
	*out = v;
	return 0;
}

#define U32 UINT32_MAX
#define U64 UINT64_MAX

/* Field tables: for each kind, key -> offset in the record of a u32 or u64. */
struct field {
	const char *key;
	size_t off;
	int is64;
};

#define F32(k, m) {k, offsetof(struct mtev_rec, m), 0}
#define F64(k, m) {k, offsetof(struct mtev_rec, m), 1}

static const struct field f_clock[] = {F64("zero", clock.time_zero), F64("mult", clock.time_mult),
				       F64("shift", clock.time_shift), F64("tsc_hz", clock.tsc_hz),
				       F64("flags", clock.flags), {0}};
static const struct field f_process[] = {F32("pid", process.pid), {0}};
static const struct field f_thread[] = {F32("pid", thread.pid), F32("tid", thread.tid),
					F64("time", thread.time), {0}};
static const struct field f_map[] = {F32("pid", map.pid),     F64("time", map.time),
				     F64("start", map.start), F64("len", map.len),
				     F64("pgoff", map.pgoff), F32("prot", map.prot),
				     {0}};
static const struct field f_trigger[] = {F32("pid", trigger.pid),   F32("tid", trigger.tid),
					 F64("time", trigger.time), F64("addr", trigger.addr),
					 F64("arg0", trigger.arg0), F64("arg1", trigger.arg1),
					 {0}};
static const struct field f_string[] = {F32("id", string.id), {0}};
static const struct field f_branch[] = {F32("tid", br.tid), F64("time", br.time),
					F64("from", br.from), F64("to", br.to), {0}};
static const struct field f_sample[] = {F32("pid", sample.pid), F32("tid", sample.tid),
					F64("time", sample.time), F32("flags", sample.flags), {0}};
static const struct field f_gap[] = {F32("tid", gap.tid), F64("begin", gap.begin),
				     F64("end", gap.end), F64("ip", gap.ip), {0}};
static const struct field f_segment[] = {F32("tid", segment.tid), F32("index", segment.index),
					 F64("begin", segment.begin), F64("end", segment.end), {0}};
static const struct field f_span[] = {F32("tid", span.tid),	      F32("depth", span.depth),
				      F64("begin", span.begin),	      F64("end", span.end),
				      F64("func", span.func),	      F64("callsite", span.callsite),
				      F32("name_id", span.name_id),   {0}};
static const struct field f_waypoint[] = {F32("tid", waypoint.tid), F32("depth", waypoint.depth),
					  F64("time", waypoint.time), F64("addr", waypoint.addr), {0}};
static const struct field f_symbol[] = {F64("addr", symbol.addr), F64("entry", symbol.entry), {0}};

static const struct {
	const char *name;
	unsigned kind;
	const struct field *fields;
} kinds[] = {
	{"clock", MTEV_CLOCK, f_clock},		{"process", MTEV_PROCESS, f_process},
	{"thread", MTEV_THREAD, f_thread},	{"map", MTEV_MAP, f_map},
	{"trigger", MTEV_TRIGGER, f_trigger},	{"string", MTEV_STRING, f_string},
	{"branch", MTEV_BRANCH, f_branch},	{"sample", MTEV_SAMPLE, f_sample},
	{"gap", MTEV_GAP, f_gap},		{"segment", MTEV_SEGMENT, f_segment},
	{"span", MTEV_SPAN, f_span},		{"waypoint", MTEV_WAYPOINT, f_waypoint},
	{"symbol", MTEV_SYMBOL, f_symbol},	{"raw", MTEV_KIND_RAW, NULL},
};

static int set_field(struct mtev_text_parser *tp, const struct field *fs, const struct tok *t,
		     struct mtev_rec *rec)
{
	for (const struct field *f = fs; f && f->key; f++) {
		if (!keyis(t, f->key))
			continue;
		uint64_t v;
		if (num(tp, t, f->is64 ? U64 : U32, &v))
			return -1;
		if (f->is64)
			*(uint64_t *)((char *)rec + f->off) = v;
		else
			*(uint32_t *)((char *)rec + f->off) = (uint32_t)v;
		return 1;
	}
	return 0;
}

static int parse_hexbytes(struct mtev_text_parser *tp, const struct tok *t, uint8_t *out,
			  size_t max, size_t *n)
{
	if (t->is_str)
		return fail(tp, "bad hex for '%.*s'", (int)t->klen, t->key);
	if (t->vlen == 1 && t->val[0] == '-') {
		*n = 0;
		return 0;
	}
	if (t->vlen % 2 || t->vlen / 2 > max)
		return fail(tp, "bad hex length for '%.*s'", (int)t->klen, t->key);
	for (size_t i = 0; i < t->vlen / 2; i++) {
		int a = hexval(t->val[2 * i]), b = hexval(t->val[2 * i + 1]);
		if (a < 0 || b < 0)
			return fail(tp, "bad hex for '%.*s'", (int)t->klen, t->key);
		out[i] = (uint8_t)(a * 16 + b);
	}
	*n = t->vlen / 2;
	return 0;
}

static int parse_span_flags(struct mtev_text_parser *tp, const struct tok *t, uint32_t *out)
{
	uint32_t f = 0;
	if (t->is_str || !t->vlen) /* a string has no val: no pointer arithmetic on NULL */
		return fail(tp, "bad flags");
	const char *p = t->val, *end = t->val + t->vlen;
	while (p < end) {
		const char *q = p;
		while (q < end && *q != ',' && *q != '|')
			q++;
		size_t n = (size_t)(q - p);
		int found = 0;
		for (unsigned b = 0; b < N_SPAN_FLAGS; b++)
			if (strlen(span_flag_names[b]) == n && !memcmp(span_flag_names[b], p, n)) {
				f |= 1u << b;
				found = 1;
			}
		if (!found) {
			struct tok nt = *t;
			nt.val = p;
			nt.vlen = n;
			uint64_t v;
			if (num(tp, &nt, U32, &v))
				return fail(tp, "unknown span flag '%.*s'", (int)n, p);
			f |= (uint32_t)v;
		}
		p = q < end ? q + 1 : q;
	}
	*out = f;
	return 0;
}

/* Strings are recorded as offsets during the parse and turned into pointers
 * at the end, because tp->sbuf may move. */
struct strfix {
	struct mtev_str *dst;
	size_t off, len;
};

/* One record line being parsed: what the keys read so far leave for the end. */
struct pstate {
	struct mtev_text_parser *tp;
	struct mtev_rec *rec;
	struct strfix fix[8];
	size_t nfix, nips, nframes, rawlen;
	int have_rawkind;
	size_t *fr_off; /* per frame: name offset, length, file offset, length */
	size_t fr_cap;
};

/* The "mtev ..." header line. */
static int parse_header(struct mtev_text_parser *tp, struct lex *l, struct mtev_header *hdr)
{
	struct tok t;
	int r;
	memset(hdr, 0, sizeof *hdr);
	hdr->version = MTEV_VERSION;
	while ((r = next_tok(l, &t)) > 0) {
		uint64_t v;
		if (keyis(&t, "version")) {
			if (num(tp, &t, 0xffff, &v))
				return MTEV_TEXT_ERROR;
			hdr->version = (uint16_t)v;
		} else if (keyis(&t, "flags")) {
			if (num(tp, &t, U32, &v))
				return MTEV_TEXT_ERROR;
			hdr->flags = (uint32_t)v;
		} else if (keyis(&t, "producer") && t.is_str) {
			if (t.slen > 63)
				return fail(tp, "producer longer than 63 bytes");
			if (t.slen) /* sbuf is NULL until a string has a byte */
				memcpy(hdr->producer, tp->sbuf + t.soff, t.slen);
			hdr->producer[t.slen] = 0;
		} else {
			return fail(tp, "unknown header key '%.*s'", (int)t.klen, t.key);
		}
	}
	return r < 0 ? MTEV_TEXT_ERROR : MTEV_TEXT_HEADER;
}

/* The record's one string field of key @t, or NULL. */
static struct mtev_str *str_field(struct mtev_rec *rec, const struct tok *t)
{
	switch (rec->kind) {
	case MTEV_PROCESS:
		return keyis(t, "name") ? &rec->process.name : NULL;
	case MTEV_THREAD:
		return keyis(t, "name") ? &rec->thread.name : NULL;
	case MTEV_MAP:
		return keyis(t, "path") ? &rec->map.path : NULL;
	case MTEV_TRIGGER:
		return keyis(t, "symbol") ? &rec->trigger.symbol : NULL;
	case MTEV_STRING:
		return keyis(t, "text") ? &rec->string.text : NULL;
	case MTEV_GAP:
		return keyis(t, "message") ? &rec->gap.message : NULL;
	case MTEV_SPAN:
		return keyis(t, "name") ? &rec->span.name : NULL;
	default:
		return NULL;
	}
}

/* A gap's or a segment's reason: a name, "start" (segments), or a number. */
static int parse_reason(struct pstate *ps, const struct tok *t)
{
	struct mtev_rec *rec = ps->rec;
	int rs = t->is_str ? -1 : mtev_gap_from_name(t->val, t->vlen);
	if (rec->kind == MTEV_SEGMENT && !t->is_str && t->vlen == 5 && !memcmp(t->val, "start", 5))
		rs = 0;
	if (rs < 0) {
		uint64_t v;
		if (num(ps->tp, t, U32, &v))
			return -1;
		rs = (int)v;
	}
	if (rec->kind == MTEV_GAP)
		rec->gap.reason = (unsigned)rs;
	else
		rec->segment.reason = (unsigned)rs;
	return 0;
}

/* A gap's code (signed, 32 bits) or offset ("-" for none). */
static int parse_gap_key(struct pstate *ps, const struct tok *t)
{
	if (keyis(t, "code")) {
		int64_t v = 0;
		if (snum(ps->tp, t, &v))
			return -1;
		if (v < INT32_MIN || v > INT32_MAX)
			return fail(ps->tp, "code out of range"), -1;
		ps->rec->gap.code = (int32_t)v;
		return 0;
	}
	uint64_t v;
	if (t->vlen == 1 && t->val && t->val[0] == '-')
		v = UINT64_MAX;
	else if (num(ps->tp, t, U64, &v))
		return -1;
	ps->rec->gap.offset = v;
	return 0;
}

/* A sample's "ips=A,B,..." ("-" for none) into tp->ips. */
static int parse_ips(struct pstate *ps, const struct tok *t)
{
	struct mtev_text_parser *tp = ps->tp;
	if (t->is_str)
		return fail(tp, "bad ips"), -1;
	ps->nips = 0;
	if (t->vlen == 1 && t->val[0] == '-')
		return 0;
	const char *p = t->val, *end = t->val + t->vlen;
	while (p <= end) {
		const char *q = p;
		while (q < end && *q != ',')
			q++;
		struct tok nt = *t;
		nt.val = p;
		nt.vlen = (size_t)(q - p);
		uint64_t v;
		if (num(tp, &nt, U64, &v))
			return -1;
		if (ps->nips == tp->ips_cap) {
			size_t nc = tp->ips_cap ? tp->ips_cap * 2 : 64;
			uint64_t *ni = realloc(tp->ips, nc * sizeof *ni);
			if (!ni)
				return fail(tp, "out of memory"), -1;
			tp->ips = ni;
			tp->ips_cap = nc;
		}
		tp->ips[ps->nips++] = v;
		p = q + 1;
	}
	return 0;
}

/* A symbol's "frame" string: a new frame (its file, line, column follow). */
static int add_frame(struct pstate *ps, const struct tok *t)
{
	struct mtev_text_parser *tp = ps->tp;
	if (!t->is_str)
		return fail(tp, "frame needs a string"), -1;
	size_t n = ps->nframes;
	if (n == tp->frames_cap) {
		size_t nc = tp->frames_cap ? tp->frames_cap * 2 : 8;
		struct mtev_frame *nf = realloc(tp->frames, nc * sizeof *nf);
		if (!nf)
			return fail(tp, "out of memory"), -1;
		tp->frames = nf;
		tp->frames_cap = nc;
	}
	if (n + 1 > ps->fr_cap) {
		size_t nc = ps->fr_cap ? ps->fr_cap * 2 : 8;
		size_t *no = realloc(ps->fr_off, nc * 4 * sizeof *no);
		if (!no)
			return fail(tp, "out of memory"), -1;
		ps->fr_off = no;
		ps->fr_cap = nc;
	}
	memset(&tp->frames[n], 0, sizeof tp->frames[n]);
	ps->fr_off[4 * n + 0] = t->soff;
	ps->fr_off[4 * n + 1] = t->slen;
	ps->fr_off[4 * n + 2] = 0;
	ps->fr_off[4 * n + 3] = 0;
	ps->nframes++;
	return 0;
}

/* A symbol's key: frame, or the last frame's file, line or column. */
static int parse_symbol_key(struct pstate *ps, const struct tok *t)
{
	struct mtev_text_parser *tp = ps->tp;
	if (keyis(t, "frame"))
		return add_frame(ps, t);
	if (!ps->nframes)
		return fail(tp, "'%.*s' before any frame", (int)t->klen, t->key), -1;
	size_t last = ps->nframes - 1;
	if (keyis(t, "file")) {
		if (!t->is_str)
			return fail(tp, "file needs a string"), -1;
		ps->fr_off[4 * last + 2] = t->soff;
		ps->fr_off[4 * last + 3] = t->slen;
		return 0;
	}
	uint64_t v;
	if (num(tp, t, U32, &v))
		return -1;
	if (keyis(t, "line"))
		tp->frames[last].line = (uint32_t)v;
	else
		tp->frames[last].column = (uint32_t)v;
	return 0;
}

/* A raw record's "kind" or "data". */
static int parse_raw_key(struct pstate *ps, const struct tok *t)
{
	struct mtev_text_parser *tp = ps->tp;
	if (keyis(t, "kind")) {
		uint64_t v;
		if (num(tp, t, 0xff, &v))
			return -1;
		ps->rec->raw.kind = (unsigned)v;
		ps->have_rawkind = 1;
		return 0;
	}
	if (t->is_str)
		return fail(tp, "bad data"), -1;
	if (t->vlen / 2 > tp->raw_cap) {
		uint8_t *nr = realloc(tp->raw, t->vlen / 2 + 1);
		if (!nr)
			return fail(tp, "out of memory"), -1;
		tp->raw = nr;
		tp->raw_cap = t->vlen / 2 + 1;
	}
	return parse_hexbytes(tp, t, tp->raw, tp->raw_cap, &ps->rawlen) ? -1 : 0;
}

/* A key that no field table holds: 0 taken, 1 not this kind's, -1 error
 * (tp->err says why). */
static int parse_key(struct pstate *ps, const struct tok *t)
{
	struct mtev_text_parser *tp = ps->tp;
	struct mtev_rec *rec = ps->rec;
	struct mtev_str *dst;
	if (t->is_str && ps->nfix < 8 && (dst = str_field(rec, t))) {
		ps->fix[ps->nfix++] = (struct strfix){dst, t->soff, t->slen};
		return 0;
	}
	switch (rec->kind) {
	case MTEV_BRANCH:
		if (keyis(t, "type")) {
			int ty = t->is_str ? -1 : mtev_branch_from_name(t->val, t->vlen);
			if (ty < 0)
				return fail(tp, "unknown branch type '%.*s'", (int)t->vlen,
					    t->val ? t->val : ""), -1;
			rec->br.type = (unsigned)ty;
			return 0;
		}
		return 1;
	case MTEV_GAP:
		if (keyis(t, "code") || keyis(t, "offset"))
			return parse_gap_key(ps, t);
		/* fall through */
	case MTEV_SEGMENT:
		return keyis(t, "reason") ? parse_reason(ps, t) : 1;
	case MTEV_SPAN:
		if (keyis(t, "flags"))
			return parse_span_flags(tp, t, &rec->span.flags) ? -1 : 0;
		return 1;
	case MTEV_MAP:
		if (keyis(t, "build_id")) {
			size_t n;
			if (parse_hexbytes(tp, t, tp->build_id, 20, &n))
				return -1;
			rec->map.build_id = tp->build_id;
			rec->map.build_id_len = (uint8_t)n;
			return 0;
		}
		return 1;
	case MTEV_SAMPLE:
		return keyis(t, "ips") ? parse_ips(ps, t) : 1;
	case MTEV_SYMBOL:
		if (keyis(t, "frame") || keyis(t, "file") || keyis(t, "line") || keyis(t, "column"))
			return parse_symbol_key(ps, t);
		return 1;
	case MTEV_KIND_RAW:
		return keyis(t, "kind") || keyis(t, "data") ? parse_raw_key(ps, t) : 1;
	default:
		return 1;
	}
}

/* After the last key: the checks across keys, and the pointers into the
 * parser's buffers (they may have moved while the line was read). */
static int finish_record(struct pstate *ps)
{
	struct mtev_text_parser *tp = ps->tp;
	struct mtev_rec *rec = ps->rec;
	if (rec->kind == MTEV_KIND_RAW) {
		if (!ps->have_rawkind)
			return fail(tp, "raw record without kind");
		/* the kinds mtev_write refuses as raw: END, the known kinds, the
		 * string/symbol ranges 0x20-0x3f and the short waypoints 0x40-0x47 */
		if (rec->raw.kind == MTEV_END || mtev_kind_name(rec->raw.kind) ||
		    (rec->raw.kind >= 0x20 && rec->raw.kind <= 0x47))
			return fail(tp, "raw kind 0x%02x is a known kind", rec->raw.kind);
		if (ps->rawlen > MTEV_MAX_PAYLOAD)
			return fail(tp, "raw data longer than %u bytes", MTEV_MAX_PAYLOAD);
		rec->raw.data = tp->raw;
		rec->raw.len = (uint32_t)ps->rawlen;
	}
	if ((rec->kind == MTEV_SPAN && rec->span.end < rec->span.begin) ||
	    (rec->kind == MTEV_GAP && rec->gap.end < rec->gap.begin) ||
	    (rec->kind == MTEV_SEGMENT && rec->segment.end < rec->segment.begin))
		return fail(tp, "end before begin");
	for (size_t i = 0; i < ps->nfix; i++) {
		ps->fix[i].dst->p = tp->sbuf ? tp->sbuf + ps->fix[i].off : NULL;
		ps->fix[i].dst->len = (uint32_t)ps->fix[i].len;
	}
	if (rec->kind == MTEV_SAMPLE) {
		rec->sample.nips = (uint32_t)ps->nips;
		rec->sample.ips = tp->ips;
	}
	if (rec->kind == MTEV_SYMBOL) {
		const char *sb = tp->sbuf ? tp->sbuf : "";
		const size_t *fo = ps->fr_off;
		for (size_t i = 0; i < ps->nframes; i++) {
			tp->frames[i].name = (struct mtev_str){sb + fo[4 * i], (uint32_t)fo[4 * i + 1]};
			tp->frames[i].file = (struct mtev_str){sb + fo[4 * i + 2], (uint32_t)fo[4 * i + 3]};
		}
		rec->symbol.nframes = (uint32_t)ps->nframes;
		rec->symbol.frames = tp->frames;
	}
	return MTEV_TEXT_RECORD;
}

int mtev_text_parse(struct mtev_text_parser *tp, const char *line, size_t len,
		    struct mtev_rec *rec, struct mtev_header *hdr)
{
	struct lex l = {line, line + len, tp};
	tp->slen = 0;
	tp->err[0] = 0;
	skip_ws(&l);
	if (l.p >= l.end || *l.p == '#')
		return MTEV_TEXT_EMPTY;
	const char *kw = l.p;
	while (l.p < l.end && *l.p != ' ' && *l.p != '\t' && *l.p != '\r')
		l.p++;
	size_t kwlen = (size_t)(l.p - kw);

	if (kwlen == 3 && !memcmp(kw, "end", 3)) {
		skip_ws(&l);
		if (l.p < l.end)
			return fail(tp, "junk after 'end'");
		return MTEV_TEXT_END;
	}
	if (kwlen == 4 && !memcmp(kw, "mtev", 4))
		return parse_header(tp, &l, hdr);

	size_t ki;
	for (ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
		if (strlen(kinds[ki].name) == kwlen && !memcmp(kinds[ki].name, kw, kwlen))
			break;
	if (ki == sizeof kinds / sizeof *kinds)
		return fail(tp, "unknown record kind '%.*s'", (int)kwlen, kw);
	memset(rec, 0, sizeof *rec);
	rec->kind = kinds[ki].kind;
	if (rec->kind == MTEV_GAP)
		rec->gap.offset = UINT64_MAX;

	struct pstate ps = {.tp = tp, .rec = rec};
	struct tok t;
	int r, ret = MTEV_TEXT_ERROR;
	while ((r = next_tok(&l, &t)) > 0) {
		int s = set_field(tp, kinds[ki].fields, &t, rec);
		if (s > 0)
			continue;
		if (s == 0)
			s = parse_key(&ps, &t);
		if (s > 0)
			fail(tp, "unknown key '%.*s' for %s", (int)t.klen, t.key, kinds[ki].name);
		if (s != 0)
			goto out;
	}
	if (r == 0)
		ret = finish_record(&ps);
out:
	free(ps.fr_off);
	return ret;
}
