#include "symz.h"

#include <time.h>

#include "io.h"

/* snprintf that truncates silently (names and messages have no hard limit). */
void sfmt(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, cap, fmt, ap);
	va_end(ap);
}

void warnf(struct ctx *c, int degraded, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (degraded)
		c->st->degraded = 1;
	if (c->o->warn)
		c->o->warn(c->o->warn_ctx, degraded, buf);
}

double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void unit_reset(struct ctx *c)
{
	c->nspans = c->spans_live = 0;
	c->span_free = NONE;
	c->span_seq = 0;
	c->ninodes = c->inodes_live = 0;
	c->inode_free = NONE;
	c->inode_seq = 0;
	c->nroots = c->root_head = 0;
	c->npath = 0;
	c->nwin = c->npsp = 0;
	c->ngrps = 0;
	hmap_fini(&c->gidx);
	for (size_t i = 0; i < c->nthrs; i++)
		free(c->thrs[i].stack);
	c->nthrs = 0;
	hmap_fini(&c->tidx);
	c->unit_tid = NONE;
	c->unit_end = 0;
	if (c->gdep_used)
		memset(c->gdep, 0, c->gdep_used * sizeof *c->gdep);
	c->gdep_used = 0;
	c->gd_set = 0;
	c->gd_tid = 0;
	c->last_gtid = c->last_gdepth = 0;
	c->last_g = NONE;
}

/* The unit is complete: resolve, then write the rest of it (everything is
 * final now).  0 or -MTEV_E*. */
static int unit_flush(struct ctx *c, mtev_writer *wr)
{
	if (!c->span_seq && !c->nwin)
		return 0;
	int r = proc_window(c, wr);
	if (r < 0)
		return r;
	for (size_t k = 0; k < c->nthrs; k++)
		for (size_t d = 0; d < c->thrs[k].n; d++)
			c->spans[c->thrs[k].stack[d].si].st &= ~(uint32_t)SP_ON_STACK;
	c->fin = 1;
	r = emit_round(c, wr);
	c->fin = 0;
	if (r == 0 && (c->spans_live || c->inodes_live)) {
		c->bug = c->spans_live + c->inodes_live; /* out_fail says so */
		r = -MTEV_EINVAL;
	}
	unit_reset(c);
	return r;
}

static int fail(struct symz_stats *st, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct symz_stats *st, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->err, sizeof st->err, fmt, ap);
	va_end(ap);
	return -code;
}

static void ctx_fini(struct ctx *c)
{
	if (c->sym)
		llvmsym_stop(c->sym, 0);
	unit_reset(c);
	for (size_t i = 0; i < c->nbins; i++) {
		struct bin *b = &c->bins[i];
		if (b->state > 0)
			elfinfo_fini(&b->ei);
		free(b->cbuf);
		hmap_fini(&b->cidx);
		free(b->cnew);
	}
	for (size_t i = 0; i < c->npmaps; i++)
		free(c->pmaps[i].e);
	free(c->pmaps);
	free(c->pids);
	free(c->bins);
	free(c->maps);
	free(c->wants);
	free(c->res);
	free(c->frames);
	bvec_free(c->spans, c->capspans, sizeof *c->spans);
	bvec_free(c->inodes, c->capinodes, sizeof *c->inodes);
	free(c->roots);
	bvec_free(c->win, c->capwin, sizeof *c->win);
	bvec_free(c->psp, c->cappsp, sizeof *c->psp);
	free(c->grps);
	free(c->gdep);
	free(c->thrs);
	strpool_fini(&c->inames);
	free(c->path);
	strpool_fini(&c->onames);
	free(c->jf);
	free(c->js);
	hmap_fini(&c->sym_seen);
	hmap_fini(&c->tid2pid);
	free(c->want_idx.s);
	free(c->wmemo);
	hmap_fini(&c->res_idx);
	arena_fini(&c->ar);
}

/* Once the window is full: resolves and processes it, then writes what has
 * settled.  0 or -MTEV_E*. */
static int window_full(struct ctx *c, mtev_writer *wr)
{
	if (c->nwin < c->window)
		return 0;
	return proc_window(c, wr);
}

static int add_span(struct ctx *c, const struct mtev_rec *rec)
{
	struct pspan s = {rec->span.begin, rec->span.end, rec->span.func, c->span_seq++,
			  rec->span.tid, rec->span.depth, rec->span.flags, 0, NONE, NONE};
	if (rec->span.name.len) {
		uint32_t nm = strpool_add(&c->inames, rec->span.name.p, rec->span.name.len, NULL);
		if (nm >= NONE - 1)
			return -1;
		s.nm = nm + 1;
	}
	if (s.func)
		s.func_w = want_get(c, s.tid, s.func);
	if (rec->span.callsite) /* for its symbol record, and the attach rule */
		s.cs_w = want_get(c, s.tid, rec->span.callsite);
	if (BVEC_PUSH(c->psp, c->npsp, c->cappsp, s) < 0)
		return -1;
	struct witem it = {s.begin, (uint32_t)(c->npsp - 1), NONE};
	if (BVEC_PUSH(c->win, c->nwin, c->capwin, it) < 0)
		return -1;
	if (c->unit_tid == NONE)
		c->unit_tid = s.tid;
	else if (c->unit_tid != s.tid)
		c->unit_tid = UNIT_MULTI;
	if (s.end > c->unit_end)
		c->unit_end = s.end;
	c->st->spans_in++;
	return 0;
}

