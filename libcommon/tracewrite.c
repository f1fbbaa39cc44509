#include "tracewrite.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxt.h"
#include "mtev_text.h"

/* Why begin/end events for spans with children: Perfetto closes a complete
 * slice as soon as a slice begins at or after its end, so a zero-length span
 * at its parent's end (common with coarse PT timing) would lose its depth.
 * With begin/end pairs, emitted per thread in nesting order, the viewer's
 * stable sort by time rebuilds the exact tree.  A leaf can never be that
 * parent, so in FXT a leaf is one complete event (24 bytes instead of 32):
 * each thread holds its last span back until the next one says whether it
 * has children.  JSON uses begin/end throughout, because a JSON "dur" goes
 * through a double and can lose a nanosecond.  (Checked in tests/write.bats.) */

#define JBUF_SIZE (256u * 1024)
#define JROOM 65536u  /* a JSON event never exceeds this (strings are clipped) */
#define MAX_NAME 8000 /* longest name or string argument written */

struct frame {
	uint64_t begin, end;
	uint32_t jtail; /* JSON: offset in the thread's arena of this frame's E-event tail */
	/* FXT: the top frame may be held back (not yet written) */
	uint32_t fn;	/* index in t->fn */
	uint32_t flags; /* span flags */
	int pending;	/* not written yet */
	int named;	/* its name: 1 in the thread's pname (the span's own name), 2 t->nm[nm] */
	uint32_t nm;	/* named == 2: index in t->nm (a name by reference) */
};

struct thr {
	uint32_t tid, pid;
	int has_pid, used;
	struct fxt_ref_cache tref;
	struct frame *st;
	uint32_t open, cap;
	uint32_t dropped_at; /* depth of the last dropped span while its subtree lasts */
	uint64_t last_begin;
	int any;
	char *ja; /* JSON: tails of the open frames' E events, stack discipline */
	size_t jlen, jcap;
	char *pname; /* FXT: the held-back span's own name */
	char jids[48]; /* JSON: ","pid":P,"tid":T,"ts": for jids_pid */
	uint8_t jids_len;
	uint32_t jids_pid;
	size_t pname_len, pname_cap;
};

/* A function (span.func or a symbol address).  Symbol records only store
 * their raw text here; the strings a span needs are built on the first span
 * that uses the function (most symbols are interior addresses no span names). */
struct func {
	uint64_t addr;
	uint32_t sname_off, sname_len; /* symbol name (clipped) in t->arena */
	uint32_t file_off, file_len;   /* source file (clipped, up to a NUL) */
	uint32_t line;
	uint8_t has_name, has_src; /* a symbol gave a name; a file (even if cut to nothing) */
	int sym;   /* 2: from a symbol for this address, 1: derived from an entry, 0: none */
	int ready; /* the strings below match the fields above */
	uint32_t name_off, name_len;   /* the slice name, in t->arena */
	uint32_t loc_off, loc_len;     /* "0x... file:line" */
	struct fxt_ref_cache name_c, loc_c;
	/* FXT: the slice shape of the last span written for it (flags, and the
	 * name's source: named 0 = this function's name, 2 = t->nm[memo_nm]) */
	struct fxt_memo memo;
	uint32_t memo_flags, memo_named, memo_nm;
	uint32_t jname_off, jname_len; /* JSON-escaped name, quotes included */
	uint32_t jloc_off, jloc_len;
};

struct tw {
	struct tw_opts o;
	zsink *out;
	fxt_writer *fx;
	int err;
	int started;
	/* threads: tid -> index in thr[] */
	struct thr *thr;
	uint32_t nthr, thrcap;
	uint32_t *thash;
	uint32_t thmask;
	/* functions: addr -> index in fn[] */
	struct func *fn;
	uint32_t nfn, fncap;
	struct fent {
		uint64_t addr;
		uint32_t idx1; /* index in fn[] + 1, 0 = empty cell */
	} *fhash;
	uint32_t fhmask;
	char *arena;
	size_t alen, acap;
	/* names by reference (span name_id): string id -> index in nm[] */
	struct rname {
		uint32_t id, live; /* live: 0 after its string record was redefined */
		uint32_t name_off, name_len; /* in the arena */
		uint32_t jname_off, jname_len; /* JSON-quoted, 0 until first needed */
		struct fxt_ref_cache c;
	} *nm;
	uint32_t nnm, nmcap;
	struct nment {
		uint32_t id, idx1; /* idx1: index in nm[] + 1, 0 = empty cell */
	} *nmhash;
	uint32_t nmmask;
	/* JSON output */
	char *jb;
	size_t jlen;
	uint64_t jflushed;
	int jfirst;
	/* interned constant strings (FXT) */
	struct fxt_ref_cache c_span, c_gap, c_trigger, c_loc, c_inline, c_flags;
	struct fxt_ref_cache c_flagset[1u << 9];
	/* flags_text() of flags values below 1 << 9, built once each: len + 1, 0 = not yet */
	struct {
		uint32_t off, len1;
	} flagtext[1u << 9];
	uint32_t last_tid, last_thr; /* thread_get's memo: index + 1, 0 = none */
	/* FXT: the category and arguments of span slices, kept from span to span */
	struct fxt_str s_span;
	struct fxt_arg a_loc, a_inline, a_flags;
	struct fxt_memo end_memo; /* the end event (no strings) */
	struct tw_stats st;
	char msg[512];
};

static int fail(tw *t, int e)
{
	if (!t->err)
		t->err = e;
	return -t->err;
}

