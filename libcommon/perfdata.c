/* perfdata: perf.data reader.  See perfdata.h. */
#include "perfdata.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "arena.h"
#include "io.h"

#define PD_MAGIC 0x32454c4946524550ull	   /* "PERFILE2" read as a native u64 */
#define PD_MAGIC_SWAP 0x50455246494c4532ull
#define PD_FILE_HEADER_SIZE 104
#define PD_PIPE_HEADER_SIZE 16
#define PD_ATTR_VER0 64

struct pd_idmap {
	uint64_t id;
	uint32_t attr;
};

struct pd_reader {
	/* source: memory (mapped or owned) or a stream fd */
	const uint8_t *mem;
	size_t memlen;
	int mapped;   /* mem is an mmap of memlen bytes */
	uint8_t *owned; /* mem is malloc'd */
	int fd;	      /* stream mode: >= 0 */

	uint64_t pos;	   /* offset of the next record */
	uint64_t data_end; /* memory mode: end of the data section */
	uint64_t err_off;  /* where the last error was found */
	int truncated;	   /* the file ends before its data section does */
	int open_end;	   /* data runs to the end of the file (pipe mode, size 0) */
	uint32_t last_type; /* of the last record read (pipe mode ends at FINISHED_ROUND) */

	/* stream-mode buffers */
	uint8_t *rec;
	size_t reccap;
	uint8_t *pay;
	size_t paycap;

	/* decompressed COMPRESSED records being served */
	ZSTD_DStream *zds;
	uint8_t *zbuf;
	size_t zcap, zlen, zpos;
	uint64_t zoff; /* offset of the COMPRESSED record */

	struct pd_info info;
	struct pd_attr *attrs;
	size_t nattrs, attrcap;
	uint64_t **idstore; /* one allocation per attr */
	struct pd_idmap *idmap;
	size_t nidmap;
	int idmap_sorted;

	char *cpuid;
	struct pd_buildid *buildids;
	size_t nbuildids, bidcap;
	struct arena strings; /* owned strings (names, filenames) */
	struct { uint32_t type; const char *name; } *pmus;
	size_t npmus;
	char **descnames; /* EVENT_DESC names in attr order */
	size_t ndescnames;
};

static const char *const pd_errs[] = {
	[0] = "success",
	[PD_EIO] = "read error",
	[PD_EMAGIC] = "not a perf.data file (bad magic)",
	[PD_EENDIAN] = "written on a machine of the other byte order (not supported)",
	[PD_ETRUNC] = "truncated",
	[PD_ESIZE] = "impossible record or section size",
	[PD_ECORRUPT] = "corrupt record",
	[PD_ENOMEM] = "out of memory",
	[PD_EUNSUPPORTED] = "unsupported record",
	[PD_EINVAL] = "invalid argument",
	[PD_ELIMIT] = "AUXTRACE record larger than the 1 GiB limit",
};

const char *pd_strerror(int err)
{
	if (err < 0)
		err = -err;
	if ((size_t)err < sizeof pd_errs / sizeof pd_errs[0] && pd_errs[err])
		return pd_errs[err];
	return "unknown error";
}

static const char *const pd_names[] = {
	[PD_REC_MMAP] = "MMAP",
	[PD_REC_LOST] = "LOST",
	[PD_REC_COMM] = "COMM",
	[PD_REC_EXIT] = "EXIT",
	[PD_REC_THROTTLE] = "THROTTLE",
	[PD_REC_UNTHROTTLE] = "UNTHROTTLE",
	[PD_REC_FORK] = "FORK",
	[PD_REC_READ] = "READ",
	[PD_REC_SAMPLE] = "SAMPLE",
	[PD_REC_MMAP2] = "MMAP2",
	[PD_REC_AUX] = "AUX",
	[PD_REC_ITRACE_START] = "ITRACE_START",
	[PD_REC_LOST_SAMPLES] = "LOST_SAMPLES",
	[PD_REC_SWITCH] = "SWITCH",
	[PD_REC_SWITCH_CPU_WIDE] = "SWITCH_CPU_WIDE",
	[PD_REC_NAMESPACES] = "NAMESPACES",
	[PD_REC_KSYMBOL] = "KSYMBOL",
	[PD_REC_BPF_EVENT] = "BPF_EVENT",
	[PD_REC_CGROUP] = "CGROUP",
	[PD_REC_TEXT_POKE] = "TEXT_POKE",
	[PD_REC_AUX_OUTPUT_HW_ID] = "AUX_OUTPUT_HW_ID",
	[PD_REC_HEADER_ATTR] = "HEADER_ATTR",
	[PD_REC_HEADER_EVENT_TYPE] = "HEADER_EVENT_TYPE",
	[PD_REC_HEADER_TRACING_DATA] = "HEADER_TRACING_DATA",
	[PD_REC_HEADER_BUILD_ID] = "HEADER_BUILD_ID",
	[PD_REC_FINISHED_ROUND] = "FINISHED_ROUND",
	[PD_REC_ID_INDEX] = "ID_INDEX",
	[PD_REC_AUXTRACE_INFO] = "AUXTRACE_INFO",
	[PD_REC_AUXTRACE] = "AUXTRACE",
	[PD_REC_AUXTRACE_ERROR] = "AUXTRACE_ERROR",
	[PD_REC_THREAD_MAP] = "THREAD_MAP",
	[PD_REC_CPU_MAP] = "CPU_MAP",
	[PD_REC_STAT_CONFIG] = "STAT_CONFIG",
	[PD_REC_STAT] = "STAT",
	[PD_REC_STAT_ROUND] = "STAT_ROUND",
	[PD_REC_EVENT_UPDATE] = "EVENT_UPDATE",
	[PD_REC_TIME_CONV] = "TIME_CONV",
	[PD_REC_HEADER_FEATURE] = "HEADER_FEATURE",
	[PD_REC_COMPRESSED] = "COMPRESSED",
	[PD_REC_FINISHED_INIT] = "FINISHED_INIT",
};

const char *pd_rec_name(uint32_t type)
{
	if (type < sizeof pd_names / sizeof pd_names[0])
		return pd_names[type];
	return NULL;
}