/* A failure of writing (-MTEV_E* @w): its message. */
static int out_fail(struct ctx *c, int w)
{
	if (c->bug)
		return fail(c->st, SYMZ_ESYS, "internal error: %zu spans left unwritten", c->bug);
	if (c->oom || w == -MTEV_ENOMEM)
		return fail(c->st, SYMZ_ESYS, "out of memory");
	return fail(c->st, SYMZ_ESYS, "cannot write output: %s%s%s", mtev_strerror(w),
		    w == -MTEV_EIO ? ": " : "", w == -MTEV_EIO ? strerror(errno) : "");
}

/* A record of @rec's kind other than a waypoint: into the unit, or through
 * to @wr.  0, -MTEV_E* (writing), or NO_SPANS (branch records where spans
 * were expected). */
#define NO_SPANS 1
static int pass_record(struct ctx *c, mtev_writer *wr, const struct mtev_rec *rec, uint32_t flags)
{
	int w = 0;
	switch (rec->kind) {
	case MTEV_SPAN:
		/* a new root of the same thread after everything before it
		 * ended: what came before is complete */
		if (rec->span.depth == 0 && c->span_seq && c->unit_tid == rec->span.tid &&
		    rec->span.begin > c->unit_end)
			w = unit_flush(c, wr);
		c->any_span = 1;
		if (w == 0 && add_span(c, rec) < 0)
			c->oom = 1;
		break;
	case MTEV_WAYPOINT:
		c->any_span = 1;
		if (add_waypoint(c, rec) < 0)
			c->oom = 1;
		break;
	case MTEV_SYMBOL: /* replaced by ours */
		break;
	case MTEV_STRING:
		if (rec->string.id < SID_BASE) /* else a name of ours (a previous run's) */
			w = mtev_write(wr, rec);
		break;
	case MTEV_SEGMENT:
	case MTEV_GAP:
		/* producers write a segment's (or thread's) spans and
		 * waypoints together: what came before is complete */
		w = unit_flush(c, wr);
		if (w == 0)
			w = mtev_write(wr, rec);
		break;
	case MTEV_BRANCH:
		if (!c->any_span && !(flags & MTEV_F_SPANS))
			return NO_SPANS;
		w = mtev_write(wr, rec);
		break;
	case MTEV_THREAD: {
		if (hmap_put(&c->tid2pid, rec->thread.tid, 0, rec->thread.pid) == NONE)
			c->oom = 1;
		size_t k = 0;
		while (k < c->npids && c->pids[k] != rec->thread.pid)
			k++;
		if (k == c->npids && VEC_PUSH(c->pids, c->npids, c->cappids, rec->thread.pid) < 0)
			c->oom = 1;
		w = mtev_write(wr, rec);
		break;
	}
	case MTEV_MAP: {
		struct map m = {rec->map.pid, rec->map.time, rec->map.start, rec->map.len,
				rec->map.pgoff, NONE, NULL};
		m.path = arena_strndup(&c->ar, rec->map.path.p, rec->map.path.len);
		if (!m.path) {
			c->oom = 1;
			break;
		}
		if (is_file_backed(m.path)) {
			m.bin = bin_get(c, rec->map.path.p, rec->map.path.len, rec->map.build_id,
					rec->map.build_id_len);
		} else if (vdso_saved(m.path, rec->map.build_id, rec->map.build_id_len)) {
			m.bin = bin_get(c, rec->map.path.p, rec->map.path.len, rec->map.build_id,
					rec->map.build_id_len);
			if (m.bin != NONE)
				c->bins[m.bin].vdso = 1;
		}
		if (VEC_PUSH(c->maps, c->nmaps, c->capmaps, m) < 0)
			c->oom = 1;
		w = mtev_write(wr, rec);
		break;
	}
	default:
		w = mtev_write(wr, rec);
	}
	return w;
}

