#include "symbolize.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elfinfo.h"
#include "imgfind.h"
#include "io.h"
#include "llvmsym.h"
#include "mtev.h"
#include "rustv0.h"

#define NONE UINT32_MAX
/* Window size: addresses are resolved once per window (one symbolizer
 * batch); its spans take a slot only when processed (span_make), and what
 * settled is written every CHUNK items, so its size does not change what is
 * held. */
#define WINDOW (1u << 16)
#define UNIT_MULTI (UINT32_MAX - 1)

/* snprintf that truncates silently (names and messages have no hard limit). */
static void sfmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sfmt(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, cap, fmt, ap);
	va_end(ap);
}

/* ---- an arena that never moves what it handed out ---- */
struct achunk {
	struct achunk *next;
	size_t used, cap;
	char data[];
};
struct arena {
	struct achunk *head;
};

static void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	if (!a->head || a->head->cap - a->head->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		struct achunk *c = malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
	}
	void *p = a->head->data + a->head->used;
	a->head->used += n;
	return p;
}

static char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	if (p) {
		if (n)
			memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

static void arena_fini(struct arena *a)
{
	while (a->head) {
		struct achunk *n = a->head->next;
		free(a->head);
		a->head = n;
	}
}

/* ---- a hash map from a pair of u64 to a u32 ---- */
struct hslot {
	uint64_t a, b;
	uint32_t v; /* value + 1; 0 = empty */
};
struct hmap {
	struct hslot *s; /* keys and value together: one cache line per probe */
	size_t cap, n;
};

static inline size_t hslot(uint64_t a, uint64_t b, size_t mask)
{
	uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
	h ^= h >> 29;
	return (size_t)h & mask;
}

static int hmap_grow(struct hmap *m)
{
	size_t nc = m->cap ? m->cap * 2 : 1024;
	struct hslot *ns = calloc(nc, sizeof *ns);
	if (!ns)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->s[i].v)
			continue;
		size_t j = hslot(m->s[i].a, m->s[i].b, nc - 1);
		while (ns[j].v)
			j = (j + 1) & (nc - 1);
		ns[j] = m->s[i];
	}
	free(m->s);
	m->s = ns;
	m->cap = nc;
	return 0;
}

/* The value for (a, b), or NONE. */
static uint32_t hmap_get(const struct hmap *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return NONE;
	for (size_t j = hslot(a, b, m->cap - 1); m->s[j].v; j = (j + 1) & (m->cap - 1))
		if (m->s[j].a == a && m->s[j].b == b)
			return m->s[j].v - 1;
	return NONE;
}

/* Inserts (a, b) -> val unless present.  Returns the stored value, or NONE on
 * allocation failure. */
static uint32_t hmap_put(struct hmap *m, uint64_t a, uint64_t b, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap && hmap_grow(m) < 0)
		return NONE;
	size_t j = hslot(a, b, m->cap - 1);
	for (; m->s[j].v; j = (j + 1) & (m->cap - 1))
		if (m->s[j].a == a && m->s[j].b == b)
			return m->s[j].v - 1;
	m->s[j] = (struct hslot){a, b, val + 1};
	m->n++;
	return val;
}

static void hmap_fini(struct hmap *m)
{
	free(m->s);
	memset(m, 0, sizeof *m);
}

/* ---- wants: (thread, runtime address) -> want index ----
 * The per-waypoint lookup: one multiply, one 16-byte slot per probe. */
struct wslot {
	uint64_t addr;
	uint32_t tid;
	uint32_t w1; /* want + 1; 0 = empty (in the memo: the want, NONE = empty) */
};
#define WMEMO 16384
struct wtab {
	struct wslot *s;
	size_t cap, n; /* cap a power of two */
	unsigned shift; /* 64 - log2(cap) */
};

static inline size_t wtab_slot(const struct wtab *t, uint32_t tid, uint64_t addr)
{
	return (size_t)(((addr ^ (uint64_t)tid << 40) * 0x9E3779B97F4A7C15ull) >> t->shift);
}

/* The want of (tid, addr), or NONE.  The table is never empty (wtab_init). */
static inline uint32_t wtab_get(const struct wtab *t, uint32_t tid, uint64_t addr)
{
	for (size_t j = wtab_slot(t, tid, addr);; j = (j + 1) & (t->cap - 1)) {
		const struct wslot *e = &t->s[j];
		if (!e->w1)
			return NONE;
		if (e->addr == addr && e->tid == tid)
			return e->w1 - 1;
	}
}

static int wtab_init(struct wtab *t)
{
	t->cap = 4096;
	t->n = 0;
	t->shift = 64u - 12u;
	t->s = calloc(t->cap, sizeof *t->s);
	return t->s ? 0 : -1;
}

/* Adds (tid, addr) -> w (absent).  0 or -1. */
static int wtab_add(struct wtab *t, uint32_t tid, uint64_t addr, uint32_t w)
{
	if ((t->n + 1) * 2 > t->cap) {
		struct wtab nt = {NULL, t->cap ? t->cap * 2 : 4096, 0, 0};
		nt.shift = 64u - (unsigned)__builtin_ctzll(nt.cap);
		nt.s = calloc(nt.cap, sizeof *nt.s);
		if (!nt.s)
			return -1;
		for (size_t i = 0; i < t->cap; i++) {
			const struct wslot *e = &t->s[i];
			if (!e->w1)
				continue;
			size_t j = wtab_slot(&nt, e->tid, e->addr);
			while (nt.s[j].w1)
				j = (j + 1) & (nt.cap - 1);
			nt.s[j] = *e;
		}
		nt.n = t->n;
		free(t->s);
		*t = nt;
	}
	size_t j = wtab_slot(t, tid, addr);
	while (t->s[j].w1)
		j = (j + 1) & (t->cap - 1);
	t->s[j] = (struct wslot){addr, tid, w + 1};
	t->n++;
	return 0;
}

/* ---- growable arrays ---- */
#define VEC_PUSH(arr, n, cap, ...)                                                                 \
	((n) < (cap) || vec_grow((void **)&(arr), &(cap), sizeof *(arr)) == 0                      \
		 ? ((arr)[(n)++] = (__VA_ARGS__), 0)                                               \
		 : -1)