static inline uint64_t get64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static inline uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* Reads the 8-byte field at *p, as one word or as two 32-bit halves, and
 * steps past it; -1 (nothing read) when fewer than 8 bytes are left. */
static inline int take64(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	if (end - *p < 8)
		return -1;
	*v = get64(*p);
	*p += 8;
	return 0;
}

static inline int take32x2(const uint8_t **p, const uint8_t *end, uint32_t *lo, uint32_t *hi)
{
	if (end - *p < 8)
		return -1;
	*lo = get32(*p);
	*hi = get32(*p + 4);
	*p += 8;
	return 0;
}

static inline uint16_t get16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

/* ---- owned storage ---- */

static char *pd_strdup_n(pd_reader *r, const uint8_t *s, size_t maxlen)
{
	return arena_strndup(&r->strings, (const char *)s, strnlen((const char *)s, maxlen));
}

static int pd_grow(uint8_t **buf, size_t *cap, size_t need)
{
	uint8_t *p;
	size_t c = *cap ? *cap : 4096;
	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -PD_ENOMEM;
		c *= 2;
	}
	p = realloc(*buf, c);
	if (!p)
		return -PD_ENOMEM;
	*buf = p;
	*cap = c;
	return 0;
}

/* ---- attrs and ids ---- */

/* Parses a perf_event_attr of @len available bytes. */
static int pd_add_attr(pd_reader *r, const uint8_t *p, size_t len, const uint8_t *ids,
		       size_t nids)
{
	struct pd_attr *a;
	uint32_t size;
	uint8_t buf[136];
	uint64_t *idcopy = NULL;
	size_t i;

	if (len < PD_ATTR_VER0)
		return -PD_ESIZE;
	size = get32(p + 4);
	if (!size)
		size = PD_ATTR_VER0;
	if (size < PD_ATTR_VER0 || size > len)
		return -PD_ESIZE;
	memset(buf, 0, sizeof buf);
	memcpy(buf, p, size < sizeof buf ? size : sizeof buf);

	if (r->nattrs == r->attrcap) {
		size_t cap = r->attrcap ? 2 * r->attrcap : 8;
		struct pd_attr *v = realloc(r->attrs, cap * sizeof *v);
		uint64_t **s = realloc(r->idstore, cap * sizeof *s);
		if (v)
			r->attrs = v;
		if (s)
			r->idstore = s;
		if (!v || !s)
			return -PD_ENOMEM;
		r->attrcap = cap;
	}
	if (nids) {
		struct pd_idmap *m;
		idcopy = malloc(nids * sizeof *idcopy);
		m = realloc(r->idmap, (r->nidmap + nids) * sizeof *m);
		if (!idcopy || !m) {
			free(idcopy);
			if (m)
				r->idmap = m;
			return -PD_ENOMEM;
		}
		r->idmap = m;
		for (i = 0; i < nids; i++)
			idcopy[i] = get64(ids + 8 * i);
		for (i = 0; i < nids; i++) {
			r->idmap[r->nidmap].id = idcopy[i];
			r->idmap[r->nidmap].attr = (uint32_t)r->nattrs;
			r->nidmap++;
		}
		r->idmap_sorted = 0;
	}
	r->idstore[r->nattrs] = idcopy;
	a = &r->attrs[r->nattrs++];
	memset(a, 0, sizeof *a);
	a->type = get32(buf);
	a->size = size;
	a->config = get64(buf + 8);
	a->sample_period = get64(buf + 16);
	a->sample_type = get64(buf + 24);
	a->read_format = get64(buf + 32);
	a->flags = get64(buf + 40);
	a->bp_type = get32(buf + 52);
	a->config1 = get64(buf + 56);
	a->config2 = get64(buf + 64);
	a->branch_sample_type = get64(buf + 72);
	a->sample_regs_user = get64(buf + 80);
	a->sample_stack_user = get32(buf + 88);
	a->sample_regs_intr = get64(buf + 96);
	a->ids = idcopy;
	a->nids = nids;
	r->info.attrs = r->attrs;
	r->info.nattrs = r->nattrs;
	return 0;
}

