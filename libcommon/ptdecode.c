/* ptdecode: Intel PT (perf.data or raw) to MTEV with libipt: the entry
 * points.  See ptdecode.h, ptd_int.h (how the parts fit) and
 * formats/mtev-semantics.md. */
#include "ptd_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io.h"

void ptd_warn(struct ptd *d, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	d->st->warnings++;
	if (d->opts->warn)
		d->opts->warn(d->opts->warn_ctx, buf);
}

int ptd_fail(struct ptd *d, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->opts->errmsg, sizeof d->opts->errmsg, fmt, ap);
	va_end(ap);
	if (!d->err)
		d->err = -code;
	return -code;
}

static int ptd_init(struct ptd *d, struct ptd_options *opts, struct ptd_stats *st)
{
	memset(d, 0, sizeof *d);
	memset(st, 0, sizeof *st);
	opts->errmsg[0] = 0;
	d->opts = opts;
	d->st = st;
	d->step = opts->walk ? &ptd_step_walk : &ptd_step_libipt;
	d->isc = opts->iscache ? opts->iscache : pt_iscache_alloc(NULL);
	d->ccmask = (1u << PTD_CC2_BITS) - 1;
	d->cc = calloc(d->ccmask + 1, sizeof *d->cc);
	if (!d->isc || !d->cc)
		return ptd_fail(d, PTD_ESYS, "out of memory");
	return 0;
}

static void ptd_fini(struct ptd *d)
{
	size_t i;
	ptd_par_fini(d); /* before the decoders and images go */
	for (i = 0; i < d->nq; i++) {
		struct ptq *q = &d->q[i];
		size_t k;
		d->st->blocks += q->nblocks;
		d->st->insns += q->ninsns;
		if (q->dec)
			pt_blk_free_decoder(q->dec);
		if (q->segdec)
			pt_blk_free_decoder(q->segdec);
		for (k = 0; k < q->nbufs; k++)
			if (q->bufs[k].file_off >> 63)
				free((void *)q->bufs[k].data);
		free(q->bufs);
		if (q->stream_owned)
			free(q->stream);
		free(q->segs);
		free(q->fifo);
		free(q->psbs);
		ptd_walk_free(q);
		free(q->rsbuf);
	}
	free(d->q);
	ptd_walk_fini(d);
	free(d->auxlost);
	pd_close(d->reader);
	for (i = 0; i < d->nproc; i++) {
		pt_image_free(d->proc[i].img);
		free(d->proc[i].maps);
		free(d->proc[i].sbmaps);
		free(d->proc[i].isids);
	}
	free(d->proc);
	for (i = 0; i < d->noldimgs; i++) {
		pt_image_free(d->oldimgs[i].img);
		free(d->oldimgs[i].isids);
	}
	free(d->oldimgs);
	free(d->kmaps);
	if (d->isc != d->opts->iscache)
		pt_iscache_free(d->isc);
	free(d->cc);
	for (i = 0; i < d->nfmaps; i++) {
		if (d->fmaps[i].base)
			ptd_fmap_free(d->fmaps[i].base, d->fmaps[i].len);
		free(d->fmaps[i].file);
	}
	free(d->fmaps);
	free(d->secs);
	free(d->sb);
	free(d->ips);
	free(d->ustk);
	unw_free(d->unw);
	for (i = 0; i < d->ncpus; i++)
		free(d->cpus[i].v);
	free(d->cpus);
	for (i = 0; i < d->nthr; i++) {
		for (size_t k = 0; k < d->thr[i].nrc; k++)
			free(d->thr[i].rc[k].ra);
		free(d->thr[i].rc);
	}
	free(d->thr);
	free(d->thr_idx);
	free(d->bids);
	free(d->fin);
	free(d->sbout);
	strpool_fini(&d->strs);
}

/* Degraded output (exit 1) always comes with a line saying what and where:
 * the gaps are summed up in one warning, naming the first. */
static void gap_summary(struct ptd *d)
{
	if (d->err || !d->ngaps_set)
		return;
	const char *why = mtev_gap_name(d->gap1.reason);
	char off[48] = "";
	if (d->gap1.offset != UINT64_MAX)
		snprintf(off, sizeof off, " at trace offset 0x%" PRIx64, d->gap1.offset);
	ptd_warn(d, "the trace has %" PRIu64 " gap(s); the first (%s, tid %u%s, ip 0x%" PRIx64 ")%s%s",
		 d->ngaps_set, why ? why : "?", d->gap1.tid, off, d->gap1.ip,
		 d->gap1.msg[0] ? ": " : "", d->gap1.msg);
}

/* Opens the output, then writes the head and every record in time order. */
static void write_all(struct ptd *d, int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w),
		      void *out_ctx, uint32_t flags)
{
	if (open_out(out_ctx, flags, &d->w) < 0) {
		ptd_fail(d, PTD_EOUTPUT, "cannot open the output");
		return;
	}
	if (write_head(d) < 0)
		return;
	merge(d);
	gap_summary(d);
}