static int vec_grow(void **arr, size_t *cap, size_t elem)
{
	size_t nc = *cap ? *cap * 2 : 64;
	void *p = realloc(*arr, nc * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = nc;
	return 0;
}

/* Large arrays (per event): anonymous mappings grown with mremap, which
 * neither copies nor faults the pages in again, with transparent huge pages
 * where the kernel allows them (page faults dominate otherwise). */
static int bvec_grow(void **arr, size_t *cap, size_t elem)
{
	size_t nc = *cap ? *cap * 2 : ((size_t)2 << 20) / elem;
	size_t ob = *cap * elem, nb = nc * elem;
	void *p = *arr ? mremap(*arr, ob, nb, MREMAP_MAYMOVE)
		       : mmap(NULL, nb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	madvise(p, nb, MADV_HUGEPAGE);
	*arr = p;
	*cap = nc;
	return 0;
}

static void bvec_free(void *p, size_t cap, size_t elem)
{
	if (p)
		munmap(p, cap * elem);
}

#define BVEC_PUSH(arr, n, cap, ...)                                                                \
	((n) < (cap) || bvec_grow((void **)&(arr), &(cap), sizeof *(arr)) == 0                     \
		 ? ((arr)[(n)++] = (__VA_ARGS__), 0)                                               \
		 : -1)

/* ---- the state of one run ---- */
struct sframe {
	const char *name, *file; /* in the arena */
	uint32_t line, column;
	uint32_t name_len, file_len;
	uint32_t sid; /* string id of the name once written, else 0 */
};

enum res_kind {
	RES_PENDING = 0,
	RES_DEBUG,    /* llvm-symbolizer with source lines */
	RES_SYMTAB,   /* llvm-symbolizer from the symbol table (no debug info) */
	RES_ELF,      /* our ELF symbol fallback */
	RES_PERFMAP,  /* /tmp/perf-PID.map */
	RES_UNKNOWN,  /* [unknown @ ...] */
};

struct result {
	uint32_t bin; /* NONE when not from a binary */
	uint64_t vaddr;
	uint64_t entry_vaddr; /* physical entry (file vaddr, or runtime for perf maps); 0 unknown */
	uint32_t f0, nf;      /* frames[f0 .. f0+nf), innermost first */
	uint8_t kind;
};

struct want { /* one unique (thread, runtime address) */
	uint64_t addr;
	uint64_t entry_rt; /* runtime entry of the physical function, 0 unknown */
	uint32_t tid;
	uint32_t ri;  /* result */
	uint32_t lev; /* its inline levels (0 without a result) */
	uint32_t pfi; /* its physical frame (the last of its result's), or NONE */
};

struct cache_new {
	uint64_t vaddr;
	const char *line;
};

struct bin {
	char *path;
	uint8_t bid[20];
	uint8_t bidlen;
	char bidhex[41];
	int state; /* 0 not looked for, 1 found, -1 missing */
	char *file; /* the code */
	char *sym;  /* what llvm-symbolizer reads: the debug file, else file */
	struct elfinfo ei;
	int no_debug_noted, stripped_warned;
	int syms_loaded; /* ei has the symbol table (loaded on first need) */
	size_t n_debug, n_symtab; /* answers with and without source lines */
	/* cache */
	int cache_loaded;
	uint8_t *cbuf;
	size_t cbuf_len;
	struct hmap cidx; /* (vaddr, 0) -> offset of the JSON in cbuf */
	struct cache_new *cnew;
	size_t ncnew, capcnew;
};

struct map {
	uint32_t pid;
	uint64_t time, start, len, pgoff;
	uint32_t bin; /* NONE: not file-backed */
	const char *path;
};

struct perfmap_ent {
	uint64_t start, size;
	const char *name;
};
struct perfmap {
	uint32_t pid;
	int loaded;
	struct perfmap_ent *e;
	size_t n;
};

/* ---- the unit: the spans of one segment (or root subtree) being built ----
 *
 * The unit is written as it settles, not when it ends: per thread, records
 * come in time order (formats/mtev-semantics.md, Symbols), so once a thread's
 * stream has passed time T (its "now"), no later waypoint can fall in a span
 * that ended before T, no later span or inline frame can begin before T, and
 * a child that began before T has its attach point.  Every CHUNK records the
 * current root's tree is written in pre-order as far as that allows
 * (emit_round), and what was written and can get no more children is freed:
 * spans and inline frames live in slot arrays with free lists, so memory is
 * bounded by what is still unsettled (the open frames of each thread, plus
 * up to CHUNK records), not by the unit. */

/* A node of the output tree: a function span (embedded in its span, id = the
 * span's slot) or an inline frame (c->inodes, id = INL | slot).  Its children
 * that are final (attached spans, closed inline frames) and not yet written
 * are linked from first_child in output order (node_less). */
struct node {
	uint64_t begin, end; /* a function span's are its own (set when read) */
	uint32_t first_child, last_child, next_sib, parent;
	uint32_t depth; /* output depth (set when written) */
};

struct inode { /* an inline frame */
	struct node n;
	uint32_t si;	 /* the physical span it belongs to */
	uint32_t fi;	 /* the frame it names; when free: next free slot */
	uint32_t iflags; /* its span flags */
	uint32_t closed : 1; /* its end is final */
	uint32_t refs : 31;  /* unattached children with it as candidate (cand_set) */
	uint64_t seq;	 /* creation order in the unit (ties in output order) */
};

#define INL 0x80000000u

/* span state bits (struct span.st) */
enum {
	SP_SEEN = 1,	  /* a waypoint was given to it */
	SP_ON_STACK = 2,  /* its thread's stack holds it: children may still come */
	SP_ATTACHED = 4,  /* its place under its parent is final */
	SP_CLOSED = 8,	  /* no waypoint can reach it any more; inline frames final */
};

/* 128 bytes, two cache lines; the first holds what a waypoint needs. */
struct span {
	/* line 0 */
	struct node nd;
	uint64_t func;
	uint32_t grp_next; /* next span of the same (tid, depth), or NONE */
	uint32_t nopen;	   /* open inline levels */
	uint32_t pend;	   /* first child still looking for its attach point */
	uint32_t st;	   /* SP_* */
	/* line 1 */
	uint64_t seq;	   /* input order in the unit */
	uint32_t tid, depth, flags;
	uint32_t nm;	   /* input name: index + 1 in c->inames, or 0 */
	uint32_t func_w;   /* want of func, or NONE */
	uint32_t cs_w;	   /* want of the call site (its address), or NONE (none) */
	uint32_t inner;	   /* innermost open node (its own when no inline frame is open) */
	uint32_t last_ri;  /* the result whose inline chain is open, or NONE */
	uint32_t parent;   /* parent span, or NONE (a root) */
	/* as a child: where it hangs (nodes of the parent), see proc_wp */
	uint32_t cand_any, cand_match, pend_next;
	uint32_t nun;	   /* children read and not yet attached */
	uint32_t att_next; /* next in its thread's attach queue; when free: next free slot */
};
_Static_assert(sizeof(struct span) == 128, "struct span: two cache lines");

/* The window: spans and waypoints in input order, kept until the addresses
 * they carry are resolved (one batch per window) and then processed. */
struct witem {
	uint64_t time;
	uint32_t a; /* waypoint: its want (or NONE); span: its pspan */
	uint32_t g; /* waypoint: its (tid, depth) group; span: NONE */
};

struct pspan { /* a span read, in the window (see span_make) */
	uint64_t begin, end, func, seq;
	uint32_t tid, depth, flags, nm, func_w, cs_w;
};

struct grp { /* the spans of one (tid, depth), in begin order */
	uint32_t cur;  /* the first one a later waypoint can still fall in */
	uint32_t tail; /* the last one */
	uint64_t cur_begin, cur_end; /* cur's (0, 0 when cur is NONE) */
	uint32_t thr;		     /* its thread (c->thrs) */
};

struct thr {
	uint32_t tid;
	/* the open spans by depth, the deepest last; only the depths held, so
	 * memory follows the spans, never the depth numbers read */
	struct stk {
		uint32_t depth, si;
	} *stack;
	size_t n, cap;
	uint64_t now; /* latest time of its records (span begins, waypoints) */
	uint32_t att_head, att_tail; /* children not yet attached, in input order */
};

/* Span names are written once, as string records, and spans refer to them by
 * id (formats/mtev.md, names by reference).  Our ids start here; input string
 * records in this range are dropped (a previous run's names, rewritten). */
#define SID_BASE 0x80000000u

struct nent {
	uint64_t h;
	const char *p; /* in the arena or the frames */
	uint32_t len, id;
};

struct ctx {
	const struct symz_opts *o;
	struct symz_stats *st;
	struct arena ar;
	struct hmap tid2pid;
	struct map *maps;
	size_t nmaps, capmaps;
	struct bin *bins;
	size_t nbins, capbins;
	struct want *wants;
	size_t nwants, capwants;
	struct wtab want_idx;
	struct wslot *wmemo; /* [WMEMO], see want_get */
	struct result *res;
	size_t nres, capres;
	struct hmap res_idx;
	struct sframe *frames;
	size_t nframes, capframes;
	struct perfmap *pmaps;
	size_t npmaps, cappmaps;
	uint32_t *pids; /* the processes of the thread records, each once */
	size_t npids, cappids;
	/* resolution progress: wants and results before these are done */
	size_t wants_done, res_done, wants_written;
	llvmsym *sym;
	int sym_failed;
	size_t bad_answers;
	struct hmap sym_seen; /* runtime addresses with a symbol record out */
	/* the unit */
	/* slots [0, nspans); the free ones queued from span_free to span_free_tail
	 * (reused in the order they were freed, which is about input order: a
	 * window's spans land in slots in address order, and stay prefetchable) */
	struct span *spans;
	size_t nspans, capspans, spans_live;
	uint32_t span_free, span_free_tail;
	uint64_t span_seq;
	struct inode *inodes; /* inline frames, slots like spans */
	size_t ninodes, capinodes, inodes_live;
	uint32_t inode_free, inode_free_tail;
	uint64_t inode_seq;
	uint32_t *roots; /* spans without a parent, in input order; [0, root_head) written */
	size_t nroots, caproots, root_head;
	uint32_t *path; /* emit_round: the written nodes whose subtrees are not done */
	size_t npath, cappath;
	uint32_t path_thr; /* the thread of the tree being written */
	int fin;	   /* emit_round at the unit's end: everything is final */
	struct witem *win;
	size_t nwin, capwin;
	struct pspan *psp; /* the window's spans, read and not yet processed */
	size_t npsp, cappsp;
	struct hmap gidx; /* (tid, depth) -> group */
	struct grp *grps;
	size_t ngrps, capgrps;
	uint32_t gd_tid;  /* the thread of gdep (when gd_set) */
	int gd_set;
	uint32_t *gdep;	  /* gd_tid's group + 1 by depth (0: none yet) */
	size_t capgdep, gdep_used;
	uint32_t last_gtid, last_gdepth, last_g; /* the last lookup (last_g NONE: none) */
	struct hmap tidx; /* tid -> thread */
	struct thr *thrs;
	size_t nthrs, capthrs;
	uint32_t last_thr; /* the thread of the last span (when nthrs) */
	struct mtev_str *inames; /* input span names, interned (itab) */
	size_t ninames, capinames;
	struct nent *itab;
	size_t capitab;
	uint32_t unit_tid; /* NONE: no span yet; UNIT_MULTI: several threads */
	uint64_t unit_end; /* latest end of its spans */
	int any_span; /* a span or waypoint was seen */
	struct jframe *jf; /* one reply's frames */
	size_t capjf;
	char *js; /* one reply's strings, decoded */
	size_t capjs;
	struct nent *ntab; /* name -> string id */
	size_t nntab, capntab;
	uint32_t next_sid;
	int oom;
	size_t window; /* o->window, else WINDOW */
	size_t chunk;  /* o->window, else CHUNK */
	size_t bug; /* unit_flush left this many nodes unwritten */
	int unmapped_warned, anon_warned, symbolizer_warned;
	char *(*demangle)(const char *, char *, size_t *, int *);
};

static void warnf(struct ctx *c, int degraded, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void warnf(struct ctx *c, int degraded, const char *fmt, ...)
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

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s && s[1] ? s + 1 : p;
}

/* ---- Rust's legacy mangling, after an Itanium demangler ----
 * A legacy Rust name demangles as C++ would, into a path whose last element
 * is the hash "h" + 16 hex digits, with rustc's escapes left in the
 * elements: "$LT$" <, "$GT$" >, "$LP$" (, "$RP$" ), "$C$" ",", "$SP$" @,
 * "$BP$" *, "$RF$" &, "$uXX$" the character XX (hex), ".." "::", and a
 * leading "_$" for "$".  Drops the hash and decodes the escapes in place
 * (the result is never longer); returns the new length.  A name without the
 * hash is not Rust's and is left alone.  (v0 names, "_R...": rustv0.h.) */
static size_t rust_tidy(char *s, size_t n)
{
	if (n < 20 || memcmp(s + n - 19, "::h", 3))
		return n;
	for (size_t i = n - 16; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return n;
	static const struct {
		const char *esc;
		char ch;
	} tab[] = {{"$LT$", '<'}, {"$GT$", '>'}, {"$LP$", '('}, {"$RP$", ')'}, {"$C$", ','},
		   {"$SP$", '@'}, {"$BP$", '*'}, {"$RF$", '&'}};
	size_t end = n - 19, w = 0;
	for (size_t i = 0; i < end;) {
		if (s[i] == '$') {
			size_t k;
			for (k = 0; k < sizeof tab / sizeof tab[0]; k++) {
				size_t l = strlen(tab[k].esc);
				if (end - i >= l && !memcmp(s + i, tab[k].esc, l)) {
					s[w++] = tab[k].ch;
					i += l;
					break;
				}
			}
			if (k < sizeof tab / sizeof tab[0])
				continue;
			if (end - i >= 5 && s[i + 1] == 'u' && s[i + 4] == '$') {
				unsigned v = 0, ok = 1;
				for (size_t j = i + 2; j < i + 4; j++) {
					char ch = s[j];
					int dg = ch >= '0' && ch <= '9' ? ch - '0'
						 : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
					if (dg < 0)
						ok = 0;
					else
						v = v * 16 + (unsigned)dg;
				}
				if (ok && v >= 0x20 && v < 0x7f) {
					s[w++] = (char)v;
					i += 5;
					continue;
				}
			}
		} else if (s[i] == '.' && i + 1 < end && s[i + 1] == '.') {
			s[w++] = ':';
			s[w++] = ':';
			i += 2;
			continue;
		} else if (s[i] == '_' && i + 1 < end && s[i + 1] == '$' &&
			   (i == 0 || s[i - 1] == ':' || s[i - 1] == '<')) {
			i++; /* "_$" starts an element that begins with an escape */
			continue;
		}
		s[w++] = s[i++];
	}
	s[w] = 0;
	return w;
}

/* ---- demangling for names that do not come from llvm-symbolizer ---- */
static const char *demangle(struct ctx *c, const char *name)
{
	if (!strncmp(name, "_R", 2)) { /* Rust v0 */
		char buf[4096];
		long l = rustv0_demangle(name, buf, sizeof buf);
		char *r = l < 0 ? NULL : arena_strndup(&c->ar, buf, (size_t)l);
		return r ? r : name;
	}
	if (strncmp(name, "_Z", 2) != 0)
		return name;
	if (!c->demangle) {
		/* optional: libstdc++'s demangler, when it is installed */
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		void *f = h ? dlsym(h, "__cxa_demangle") : NULL;
		if (!f)
			return name;
		*(void **)&c->demangle = f;
	}
	int status = 0;
	char *d = c->demangle(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return name;
	}
	char *r = arena_strndup(&c->ar, d, strlen(d));
	free(d);
	if (r)
		rust_tidy(r, strlen(r));
	return r ? r : name;
}

/* ---- binaries ---- */
static uint32_t bin_get(struct ctx *c, const char *path, size_t plen, const uint8_t *bid,
			uint8_t bidlen)
{
	for (size_t i = 0; i < c->nbins; i++) {
		struct bin *b = &c->bins[i];
		if (b->bidlen == bidlen && !memcmp(b->bid, bid, bidlen) && strlen(b->path) == plen &&
		    !memcmp(b->path, path, plen))
			return (uint32_t)i;
	}
	struct bin nb;
	memset(&nb, 0, sizeof nb);
	nb.path = arena_strndup(&c->ar, path, plen);
	if (!nb.path)
		return NONE;
	if (bidlen > 20)
		bidlen = 20;
	memcpy(nb.bid, bid, bidlen);
	nb.bidlen = bidlen;
	buildid_hex(nb.bidhex, bid, bidlen);
	if (VEC_PUSH(c->bins, c->nbins, c->capbins, nb) < 0)
		return NONE;
	return (uint32_t)(c->nbins - 1);
}

static int is_file_backed(const char *p)
{
	if (p[0] != '/' || !strncmp(p, "//anon", 6) || !strncmp(p, "/dev/zero", 9) ||
	    !strncmp(p, "/tmp/perf-", 10) || !strncmp(p, "/memfd:", 7) ||
	    !strncmp(p, "/SYSV", 5))
		return 0;
	const char *d = strstr(p, " (deleted)");
	return !(d && !d[10]);
}

/* The binary's file (imgfind.h), and its separate debug file when it has one:
 * llvm-symbolizer reads the one elfinfo and dwcov read. */
static void bin_find(struct ctx *c, struct bin *b)
{
	char file[4096], dbg[4096], why[4400];
	if (img_find(b->path, b->bid, b->bidlen, file, sizeof file, why, sizeof why)) {
		int r = elfinfo_load_nosyms(&b->ei, file);
		if (r == 0) {
			b->file = arena_strndup(&c->ar, file, strlen(file));
			b->sym = b->file;
			b->state = b->file ? 1 : -1;
			if (b->state > 0 && !b->bidlen && b->ei.build_id_len) {
				/* the cache is keyed by build-id: take the file's own */
				memcpy(b->bid, b->ei.build_id, b->ei.build_id_len);
				b->bidlen = b->ei.build_id_len;
				buildid_hex(b->bidhex, b->bid, b->bidlen);
			}
			if (b->state > 0 && img_find_debug(file, b->bid, b->bidlen, dbg, sizeof dbg) &&
			    !(b->sym = arena_strndup(&c->ar, dbg, strlen(dbg))))
				b->sym = b->file;
			return;
		}
		sfmt(why, sizeof why, "%s: %s", file, r == -ENOEXEC ? "not an ELF file" : strerror(-r));
	}
	b->state = -1;
	int nf = !strcmp(why, "not found");
	warnf(c, 1, "binary %s (build-id %s) not found%s%s; its addresses are named [unknown @ ...]",
	      b->path, b->bidlen ? b->bidhex : "none", nf ? "" : ": ", nf ? "" : why);
}

/* ---- results ---- */
static uint32_t frame_push(struct ctx *c, const char *name, const char *file, uint32_t line,
			   uint32_t col)
{
	if (!file)
		file = "";
	struct sframe f = {name, file, line, col, name ? (uint32_t)strlen(name) : 0,
			   (uint32_t)strlen(file), 0};
	if (!name || VEC_PUSH(c->frames, c->nframes, c->capframes, f) < 0) {
		c->oom = 1;
		return NONE;
	}
	return (uint32_t)(c->nframes - 1);
}

static uint32_t res_new(struct ctx *c, uint32_t bin, uint64_t vaddr)
{
	struct result r = {bin, vaddr, 0, 0, 0, RES_PENDING};
	if (VEC_PUSH(c->res, c->nres, c->capres, r) < 0) {
		c->oom = 1;
		return NONE;
	}
	return (uint32_t)(c->nres - 1);
}

/* One frame named @name. */
static void res_set_name(struct ctx *c, struct result *r, int kind, const char *name)
{
	uint32_t f = frame_push(c, name, "", 0, 0);
	if (f == NONE)
		return;
	r->f0 = f;
	r->nf = 1;
	r->kind = (uint8_t)kind;
}

static void res_unknown(struct ctx *c, struct result *r, uint64_t addr, const char *where)
{
	char buf[600];
	sfmt(buf, sizeof buf, "[unknown @ 0x%" PRIx64 " (%s)]", addr, where);
	res_set_name(c, r, RES_UNKNOWN, arena_strndup(&c->ar, buf, strlen(buf)));
	c->st->unknown_names++;
}

/* The binary's symbol table, loaded on first need (a warm cache needs none). */
static const struct elfinfo *bin_syms(struct bin *b)
{
	if (!b->syms_loaded) {
		struct elfinfo full;
		b->syms_loaded = 1;
		if (elfinfo_load(&full, b->file) == 0) {
			elfinfo_fini(&b->ei);
			b->ei = full;
		}
	}
	return &b->ei;
}

/* ELF symbol table fallback for a result in a found binary. */
static void res_elf_fallback(struct ctx *c, struct result *r)
{
	struct bin *b = &c->bins[r->bin];
	const struct elf_sym *s = elfinfo_lookup(bin_syms(b), r->vaddr);
	if (!s) {
		res_unknown(c, r, r->vaddr, base_name(b->path));
		return;
	}
	const char *nm = demangle(c, s->name);
	char buf[1200], fde[600];
	if (s->is_fde) {
		/* a stripped file's function known by its FDE: named after the
		 * mapped file (not the build-id cache's folders it was found in) */
		sfmt(fde, sizeof fde, "%s+0x%" PRIx64, base_name(b->path), s->addr);
		nm = fde;
	}
	if (r->vaddr == s->addr)
		sfmt(buf, sizeof buf, "%s", nm);
	else
		sfmt(buf, sizeof buf, "%s+0x%" PRIx64, nm, r->vaddr - s->addr);
	r->entry_vaddr = s->addr;
	res_set_name(c, r, RES_ELF, arena_strndup(&c->ar, buf, strlen(buf)));
	c->st->fallback_names++;
}

static uint64_t parse_hex(const char *s)
{
	if (!s || !*s)
		return 0;
	return strtoull(s, NULL, 16);
}

static const char *json_str(json_t *o, const char *key, size_t *len)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v)) {
		*len = 0;
		return "";
	}
	*len = json_string_length(v);
	return json_string_value(v);
}