static int idmap_cmp(const void *a, const void *b)
{
	const struct pd_idmap *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

const struct pd_attr *pd_attr_by_id(const pd_reader *r, uint64_t id)
{
	size_t lo = 0, hi = r->nidmap;
	if (!r->idmap_sorted && r->nidmap) { /* qsort(NULL, 0) is undefined */
		qsort(r->idmap, r->nidmap, sizeof *r->idmap, idmap_cmp);
		((pd_reader *)r)->idmap_sorted = 1;
	}
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->idmap[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < r->nidmap && r->idmap[lo].id == id)
		return &r->attrs[r->idmap[lo].attr];
	return NULL;
}

static void pd_apply_names(pd_reader *r)
{
	size_t i;
	if (r->ndescnames != r->nattrs)
		return;
	for (i = 0; i < r->nattrs; i++)
		r->attrs[i].name = r->descnames[i];
}

/* ---- features ---- */

/* perf's "string" in a feature: u32 len, then len bytes (NUL padded). */
static const uint8_t *pd_feat_string(const uint8_t *p, const uint8_t *end, const uint8_t **s,
				     size_t *len)
{
	uint32_t n;
	if (end - p < 4)
		return NULL;
	n = get32(p);
	p += 4;
	if ((size_t)(end - p) < n)
		return NULL;
	*s = p;
	*len = n;
	return p + n;
}

static int pd_feature(pd_reader *r, unsigned feat, const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len, *s;
	size_t n;

	switch (feat) {
	case PD_FEAT_CPUID:
		if (!pd_feat_string(p, end, &s, &n))
			return -PD_ECORRUPT;
		free(r->cpuid);
		r->cpuid = strndup((const char *)s, n);
		if (!r->cpuid)
			return -PD_ENOMEM;
		r->info.cpuid = r->cpuid;
		return 0;
	case PD_FEAT_BUILD_ID:
		while (end - p >= 8) {
			uint16_t size = get16(p + 6), misc = get16(p + 4);
			struct pd_buildid *b;
			if (size < 8 + 4 + 24 || size > end - p)
				return -PD_ECORRUPT;
			if (r->nbuildids == r->bidcap) {
				size_t cap = r->bidcap ? 2 * r->bidcap : 32;
				struct pd_buildid *v = realloc(r->buildids, cap * sizeof *v);
				if (!v)
					return -PD_ENOMEM;
				r->buildids = v;
				r->bidcap = cap;
			}
			b = &r->buildids[r->nbuildids];
			b->pid = (int32_t)get32(p + 8);
			b->misc = misc;
			memcpy(b->id, p + 12, 20);
			b->len = 20;
			if ((misc & PD_MISC_BUILD_ID_SIZE) && p[12 + 20] <= 20)
				b->len = p[12 + 20];
			b->filename = pd_strdup_n(r, p + 36, size - 36);
			if (!b->filename)
				return -PD_ENOMEM;
			r->nbuildids++;
			p += size;
		}
		r->info.buildids = r->buildids;
		r->info.nbuildids = r->nbuildids;
		return 0;
	case PD_FEAT_PMU_MAPPINGS: {
		uint32_t nr, i;
		if (end - p < 4)
			return -PD_ECORRUPT;
		nr = get32(p);
		p += 4;
		if (nr > len / 8)
			return -PD_ECORRUPT;
		free(r->pmus);
		r->info.pmus = NULL; /* not left pointing at the freed table on an error */
		r->info.npmus = 0;
		r->pmus = calloc(nr ? nr : 1, sizeof *r->pmus);
		if (!r->pmus)
			return -PD_ENOMEM;
		r->npmus = 0;
		for (i = 0; i < nr; i++) {
			if (end - p < 4)
				return -PD_ECORRUPT;
			r->pmus[i].type = get32(p);
			p = pd_feat_string(p + 4, end, &s, &n);
			if (!p)
				return -PD_ECORRUPT;
			r->pmus[i].name = pd_strdup_n(r, s, n);
			if (!r->pmus[i].name)
				return -PD_ENOMEM;
			r->npmus++;
		}
		r->info.pmus = (void *)r->pmus;
		r->info.npmus = r->npmus;
		return 0;
	}
	case PD_FEAT_EVENT_DESC: {
		uint32_t nr, asz, i, nids;
		if (end - p < 8)
			return -PD_ECORRUPT;
		nr = get32(p);
		asz = get32(p + 4);
		p += 8;
		if (nr > len / 8 || asz > len)
			return -PD_ECORRUPT;
		free(r->descnames);
		r->descnames = calloc(nr ? nr : 1, sizeof *r->descnames);
		if (!r->descnames)
			return -PD_ENOMEM;
		r->ndescnames = 0;
		for (i = 0; i < nr; i++) {
			if ((size_t)(end - p) < (size_t)asz + 4)
				return -PD_ECORRUPT;
			p += asz;
			nids = get32(p);
			p = pd_feat_string(p + 4, end, &s, &n);
			if (!p || (size_t)(end - p) / 8 < nids)
				return -PD_ECORRUPT;
			r->descnames[i] = pd_strdup_n(r, s, n);
			if (!r->descnames[i])
				return -PD_ENOMEM;
			r->ndescnames++;
			p += (size_t)nids * 8;
		}
		pd_apply_names(r);
		return 0;
	}
	default:
		return 0;
	}
}

/* ---- opening ---- */

static int pd_open_file_mode(pd_reader *r)
{
	const uint8_t *h = r->mem;
	uint64_t hsize, attr_size, aoff, asz, doff, dsz, i, nattr;
	uint64_t feat[4];
	unsigned bit;
	const uint8_t *fs;
	size_t fslen;
	int err;

	if (r->memlen < PD_FILE_HEADER_SIZE)
		return -PD_ETRUNC;
	hsize = get64(h + 8);
	attr_size = get64(h + 16);
	aoff = get64(h + 24);
	asz = get64(h + 32);
	doff = get64(h + 40);
	dsz = get64(h + 48);
	memcpy(feat, h + 72, sizeof feat);
	if (hsize < PD_FILE_HEADER_SIZE || hsize > 4096)
		return -PD_ESIZE;
	if (attr_size < PD_ATTR_VER0 + 16 || attr_size > 4096 || asz % attr_size)
		return -PD_ESIZE;
	if (aoff > r->memlen || asz > r->memlen - aoff)
		return -PD_ETRUNC;
	nattr = asz / attr_size;
	for (i = 0; i < nattr; i++) {
		const uint8_t *e = r->mem + aoff + i * attr_size;
		uint64_t ioff = get64(e + attr_size - 16), isz = get64(e + attr_size - 8);
		if (isz % 8 || ioff > r->memlen || isz > r->memlen - ioff)
			return -PD_ESIZE;
		err = pd_add_attr(r, e, attr_size - 16, r->mem + ioff, isz / 8);
		if (err < 0)
			return err;
	}
	if (doff > r->memlen)
		return -PD_ETRUNC;
	r->info.data_offset = doff;
	r->info.data_size = dsz;
	r->pos = doff;
	if (dsz == 0 || dsz > r->memlen - doff) {
		/* an unfinished recording (size 0) or a truncated file: read
		 * records as far as they go; pd_next reports truncation */
		r->data_end = r->memlen;
		r->truncated = dsz != 0;
		r->open_end = 1;
		return 0;
	}
	r->data_end = doff + dsz;

	/* feature sections follow the data, one per set bit */
	fs = r->mem + doff + dsz;
	fslen = r->memlen - (doff + dsz);
	for (bit = 0; bit < 256; bit++) {
		uint64_t off, sz;
		if (!(feat[bit / 64] >> (bit % 64) & 1))
			continue;
		if (fslen < 16)
			return -PD_ETRUNC;
		off = get64(fs);
		sz = get64(fs + 8);
		fs += 16;
		fslen -= 16;
		if (off > r->memlen || sz > r->memlen - off)
			return -PD_ETRUNC;
		err = pd_feature(r, bit, r->mem + off, sz);
		if (err < 0)
			return err;
	}
	return 0;
}

static int pd_init(pd_reader *r)
{
	uint64_t magic;

	if (r->fd >= 0) {
		uint8_t hdr[PD_PIPE_HEADER_SIZE];
		ssize_t n = io_read_full(r->fd, hdr, sizeof hdr);
		if (n < 0)
			return -PD_EIO;
		if (n < 8) {
			r->err_off = 0;
			return n == 0 ? -PD_ETRUNC : -PD_EMAGIC;
		}
		magic = get64(hdr);
		if (magic == PD_MAGIC_SWAP)
			return -PD_EENDIAN;
		if (magic != PD_MAGIC)
			return -PD_EMAGIC;
		if (n < (ssize_t)sizeof hdr)
			return -PD_ETRUNC;
		if (get64(hdr + 8) != PD_PIPE_HEADER_SIZE) {
			/* file mode arriving on a pipe: read it all */
			uint8_t *rest;
			size_t restlen, total;
			if (io_slurp_fd(r->fd, &rest, &restlen) < 0)
				return -PD_EIO;
			total = restlen + sizeof hdr;
			r->owned = malloc(total ? total : 1);
			if (!r->owned) {
				free(rest);
				return -PD_ENOMEM;
			}
			memcpy(r->owned, hdr, sizeof hdr);
			memcpy(r->owned + sizeof hdr, rest, restlen);
			free(rest);
			r->mem = r->owned;
			r->memlen = total;
			r->fd = -1;
			return pd_open_file_mode(r);
		}
		r->info.pipe = 1;
		r->pos = PD_PIPE_HEADER_SIZE;
		return 0;
	}
	if (r->memlen < 8)
		return r->memlen == 0 ? -PD_ETRUNC : -PD_EMAGIC;
	magic = get64(r->mem);
	if (magic == PD_MAGIC_SWAP)
		return -PD_EENDIAN;
	if (magic != PD_MAGIC)
		return -PD_EMAGIC;
	if (r->memlen < PD_PIPE_HEADER_SIZE)
		return -PD_ETRUNC;
	if (get64(r->mem + 8) == PD_PIPE_HEADER_SIZE) {
		r->info.pipe = 1;
		r->pos = PD_PIPE_HEADER_SIZE;
		r->data_end = r->memlen;
		r->open_end = 1;
		return 0;
	}
	return pd_open_file_mode(r);
}

static pd_reader *pd_alloc(void)
{
	pd_reader *r = calloc(1, sizeof *r);
	if (r)
		r->fd = -1;
	return r;
}

int pd_open_mem(pd_reader **out, const void *buf, size_t len)
{
	pd_reader *r = pd_alloc();
	int err;
	*out = NULL;
	if (!r)
		return -PD_ENOMEM;
	r->mem = buf;
	r->memlen = len;
	err = pd_init(r);
	if (err < 0) {
		pd_close(r);
		return err;
	}
	*out = r;
	return 0;
}

int pd_open(pd_reader **out, int fd)
{
	pd_reader *r = pd_alloc();
	struct stat st;
	int err;

	*out = NULL;
	if (!r)
		return -PD_ENOMEM;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && lseek(fd, 0, SEEK_CUR) == 0) {
		if (st.st_size > 0) {
			void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
			if (m == MAP_FAILED) {
				pd_close(r);
				return -PD_EIO;
			}
			madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
			r->mem = m;
			r->memlen = (size_t)st.st_size;
			r->mapped = 1;
		}
	} else {
		r->fd = fd;
	}
	err = pd_init(r);
	if (err < 0) {
		pd_close(r);
		return err;
	}
	*out = r;
	return 0;
}

