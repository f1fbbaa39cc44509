#include "tw.h"

int fail(tw *t, int e)
{
	if (!t->err)
		t->err = e;
	return -t->err;
}

void warn(tw *t, const char *fmt, ...)
{
	if (!t->o.warn)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->msg, sizeof t->msg, fmt, ap);
	va_end(ap);
	t->o.warn(t->o.warn_ctx, t->msg);
}

/* ---- the string arena ---- */

int arena_add(tw *t, const char *p, size_t len, uint32_t *off)
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

size_t clip(const char *p, size_t len, size_t max)
{
	if (len <= max)
		return len;
	len = max;
	while (len && ((unsigned char)p[len] & 0xc0) == 0x80)
		len--;
	return len;
}

/* ---- threads ---- */

static struct thr *thread_find_add(tw *t, uint32_t tid);

static inline struct thr *thread_get(tw *t, uint32_t tid)
{
	if (t->last_thr && t->last_tid == tid)
		return &t->thr[t->last_thr - 1];
	return thread_find_add(t, tid);
}

static struct thr *thread_find_add(tw *t, uint32_t tid)
{
	uint32_t i = hmap_get(&t->tidx, tid, 0);
	if (i == HMAP_NONE) {
		if (mt_grow((void **)&t->thr, &t->thrcap, t->nthr + 1, sizeof *t->thr) < 0 ||
		    hmap_put(&t->tidx, tid, 0, t->nthr) == HMAP_NONE) {
			fail(t, TW_ENOMEM);
			return NULL;
		}
		i = t->nthr++;
		struct thr *th = &t->thr[i];
		memset(th, 0, sizeof *th);
		th->tid = tid;
		th->pid = tid;
		th->dropped_at = UINT32_MAX;
	}
	t->last_tid = tid;
	t->last_thr = i + 1;
	return &t->thr[i];
}

/* ---- functions and symbols ---- */

static inline struct func *func_find(tw *t, uint64_t addr)
{
	uint32_t i = hmap_get(&t->fidx, addr, 0);
	return i == HMAP_NONE ? NULL : &t->fn[i];
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
int func_build(tw *t, struct func *f)
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
	if (t->be->func_built && (r = t->be->func_built(t, f)) < 0)
		return r;
	f->ready = 1;
	return 0;
}

static struct func *func_add(tw *t, uint64_t addr);

/* The index of @addr's entry in t->fn (made if new), or UINT32_MAX (error). */
static inline uint32_t func_index(tw *t, uint64_t addr)
{
	uint32_t i = hmap_get(&t->fidx, addr, 0);
	if (i != HMAP_NONE)
		return i;
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
	/* room for TW_FN_INIT at first: growing from 16 copies the array 6 more
	 * times to 1024 */
	if (mt_grow((void **)&t->fn, &t->fncap, t->nfn < TW_FN_INIT ? TW_FN_INIT : t->nfn + 1,
		    sizeof *t->fn) < 0 ||
	    hmap_put(&t->fidx, addr, 0, t->nfn) == HMAP_NONE) {
		fail(t, TW_ENOMEM);
		return NULL;
	}
	struct func *f = &t->fn[t->nfn++];
	memset(f, 0, sizeof *f);
	f->addr = addr;
	return f;
}

/* ---- names by reference ---- */

static struct rname *nm_add(tw *t, uint32_t id, const char *p, size_t len);

/* The entry of span name @id (text @p, @len as the reader resolved it), as an
 * index in t->nm, or UINT32_MAX (error): made on first use, so the text is
 * copied, clipped and interned once per name. */
static inline uint32_t nm_index(tw *t, uint32_t id, const char *p, size_t len)
{
	uint32_t i = hmap_get(&t->nmidx, id, 0);
	if (i != HMAP_NONE)
		return i;
	struct rname *e = nm_add(t, id, p, len);
	return e ? (uint32_t)(e - t->nm) : UINT32_MAX;
}

static struct rname *nm_add(tw *t, uint32_t id, const char *p, size_t len)
{
	if (mt_grow((void **)&t->nm, &t->nmcap, t->nnm + 1, sizeof *t->nm) < 0) {
		fail(t, TW_ENOMEM);
		return NULL;
	}
	struct rname *e = &t->nm[t->nnm];
	memset(e, 0, sizeof *e);
	len = clip(p, len, MAX_NAME);
	if (arena_add(t, p, len, &e->name_off) < 0)
		return NULL;
	e->name_len = (uint32_t)len;
	if (hmap_put(&t->nmidx, id, 0, t->nnm) == HMAP_NONE) {
		fail(t, TW_ENOMEM);
		return NULL;
	}
	t->nnm++;
	return e;
}

/* A string record (re)defines @id: an entry made from the old text is
 * forgotten (the next span naming @id makes a new one). */
static __attribute__((noinline)) int on_string(tw *t, const struct mtev_rec *r)
{
	hmap_del(&t->nmidx, r->string.id, 0);
	return 0;
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

/* ---- start ---- */

static int start(tw *t)
{
	if (t->started)
		return 0;
	t->started = 1;
	return t->be->start(t);
}

tw *tw_alloc(zsink *out, const struct tw_opts *opts)
{
	tw *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->o = *opts;
	t->out = out;
	t->be = t->o.format == TW_JSON ? &tw_json_backend : &tw_fxt_backend;
	if (t->be->open(t) < 0) {
		tw_free(t);
		return NULL;
	}
	return t;
}

void tw_free(tw *t)
{
	if (!t)
		return;
	if (t->be)
		t->be->close(t);
	for (uint32_t i = 0; i < t->nthr; i++) {
		free(t->thr[i].st);
		free(t->thr[i].ja);
		free(t->thr[i].pname);
	}
	free(t->thr);
	hmap_fini(&t->tidx);
	free(t->fn);
	hmap_fini(&t->fidx);
	free(t->nm);
	hmap_fini(&t->nmidx);
	free(t->arena);
	free(t);
}

/* ---- process and thread names ---- */

static int on_process(tw *t, const struct mtev_rec *r)
{
	if (!r->process.name.len)
		return 0;
	size_t n = clip(r->process.name.p, r->process.name.len, MAX_NAME);
	return t->be->process(t, r, n);
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
	return t->be->thread(t, th, r, n);
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

size_t flags_str_slow(tw *t, unsigned flags, char tmp[256], const char **p)
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

/* Closes the open frames of @th from the top down to depth @d. */
static int close_to(tw *t, struct thr *th, uint32_t d)
{
	return th->open > d ? t->be->end_to(t, th, d) : 0;
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

	return t->be->span(t, th, f, r, rn);
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
	return t->be->gap(t, th, r, name, (size_t)n, mlen, dur);
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
	return t->be->trigger(t, th, r, name, (size_t)n);
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
	return t->be->finish(t);
}

void tw_get_stats(const tw *t, struct tw_stats *st)
{
	*st = t->st;
	t->be->stats(t, st);
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
