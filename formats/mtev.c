/* MTEV codec.  The byte layout is specified in formats/mtev.md. */
#include "mtev.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- names ---- */

static const char *const kind_names[] = {
	[MTEV_END] = "end",	    [MTEV_CLOCK] = "clock",	  [MTEV_PROCESS] = "process",
	[MTEV_THREAD] = "thread",   [MTEV_MAP] = "map",		  [MTEV_TRIGGER] = "trigger",
	[MTEV_STRING] = "string",   [MTEV_SAMPLE] = "sample",	  [MTEV_GAP] = "gap",
	[MTEV_SEGMENT] = "segment", [MTEV_SPAN] = "span",	  [MTEV_WAYPOINT] = "waypoint",
	[MTEV_SYMBOL] = "symbol",   [MTEV_BRANCH] = "branch",
};

static const char *const branch_names[MTEV_BR__COUNT] = {
	"call", "return", "jump", "jcc", "syscall", "sysret", "interrupt", "iret", "trace-start", "trace-end",
};

static const char *const gap_names[MTEV_GAP__COUNT] = {
	NULL, "decode-error", "overflow", "lost", "untraced", "no-image",
};

const char *mtev_kind_name(unsigned kind)
{
	if (kind < sizeof kind_names / sizeof *kind_names)
		return kind_names[kind];
	return NULL;
}

const char *mtev_branch_name(unsigned type)
{
	return type < MTEV_BR__COUNT ? branch_names[type] : NULL;
}

const char *mtev_gap_name(unsigned reason)
{
	return reason < MTEV_GAP__COUNT ? gap_names[reason] : NULL;
}

static int name_lookup(const char *const *names, int n, const char *s, size_t len)
{
	for (int i = 0; i < n; i++)
		if (names[i] && strlen(names[i]) == len && !memcmp(names[i], s, len))
			return i;
	return -1;
}

int mtev_branch_from_name(const char *s, size_t len)
{
	return name_lookup(branch_names, MTEV_BR__COUNT, s, len);
}

int mtev_gap_from_name(const char *s, size_t len)
{
	return name_lookup(gap_names, MTEV_GAP__COUNT, s, len);
}

const char *mtev_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0: return "success";
	case MTEV_EIO: return "I/O error";
	case MTEV_EMAGIC: return "not an MTEV stream (bad magic)";
	case MTEV_EVERSION: return "unsupported MTEV version";
	case MTEV_ETRUNC: return "truncated stream";
	case MTEV_ESIZE: return "impossible record size";
	case MTEV_ECORRUPT: return "corrupt record";
	case MTEV_ENOMEM: return "out of memory";
	case MTEV_EINVAL: return "invalid record";
	case MTEV_EAFTEREND: return "data after the end record";
	case MTEV_EREF: return "a span refers to an undefined string id";
	}
	return "unknown error";
}

/* Short waypoint records: kinds 0x40-0x47 (formats/mtev.md). */
#define MTEV_WP_SHORT 0x40

/* ---- per-thread delta state (branch and waypoint records) ---- */

struct tstate {
	uint32_t tid;
	uint32_t used;
	uint64_t time, addr;
};

struct tmap {
	struct tstate *v;
	uint32_t cap, n; /* cap: power of two */
	struct tstate *last;
};

static struct tstate *tmap_get_slow(struct tmap *m, uint32_t tid);

/* The thread of the previous record, inline (most records); else the table. */
static inline struct tstate *tmap_get(struct tmap *m, uint32_t tid)
{
	if (__builtin_expect(m->last && m->last->tid == tid, 1))
		return m->last;
	return tmap_get_slow(m, tid);
}

static struct tstate *tmap_get_slow(struct tmap *m, uint32_t tid)
{
	if (m->n * 2 >= m->cap) {
		uint32_t nc = m->cap ? m->cap * 2 : 64;
		struct tstate *nv = calloc(nc, sizeof *nv);
		if (!nv)
			return NULL;
		for (uint32_t i = 0; i < m->cap; i++) {
			if (!m->v[i].used)
				continue;
			uint32_t h = (m->v[i].tid * 2654435761u) & (nc - 1);
			while (nv[h].used)
				h = (h + 1) & (nc - 1);
			nv[h] = m->v[i];
		}
		free(m->v);
		m->v = nv;
		m->cap = nc;
	}
	uint32_t h = (tid * 2654435761u) & (m->cap - 1);
	while (m->v[h].used && m->v[h].tid != tid)
		h = (h + 1) & (m->cap - 1);
	if (!m->v[h].used) {
		m->v[h] = (struct tstate){.tid = tid, .used = 1};
		m->n++;
	}
	m->last = &m->v[h];
	return m->last;
}

static void tmap_fini(struct tmap *m)
{
	free(m->v);
	memset(m, 0, sizeof *m);
}

/* ids of string records -> index + 1 (0: empty slot) */
struct idmap {
	uint32_t *k, *v;
	uint32_t cap, n; /* cap: power of two */
};

static inline uint32_t id_hash(uint32_t id, uint32_t mask)
{
	return (id * 2654435761u) & mask;
}

static uint32_t idmap_get(const struct idmap *m, uint32_t id)
{
	if (!m->cap)
		return 0;
	for (uint32_t h = id_hash(id, m->cap - 1); m->v[h]; h = (h + 1) & (m->cap - 1))
		if (m->k[h] == id)
			return m->v[h];
	return 0;
}

/* Sets @id -> @val (> 0).  0, or -MTEV_ENOMEM. */
static int idmap_put(struct idmap *m, uint32_t id, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap) {
		uint32_t nc = m->cap ? m->cap * 2 : 64;
		uint32_t *nk = malloc(nc * sizeof *nk), *nv = calloc(nc, sizeof *nv);
		if (!nk || !nv) {
			free(nk);
			free(nv);
			return -MTEV_ENOMEM;
		}
		for (uint32_t i = 0; i < m->cap; i++) {
			if (!m->v[i])
				continue;
			uint32_t h = id_hash(m->k[i], nc - 1);
			while (nv[h])
				h = (h + 1) & (nc - 1);
			nk[h] = m->k[i];
			nv[h] = m->v[i];
		}
		free(m->k);
		free(m->v);
		m->k = nk;
		m->v = nv;
		m->cap = nc;
	}
	uint32_t h = id_hash(id, m->cap - 1);
	while (m->v[h] && m->k[h] != id)
		h = (h + 1) & (m->cap - 1);
	if (!m->v[h])
		m->n++;
	m->k[h] = id;
	m->v[h] = val;
	return 0;
}

static void idmap_fini(struct idmap *m)
{
	free(m->k);
	free(m->v);
	memset(m, 0, sizeof *m);
}

/* The texts of the string records of a stream, by id. */
struct strtab {
	struct idmap sid; /* id -> strs[i - 1], text in sbuf */
	struct sent {
		size_t off;
		uint32_t len;
	} *strs;
	size_t nstrs, strs_cap;
	char *sbuf;
	size_t slen, scap;
};

static int strtab_get(const struct strtab *t, uint32_t id, struct mtev_str *out)
{
	uint32_t i = idmap_get(&t->sid, id);
	if (!i)
		return 0;
	/* no text stored yet (every string so far empty): no buffer either */
	out->p = t->sbuf ? t->sbuf + t->strs[i - 1].off : "";
	out->len = t->strs[i - 1].len;
	return 1;
}

static void strtab_fini(struct strtab *t)
{
	idmap_fini(&t->sid);
	free(t->strs);
	free(t->sbuf);
	memset(t, 0, sizeof *t);
}

