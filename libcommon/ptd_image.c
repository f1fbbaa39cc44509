/* ptd_image: the image file of each executable map (found by path and
 * build-id), added to libipt's image of its process; the bytes of each
 * section, read in place by the branch classifier. */
#include "ptd_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfinfo.h"
#include "imgfind.h"
#include "vec.h"

/* ---- images ---- */

#ifdef PTD_FMAP_READ
/* The fuzz build (mk/fuzz.mk): an image file is read into memory, not
 * mapped: under libFuzzer each decode's munmap is a TLB shootdown across
 * cpus, ~10% of an exec.  The same bytes either way. */
static uint8_t *fmap_file(int fd, size_t len)
{
	uint8_t *m = malloc(len);
	size_t got = 0;
	while (m && got < len) {
		ssize_t n = pread(fd, m + got, len - got, (off_t)got);
		if (n <= 0) {
			free(m);
			m = NULL;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	return m;
}

void ptd_fmap_free(uint8_t *base, size_t len)
{
	(void)len;
	free(base);
}
#else
static uint8_t *fmap_file(int fd, size_t len)
{
	void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	return m == MAP_FAILED ? NULL : m;
}

void ptd_fmap_free(uint8_t *base, size_t len)
{
	munmap(base, len);
}
#endif

/* Finds the file for @path with build-id @bid (imgfind.h): its interned
 * path, or NULL with *why saying what was wrong. */
const char *find_image(struct ptd *d, const char *path, const uint8_t *bid,
			      uint8_t bidlen, const char **why)
{
	char buf[4096], whybuf[4400];

	*why = "not found";
	if (d->opts->no_images)
		return NULL;
	if (img_find(path, bid, bidlen, buf, sizeof buf, whybuf, sizeof whybuf))
		return strpool_intern(&d->strs, buf);
	*why = strpool_intern(&d->strs, whybuf);
	if (!*why)
		*why = "not found";
	return NULL;
}

const struct pd_buildid *bid_for_path(struct ptd *d, const char *path)
{
	size_t i;
	for (i = 0; i < d->nbids; i++)
		if (!strcmp(d->bids[i].filename, path))
			return &d->bids[i];
	return NULL;
}

/* Section @isid is @len bytes of @file from @pgoff, loaded at @addr: keep a
 * view of its bytes.  The same rules as libipt's: the section is cut at the
 * end of the file; an offset at or past the end is no section (libipt
 * refuses it too).  Anything unusual leaves the view empty, and
 * classify_ip_slow asks libipt instead. */
void sec_note(struct ptd *d, const char *file, uint64_t pgoff, uint64_t len, uint64_t addr,
		     int isid)
{
	struct filemap *f = NULL;
	size_t i;

	if (isid <= 0)
		return;
	if ((size_t)isid >= d->nsecs) {
		if (mt_grow((void **)&d->secs, &d->seccap, (size_t)isid + 1, sizeof *d->secs) < 0)
			return;
		memset(d->secs + d->nsecs, 0, ((size_t)isid + 1 - d->nsecs) * sizeof *d->secs);
		d->nsecs = (size_t)isid + 1;
	}
	d->secs[isid].data = NULL;
	d->secs[isid].file = NULL;
	for (i = 0; i < d->nfmaps; i++)
		if (!strcmp(d->fmaps[i].file, file)) {
			f = &d->fmaps[i];
			break;
		}
	if (!f) {
		struct stat st;
		int fd;
		if (mt_grow((void **)&d->fmaps, &d->fmapcap, d->nfmaps + 1, sizeof *d->fmaps) < 0)
			return;
		f = &d->fmaps[d->nfmaps];
		f->file = strdup(file);
		f->base = NULL;
		f->len = 0;
		if (!f->file)
			return;
		d->nfmaps++;
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
				f->base = fmap_file(fd, (size_t)st.st_size);
				if (f->base)
					f->len = (size_t)st.st_size;
			}
			close(fd);
		}
	}
	d->secs[isid].file = f->file;
	d->secs[isid].pgoff = pgoff;
	d->secs[isid].len = len;
	d->secs[isid].addr = addr;
	d->secs[isid].bc = isid;
	if (!f->base || pgoff >= f->len)
		return;
	d->secs[isid].data = f->base + pgoff;
	d->secs[isid].size = len < f->len - pgoff ? len : f->len - pgoff;
	/* libipt's match: the first section of the same file and offset whose
	 * size (cut at the end of the file) is the size asked for */
	for (i = 1; i < (size_t)isid; i++) {
		const struct secview *v = &d->secs[i];
		if (v->file == f->file && v->data && v->pgoff == pgoff && v->size == len) {
			d->secs[isid].bc = v->bc;
			break;
		}
	}
}