int ptd_decode_perf(int fd_in, int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w),
		    void *out_ctx, struct ptd_options *opts, struct ptd_stats *st)
{
	struct ptd d;
	uint32_t flags = MTEV_F_SORTED;
	size_t i;
	int ret;

	if (ptd_init(&d, opts, st) < 0)
		goto out;
	if (read_perf(&d, fd_in) < 0)
		goto out;
	if (!d.have_info && d.nq == 0)
		flags |= MTEV_F_SAMPLING;
	if (d.nq && !d.have_info) {
		ptd_warn(&d, "AUXTRACE data without AUXTRACE_INFO: assuming Intel PT");
	}
	/* queue threads: per-thread queues know theirs */
	for (i = 0; i < d.nq; i++) {
		struct ptq *q = &d.q[i];
		if (!d.per_cpu && q->tid0) {
			size_t k;
			for (k = 0; k < d.nsb; k++)
				if (d.sb[k].tid == q->tid0 && d.sb[k].kind == SB_COMM) {
					q->pid0 = d.sb[k].pid;
					break;
				}
			if (q->pid0 == UINT32_MAX)
				q->pid0 = q->tid0;
		}
		q->state = Q_SEG;
	}
	/* threads named by COMM records are announced by them (sampling:
	 * announced in time order, by the first of fork, comm, sample) */
	for (i = 0; i < d.nsb && d.nq; i++)
		if (d.sb[i].kind == SB_COMM) {
			int th = thr_get(&d, d.sb[i].tid, d.sb[i].pid);
			if (th >= 0)
				d.thr[th].announced = 1;
		}
	write_all(&d, open_out, out_ctx, flags);
out:
	ret = d.err;
	ptd_fini(&d);
	return ret;
}

int ptd_parse_image_spec(const char *arg, struct ptd_image_spec *spec)
{
	const char *at = strrchr(arg, '@');
	char *file, *c1, *end;
	size_t flen;

	memset(spec, 0, sizeof *spec);
	if (!at || at == arg)
		return -1;
	errno = 0;
	spec->vaddr = strtoull(at + 1, &end, 0);
	if (errno || end == at + 1 || *end)
		return -1;
	flen = (size_t)(at - arg);
	file = strndup(arg, flen);
	if (!file)
		return -1;
	c1 = strchr(file, ':');
	if (c1) {
		char *c2;
		*c1 = 0;
		spec->offset = strtoull(c1 + 1, &end, 0);
		if (end == c1 + 1 || (*end && *end != ':')) {
			free(file);
			return -1;
		}
		c2 = *end == ':' ? end : NULL;
		if (c2) {
			spec->size = strtoull(c2 + 1, &end, 0);
			if (end == c2 + 1 || *end) {
				free(file);
				return -1;
			}
		}
	}
	spec->file = file; /* owned by the caller now (lives for the run) */
	return 0;
}

int ptd_decode_raw(const char *pt_file, int (*open_out)(void *ctx, uint32_t flags, mtev_writer **w),
		   void *out_ctx, struct ptd_options *opts, struct ptd_stats *st)
{
	struct ptd d;
	struct ptq *q;
	uint8_t *buf = NULL;
	size_t len = 0, i;
	int ret;

	if (ptd_init(&d, opts, st) < 0)
		goto out;
	if (io_slurp(pt_file, &buf, &len) < 0) {
		ptd_fail(&d, errno == ENOENT ? PTD_EINPUT : PTD_ESYS, "cannot read %s: %s",
			 pt_file, strerror(errno));
		goto out;
	}
	q = q_get(&d, 0);
	if (!q) {
		ptd_fail(&d, PTD_ESYS, "out of memory");
		goto out;
	}
	q->tid0 = opts->raw_tid;
	q->pid0 = opts->raw_pid;
	q->stream = buf;
	q->stream_owned = 1;
	buf = NULL;
	q->len = len;
	q->segs = calloc(1, sizeof *q->segs);
	if (!q->segs) {
		ptd_fail(&d, PTD_ESYS, "out of memory");
		goto out;
	}
	q->segs[0].end = len;
	q->nsegs = 1;
	q->state = Q_SEG;
	{
		struct proc *p = proc_get(&d, opts->raw_pid);
		if (!p) {
			ptd_fail(&d, PTD_ESYS, "out of memory");
			goto out;
		}
		for (i = 0; i < opts->nimages; i++) {
			const struct ptd_image_spec *im = &opts->images[i];
			uint64_t size = im->size;
			struct mapent me;
			int isid;
			if (!size) {
				struct stat sb;
				if (stat(im->file, &sb) < 0 || (uint64_t)sb.st_size < im->offset) {
					ptd_fail(&d, PTD_EINPUT, "image %s: %s", im->file,
						 strerror(errno ? errno : EINVAL));
					goto out;
				}
				size = (uint64_t)sb.st_size - im->offset;
			}
			isid = pt_iscache_add_file(d.isc, im->file, im->offset, size, im->vaddr);
			sec_note(&d, im->file, im->offset, size, im->vaddr, isid);
			if (isid < 0) {
				ptd_fail(&d, PTD_EINPUT, "image %s: %s", im->file,
					 pt_errstr(pt_errcode(isid)));
				goto out;
			}
			proc_add_isid(&d, p, isid);
			me.start = im->vaddr;
			me.end = im->vaddr + size;
			me.path = strpool_intern(&d.strs, im->file);
			map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
		}
	}
	if (thr_get(&d, opts->raw_tid, opts->raw_pid) < 0) {
		ptd_fail(&d, PTD_ESYS, "out of memory");
		goto out;
	}
	write_all(&d, open_out, out_ctx, MTEV_F_SORTED);
out:
	free(buf);
	ret = d.err;
	ptd_fini(&d);
	return ret;
}
