/* symz.h: mt-symbolize's modules and the state of one run (private to
 * libcommon/symbolize.c and libcommon/symz_*.c; the API is symbolize.h).
 *
 * Data flows one way.  symbolize.c reads records into a window (spans and
 * waypoints, their addresses as "wants"); symz_resolve.c names the window's
 * new addresses (symz_bin.c finds the binary, symz_cache.c and one
 * llvm-symbolizer batch answer, symz_json.c reads the replies, symz_perfmap.c
 * and symz_names.c name what has no debug info); symz_tree.c builds the
 * output tree (spans, inline frames from waypoints); symz_settle.c decides
 * what can no longer change; symz_emit.c writes that and frees it. */
#ifndef MT_SYMZ_H
#define MT_SYMZ_H

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "elfinfo.h"
#include "hmap.h"
#include "strpool.h"
#include "llvmsym.h"
#include "mtev.h"
#include "symbolize.h"
#include "vec.h"

#define NONE UINT32_MAX
/* Window size: addresses are resolved once per window (one symbolizer
 * batch); its spans take a slot only when processed (span_make), and what
 * settled is written every CHUNK items, so its size does not change what is
 * held. */
#define WINDOW (1u << 16)
/* Items processed between two emit_rounds (unless opts.window is set: then
 * the window): what is unsettled stays in cache even when the window is
 * large (a large symbolizer batch). */
#define CHUNK 1024u
#define UNIT_MULTI (UINT32_MAX - 1)

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

/* ---- growable arrays ---- */
/* Appends to a growable array (vec.h's mt_grow): 0, or -1 out of memory. */
#define VEC_PUSH(arr, n, cap, ...)                                                                 \
	((n) < (cap) || mt_grow((void **)&(arr), &(cap), (n) + 1, sizeof *(arr)) == 0             \
		 ? ((arr)[(n)++] = (__VA_ARGS__), 0)                                               \
		 : -1)

/* Large arrays (per event): anonymous mappings grown with mremap, which
 * neither copies nor faults the pages in again (no transparent huge pages:
 * vec.h says why). */
static inline int bvec_grow(void **arr, size_t *cap, size_t elem)
{
	size_t nc = *cap ? *cap * 2 : ((size_t)2 << 20) / elem;
	size_t ob = *cap * elem, nb = nc * elem;
	void *p = *arr ? mremap(*arr, ob, nb, MREMAP_MAYMOVE)
		       : mmap(NULL, nb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	*arr = p;
	*cap = nc;
	return 0;
}

static inline void bvec_free(void *p, size_t cap, size_t elem)
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
	uint64_t owner_rt; /* the same, or for a ".cold" part (gcc's hot/cold
			    * split) the entry of the function it belongs to */
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
	int vdso; /* the kernel's [vdso], found by build-id: .dynsym is all it has */
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
	uint32_t nm;	   /* input name: number + 1 in c->inames, or 0 */
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
	struct strpool inames; /* input span names */
	uint32_t unit_tid; /* NONE: no span yet; UNIT_MULTI: several threads */
	uint64_t unit_end; /* latest end of its spans */
	int any_span; /* a span or waypoint was seen */
	struct jframe *jf; /* one reply's frames */
	size_t capjf;
	char *js; /* one reply's strings, decoded */
	size_t capjs;
	struct strpool onames; /* output span names: number + SID_BASE = string id */
	int oom;
	size_t window; /* o->window, else WINDOW */
	size_t chunk;  /* o->window, else CHUNK */
	size_t bug; /* unit_flush left this many nodes unwritten */
	int unmapped_warned, anon_warned, symbolizer_warned;
	char *(*demangle)(const char *, char *, size_t *, int *);
};

/* The value of the hex digit @ch (either case), or -1: a table (the cache
 * index reads every address of the cache file through it). */