static int symz_core(mtev_reader *rd, int out_fd, const struct symz_opts *o,
		     struct symz_stats *st)
{
	struct ctx c;
	memset(&c, 0, sizeof c);
	c.o = o;
	c.st = st;
	c.window = o->window ? o->window : WINDOW;
	c.chunk = o->window ? o->window : CHUNK;
	unit_reset(&c);
	int ret = 0, err = 0, r;
	uint64_t nwp = 0; /* waypoints read (counted apart from records_in) */
	uint32_t flags = mtev_reader_header(rd)->flags;
	double t_start = cpu_now();
	mtev_writer *wr = o->sink ? mtev_writer_alloc_sink(o->sink, o->sink_ctx, &err)
				  : mtev_writer_alloc(out_fd, "mt-symbolize", flags | MTEV_F_SYMBOLS, &err);
	if (!wr) {
		ret = fail(st, SYMZ_ESYS, "cannot write output: %s", mtev_strerror(err));
		goto out;
	}
	c.wmemo = malloc(WMEMO * sizeof *c.wmemo);
	if (c.wmemo)
		for (size_t i = 0; i < WMEMO; i++)
			c.wmemo[i] = (struct wslot){0, 0, NONE};
	if (!c.wmemo || wtab_init(&c.want_idx) < 0) {
		ret = fail(st, SYMZ_ESYS, "out of memory");
		goto out;
	}
	struct mtev_rec rec;
	uint64_t nread = 0;
	while ((r = mtev_read(rd, &rec)) > 0) {
		int w = 0;
		if (__builtin_expect(!(++nread & 0xffff), 0) && o->progress)
			o->progress(o->progress_ctx, nread);
		if (rec.kind == MTEV_WAYPOINT) { /* most records */
			nwp++;
			if (add_waypoint(&c, &rec) < 0) {
				ret = fail(st, SYMZ_ESYS, "out of memory");
				goto out;
			}
			if ((w = window_full(&c, wr)) < 0) {
				ret = out_fail(&c, w);
				goto out;
			}
			continue;
		}
		st->records_in++;
		if (nwp)
			c.any_span = 1;
		w = pass_record(&c, wr, &rec, flags);
		if (w == NO_SPANS) {
			ret = fail(st, SYMZ_EINPUT,
				   "input has no spans (branch records, flag 'spans' unset): run mt-segment before mt-symbolize");
			goto out;
		}
		if (c.oom) {
			ret = fail(st, SYMZ_ESYS, "out of memory");
			goto out;
		}
		if (w == 0)
			w = window_full(&c, wr);
		if (w < 0) {
			ret = out_fail(&c, w);
			goto out;
		}
	}
	if (r == -MTEV_EIO || r == -MTEV_ENOMEM) {
		ret = fail(st, SYMZ_ESYS, "cannot read input: %s",
			   r == -MTEV_EIO ? strerror(errno) : mtev_strerror(r));
		goto out;
	}
	if (r < 0 && o->partial) { /* what was read is written, as a degraded result */
		warnf(&c, 1, "input: %s at byte offset %" PRIu64 "; the output covers the records "
		      "before it", mtev_strerror(r), mtev_reader_offset(rd));
		r = 0;
	}
	if (r < 0) {
		ret = fail(st, SYMZ_EINPUT, "input: %s at byte offset %" PRIu64, mtev_strerror(r),
			   mtev_reader_offset(rd));
		goto out;
	}
	if (nwp)
		c.any_span = 1;
	if (r == 0 && !c.any_span && !(flags & MTEV_F_SPANS)) {
		ret = fail(st, SYMZ_EINPUT,
			   "input has no spans (flag 'spans' unset): run mt-segment before mt-symbolize");
		goto out;
	}
	if (r == 0)
		r = unit_flush(&c, wr);
	if (c.oom) {
		ret = fail(st, SYMZ_ESYS, "out of memory");
		goto out;
	}
	if (st->waypoints_late || st->spans_late)
		warnf(&c, 0, "%" PRIu64 " waypoints and %" PRIu64 " spans are earlier than a record before them of their thread (the input is not in time order per thread): the inline frames and spans they make may come after spans that follow them",
		      st->waypoints_late, st->spans_late);
	resolve_finish(&c);
	if (r == 0)
		r = mtev_writer_finish(wr);
	if (r < 0) {
		ret = out_fail(&c, r);
		goto out;
	}
	st->t_read = cpu_now() - t_start - st->t_resolve - st->t_tree - st->t_write;
out:
	st->records_in += nwp;
	st->waypoints_in += nwp;
	mtev_writer_free(wr);
	ctx_fini(&c);
	return ret;
}

int symz_stream(const void *buf, size_t len, int out_fd, const struct symz_opts *o,
		struct symz_stats *st)
{
	int err = 0;
	memset(st, 0, sizeof *st);
	mtev_reader *rd = mtev_reader_alloc_mem(buf, len, &err);
	if (!rd)
		return fail(st, SYMZ_EINPUT, "not a usable MTEV stream: %s", mtev_strerror(err));
	int r = symz_core(rd, out_fd, o, st);
	mtev_reader_free(rd);
	return r;
}

int symz_run_reader(mtev_reader *rd, int out_fd, const struct symz_opts *o,
		    struct symz_stats *st)
{
	memset(st, 0, sizeof *st);
	return symz_core(rd, out_fd, o, st);
}

int symz_run(int in_fd, int out_fd, const struct symz_opts *o, struct symz_stats *st)
{
	int err = 0;
	memset(st, 0, sizeof *st);
	mtev_reader *rd = mtev_reader_alloc(in_fd, &err);
	if (!rd) {
		if (err == -MTEV_EIO)
			return fail(st, SYMZ_ESYS, "cannot read input: %s", strerror(errno));
		return fail(st, SYMZ_EINPUT, "not a usable MTEV stream: %s", mtev_strerror(err));
	}
	int r = symz_core(rd, out_fd, o, st);
	mtev_reader_free(rd);
	return r;
}