static inline uint64_t zz_enc(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t zz_dec(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* ---- payload decoding cursor ---- */

struct cur {
	const uint8_t *p, *end;
	int bad;
};

/* A varint byte by byte (also refusing one past 64 bits). */
static inline __attribute__((always_inline)) uint64_t uv_bytes(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (c->p < c->end) {
		uint8_t b = *c->p++;
		if (shift == 63 && b > 1) {
			c->bad = 1;
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
		shift += 7;
		if (shift > 63) {
			c->bad = 1;
			return 0;
		}
	}
	c->bad = 1;
	return 0;
}

/* uv_bytes out of line: fuv's rare long values (its callers stay small) */
static __attribute__((noinline)) uint64_t get_uv_loop(struct cur *c)
{
	return uv_bytes(c);
}

static inline uint64_t get_uv(struct cur *c)
{
	if (__builtin_expect(c->p < c->end && *c->p < 0x80, 1))
		return *c->p++;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* 2-8 bytes with 8 left in the payload (a time, an address): all at
	 * once.  The first byte without the high bit ends it; its 7-bit groups
	 * are packed in three steps (pairs, quads, the two halves). */
	if (__builtin_expect(c->end - c->p >= 8, 1)) {
		uint64_t x;
		memcpy(&x, c->p, 8);
		uint64_t stop = ~x & 0x8080808080808080ull;
		if (__builtin_expect(stop != 0, 1)) {
			unsigned bits = (unsigned)__builtin_ctzll(stop) + 1; /* 8 x bytes */
			x &= ~0ull >> (64 - bits) & 0x7f7f7f7f7f7f7f7full;
			x = (x & 0x007f007f007f007full) | (x & 0x7f007f007f007f00ull) >> 1;
			x = (x & 0x00003fff00003fffull) | (x & 0x3fff00003fff0000ull) >> 2;
			x = (x & 0x000000000fffffffull) | (x & 0x0fffffff00000000ull) >> 4;
			c->p += bits >> 3;
			return x;
		}
	}
#endif
	return uv_bytes(c);
}

static inline uint32_t get_u32(struct cur *c)
{
	uint64_t v = get_uv(c);
	if (v > UINT32_MAX)
		c->bad = 1;
	return (uint32_t)v;
}

static inline int64_t get_sv(struct cur *c)
{
	return zz_dec(get_uv(c));
}

static struct mtev_str get_str(struct cur *c)
{
	struct mtev_str s = {NULL, 0};
	uint64_t n = get_uv(c);
	if (c->bad || n > (uint64_t)(c->end - c->p)) {
		c->bad = 1;
		return s;
	}
	s.p = (const char *)c->p;
	s.len = (uint32_t)n;
	c->p += n;
	return s;
}

/* ---- payload encoding ---- */

static inline uint8_t *put_uv(uint8_t *p, uint64_t v)
{
	if (__builtin_expect(v < 0x80, 1)) {
		*p = (uint8_t)v;
		return p + 1;
	}
	if (__builtin_expect(v < (1u << 28), 1)) {
		/* 2 to 4 bytes without a branch on the length: the 7-bit
		 * groups spread to bytes, a continuation bit on all but the
		 * last, stored as four bytes (every caller has room for ten
		 * a value: the bytes past the last are overwritten or unused) */
		unsigned n = (unsigned)(31 - __builtin_clz((uint32_t)v)) / 7; /* bytes - 1 */
		uint32_t x = ((uint32_t)v & 0x7f) | (((uint32_t)v << 1) & 0x7f00) |
			     (((uint32_t)v << 2) & 0x7f0000) | (((uint32_t)v << 3) & 0x7f000000);
		x |= 0x808080u & ((1u << (8 * n)) - 1);
		p[0] = (uint8_t)x;
		p[1] = (uint8_t)(x >> 8);
		p[2] = (uint8_t)(x >> 16);
		p[3] = (uint8_t)(x >> 24);
		return p + n + 1;
	}
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline uint8_t *put_sv(uint8_t *p, int64_t v)
{
	return put_uv(p, zz_enc(v));
}

/* ---- reader ---- */

struct mtev_reader {
	int fd; /* -1: memory */
	uint8_t *buf;
	size_t cap, pos, len; /* valid bytes are buf[pos, len) */
	int own_buf, eof, ended;
	uint64_t base;	  /* stream offset of buf[0] */
	uint64_t rec_off; /* stream offset of the current record */
	struct mtev_header hdr;
	struct tmap tm;
	uint32_t last_br_tid;
	int have_br_tid;
	uint32_t last_wp_tid, last_wp_depth; /* of the previous waypoint record */
	int have_wp;
	uint64_t *ips;
	size_t ips_cap;
	struct mtev_frame *frames;
	size_t frames_cap;
	struct strtab st; /* string records read */
};

/* Remembers the text of string record @id (a later one with the same id
 * replaces it).  0, or -MTEV_ENOMEM. */
static int strtab_put(struct strtab *r, uint32_t id, struct mtev_str t)
{
	if (r->slen + t.len > r->scap) {
		size_t nc = r->scap ? r->scap : 4096;
		while (nc < r->slen + t.len)
			nc *= 2;
		char *nb = realloc(r->sbuf, nc);
		if (!nb)
			return -MTEV_ENOMEM;
		r->sbuf = nb;
		r->scap = nc;
	}
	if (r->nstrs == r->strs_cap) {
		size_t nc = r->strs_cap ? r->strs_cap * 2 : 64;
		struct sent *ns = realloc(r->strs, nc * sizeof *ns);
		if (!ns)
			return -MTEV_ENOMEM;
		r->strs = ns;
		r->strs_cap = nc;
	}
	if (t.len)
		memcpy(r->sbuf + r->slen, t.p, t.len);
	r->strs[r->nstrs] = (struct sent){r->slen, t.len};
	r->slen += t.len;
	r->nstrs++;
	if (r->nstrs > UINT32_MAX - 1)
		return -MTEV_ENOMEM;
	return idmap_put(&r->sid, id, (uint32_t)r->nstrs);
}

/* Make at least @need bytes available at buf[pos].  0, or -MTEV_E*. */
static int r_fill_slow(mtev_reader *r, size_t need);

/* Makes @need bytes available at r->pos: inline when they already are. */
static inline int r_fill(mtev_reader *r, size_t need)
{
	if (__builtin_expect(r->len - r->pos >= need, 1))
		return 0;
	return r_fill_slow(r, need);
}

static int r_fill_slow(mtev_reader *r, size_t need)
{
	if (r->fd < 0 || r->eof)
		return -MTEV_ETRUNC;
	if (r->pos) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->base += r->pos;
		r->len -= r->pos;
		r->pos = 0;
	}
	if (need > r->cap) {
		size_t nc = r->cap;
		while (nc < need)
			nc *= 2;
		uint8_t *nb = realloc(r->buf, nc);
		if (!nb)
			return -MTEV_ENOMEM;
		r->buf = nb;
		r->cap = nc;
	}
	while (r->len < need) {
		ssize_t n = read(r->fd, r->buf + r->len, r->cap - r->len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -MTEV_EIO;
		}
		if (n == 0) {
			r->eof = 1;
			return -MTEV_ETRUNC;
		}
		r->len += (size_t)n;
	}
	return 0;
}

static int r_header(mtev_reader *r)
{
	int e = r_fill(r, 17);
	if (e) {
		/* a short stream that does not even start with the magic is "not MTEV" */
		size_t have = r->len - r->pos;
		if (e == -MTEV_ETRUNC &&
		    (have < MTEV_MAGIC_LEN ? memcmp(r->buf + r->pos, MTEV_MAGIC, have) != 0 || have == 0
					    : memcmp(r->buf + r->pos, MTEV_MAGIC, MTEV_MAGIC_LEN) != 0))
			return -MTEV_EMAGIC;
		return e;
	}
	const uint8_t *h = r->buf + r->pos;
	if (memcmp(h, MTEV_MAGIC, MTEV_MAGIC_LEN))
		return -MTEV_EMAGIC;
	r->hdr.version = (uint16_t)(h[8] | h[9] << 8);
	if (r->hdr.version < MTEV_VERSION_MIN || r->hdr.version > MTEV_VERSION_MAX)
		return -MTEV_EVERSION;
	size_t hsize = (size_t)(h[10] | h[11] << 8);
	r->hdr.flags = (uint32_t)h[12] | (uint32_t)h[13] << 8 | (uint32_t)h[14] << 16 |
		       (uint32_t)h[15] << 24;
	size_t plen = h[16];
	if (plen > 63 || hsize < 17 + plen)
		return -MTEV_ECORRUPT;
	e = r_fill(r, hsize);
	if (e)
		return e;
	h = r->buf + r->pos;
	memcpy(r->hdr.producer, h + 17, plen);
	r->hdr.producer[plen] = 0;
	r->pos += hsize;
	return 0;
}

static mtev_reader *reader_new(void)
{
	mtev_reader *r = calloc(1, sizeof *r);
	return r;
}

/* the writer's buffer and a descriptor reader's first buffer (it grows);
 * the fuzz build makes them small (mk/fuzz.mk): more flushes and refills,
 * the same bytes, and no 64 KiB allocated and poisoned per reader under ASan */
#ifndef W_BUFSZ
#define W_BUFSZ (1u << 16)
#endif
#ifndef R_BUFSZ
#define R_BUFSZ (1u << 16)
#endif

mtev_reader *mtev_reader_alloc(int fd, int *err)
{
	mtev_reader *r = reader_new();
	if (!r) {
		*err = -MTEV_ENOMEM;
		return NULL;
	}
	r->fd = fd;
	r->cap = R_BUFSZ;
	r->buf = malloc(r->cap);
	r->own_buf = 1;
	if (!r->buf) {
		free(r);
		*err = -MTEV_ENOMEM;
		return NULL;
	}
	int e = r_header(r);
	if (e) {
		r->rec_off = r->base + r->pos;
		mtev_reader_free(r);
		*err = e;
		return NULL;
	}
	*err = 0;
	return r;
}

mtev_reader *mtev_reader_alloc_mem(const void *buf, size_t len, int *err)
{
	mtev_reader *r = reader_new();
	if (!r) {
		*err = -MTEV_ENOMEM;
		return NULL;
	}
	r->fd = -1;
	r->buf = (uint8_t *)(uintptr_t)buf;
	r->cap = r->len = len;
	r->eof = 1;
	int e = r_header(r);
	if (e) {
		mtev_reader_free(r);
		*err = e;
		return NULL;
	}
	*err = 0;
	return r;
}

void mtev_reader_free(mtev_reader *r)
{
	if (!r)
		return;
	if (r->own_buf)
		free(r->buf);
	tmap_fini(&r->tm);
	free(r->ips);
	free(r->frames);
	strtab_fini(&r->st);
	free(r);
}

const struct mtev_header *mtev_reader_header(const mtev_reader *r)
{
	return &r->hdr;
}

uint64_t mtev_reader_offset(const mtev_reader *r)
{
	return r->rec_off;
}

static int rd_waypoint_short(mtev_reader *r, unsigned kind, struct mtev_rec *rec,
			     const uint8_t *p, const uint8_t *end);

/* The fields of a span record (rec->span zeroed).  0, -MTEV_EREF, or c->bad. */
static inline int parse_span(mtev_reader *r, struct cur *c, struct mtev_rec *rec)
{
	rec->span.tid = get_u32(c);
	rec->span.depth = get_u32(c);
	rec->span.begin = get_uv(c);
	rec->span.end = rec->span.begin + get_uv(c);
	if (rec->span.end < rec->span.begin)
		c->bad = 1;
	rec->span.func = get_uv(c);
	rec->span.callsite = get_uv(c);
	rec->span.flags = get_u32(c);
	rec->span.name = get_str(c);
	if (c->p < c->end) /* appended field: a name by reference */
		rec->span.name_id = get_u32(c);
	if (rec->span.name_id && !c->bad) {
		if (rec->span.name.len) /* the writer never sends both */
			c->bad = 1;
		else if (!strtab_get(&r->st, rec->span.name_id, &rec->span.name))
			return -MTEV_EREF;
	}
	return 0;
}

/* A branch record (kinds 0x20-0x3f: type in the low bits, 0x10 = tid given). */
static int parse_branch(mtev_reader *r, unsigned kind, struct cur *c, struct mtev_rec *rec)
{
	rec->kind = MTEV_BRANCH;
	rec->br.type = kind & 0x0f;
	if (rec->br.type >= MTEV_BR__COUNT)
		return -MTEV_ECORRUPT;
	uint32_t tid;
	if (kind & 0x10) {
		tid = get_u32(c);
	} else {
		if (!r->have_br_tid)
			return -MTEV_ECORRUPT;
		tid = r->last_br_tid;
	}
	struct tstate *st = tmap_get(&r->tm, tid);
	if (!st)
		return -MTEV_ENOMEM;
	rec->br.tid = tid;
	rec->br.time = st->time + (uint64_t)get_sv(c);
	rec->br.from = st->addr + (uint64_t)get_sv(c);
	rec->br.to = rec->br.from + (uint64_t)get_sv(c);
	if (c->bad)
		return -MTEV_ECORRUPT;
	st->time = rec->br.time;
	st->addr = rec->br.to ? rec->br.to : rec->br.from;
	r->last_br_tid = tid;
	r->have_br_tid = 1;
	return 0;
}

/* A sample record's fields (its ips in r->ips). */
static int parse_sample(mtev_reader *r, struct cur *c, struct mtev_rec *rec)
{
	rec->sample.pid = get_u32(c);
	rec->sample.tid = get_u32(c);
	rec->sample.time = get_uv(c);
	uint64_t n = get_uv(c);
	/* each ip takes at least one byte: bound n by what is left */
	if (c->bad || n > (uint64_t)(c->end - c->p))
		return -MTEV_ECORRUPT;
	if (n > r->ips_cap) {
		size_t nc = r->ips_cap ? r->ips_cap : 64;
		while (nc < n)
			nc *= 2;
		uint64_t *ni = realloc(r->ips, nc * sizeof *ni);
		if (!ni)
			return -MTEV_ENOMEM;
		r->ips = ni;
		r->ips_cap = nc;
	}
	uint64_t prev = 0;
	for (uint64_t i = 0; i < n; i++) {
		prev += (uint64_t)get_sv(c);
		r->ips[i] = prev;
	}
	rec->sample.nips = (uint32_t)n;
	rec->sample.ips = r->ips;
	/* appended within version 1: absent means 0 */
	rec->sample.flags = c->p < c->end ? get_u32(c) : 0;
	return 0;
}

/* A symbol record's fields (its frames in r->frames). */
static int parse_symbol(mtev_reader *r, struct cur *c, struct mtev_rec *rec)
{
	rec->symbol.addr = get_uv(c);
	rec->symbol.entry = get_uv(c);
	uint64_t n = get_uv(c);
	/* each frame takes at least four bytes */
	if (c->bad || n > (uint64_t)(c->end - c->p) / 4)
		return -MTEV_ECORRUPT;
	if (n > r->frames_cap) {
		size_t nc = r->frames_cap ? r->frames_cap : 16;
		while (nc < n)
			nc *= 2;
		struct mtev_frame *nf = realloc(r->frames, nc * sizeof *nf);
		if (!nf)
			return -MTEV_ENOMEM;
		r->frames = nf;
		r->frames_cap = nc;
	}
	for (uint64_t i = 0; i < n; i++) {
		r->frames[i].name = get_str(c);
		r->frames[i].file = get_str(c);
		r->frames[i].line = get_u32(c);
		r->frames[i].column = get_u32(c);
	}
	rec->symbol.nframes = (uint32_t)n;
	rec->symbol.frames = r->frames;
	return 0;
}

static int parse_payload(mtev_reader *r, unsigned kind, struct cur *c, struct mtev_rec *rec)
{
	if (kind >= MTEV_WP_SHORT && kind <= MTEV_WP_SHORT + 7) {
		int e = rd_waypoint_short(r, kind, rec, c->p, c->end);
		c->p = c->end;
		return e < 0 ? e : 0;
	}
	if (kind >= 0x20 && kind <= 0x3f)
		return parse_branch(r, kind, c, rec);
	memset(rec, 0, sizeof *rec);
	rec->kind = kind;
	switch (kind) {
	case MTEV_CLOCK:
		rec->clock.time_zero = get_uv(c);
		rec->clock.time_mult = get_uv(c);
		rec->clock.time_shift = get_uv(c);
		rec->clock.tsc_hz = get_uv(c);
		rec->clock.flags = get_uv(c);
		break;
	case MTEV_PROCESS:
		rec->process.pid = get_u32(c);
		rec->process.name = get_str(c);
		break;
	case MTEV_THREAD:
		rec->thread.pid = get_u32(c);
		rec->thread.tid = get_u32(c);
		rec->thread.time = get_uv(c);
		rec->thread.name = get_str(c);
		break;
	case MTEV_MAP: {
		rec->map.pid = get_u32(c);
		rec->map.time = get_uv(c);
		rec->map.start = get_uv(c);
		rec->map.len = get_uv(c);
		rec->map.pgoff = get_uv(c);
		rec->map.prot = get_u32(c);
		struct mtev_str b = get_str(c);
		if (b.len > 20)
			c->bad = 1;
		rec->map.build_id_len = (uint8_t)b.len;
		rec->map.build_id = (const uint8_t *)b.p;
		rec->map.path = get_str(c);
		break;
	}
	case MTEV_TRIGGER:
		rec->trigger.pid = get_u32(c);
		rec->trigger.tid = get_u32(c);
		rec->trigger.time = get_uv(c);
		rec->trigger.addr = get_uv(c);
		rec->trigger.arg0 = get_uv(c);
		rec->trigger.arg1 = get_uv(c);
		rec->trigger.symbol = get_str(c);
		break;
	case MTEV_STRING:
		rec->string.id = get_u32(c);
		rec->string.text = get_str(c);
		if (!c->bad) {
			int e = strtab_put(&r->st, rec->string.id, rec->string.text);
			if (e)
				return e;
		}
		break;
	case MTEV_SAMPLE: {
		int e = parse_sample(r, c, rec);
		if (e)
			return e;
		break;
	}
	case MTEV_GAP: {
		rec->gap.tid = get_u32(c);
		rec->gap.begin = get_uv(c);
		rec->gap.end = rec->gap.begin + get_uv(c);
		if (rec->gap.end < rec->gap.begin) /* the writer never wraps: corrupt */
			c->bad = 1;
		rec->gap.reason = get_u32(c);
		int64_t code = get_sv(c);
		if (code < INT32_MIN || code > INT32_MAX)
			c->bad = 1;
		rec->gap.code = (int32_t)code;
		rec->gap.offset = get_uv(c) - 1;
		rec->gap.ip = get_uv(c);
		rec->gap.message = get_str(c);
		break;
	}
	case MTEV_SEGMENT:
		rec->segment.tid = get_u32(c);
		rec->segment.index = get_u32(c);
		rec->segment.begin = get_uv(c);
		rec->segment.end = rec->segment.begin + get_uv(c);
		if (rec->segment.end < rec->segment.begin)
			c->bad = 1;
		rec->segment.reason = get_u32(c);
		break;
	case MTEV_SPAN: {
		int e = parse_span(r, c, rec);
		if (e)
			return e;
		break;
	}
	case MTEV_WAYPOINT: {
		rec->waypoint.tid = get_u32(c);
		rec->waypoint.depth = get_u32(c);
		if (c->bad)
			return -MTEV_ECORRUPT;
		struct tstate *st = tmap_get(&r->tm, rec->waypoint.tid);
		if (!st)
			return -MTEV_ENOMEM;
		rec->waypoint.time = st->time + (uint64_t)get_sv(c);
		rec->waypoint.addr = st->addr + (uint64_t)get_sv(c);
		if (c->bad)
			return -MTEV_ECORRUPT;
		st->time = rec->waypoint.time;
		st->addr = rec->waypoint.addr;
		r->last_wp_tid = rec->waypoint.tid;
		r->last_wp_depth = rec->waypoint.depth;
		r->have_wp = 1;
		break;
	}
	case MTEV_SYMBOL: {
		int e = parse_symbol(r, c, rec);
		if (e)
			return e;
		break;
	}
	default:
		rec->kind = MTEV_KIND_RAW;
		rec->raw.kind = kind;
		rec->raw.len = (uint32_t)(c->end - c->p);
		rec->raw.data = c->p;
		c->p = c->end;
		return 0;
	}
	return c->bad ? -MTEV_ECORRUPT : 0;
}

/* ---- fast paths: a branch or waypoint record wholly in the buffer ---- */

/* A varint at *pp, before @end: one or two bytes inline, else get_uv.  The
 * same values and the same errors as get_uv. */
static inline int fuv(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	const uint8_t *p = *pp;
	if (__builtin_expect(p < end && p[0] < 0x80, 1)) {
		*out = p[0];
		*pp = p + 1;
		return 0;
	}
	if (end - p >= 2 && p[1] < 0x80) {
		*out = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
		*pp = p + 2;
		return 0;
	}
	if (end - p >= 3 && p[2] < 0x80) { /* p[1] has its high bit: 3 bytes */
		*out = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7 | (uint64_t)p[2] << 14;
		*pp = p + 3;
		return 0;
	}
	struct cur c = {p, end, 0};
	*out = get_uv_loop(&c);
	*pp = c.p;
	return c.bad;
}

/* The payload [p, end) of a waypoint record. */
static __attribute__((noinline)) int rd_waypoint(mtev_reader *r, struct mtev_rec *rec, const uint8_t *p,
			      const uint8_t *end)
{
	uint64_t tid, depth, dt, da;
	int bad = fuv(&p, end, &tid);
	bad |= fuv(&p, end, &depth);
	if (bad || tid > UINT32_MAX || depth > UINT32_MAX)
		return -MTEV_ECORRUPT;
	struct tstate *st = tmap_get(&r->tm, (uint32_t)tid);
	if (!st)
		return -MTEV_ENOMEM;
	bad = fuv(&p, end, &dt);
	bad |= fuv(&p, end, &da);
	if (bad)
		return -MTEV_ECORRUPT;
	rec->kind = MTEV_WAYPOINT;
	rec->waypoint.tid = (uint32_t)tid;
	rec->waypoint.depth = (uint32_t)depth;
	st->time += (uint64_t)zz_dec(dt);
	st->addr += (uint64_t)zz_dec(da);
	rec->waypoint.time = st->time;
	rec->waypoint.addr = st->addr;
	r->last_wp_tid = (uint32_t)tid;
	r->last_wp_depth = (uint32_t)depth;
	r->have_wp = 1;
	return 1;
}

/* The payload [p, end) of a short waypoint record (kind 0x40-0x47): the
 * thread of the previous waypoint record, its depth changed by kind&7 - 3. */
static inline __attribute__((always_inline)) int
rd_waypoint_short(mtev_reader *r, unsigned kind, struct mtev_rec *rec, const uint8_t *p,
		  const uint8_t *end)
{
	if (!r->have_wp)
		return -MTEV_ECORRUPT;
	int64_t depth = (int64_t)r->last_wp_depth + (int64_t)(kind & 7) - 3;
	if (depth < 0 || depth > UINT32_MAX)
		return -MTEV_ECORRUPT;
	uint64_t dt, da;
	int bad = fuv(&p, end, &dt);
	bad |= fuv(&p, end, &da);
	if (bad)
		return -MTEV_ECORRUPT;
	struct tstate *st = tmap_get(&r->tm, r->last_wp_tid);
	if (!st)
		return -MTEV_ENOMEM;
	rec->kind = MTEV_WAYPOINT;
	rec->waypoint.tid = r->last_wp_tid;
	rec->waypoint.depth = (uint32_t)depth;
	st->time += (uint64_t)zz_dec(dt);
	st->addr += (uint64_t)zz_dec(da);
	rec->waypoint.time = st->time;
	rec->waypoint.addr = st->addr;
	r->last_wp_depth = (uint32_t)depth;
	return 1;
}

/* The payload [p, end) of a branch record of wire kind @kind. */
static __attribute__((noinline)) int rd_branch(mtev_reader *r, unsigned kind, struct mtev_rec *rec,
			    const uint8_t *p, const uint8_t *end)
{
	unsigned type = kind & 0x0f;
	if (type >= MTEV_BR__COUNT)
		return -MTEV_ECORRUPT;
	uint32_t tid = r->last_br_tid;
	if (kind & 0x10) {
		uint64_t t;
		if (fuv(&p, end, &t) || t > UINT32_MAX)
			return -MTEV_ECORRUPT;
		tid = (uint32_t)t;
	} else if (!r->have_br_tid) {
		return -MTEV_ECORRUPT;
	}
	struct tstate *st = tmap_get(&r->tm, tid);
	if (!st)
		return -MTEV_ENOMEM;
	uint64_t dt, df, dto;
	int bad = fuv(&p, end, &dt);
	bad |= fuv(&p, end, &df);
	bad |= fuv(&p, end, &dto);
	if (bad)
		return -MTEV_ECORRUPT;
	rec->kind = MTEV_BRANCH;
	rec->br.type = type;
	rec->br.tid = tid;
	rec->br.time = st->time + (uint64_t)zz_dec(dt);
	rec->br.from = st->addr + (uint64_t)zz_dec(df);
	rec->br.to = rec->br.from + (uint64_t)zz_dec(dto);
	st->time = rec->br.time;
	st->addr = rec->br.to ? rec->br.to : rec->br.from;
	r->last_br_tid = tid;
	r->have_br_tid = 1;
	return 1;
}

static int read_slow(mtev_reader *r, struct mtev_rec *rec) __attribute__((noinline));

/* The record of @n bytes at r->pos is the current one: consume it. */
static inline void r_take(mtev_reader *r, size_t n)
{
	r->rec_off = r->base + r->pos;
	r->pos += n;
}

/* The payload [p, end) of a span record. */
static __attribute__((noinline)) int rd_span(mtev_reader *r, struct mtev_rec *rec,
					     const uint8_t *p, const uint8_t *end)
{
	struct cur c = {p, end, 0};
	rec->kind = MTEV_SPAN;
	memset(&rec->span, 0, sizeof rec->span);
	int e = parse_span(r, &c, rec);
	if (e)
		return e;
	return c.bad ? -MTEV_ECORRUPT : 1;
}

int mtev_read(mtev_reader *r, struct mtev_rec *rec)
{
	size_t avail = r->len - r->pos;
	const uint8_t *p = r->buf + r->pos;
	if (__builtin_expect(!r->ended && avail >= 2 && p[1] < 0x80 && avail >= 2 + (size_t)p[1], 1)) {
		unsigned kind = p[0];
		const uint8_t *end = p + 2 + p[1];
		if ((kind & 0xf8) == MTEV_WP_SHORT) {
			r_take(r, 2 + (size_t)p[1]);
			return rd_waypoint_short(r, kind, rec, p + 2, end);
		}
		if (kind == MTEV_WAYPOINT) {
			r_take(r, 2 + (size_t)p[1]);
			return rd_waypoint(r, rec, p + 2, end);
		}
		if ((kind & 0xe0) == 0x20) {
			r_take(r, 2 + (size_t)p[1]);
			return rd_branch(r, kind, rec, p + 2, end);
		}
		if (kind == MTEV_SPAN) {
			r_take(r, 2 + (size_t)p[1]);
			return rd_span(r, rec, p + 2, end);
		}
	}
	return read_slow(r, rec);
}

/* The thread's state in locals (a store into *rec may alias anything in
 * *r); written back whenever the thread changes and at the end, and what
 * the reader holds moves past a record only once it decoded whole. */
size_t mtev_read_branches(mtev_reader *r, struct mtev_rec *rec, uint64_t *off, size_t n)
{
	const uint8_t *const b = r->buf, *p = b + r->pos, *const e = b + r->len, *lastp = p;
	const uint64_t base = r->base;
	uint32_t tid = r->last_br_tid;
	struct tstate *st = NULL;
	uint64_t stime = 0, saddr = 0;
	size_t i = 0;

	if (r->ended || !n)
		return 0;
	if (r->have_br_tid) {
		st = tmap_get(&r->tm, tid);
		if (!st)
			return 0;
		stime = st->time;
		saddr = st->addr;
	}
	while (i < n && e - p >= 2) {
		unsigned kind = p[0], len = p[1];
		if ((kind & 0xe0) != 0x20 || len >= 0x80 || (size_t)(e - p) < 2 + (size_t)len ||
		    (kind & 0x0f) >= MTEV_BR__COUNT)
			break;
		const uint8_t *q = p + 2, *end = q + len;
		if (kind & 0x10) {
			uint64_t t;
			if (fuv(&q, end, &t) || t > UINT32_MAX)
				break;
			if (!st || t != tid) {
				if (st) {
					st->time = stime;
					st->addr = saddr;
				}
				st = tmap_get(&r->tm, (uint32_t)t);
				if (!st)
					break;
				tid = (uint32_t)t;
				stime = st->time;
				saddr = st->addr;
			}
		} else if (!st) {
			break;
		}
		uint64_t dt, df, dto;
		int bad = fuv(&q, end, &dt);
		bad |= fuv(&q, end, &df);
		bad |= fuv(&q, end, &dto);
		if (bad)
			break;
		struct mtev_rec *x = &rec[i];
		x->kind = MTEV_BRANCH;
		x->br.type = kind & 0x0f;
		x->br.tid = tid;
		x->br.time = stime + (uint64_t)zz_dec(dt);
		x->br.from = saddr + (uint64_t)zz_dec(df);
		x->br.to = x->br.from + (uint64_t)zz_dec(dto);
		stime = x->br.time;
		saddr = x->br.to ? x->br.to : x->br.from;
		if (off)
			off[i] = base + (uint64_t)(p - b);
		lastp = p;
		i++;
		p = end;
	}
	if (st) {
		st->time = stime;
		st->addr = saddr;
	}
	if (i) {
		r->last_br_tid = rec[i - 1].br.tid;
		r->have_br_tid = 1;
		r->rec_off = base + (uint64_t)(lastp - b);
		r->pos = (size_t)(p - b);
	}
	return i;
}

static int read_slow(mtev_reader *r, struct mtev_rec *rec)
{
	if (r->ended) {
		/* only end of file may follow END */
		r->rec_off = r->base + r->pos;
		if (r->len > r->pos)
			return -MTEV_EAFTEREND;
		if (r->fd >= 0 && !r->eof) {
			int e = r_fill(r, 1);
			if (e == 0)
				return -MTEV_EAFTEREND;
			if (e != -MTEV_ETRUNC)
				return e;
		}
		return 0;
	}
	r->rec_off = r->base + r->pos;
	/* kind + up to 4 bytes of size varint */
	int e = r_fill(r, 2);
	if (e) {
		if (e != -MTEV_ETRUNC || r->len - r->pos == 0)
			return e;
		/* a single byte left: only END (kind 0, size 0) fits, and it needs 2 */
		return -MTEV_ETRUNC;
	}
	const uint8_t *p = r->buf + r->pos;
	unsigned kind = p[0];
	uint64_t size = 0;
	size_t hl = 1;
	for (unsigned shift = 0;; shift += 7) {
		if (hl >= r->len - r->pos) {
			e = r_fill(r, hl + 1);
			if (e)
				return e;
			p = r->buf + r->pos;
		}
		uint8_t b = p[hl++];
		size |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
		if (shift >= 28)
			return -MTEV_ESIZE;
	}
	if (size > MTEV_MAX_PAYLOAD)
		return -MTEV_ESIZE;
	if (kind == MTEV_END) {
		if (size != 0)
			return -MTEV_ESIZE;
		r->pos += hl;
		r->ended = 1;
		/* END must be the last byte: anything after it is an error */
		e = r_fill(r, 1);
		if (e == 0) {
			r->rec_off = r->base + r->pos;
			return -MTEV_EAFTEREND;
		}
		return e == -MTEV_ETRUNC ? 0 : e;
	}
	e = r_fill(r, hl + size);
	if (e)
		return e;
	struct cur c = {r->buf + r->pos + hl, r->buf + r->pos + hl + size, 0};
	r->pos += hl + size;
	e = parse_payload(r, kind, &c, rec);
	return e ? e : 1;
}

/* ---- writer ---- */

struct mtev_writer {
	int fd;
	uint8_t *buf;
	size_t cap, len;
	uint64_t flushed;
	int err;
	struct tmap tm;
	uint32_t last_br_tid;
	int have_br_tid;
	uint32_t last_wp_tid, last_wp_depth; /* of the previous waypoint record */
	int have_wp;
	uint8_t *tmp;
	size_t tmp_cap;
	struct strtab st; /* string records written */
	mtev_sink_fn sink; /* mtev_writer_alloc_sink: records go here */
	void *sink_ctx;
};

/* A sink writer's err until it fails: every call that checks err first
 * (mtev_write's one test on its hot path) sees the sink there. */
#define W_SINK 1

int mtev_writer_flush(mtev_writer *w)
{
	size_t off = 0;
	if (w->sink)
		return w->err < 0 ? w->err : 0;
	while (off < w->len) {
		ssize_t n = write(w->fd, w->buf + off, w->len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			w->err = -MTEV_EIO;
			return w->err;
		}
		off += (size_t)n;
	}
	w->flushed += w->len;
	w->len = 0;
	return 0;
}

static int w_put(mtev_writer *w, const void *p, size_t n)
{
	if (w->len + n > w->cap) {
		if (mtev_writer_flush(w))
			return w->err;
		if (n > w->cap) {
			size_t off = 0;
			while (off < n) {
				ssize_t k = write(w->fd, (const uint8_t *)p + off, n - off);
				if (k < 0) {
					if (errno == EINTR)
						continue;
					return w->err = -MTEV_EIO;
				}
				off += (size_t)k;
			}
			w->flushed += n;
			return 0;
		}
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
}

mtev_writer *mtev_writer_alloc(int fd, const char *producer, uint32_t flags, int *err)
{
	mtev_writer *w = calloc(1, sizeof *w);
	if (!w) {
		*err = -MTEV_ENOMEM;
		return NULL;
	}
	w->fd = fd;
	w->cap = W_BUFSZ;
	w->buf = malloc(w->cap);
	if (!w->buf) {
		free(w);
		*err = -MTEV_ENOMEM;
		return NULL;
	}
	size_t plen = producer ? strlen(producer) : 0;
	if (plen > 63)
		plen = 63;
	uint8_t h[17 + 63];
	memcpy(h, MTEV_MAGIC, 8);
	h[8] = MTEV_VERSION & 0xff;
	h[9] = MTEV_VERSION >> 8;
	h[10] = (uint8_t)(17 + plen);
	h[11] = 0;
	h[12] = (uint8_t)flags;
	h[13] = (uint8_t)(flags >> 8);
	h[14] = (uint8_t)(flags >> 16);
	h[15] = (uint8_t)(flags >> 24);
	h[16] = (uint8_t)plen;
	if (plen)
		memcpy(h + 17, producer, plen);
	w_put(w, h, 17 + plen);
	*err = 0;
	return w;
}

mtev_writer *mtev_writer_alloc_sink(mtev_sink_fn fn, void *ctx, int *err)
{
	mtev_writer *w = calloc(1, sizeof *w);
	if (!w) {
		*err = -MTEV_ENOMEM;
		return NULL;
	}
	w->fd = -1;
	w->sink = fn;
	w->sink_ctx = ctx;
	w->err = W_SINK;
	return w;
}

void mtev_writer_free(mtev_writer *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w->tmp);
	tmap_fini(&w->tm);
	strtab_fini(&w->st);
	free(w);
}

uint64_t mtev_writer_bytes(const mtev_writer *w)
{
	return w->flushed + w->len;
}

int mtev_writer_finish(mtev_writer *w)
{
	uint8_t end[2] = {MTEV_END, 0};
	if (w->sink)
		return w->err < 0 ? w->err : 0;
	if (w->err)
		return w->err;
	w_put(w, end, 2);
	if (w->err)
		return w->err;
	return mtev_writer_flush(w);
}

/* Room for a payload of @n bytes in the scratch buffer. */
static uint8_t *w_tmp(mtev_writer *w, size_t n)
{
	if (n > w->tmp_cap) {
		size_t nc = w->tmp_cap ? w->tmp_cap : 256;
		while (nc < n)
			nc *= 2;
		uint8_t *nt = realloc(w->tmp, nc);
		if (!nt)
			return NULL;
		w->tmp = nt;
		w->tmp_cap = nc;
	}
	return w->tmp;
}

static inline uint8_t *put_str(uint8_t *p, struct mtev_str s)
{
	p = put_uv(p, s.len);
	if (s.len)
		memcpy(p, s.p, s.len);
	return p + s.len;
}

static int w_record(mtev_writer *w, unsigned kind, const uint8_t *payload, size_t n)
{
	uint8_t h[8];
	h[0] = (uint8_t)kind;
	uint8_t *e = put_uv(h + 1, n);
	if (w->len + (size_t)(e - h) + n <= w->cap) {
		memcpy(w->buf + w->len, h, (size_t)(e - h));
		w->len += (size_t)(e - h);
		memcpy(w->buf + w->len, payload, n);
		w->len += n;
		return 0;
	}
	if (w_put(w, h, (size_t)(e - h)))
		return w->err;
	return w_put(w, payload, n);
}

/* A branch record, encoded in place: kind, one size byte (a branch payload
 * is at most 5 + 3 * 10 = 35 bytes < 128), payload. */
static int write_branch(mtev_writer *w, const struct mtev_rec *rec)
{
	if (rec->br.type >= MTEV_BR__COUNT)
		return -MTEV_EINVAL;
	if (w->len + 2 + 35 > w->cap && mtev_writer_flush(w))
		return w->err;
	uint8_t *rb = w->buf + w->len;
	uint8_t *pl = rb + 2;
	uint8_t *p = pl;
	unsigned kind = 0x20 | rec->br.type;
	if (!w->have_br_tid || w->last_br_tid != rec->br.tid) {
		kind |= 0x10;
		p = put_uv(p, rec->br.tid);
	}
	struct tstate *st = tmap_get(&w->tm, rec->br.tid);
	if (!st)
		return -MTEV_ENOMEM;
	p = put_sv(p, (int64_t)(rec->br.time - st->time));
	p = put_sv(p, (int64_t)(rec->br.from - st->addr));
	p = put_sv(p, (int64_t)(rec->br.to - rec->br.from));
	st->time = rec->br.time;
	st->addr = rec->br.to ? rec->br.to : rec->br.from;
	w->last_br_tid = rec->br.tid;
	w->have_br_tid = 1;
	rb[0] = (uint8_t)kind;
	rb[1] = (uint8_t)(p - pl);
	w->len += 2 + (size_t)(p - pl);
	return 0;
}

/* A waypoint record, in place too (two per branch in segment output): the
 * payload is at most 5 + 5 + 2 * 10 = 30 bytes, one size byte; the same bytes
 * as the general path. */
static int write_waypoint(mtev_writer *w, const struct mtev_rec *rec)
{
	if (w->len + 2 + 30 > w->cap && mtev_writer_flush(w))
		return w->err;
	struct tstate *st = tmap_get(&w->tm, rec->waypoint.tid);
	if (!st)
		return -MTEV_ENOMEM;
	uint8_t *rb = w->buf + w->len;
	uint8_t *pl = rb + 2, *p = pl;
	/* short form: the previous waypoint's thread, depth within -3..+4 */
	int64_t dd = (int64_t)rec->waypoint.depth - (int64_t)w->last_wp_depth + 3;
	if (w->have_wp && w->last_wp_tid == rec->waypoint.tid && dd >= 0 && dd < 8) {
		rb[0] = (uint8_t)(MTEV_WP_SHORT + dd);
	} else {
		rb[0] = MTEV_WAYPOINT;
		p = put_uv(p, rec->waypoint.tid);
		p = put_uv(p, rec->waypoint.depth);
		w->last_wp_tid = rec->waypoint.tid;
		w->have_wp = 1;
	}
	w->last_wp_depth = rec->waypoint.depth;
	p = put_sv(p, (int64_t)(rec->waypoint.time - st->time));
	p = put_sv(p, (int64_t)(rec->waypoint.addr - st->addr));
	st->time = rec->waypoint.time;
	st->addr = rec->waypoint.addr;
	rb[1] = (uint8_t)(p - pl);
	w->len += 2 + (size_t)(p - pl);
	return 0;
}

/* A raw record mtev_write refuses: a kind this codec knows or reserves. */
static int raw_invalid(const struct mtev_rec *rec)
{
	unsigned k = rec->raw.kind;
	return k > 0xff || k == MTEV_END || (k >= 0x20 && k <= 0x3f) ||
	       (k >= MTEV_WP_SHORT && k <= MTEV_WP_SHORT + 7) || mtev_kind_name(k) ||
	       rec->raw.len > MTEV_MAX_PAYLOAD;
}

/* Upper bound of @rec's payload: fixed fields plus strings; 0 for a kind
 * the general path does not write. */
static inline size_t payload_bound(const struct mtev_rec *rec)
{
	size_t n = 16 * 10;
	switch (rec->kind) {
	case MTEV_PROCESS: n += rec->process.name.len; break;
	case MTEV_THREAD: n += rec->thread.name.len; break;
	case MTEV_MAP: n += rec->map.path.len + 20; break;
	case MTEV_TRIGGER: n += rec->trigger.symbol.len; break;
	case MTEV_STRING: n += rec->string.text.len; break;
	case MTEV_SAMPLE: n += (size_t)rec->sample.nips * 10; break;
	case MTEV_GAP: n += rec->gap.message.len; break;
	case MTEV_SPAN: n += rec->span.name.len; break;
	case MTEV_SYMBOL:
		for (uint32_t i = 0; i < rec->symbol.nframes; i++)
			n += 40 + rec->symbol.frames[i].name.len + rec->symbol.frames[i].file.len;
		break;
	case MTEV_CLOCK:
	case MTEV_SEGMENT: break;
	default: return 0;
	}
	return n;
}

/* Runs of branch records in a loop of their own: the output position, the
 * last branch's thread and its state in locals (a byte store may alias
 * anything in *w), written back before anything else is written.  The bytes
 * are write_branch's. */
long mtev_write_upto(mtev_writer *w, const struct mtev_rec *rec, size_t n, uint64_t limit)
{
	const struct mtev_rec *const first = rec, *const end = rec + n;

	if (w->err < 0)
		return w->err;
	if (w->err == W_SINK) {
		for (; rec < end && rec->kind == MTEV_BRANCH && rec->br.time <= limit; rec++) {
			int e = mtev_write(w, rec);
			if (e < 0)
				return e;
		}
		return rec - first;
	}
	while (rec < end && rec->kind == MTEV_BRANCH && rec->br.time <= limit) {
		uint8_t *o = w->buf + w->len;
		const uint8_t *lim = w->buf + w->cap - (2 + 35);
		uint32_t tid = w->last_br_tid;
		int have = w->have_br_tid, e = 0;
		struct tstate *st = NULL;
		uint64_t stime = 0, saddr = 0;

		if (o > lim) {
			if (mtev_writer_flush(w))
				return w->err;
			continue;
		}
		if (have) {
			if (!(st = tmap_get(&w->tm, tid)))
				return -MTEV_ENOMEM;
			stime = st->time;
			saddr = st->addr;
		}
		do {
			if (rec->br.type >= MTEV_BR__COUNT) {
				e = -MTEV_EINVAL;
				break;
			}
			uint8_t *pl = o + 2, *p = pl;
			unsigned kind = 0x20 | rec->br.type;
			if (!have || tid != rec->br.tid) {
				kind |= 0x10;
				p = put_uv(p, rec->br.tid);
				if (st) {
					st->time = stime;
					st->addr = saddr;
				}
				tid = rec->br.tid;
				have = 1;
				st = tmap_get(&w->tm, tid);
				if (!st) {
					e = -MTEV_ENOMEM;
					break;
				}
				stime = st->time;
				saddr = st->addr;
			}
			p = put_sv(p, (int64_t)(rec->br.time - stime));
			p = put_sv(p, (int64_t)(rec->br.from - saddr));
			p = put_sv(p, (int64_t)(rec->br.to - rec->br.from));
			stime = rec->br.time;
			saddr = rec->br.to ? rec->br.to : rec->br.from;
			o[0] = (uint8_t)kind;
			o[1] = (uint8_t)(p - pl);
			o = p;
			rec++;
		} while (rec < end && rec->kind == MTEV_BRANCH && rec->br.time <= limit && o <= lim);
		if (st) {
			st->time = stime;
			st->addr = saddr;
		}
		w->len = (size_t)(o - w->buf);
		w->last_br_tid = tid;
		w->have_br_tid = have;
		if (e < 0)
			return e;
	}
	return rec - first;
}

/* The payload of a record of any kind but branch, waypoint and raw, into
 * w->tmp: its length, or -MTEV_E*. */
static inline __attribute__((always_inline)) long encode_rec(mtev_writer *w, const struct mtev_rec *rec)
{
	size_t n = payload_bound(rec);
	if (!n)
		return -MTEV_EINVAL;
	uint8_t *p0 = w_tmp(w, n), *p = p0;
	if (!p)
		return -MTEV_ENOMEM;
	switch (rec->kind) {
	case MTEV_CLOCK:
		p = put_uv(p, rec->clock.time_zero);
		p = put_uv(p, rec->clock.time_mult);
		p = put_uv(p, rec->clock.time_shift);
		p = put_uv(p, rec->clock.tsc_hz);
		p = put_uv(p, rec->clock.flags);
		break;
	case MTEV_PROCESS:
		p = put_uv(p, rec->process.pid);
		p = put_str(p, rec->process.name);
		break;
	case MTEV_THREAD:
		p = put_uv(p, rec->thread.pid);
		p = put_uv(p, rec->thread.tid);
		p = put_uv(p, rec->thread.time);
		p = put_str(p, rec->thread.name);
		break;
	case MTEV_MAP: {
		if (rec->map.build_id_len > 20)
			return -MTEV_EINVAL;
		p = put_uv(p, rec->map.pid);
		p = put_uv(p, rec->map.time);
		p = put_uv(p, rec->map.start);
		p = put_uv(p, rec->map.len);
		p = put_uv(p, rec->map.pgoff);
		p = put_uv(p, rec->map.prot);
		struct mtev_str b = {(const char *)rec->map.build_id, rec->map.build_id_len};
		p = put_str(p, b);
		p = put_str(p, rec->map.path);
		break;
	}
	case MTEV_TRIGGER:
		p = put_uv(p, rec->trigger.pid);
		p = put_uv(p, rec->trigger.tid);
		p = put_uv(p, rec->trigger.time);
		p = put_uv(p, rec->trigger.addr);
		p = put_uv(p, rec->trigger.arg0);
		p = put_uv(p, rec->trigger.arg1);
		p = put_str(p, rec->trigger.symbol);
		break;
	case MTEV_STRING:
		p = put_uv(p, rec->string.id);
		p = put_str(p, rec->string.text);
		if (strtab_put(&w->st, rec->string.id, rec->string.text))
			return -MTEV_ENOMEM;
		break;
	case MTEV_SAMPLE: {
		p = put_uv(p, rec->sample.pid);
		p = put_uv(p, rec->sample.tid);
		p = put_uv(p, rec->sample.time);
		p = put_uv(p, rec->sample.nips);
		uint64_t prev = 0;
		for (uint32_t i = 0; i < rec->sample.nips; i++) {
			p = put_sv(p, (int64_t)(rec->sample.ips[i] - prev));
			prev = rec->sample.ips[i];
		}
		if (rec->sample.flags)
			p = put_uv(p, rec->sample.flags);
		break;
	}
	case MTEV_GAP:
		if (rec->gap.end < rec->gap.begin)
			return -MTEV_EINVAL;
		p = put_uv(p, rec->gap.tid);
		p = put_uv(p, rec->gap.begin);
		p = put_uv(p, rec->gap.end - rec->gap.begin);
		p = put_uv(p, rec->gap.reason);
		p = put_sv(p, rec->gap.code);
		p = put_uv(p, rec->gap.offset + 1);
		p = put_uv(p, rec->gap.ip);
		p = put_str(p, rec->gap.message);
		break;
	case MTEV_SEGMENT:
		if (rec->segment.end < rec->segment.begin)
			return -MTEV_EINVAL;
		p = put_uv(p, rec->segment.tid);
		p = put_uv(p, rec->segment.index);
		p = put_uv(p, rec->segment.begin);
		p = put_uv(p, rec->segment.end - rec->segment.begin);
		p = put_uv(p, rec->segment.reason);
		break;
	case MTEV_SPAN:
		if (rec->span.end < rec->span.begin)
			return -MTEV_EINVAL;
		p = put_uv(p, rec->span.tid);
		p = put_uv(p, rec->span.depth);
		p = put_uv(p, rec->span.begin);
		p = put_uv(p, rec->span.end - rec->span.begin);
		p = put_uv(p, rec->span.func);
		p = put_uv(p, rec->span.callsite);
		p = put_uv(p, rec->span.flags);
		struct mtev_str def;
		if (rec->span.name_id && strtab_get(&w->st, rec->span.name_id, &def) &&
		    (!rec->span.name.len ||
		     (def.len == rec->span.name.len && !memcmp(def.p, rec->span.name.p, def.len)))) {
			*p++ = 0; /* empty name, then the reference */
			p = put_uv(p, rec->span.name_id);
		} else if (rec->span.name_id && !rec->span.name.len) {
			return -MTEV_EINVAL; /* a reference to nothing */
		} else {
			p = put_str(p, rec->span.name);
		}
		break;
	case MTEV_SYMBOL:
		p = put_uv(p, rec->symbol.addr);
		p = put_uv(p, rec->symbol.entry);
		p = put_uv(p, rec->symbol.nframes);
		for (uint32_t i = 0; i < rec->symbol.nframes; i++) {
			p = put_str(p, rec->symbol.frames[i].name);
			p = put_str(p, rec->symbol.frames[i].file);
			p = put_uv(p, rec->symbol.frames[i].line);
			p = put_uv(p, rec->symbol.frames[i].column);
		}
		break;
	}
	if ((size_t)(p - p0) > MTEV_MAX_PAYLOAD)
		return -MTEV_EINVAL;
	return p - p0;
}

static __attribute__((noinline)) long encode_rare(mtev_writer *w, const struct mtev_rec *rec)
{
	return encode_rec(w, rec);
}

/* mtev_write to a sink: what mtev_write refuses is refused, a span's name
 * as a reader gets it back. */
static __attribute__((noinline)) int sink_write(mtev_writer *w, const struct mtev_rec *rec)
{
	struct mtev_rec span;
	long e;
	switch (rec->kind) {
	case MTEV_BRANCH:
		if (rec->br.type >= MTEV_BR__COUNT)
			return -MTEV_EINVAL;
		break;
	case MTEV_WAYPOINT: break;
	case MTEV_KIND_RAW:
		if (raw_invalid(rec))
			return -MTEV_EINVAL;
		break;
	case MTEV_SPAN:
		if (rec->span.end < rec->span.begin)
			return -MTEV_EINVAL;
		span = *rec;
		if (rec->span.name_id) {
			struct mtev_str def;
			if (strtab_get(&w->st, rec->span.name_id, &def) &&
			    (!rec->span.name.len || (def.len == rec->span.name.len &&
						     !memcmp(def.p, rec->span.name.p, def.len))))
				span.span.name = def;
			else if (!rec->span.name.len)
				return -MTEV_EINVAL; /* a reference to nothing */
			else
				span.span.name_id = 0; /* written as its text */
		}
		rec = &span;
		break;
	default: /* rare kinds: encoded (and dropped) for the same checks */
		if ((e = encode_rare(w, rec)) < 0)
			return (int)e;
		break;
	}
	if ((e = w->sink(w->sink_ctx, rec)) < 0)
		w->err = (int)e; /* no longer W_SINK: every later call returns it */
	return (int)e;
}

#if defined(__GNUC__) && !defined(__clang__)
/* one function, as before the sink: GCC's split of its first test from the
 * rest cost 4-6 instructions a record (mt-segment: +1 % in all) */
__attribute__((noipa))
#endif
int mtev_write(mtev_writer *w, const struct mtev_rec *rec)
{
	if (w->err)
		return w->err == W_SINK ? sink_write(w, rec) : w->err;
	if (rec->kind == MTEV_BRANCH)
		return write_branch(w, rec);
	if (rec->kind == MTEV_WAYPOINT)
		return write_waypoint(w, rec);
	if (rec->kind == MTEV_KIND_RAW) {
		if (raw_invalid(rec))
			return -MTEV_EINVAL;
		return w_record(w, rec->raw.kind, rec->raw.data, rec->raw.len);
	}
	long n = encode_rec(w, rec);
	if (n < 0)
		return (int)n;
	return w_record(w, rec->kind, w->tmp, (size_t)n);
}