/* Adds an exec mapping to @p's image (or every image for pid -1). */
static void image_add(struct ptd *d, uint32_t pid, const struct sb *s)
{
	const char *path = s->mmap.path, *file, *why;
	const uint8_t *bid = s->mmap.bid;
	uint8_t bidlen = s->mmap.bidlen;
	struct mapent me;
	int isid = -1;
	size_t i;

	if (!bidlen) {
		const struct pd_buildid *b = bid_for_path(d, path);
		if (b) {
			bid = b->id;
			bidlen = b->len;
		}
	}
	me.start = s->mmap.addr;
	me.end = s->mmap.addr + s->mmap.len;
	me.path = strpool_intern(&d->strs, path);
	if (!strncmp(path, "//anon", 6) || !strcmp(path, "[heap]") || !strcmp(path, "[stack]")) {
		/* no file: code there is a gap; the resync's address rule
		 * (ptd_resync.c) must not assume it away */
		struct proc *p = pid == UINT32_MAX ? NULL : proc_get(d, pid);
		if (p)
			p->anon_exec = 1;
		return;
	}
	file = find_image(d, path, bid, bidlen, &why);
	if (file) {
		isid = pt_iscache_add_file(d->isc, file, s->mmap.pgoff, s->mmap.len, s->mmap.addr);
		sec_note(d, file, s->mmap.pgoff, s->mmap.len, s->mmap.addr, isid);
		if (isid < 0) {
			ptd_warn(d, "cannot load image %s for %s: %s", file, path,
				 pt_errstr(pt_errcode(isid)));
		}
	} else if (!d->opts->no_images && pid == UINT32_MAX) {
		/* kernel and modules: without --kcore they are never there;
		 * one line says so */
		if (!d->nkmissing++)
			d->kmissing_first = me.path;
	} else if (!d->opts->no_images) {
		/* one warning per path */
		char kbuf[4200];
		size_t n0 = d->strs.n;
		snprintf(kbuf, sizeof kbuf, "\x01warned:%s", path);
		strpool_intern(&d->strs, kbuf);
		if (d->strs.n != n0) {
			char hex[41];
			buildid_hex(hex, bid, bidlen);
			ptd_warn(d, "image %s%s%s%s: %s; its code will be a gap", path,
				 bidlen ? " (build-id " : "", bidlen ? hex : "", bidlen ? ")" : "",
				 why);
		}
	}
	if (pid == UINT32_MAX) {
		map_note(&d->kmaps, &d->nkmaps, &d->kmapcap, &me);
		for (i = 0; i < d->nproc; i++) {
			struct proc *p = &d->proc[i];
			map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
			if (isid >= 0)
				proc_add_isid(d, p, isid);
		}
		return;
	}
	{
		struct proc *p = proc_get(d, pid);
		if (!p)
			return;
		map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
		if (isid >= 0)
			proc_add_isid(d, p, isid);
	}
}

/* Applies the effects of sideband records (images) up to @time. */
void sb_apply_until(struct ptd *d, uint64_t time)
{
	while (d->sb_apply < d->nsb && d->sb[d->sb_apply].time <= time) {
		const struct sb *s = &d->sb[d->sb_apply++];
		switch (s->kind) {
		case SB_MMAP:
			if (s->mmap.prot & PROT_X)
				image_add(d, s->pid, s);
			break;
		case SB_COMM:
			if (s->comm.exec)
				proc_exec(d, s->pid);
			break;
		case SB_FORK:
			proc_fork(d, s->pid, s->fork.ppid);
			break;
		default:
			break;
		}
	}
}

enum x86br classify_ip_slow(struct ptd *d, uint64_t ip, int32_t isid, uint8_t mode,
					uint8_t *size)
{
	struct ccache_ent *e = &d->cc1[(ip ^ (ip >> 11)) & (PTD_CC1 - 1)], *e2;
	uint8_t buf[16];
	int n;
	enum x86br cls;

	e2 = &d->cc[(ip ^ (ip >> 13)) & d->ccmask];
	if (e2->valid && e2->ip == ip && e2->isid == isid && e2->mode == mode) {
		*e = *e2;
		*size = e->size;
		return (enum x86br)e->cls;
	}
	*size = 0;
	if (isid <= 0)
		return X86BR_NONE;
	if ((size_t)isid < d->nsecs && d->secs[isid].data) {
		/* pt_iscache_read without the mapping and locking */
		const struct secview *v = &d->secs[isid];
		uint64_t left;
		if (ip < v->addr || ip - v->addr >= v->size)
			return X86BR_NONE; /* -pte_nomap */
		left = v->size - (ip - v->addr);
		n = left < sizeof buf ? (int)left : (int)sizeof buf;
		memcpy(buf, v->data + (ip - v->addr), (size_t)n);
	} else {
		n = pt_iscache_read(d->isc, buf, sizeof buf, isid, ip);
	}
	if (n <= 0)
		return X86BR_NONE;
	cls = cc_classify(e, buf, n, ip, isid, mode, size);
	*e2 = *e;
	return cls;
}
