#include "tw.h"

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

/* FXT: span @f (just pushed on @th) is held back until the next
 * span of its thread says whether it has children (see close_to); a held
 * parent that gets a child is written now as a begin event. */
static int fxt_hold_named(tw *t, struct thr *th, struct frame *f, const struct mtev_rec *r)
{
	int rc;
	/* the parent first: it may be named by th->pname too */
	if (f > th->st && f[-1].pending && (rc = fxt_span(t, th, f - 1, FXT_EV_BEGIN)) < 0)
		return rc;
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
	f->pending = 1;
	return 0;
}

static int fxt_span_hold(tw *t, struct thr *th, struct frame *f, const struct mtev_rec *r,
			 struct rname *rn)
{
	if (!rn && r->span.name.len)
		return fxt_hold_named(t, th, f, r);
	if (rn)
		f->named = 2;
	f->pending = 1;
	if (f > th->st && f[-1].pending) {
		int rc = fxt_span(t, th, f - 1, FXT_EV_BEGIN);
		return rc < 0 ? rc : 0;
	}
	return 0;
}

static int fxt_start(tw *t)
{
	return fx(t, fxt_begin(t->fx, 1000000000));
}

static int fxt_open(tw *t)
{
	t->s_span = S("span", 4, &t->c_span);
	t->a_loc.type = FXT_ARG_STRING;
	t->a_loc.name = S("loc", 3, &t->c_loc);
	t->a_inline.type = FXT_ARG_BOOL;
	t->a_inline.name = S("inline", 6, &t->c_inline);
	t->a_inline.b = 1;
	t->a_flags.type = FXT_ARG_STRING;
	t->a_flags.name = S("flags", 5, &t->c_flags);
	t->fx = fxt_writer_alloc(fxt_out, t);
	return t->fx ? 0 : -TW_ENOMEM;
}

static void fxt_close(tw *t)
{
	fxt_writer_free(t->fx);
}

static int fxt_process_name(tw *t, const struct mtev_rec *r, size_t n)
{
	return fx(t, fxt_process(t->fx, r->process.pid, SI(r->process.name.p, n)));
}

static int fxt_thread(tw *t, struct thr *th, const struct mtev_rec *r, size_t n)
{
	return fx(t, fxt_thread_name(t->fx, th->pid, th->tid, SI(r->thread.name.p, n)));
}

/* A held-back frame is a leaf: one complete event; else the end event. */
static int fxt_end(tw *t, struct thr *th, struct frame *f)
{
	int r;
	if (f->pending)
		r = fxt_span(t, th, f, FXT_EV_COMPLETE);
	else if ((r = fxt_event_memo(t->fx, &t->end_memo, FXT_EV_END, &th->tref, f->end, 0)) == 1)
		r = fxt_eventp_memo(t->fx, &t->end_memo, FXT_EV_END, th->pid, th->tid, &th->tref,
				    NULL, NULL, f->end, NULL, 0, 0);
	return r < 0 ? fx(t, r) : 0;
}

static int fxt_end_to(tw *t, struct thr *th, uint32_t d)
{
	int r = 0;
	while (th->open > d && (r = fxt_end(t, th, &th->st[--th->open])) == 0)
		;
	return r;
}

static int fxt_gap(tw *t, struct thr *th, const struct mtev_rec *r, const char *name, size_t n,
		   size_t mlen, uint64_t dur)
{
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
			       S("gap", 3, &t->c_gap), S(name, n, NULL),
			       r->gap.begin, a, na, 0));
}

static int fxt_trigger(tw *t, struct thr *th, const struct mtev_rec *r, const char *name, size_t n)
{
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
			       S("trigger", 7, &t->c_trigger), SI(name, n),
			       r->trigger.time, a, 3, 0));
}

static int fxt_finish(tw *t)
{
	return fx(t, fxt_flush(t->fx));
}

static void fxt_stats(const tw *t, struct tw_stats *st)
{
	struct fxt_stats fs;
	fxt_writer_stats(t->fx, &fs);
	st->bytes_out = fs.bytes;
	st->fxt_string_records = fs.string_records;
	st->fxt_string_reuses = fs.string_evictions;
	st->fxt_thread_records = fs.thread_records;
	st->fxt_thread_reuses = fs.thread_evictions;
}

const struct tw_backend tw_fxt_backend = {
	.open = fxt_open,
	.close = fxt_close,
	.start = fxt_start,
	.process = fxt_process_name,
	.thread = fxt_thread,
	.span = fxt_span_hold,
	.end_to = fxt_end_to,
	.gap = fxt_gap,
	.trigger = fxt_trigger,
	.finish = fxt_finish,
	.stats = fxt_stats,
	.func_built = NULL,
};