void pd_close(pd_reader *r)
{
	size_t i;
	if (!r)
		return;
	if (r->mapped)
		munmap((void *)r->mem, r->memlen);
	free(r->owned);
	free(r->rec);
	free(r->pay);
	if (r->zds)
		ZSTD_freeDStream(r->zds);
	free(r->zbuf);
	for (i = 0; i < r->nattrs; i++)
		free(r->idstore[i]);
	free(r->idstore);
	free(r->attrs);
	free(r->idmap);
	free(r->cpuid);
	free(r->buildids);
	arena_fini(&r->strings);
	free(r->pmus);
	free(r->descnames);
	free(r);
}

const struct pd_info *pd_info(const pd_reader *r)
{
	return &r->info;
}

uint64_t pd_offset(const pd_reader *r)
{
	return r->err_off;
}

/* ---- sample_id ---- */

static unsigned pd_trailer_words(uint64_t st)
{
	return !!(st & PD_SAMPLE_TID) + !!(st & PD_SAMPLE_TIME) + !!(st & PD_SAMPLE_ID) +
	       !!(st & PD_SAMPLE_STREAM_ID) + !!(st & PD_SAMPLE_CPU) +
	       !!(st & PD_SAMPLE_IDENTIFIER);
}

/* Which attr does a record belong to?  perf requires the id to be at the
 * same place for every event of a file; use the first attr's layout. */
static const struct pd_attr *pd_find_attr(pd_reader *r, const uint8_t *rec, uint16_t size,
					  uint32_t type)
{
	const struct pd_attr *a0;
	uint64_t st, id;
	if (r->nattrs == 0)
		return NULL;
	a0 = &r->attrs[0];
	if (r->nattrs == 1)
		return a0;
	st = a0->sample_type;
	if (type == PD_REC_SAMPLE) {
		size_t pos = 8;
		if (st & PD_SAMPLE_IDENTIFIER) {
			if (size < 16)
				return NULL;
			id = get64(rec + 8);
		} else if (st & PD_SAMPLE_ID) {
			pos += 8 * (!!(st & PD_SAMPLE_IP) + !!(st & PD_SAMPLE_TID) +
				    !!(st & PD_SAMPLE_TIME) + !!(st & PD_SAMPLE_ADDR));
			if (pos + 8 > size)
				return NULL;
			id = get64(rec + pos);
		} else {
			return a0;
		}
	} else {
		if (!(a0->flags & PD_ATTR_SAMPLE_ID_ALL))
			return a0;
		if (st & PD_SAMPLE_IDENTIFIER) {
			if (size < 16)
				return NULL;
			id = get64(rec + size - 8);
		} else if (st & PD_SAMPLE_ID) {
			size_t back = 8 * (1 + !!(st & PD_SAMPLE_STREAM_ID) + !!(st & PD_SAMPLE_CPU));
			if (size < 8 + back)
				return NULL;
			id = get64(rec + size - back);
		} else {
			return a0;
		}
	}
	{
		const struct pd_attr *a = pd_attr_by_id(r, id);
		return a ? a : a0;
	}
}