static void warn(tw *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(tw *t, const char *fmt, ...)
{
	if (!t->o.warn)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->msg, sizeof t->msg, fmt, ap);
	va_end(ap);
	t->o.warn(t->o.warn_ctx, t->msg);
}

static uint32_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x;
}

/* ---- the string arena ---- */

static int arena_add(tw *t, const char *p, size_t len, uint32_t *off)
{
	if (t->alen + len + 1 > t->acap) {
		size_t nc = t->acap ? t->acap * 2 : 65536;
		while (nc < t->alen + len + 1)
			nc *= 2;
		if (nc > UINT32_MAX)
			return fail(t, TW_ENOMEM);
		char *na = realloc(t->arena, nc);
		if (!na)
			return fail(t, TW_ENOMEM);
		t->arena = na;
		t->acap = nc;
	}
	*off = (uint32_t)t->alen;
	if (len)
		memcpy(t->arena + t->alen, p, len);
	t->alen += len;
	t->arena[t->alen++] = 0;
	return 0;
}

static size_t clip(const char *p, size_t len, size_t max)
{
	if (len <= max)
		return len;
	len = max;
	while (len && ((unsigned char)p[len] & 0xc0) == 0x80)
		len--;
	return len;
}

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

/* ---- threads ---- */

static int thash_grow(tw *t)
{
	uint32_t size = t->thmask ? (t->thmask + 1) * 2 : 256;
	uint32_t *h = calloc(size, sizeof *h);
	if (!h)
		return fail(t, TW_ENOMEM);
	for (uint32_t i = 0; i < t->nthr; i++) {
		uint32_t pos = hash64(t->thr[i].tid) & (size - 1);
		while (h[pos])
			pos = (pos + 1) & (size - 1);
		h[pos] = i + 1;
	}
	free(t->thash);
	t->thash = h;
	t->thmask = size - 1;
	return 0;
}

static struct thr *thread_find_add(tw *t, uint32_t tid);

static inline struct thr *thread_get(tw *t, uint32_t tid)
{
	if (t->last_thr && t->last_tid == tid)
		return &t->thr[t->last_thr - 1];
	return thread_find_add(t, tid);
}

static struct thr *thread_find_add(tw *t, uint32_t tid)
{
	if (t->thmask) {
		uint32_t pos = hash64(tid) & t->thmask;
		for (; t->thash[pos]; pos = (pos + 1) & t->thmask)
			if (t->thr[t->thash[pos] - 1].tid == tid) {
				t->last_tid = tid;
				t->last_thr = t->thash[pos];
				return &t->thr[t->thash[pos] - 1];
			}
	}
	if ((t->nthr + 1) * 2 > t->thmask && thash_grow(t) < 0)
		return NULL;
	if (t->nthr == t->thrcap) {
		uint32_t nc = t->thrcap ? t->thrcap * 2 : 64;
		struct thr *n = realloc(t->thr, nc * sizeof *n);
		if (!n) {
			fail(t, TW_ENOMEM);
			return NULL;
		}
		t->thr = n;
		t->thrcap = nc;
	}
	struct thr *th = &t->thr[t->nthr];
	memset(th, 0, sizeof *th);
	th->tid = tid;
	th->pid = tid;
	th->dropped_at = UINT32_MAX;
	uint32_t pos = hash64(tid) & t->thmask;
	while (t->thash[pos])
		pos = (pos + 1) & t->thmask;
	t->thash[pos] = ++t->nthr;
	t->last_tid = tid;
	t->last_thr = t->nthr;
	return th;
}

/* ---- functions and symbols ---- */

/* Multiplicative hashing: the high half of the product. */
static inline uint32_t mix64(uint64_t x)
{
	return (uint32_t)((x * 0x9e3779b97f4a7c15ull) >> 32);
}

static int fhash_grow(tw *t)
{
	uint32_t size = t->fhmask ? (t->fhmask + 1) * 2 : 4096;
	struct fent *h = calloc(size, sizeof *h);
	if (!h)
		return fail(t, TW_ENOMEM);
	for (uint32_t i = 0; i < t->nfn; i++) {
		uint32_t pos = mix64(t->fn[i].addr) & (size - 1);
		while (h[pos].idx1)
			pos = (pos + 1) & (size - 1);
		h[pos].addr = t->fn[i].addr;
		h[pos].idx1 = i + 1;
	}
	free(t->fhash);
	t->fhash = h;
	t->fhmask = size - 1;
	return 0;
}

static inline struct func *func_find(tw *t, uint64_t addr)
{
	if (!t->fhmask)
		return NULL;
	for (uint32_t pos = mix64(addr) & t->fhmask; t->fhash[pos].idx1;
	     pos = (pos + 1) & t->fhmask)
		if (t->fhash[pos].addr == addr)
			return &t->fn[t->fhash[pos].idx1 - 1];
	return NULL;
}

/* Number formatting by hand (no printf on the span path).  Each writes at @p
 * and returns the length: lowercase hex without leading zeros, decimal. */