/* One entry of a reply's "Symbol" array (strings not NUL-terminated). */
struct jframe {
	const char *nm, *file;
	size_t nl, fl;
	long long line, col;
};

/* Fills @r from the frames of one reply (innermost first) and the last
 * one's StartAddress.  0 (possibly with no name: r->kind stays PENDING) or
 * -1 (out of memory). */
static int res_fill(struct ctx *c, struct result *r, const struct jframe *fr, size_t n,
		    uint64_t start)
{
	if (!n || !fr[n - 1].nl || (fr[n - 1].nl == 2 && !memcmp(fr[n - 1].nm, "??", 2)))
		return 0;
	uint32_t f0 = (uint32_t)c->nframes;
	int have_line = 0;
	for (size_t i = 0; i < n; i++) {
		const char *nm = fr[i].nm;
		size_t nl = fr[i].nl;
		if (!nl || (nl == 2 && !memcmp(nm, "??", 2)))
			nm = "??", nl = 2;
		if (fr[i].line > 0)
			have_line = 1;
		char *nd = arena_strndup(&c->ar, nm, nl);
		if (nd && nl > 19)
			nl = rust_tidy(nd, nl);
		if (nd && i == n - 1 && start && r->bin != NONE && c->bins[r->bin].state > 0) {
			/* one address, one name: another name of the function's
			 * symbol (a debug file's __GI__IO_setb) becomes its
			 * preferred, exported one (_IO_setb), as in the fallback */
			const struct elf_sym *ps =
				elfinfo_named_at(bin_syms(&c->bins[r->bin]), start, nd);
			if (ps && strcmp(ps->name, nd))
				nd = arena_strndup(&c->ar, ps->name, strlen(ps->name));
		}
		if (frame_push(c, nd, arena_strndup(&c->ar, fr[i].file, fr[i].fl),
			       fr[i].line > 0 && fr[i].line <= UINT32_MAX ? (uint32_t)fr[i].line : 0,
			       fr[i].col > 0 && fr[i].col <= UINT32_MAX ? (uint32_t)fr[i].col : 0) == NONE)
			return -1;
	}
	r->f0 = f0;
	r->nf = (uint32_t)n;
	r->entry_vaddr = start;
	r->kind = have_line ? RES_DEBUG : RES_SYMTAB;
	if (!have_line && n == 1 && r->bin != NONE) {
		/* symbol-table answer: say where in the function, as the ELF fallback does */
		struct bin *b = &c->bins[r->bin];
		if (!r->entry_vaddr) {
			const struct elf_sym *s = elfinfo_lookup(bin_syms(b), r->vaddr);
			if (s)
				r->entry_vaddr = s->addr;
		}
		if (r->entry_vaddr && r->vaddr != r->entry_vaddr) {
			/* "%s+0x%x" cut to 1199 bytes (as the fallbacks' names) */
			const char *nm = c->frames[f0].name;
			size_t nl = c->frames[f0].name_len, hl = 0;
			char hex[20];
			for (uint64_t off = r->vaddr - r->entry_vaddr; off; off >>= 4)
				hex[hl++] = "0123456789abcdef"[off & 15];
			size_t full = nl + 3 + hl, cut = full < 1199 ? full : 1199;
			char *buf = arena_alloc(&c->ar, full + 1);
			if (!buf) {
				c->oom = 1;
			} else {
				char *o = buf;
				memcpy(o, nm, nl);
				memcpy(o + nl, "+0x", 3);
				for (size_t k = 0; k < hl; k++)
					o[nl + 3 + k] = hex[hl - 1 - k];
				buf[cut] = 0;
				c->frames[f0].name = buf;
				c->frames[f0].name_len = (uint32_t)cut;
			}
		}
	}
	return 0;
}

static int jframes_room(struct ctx *c, size_t n)
{
	while (c->capjf < n)
		if (vec_grow((void **)&c->jf, &c->capjf, sizeof *c->jf) < 0)
			return -1;
	return 0;
}

/* ---- a JSON reader for llvm-symbolizer's replies (the common case) ----
 * Strict: anything it does not expect (floats, odd escapes, deep nesting)
 * makes it give up, and jansson reads the reply instead. */
struct jcur {
	const char *p, *end;
	char *out; /* decoded strings go here: never longer than the input */
};

static void js_ws(struct jcur *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int js_hex4(const char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = p[i];
		unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
			     : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
			     : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) : 16u;
		if (d > 15)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* The first byte at or after @p that ends a plain run of string bytes: a
 * quote, a backslash or a control character; @end if none.  Eight bytes at a
 * time: the borrows of the subtractions below can flag a byte above a true
 * hit, never one below, so the lowest flag is the first such byte. */
static inline const char *js_plain_end(const char *p, const char *end)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	while (end - p >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
		uint64_t hit = ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w);
		hit &= highs;
		if (hit)
			return p + (__builtin_ctzll(hit) >> 3);
		p += 8;
	}
	while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
		p++;
	return p;
}

/* A string at j->p: *s, *n (when @s) point into the input when it has no
 * escape, else to its decoded copy in j->out. */
static int js_str(struct jcur *j, const char **s, size_t *n)
{
	if (j->p >= j->end || *j->p != '"')
		return -1;
	j->p++;
	const char *e = js_plain_end(j->p, j->end);
	if (e < j->end && *e == '"') {
		if (s) {
			*s = j->p;
			*n = (size_t)(e - j->p);
		}
		j->p = e + 1;
		return 0;
	}
	/* an escape (or an error): decode the plain prefix and go on bytewise */
	char *o = j->out, *o0 = o;
	memcpy(o, j->p, (size_t)(e - j->p));
	o += e - j->p;
	j->p = e;
	while (j->p < j->end) {
		char ch = *j->p++;
		if (ch == '"') {
			if (s) {
				*s = o0;
				*n = (size_t)(o - o0);
				j->out = o;
			}
			return 0;
		}
		if ((unsigned char)ch < 0x20)
			return -1;
		if (ch != '\\') {
			*o++ = ch;
			continue;
		}
		if (j->p >= j->end)
			return -1;
		ch = *j->p++;
		switch (ch) {
		case '"': case '\\': case '/': *o++ = ch; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned u;
			if (j->end - j->p < 4 || js_hex4(j->p, &u) < 0)
				return -1;
			j->p += 4;
			if (u >= 0xd800 && u <= 0xdfff)
				return -1; /* surrogates: left to jansson */
			if (u < 0x80) {
				*o++ = (char)u;
			} else if (u < 0x800) {
				*o++ = (char)(0xc0 | u >> 6);
				*o++ = (char)(0x80 | (u & 0x3f));
			} else {
				*o++ = (char)(0xe0 | u >> 12);
				*o++ = (char)(0x80 | ((u >> 6) & 0x3f));
				*o++ = (char)(0x80 | (u & 0x3f));
			}
			break;
		}
		default: return -1;
		}
	}
	return -1;
}

static int js_int(struct jcur *j, long long *v)
{
	const char *p = j->p;
	int neg = 0;
	if (p < j->end && *p == '-')
		neg = 1, p++;
	if (p >= j->end || *p < '0' || *p > '9')
		return -1;
	long long x = 0;
	while (p < j->end && *p >= '0' && *p <= '9') {
		if (x > (LLONG_MAX - 9) / 10)
			return -1;
		x = x * 10 + (*p++ - '0');
	}
	if (p < j->end && (*p == '.' || *p == 'e' || *p == 'E'))
		return -1;
	j->p = p;
	*v = neg ? -x : x;
	return 0;
}

/* Skips one value of any kind. */
/* After a member or element: 1 after ',' (another follows), 0 after @close,
 * -1 for anything else. */
static int js_sep(struct jcur *j, char close)
{
	js_ws(j);
	if (j->p >= j->end)
		return -1;
	char ch = *j->p++;
	return ch == ',' ? 1 : ch == close ? 0 : -1;
}

static int js_skip(struct jcur *j, int depth)
{
	js_ws(j);
	if (j->p >= j->end || depth > 16)
		return -1;
	char ch = *j->p;
	if (ch == '"')
		return js_str(j, NULL, NULL);
	if (ch == '{' || ch == '[') {
		char close = ch == '{' ? '}' : ']';
		j->p++;
		js_ws(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return 0;
		}
		for (;;) {
			if (ch == '{') {
				js_ws(j);
				if (js_str(j, NULL, NULL) < 0)
					return -1;
				js_ws(j);
				if (j->p >= j->end || *j->p++ != ':')
					return -1;
			}
			if (js_skip(j, depth + 1) < 0)
				return -1;
			int more = js_sep(j, close);
			if (more <= 0)
				return more;
		}
	}
	long long v;
	if (ch == '-' || (ch >= '0' && ch <= '9'))
		return js_int(j, &v);
	static const char *const lit[] = {"true", "false", "null"};
	for (int i = 0; i < 3; i++) {
		size_t l = strlen(lit[i]);
		if ((size_t)(j->end - j->p) >= l && !memcmp(j->p, lit[i], l)) {
			j->p += l;
			return 0;
		}
	}
	return -1;
}

static int js_key(const char *k, size_t kl, const char *want)
{
	return strlen(want) == kl && !memcmp(k, want, kl);
}

/* One object of the "Symbol" array into @f. */
static int js_frame(struct jcur *j, struct jframe *f, uint64_t *start)
{
	memset(f, 0, sizeof *f);
	f->nm = f->file = "";
	*start = 0;
	js_ws(j);
	if (j->p >= j->end || *j->p++ != '{')
		return -1;
	js_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		const char *k;
		size_t kl;
		js_ws(j);
		if (js_str(j, &k, &kl) < 0)
			return -1;
		js_ws(j);
		if (j->p >= j->end || *j->p++ != ':')
			return -1;
		js_ws(j);
		int e;
		if (js_key(k, kl, "FunctionName"))
			e = js_str(j, &f->nm, &f->nl);
		else if (js_key(k, kl, "FileName"))
			e = js_str(j, &f->file, &f->fl);
		else if (js_key(k, kl, "Line"))
			e = js_int(j, &f->line);
		else if (js_key(k, kl, "Column"))
			e = js_int(j, &f->col);
		else if (js_key(k, kl, "StartAddress")) {
			const char *sa;
			size_t sl;
			e = js_str(j, &sa, &sl);
			if (!e && sl) {
				char tmp[32];
				if (sl >= sizeof tmp)
					return -1;
				memcpy(tmp, sa, sl);
				tmp[sl] = 0;
				*start = parse_hex(tmp);
			}
		} else
			e = js_skip(j, 2);
		if (e < 0)
			return -1;
		int more = js_sep(j, '}');
		if (more <= 0)
			return more;
	}
}

static inline int js_lit(struct jcur *j, const char *lit, size_t n)
{
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n))
		return -1;
	j->p += n;
	return 0;
}
#define JS_LIT(j, s) js_lit((j), (s), sizeof(s) - 1)

/* A StartAddress string as parse_hex reads it: "0x" and 1 to 16 hex digits
 * here, else -1 (left to the general reader). */