#define HEXD_(b) ['0' + (b)] = (b) + 1
#define HEXL_(b) ['a' + (b)] = (b) + 11, ['A' + (b)] = (b) + 11
static const int8_t hex_digit_1[256] = {HEXD_(0), HEXD_(1), HEXD_(2), HEXD_(3), HEXD_(4),
					HEXD_(5), HEXD_(6), HEXD_(7), HEXD_(8), HEXD_(9),
					HEXL_(0), HEXL_(1), HEXL_(2), HEXL_(3), HEXL_(4),
					HEXL_(5)}; /* value + 1; 0: not a digit */
#undef HEXD_
#undef HEXL_
static inline int hex_digit(unsigned ch)
{
	return ch < 256 ? hex_digit_1[ch] - 1 : -1;
}

static inline const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s && s[1] ? s + 1 : p;
}

/* symbolize.c */
/* snprintf that truncates silently (names and messages have no hard limit). */
void sfmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A warning to o->warn; @degraded: it degrades the output (exit 1). */
void warnf(struct ctx *c, int degraded, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Monotonic seconds (the -s phase times). */
double cpu_now(void);

/* symz_names.c */
/* Rust legacy names after an Itanium demangler: the hash suffix and $..$
 * escapes tidied in place; the new length. */
size_t rust_tidy(char *s, size_t n);
/* @name demangled (libstdc++'s __cxa_demangle, dlopen'ed), in the arena;
 * @name itself when it is not mangled or no demangler is there. */
const char *demangle(struct ctx *c, const char *name);

/* symz_bin.c */
/* The binary of a map record (made on first sight), or NONE (out of memory). */
uint32_t bin_get(struct ctx *c, const char *path, size_t plen, const uint8_t *bid,
			uint8_t bidlen);
/* A map path that names a file (not [heap], //anon, memfd: ...). */
int is_file_backed(const char *p);
int vdso_saved(const char *p, const uint8_t *bid, uint8_t bidlen);
/* Finds @b's file (docs/symbolize.md, Finding the binary): b->state 1 and
 * b->file, or -1 with one warning. */
void bin_find(struct ctx *c, struct bin *b);
/* @b's ELF symbols, loaded on first need. */
const struct elfinfo *bin_syms(struct bin *b);

/* symz_perfmap.c */
/* perf-@pid.map, read on first need (loaded = 0: none), or NULL (out of memory). */
struct perfmap *perfmap_get(struct ctx *c, uint32_t pid);
/* The entry holding @addr, or NULL. */
const struct perfmap_ent *perfmap_lookup(const struct perfmap *pm, uint64_t addr);

/* symz_json.c */
/* Fills @r from one llvm-symbolizer JSON reply.  0 ok (possibly with no
 * name: r->kind stays PENDING), -1 when the reply is an error or unparsable. */
int res_from_json(struct ctx *c, struct result *r, const char *line, size_t len);

/* symz_cache.c */
/* @b's cache file, read and indexed once (nothing without a build-id). */
void cache_load(struct ctx *c, struct bin *b);
/* Merges this run's new replies into @b's cache file (write, rename). */
void cache_store(struct ctx *c, struct bin *b);

/* symz_resolve.c */
/* The want table, allocated: 0 or -1. */
int wtab_init(struct wtab *t);
/* Appends a frame to c->frames: its index, or NONE (out of memory). */
uint32_t frame_push(struct ctx *c, const char *name, const char *file, uint32_t line,
			   uint32_t col);
/* Resolves the wants added since the last call (cache, one symbolizer
 * batch, fallbacks). */
void resolve_pending(struct ctx *c);
/* The end of the run: the symbolizer stopped, warnings (unusable answers,
 * binaries without debug info), cache files written. */
void resolve_finish(struct ctx *c);

/* symz_tree.c */
/* The (tid, depth) group, made if new (grp_of's slow path), or NONE. */
uint32_t grp_of_miss(struct ctx *c, uint32_t tid, uint32_t depth);
void inode_release(struct ctx *c, uint32_t id);
void inode_close(struct ctx *c, uint32_t id);
/* Resolves the window's new addresses in one batch, then processes it, and
 * with @wr writes what settled after every CHUNK items.  0 or -MTEV_E*. */
int proc_window(struct ctx *c, mtev_writer *wr);
__attribute__((noinline)) void grp_advance(struct ctx *c, struct grp *g, uint64_t time);

/* symz_settle.c */
/* Span @si can get no more waypoints: its inline frames end.  1 if closed. */
int try_close_slow(struct ctx *c, uint32_t si, uint64_t now);
/* Hangs the children of @t whose place is final under their parents. */
void attach_ready(struct ctx *c, struct thr *t);

/* symz_emit.c */
/* Writes what has settled, frees what is done.  0 or -MTEV_E*. */
int emit_round(struct ctx *c, mtev_writer *wr);

/* the slow paths of the inline functions below */
uint32_t want_get_slow(struct ctx *c, struct wslot *e, uint32_t tid, uint64_t addr);
uint32_t thr_of_slow(struct ctx *c, uint32_t tid);
uint32_t wp_pick(struct ctx *c, struct grp *g, uint32_t s, uint64_t e, uint64_t time);
void wp_inline(struct ctx *c, uint32_t s, const struct want *wt, uint64_t time);
void wp_pend(struct ctx *c, struct span *sp, uint32_t w, uint64_t time);

static inline uint32_t res_levels(const struct result *r)
{
	return r->nf ? r->nf - 1 : 0;
}

static inline uint32_t want_get(struct ctx *c, uint32_t tid, uint64_t addr)
{
	struct wslot *e = &c->wmemo[addr & (WMEMO - 1)];
	if (e->addr == addr && e->tid == tid && e->w1 != NONE)
		return e->w1;
	return want_get_slow(c, e, tid, addr);
}

static inline struct node *ND(const struct ctx *c, uint32_t id)
{
	return id & INL ? &c->inodes[id & ~INL].n : &c->spans[id].nd;
}

static inline void cand_set(struct ctx *c, uint32_t *slot, uint32_t n)
{
	if (*slot != NONE && (*slot & INL))
		c->inodes[*slot & ~INL].refs--;
	if (n != NONE && (n & INL))
		c->inodes[n & ~INL].refs++;
	*slot = n;
}

static inline void grp_set_cur(const struct ctx *c, struct grp *g, uint32_t s)
{
	g->cur = s;
	g->cur_begin = s != NONE ? c->spans[s].nd.begin : 0;
	g->cur_end = s != NONE ? c->spans[s].nd.end : 0;
}

static inline uint32_t thr_of(struct ctx *c, uint32_t tid)
{
	if (c->nthrs && c->thrs[c->last_thr].tid == tid)
		return c->last_thr;
	return thr_of_slow(c, tid);
}

static inline int before_now(const struct ctx *c, uint64_t x, uint64_t now)
{
	return c->fin || x < now;
}

static inline int try_close(struct ctx *c, uint32_t si, uint64_t now)
{
	const struct span *sp = &c->spans[si];
	if (sp->st & SP_CLOSED)
		return 1;
	if (!c->fin && sp->nd.end >= now)
		return 0;
	return try_close_slow(c, si, now);
}

/* Output order of two children of one node: by begin, then end (siblings
 * never overlap, so of two that begin together one is empty, [t, t], and
 * comes first: the other may end after t), then function spans (in input
 * order) before inline frames (in creation order). */
static inline int node_less(const struct ctx *c, uint32_t x, uint32_t y)
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
static inline void ready_insert(struct ctx *c, uint32_t parent, uint32_t child)
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

static inline void span_release(struct ctx *c, uint32_t si)
{
	c->spans[si].att_next = NONE;
	if (c->span_free == NONE)
		c->span_free = si;
	else
		c->spans[c->span_free_tail].att_next = si;
	c->span_free_tail = si;
	c->spans_live--;
}

static inline uint32_t grp_of(struct ctx *c, uint32_t tid, uint32_t depth)
{
	if (tid == c->gd_tid && depth < c->gdep_used && c->gdep[depth]) /* gdep_used: gd_set */
		return c->gdep[depth] - 1;
	if (tid == c->last_gtid && depth == c->last_gdepth && c->last_g != NONE)
		return c->last_g;
	return grp_of_miss(c, tid, depth);
}

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

#endif