static size_t fmt_hex(char *p, uint64_t v)
{
	char d[16];
	size_t n = 0;
	do {
		d[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	for (size_t i = 0; i < n; i++)
		p[i] = d[n - 1 - i];
	return n;
}

static size_t fmt_dec(char *p, uint64_t v)
{
	char d[20];
	size_t n = 0;
	do {
		d[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		p[i] = d[n - 1 - i];
	return n;
}

/* Records a name and a source location for @f; the strings are built when a
 * span first needs them (func_build). */
static int func_fill(tw *t, struct func *f, const char *name, size_t nlen, const char *file,
		     size_t flen, uint32_t line)
{
	int r;
	f->ready = 0;
	f->sname_len = f->file_len = 0;
	f->has_name = nlen != 0;
	f->has_src = flen != 0;
	if (nlen) {
		nlen = clip(name, nlen, MAX_NAME);
		if ((r = arena_add(t, name, nlen, &f->sname_off)) < 0)
			return r;
		f->sname_len = (uint32_t)nlen;
	}
	if (flen) {
		flen = clip(file, flen, MAX_NAME);
		const char *z = memchr(file, 0, flen); /* the text ends at a NUL */
		if (z)
			flen = (size_t)(z - file);
		if (flen && (r = arena_add(t, file, flen, &f->file_off)) < 0)
			return r;
		f->file_len = (uint32_t)flen;
	}
	f->line = line;
	return 0;
}

/* Builds the slice name "NAME" (else "0xADDR") and the argument
 * "0xADDR FILE:LINE" (else "0xADDR") of @f, and their JSON literals. */
static int func_build(tw *t, struct func *f)
{
	char buf[MAX_NAME + 64];
	int r;
	memset(&f->name_c, 0, sizeof f->name_c);
	memset(&f->loc_c, 0, sizeof f->loc_c);
	f->memo.epoch = 0;
	f->jname_len = f->jloc_len = 0;
	size_t n = 0;
	buf[n++] = '0';
	buf[n++] = 'x';
	n += fmt_hex(buf + n, f->addr);
	size_t hexlen = n;
	if (f->has_name) {
		f->name_off = f->sname_off;
		f->name_len = f->sname_len;
	} else {
		if ((r = arena_add(t, buf, hexlen, &f->name_off)) < 0)
			return r;
		f->name_len = (uint32_t)hexlen;
	}
	if (f->has_src) {
		buf[n++] = ' ';
		memcpy(buf + n, t->arena + f->file_off, f->file_len);
		n += f->file_len;
		buf[n++] = ':';
		n += fmt_dec(buf + n, f->line);
	}
	if ((r = arena_add(t, buf, n, &f->loc_off)) < 0)
		return r;
	f->loc_len = (uint32_t)n;
	if (t->o.format == TW_JSON &&
	    ((r = json_quote(t, t->arena + f->name_off, f->name_len, &f->jname_off,
			     &f->jname_len)) < 0 ||
	     (r = json_quote(t, t->arena + f->loc_off, f->loc_len, &f->jloc_off, &f->jloc_len)) < 0))
		return r;
	f->ready = 1;
	return 0;
}

static struct func *func_add(tw *t, uint64_t addr);

/* The index of @addr's entry in t->fn (made if new), or UINT32_MAX (error). */
static inline uint32_t func_index(tw *t, uint64_t addr)
{
	if (t->fhmask)
		for (uint32_t pos = mix64(addr) & t->fhmask; t->fhash[pos].idx1;
		     pos = (pos + 1) & t->fhmask)
			if (t->fhash[pos].addr == addr)
				return t->fhash[pos].idx1 - 1;
	struct func *f = func_add(t, addr);
	return f ? (uint32_t)(f - t->fn) : UINT32_MAX;
}

static inline struct func *func_get(tw *t, uint64_t addr)
{
	struct func *f = func_find(t, addr);
	return f ? f : func_add(t, addr);
}

static struct func *func_add(tw *t, uint64_t addr)
{
	struct func *f;
	if ((t->nfn + 1) * 2 > t->fhmask && fhash_grow(t) < 0)
		return NULL;
	if (t->nfn == t->fncap) {
		uint32_t nc = t->fncap ? t->fncap * 2 : 1024;
		struct func *n = realloc(t->fn, nc * sizeof *n);
		if (!n) {
			fail(t, TW_ENOMEM);
			return NULL;
		}
		t->fn = n;
		t->fncap = nc;
	}
	f = &t->fn[t->nfn];
	memset(f, 0, sizeof *f);
	f->addr = addr;
	uint32_t pos = mix64(addr) & t->fhmask;
	while (t->fhash[pos].idx1)
		pos = (pos + 1) & t->fhmask;
	t->fhash[pos].addr = addr;
	t->fhash[pos].idx1 = ++t->nfn;
	return f;
}

/* ---- names by reference ---- */

static int nmhash_grow(tw *t)
{
	uint32_t size = t->nmmask ? (t->nmmask + 1) * 2 : 1024;
	struct nment *h = calloc(size, sizeof *h);
	if (!h)
		return fail(t, TW_ENOMEM);
	for (uint32_t i = 0; i < t->nnm; i++) {
		if (!t->nm[i].live)
			continue;
		uint32_t pos = mix64(t->nm[i].id) & (size - 1);
		while (h[pos].idx1)
			pos = (pos + 1) & (size - 1);
		h[pos].id = t->nm[i].id;
		h[pos].idx1 = i + 1;
	}
	free(t->nmhash);
	t->nmhash = h;
	t->nmmask = size - 1;
	return 0;
}

static inline struct nment *nm_slot(tw *t, uint32_t id)
{
	if (!t->nmmask)
		return NULL;
	for (uint32_t pos = mix64(id) & t->nmmask; t->nmhash[pos].idx1; pos = (pos + 1) & t->nmmask)
		if (t->nmhash[pos].id == id)
			return &t->nmhash[pos];
	return NULL;
}

static struct rname *nm_add(tw *t, uint32_t id, const char *p, size_t len);

/* The entry of span name @id (text @p, @len as the reader resolved it), as an
 * index in t->nm, or UINT32_MAX (error): made on first use, so the text is
 * copied, clipped and interned once per name. */
static inline uint32_t nm_index(tw *t, uint32_t id, const char *p, size_t len)
{
	struct nment *sl = nm_slot(t, id);
	if (sl)
		return sl->idx1 - 1;
	struct rname *e = nm_add(t, id, p, len);
	return e ? (uint32_t)(e - t->nm) : UINT32_MAX;
}

static struct rname *nm_add(tw *t, uint32_t id, const char *p, size_t len)
{
	if ((t->nnm + 1) * 2 > t->nmmask && nmhash_grow(t) < 0)
		return NULL;
	if (t->nnm == t->nmcap) {
		uint32_t nc = t->nmcap ? t->nmcap * 2 : 1024;
		struct rname *n = realloc(t->nm, nc * sizeof *n);
		if (!n) {
			fail(t, TW_ENOMEM);
			return NULL;
		}
		t->nm = n;
		t->nmcap = nc;
	}
	struct rname *e = &t->nm[t->nnm];
	memset(e, 0, sizeof *e);
	e->id = id;
	e->live = 1;
	len = clip(p, len, MAX_NAME);
	if (arena_add(t, p, len, &e->name_off) < 0)
		return NULL;
	e->name_len = (uint32_t)len;
	uint32_t pos = mix64(id) & t->nmmask;
	while (t->nmhash[pos].idx1)
		pos = (pos + 1) & t->nmmask;
	t->nmhash[pos].id = id;
	t->nmhash[pos].idx1 = ++t->nnm;
	return e;
}

/* A string record (re)defines @id: an entry made from the old text is dropped
 * (the hash is rebuilt without it; redefinitions are rare). */
static __attribute__((noinline)) int on_string(tw *t, const struct mtev_rec *r)
{
	struct nment *sl = nm_slot(t, r->string.id);
	if (!sl)
		return 0;
	t->nm[sl->idx1 - 1].live = 0;
	t->nm[sl->idx1 - 1].id = 0;
	t->nmmask = t->nmmask ? (t->nmmask + 1) / 2 - 1 : 0;
	return nmhash_grow(t);
}

static __attribute__((noinline)) int on_symbol(tw *t, const struct mtev_rec *r)
{
	t->st.symbols++;
	if (!r->symbol.nframes)
		return 0;
	const struct mtev_frame *in = &r->symbol.frames[0];
	const struct mtev_frame *phys = &r->symbol.frames[r->symbol.nframes - 1];
	struct func *f = func_get(t, r->symbol.addr);
	if (!f)
		return -t->err;
	/* the name of the physical function; the location of the address itself */
	if (func_fill(t, f, phys->name.p, phys->name.len, in->file.p, in->file.len, in->line) < 0)
		return -t->err;
	f->sym = 2;
	if (r->symbol.entry && r->symbol.entry != r->symbol.addr) {
		struct func *e = func_get(t, r->symbol.entry);
		if (!e)
			return -t->err;
		if (e->sym == 0) {
			if (func_fill(t, e, phys->name.p, phys->name.len, NULL, 0, 0) < 0)
				return -t->err;
			e->sym = 1;
		}
	}
	return 0;
}

/* ---- JSON output ---- */

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

static void jprintf(tw *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jprintf(tw *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->jb + t->jlen, JBUF_SIZE - t->jlen, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->jlen += (size_t)n;
}

static const char dig2[201] = "0001020304050607080910111213141516171819"
			      "2021222324252627282930313233343536373839"
			      "4041424344454647484950515253545556575859"
			      "6061626364656667686970717273747576777879"
			      "8081828384858687888990919293949596979899";

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

/* ---- FXT sink ---- */

static int fxt_out(void *ctx, const void *buf, size_t len)
{
	tw *t = ctx;
	return zsink_write(t->out, buf, len);
}

static int fx(tw *t, int r)
{
	if (r >= 0)
		return r;
	return fail(t, r == -FXT_ENOMEM ? TW_ENOMEM : r == -FXT_EINVAL ? TW_EINVAL : TW_EIO);
}

static struct fxt_str S(const char *p, size_t len, struct fxt_ref_cache *c)
{
	struct fxt_str s = {p, len, c, 0};
	return s;
}

static struct fxt_str SI(const char *p, size_t len) /* inline: a one-off string */
{
	struct fxt_str s = {p, len, NULL, 1};
	return s;
}

/* ---- start ---- */

static int start(tw *t)
{
	if (t->started)
		return 0;
	t->started = 1;
	if (t->o.format == TW_FXT)
		return fx(t, fxt_begin(t->fx, 1000000000));
	if (jroom(t, 64) < 0)
		return -t->err;
	jputs(t, "{\"traceEvents\":[");
	t->jfirst = 1;
	return 0;
}

tw *tw_alloc(zsink *out, const struct tw_opts *opts)
{
	tw *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->o = *opts;
	t->out = out;
	t->s_span = S("span", 4, &t->c_span);
	t->a_loc.type = FXT_ARG_STRING;
	t->a_loc.name = S("loc", 3, &t->c_loc);
	t->a_inline.type = FXT_ARG_BOOL;
	t->a_inline.name = S("inline", 6, &t->c_inline);
	t->a_inline.b = 1;
	t->a_flags.type = FXT_ARG_STRING;
	t->a_flags.name = S("flags", 5, &t->c_flags);
	if (t->o.format == TW_FXT)
		t->fx = fxt_writer_alloc(fxt_out, t);
	else
		t->jb = malloc(JBUF_SIZE);
	if ((t->o.format == TW_FXT && !t->fx) || (t->o.format == TW_JSON && !t->jb)) {
		tw_free(t);
		return NULL;
	}
	return t;
}

void tw_free(tw *t)
{
	if (!t)
		return;
	fxt_writer_free(t->fx);
	for (uint32_t i = 0; i < t->nthr; i++) {
		free(t->thr[i].st);
		free(t->thr[i].ja);
		free(t->thr[i].pname);
	}
	free(t->thr);
	free(t->thash);
	free(t->fn);
	free(t->fhash);
	free(t->nm);
	free(t->nmhash);
	free(t->arena);
	free(t->jb);
	free(t);
}

/* ---- process and thread names ---- */

static int on_process(tw *t, const struct mtev_rec *r)
{
	if (!r->process.name.len)
		return 0;
	size_t n = clip(r->process.name.p, r->process.name.len, MAX_NAME);
	if (t->o.format == TW_FXT)
		return fx(t, fxt_process(t->fx, r->process.pid, SI(r->process.name.p, n)));
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent(t, 'M', r->process.pid, r->process.pid, 0);
	jputs(t, ",\"cat\":\"__metadata\",\"name\":\"process_name\",\"args\":{\"name\":");
	if (jquote_tmp(t, r->process.name.p, n) < 0)
		return -t->err;
	jputs(t, "}}");
	return 0;
}

static int on_thread(tw *t, const struct mtev_rec *r)
{
	struct thr *th = thread_get(t, r->thread.tid);
	if (!th)
		return -t->err;
	if (th->used && th->pid != r->thread.pid)
		warn(t, "thread %" PRIu32 ": its record (pid %" PRIu32
			") comes after spans written under pid %" PRIu32,
		     r->thread.tid, r->thread.pid, th->pid);
	else
		th->pid = r->thread.pid;
	th->has_pid = 1;
	if (!r->thread.name.len)
		return 0;
	size_t n = clip(r->thread.name.p, r->thread.name.len, MAX_NAME);
	if (t->o.format == TW_FXT)
		return fx(t, fxt_thread_name(t->fx, th->pid, th->tid, SI(r->thread.name.p, n)));
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent(t, 'M', th->pid, th->tid, 0);
	jputs(t, ",\"cat\":\"__metadata\",\"name\":\"thread_name\",\"args\":{\"name\":");
	if (jquote_tmp(t, r->thread.name.p, n) < 0)
		return -t->err;
	jputs(t, "}}");
	return 0;
}

/* ---- spans ---- */

/* The span flags but inline, by name ("open-at-end,0x200"), as the
 * comma-separated list mt-dump prints, cut before the item that would reach
 * @cap - 1 bytes. */
static size_t flags_text(char *buf, size_t cap, unsigned flags)
{
	size_t n = 0;
	buf[0] = 0;
	for (unsigned b = 0; b < 32; b++) {
		if (!(flags & (1u << b)) || (1u << b) == MTEV_SPAN_INLINE)
			continue;
		char item[24];
		size_t k = 0;
		if (n)
			item[k++] = ',';
		const char *nm = mtev_span_flag_name(b);
		size_t nl = nm ? strlen(nm) : 0;
		if (nm && nl < sizeof item - 1) {
			memcpy(item + k, nm, nl);
			k += nl;
		} else if (nm) { /* never: flag names are short */
			break;
		} else {
			item[k++] = '0';
			item[k++] = 'x';
			k += fmt_hex(item + k, 1u << b);
		}
		if (k >= cap - n)
			break;
		memcpy(buf + n, item, k);
		n += k;
		buf[n] = 0;
	}
	return n;
}

/* The text of @flags (see flags_text) in *@p, its length returned; values
 * below 1 << 9 are built once and kept in the arena, others go in @tmp. */
static size_t flags_str_slow(tw *t, unsigned flags, char tmp[256], const char **p);

static inline size_t flags_str(tw *t, unsigned flags, char tmp[256], const char **p)
{
	if (!(flags & ~(unsigned)MTEV_SPAN_INLINE))
		return 0;
	if (flags < (1u << 9) && t->flagtext[flags].len1) {
		*p = t->arena + t->flagtext[flags].off;
		return t->flagtext[flags].len1 - 1;
	}
	return flags_str_slow(t, flags, tmp, p);
}

static size_t flags_str_slow(tw *t, unsigned flags, char tmp[256], const char **p)
{
	if (flags >= (1u << 9)) {
		*p = tmp;
		return flags_text(tmp, 256, flags);
	}
	if (!t->flagtext[flags].len1) {
		size_t n = flags_text(tmp, 256, flags);
		uint32_t off;
		if (arena_add(t, tmp, n, &off) < 0) {
			*p = tmp; /* the text is right; only the memo failed */
			return n;
		}
		t->flagtext[flags].off = off;
		t->flagtext[flags].len1 = (uint32_t)n + 1;
	}
	*p = t->arena + t->flagtext[flags].off;
	return t->flagtext[flags].len1 - 1;
}

/* FXT: writes frame @f as a begin event or (a leaf) as a complete event. */
static int fxt_span(tw *t, struct thr *th, struct frame *f, unsigned type)
{
	struct func *fn = &t->fn[f->fn];
	const struct fxt_arg *a[3];
	unsigned na = 0;
	char ftext[256];
	/* a symbol record may have come since the span was read */
	if (!fn->ready && func_build(t, fn) < 0)
		return -t->err;
	/* the same shape as the last span of this function: from the memo */
	int same = f->named != 1 && fn->memo_flags == f->flags &&
		   fn->memo_named == (uint32_t)f->named && (f->named != 2 || fn->memo_nm == f->nm);
	if (same) {
		int r = fxt_event_memo(t->fx, &fn->memo, type, &th->tref, f->begin, f->end);
		if (r <= 0) {
			f->pending = 0;
			return fx(t, r);
		}
	}
	if (!t->o.no_args) {
		if (fn->addr) { /* synthetic and inline spans have no address */
			t->a_loc.s.p = t->arena + fn->loc_off;
			t->a_loc.s.len = fn->loc_len;
			t->a_loc.s.cache = &fn->loc_c;
			a[na++] = &t->a_loc;
		}
		if (f->flags & MTEV_SPAN_INLINE)
			a[na++] = &t->a_inline;
		const char *fp;
		size_t flen = flags_str(t, f->flags, ftext, &fp);
		if (flen) {
			t->a_flags.s.p = fp;
			t->a_flags.s.len = flen;
			t->a_flags.s.cache = f->flags < (1u << 9) ? &t->c_flagset[f->flags] : NULL;
			a[na++] = &t->a_flags;
		}
	}
	struct fxt_str name;
	if (f->named == 2) {
		struct rname *rn = &t->nm[f->nm];
		name = S(t->arena + rn->name_off, rn->name_len, &rn->c);
	} else if (f->named) {
		name = S(th->pname, th->pname_len, NULL);
	} else {
		name = S(t->arena + fn->name_off, fn->name_len, &fn->name_c);
	}
	f->pending = 0;
	if (f->named == 1) /* its own text: no memo */
		return fx(t, fxt_eventp(t->fx, type, th->pid, th->tid, &th->tref, &t->s_span, &name,
					f->begin, a, na, f->end));
	fn->memo_flags = f->flags;
	fn->memo_named = (uint32_t)f->named;
	fn->memo_nm = f->nm;
	return fx(t, fxt_eventp_memo(t->fx, &fn->memo, type, th->pid, th->tid, &th->tref,
				     &t->s_span, &name, f->begin, a, na, f->end));
}

/* Closes the open frames of @th from the top down to depth @d. */
static int close_to(tw *t, struct thr *th, uint32_t d)
{
	while (th->open > d) {
		struct frame *f = &th->st[--th->open];
		if (t->o.format == TW_FXT) {
			int r;
			if (f->pending)
				r = fxt_span(t, th, f, FXT_EV_COMPLETE);
			else if ((r = fxt_event_memo(t->fx, &t->end_memo, FXT_EV_END, &th->tref,
						     f->end, 0)) == 1)
				r = fxt_eventp_memo(t->fx, &t->end_memo, FXT_EV_END, th->pid, th->tid,
						    &th->tref, NULL, NULL, f->end, NULL, 0, 0);
			if (r < 0)
				return fx(t, r);
		} else {
			if (jroom(t, JROOM) < 0)
				return -t->err;
			jevent_th(t, 'E', th, th->pid, th->tid, f->end);
			jput(t, th->ja + f->jtail, th->jlen - f->jtail);
			th->jlen = f->jtail;
		}
	}
	return 0;
}

static int drop(tw *t, struct thr *th, const struct mtev_rec *r, unsigned why, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int drop(tw *t, struct thr *th, const struct mtev_rec *r, unsigned why, const char *fmt, ...)
{
	t->st.dropped[why]++;
	/* the stack stays as it was: later spans are checked against what was
	 * written; the descendants of a dropped span go with it */
	if (why != TW_DROP_ANCESTOR)
		th->dropped_at = r->span.depth;
	if (why != TW_DROP_ANCESTOR && t->o.warn) {
		char why_text[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why_text, sizeof why_text, fmt, ap);
		va_end(ap);
		warn(t,
		     "span dropped (%s): tid %" PRIu32 " depth %" PRIu32 " begin %" PRIu64
		     " end %" PRIu64 " func 0x%" PRIx64 ": %s",
		     tw_drop_name(why), r->span.tid, r->span.depth, r->span.begin, r->span.end,
		     r->span.func, why_text);
	}
	return 0;
}

/* Trace readers keep times as signed 64-bit ns (Perfetto rejects an FXT
 * time beyond it: fuchsia_timestamp_overflow). */
#define TW_TIME_MAX ((uint64_t)INT64_MAX)

/* FXT: span @f (just pushed at depth @d of @th) is held back until the next
 * span of its thread says whether it has children (see close_to); a held
 * parent that gets a child is written now as a begin event. */
static int fxt_span_hold(tw *t, struct thr *th, struct frame *f, const struct mtev_rec *r,
			 const struct rname *rn, uint32_t d)
{
	int rc;
	/* the parent, if held back, has a child: it is written as a begin */
	if (d > 0 && th->st[d - 1].pending && (rc = fxt_span(t, th, &th->st[d - 1], FXT_EV_BEGIN)) < 0)
		return rc;
	if (rn) {
		f->named = 2;
	} else if (r->span.name.len) {
		const char *name = r->span.name.p;
		size_t nlen = clip(name, r->span.name.len, MAX_NAME);
		if (nlen > th->pname_cap) {
			size_t nc = nlen < 64 ? 64 : nlen;
			char *n = realloc(th->pname, nc);
			if (!n)
				return fail(t, TW_ENOMEM);
			th->pname = n;
			th->pname_cap = nc;
		}
		memcpy(th->pname, name, nlen);
		th->pname_len = nlen;
		f->named = 1;
	}
	f->pending = 1;
	return 0;
}

/* JSON: the B event of span @f now; the same name and args go on the E
 * event, which readers like speedscope match by name and args. */
static int json_span_begin(tw *t, struct thr *th, struct frame *f, const struct mtev_rec *r,
			   struct rname *rn, uint32_t fi, uint64_t b)
{
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

static int on_span(tw *t, const struct mtev_rec *r)
{
	t->st.spans_in++;
	struct thr *th = thread_get(t, r->span.tid);
	if (!th)
		return -t->err;
	uint32_t d = r->span.depth;
	uint64_t b = r->span.begin, e = r->span.end;

	/* the contract (formats/mtev-semantics.md, Spans), checked in this order */
	if (th->dropped_at != UINT32_MAX) {
		if (d > th->dropped_at)
			return drop(t, th, r, TW_DROP_ANCESTOR, "-");
		th->dropped_at = UINT32_MAX;
	}
	if (e < b)
		return drop(t, th, r, TW_DROP_OUTSIDE, "ends before it begins");
	if (e > TW_TIME_MAX)
		return drop(t, th, r, TW_DROP_TIME,
			    "ends after %" PRIu64 " ns, the largest time a trace reader takes",
			    (uint64_t)TW_TIME_MAX);
	if (th->any && b < th->last_begin)
		return drop(t, th, r, TW_DROP_BACKWARDS,
			    "begins before the previous span on its thread (%" PRIu64 ")",
			    th->last_begin);
	if (d > th->open)
		return drop(t, th, r, TW_DROP_ORPHAN, "no open parent at depth %" PRIu32
			    " (%" PRIu32 " open)", d - 1, th->open);
	if (d > 0) {
		const struct frame *p = &th->st[d - 1];
		if (b < p->begin || e > p->end)
			return drop(t, th, r, TW_DROP_OUTSIDE,
				    "parent at depth %" PRIu32 " spans [%" PRIu64 ", %" PRIu64 "]",
				    d - 1, p->begin, p->end);
	}
	if (th->open > d && b < th->st[d].end)
		return drop(t, th, r, TW_DROP_OVERLAP,
			    "previous sibling ends at %" PRIu64, th->st[d].end);

	int rc;
	if (th->open > d && (rc = close_to(t, th, d)) < 0)
		return rc;
	if (!th->has_pid && !th->used)
		t->st.threads_without_pid++;
	if (!th->used)
		t->st.threads++;
	th->used = 1;
	th->any = 1;
	th->last_begin = b;
	if (th->open == th->cap) {
		uint32_t nc = th->cap ? th->cap * 2 : 64;
		struct frame *n = realloc(th->st, nc * sizeof *n);
		if (!n)
			return fail(t, TW_ENOMEM);
		th->st = n;
		th->cap = nc;
	}
	struct frame *f = &th->st[th->open++];
	f->begin = b;
	f->end = e;
	f->pending = 0;
	f->named = 0;

	uint32_t fi = func_index(t, r->span.func);
	if (fi == UINT32_MAX)
		return -t->err;
	f->fn = fi;
	f->flags = r->span.flags;
	struct rname *rn = NULL;
	if (r->span.name_id && r->span.name.len) {
		uint32_t ni = nm_index(t, r->span.name_id, r->span.name.p, r->span.name.len);
		if (ni == UINT32_MAX)
			return -t->err;
		f->nm = ni;
		rn = &t->nm[ni];
	}
	t->st.spans_written++;

	if (t->o.format == TW_FXT)
		return fxt_span_hold(t, th, f, r, rn, d);
	return json_span_begin(t, th, f, r, rn, fi, b);
}

/* ---- instants: gaps and triggers ---- */

static int on_gap(tw *t, const struct mtev_rec *r)
{
	t->st.gaps++;
	if (r->gap.begin > TW_TIME_MAX) {
		warn(t, "gap left out: tid %" PRIu32 " begins at %" PRIu64 " ns, after %" PRIu64
			" ns (the largest time a trace reader takes)",
		     r->gap.tid, r->gap.begin, (uint64_t)TW_TIME_MAX);
		return 0;
	}
	struct thr *th = thread_get(t, r->gap.tid);
	if (!th)
		return -t->err;
	if (!th->used)
		t->st.threads++;
	th->used = 1;
	const char *reason = mtev_gap_name(r->gap.reason);
	char name[64];
	int n = reason ? snprintf(name, sizeof name, "gap: %s", reason)
		       : snprintf(name, sizeof name, "gap: reason %u", r->gap.reason);
	size_t mlen = clip(r->gap.message.p, r->gap.message.len, MAX_NAME);
	uint64_t dur = r->gap.end >= r->gap.begin ? r->gap.end - r->gap.begin : 0;
	if (t->o.format == TW_FXT) {
		struct fxt_arg a[4];
		unsigned na = 0;
		a[na].type = FXT_ARG_UINT64;
		a[na].name = SI("duration_ns", 11);
		a[na++].u = dur;
		if (mlen) {
			a[na].type = FXT_ARG_STRING;
			a[na].name = SI("message", 7);
			a[na++].s = SI(r->gap.message.p, mlen);
		}
		if (r->gap.code) {
			a[na].type = FXT_ARG_INT64;
			a[na].name = SI("code", 4);
			a[na++].i = r->gap.code;
		}
		if (r->gap.ip) {
			a[na].type = FXT_ARG_POINTER;
			a[na].name = SI("ip", 2);
			a[na++].u = r->gap.ip;
		}
		return fx(t, fxt_event(t->fx, FXT_EV_INSTANT, th->pid, th->tid, &th->tref,
				       S("gap", 3, &t->c_gap), S(name, (size_t)n, NULL),
				       r->gap.begin, a, na, 0));
	}
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

static int on_trigger(tw *t, const struct mtev_rec *r)
{
	t->st.triggers++;
	if (r->trigger.time > TW_TIME_MAX) {
		warn(t, "trigger left out: tid %" PRIu32 " at %" PRIu64 " ns, after %" PRIu64
			" ns (the largest time a trace reader takes)",
		     r->trigger.tid, r->trigger.time, (uint64_t)TW_TIME_MAX);
		return 0;
	}
	struct thr *th = thread_get(t, r->trigger.tid);
	if (!th)
		return -t->err;
	if (!th->has_pid && !th->used) {
		th->pid = r->trigger.pid;
		th->has_pid = 1;
	}
	if (!th->used)
		t->st.threads++;
	th->used = 1;
	char name[MAX_NAME + 16];
	size_t sl = clip(r->trigger.symbol.p, r->trigger.symbol.len, MAX_NAME);
	int n = sl ? snprintf(name, sizeof name, "trigger: %.*s", (int)sl, r->trigger.symbol.p)
		   : snprintf(name, sizeof name, "trigger");
	if (t->o.format == TW_FXT) {
		struct fxt_arg a[3];
		a[0].type = FXT_ARG_POINTER;
		a[0].name = SI("addr", 4);
		a[0].u = r->trigger.addr;
		a[1].type = FXT_ARG_UINT64;
		a[1].name = SI("arg0", 4);
		a[1].u = r->trigger.arg0;
		a[2].type = FXT_ARG_UINT64;
		a[2].name = SI("arg1", 4);
		a[2].u = r->trigger.arg1;
		return fx(t, fxt_event(t->fx, FXT_EV_INSTANT, th->pid, th->tid, &th->tref,
				       S("trigger", 7, &t->c_trigger), SI(name, (size_t)n),
				       r->trigger.time, a, 3, 0));
	}
	if (jroom(t, JROOM) < 0)
		return -t->err;
	jevent(t, 'i', th->pid, th->tid, r->trigger.time);
	jputs(t, ",\"s\":\"t\",\"cat\":\"trigger\",\"name\":");
	if (jquote_tmp(t, name, (size_t)n) < 0)
		return -t->err;
	jprintf(t,
		",\"args\":{\"addr\":\"0x%" PRIx64 "\",\"arg0\":%" PRIu64 ",\"arg1\":%" PRIu64 "}}",
		r->trigger.addr, r->trigger.arg0, r->trigger.arg1);
	return 0;
}

static __attribute__((noinline)) int record_any(tw *t, const struct mtev_rec *r);

int tw_record(tw *t, const struct mtev_rec *r)
{
	if (r->kind == MTEV_SPAN && t->started && !t->err) /* the common case, first */
		return on_span(t, r);
	return record_any(t, r);
}

static int record_any(tw *t, const struct mtev_rec *r)
{
	if (t->err)
		return -t->err;
	int rc;
	if (!t->started && (rc = start(t)) < 0)
		return rc;
	switch (r->kind) {
	case MTEV_PROCESS:
		return on_process(t, r);
	case MTEV_THREAD:
		return on_thread(t, r);
	case MTEV_SYMBOL:
		return on_symbol(t, r);
	case MTEV_STRING:
		return on_string(t, r);
	case MTEV_SPAN:
		return on_span(t, r);
	case MTEV_GAP:
		return on_gap(t, r);
	case MTEV_TRIGGER:
		return on_trigger(t, r);
	default:
		return 0; /* other kinds carry nothing a timeline shows */
	}
}

int tw_finish(tw *t)
{
	if (t->err)
		return -t->err;
	int rc = start(t);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < t->nthr; i++)
		if ((rc = close_to(t, &t->thr[i], 0)) < 0)
			return rc;
	if (t->o.format == TW_FXT)
		return fx(t, fxt_flush(t->fx));
	if (jroom(t, 64) < 0)
		return -t->err;
	jputs(t, "\n]}\n");
	return jflush(t);
}

void tw_get_stats(const tw *t, struct tw_stats *st)
{
	*st = t->st;
	if (t->fx) {
		struct fxt_stats fs;
		fxt_writer_stats(t->fx, &fs);
		st->bytes_out = fs.bytes;
		st->fxt_string_records = fs.string_records;
		st->fxt_string_reuses = fs.string_evictions;
		st->fxt_thread_records = fs.thread_records;
		st->fxt_thread_reuses = fs.thread_evictions;
	} else {
		st->bytes_out = t->jflushed + t->jlen;
	}
}

const char *tw_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return "success";
	case TW_EIO:
		return strerror(errno);
	case TW_ENOMEM:
		return "out of memory";
	case TW_EINVAL:
		return "invalid argument (record too large)";
	default:
		return "unknown error";
	}
}

const char *tw_drop_name(unsigned reason)
{
	static const char *const names[TW_DROP__COUNT] = {
		"time goes backwards", "orphan", "outside its parent", "overlaps its sibling",
		"inside a dropped span", "time out of range"};
	return reason < TW_DROP__COUNT ? names[reason] : "?";
}

int tw_format_from_name(const char *name)
{
	size_t n;
	zsink_kind_from_name(name, &n);
	if (n >= 5 && !memcmp(name + n - 5, ".json", 5))
		return TW_JSON;
	if (n >= 4 && !memcmp(name + n - 4, ".fxt", 4))
		return TW_FXT;
	return -1;
}