/* Parses the sample_id trailer of a kernel record. */
static void pd_parse_trailer(const struct pd_attr *a, const uint8_t *rec, uint16_t size,
			     struct pd_sample_id *sid)
{
	uint64_t st = a->sample_type;
	unsigned words = pd_trailer_words(st);
	const uint8_t *p, *end = rec + size;
	uint32_t res;
	memset(sid, 0, sizeof *sid);
	if (!(a->flags & PD_ATTR_SAMPLE_ID_ALL) || words * 8u + 8 > size)
		return;
	p = end - words * 8u; /* the checks above leave room for every field taken below */
	if ((st & PD_SAMPLE_TID) && !take32x2(&p, end, &sid->pid, &sid->tid))
		sid->have |= PD_HAVE_TID;
	if ((st & PD_SAMPLE_TIME) && !take64(&p, end, &sid->time))
		sid->have |= PD_HAVE_TIME;
	if ((st & PD_SAMPLE_ID) && !take64(&p, end, &sid->id))
		sid->have |= PD_HAVE_ID;
	if ((st & PD_SAMPLE_STREAM_ID) && !take64(&p, end, &sid->stream_id))
		sid->have |= PD_HAVE_STREAM_ID;
	if ((st & PD_SAMPLE_CPU) && !take32x2(&p, end, &sid->cpu, &res))
		sid->have |= PD_HAVE_CPU;
	if ((st & PD_SAMPLE_IDENTIFIER) && !take64(&p, end, &sid->id))
		sid->have |= PD_HAVE_ID;
}

/* ---- records ---- */

/* Handles the records that change the reader's state (attrs, features). */
static int pd_user_record(pd_reader *r, struct pd_event *ev)
{
	const uint8_t *p = ev->raw;
	switch (ev->type) {
	case PD_REC_HEADER_ATTR: {
		uint32_t asz;
		size_t nids;
		if (ev->size < 8 + PD_ATTR_VER0)
			return -PD_ECORRUPT;
		asz = get32(p + 8 + 4);
		if (!asz)
			asz = PD_ATTR_VER0;
		if (asz < PD_ATTR_VER0 || asz > ev->size - 8u)
			return -PD_ECORRUPT;
		nids = (ev->size - 8u - asz) / 8;
		return pd_add_attr(r, p + 8, asz, p + 8 + asz, nids);
	}
	case PD_REC_HEADER_FEATURE:
		if (ev->size < 16)
			return -PD_ECORRUPT;
		{
			uint64_t feat = get64(p + 8);
			int err;
			if (feat >= 256)
				return 0;
			err = pd_feature(r, (unsigned)feat, p + 16, ev->size - 16u);
			/* a feature we cannot read costs the feature, not the file */
			return err == -PD_ENOMEM ? err : 0;
		}
	case PD_REC_HEADER_BUILD_ID: {
		/* pipe mode: one build-id per record, as the feature's entries */
		int err = pd_feature(r, PD_FEAT_BUILD_ID, p, ev->size);
		return err == -PD_ENOMEM ? err : 0;
	}
	default:
		return 0;
	}
}

/* Size of the payload that follows a record (not counted in its size). */
static int pd_payload_size(const struct pd_event *ev, uint64_t *sz)
{
	*sz = 0;
	if (ev->type == PD_REC_AUXTRACE) {
		if (ev->size < 0x30)
			return -PD_ECORRUPT;
		*sz = get64(ev->raw + 8);
	} else if (ev->type == PD_REC_HEADER_TRACING_DATA) {
		if (ev->size < 12)
			return -PD_ECORRUPT;
		*sz = get32(ev->raw + 8);
	}
	return 0;
}

static int pd_decompress(pd_reader *r, const struct pd_event *ev)
{
	ZSTD_inBuffer in;
	if (!r->zds) {
		r->zds = ZSTD_createDStream();
		if (!r->zds)
			return -PD_ENOMEM;
		ZSTD_initDStream(r->zds);
	}
	in.src = ev->raw + 8;
	in.size = ev->size - 8u;
	in.pos = 0;
	r->zlen = r->zpos = 0;
	while (in.pos < in.size) {
		ZSTD_outBuffer out;
		size_t ret;
		if (pd_grow(&r->zbuf, &r->zcap, r->zlen + 65536) < 0)
			return -PD_ENOMEM;
		out.dst = r->zbuf + r->zlen;
		out.size = r->zcap - r->zlen;
		out.pos = 0;
		ret = ZSTD_decompressStream(r->zds, &out, &in);
		if (ZSTD_isError(ret))
			return -PD_ECORRUPT;
		r->zlen += out.pos;
		if (out.pos == 0 && ret != 0 && in.pos == in.size)
			break;
	}
	r->zoff = ev->offset;
	return 0;
}

/* Fills @ev from the record at @p (@avail bytes available). */
static int pd_fill(pd_reader *r, struct pd_event *ev, const uint8_t *p, uint64_t off)
{
	if ((uintptr_t)p % 8) {
		/* pipe-mode streams do not keep records 8-aligned; parsers
		 * read arrays in place, so give them an aligned copy */
		uint16_t size = get16(p + 6);
		if (pd_grow(&r->rec, &r->reccap, 65536) < 0)
			return -PD_ENOMEM;
		memcpy(r->rec, p, size);
		p = r->rec;
	}
	memset(ev, 0, sizeof *ev);
	ev->type = get32(p);
	ev->misc = get16(p + 4);
	ev->size = get16(p + 6);
	ev->raw = p;
	ev->offset = off;
	if (ev->type < PD_REC_KERNEL_MAX) {
		ev->attr = pd_find_attr(r, p, ev->size, ev->type);
		if (ev->attr && ev->type != PD_REC_SAMPLE)
			pd_parse_trailer(ev->attr, p, ev->size, &ev->sid);
	}
	return 0;
}

