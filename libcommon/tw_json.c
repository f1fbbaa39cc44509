#include "tw.h"

#include <jansson.h>

static void jprintf(tw *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static const char dig2[201] = "0001020304050607080910111213141516171819"
			      "2021222324252627282930313233343536373839"
			      "4041424344454647484950515253545556575859"
			      "6061626364656667686970717273747576777879"
			      "8081828384858687888990919293949596979899";

/* Length of the valid UTF-8 sequence at @p (RFC 3629: no overlongs, no
 * surrogates, at most U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t len)
{
	unsigned c = p[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n > len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t k = 2; k < n; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* JSON string literal (quotes included) of @p, by jansson.  Bytes that are not
 * valid UTF-8 become '?' first (jansson refuses them). */
static int json_quote(tw *t, const char *p, size_t len, uint32_t *off, uint32_t *olen)
{
	char stackbuf[MAX_NAME + 16];
	len = clip(p, len, MAX_NAME);
	json_t *s = json_stringn(p, len);
	if (!s) {
		memcpy(stackbuf, p, len);
		for (size_t i = 0; i < len;) {
			size_t n = utf8_seq((const unsigned char *)stackbuf + i, len - i);
			if (!n)
				stackbuf[i++] = '?';
			else
				i += n;
		}
		s = json_stringn(stackbuf, len);
		if (!s)
			return fail(t, TW_ENOMEM);
	}
	size_t need = json_dumpb(s, NULL, 0, JSON_ENCODE_ANY);
	char *tmp = malloc(need + 1);
	if (!tmp) {
		json_decref(s);
		return fail(t, TW_ENOMEM);
	}
	json_dumpb(s, tmp, need, JSON_ENCODE_ANY);
	json_decref(s);
	int r = arena_add(t, tmp, need, off);
	free(tmp);
	*olen = (uint32_t)need;
	return r;
}

static int jflush(tw *t)
{
	if (t->jlen && zsink_write(t->out, t->jb, t->jlen) < 0)
		return fail(t, TW_EIO);
	t->jflushed += t->jlen;
	t->jlen = 0;
	return 0;
}

static int jroom(tw *t, size_t n)
{
	if (t->jlen + n > JBUF_SIZE)
		return jflush(t);
	return 0;
}

static void jput(tw *t, const char *p, size_t n)
{
	memcpy(t->jb + t->jlen, p, n);
	t->jlen += n;
}

static void jputs(tw *t, const char *s)
{
	jput(t, s, strlen(s));
}

static void jprintf(tw *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->jb + t->jlen, JBUF_SIZE - t->jlen, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->jlen += (size_t)n;
}

/* Writes @v in decimal so that it ends just before @end; returns its start.
 * dec8_back writes exactly 8 digits (leading zeros). */
static inline char *dec32_back(char *end, uint32_t v)
{
	char *p = end;
	while (v >= 100) {
		uint32_t r = v % 100;
		v /= 100;
		p -= 2;
		memcpy(p, dig2 + 2 * r, 2);
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, dig2 + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	return p;
}

static inline char *dec8_back(char *end, uint32_t v)
{
	char *p = end;
	for (int i = 0; i < 4; i++) {
		uint32_t r = v % 100;
		v /= 100;
		p -= 2;
		memcpy(p, dig2 + 2 * r, 2);
	}
	return p;
}

static inline char *dec_back(char *end, uint64_t v)
{
	if (v <= UINT32_MAX)
		return dec32_back(end, (uint32_t)v);
	char *p = dec8_back(end, (uint32_t)(v % 100000000));
	v /= 100000000;
	if (v <= UINT32_MAX)
		return dec32_back(p, (uint32_t)v);
	p = dec8_back(p, (uint32_t)(v % 100000000));
	return dec32_back(p, (uint32_t)(v / 100000000));
}

/* Writes backwards before @e: ","pid":P,"tid":T,"ts": */
static inline char *jids_back(char *p, uint32_t pid, uint32_t tid)
{
	p -= 6;
	memcpy(p, ",\"ts\":", 6);
	p = dec32_back(p, tid);
	p -= 7;
	memcpy(p, ",\"tid\":", 7);
	p = dec32_back(p, pid);
	p -= 8;
	memcpy(p, "\",\"pid\":", 8);
	return p;
}

/* Starts an event object: separator, ph, pid, tid, ts (µs with ns digits).
 * @th (may be NULL) keeps its pid/tid part ready-made. */
static void jevent_th(tw *t, char ph, struct thr *th, uint32_t pid, uint32_t tid, uint64_t ts)
{
	char d[160];
	char *e = d + 96, *p; /* at most 62 bytes before e; 96 are copied */
	jputs(t, t->jfirst ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
	t->jfirst = 0;
	t->jb[t->jlen++] = ph;
	uint64_t us = ts / 1000;
	uint32_t ns = (uint32_t)(ts - us * 1000);
	p = e - 3;
	p[0] = (char)('0' + ns / 100);
	p[1] = (char)('0' + ns / 10 % 10);
	p[2] = (char)('0' + ns % 10);
	*--p = '.';
	p = dec_back(p, us);
	if (th) {
		/* kept right-aligned in th->jids: copied whole, in front of the time */
		if (!th->jids_len || th->jids_pid != pid) {
			char *q = jids_back(th->jids + sizeof th->jids, pid, tid);
			th->jids_len = (uint8_t)(th->jids + sizeof th->jids - q);
			th->jids_pid = pid;
		}
		memcpy(p - sizeof th->jids, th->jids, sizeof th->jids);
		p -= th->jids_len;
	} else {
		p = jids_back(p, pid, tid);
	}
	memcpy(t->jb + t->jlen, p, 64); /* e - p <= 62 */
	t->jlen += (size_t)(e - p);
}

static void jevent(tw *t, char ph, uint32_t pid, uint32_t tid, uint64_t ts)
{
	jevent_th(t, ph, NULL, pid, tid, ts);
}

/* A JSON string literal for a one-off string. */
static int jquote_tmp(tw *t, const char *p, size_t len)
{
	/* fast path: printable ASCII needing no escape is its own literal */
	size_t i = 0;
	while (i < len && (unsigned char)p[i] >= 0x20 && (unsigned char)p[i] < 0x7f && p[i] != '"' &&
	       p[i] != '\\')
		i++;
	if (i == len) {
		t->jb[t->jlen++] = '"';
		jput(t, p, len);
		t->jb[t->jlen++] = '"';
		return 0;
	}
	uint32_t off, n;
	size_t save = t->alen;
	int r = json_quote(t, p, len, &off, &n);
	if (r < 0)
		return r;
	jput(t, t->arena + off, n);
	t->alen = save; /* it was only borrowed */
	return 0;
}

/* JSON: the B event of span @f now; the same name and args go on the E
 * event, which readers like speedscope match by name and args. */
static int json_span_begin(tw *t, struct thr *th, struct frame *f, const struct mtev_rec *r,
			   struct rname *rn)
{
	uint32_t fi = f->fn;
	uint64_t b = r->span.begin;
	struct func *fn = &t->fn[fi];
	if (!fn->ready && func_build(t, fn) < 0)
		return -t->err;
	const char *name = r->span.name.p;
	size_t nlen = r->span.name.len ? clip(name, r->span.name.len, MAX_NAME) : 0;
	unsigned flags = r->span.flags;
	if (jroom(t, 3 * JROOM) < 0)
		return -t->err;
	jevent_th(t, 'B', th, th->pid, th->tid, b);
	size_t tail = t->jlen;
	jputs(t, ",\"cat\":\"span\",\"name\":");
	if (rn) {
		if (!rn->jname_len &&
		    json_quote(t, t->arena + rn->name_off, rn->name_len, &rn->jname_off, &rn->jname_len) < 0)
			return -t->err;
		jput(t, t->arena + rn->jname_off, rn->jname_len);
	} else if (r->span.name.len) {
		if (jquote_tmp(t, name, nlen) < 0)
			return -t->err;
	} else {
		jput(t, t->arena + fn->jname_off, fn->jname_len);
	}
	if (!t->o.no_args) {
		jputs(t, ",\"args\":{");
		const char *sep = "";
		if (fn->addr) {
			jputs(t, "\"loc\":");
			jput(t, t->arena + fn->jloc_off, fn->jloc_len);
			sep = ",";
		}
		if (flags & MTEV_SPAN_INLINE) {
			jputs(t, sep);
			jputs(t, "\"inline\":true");
			sep = ",";
		}
		char ftext[256];
		const char *fp = ftext;
		size_t flen = flags_str(t, flags, ftext, &fp); /* after any arena growth */
		if (flen) {
			jputs(t, sep);
			jputs(t, "\"flags\":\"");
			jput(t, fp, flen); /* flag names need no escaping */
			jputs(t, "\"");
		}
		jputs(t, "}");
	}
	jputs(t, "}");
	/* keep the tail for the E event */
	size_t tl = t->jlen - tail;
	if (th->jlen + tl > th->jcap) {
		size_t nc = th->jcap ? th->jcap * 2 : 4096;
		while (nc < th->jlen + tl)
			nc *= 2;
		char *n = realloc(th->ja, nc);
		if (!n)
			return fail(t, TW_ENOMEM);
		th->ja = n;
		th->jcap = nc;
	}
	f->jtail = (uint32_t)th->jlen;
	memcpy(th->ja + th->jlen, t->jb + tail, tl);
	th->jlen += tl;
	return 0;
}

static int json_func_built(tw *t, struct func *f)
{
	int r;
	if ((r = json_quote(t, t->arena + f->name_off, f->name_len, &f->jname_off,
			    &f->jname_len)) < 0 ||
	    (r = json_quote(t, t->arena + f->loc_off, f->loc_len, &f->jloc_off, &f->jloc_len)) < 0)
		return r;
	return 0;
}

static int json_start(tw *t)
{
	if (jroom(t, 64) < 0)
		return -t->err;
	jputs(t, "{\"traceEvents\":[");
	t->jfirst = 1;
	return 0;
}

#ifdef TW_JBUF_SPARE
/* The fuzz build (mk/fuzz.mk) keeps the last writer's buffer for the next
 * one: under ASan a 256 KiB malloc is a fresh mmap whose shadow is cleared
 * with madvise, and its free a munmap (TLB flushes), twice per fuzz_write
 * execution.  The parked buffer is poisoned, so an access after the writer
 * is closed is still reported (use-after-poison). */
#include <sanitizer/asan_interface.h>
static char *jb_spare;

static char *jb_alloc(void)
{
	char *b = jb_spare;
	if (!b)
		return malloc(JBUF_SIZE);
	jb_spare = NULL;
	ASAN_UNPOISON_MEMORY_REGION(b, JBUF_SIZE);
	return b;
}

static void jb_free(char *b)
{
	if (!b || jb_spare) {
		free(b);
		return;
	}
	ASAN_POISON_MEMORY_REGION(b, JBUF_SIZE);
	jb_spare = b;
}
#else
#define jb_alloc() malloc(JBUF_SIZE)
#define jb_free(b) free(b)
#endif

static int json_open(tw *t)
{
	t->jb = jb_alloc();
	return t->jb ? 0 : -TW_ENOMEM;
}

static void json_close(tw *t)
{
	jb_free(t->jb);
}

static int json_process(tw *t, const struct mtev_rec *r, size_t n)
{
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent(t, 'M', r->process.pid, r->process.pid, 0);
	jputs(t, ",\"cat\":\"__metadata\",\"name\":\"process_name\",\"args\":{\"name\":");
	if (jquote_tmp(t, r->process.name.p, n) < 0)
		return -t->err;
	jputs(t, "}}");
	return 0;
}

static int json_thread(tw *t, struct thr *th, const struct mtev_rec *r, size_t n)
{
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent(t, 'M', th->pid, th->tid, 0);
	jputs(t, ",\"cat\":\"__metadata\",\"name\":\"thread_name\",\"args\":{\"name\":");
	if (jquote_tmp(t, r->thread.name.p, n) < 0)
		return -t->err;
	jputs(t, "}}");
	return 0;
}

/* The E event repeats its B event's name and args (kept in th->ja). */
static int json_end(tw *t, struct thr *th, struct frame *f)
{
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent_th(t, 'E', th, th->pid, th->tid, f->end);
	jput(t, th->ja + f->jtail, th->jlen - f->jtail);
	th->jlen = f->jtail;
	return 0;
}

static int json_end_to(tw *t, struct thr *th, uint32_t d)
{
	int r = 0;
	while (th->open > d && (r = json_end(t, th, &th->st[--th->open])) == 0)
		;
	return r;
}

static int json_gap(tw *t, struct thr *th, const struct mtev_rec *r, const char *name, size_t n,
		    size_t mlen, uint64_t dur)
{
	(void)n;
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent(t, 'i', th->pid, th->tid, r->gap.begin);
	jprintf(t, ",\"s\":\"t\",\"cat\":\"gap\",\"name\":\"%s\",\"args\":{\"duration_ns\":%" PRIu64,
		name, dur);
	if (mlen) {
		jputs(t, ",\"message\":");
		if (jquote_tmp(t, r->gap.message.p, mlen) < 0)
			return -t->err;
	}
	if (r->gap.code)
		jprintf(t, ",\"code\":%" PRId32, r->gap.code);
	if (r->gap.ip)
		jprintf(t, ",\"ip\":\"0x%" PRIx64 "\"", r->gap.ip);
	jputs(t, "}}");
	return 0;
}

static int json_trigger(tw *t, struct thr *th, const struct mtev_rec *r, const char *name, size_t n)
{
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent(t, 'i', th->pid, th->tid, r->trigger.time);
	jputs(t, ",\"s\":\"t\",\"cat\":\"trigger\",\"name\":");
	if (jquote_tmp(t, name, n) < 0)
		return -t->err;
	jprintf(t,
		",\"args\":{\"addr\":\"0x%" PRIx64 "\",\"arg0\":%" PRIu64 ",\"arg1\":%" PRIu64 "}}",
		r->trigger.addr, r->trigger.arg0, r->trigger.arg1);
	return 0;
}

static int json_finish(tw *t)
{
	if (jroom(t, 64) < 0)
		return -t->err;
	jputs(t, "\n]}\n");
	return jflush(t);
}

static void json_stats(const tw *t, struct tw_stats *st)
{
	st->bytes_out = t->jflushed + t->jlen;
}

const struct tw_backend tw_json_backend = {
	.open = json_open,
	.close = json_close,
	.start = json_start,
	.process = json_process,
	.thread = json_thread,
	.span = json_span_begin,
	.end_to = json_end_to,
	.gap = json_gap,
	.trigger = json_trigger,
	.finish = json_finish,
	.stats = json_stats,
	.func_built = json_func_built,
};
