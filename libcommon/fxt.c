#include "fxt.h"

#include "hmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Record types (header bits [0..3]). */
enum { REC_METADATA = 0, REC_INIT = 1, REC_STRING = 2, REC_THREAD = 3, REC_EVENT = 4, REC_KOBJ = 7 };
enum { KOBJ_PROCESS = 1, KOBJ_THREAD = 2 };

#define MAX_RECORD_WORDS 4095u
#define MAX_INLINE_LEN 4000u /* per inline string: keeps any record under 4095 words */
#ifndef BUF_SIZE /* the fuzz build's is smaller (mk/fuzz.mk) */
#define BUF_SIZE (256u * 1024)
#endif
#define BUF_ROOM (MAX_RECORD_WORDS * 8u) /* flush when less than one record fits */

/* ---- a table of reference slots with LRU replacement ---- */

/* Least recently used order: while the table has free slots, each slot only
 * records when it was last used (a counter), which is all a use costs; when
 * the table first fills up, the slots are sorted by that into a list (head =
 * most recent) that later uses maintain.  Both orders are the same, so the
 * slot evicted is the same as with a list kept from the start. */
struct slot {
	uint32_t hash; /* of the key (hash_bytes) */
	char *key;
	uint32_t keylen, keycap;
	uint32_t gen;	 /* bumped each time the slot is given a new value */
	uint64_t last;	 /* use counter at its last use; pinned while > the table's rec_start */
	uint16_t prev, next; /* LRU list (once listed): head = most recent */
};

struct slot_table {
	unsigned max;	 /* slots 1..max */
	unsigned used;	 /* slots handed out so far (they are never freed, only reused) */
	int listed;	 /* the LRU list is built (the table has been full) */
	uint64_t clock;	 /* uses so far */
	uint64_t rec_start; /* clock when the record being built began */
	struct slot *s;	 /* [cap]; s[0] is the list sentinel; grows to max + 1 */
	unsigned cap;
	struct hidx ix;	 /* key -> slot number */
	uint64_t evictions;
};

struct fxt_writer {
	fxt_sink_fn sink;
	void *ctx;
	uint8_t *buf;
	size_t len;
	uint64_t flushed; /* bytes handed to the sink */
	int err;	  /* sticky */
	struct slot_table strings, threads;
	struct fxt_ref_cache process_arg; /* the string "process" */
	struct fxt_stats st;
};

/* The slots and the index start small and grow with the slots handed out (a
 * trace with few names costs little); which slot a key gets does not depend
 * on their sizes. */
#define TABLE_CAP0 64u

static int table_init(struct slot_table *t, unsigned max)
{
	memset(t, 0, sizeof *t);
	t->max = max;
	t->cap = max + 1 < TABLE_CAP0 ? max + 1 : TABLE_CAP0;
	t->s = calloc(t->cap, sizeof *t->s);
	if (!t->s || hidx_reserve(&t->ix) < 0)
		return -FXT_ENOMEM;
	t->s[0].prev = t->s[0].next = 0;
	return 0;
}

static void table_fini(struct slot_table *t)
{
	if (t->s)
		for (unsigned i = 0; i <= t->used; i++)
			free(t->s[i].key);
	free(t->s);
	hidx_fini(&t->ix);
}

/* Room for slot t->used + 1: the slot array and an index at most half full. */
static int table_grow(struct slot_table *t)
{
	if (t->used + 1 >= t->cap) {
		unsigned nc = t->cap * 2 > t->max + 1 ? t->max + 1 : t->cap * 2;
		struct slot *ns = realloc(t->s, nc * sizeof *ns);
		if (!ns)
			return -1;
		memset(ns + t->cap, 0, (nc - t->cap) * sizeof *ns);
		t->s = ns;
		t->cap = nc;
	}
	return hidx_reserve(&t->ix);
}

static void lru_unlink(struct slot_table *t, unsigned i)
{
	t->s[t->s[i].prev].next = t->s[i].next;
	t->s[t->s[i].next].prev = t->s[i].prev;
}

static void lru_push_head(struct slot_table *t, unsigned i)
{
	t->s[i].prev = 0;
	t->s[i].next = t->s[0].next;
	t->s[t->s[0].next].prev = (uint16_t)i;
	t->s[0].next = (uint16_t)i;
}