static int pd_next_decompressed(pd_reader *r, struct pd_event *ev)
{
	const uint8_t *p = r->zbuf + r->zpos;
	size_t left = r->zlen - r->zpos;
	uint16_t size;
	if (left < 8) {
		r->zlen = r->zpos = 0;
		r->err_off = r->zoff;
		return left ? -PD_ECORRUPT : 0;
	}
	size = get16(p + 6);
	if (size < 8 || size > left) {
		r->err_off = r->zoff;
		return -PD_ESIZE;
	}
	r->zpos += size;
	if (pd_fill(r, ev, p, r->zoff) < 0)
		return -PD_ENOMEM;
	if (ev->type == PD_REC_AUXTRACE || ev->type == PD_REC_HEADER_TRACING_DATA ||
	    ev->type == PD_REC_COMPRESSED)
		return -PD_EUNSUPPORTED;
	return 1;
}

static int pd_next_mem(pd_reader *r, struct pd_event *ev)
{
	uint64_t off = r->pos, psz;
	const uint8_t *p;
	uint16_t size;
	int err;

	if (off >= r->data_end) {
		r->err_off = off;
		return r->truncated ? -PD_ETRUNC : 0;
	}
	r->err_off = off;
	if (r->data_end - off < 8)
		return r->open_end ? -PD_ETRUNC : -PD_ESIZE;
	p = r->mem + off;
	size = get16(p + 6);
	if (size < 8)
		return -PD_ESIZE;
	if (size > r->data_end - off) {
		/* a size past the data section: truncation if the file ends,
		 * else an impossible size */
		return r->open_end ? -PD_ETRUNC : -PD_ESIZE;
	}
	if (pd_fill(r, ev, p, off) < 0)
		return -PD_ENOMEM;
	err = pd_payload_size(ev, &psz);
	if (err < 0)
		return err;
	/* a file-mode claim past the data section is an impossible size; any
	 * other claim over the limit is refused as in stream mode */
	if (psz > PD_AUX_MAX && (r->open_end || psz <= r->data_end - off - size))
		return -PD_ELIMIT;
	if (psz > r->data_end - off - size) {
		/* the payload runs past the data: keep what there is */
		ev->payload = p + size;
		ev->payload_size = r->data_end - off - size;
		r->pos = r->data_end;
		return r->open_end ? -PD_ETRUNC : -PD_ESIZE;
	}
	ev->payload = p + size;
	ev->payload_size = psz;
	r->pos = off + size + psz;
	return 1;
}

static int pd_next_stream(pd_reader *r, struct pd_event *ev)
{
	uint64_t off = r->pos, psz;
	uint16_t size;
	ssize_t n;
	int err;

	r->err_off = off;
	if (pd_grow(&r->rec, &r->reccap, 65536) < 0)
		return -PD_ENOMEM;
	n = io_read_full(r->fd, r->rec, 8);
	if (n < 0)
		return -PD_EIO;
	if (n == 0)
		return 0;
	if (n < 8)
		return -PD_ETRUNC;
	size = get16(r->rec + 6);
	if (size < 8)
		return -PD_ESIZE;
	n = io_read_full(r->fd, r->rec + 8, size - 8u);
	if (n < 0)
		return -PD_EIO;
	if (n < size - 8)
		return -PD_ETRUNC;
	pd_fill(r, ev, r->rec, off);
	err = pd_payload_size(ev, &psz);
	if (err < 0)
		return err;
	if (psz > PD_AUX_MAX)
		return -PD_ELIMIT;
	r->pos = off + size;
	if (psz) {
		uint64_t got = 0;
		/* read in chunks so a bogus size fails at the end of input,
		 * not at malloc */
		while (got < psz) {
			size_t chunk = psz - got > (1u << 24) ? (1u << 24) : (size_t)(psz - got);
			if (pd_grow(&r->pay, &r->paycap, got + chunk) < 0)
				return -PD_ENOMEM;
			n = io_read_full(r->fd, r->pay + got, chunk);
			if (n < 0)
				return -PD_EIO;
			got += (uint64_t)n;
			if ((size_t)n < chunk)
				break;
		}
		ev->payload = r->pay;
		ev->payload_size = got;
		r->pos += got;
		if (got < psz)
			return -PD_ETRUNC;
	}
	return 1;
}

int pd_next(pd_reader *r, struct pd_event *ev)
{
	int ret;

	/* no record yet: a -PD_ETRUNC before one is read leaves raw NULL (the
	 * caller must not take the previous record for a truncated one) */
	ev->raw = NULL;
	ev->payload = NULL;
	ev->payload_size = 0;
	if (r->zpos < r->zlen)
		return pd_next_decompressed(r, ev);
	ret = r->fd >= 0 ? pd_next_stream(r, ev) : pd_next_mem(r, ev);
	if (ret == 0 && r->info.pipe && r->last_type != PD_REC_FINISHED_ROUND) {
		/* perf record -o - ends its stream with the FINISHED_ROUND of
		 * its last pass over the buffers: a stream that stops anywhere
		 * else (even at a record boundary) is a killed recorder */
		r->err_off = r->pos;
		return -PD_ETRUNC;
	}
	if (ret <= 0)
		return ret;
	r->last_type = ev->type;
	if (ev->type == PD_REC_HEADER_ATTR || ev->type == PD_REC_HEADER_FEATURE ||
	    ev->type == PD_REC_HEADER_BUILD_ID) {
		int err = pd_user_record(r, ev);
		if (err < 0)
			return err;
	} else if (ev->type == PD_REC_COMPRESSED) {
		int err;
		if (ev->size < 8)
			return -PD_ECORRUPT;
		err = pd_decompress(r, ev);
		if (err < 0)
			return err;
		/* the compressed record itself is returned; its contents follow */
	}
	return 1;
}