static int js_start_hex(const char *s, size_t n, uint64_t *v)
{
	if (n < 3 || n > 18 || s[0] != '0' || s[1] != 'x')
		return -1;
	uint64_t x = 0;
	for (size_t i = 2; i < n; i++) {
		unsigned ch = (unsigned char)s[i], d;
		if (ch - '0' < 10)
			d = ch - '0';
		else if ((ch | 0x20) - 'a' < 6)
			d = (ch | 0x20) - 'a' + 10;
		else
			return -1;
		x = x << 4 | d;
	}
	*v = x;
	return 0;
}

/* A reply exactly as llvm-symbolizer writes it (these keys in this order,
 * no spaces): read by matching it.  0 / -1 as res_from_json, -2 for
 * anything else (then the general reader decides). */
static int res_from_json_tmpl(struct ctx *c, struct result *r, const char *line, size_t len)
{
	struct jcur j = {line, line + len, c->js};
	const char *sv;
	size_t sl, n = 0;
	uint64_t start = 0;
	if (JS_LIT(&j, "{\"Address\":") || js_str(&j, NULL, NULL) ||
	    JS_LIT(&j, ",\"ModuleName\":") || js_str(&j, NULL, NULL) ||
	    JS_LIT(&j, ",\"Symbol\":["))
		return -2;
	if (j.p < j.end && *j.p == ']') {
		j.p++;
	} else {
		for (;;) {
			if (jframes_room(c, n + 1) < 0)
				return -2;
			struct jframe *f = &c->jf[n];
			long long skip;
			if (JS_LIT(&j, "{\"Column\":") || js_int(&j, &f->col) ||
			    JS_LIT(&j, ",\"Discriminator\":") || js_int(&j, &skip) ||
			    JS_LIT(&j, ",\"FileName\":") || js_str(&j, &f->file, &f->fl) ||
			    JS_LIT(&j, ",\"FunctionName\":") || js_str(&j, &f->nm, &f->nl) ||
			    JS_LIT(&j, ",\"Line\":") || js_int(&j, &f->line) ||
			    JS_LIT(&j, ",\"StartAddress\":") || js_str(&j, &sv, &sl) ||
			    JS_LIT(&j, ",\"StartFileName\":") || js_str(&j, NULL, NULL) ||
			    JS_LIT(&j, ",\"StartLine\":") || js_int(&j, &skip) || JS_LIT(&j, "}"))
				return -2;
			start = 0;
			if (sl && js_start_hex(sv, sl, &start) < 0)
				return -2;
			n++;
			if (j.p < j.end && *j.p == ',') {
				j.p++;
				continue;
			}
			if (JS_LIT(&j, "]"))
				return -2;
			break;
		}
	}
	if (JS_LIT(&j, "}") || j.p != j.end)
		return -2;
	return res_fill(c, r, c->jf, n, start) < 0 ? -1 : 0;
}

/* The fast reader: 0 / -1 as res_from_json, -2 when it gives up. */
static int res_from_json_fast(struct ctx *c, struct result *r, const char *line, size_t len)
{
	if (c->capjs < len + 1) {
		char *nb = realloc(c->js, len + 1);
		if (!nb)
			return -2;
		c->js = nb;
		c->capjs = len + 1;
	}
	int t = res_from_json_tmpl(c, r, line, len);
	if (t != -2)
		return t;
	struct jcur j = {line, line + len, c->js};
	size_t n = 0;
	int have_syms = 0, err = 0;
	uint64_t start = 0;
	js_ws(&j);
	if (j.p >= j.end || *j.p++ != '{')
		return -2;
	for (;;) {
		const char *k;
		size_t kl;
		js_ws(&j);
		if (js_str(&j, &k, &kl) < 0)
			return -2;
		js_ws(&j);
		if (j.p >= j.end || *j.p++ != ':')
			return -2;
		js_ws(&j);
		if (js_key(k, kl, "Symbol")) {
			if (j.p >= j.end || *j.p != '[')
				return -2;
			j.p++;
			n = 0;
			have_syms = 1;
			js_ws(&j);
			if (j.p < j.end && *j.p == ']') {
				j.p++;
			} else {
				for (;;) {
					uint64_t st;
					if (jframes_room(c, n + 1) < 0 || js_frame(&j, &c->jf[n], &st) < 0)
						return -2;
					start = st; /* the last frame's */
					n++;
					int more = js_sep(&j, ']');
					if (more < 0)
						return -2;
					if (!more)
						break;
				}
			}
		} else {
			if (js_key(k, kl, "Error"))
				err = 1;
			if (js_skip(&j, 1) < 0)
				return -2;
		}
		int more = js_sep(&j, '}');
		if (more < 0)
			return -2;
		if (!more)
			break;
	}
	js_ws(&j);
	if (j.p != j.end)
		return -2;
	if (!have_syms || err)
		return -1;
	return res_fill(c, r, c->jf, n, start) < 0 ? -1 : 0;
}

/* Fills @r from one llvm-symbolizer JSON reply.  0 ok (possibly with no
 * name: r->kind stays PENDING), -1 when the reply is an error or unparsable. */
static int res_from_json(struct ctx *c, struct result *r, const char *line, size_t len)
{
	int fast = res_from_json_fast(c, r, line, len);
	if (fast != -2)
		return fast;
	c->st->json_slow++;
	json_error_t e;
	json_t *j = json_loadb(line, len, 0, &e);
	if (!j)
		return -1;
	int ret = -1;
	json_t *syms = json_object_get(j, "Symbol");
	if (!json_is_array(syms) || json_object_get(j, "Error"))
		goto out;
	size_t n = json_array_size(syms);
	if (jframes_room(c, n + 1) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(syms, i);
		struct jframe *f = &c->jf[i];
		f->nm = json_str(s, "FunctionName", &f->nl);
		f->file = json_str(s, "FileName", &f->fl);
		f->line = json_integer_value(json_object_get(s, "Line"));
		f->col = json_integer_value(json_object_get(s, "Column"));
	}
	uint64_t start = n ? parse_hex(json_string_value(json_object_get(json_array_get(syms, n - 1),
									  "StartAddress")))
			   : 0;
	ret = res_fill(c, r, c->jf, n, start);
out:
	json_decref(j);
	return ret;
}