static inline void touch(struct slot_table *t, unsigned i)
{
	t->s[i].last = ++t->clock;
	if (t->listed && t->s[0].next != i) {
		lru_unlink(t, i);
		lru_push_head(t, i);
	}
}

/* A new record begins: the slots it uses are pinned from now on. */
static inline void rec_begin(fxt_writer *w)
{
	w->strings.rec_start = w->strings.clock;
	w->threads.rec_start = w->threads.clock;
}

static int by_last_desc(const void *a, const void *b, void *ctx)
{
	const struct slot *s = ctx;
	uint64_t x = s[*(const uint16_t *)a].last, y = s[*(const uint16_t *)b].last;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* Links every slot into the LRU list by its last use (see struct slot). */
static int lru_build(struct slot_table *t)
{
	uint16_t *order = malloc(t->used * sizeof *order);
	if (!order)
		return -1;
	for (unsigned i = 0; i < t->used; i++)
		order[i] = (uint16_t)(i + 1);
	qsort_r(order, t->used, sizeof *order, by_last_desc, t->s);
	t->s[0].next = t->s[0].prev = 0;
	for (unsigned k = t->used; k-- > 0;)
		lru_push_head(t, order[k]);
	free(order);
	t->listed = 1;
	return 0;
}

struct key {
	const struct slot_table *t;
	const void *p;
	size_t len;
};

static int key_eq(const void *ctx, uint32_t i)
{
	const struct key *k = ctx;
	const struct slot *s = &k->t->s[i];
	return s->keylen == k->len && !memcmp(s->key, k->p, k->len);
}

/* The cell of the index where @key (hash @h) is or would go; *@i its slot
 * (0: not there). */
static inline uint32_t index_find(const struct slot_table *t, uint32_t h, const void *key,
				  size_t len, unsigned *i)
{
	struct key k = {t, key, len};
	uint32_t pos = 0, e = hidx_find(&t->ix, h, key_eq, &k, &pos);
	*i = e == HMAP_NONE ? 0 : e;
	return pos;
}

/* Finds or assigns the slot for @key.  *fresh = 1 when the slot was (re)assigned
 * and its registration record must be written.  Returns the slot, or 0 when
 * every slot is pinned by the current record. */
static unsigned table_get(struct slot_table *t, const void *key, size_t len, int *fresh)
{
	uint32_t h = (uint32_t)hash_bytes(key, len);
	unsigned i;
	uint32_t pos = index_find(t, h, key, len, &i);
	*fresh = 0;
	if (i) {
		touch(t, i);
		return i;
	}
	if (t->used < t->max) {
		if (table_grow(t) < 0)
			return 0; /* the caller fails the writer for good */
		pos = index_find(t, h, key, len, &i); /* the index may have grown */
		i = ++t->used;
	} else {
		if (!t->listed && lru_build(t) < 0)
			return 0; /* the caller fails the writer for good */
		i = t->s[0].prev; /* least recently used */
		if (t->s[i].last > t->rec_start)
			return 0; /* pinned: used by the record being built */
		struct slot *old = &t->s[i];
		unsigned was;
		hidx_del(&t->ix, index_find(t, old->hash, old->key, old->keylen, &was));
		lru_unlink(t, i);
		t->evictions++;
		pos = index_find(t, h, key, len, &was); /* the removal may have moved cells */
	}
	struct slot *s = &t->s[i];
	if (s->keycap < len) {
		uint32_t cap = len < 32 ? 32 : (uint32_t)len;
		char *k = realloc(s->key, cap);
		if (!k)
			return 0; /* the caller fails the writer for good */
		s->key = k;
		s->keycap = cap;
	}
	memcpy(s->key, key, len);
	s->keylen = (uint32_t)len;
	s->hash = h;
	s->gen++;
	s->last = ++t->clock;
	hidx_set(&t->ix, pos, h, i);
	if (t->listed)
		lru_push_head(t, i);
	*fresh = 1;
	return i;
}

/* ---- output ---- */

static int fail(fxt_writer *w, int err)
{
	if (!w->err)
		w->err = err;
	return -w->err;
}

int fxt_flush(fxt_writer *w)
{
	if (w->err)
		return -w->err;
	if (w->len && w->sink(w->ctx, w->buf, w->len) < 0)
		return fail(w, FXT_EIO);
	w->flushed += w->len;
	w->len = 0;
	return 0;
}

/* Makes room for a whole record (at most MAX_RECORD_WORDS). */
static int room(fxt_writer *w)
{
	if (w->err)
		return -w->err;
	if (BUF_SIZE - w->len < BUF_ROOM)
		return fxt_flush(w);
	return 0;
}

static inline void put64(fxt_writer *w, uint64_t v)
{
	uint8_t *p = w->buf + w->len;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(p, &v, 8);
#else
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
#endif
	w->len += 8;
}

/* The string's bytes zero-padded to a multiple of 8. */
static inline void put_stream(fxt_writer *w, const char *p, size_t len)
{
	if (!len)
		return;
	memcpy(w->buf + w->len, p, len);
	size_t pad = (8 - (len & 7)) & 7;
	memset(w->buf + w->len + len, 0, pad);
	w->len += len + pad;
}

static inline size_t words(size_t len)
{
	return (len + 7) / 8;
}

static size_t clip_utf8(const char *p, size_t len, size_t max)
{
	if (len <= max)
		return len;
	len = max;
	while (len && ((unsigned char)p[len] & 0xc0) == 0x80)
		len--;
	return len;
}

fxt_writer *fxt_writer_alloc(fxt_sink_fn sink, void *ctx)
{
	fxt_writer *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->sink = sink;
	w->ctx = ctx;
	w->buf = malloc(BUF_SIZE);
	if (!w->buf || table_init(&w->strings, FXT_MAX_STRING_SLOTS) < 0 ||
	    table_init(&w->threads, FXT_MAX_THREAD_SLOTS) < 0) {
		fxt_writer_free(w);
		return NULL;
	}
	return w;
}

void fxt_writer_free(fxt_writer *w)
{
	if (!w)
		return;
	table_fini(&w->strings);
	table_fini(&w->threads);
	free(w->buf);
	free(w);
}

int fxt_begin(fxt_writer *w, uint64_t ticks_per_second)
{
	int r = room(w);
	if (r < 0)
		return r;
	put64(w, FXT_MAGIC_WORD);
	put64(w, REC_INIT | 2u << 4);
	put64(w, ticks_per_second);
	return 0;
}

/* A resolved string: its 16-bit reference, and for an inline one the bytes
 * to write in the record. */
struct rstr {
	uint16_t ref;
	const char *p;
	size_t len; /* inline bytes, 0 if interned/empty */
};

/* A cached reference still valid: the slot holds the value it was given for. */
static inline int cache_valid(const struct slot_table *t, const struct fxt_ref_cache *c)
{
	return c && c->slot && c->slot <= t->used && t->s[c->slot].gen == c->gen;
}

static int resolve_slow(fxt_writer *w, const struct fxt_str *s, struct rstr *out)
{
	if (s->inline_) {
		out->p = s->p;
		out->len = clip_utf8(s->p, s->len, MAX_INLINE_LEN);
		out->ref = out->len ? (uint16_t)(0x8000u | out->len) : 0;
		return 0;
	}
	struct slot_table *t = &w->strings;
	struct fxt_ref_cache *c = s->cache;
	size_t len = clip_utf8(s->p, s->len, FXT_MAX_STRING_LEN);
	int fresh;
	unsigned i = table_get(t, s->p, len, &fresh);
	if (!i)
		return fail(w, FXT_ENOMEM);
	if (fresh) {
		int r = room(w);
		if (r < 0)
			return r;
		put64(w, REC_STRING | (uint64_t)(1 + words(len)) << 4 | (uint64_t)i << 16 |
				 (uint64_t)len << 32);
		put_stream(w, s->p, len);
		w->st.string_records++;
	}
	if (c) {
		c->slot = (uint16_t)i;
		c->gen = t->s[i].gen;
	}
	out->ref = (uint16_t)i;
	return 0;
}

/* The common case inline: empty, or interned and still cached. */
static inline int resolve(fxt_writer *w, const struct fxt_str *s, struct rstr *out)
{
	out->ref = 0;
	out->p = NULL;
	out->len = 0;
	if (!s->len || !s->p)
		return 0;
	if (!s->inline_ && cache_valid(&w->strings, s->cache)) {
		touch(&w->strings, s->cache->slot);
		out->ref = s->cache->slot;
		return 0;
	}
	return resolve_slow(w, s, out);
}

static inline int resolve_thread(fxt_writer *w, uint64_t pid, uint64_t tid, struct fxt_ref_cache *c,
			  uint8_t *ref)
{
	struct slot_table *t = &w->threads;
	if (cache_valid(t, c)) {
		touch(t, c->slot);
		*ref = (uint8_t)c->slot;
		return 0;
	}
	uint64_t key[2] = {pid, tid};
	int fresh;
	unsigned i = table_get(t, key, sizeof key, &fresh);
	if (!i)
		return fail(w, FXT_ENOMEM);
	if (fresh) {
		int r = room(w);
		if (r < 0)
			return r;
		put64(w, REC_THREAD | 3u << 4 | (uint64_t)i << 16);
		put64(w, pid);
		put64(w, tid);
		w->st.thread_records++;
	}
	if (c) {
		c->slot = (uint16_t)i;
		c->gen = t->s[i].gen;
	}
	*ref = (uint8_t)i;
	return 0;
}

int fxt_process(fxt_writer *w, uint64_t pid, struct fxt_str name)
{
	if (w->err)
		return -w->err;
	rec_begin(w);
	struct rstr n;
	int r = resolve(w, &name, &n);
	if (r < 0 || (r = room(w)) < 0)
		return r;
	size_t size = 2 + words(n.len);
	put64(w, REC_KOBJ | (uint64_t)size << 4 | (uint64_t)KOBJ_PROCESS << 16 |
			 (uint64_t)n.ref << 24);
	put64(w, pid);
	put_stream(w, n.p, n.len);
	return 0;
}

int fxt_thread_name(fxt_writer *w, uint64_t pid, uint64_t tid, struct fxt_str name)
{
	if (w->err)
		return -w->err;
	rec_begin(w);
	struct rstr n, an;
	struct fxt_str arg = {"process", 7, &w->process_arg, 0};
	int r = resolve(w, &name, &n);
	if (r < 0 || (r = resolve(w, &arg, &an)) < 0 || (r = room(w)) < 0)
		return r;
	size_t size = 2 + words(n.len) + 2;
	put64(w, REC_KOBJ | (uint64_t)size << 4 | (uint64_t)KOBJ_THREAD << 16 |
			 (uint64_t)n.ref << 24 | (uint64_t)1 << 40);
	put64(w, tid);
	put_stream(w, n.p, n.len);
	put64(w, FXT_ARG_KOID | 2u << 4 | (uint64_t)an.ref << 16);
	put64(w, pid);
	return 0;
}

static size_t arg_words(const struct fxt_arg *a, const struct rstr *name, const struct rstr *val)
{
	size_t n = 1 + words(name->len);
	switch (a->type) {
	case FXT_ARG_INT64:
	case FXT_ARG_UINT64:
	case FXT_ARG_DOUBLE:
	case FXT_ARG_POINTER:
	case FXT_ARG_KOID:
		n += 1;
		break;
	case FXT_ARG_STRING:
		n += words(val->len);
		break;
	default:
		break;
	}
	return n;
}

/* The reference of @s when it needs no work beyond a touch: 0 for an empty
 * string, the cached slot of an interned one; -1 otherwise.  Until the table
 * has been full no slot was ever given a new value, so a filled cache is
 * valid. */
static inline int quick_ref(const struct slot_table *t, const struct fxt_str *s)
{
	if (!s->len || !s->p)
		return 0;
	const struct fxt_ref_cache *c = s->cache;
	if (s->inline_ || !c || !c->slot || c->slot > t->used)
		return -1;
	if (t->listed && t->s[c->slot].gen != c->gen)
		return -1;
	return c->slot;
}

#define QUICK_ARGS 4

/* Uses string slot @i for the record being built, if @i is not 0. */
#define USE(i)                                                                                     \
	do {                                                                                       \
		if (i)                                                                             \
			touch(st, (unsigned)(i));                                                  \
	} while (0)

/* fxt_event when every string is empty or interned and cached, the thread is
 * cached, and the arguments are few: the same bytes and the same table
 * updates, without the general machinery.  The words are put in the buffer
 * as they are known and only kept when the whole record could be done; the
 * slots are used as they come.  Returns 1 when it did not apply: the slots
 * it used are then used again, in the same order, by the general path, which
 * leaves the same LRU order as using them once. */
static inline int event_quick(fxt_writer *w, unsigned type, struct fxt_ref_cache *thread_cache,
			      const struct fxt_str *category, const struct fxt_str *name, uint64_t ts,
			      const struct fxt_arg *const *args, unsigned nargs, uint64_t extra)
{
	struct slot_table *st = &w->strings, *tt = &w->threads;
	int cat, nm;
	if (nargs > QUICK_ARGS || !thread_cache || !thread_cache->slot ||
	    thread_cache->slot > tt->used ||
	    (tt->listed && tt->s[thread_cache->slot].gen != thread_cache->gen) ||
	    (cat = quick_ref(st, category)) < 0 || (nm = quick_ref(st, name)) < 0)
		return 1;
	int r = room(w);
	if (r < 0)
		return r;
	rec_begin(w);
	unsigned th = thread_cache->slot;
	touch(tt, th);
	USE(cat);
	USE(nm);
	uint8_t *out = w->buf + w->len;
	unsigned nv = 2;
#define PUT(x)                                                                                     \
	do {                                                                                       \
		uint64_t x_ = (x);                                                                 \
		memcpy(out + 8 * nv++, &x_, 8);                                                    \
	} while (0)
	for (unsigned i = 0; i < nargs; i++) {
		const struct fxt_arg *a = args[i];
		int an = quick_ref(st, &a->name);
		if (an < 0)
			return 1;
		USE(an);
		uint64_t hdr = a->type | (uint64_t)an << 16;
		switch (a->type) {
		case FXT_ARG_STRING: {
			int av = quick_ref(st, &a->s);
			if (av < 0)
				return 1;
			USE(av);
			PUT(hdr | 1u << 4 | (uint64_t)av << 32);
			break;
		}
		case FXT_ARG_BOOL:
			PUT(hdr | 1u << 4 | (uint64_t)(a->b != 0) << 32);
			break;
		case FXT_ARG_INT32:
			PUT(hdr | 1u << 4 | (uint64_t)(uint32_t)(int32_t)a->i << 32);
			break;
		case FXT_ARG_UINT32:
			PUT(hdr | 1u << 4 | (uint64_t)(uint32_t)a->u << 32);
			break;
		case FXT_ARG_INT64:
		case FXT_ARG_UINT64:
		case FXT_ARG_POINTER:
		case FXT_ARG_KOID:
			PUT(hdr | 2u << 4);
			PUT(a->u);
			break;
		case FXT_ARG_DOUBLE: {
			uint64_t d;
			memcpy(&d, &a->d, 8);
			PUT(hdr | 2u << 4);
			PUT(d);
			break;
		}
		default:
			PUT(hdr | 1u << 4);
			break;
		}
	}
	if (type == FXT_EV_COMPLETE || type == FXT_EV_COUNTER)
		PUT(extra);
#undef PUT
	uint64_t h = REC_EVENT | (uint64_t)nv << 4 | (uint64_t)type << 16 | (uint64_t)nargs << 20 |
		     (uint64_t)th << 24 | (uint64_t)cat << 32 | (uint64_t)nm << 48;
	memcpy(out, &h, 8);
	memcpy(out + 8, &ts, 8);
	w->len += nv * 8;
	w->st.events++;
	return 0;
}

/* The general case: strings interned or inline, registered as needed. */
static __attribute__((noinline)) int
event_slow(fxt_writer *w, unsigned type, uint64_t pid, uint64_t tid,
	   struct fxt_ref_cache *thread_cache, const struct fxt_str *category,
	   const struct fxt_str *name, uint64_t ts, const struct fxt_arg *const *args,
	   unsigned nargs, uint64_t extra)
{
	rec_begin(w);
	uint8_t th = 0;
	struct rstr cat, nm, an[FXT_MAX_ARGS], av[FXT_MAX_ARGS];
	int r = resolve_thread(w, pid, tid, thread_cache, &th);
	if (r < 0 || (r = resolve(w, category, &cat)) < 0 || (r = resolve(w, name, &nm)) < 0)
		return r;
	size_t size = 2 + words(cat.len) + words(nm.len);
	for (unsigned i = 0; i < nargs; i++) {
		static const struct fxt_str none;
		if ((r = resolve(w, &args[i]->name, &an[i])) < 0 ||
		    (r = resolve(w, args[i]->type == FXT_ARG_STRING ? &args[i]->s : &none,
				 &av[i])) < 0)
			return r;
		size += arg_words(args[i], &an[i], &av[i]);
	}
	if (type == FXT_EV_COMPLETE || type == FXT_EV_COUNTER)
		size++;
	if (size > MAX_RECORD_WORDS)
		return -FXT_EINVAL;
	if ((r = room(w)) < 0)
		return r;
	put64(w, REC_EVENT | (uint64_t)size << 4 | (uint64_t)type << 16 | (uint64_t)nargs << 20 |
			 (uint64_t)th << 24 | (uint64_t)cat.ref << 32 | (uint64_t)nm.ref << 48);
	put64(w, ts);
	put_stream(w, cat.p, cat.len);
	put_stream(w, nm.p, nm.len);
	for (unsigned i = 0; i < nargs; i++) {
		const struct fxt_arg *a = args[i];
		uint64_t hdr = a->type | (uint64_t)arg_words(a, &an[i], &av[i]) << 4 |
			       (uint64_t)an[i].ref << 16;
		switch (a->type) {
		case FXT_ARG_INT32:
			hdr |= (uint64_t)(uint32_t)(int32_t)a->i << 32;
			break;
		case FXT_ARG_UINT32:
			hdr |= (uint64_t)(uint32_t)a->u << 32;
			break;
		case FXT_ARG_STRING:
			hdr |= (uint64_t)av[i].ref << 32;
			break;
		case FXT_ARG_BOOL:
			hdr |= (uint64_t)(a->b != 0) << 32;
			break;
		default:
			break;
		}
		put64(w, hdr);
		put_stream(w, an[i].p, an[i].len);
		switch (a->type) {
		case FXT_ARG_INT64:
		case FXT_ARG_UINT64:
		case FXT_ARG_POINTER:
		case FXT_ARG_KOID:
			put64(w, a->u);
			break;
		case FXT_ARG_DOUBLE: {
			uint64_t v;
			memcpy(&v, &a->d, 8);
			put64(w, v);
			break;
		}
		case FXT_ARG_STRING:
			put_stream(w, av[i].p, av[i].len);
			break;
		default:
			break;
		}
	}
	if (type == FXT_EV_COMPLETE || type == FXT_EV_COUNTER)
		put64(w, extra);
	w->st.events++;
	return 0;
}

int fxt_eventp(fxt_writer *w, unsigned type, uint64_t pid, uint64_t tid,
	       struct fxt_ref_cache *thread_cache, const struct fxt_str *category,
	       const struct fxt_str *name, uint64_t ts, const struct fxt_arg *const *args,
	       unsigned nargs, uint64_t extra)
{
	static const struct fxt_str none;
	if (w->err)
		return -w->err;
	if (nargs > FXT_MAX_ARGS || type > FXT_EV_COMPLETE)
		return -FXT_EINVAL;
	if (!category)
		category = &none;
	if (!name)
		name = &none;
	int q = event_quick(w, type, thread_cache, category, name, ts, args, nargs, extra);
	if (q <= 0)
		return q;
	return event_slow(w, type, pid, tid, thread_cache, category, name, ts, args, nargs, extra);
}

/* The slot a string used in the record just written, or -1 when it is not
 * known from its cache (inline, no cache). */
static int memo_ref(const struct slot_table *t, const struct fxt_str *s)
{
	if (!s || !s->len || !s->p)
		return 0;
	if (s->inline_ || !s->cache || !cache_valid(t, s->cache))
		return -1;
	return s->cache->slot;
}

int fxt_eventp_memo(fxt_writer *w, struct fxt_memo *m, unsigned type, uint64_t pid,
		    uint64_t tid, struct fxt_ref_cache *thread_cache,
		    const struct fxt_str *category, const struct fxt_str *name, uint64_t ts,
		    const struct fxt_arg *const *args, unsigned nargs, uint64_t extra)
{
	m->epoch = 0;
	int r = fxt_eventp(w, type, pid, tid, thread_cache, category, name, ts, args, nargs, extra);
	if (r < 0 || nargs > FXT_MEMO_ARGS)
		return r;
	const struct slot_table *st = &w->strings;
	int cat = memo_ref(st, category), nm = memo_ref(st, name);
	if (cat < 0 || nm < 0)
		return r;
	unsigned nu = 0, nw = 0;
	if (cat)
		m->use[nu++] = (uint16_t)cat;
	if (nm)
		m->use[nu++] = (uint16_t)nm;
	for (unsigned i = 0; i < nargs; i++) {
		const struct fxt_arg *a = args[i];
		int an = memo_ref(st, &a->name), av = 0;
		if (an < 0)
			return r;
		if (an)
			m->use[nu++] = (uint16_t)an;
		uint64_t hdr = a->type | (uint64_t)an << 16;
		switch (a->type) {
		case FXT_ARG_STRING:
			if ((av = memo_ref(st, &a->s)) < 0)
				return r;
			if (av)
				m->use[nu++] = (uint16_t)av;
			m->words[nw++] = hdr | 1u << 4 | (uint64_t)av << 32;
			break;
		case FXT_ARG_BOOL:
			m->words[nw++] = hdr | 1u << 4 | (uint64_t)(a->b != 0) << 32;
			break;
		case FXT_ARG_INT32:
			m->words[nw++] = hdr | 1u << 4 | (uint64_t)(uint32_t)(int32_t)a->i << 32;
			break;
		case FXT_ARG_UINT32:
			m->words[nw++] = hdr | 1u << 4 | (uint64_t)(uint32_t)a->u << 32;
			break;
		case FXT_ARG_INT64:
		case FXT_ARG_UINT64:
		case FXT_ARG_POINTER:
		case FXT_ARG_KOID:
			m->words[nw++] = hdr | 2u << 4;
			m->words[nw++] = a->u;
			break;
		case FXT_ARG_DOUBLE:
			m->words[nw++] = hdr | 2u << 4;
			memcpy(&m->words[nw++], &a->d, 8);
			break;
		default:
			m->words[nw++] = hdr | 1u << 4;
			break;
		}
	}
	m->cat = (uint16_t)cat;
	m->name = (uint16_t)nm;
	m->nuse = (uint8_t)nu;
	m->nargs = (uint8_t)nargs;
	m->nwords = (uint8_t)nw;
	m->epoch = st->evictions + 1;
	return r;
}

int fxt_event_memo(fxt_writer *w, const struct fxt_memo *m, unsigned type,
		   struct fxt_ref_cache *thread_cache, uint64_t ts, uint64_t extra)
{
	struct slot_table *st = &w->strings, *tt = &w->threads;
	if (w->err)
		return -w->err;
	if (m->epoch != st->evictions + 1 || type > FXT_EV_COMPLETE || !thread_cache ||
	    !thread_cache->slot || thread_cache->slot > tt->used ||
	    (tt->listed && tt->s[thread_cache->slot].gen != thread_cache->gen))
		return 1;
	int r = room(w);
	if (r < 0)
		return r;
	rec_begin(w);
	unsigned th = thread_cache->slot;
	touch(tt, th);
	for (unsigned k = 0; k < m->nuse; k++)
		touch(st, m->use[k]);
	unsigned nv = 2 + m->nwords;
	uint8_t *out = w->buf + w->len;
	memcpy(out + 16, m->words, 8 * sizeof *m->words); /* room() left space for any record */
	if (type == FXT_EV_COMPLETE || type == FXT_EV_COUNTER) {
		memcpy(out + 8 * nv, &extra, 8);
		nv++;
	}
	uint64_t h = REC_EVENT | (uint64_t)nv << 4 | (uint64_t)type << 16 |
		     (uint64_t)m->nargs << 20 | (uint64_t)th << 24 | (uint64_t)m->cat << 32 |
		     (uint64_t)m->name << 48;
	memcpy(out, &h, 8);
	memcpy(out + 8, &ts, 8);
	w->len += nv * 8;
	w->st.events++;
	return 0;
}

int fxt_event(fxt_writer *w, unsigned type, uint64_t pid, uint64_t tid,
	      struct fxt_ref_cache *thread_cache, struct fxt_str category, struct fxt_str name,
	      uint64_t ts, const struct fxt_arg *args, unsigned nargs, uint64_t extra)
{
	const struct fxt_arg *argp[FXT_MAX_ARGS];
	if (nargs > FXT_MAX_ARGS)
		return w->err ? -w->err : -FXT_EINVAL;
	for (unsigned i = 0; i < nargs; i++)
		argp[i] = &args[i];
	return fxt_eventp(w, type, pid, tid, thread_cache, &category, &name, ts, argp, nargs,
			  extra);
}

void fxt_writer_stats(const fxt_writer *w, struct fxt_stats *st)
{
	*st = w->st;
	st->string_evictions = w->strings.evictions;
	st->thread_evictions = w->threads.evictions;
	st->bytes = w->flushed + w->len;
}