/* ---- parsers ---- */

/* A NUL-terminated string at @p inside the record body [p, end). */
static const char *pd_rec_str(const uint8_t *p, const uint8_t *end)
{
	if (p >= end || !memchr(p, 0, (size_t)(end - p)))
		return NULL;
	return (const char *)p;
}

int pd_parse_mmap(const struct pd_event *ev, struct pd_mmap *m)
{
	const uint8_t *p = ev->raw + 8, *end = ev->raw + ev->size;
	memset(m, 0, sizeof *m);
	if (ev->type == PD_REC_MMAP) {
		if (ev->size < 8 + 32 + 1)
			return -PD_ECORRUPT;
		m->pid = get32(p);
		m->tid = get32(p + 4);
		m->addr = get64(p + 8);
		m->len = get64(p + 16);
		m->pgoff = get64(p + 24);
		m->prot = (ev->misc & PD_MISC_MMAP_DATA) ? 1 /* PROT_READ */ : 5 /* R|X */;
		m->filename = pd_rec_str(p + 32, end);
	} else if (ev->type == PD_REC_MMAP2) {
		if (ev->size < 8 + 64 + 1)
			return -PD_ECORRUPT;
		m->pid = get32(p);
		m->tid = get32(p + 4);
		m->addr = get64(p + 8);
		m->len = get64(p + 16);
		m->pgoff = get64(p + 24);
		if (ev->misc & PD_MISC_MMAP_BUILD_ID) {
			m->build_id_len = p[32] <= 20 ? p[32] : 20;
			memcpy(m->build_id, p + 36, 20);
		}
		m->prot = get32(p + 56);
		m->flags = get32(p + 60);
		m->filename = pd_rec_str(p + 64, end);
	} else {
		return -PD_EINVAL;
	}
	return m->filename ? 0 : -PD_ECORRUPT;
}

int pd_parse_comm(const struct pd_event *ev, struct pd_comm *c)
{
	const uint8_t *p = ev->raw + 8;
	if (ev->type != PD_REC_COMM)
		return -PD_EINVAL;
	if (ev->size < 8 + 8 + 1)
		return -PD_ECORRUPT;
	c->pid = get32(p);
	c->tid = get32(p + 4);
	c->exec = !!(ev->misc & PD_MISC_COMM_EXEC);
	c->comm = pd_rec_str(p + 8, ev->raw + ev->size);
	return c->comm ? 0 : -PD_ECORRUPT;
}

int pd_parse_fork(const struct pd_event *ev, struct pd_fork *f)
{
	const uint8_t *p = ev->raw + 8;
	if (ev->type != PD_REC_FORK && ev->type != PD_REC_EXIT)
		return -PD_EINVAL;
	if (ev->size < 8 + 24)
		return -PD_ECORRUPT;
	f->pid = get32(p);
	f->ppid = get32(p + 4);
	f->tid = get32(p + 8);
	f->ptid = get32(p + 12);
	f->time = get64(p + 16);
	return 0;
}

int pd_parse_switch(const struct pd_event *ev, struct pd_switch *s)
{
	memset(s, 0, sizeof *s);
	if (ev->type != PD_REC_SWITCH && ev->type != PD_REC_SWITCH_CPU_WIDE)
		return -PD_EINVAL;
	s->out = !!(ev->misc & PD_MISC_SWITCH_OUT);
	s->preempt = !!(ev->misc & PD_MISC_SWITCH_OUT_PREEMPT);
	if (ev->type == PD_REC_SWITCH_CPU_WIDE) {
		if (ev->size < 16)
			return -PD_ECORRUPT;
		s->cpu_wide = 1;
		s->next_prev_pid = get32(ev->raw + 8);
		s->next_prev_tid = get32(ev->raw + 12);
	}
	return 0;
}

int pd_parse_aux(const struct pd_event *ev, struct pd_aux *a)
{
	if (ev->type != PD_REC_AUX)
		return -PD_EINVAL;
	if (ev->size < 8 + 24)
		return -PD_ECORRUPT;
	a->aux_offset = get64(ev->raw + 8);
	a->aux_size = get64(ev->raw + 16);
	a->flags = get64(ev->raw + 24);
	return 0;
}

int pd_parse_itrace_start(const struct pd_event *ev, struct pd_itrace_start *s)
{
	if (ev->type != PD_REC_ITRACE_START)
		return -PD_EINVAL;
	if (ev->size < 16)
		return -PD_ECORRUPT;
	s->pid = get32(ev->raw + 8);
	s->tid = get32(ev->raw + 12);
	return 0;
}

int pd_parse_auxtrace(const struct pd_event *ev, struct pd_auxtrace *a)
{
	const uint8_t *p = ev->raw + 8;
	if (ev->type != PD_REC_AUXTRACE)
		return -PD_EINVAL;
	if (ev->size < 0x30)
		return -PD_ECORRUPT;
	a->size = get64(p);
	a->offset = get64(p + 8);
	a->reference = get64(p + 16);
	a->idx = get32(p + 24);
	a->tid = get32(p + 28);
	a->cpu = (int32_t)get32(p + 32);
	return 0;
}

int pd_parse_auxtrace_info(const struct pd_event *ev, struct pd_auxtrace_info *ai)
{
	if (ev->type != PD_REC_AUXTRACE_INFO)
		return -PD_EINVAL;
	if (ev->size < 16)
		return -PD_ECORRUPT;
	ai->type = get32(ev->raw + 8);
	ai->npriv = (ev->size - 16u) / 8;
	ai->priv = (const uint64_t *)(const void *)(ev->raw + 16);
	if ((uintptr_t)ai->priv % 8)
		return -PD_ECORRUPT; /* records are 8-aligned in every perf.data */
	return 0;
}