/* ---- cache: one text file per build-id, "VADDR-HEX JSON" per line ---- */
static int cache_path(struct ctx *c, const struct bin *b, char *out, size_t cap)
{
	if (!c->o->cache_dir || !b->bidlen)
		return -1;
	int n = snprintf(out, cap, "%s/symbolize/%s", c->o->cache_dir, b->bidhex);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* strtoull(s, end, 16), with a fast path for what we write: 1 to 16 hex
 * digits and a space. */
static uint64_t hex_prefix(char *s, char **end)
{
	uint64_t v = 0;
	int k = 0;
	for (;; k++) {
		unsigned ch = (unsigned char)s[k], d;
		if (ch - '0' < 10)
			d = ch - '0';
		else if ((ch | 0x20) - 'a' < 6)
			d = (ch | 0x20) - 'a' + 10;
		else
			break;
		if (k == 16)
			return strtoull(s, end, 16);
		v = v << 4 | d;
	}
	if (!k || s[k] != ' ')
		return strtoull(s, end, 16);
	*end = s + k;
	return v;
}

static void cache_index(struct bin *b)
{
	uint8_t *p = b->cbuf, *end = b->cbuf + b->cbuf_len;
	while (p < end) {
		uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break; /* a torn last line (never written by us): ignore */
		*nl = 0;
		char *sp;
		uint64_t va = hex_prefix((char *)p, &sp);
		if (sp != (char *)p && *sp == ' ')
			hmap_put(&b->cidx, va, 0, (uint32_t)((uint8_t *)sp + 1 - b->cbuf));
		p = nl + 1;
	}
}

static void cache_load(struct ctx *c, struct bin *b)
{
	char path[4200];
	b->cache_loaded = 1;
	if (cache_path(c, b, path, sizeof path) < 0)
		return;
	if (io_slurp(path, &b->cbuf, &b->cbuf_len) < 0) {
		b->cbuf = NULL;
		b->cbuf_len = 0;
		return;
	}
	cache_index(b);
}

static int mkdir_p(const char *dir)
{
	char tmp[4200];
	sfmt(tmp, sizeof tmp, "%s", dir);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(tmp, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

/* Writes the entries learned in this run merged with what the file holds
 * now (another run may have added some): temp file + rename, so readers see
 * the old or the new file, never a torn one.  Concurrent writers can lose
 * each other's additions (the later rename wins), never corrupt the file. */
static void cache_store(struct ctx *c, struct bin *b)
{
	char path[4200], dir[4200], tmp[4300];
	if (!b->ncnew || cache_path(c, b, path, sizeof path) < 0)
		return;
	sfmt(dir, sizeof dir, "%s/symbolize", c->o->cache_dir);
	if (mkdir_p(dir) < 0) {
		warnf(c, 0, "cache: cannot create %s: %s", dir, strerror(errno));
		return;
	}
	uint8_t *cur = NULL;
	size_t cur_len = 0;
	struct hmap have = {0};
	if (io_slurp(path, &cur, &cur_len) == 0) {
		/* keep whole lines only */
		while (cur_len && cur[cur_len - 1] != '\n')
			cur_len--;
		for (uint8_t *p = cur, *end = cur + cur_len; p < end;) {
			uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
			char *sp;
			uint64_t va = strtoull((char *)p, &sp, 16);
			if (sp != (char *)p)
				hmap_put(&have, va, 0, 0);
			p = nl + 1;
		}
	} else {
		cur = NULL;
		cur_len = 0;
	}
	sfmt(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		warnf(c, 0, "cache: cannot write %s: %s", tmp, strerror(errno));
		free(cur);
		hmap_fini(&have);
		return;
	}
	int ok = cur_len ? io_write_all(fd, cur, cur_len) == 0 : 1;
	char *buf = NULL;
	size_t blen = 0, bcap = 0;
	for (size_t i = 0; ok && i < b->ncnew; i++) {
		if (hmap_get(&have, b->cnew[i].vaddr, 0) != NONE)
			continue;
		hmap_put(&have, b->cnew[i].vaddr, 0, 0);
		size_t ll = strlen(b->cnew[i].line);
		if (blen + ll + 32 > bcap) {
			bcap = (blen + ll + 32) * 2;
			char *nb = realloc(buf, bcap);
			if (!nb) {
				ok = 0;
				break;
			}
			buf = nb;
		}
		blen += (size_t)sprintf(buf + blen, "%" PRIx64 " ", b->cnew[i].vaddr);
		memcpy(buf + blen, b->cnew[i].line, ll);
		blen += ll;
		buf[blen++] = '\n';
	}
	if (ok && blen)
		ok = io_write_all(fd, buf, blen) == 0;
	if (close(fd) < 0)
		ok = 0;
	if (ok && rename(tmp, path) < 0)
		ok = 0;
	if (!ok) {
		warnf(c, 0, "cache: cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
	}
	free(buf);
	free(cur);
	hmap_fini(&have);
}

/* ---- perf-PID.map (JIT code) ---- */
static struct perfmap *perfmap_get(struct ctx *c, uint32_t pid)
{
	for (size_t i = 0; i < c->npmaps; i++)
		if (c->pmaps[i].pid == pid)
			return &c->pmaps[i];
	struct perfmap pm = {pid, 1, NULL, 0};
	size_t cap = 0;
	char path[4200];
	sfmt(path, sizeof path, "%s/perf-%" PRIu32 ".map",
		 c->o->perf_map_dir ? c->o->perf_map_dir : "/tmp", pid);
	FILE *f = fopen(path, "r");
	if (f) {
		char line[4096];
		while (fgets(line, sizeof line, f)) {
			char *p = line, *q;
			uint64_t st = strtoull(p, &q, 16);
			if (q == p || *q != ' ')
				continue;
			p = q + 1;
			uint64_t sz = strtoull(p, &q, 16);
			if (q == p || *q != ' ')
				continue;
			p = q + 1;
			size_t nl = strcspn(p, "\n");
			struct perfmap_ent e = {st, sz, arena_strndup(&c->ar, p, nl)};
			if (!e.name || VEC_PUSH(pm.e, pm.n, cap, e) < 0) {
				c->oom = 1;
				break;
			}
		}
		fclose(f);
	}
	if (VEC_PUSH(c->pmaps, c->npmaps, c->cappmaps, pm) < 0) {
		free(pm.e);
		c->oom = 1;
		return NULL;
	}
	return &c->pmaps[c->npmaps - 1];
}

static const struct perfmap_ent *perfmap_lookup(const struct perfmap *pm, uint64_t addr)
{
	/* later lines win: JIT code can be replaced at the same address */
	for (size_t i = pm->n; i-- > 0;)
		if (addr >= pm->e[i].start && addr - pm->e[i].start < pm->e[i].size)
			return &pm->e[i];
	return NULL;
}

/* Inline levels of a result: level 1 is the outermost inlined frame. */
static inline uint32_t res_levels(const struct result *r)
{
	return r->nf ? r->nf - 1 : 0;
}

/* ---- address resolution ---- */
static uint32_t want_get_slow(struct ctx *c, struct wslot *e, uint32_t tid, uint64_t addr)
{
	uint32_t w = wtab_get(&c->want_idx, tid, addr);
	if (w == NONE) {
		struct want nw = {addr, 0, tid, NONE, 0, NONE};
		if (c->nwants >= NONE - 1 || VEC_PUSH(c->wants, c->nwants, c->capwants, nw) < 0 ||
		    wtab_add(&c->want_idx, tid, addr, (uint32_t)(c->nwants - 1)) < 0) {
			c->oom = 1;
			return NONE;
		}
		w = (uint32_t)(c->nwants - 1);
	}
	*e = (struct wslot){addr, tid, w};
	return w;
}

/* The want of (tid, addr), made when new; NONE when out of memory.  A
 * direct-mapped memo of recent ones in front of the table (its empty
 * entries hold w NONE, which is never a hit). */
static inline uint32_t want_get(struct ctx *c, uint32_t tid, uint64_t addr)
{
	struct wslot *e = &c->wmemo[addr & (WMEMO - 1)];
	if (e->addr == addr && e->tid == tid && e->w1 != NONE)
		return e->w1;
	return want_get_slow(c, e, tid, addr);
}

static const struct map *map_find(const struct ctx *c, uint32_t pid, int any_pid, uint64_t addr)
{
	const struct map *best = NULL;
	for (size_t i = 0; i < c->nmaps; i++) {
		const struct map *m = &c->maps[i];
		if ((!any_pid && m->pid != pid) || addr < m->start || addr - m->start >= m->len)
			continue;
		if (!best || m->time >= best->time)
			best = m;
	}
	return best;
}

/* The process of @tid: its thread record, else guesses. */
static int tid_pid(const struct ctx *c, uint32_t tid, uint32_t *pid)
{
	uint32_t p = hmap_get(&c->tid2pid, tid, 0);
	if (p != NONE) {
		*pid = p;
		return 1;
	}
	*pid = tid;
	return 0;
}

static void resolve_want(struct ctx *c, struct want *w)
{
	uint32_t pid;
	int known = tid_pid(c, w->tid, &pid);
	const struct map *m = map_find(c, pid, 0, w->addr);
	if (!m && !known)
		m = map_find(c, pid, 1, w->addr);
	if (m && m->bin != NONE) {
		struct bin *b = &c->bins[m->bin];
		if (!b->state)
			bin_find(c, b);
		if (b->state > 0) {
			int64_t va = elfinfo_offset_to_vaddr(&b->ei, w->addr - m->start + m->pgoff);
			if (va >= 0) {
				uint32_t ri = hmap_get(&c->res_idx, m->bin, (uint64_t)va);
				if (ri == NONE) {
					ri = res_new(c, m->bin, (uint64_t)va);
					if (ri == NONE ||
					    hmap_put(&c->res_idx, m->bin, (uint64_t)va, ri) == NONE) {
						c->oom = 1;
						return;
					}
				}
				w->ri = ri;
				return;
			}
		}
	}
	/* not in a binary we have: JIT map, else unknown */
	uint32_t ri = res_new(c, NONE, w->addr);
	if (ri == NONE)
		return;
	w->ri = ri;
	struct result *r = &c->res[ri];
	if (m && m->bin == NONE && !strcmp(m->path, "[uprobes]")) {
		/* the kernel's page where a uprobe runs the probed instruction out
		 * of line (a sample taken while a uprobe fired): no functions in
		 * it, so its name is the whole answer, not a degraded one */
		res_set_name(c, r, RES_UNKNOWN, arena_strndup(&c->ar, "[uprobes]", 9));
		return;
	}
	if (!m || m->bin == NONE) {
		struct perfmap *pm = perfmap_get(c, pid);
		const struct perfmap_ent *e = pm ? perfmap_lookup(pm, w->addr) : NULL;
		/* the kernel is the same in every process: a kernel address of a
		 * process without its own kernel symbols (mt-capture --kernel
		 * writes them for the processes it records, not for the children
		 * they fork) is named from another process's */
		for (size_t i = 0; !e && w->addr >> 63 && i < c->npids; i++)
			if (c->pids[i] != pid && (pm = perfmap_get(c, c->pids[i])))
				e = perfmap_lookup(pm, w->addr);
		if (e) {
			char buf[1200];
			/* the JIT function's name alone: an offset would make each
			 * sampled address of one function a differently named slice
			 * (the symbol record's entry says where in it) */
			sfmt(buf, sizeof buf, "%s", demangle(c, e->name));
			res_set_name(c, r, RES_PERFMAP, arena_strndup(&c->ar, buf, strlen(buf)));
			r->entry_vaddr = e->start;
			return;
		}
	}
	if (!m && !c->unmapped_warned++)
		warnf(c, 1, "address 0x%" PRIx64 " (thread %" PRIu32 ") is in no mapped binary; such addresses are named [unknown @ ...]",
		      w->addr, w->tid);
	if (m && m->bin == NONE && !c->anon_warned++)
		warnf(c, 1, "address 0x%" PRIx64 " is in %s of process %" PRIu32 " and no perf-%" PRIu32 ".map names it; such addresses are named [unknown @ ...]",
		      w->addr, m->path[0] ? m->path : "an anonymous mapping", pid, pid);
	res_unknown(c, r, w->addr, !m ? "unmapped" : m->bin == NONE ? m->path : base_name(m->path));
}

struct batch {
	struct ctx *c;
	uint32_t *ri;
	size_t bad;
};

static void on_reply(void *ctx, size_t i, const char *line, size_t len)
{
	struct batch *bt = ctx;
	struct ctx *c = bt->c;
	struct result *r = &c->res[bt->ri[i]];
	if (res_from_json(c, r, line, len) < 0) {
		bt->bad++;
		return;
	}
	struct bin *b = &c->bins[r->bin];
	if (c->o->cache_dir && b->bidlen) {
		struct cache_new cn = {r->vaddr, arena_strndup(&c->ar, line, len)};
		if (!cn.line || VEC_PUSH(b->cnew, b->ncnew, b->capcnew, cn) < 0)
			c->oom = 1;
	}
}

/* Sends one batch to the coprocess (started on first need; after it fails,
 * never again: the remaining names are fallbacks, with one warning). */
static void symbolizer_batch(struct ctx *c, size_t nreq, const char **paths,
			     const uint64_t *vaddrs, uint32_t *ris)
{
	const char *exe = c->o->symbolizer ? c->o->symbolizer : "llvm-symbolizer";
	if (c->sym_failed)
		return;
	if (!c->sym) {
		int err = 0;
		if (*exe)
			c->sym = llvmsym_start(exe, &err);
		if (!c->sym) {
			c->sym_failed = 1;
			if (*exe)
				warnf(c, 1, "cannot run %s: %s; names come from ELF symbol tables (no inline frames, no source lines)",
				      exe, strerror(-err));
			else
				warnf(c, 1, "no symbolizer: names come from ELF symbol tables (no inline frames, no source lines)");
			return;
		}
	}
	struct batch bt = {c, ris, 0};
	int tmo = c->o->timeout_ms > 0 ? c->o->timeout_ms : 30000;
	long r = llvmsym_batch(c->sym, nreq, paths, vaddrs, on_reply, &bt, tmo);
	c->bad_answers += bt.bad;
	if (r < 0) {
		c->sym_failed = 1;
		if (r == -ETIMEDOUT)
			warnf(c, 1, "%s did not answer for %d ms and was killed; the remaining names come from ELF symbol tables",
			      exe, tmo);
		else if (r == -E2BIG)
			warnf(c, 1, "%s wrote a reply line over %zu MiB and was killed; the remaining names come from ELF symbol tables",
			      exe, LLVMSYM_LINE_MAX >> 20);
		else
			warnf(c, 1, "%s failed (%s) before answering every request; the remaining names come from ELF symbol tables",
			      exe, strerror((int)-r));
		llvmsym_stop(c->sym, 0);
		c->sym = NULL;
	}
}

/* Resolves the wants made since the last call: binary and file address, then
 * the cache, then one symbolizer batch for the rest, then fallbacks. */
static void resolve_pending(struct ctx *c)
{
	size_t w0 = c->wants_done, r0 = c->res_done;
	if (w0 == c->nwants)
		return;
	for (size_t i = w0; i < c->nwants && !c->oom; i++)
		resolve_want(c, &c->wants[i]);
	c->st->unique_addrs = c->nwants;
	const char **paths = NULL;
	uint64_t *vaddrs = NULL;
	uint32_t *ris = NULL;
	size_t nreq = 0, nnew = c->nres - r0;
	if (nnew) {
		paths = malloc(nnew * sizeof *paths);
		vaddrs = malloc(nnew * sizeof *vaddrs);
		ris = malloc(nnew * sizeof *ris);
		if (!paths || !vaddrs || !ris) {
			c->oom = 1;
			goto out;
		}
	}
	for (size_t i = r0; i < c->nres; i++) {
		struct result *r = &c->res[i];
		if (r->kind != RES_PENDING || r->bin == NONE)
			continue;
		c->st->unique_binaddrs++;
		struct bin *b = &c->bins[r->bin];
		if (c->o->cache_dir && !b->cache_loaded)
			cache_load(c, b);
		uint32_t off = b->cbuf ? hmap_get(&b->cidx, r->vaddr, 0) : NONE;
		if (off != NONE) {
			const char *line = (const char *)b->cbuf + off;
			if (res_from_json(c, r, line, strlen(line)) == 0) {
				c->st->cache_hits++;
				continue;
			}
		}
		if (strchr(b->sym, '"') || strchr(b->sym, '\n'))
			continue; /* cannot be quoted for llvm-symbolizer: ELF fallback */
		paths[nreq] = b->sym;
		vaddrs[nreq] = r->vaddr;
		ris[nreq] = (uint32_t)i;
		nreq++;
	}
	c->st->symbolizer_requests += nreq;
	if (nreq)
		symbolizer_batch(c, nreq, paths, vaddrs, ris);
	/* fallbacks */
	for (size_t i = r0; i < c->nres && !c->oom; i++) {
		struct result *r = &c->res[i];
		if (r->bin == NONE)
			continue;
		struct bin *b = &c->bins[r->bin];
		if (r->kind == RES_PENDING) {
			if (!b->ei.has_symtab && !b->stripped_warned++)
				warnf(c, 1, "%s is stripped (no .symtab, no debug info): names from what it still has (.dynsym, .eh_frame function ranges as FILE+0xADDR), else [unknown @ ...]",
				      b->file);
			/* degraded only when a warning says why (stripped, missing
			 * symbolizer); an address outside the debug info's ranges
			 * (padding) in a binary with a symbol table is not */
			res_elf_fallback(c, r);
		} else if (r->kind == RES_SYMTAB) {
			b->n_symtab++;
		} else if (r->kind == RES_DEBUG) {
			b->n_debug++;
		}
	}
	/* runtime entries */
	for (size_t i = w0; i < c->nwants; i++) {
		struct want *w = &c->wants[i];
		if (w->ri == NONE)
			continue;
		const struct result *r = &c->res[w->ri];
		w->lev = res_levels(r);
		w->pfi = r->nf ? r->f0 + r->nf - 1 : NONE;
		if (!r->entry_vaddr)
			w->entry_rt = 0;
		else if (r->bin == NONE)
			w->entry_rt = r->entry_vaddr;
		else
			w->entry_rt = w->addr - r->vaddr + r->entry_vaddr;
	}
out:
	c->wants_done = c->nwants;
	c->res_done = c->nres;
	free(paths);
	free(vaddrs);
	free(ris);
}

/* At the end: the coprocess, notes per binary, the cache files. */
static void resolve_finish(struct ctx *c)
{
	const char *exe = c->o->symbolizer ? c->o->symbolizer : "llvm-symbolizer";
	if (c->sym) {
		int tmo = c->o->timeout_ms > 0 ? c->o->timeout_ms : 30000;
		llvmsym_stop(c->sym, tmo < 2000 ? tmo : 2000);
		c->sym = NULL;
	}
	if (c->bad_answers)
		warnf(c, 1, "%s gave %zu unusable answers; those names come from ELF symbol tables",
		      exe, c->bad_answers);
	for (size_t i = 0; i < c->nbins; i++) {
		struct bin *b = &c->bins[i];
		if (b->n_symtab && !b->n_debug)
			warnf(c, 0, "%s has no debug info: function names only, no inline frames or source lines",
			      b->file);
	}
	for (size_t i = 0; i < c->nbins; i++)
		cache_store(c, &c->bins[i]);
}

/* ---- spans and inline expansion ---- */


static inline const struct sframe *level_frame(const struct ctx *c, const struct result *r,
					       uint32_t j)
{
	return &c->frames[r->f0 + r->nf - 1 - j];
}

/* Same inlined frame at level @j: same function, same call site. */
static int level_eq(const struct ctx *c, const struct result *a, const struct result *b,
		    uint32_t j)
{
	const struct sframe *fa = level_frame(c, a, j), *fb = level_frame(c, b, j);
	const struct sframe *ca = fa + 1, *cb = fb + 1; /* the frame it is inlined into */
	return ca->line == cb->line && ca->column == cb->column &&
	       (fa->name == fb->name || !strcmp(fa->name, fb->name)) &&
	       (ca->file == cb->file || !strcmp(ca->file, cb->file));
}

static inline struct node *ND(const struct ctx *c, uint32_t id)
{
	return id & INL ? &c->inodes[id & ~INL].n : &c->spans[id].nd;
}

/* Output order of two children of one node: by begin, then end (siblings
 * never overlap, so of two that begin together one is empty, [t, t], and
 * comes first: the other may end after t), then function spans (in input
 * order) before inline frames (in creation order). */
static int node_less(const struct ctx *c, uint32_t x, uint32_t y)
{
	const struct node *nx = ND(c, x), *ny = ND(c, y);
	if (nx->begin != ny->begin)
		return nx->begin < ny->begin;
	if (nx->end != ny->end)
		return nx->end < ny->end;
	if ((x & INL) != (y & INL))
		return !(x & INL);
	return x & INL ? c->inodes[x & ~INL].seq < c->inodes[y & ~INL].seq
		       : c->spans[x].seq < c->spans[y].seq;
}

/* @child is final: into @parent's list of children to write, in order
 * (they become final almost in order: the append is the common case). */
static void ready_insert(struct ctx *c, uint32_t parent, uint32_t child)
{
	struct node *p = ND(c, parent), *ch = ND(c, child);
	ch->parent = parent;
	if (p->last_child == NONE || node_less(c, p->last_child, child)) {
		ch->next_sib = NONE;
		if (p->last_child == NONE)
			p->first_child = child;
		else
			ND(c, p->last_child)->next_sib = child;
		p->last_child = child;
		return;
	}
	uint32_t *pp = &p->first_child;
	while (!node_less(c, child, *pp))
		pp = &ND(c, *pp)->next_sib;
	ch->next_sib = *pp;
	*pp = child;
}

/* A new inline node of span @si under node @parent: its id, or NONE. */
static uint32_t inode_new(struct ctx *c, uint64_t begin, uint64_t end, uint32_t si,
			  uint32_t parent)
{
	struct inode n = {{begin, end, NONE, NONE, NONE, parent, 0}, si, NONE, 0, 0, 0, c->inode_seq++};
	uint32_t i = c->inode_free;
	if (i != NONE) {
		c->inode_free = c->inodes[i].fi;
		c->inodes[i] = n;
	} else {
		if (c->ninodes >= INL - 1 || BVEC_PUSH(c->inodes, c->ninodes, c->capinodes, n) < 0) {
			c->oom = 1;
			return NONE;
		}
		i = (uint32_t)(c->ninodes - 1);
	}
	if (++c->inodes_live > c->st->inodes_live_max)
		c->st->inodes_live_max = c->inodes_live;
	return INL | i;
}

static void inode_release(struct ctx *c, uint32_t id)
{
	uint32_t i = id & ~INL;
	c->inodes[i].fi = NONE;
	if (c->inode_free == NONE)
		c->inode_free = i;
	else
		c->inodes[c->inode_free_tail].fi = i;
	c->inode_free_tail = i;
	c->inodes_live--;
}

/* An inline frame's end is final: it joins its parent's children to write. */
static void inode_close(struct ctx *c, uint32_t id)
{
	struct inode *in = &c->inodes[id & ~INL];
	in->closed = 1;
	ready_insert(c, in->n.parent, id);
}

/* *@slot (a child's candidate attach point) = node @n: an inline frame that
 * is some unattached child's candidate stays (node_done). */
static inline void cand_set(struct ctx *c, uint32_t *slot, uint32_t n)
{
	if (*slot != NONE && (*slot & INL))
		c->inodes[*slot & ~INL].refs--;
	if (n != NONE && (n & INL))
		c->inodes[n & ~INL].refs++;
	*slot = n;
}

/* A slot for a new span (filled by the caller), or NONE. */
static uint32_t span_alloc(struct ctx *c)
{
	uint32_t i = c->span_free;
	if (i != NONE) {
		c->span_free = c->spans[i].att_next;
	} else {
		if (c->nspans >= UINT32_MAX / 4 ||
		    (c->nspans == c->capspans &&
		     bvec_grow((void **)&c->spans, &c->capspans, sizeof *c->spans) < 0))
			return NONE;
		i = (uint32_t)c->nspans++;
	}
	if (++c->spans_live > c->st->spans_live_max)
		c->st->spans_live_max = c->spans_live;
	return i;
}

static void span_release(struct ctx *c, uint32_t si)
{
	c->spans[si].att_next = NONE;
	if (c->span_free == NONE)
		c->span_free = si;
	else
		c->spans[c->span_free_tail].att_next = si;
	c->span_free_tail = si;
	c->spans_live--;
}

static uint32_t thr_of_slow(struct ctx *c, uint32_t tid);

/* The thread entry of @tid, made when new; NONE when out of memory. */
static inline uint32_t thr_of(struct ctx *c, uint32_t tid)
{
	if (c->nthrs && c->thrs[c->last_thr].tid == tid)
		return c->last_thr;
	return thr_of_slow(c, tid);
}

static uint32_t thr_of_slow(struct ctx *c, uint32_t tid)
{
	uint32_t k = hmap_put(&c->tidx, tid, 0, (uint32_t)c->nthrs);
	if (k == NONE)
		return NONE;
	if (k == c->nthrs) {
		struct thr z = {tid, NULL, 0, 0, 0, NONE, NONE};
		if (VEC_PUSH(c->thrs, c->nthrs, c->capthrs, z) < 0)
			return NONE;
	}
	c->last_thr = k;
	return k;
}

/* A span, in input order: its parent (the thread's stack of depths), its
 * (tid, depth) group, and a first guess of where it hangs under its parent. */
static void proc_span(struct ctx *c, uint32_t si)
{
	struct span *sp = &c->spans[si];
	uint32_t k = thr_of(c, sp->tid);
	if (k == NONE) {
		c->oom = 1;
		return;
	}
	struct thr *t = &c->thrs[k];
	if (sp->nd.begin < t->now)
		c->st->spans_late++; /* placed after what is written already */
	else
		t->now = sp->nd.begin;
	uint32_t parent = NONE;
	/* keep the depths below this span's and put it on top */
	while (t->n && t->stack[t->n - 1].depth >= sp->depth)
		c->spans[t->stack[--t->n].si].st &= ~(uint32_t)SP_ON_STACK;
	if (sp->depth > 0 && t->n && t->stack[t->n - 1].depth == sp->depth - 1)
		parent = t->stack[t->n - 1].si;
	if (t->n == t->cap && vec_grow((void **)&t->stack, &t->cap, sizeof *t->stack) < 0) {
		c->oom = 1;
		return;
	}
	t->stack[t->n++] = (struct stk){sp->depth, si};
	sp->st |= SP_ON_STACK;
	sp->parent = parent;

	sp->nd.first_child = sp->nd.last_child = sp->nd.next_sib = sp->nd.parent = NONE;
	sp->nd.depth = 0;
	sp->inner = si;
	if (parent == NONE) {
		sp->st |= SP_ATTACHED;
		if (VEC_PUSH(c->roots, c->nroots, c->caproots, si) < 0)
			c->oom = 1;
	} else {
		struct span *p = &c->spans[parent];
		/* children met before at an earlier time are placed for good */
		while (p->pend != NONE && c->spans[p->pend].nd.begin < sp->nd.begin)
			p->pend = c->spans[p->pend].pend_next;
		/* where the parent is now: after its last waypoint (at or before
		 * our begin); its waypoints at our begin come after us and may
		 * still move it (proc_wp) */
		sp->cand_any = sp->cand_match = NONE;
		if (p->st & SP_SEEN)
			cand_set(c, &sp->cand_any, p->inner);
		sp->pend_next = p->pend;
		p->pend = si;
		p->nun++;
		/* the attach queue (attach_ready) */
		sp->att_next = NONE;
		if (t->att_tail == NONE)
			t->att_head = si;
		else
			c->spans[t->att_tail].att_next = si;
		t->att_tail = si;
	}
}

/* The group's cursor and its span's bounds. */
static inline void grp_set_cur(const struct ctx *c, struct grp *g, uint32_t s)
{
	g->cur = s;
	g->cur_begin = s != NONE ? c->spans[s].nd.begin : 0;
	g->cur_end = s != NONE ? c->spans[s].nd.end : 0;
}

/* proc_wp: the group's cursor has passed its span's end. */
static __attribute__((noinline)) void grp_advance(struct ctx *c, struct grp *g, uint64_t time)
{
	uint32_t s = g->cur;
	while (s != NONE && c->spans[s].nd.end < time)
		s = c->spans[s].grp_next;
	grp_set_cur(c, g, s);
}

/* proc_wp: several spans live at this time (zero-length ones): the one whose
 * function (entry @e) holds the address. */
static __attribute__((noinline)) uint32_t wp_pick(struct ctx *c, struct grp *g, uint32_t s,
						   uint64_t e, uint64_t time)
{
	uint32_t t = c->spans[s].grp_next;
	for (int k = 1; t != NONE && k < 8 && c->spans[t].nd.begin <= time;
	     k++, t = c->spans[t].grp_next) {
		if (c->spans[t].func == e) {
			grp_set_cur(c, g, t);
			return t;
		}
	}
	return s;
}

/* proc_wp: the inline frames of span @s change when its inline chain does. */
static __attribute__((noinline)) void wp_inline(struct ctx *c, uint32_t s, const struct want *wt,
						uint64_t time)
{
	struct span *sp = &c->spans[s];
	uint32_t ri = wt->ri;
	/* an address outside this function says nothing about its inline frames */
	if (ri == NONE || ri == sp->last_ri || (wt->entry_rt && sp->func && wt->entry_rt != sp->func))
		return;
	const struct result *r = &c->res[ri];
	uint32_t m = res_levels(r), keep = 0;
	if (sp->nopen) {
		const struct result *cur = &c->res[sp->last_ri];
		while (keep < sp->nopen && keep < m && level_eq(c, cur, r, keep + 1))
			keep++;
	}
	while (sp->nopen > keep) {
		uint32_t n = sp->inner;
		struct node *in = ND(c, n);
		in->end = time;
		sp->inner = in->parent;
		sp->nopen--;
		inode_close(c, n);
	}
	for (uint32_t j = keep + 1; j <= m; j++) {
		uint32_t n = inode_new(c, time, sp->nd.end, s, sp->inner);
		if (n == NONE)
			return;
		sp = &c->spans[s];
		struct inode *nd = &c->inodes[n & ~INL];
		nd->fi = (uint32_t)(level_frame(c, r, j) - c->frames);
		nd->iflags = MTEV_SPAN_INLINE;
		if (time == sp->nd.begin)
			nd->iflags |= sp->flags & MTEV_SPAN_INFERRED_START;
		sp->inner = n;
		sp->nopen++;
	}
	sp->last_ri = ri;
}

/* proc_wp: children that begin now hang under the frame open after the last
 * of these waypoints, or after the one at their call site (want @w). */
static __attribute__((noinline)) void wp_pend(struct ctx *c, struct span *sp, uint32_t w,
					      uint64_t time)
{
	for (uint32_t *pp = &sp->pend; *pp != NONE;) {
		struct span *ch = &c->spans[*pp];
		if (ch->nd.begin < time) {
			*pp = ch->pend_next; /* placed for good */
			continue;
		}
		if (ch->nd.begin == time) {
			cand_set(c, &ch->cand_any, sp->inner);
			if (ch->cs_w != NONE && ch->cs_w == w)
				cand_set(c, &ch->cand_match, sp->inner);
		}
		pp = &ch->pend_next;
	}
}

/* A waypoint, in input order: the span of its thread and depth live at its
 * time; the inline frames of that span change when its inline chain does.
 * Its want is never NONE (add_waypoint). */
static inline void proc_wp(struct ctx *c, const struct witem *it)
{
	struct grp *g = &c->grps[it->g];
	uint64_t time = it->time;
	struct thr *t = &c->thrs[g->thr];
	/* earlier than a record before it of its thread: what it changes may
	 * be written already (emit_round), its inline frames then come after */
	if (__builtin_expect(time < t->now, 0))
		c->st->waypoints_late++;
	else
		t->now = time;
	if (__builtin_expect(g->cur_end < time, 0))
		grp_advance(c, g, time);
	uint32_t s = g->cur;
	if (__builtin_expect(s == NONE || g->cur_begin > time, 0)) {
		c->st->waypoints_unmatched++;
		return;
	}
	const struct want *wt = &c->wants[it->a];
	uint64_t e = wt->entry_rt;
	if (__builtin_expect(e && c->spans[s].func != e, 0))
		s = wp_pick(c, g, s, e, time);
	struct span *sp = &c->spans[s];
	sp->st |= SP_SEEN;
	/* a result without inline levels while none is open changes nothing
	 * (sp->nopen is 0 and stays 0; sp->last_ri stays at NONE or at a result
	 * without levels, which makes no difference either) */
	if (__builtin_expect((wt->lev | sp->nopen) != 0, 0)) {
		wp_inline(c, s, wt, time);
		sp = &c->spans[s];
	}
	if (__builtin_expect(sp->pend != NONE, 0))
		wp_pend(c, sp, it->a, time);
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int emit_round(struct ctx *c, mtev_writer *wr);
static uint32_t span_make(struct ctx *c, uint32_t pi);

/* Items processed between two emit_rounds (unless opts.window is set: then
 * the window): what is unsettled stays in cache even when the window is
 * large (a large symbolizer batch). */
#define CHUNK 1024u

/* Resolves the window's new addresses in one batch, then processes it, and
 * with @wr writes what settled after every CHUNK items.  0 or -MTEV_E*. */
static int proc_window(struct ctx *c, mtev_writer *wr)
{
	double t0 = cpu_now();
	resolve_pending(c);
	c->st->t_resolve += cpu_now() - t0;
	int r = 0;
	for (size_t i = 0; i < c->nwin && r == 0 && !c->oom;) {
		double t1 = cpu_now();
		size_t e = c->nwin - i > c->chunk ? i + c->chunk : c->nwin;
		for (const struct witem *it = c->win + i, *end = c->win + e; it < end; it++) {
			if (it->g != NONE) {
				proc_wp(c, it);
				continue;
			}
			uint32_t si = span_make(c, it->a);
			if (si == NONE) {
				c->oom = 1;
				break;
			}
			proc_span(c, si);
			if (c->oom)
				break;
		}
		i = e;
		c->st->t_tree += cpu_now() - t1;
		if (wr && !c->oom)
			r = emit_round(c, wr);
	}
	c->nwin = c->npsp = 0;
	return c->oom ? -MTEV_ENOMEM : r;
}

/* ---- settling (see "the unit" above) ----
 * Every test below asks whether something can still change given that the
 * thread's later records are not earlier than its now (c->fin: the unit has
 * ended, nothing can). */
static inline int before_now(const struct ctx *c, uint64_t x, uint64_t now)
{
	return c->fin || x < now;
}

/* The (tid, depth) group (a span joined its group when processed). */
static uint32_t grp_of(struct ctx *c, uint32_t tid, uint32_t depth);

static __attribute__((noinline)) int try_close_slow(struct ctx *c, uint32_t si, uint64_t now);

/* Span @si can get no more waypoints (its group's cursor has passed it):
 * its open inline frames last to its end.  1 if closed.  (One that has not
 * ended before @now is taken as open: the cursor is likely at it.) */
static inline int try_close(struct ctx *c, uint32_t si, uint64_t now)
{
	const struct span *sp = &c->spans[si];
	if (sp->st & SP_CLOSED)
		return 1;
	if (!c->fin && sp->nd.end >= now)
		return 0;
	return try_close_slow(c, si, now);
}

static int try_close_slow(struct ctx *c, uint32_t si, uint64_t now)
{
	struct span *sp = &c->spans[si];
	struct grp *g = &c->grps[grp_of(c, sp->tid, sp->depth)];
	if (c->fin) {
		grp_set_cur(c, g, NONE);
	} else {
		/* what proc_wp would do for a waypoint at @now (later ones are
		 * not earlier): skip the spans that ended before it */
		if (g->cur != NONE && g->cur_end < now)
			grp_advance(c, g, now);
		if (g->cur != NONE && c->spans[g->cur].seq <= sp->seq)
			return 0;
	}
	/* the cursor is past it: NONE, or a later span, so the group's tail
	 * is it only when the cursor is NONE (the next span to join then
	 * becomes cursor and tail: nothing links to a freed slot) */
	if (g->tail == si)
		g->tail = NONE;
	sp = &c->spans[si];
	for (uint32_t n = sp->inner; n != si;) {
		struct inode *in = &c->inodes[n & ~INL];
		uint32_t up = in->n.parent;
		in->n.end = sp->nd.end;
		in->iflags |= sp->flags & MTEV_SPAN_OPEN_AT_END;
		inode_close(c, n);
		n = up;
	}
	sp->inner = si;
	sp->nopen = 0;
	sp->st |= SP_CLOSED;
	return 1;
}

/* Attaches the children of thread @t that have a final attach point, in
 * input order: each hangs under the innermost frame of its parent that holds
 * it.  A child's candidate is final once its begin is past (no waypoint at
 * its begin can move it); an open frame's end will be at least
 * min(now, parent's end). */
static void attach_ready(struct ctx *c, struct thr *t)
{
	uint64_t now = t->now;
	while (t->att_head != NONE) {
		uint32_t si = t->att_head;
		struct span *sp = &c->spans[si];
		if (!before_now(c, sp->nd.begin, now))
			return;
		uint32_t pn = sp->parent;
		try_close(c, pn, now);
		sp = &c->spans[si];
		struct span *p = &c->spans[pn];
		uint64_t sure = p->nd.end < now ? p->nd.end : now; /* open frames end no earlier */
		uint32_t n = sp->cand_match != NONE ? sp->cand_match : sp->cand_any;
		if (n == NONE)
			n = pn;
		/* climb to a node that holds the whole child */
		while (n != pn && n != NONE) {
			const struct inode *in = &c->inodes[n & ~INL];
			int holds;
			if (in->closed)
				holds = in->n.begin <= sp->nd.begin && sp->nd.end <= in->n.end;
			else if (sp->nd.end <= sure)
				holds = in->n.begin <= sp->nd.begin;
			else
				return; /* wait for its end */
			if (holds)
				break;
			n = in->n.parent;
		}
		t->att_head = sp->att_next;
		if (t->att_head == NONE)
			t->att_tail = NONE;
		/* off the parent's list of children still looking */
		for (uint32_t *pp = &p->pend; *pp != NONE;) {
			if (*pp == si)
				*pp = sp->pend_next;
			else
				pp = &c->spans[*pp].pend_next;
		}
		p->nun--;
		cand_set(c, &sp->cand_any, NONE);
		cand_set(c, &sp->cand_match, NONE);
		sp->st |= SP_ATTACHED;
		ready_insert(c, n == NONE ? pn : n, si);
	}
}

/* ---- output ---- */
static const struct result *want_res(const struct ctx *c, uint32_t w)
{
	if (w == NONE || c->wants[w].ri == NONE)
		return NULL;
	return &c->res[c->wants[w].ri];
}

static uint64_t str_hash(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
	h ^= h >> 32;
	return h ? h : 1;
}

/* The string id of name @s, writing its string record the first time.
 * 0 or -MTEV_E*. */
static int name_sid(struct ctx *c, mtev_writer *wr, struct mtev_str s, uint32_t *sid)
{
	if ((c->nntab + 1) * 2 > c->capntab) {
		size_t nc = c->capntab ? c->capntab * 2 : 1024;
		struct nent *nt = calloc(nc, sizeof *nt);
		if (!nt)
			return -MTEV_ENOMEM;
		for (size_t i = 0; i < c->capntab; i++) {
			if (!c->ntab[i].h)
				continue;
			size_t j = c->ntab[i].h & (nc - 1);
			while (nt[j].h)
				j = (j + 1) & (nc - 1);
			nt[j] = c->ntab[i];
		}
		free(c->ntab);
		c->ntab = nt;
		c->capntab = nc;
	}
	uint64_t h = str_hash(s.p, s.len);
	size_t j = h & (c->capntab - 1);
	for (; c->ntab[j].h; j = (j + 1) & (c->capntab - 1)) {
		const struct nent *e = &c->ntab[j];
		if (e->h == h && e->len == s.len && !memcmp(e->p, s.p, s.len)) {
			*sid = e->id;
			return 0;
		}
	}
	if (!c->next_sid)
		c->next_sid = SID_BASE;
	if (c->next_sid == UINT32_MAX)
		return -MTEV_ENOMEM;
	const char *keep = arena_strndup(&c->ar, s.p, s.len);
	if (!keep)
		return -MTEV_ENOMEM;
	struct mtev_rec rec = {.kind = MTEV_STRING};
	rec.string.id = c->next_sid;
	rec.string.text = s;
	int r = mtev_write(wr, &rec);
	if (r < 0)
		return r;
	c->ntab[j] = (struct nent){h, keep, s.len, c->next_sid};
	c->nntab++;
	*sid = c->next_sid++;
	return 0;
}

/* The name of span @si and its string id into @rec.  0 or -MTEV_E*. */
static int span_name(struct ctx *c, mtev_writer *wr, uint32_t si, struct mtev_rec *rec)
{
	const struct span *sp = &c->spans[si];
	if (sp->nm) {
		rec->span.name = c->inames[sp->nm - 1];
		return name_sid(c, wr, rec->span.name, &rec->span.name_id);
	}
	if (sp->func_w == NONE || c->wants[sp->func_w].pfi == NONE)
		return 0;
	struct sframe *f = &c->frames[c->wants[sp->func_w].pfi];
	rec->span.name = (struct mtev_str){f->name, f->name_len};
	if (!f->sid) {
		int e = name_sid(c, wr, rec->span.name, &f->sid);
		if (e < 0)
			return e;
	}
	rec->span.name_id = f->sid;
	return 0;
}

/* One symbol record for each runtime address first met since the last call. */
static int write_symbols(struct ctx *c, mtev_writer *wr)
{
	struct mtev_frame *fr = NULL;
	size_t capfr = 0;
	int ret = 0;
	for (size_t i = c->wants_written; i < c->nwants && !ret; i++) {
		const struct want *w = &c->wants[i];
		const struct result *r = want_res(c, (uint32_t)i);
		if (!r || !r->nf)
			continue;
		if (hmap_get(&c->sym_seen, w->addr, 0) != NONE)
			continue;
		if (hmap_put(&c->sym_seen, w->addr, 0, 0) == NONE) {
			ret = -MTEV_ENOMEM;
			break;
		}
		if (r->nf > capfr) {
			capfr = r->nf * 2;
			struct mtev_frame *nf = realloc(fr, capfr * sizeof *nf);
			if (!nf) {
				ret = -MTEV_ENOMEM;
				break;
			}
			fr = nf;
		}
		for (uint32_t j = 0; j < r->nf; j++) {
			const struct sframe *f = &c->frames[r->f0 + j];
			fr[j] = (struct mtev_frame){{f->name, f->name_len}, {f->file, f->file_len}, f->line,
						    f->column};
		}
		struct mtev_rec rec = {.kind = MTEV_SYMBOL};
		rec.symbol.addr = w->addr;
		rec.symbol.entry = w->entry_rt;
		rec.symbol.nframes = r->nf;
		rec.symbol.frames = fr;
		ret = mtev_write(wr, &rec);
		c->st->symbols_out++;
	}
	c->wants_written = c->nwants;
	free(fr);
	return ret;
}

/* Writes node @x (its depth set). */
static int emit_node(struct ctx *c, mtev_writer *wr, uint32_t x)
{
	const struct node *nd = ND(c, x);
	const struct inode *in = x & INL ? &c->inodes[x & ~INL] : NULL;
	uint32_t si = in ? in->si : x;
	const struct span *sp = &c->spans[si];
	struct mtev_rec rec = {.kind = MTEV_SPAN};
	int r;
	rec.span.tid = sp->tid;
	rec.span.depth = nd->depth;
	rec.span.begin = nd->begin;
	rec.span.end = nd->end;
	if (!in) {
		rec.span.func = sp->func;
		rec.span.callsite = sp->cs_w != NONE ? c->wants[sp->cs_w].addr : 0;
		rec.span.flags = sp->flags;
		if ((r = span_name(c, wr, si, &rec)) < 0)
			return r;
	} else {
		struct sframe *f = &c->frames[in->fi];
		/* input out of time order can close a frame before it opened, or
		 * open it after its span ended: an empty frame, not a bad record */
		if (rec.span.end < rec.span.begin)
			rec.span.end = rec.span.begin;
		rec.span.flags = in->iflags;
		rec.span.name = (struct mtev_str){f->name, f->name_len};
		if (!f->sid && (r = name_sid(c, wr, rec.span.name, &f->sid)) < 0)
			return r;
		rec.span.name_id = f->sid;
		c->st->inline_spans++;
	}
	if ((r = mtev_write(wr, &rec)) < 0)
		return r;
	c->st->spans_out++;
	return 0;
}

/* The open inline frame of span @si whose parent is node @x, or NONE. */
static uint32_t open_child(const struct ctx *c, uint32_t si, uint32_t x)
{
	const struct span *sp = &c->spans[si];
	if (!sp->nopen)
		return NONE;
	for (uint32_t n = sp->inner; n != si;) {
		uint32_t up = c->inodes[n & ~INL].n.parent;
		if (up == x)
			return n;
		n = up;
	}
	return NONE;
}

static int path_push(struct ctx *c, uint32_t x)
{
	if (c->npath == c->cappath && vec_grow((void **)&c->path, &c->cappath, sizeof *c->path) < 0)
		return -MTEV_ENOMEM;
	c->path[c->npath++] = x;
	return 0;
}

/* Node @x (of span @si), written, with no child left to write, can get no
 * more children: no later node can begin before @lim. */
static int node_done(struct ctx *c, uint32_t x, uint32_t si, uint64_t lim)
{
	if (x & INL) {
		const struct inode *in = &c->inodes[x & ~INL];
		return in->closed && !in->refs && before_now(c, in->n.end, lim);
	}
	const struct span *sp = &c->spans[si];
	return !(sp->st & SP_ON_STACK) && (sp->st & SP_CLOSED) && !sp->nun;
}

/* A written node is done: its slot is free. */
static void node_release(struct ctx *c, uint32_t x)
{
	if (x & INL) {
		inode_release(c, x);
		return;
	}
	span_release(c, x); /* its group forgot it (try_close_slow) */
}

/* Writes what has settled: symbol records for the addresses met so far,
 * then the current root's tree in pre-order (then the next root's, in input
 * order) as far as every node written is final and no node still to come can
 * precede it; frees what is written and done.  0 or -MTEV_E*. */
static int emit_round(struct ctx *c, mtev_writer *wr)
{
	double t0 = cpu_now();
	int r = write_symbols(c, wr);
	for (size_t k = 0; k < c->nthrs; k++)
		attach_ready(c, &c->thrs[k]);
	double t1 = cpu_now();
	c->st->t_tree += t1 - t0;
	/* the tree's thread: its now, and lim: no node still to come (nor an
	 * unattached child) begins before it (both fixed during the round) */
	uint64_t now = 0, lim = 0;
	int have_lim = 0;
	while (r == 0 && !c->oom) {
		if (!c->npath) {
			if (c->root_head == c->nroots) {
				c->root_head = c->nroots = 0;
				break;
			}
			uint32_t root = c->roots[c->root_head++];
			struct span *sp = &c->spans[root];
			c->path_thr = hmap_get(&c->tidx, sp->tid, 0);
			have_lim = 0;
			sp->nd.depth = sp->depth;
			if ((r = emit_node(c, wr, root)) == 0)
				r = path_push(c, root);
			continue;
		}
		if (!have_lim) {
			const struct thr *t = &c->thrs[c->path_thr];
			now = lim = t->now;
			if (t->att_head != NONE && c->spans[t->att_head].nd.begin < lim)
				lim = c->spans[t->att_head].nd.begin;
			have_lim = 1;
		}
		uint32_t x = c->path[c->npath - 1];
		uint32_t si = x & INL ? c->inodes[x & ~INL].si : x;
		try_close(c, si, now);
		struct node *nd = ND(c, x);
		uint32_t ch = nd->first_child, o = open_child(c, si, x);
		if (ch != NONE && before_now(c, ND(c, ch)->begin, lim) &&
		    (o == NONE || ND(c, o)->begin > ND(c, ch)->begin)) {
			struct node *cn = ND(c, ch);
			nd->first_child = cn->next_sib;
			if (nd->first_child == NONE)
				nd->last_child = NONE;
			cn->depth = nd->depth + 1;
			if ((r = emit_node(c, wr, ch)) < 0)
				break;
			/* a leaf that is done already need not be visited */
			if (!(ch & INL)) {
				const struct span *cs = &c->spans[ch];
				if (cs->nd.first_child == NONE && !cs->nopen && !cs->nun &&
				    !(cs->st & SP_ON_STACK) && try_close(c, ch, now)) {
					node_release(c, ch);
					continue;
				}
			}
			r = path_push(c, ch);
			continue;
		}
		if (ch == NONE && o == NONE && node_done(c, x, si, lim)) {
			c->npath--;
			node_release(c, x);
			continue;
		}
		break;
	}
	if (c->oom && r == 0)
		r = -MTEV_ENOMEM;
	c->st->t_write += cpu_now() - t1;
	return r;
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
	free(c->inames);
	free(c->itab);
	free(c->path);
	free(c->ntab);
	free(c->jf);
	free(c->js);
	hmap_fini(&c->sym_seen);
	hmap_fini(&c->tid2pid);
	free(c->pids);
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

/* The input name @p[0..@n) interned: its index + 1 in c->inames, or 0 when
 * out of memory. */
static uint32_t iname_get(struct ctx *c, const char *p, size_t n)
{
	if ((c->ninames + 1) * 2 > c->capitab) {
		size_t nc = c->capitab ? c->capitab * 2 : 64;
		struct nent *nt = calloc(nc, sizeof *nt);
		if (!nt)
			return 0;
		for (size_t i = 0; i < c->capitab; i++) {
			if (!c->itab[i].h)
				continue;
			size_t j = c->itab[i].h & (nc - 1);
			while (nt[j].h)
				j = (j + 1) & (nc - 1);
			nt[j] = c->itab[i];
		}
		free(c->itab);
		c->itab = nt;
		c->capitab = nc;
	}
	uint64_t h = str_hash(p, n);
	size_t j = h & (c->capitab - 1);
	for (; c->itab[j].h; j = (j + 1) & (c->capitab - 1)) {
		const struct nent *e = &c->itab[j];
		if (e->h == h && e->len == n && !memcmp(e->p, p, n))
			return e->id;
	}
	const char *keep = arena_strndup(&c->ar, p, n);
	struct mtev_str ms = {keep, n};
	if (!keep || c->ninames >= NONE - 1 || VEC_PUSH(c->inames, c->ninames, c->capinames, ms) < 0)
		return 0;
	c->itab[j] = (struct nent){h, keep, (uint32_t)n, (uint32_t)c->ninames};
	return (uint32_t)c->ninames;
}

static int add_span(struct ctx *c, const struct mtev_rec *rec)
{
	struct pspan s = {rec->span.begin, rec->span.end, rec->span.func, c->span_seq++,
			  rec->span.tid, rec->span.depth, rec->span.flags, 0, NONE, NONE};
	if (rec->span.name.len && !(s.nm = iname_get(c, rec->span.name.p, rec->span.name.len)))
		return -1;
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

static uint32_t grp_of_slow(struct ctx *c, uint32_t tid, uint32_t depth)
{
	uint32_t g = hmap_put(&c->gidx, tid, depth, (uint32_t)c->ngrps);
	if (g == NONE)
		return NONE;
	if (g == c->ngrps) {
		struct grp z = {NONE, NONE, 0, 0, thr_of(c, tid)};
		if (z.thr == NONE || VEC_PUSH(c->grps, c->ngrps, c->capgrps, z) < 0)
			return NONE;
	}
	return g;
}

/* grp_of when the last lookup was another group: the unit's first thread
 * has a table by depth in front of the hash. */
static uint32_t grp_of_miss(struct ctx *c, uint32_t tid, uint32_t depth)
{
	uint32_t g = NONE;
	if (!c->gd_set) {
		c->gd_set = 1;
		c->gd_tid = tid;
	}
	if (tid != c->gd_tid || depth >= (1u << 20)) {
		g = grp_of_slow(c, tid, depth);
		goto out;
	}
	if (depth < c->gdep_used && c->gdep[depth]) {
		g = c->gdep[depth] - 1;
		goto out;
	}
	if (depth >= c->capgdep) {
		size_t nc = c->capgdep ? c->capgdep : 64;
		while (nc <= depth)
			nc *= 2;
		uint32_t *nb = realloc(c->gdep, nc * sizeof *nb);
		if (!nb)
			return NONE;
		c->gdep = nb;
		c->capgdep = nc;
	}
	if (depth >= c->gdep_used) {
		memset(c->gdep + c->gdep_used, 0, (depth + 1 - c->gdep_used) * sizeof *c->gdep);
		c->gdep_used = depth + 1;
	}
	g = grp_of_slow(c, tid, depth);
	if (g != NONE)
		c->gdep[depth] = g + 1;
out:
	c->last_gtid = tid;
	c->last_gdepth = depth;
	c->last_g = g;
	return g;
}

/* The (tid, depth) group, created when new; NONE when out of memory. */
static inline uint32_t grp_of(struct ctx *c, uint32_t tid, uint32_t depth)
{
	if (tid == c->gd_tid && depth < c->gdep_used && c->gdep[depth]) /* gdep_used: gd_set */
		return c->gdep[depth] - 1;
	if (tid == c->last_gtid && depth == c->last_gdepth && c->last_g != NONE)
		return c->last_g;
	return grp_of_miss(c, tid, depth);
}

static inline int add_waypoint(struct ctx *c, const struct mtev_rec *rec)
{
	uint32_t tid = rec->waypoint.tid;
	uint32_t g = grp_of(c, tid, rec->waypoint.depth);
	if (g == NONE)
		return -1;
	uint32_t w = want_get(c, tid, rec->waypoint.addr);
	if (w == NONE)
		return -1;
	if (c->nwin == c->capwin && bvec_grow((void **)&c->win, &c->capwin, sizeof *c->win) < 0)
		return -1;
	c->win[c->nwin++] = (struct witem){rec->waypoint.time, w, g};
	if (tid != c->unit_tid) /* NONE: the first; else several threads */
		c->unit_tid = c->unit_tid == NONE ? tid : UNIT_MULTI;
	return 0;
}

/* The group of a span (spans join their group when read, so that proc_wp
 * sees every span that begins at or before a waypoint's time). */
static int span_group(struct ctx *c, uint32_t si)
{
	const struct span *sp = &c->spans[si];
	uint32_t g = grp_of(c, sp->tid, sp->depth);
	if (g == NONE)
		return -1;
	struct grp *gp = &c->grps[g];
	if (gp->tail != NONE)
		c->spans[gp->tail].grp_next = si;
	gp->tail = si;
	if (gp->cur == NONE)
		grp_set_cur(c, gp, si);
	return 0;
}

/* The span of window item @pi (read, not yet processed): its slot, in its
 * (tid, depth) group; NONE when out of memory.  (A span joins its group when
 * processed, not when read: in time order no earlier waypoint falls in it.) */
static uint32_t span_make(struct ctx *c, uint32_t pi)
{
	const struct pspan *p = &c->psp[pi];
	struct span s = {.nd = {p->begin, p->end, NONE, NONE, NONE, NONE, 0},
			 .func = p->func,
			 .grp_next = NONE,
			 .nopen = 0,
			 .pend = NONE,
			 .st = 0,
			 .seq = p->seq,
			 .tid = p->tid,
			 .depth = p->depth,
			 .flags = p->flags,
			 .nm = p->nm,
			 .func_w = p->func_w,
			 .cs_w = p->cs_w,
			 .inner = NONE,
			 .last_ri = NONE,
			 .parent = NONE,
			 .cand_any = NONE,
			 .cand_match = NONE,
			 .pend_next = NONE,
			 .nun = 0,
			 .att_next = NONE};
	uint32_t si = span_alloc(c);
	if (si == NONE)
		return NONE;
	c->spans[si] = s;
	if (span_group(c, si) < 0)
		return NONE;
	return si;
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
	mtev_writer *wr = mtev_writer_alloc(out_fd, "mt-symbolize", flags | MTEV_F_SYMBOLS, &err);
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
	while ((r = mtev_read(rd, &rec)) > 0) {
		int w = 0;
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
		switch (rec.kind) {
		case MTEV_SPAN:
			/* a new root of the same thread after everything before it
			 * ended: what came before is complete */
			if (rec.span.depth == 0 && c.span_seq && c.unit_tid == rec.span.tid &&
			    rec.span.begin > c.unit_end)
				w = unit_flush(&c, wr);
			c.any_span = 1;
			if (w == 0 && add_span(&c, &rec) < 0)
				c.oom = 1;
			break;
		case MTEV_WAYPOINT:
			c.any_span = 1;
			if (add_waypoint(&c, &rec) < 0)
				c.oom = 1;
			break;
		case MTEV_SYMBOL: /* replaced by ours */
			break;
		case MTEV_STRING:
			if (rec.string.id < SID_BASE) /* else a name of ours (a previous run's) */
				w = mtev_write(wr, &rec);
			break;
		case MTEV_SEGMENT:
		case MTEV_GAP:
			/* producers write a segment's (or thread's) spans and
			 * waypoints together: what came before is complete */
			w = unit_flush(&c, wr);
			if (w == 0)
				w = mtev_write(wr, &rec);
			break;
		case MTEV_BRANCH:
			if (!c.any_span && !(flags & MTEV_F_SPANS)) {
				ret = fail(st, SYMZ_EINPUT,
					   "input has no spans (branch records, flag 'spans' unset): run mt-segment before mt-symbolize");
				goto out;
			}
			w = mtev_write(wr, &rec);
			break;
		case MTEV_THREAD: {
			if (hmap_put(&c.tid2pid, rec.thread.tid, 0, rec.thread.pid) == NONE)
				c.oom = 1;
			size_t k = 0;
			while (k < c.npids && c.pids[k] != rec.thread.pid)
				k++;
			if (k == c.npids && VEC_PUSH(c.pids, c.npids, c.cappids, rec.thread.pid) < 0)
				c.oom = 1;
			w = mtev_write(wr, &rec);
			break;
		}
		case MTEV_MAP: {
			struct map m = {rec.map.pid, rec.map.time, rec.map.start, rec.map.len,
					rec.map.pgoff, NONE, NULL};
			m.path = arena_strndup(&c.ar, rec.map.path.p, rec.map.path.len);
			if (!m.path) {
				c.oom = 1;
				break;
			}
			if (is_file_backed(m.path))
				m.bin = bin_get(&c, rec.map.path.p, rec.map.path.len, rec.map.build_id,
						rec.map.build_id_len);
			if (VEC_PUSH(c.maps, c.nmaps, c.capmaps, m) < 0)
				c.oom = 1;
			w = mtev_write(wr, &rec);
			break;
		}
		default:
			w = mtev_write(wr, &rec);
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

int symz_default_cache_dir(char *out, size_t cap)
{
	const char *x = getenv("XDG_CACHE_HOME");
	int n;
	if (x && *x)
		n = snprintf(out, cap, "%s/mt", x);
	else if ((x = getenv("HOME")) && *x)
		n = snprintf(out, cap, "%s/.cache/mt", x);
	else
		return -1;
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}