int pd_parse_time_conv(const struct pd_event *ev, struct pd_time_conv *tc)
{
	const uint8_t *p = ev->raw + 8;
	memset(tc, 0, sizeof *tc);
	if (ev->type != PD_REC_TIME_CONV)
		return -PD_EINVAL;
	if (ev->size < 8 + 24)
		return -PD_ECORRUPT;
	tc->time_shift = get64(p);
	if (tc->time_shift >= 64) /* the kernel's shift is below 32; >= 64 cannot shift */
		return -PD_ECORRUPT;
	tc->time_mult = get64(p + 8);
	tc->time_zero = get64(p + 16);
	tc->cap_user_time_zero = 1;
	if (ev->size >= 8 + 24 + 16 + 2) {
		tc->time_cycles = get64(p + 24);
		tc->time_mask = get64(p + 32);
		tc->cap_user_time_zero = p[40];
		tc->cap_user_time_short = p[41];
		tc->extended = 1;
	}
	return 0;
}

static unsigned popcount64(uint64_t v)
{
	return (unsigned)__builtin_popcountll(v);
}

int pd_parse_sample(const struct pd_event *ev, struct pd_sample *s)
{
	const struct pd_attr *a = ev->attr;
	const uint8_t *p = ev->raw + 8, *end = ev->raw + ev->size;
	uint64_t st;
	uint32_t res;

	memset(s, 0, sizeof *s);
	if (ev->type != PD_REC_SAMPLE || !a)
		return -PD_EINVAL;
	st = a->sample_type;
#define NEED(n)                                                                                    \
	do {                                                                                       \
		if ((size_t)(end - p) < (size_t)(n))                                               \
			return -PD_ECORRUPT;                                                       \
	} while (0)
	/* the fixed fields, in the kernel's order (perf_output_sample) */
	if (((st & PD_SAMPLE_IDENTIFIER) && take64(&p, end, &s->id)) ||
	    ((st & PD_SAMPLE_IP) && take64(&p, end, &s->ip)) ||
	    ((st & PD_SAMPLE_TID) && take32x2(&p, end, &s->pid, &s->tid)) ||
	    ((st & PD_SAMPLE_TIME) && take64(&p, end, &s->time)) ||
	    ((st & PD_SAMPLE_ADDR) && take64(&p, end, &s->addr)) ||
	    ((st & PD_SAMPLE_ID) && take64(&p, end, &s->id)) ||
	    ((st & PD_SAMPLE_STREAM_ID) && take64(&p, end, &s->stream_id)) ||
	    ((st & PD_SAMPLE_CPU) && take32x2(&p, end, &s->cpu, &res)) ||
	    ((st & PD_SAMPLE_PERIOD) && take64(&p, end, &s->period)))
		return -PD_ECORRUPT;
	if (st & PD_SAMPLE_READ) {
		uint64_t rf = a->read_format, per = 1 + !!(rf & 4) + !!(rf & 16);
		if (rf & 8) { /* PERF_FORMAT_GROUP */
			uint64_t nr;
			if (take64(&p, end, &nr))
				return -PD_ECORRUPT;
			p += 8 * (!!(rf & 1) + !!(rf & 2));
			if (nr > (uint64_t)(end - ev->raw) / 8)
				return -PD_ECORRUPT;
			p += nr * per * 8;
		} else {
			p += 8 * (1 + !!(rf & 1) + !!(rf & 2) + !!(rf & 4) + !!(rf & 16));
		}
		if (p > end)
			return -PD_ECORRUPT;
	}
	if (st & PD_SAMPLE_CALLCHAIN) {
		uint64_t nr;
		if (take64(&p, end, &nr))
			return -PD_ECORRUPT;
		if (nr > (uint64_t)(end - p) / 8)
			return -PD_ECORRUPT;
		s->nr_ips = nr;
		s->ips = (const uint64_t *)(const void *)p;
		p += nr * 8;
	}
	if (st & PD_SAMPLE_RAW) {
		uint32_t sz;
		NEED(4);
		sz = get32(p);
		/* the kernel pads the data so that what follows stays 8-aligned */
		if (sz > (size_t)(end - p) - 4 || (4 + (size_t)sz) % 8)
			return -PD_ECORRUPT;
		p += 4 + sz;
	}
	if (st & PD_SAMPLE_BRANCH_STACK) {
		uint64_t nr;
		if (take64(&p, end, &nr))
			return -PD_ECORRUPT;
		if (a->branch_sample_type & (1u << 17)) /* PERF_SAMPLE_BRANCH_HW_INDEX */
			p += 8;
		if (p > end || nr > (uint64_t)(end - p) / 24)
			return -PD_ECORRUPT;
		s->nr_lbr = nr;
		s->lbr = (const struct pd_lbr_entry *)(const void *)p;
		p += nr * 24;
	}
	if (st & PD_SAMPLE_REGS_USER) {
		if (take64(&p, end, &s->regs_abi))
			return -PD_ECORRUPT;
		if (s->regs_abi) {
			unsigned n = popcount64(a->sample_regs_user);
			NEED(8 * (size_t)n);
			s->regs_user = (const uint64_t *)(const void *)p;
			s->nregs_user = n;
			p += 8 * (size_t)n;
		}
	}
	if (st & PD_SAMPLE_STACK_USER) { /* size, bytes[size], dyn_size if size */
		uint64_t sz;
		if (take64(&p, end, &sz))
			return -PD_ECORRUPT;
		if (sz) {
			if (sz > (uint64_t)(end - p) || (uint64_t)(end - p) - sz < 8)
				return -PD_ECORRUPT;
			s->stack_user = p;
			s->stack_size = get64(p + sz);
			if (s->stack_size > sz)
				s->stack_size = sz;
			p += sz + 8;
		}
	}
#undef NEED
	if ((uintptr_t)ev->raw % 8)
		return -PD_ECORRUPT; /* ips/lbr/regs are read in place */
	return 0;
}

uint64_t pd_sample_reg(const struct pd_sample *s, const struct pd_attr *attr, unsigned regno,
		       int *ok)
{
	uint64_t mask = attr->sample_regs_user;
	unsigned idx;
	*ok = 0;
	if (!s->regs_abi || regno >= 64 || !(mask >> regno & 1))
		return 0;
	idx = popcount64(mask & (((uint64_t)1 << regno) - 1));
	if (idx >= s->nregs_user)
		return 0;
	*ok = 1;
	return s->regs_user[idx];
}
