#include "symbolize.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include "io.h"
#include "llvmsym.h"
#include "mtev.h"

#define NONE UINT32_MAX

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
struct hmap {
	uint64_t *k; /* 2 per slot */
	uint32_t *v; /* value + 1; 0 = empty */
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
	uint64_t *nk = malloc(nc * 2 * sizeof *nk);
	uint32_t *nv = calloc(nc, sizeof *nv);
	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->v[i])
			continue;
		size_t j = hslot(m->k[2 * i], m->k[2 * i + 1], nc - 1);
		while (nv[j])
			j = (j + 1) & (nc - 1);
		nk[2 * j] = m->k[2 * i];
		nk[2 * j + 1] = m->k[2 * i + 1];
		nv[j] = m->v[i];
	}
	free(m->k);
	free(m->v);
	m->k = nk;
	m->v = nv;
	m->cap = nc;
	return 0;
}

/* The value for (a, b), or NONE. */
static uint32_t hmap_get(const struct hmap *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return NONE;
	size_t j = hslot(a, b, m->cap - 1);
	while (m->v[j]) {
		if (m->k[2 * j] == a && m->k[2 * j + 1] == b)
			return m->v[j] - 1;
		j = (j + 1) & (m->cap - 1);
	}
	return NONE;
}

/* Inserts (a, b) -> val unless present.  Returns the stored value, or NONE on
 * allocation failure. */
static uint32_t hmap_put(struct hmap *m, uint64_t a, uint64_t b, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap && hmap_grow(m) < 0)
		return NONE;
	size_t j = hslot(a, b, m->cap - 1);
	while (m->v[j]) {
		if (m->k[2 * j] == a && m->k[2 * j + 1] == b)
			return m->v[j] - 1;
		j = (j + 1) & (m->cap - 1);
	}
	m->k[2 * j] = a;
	m->k[2 * j + 1] = b;
	m->v[j] = val + 1;
	m->n++;
	return val;
}

static void hmap_fini(struct hmap *m)
{
	free(m->k);
	free(m->v);
	memset(m, 0, sizeof *m);
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

static void *bvec_alloc(size_t *cap, size_t n, size_t elem)
{
	void *p = NULL;
	*cap = 0;
	while (*cap < n)
		if (bvec_grow(&p, cap, elem) < 0) {
			if (p)
				munmap(p, *cap * elem);
			return NULL;
		}
	return p;
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
	uint32_t tid;
	uint64_t addr;
	uint32_t ri;	   /* result */
	uint64_t entry_rt; /* runtime entry of the physical function, 0 unknown */
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
	char *file;
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

struct span {
	uint32_t tid, depth, flags;
	uint64_t begin, end, func, callsite;
	const char *name; /* input name (arena) or NULL */
	uint32_t name_len;
	uint32_t func_w, cs_w; /* wants, or NONE */
	uint32_t wp_first, wp_last; /* positions in wporder, NONE if no waypoints */
};

struct wp {
	uint64_t time;
	uint32_t w;
	uint32_t grp; /* (tid, depth) group while reading; the input order while sorting */
};

struct node { /* spans 0..nspans-1, then inline frames */
	uint64_t begin, end;
	uint32_t first_child, last_child, next_sib, parent;
	uint32_t depth;
};

struct inl {
	uint32_t fi; /* the frame it names */
	uint32_t tid, flags;
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

struct thr {
	uint32_t tid;
	uint32_t *stack;
	size_t n, cap;
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
	struct hmap want_idx;
	struct result *res;
	size_t nres, capres;
	struct hmap res_idx;
	struct sframe *frames;
	size_t nframes, capframes;
	struct perfmap *pmaps;
	size_t npmaps, cappmaps;
	struct span *spans;
	size_t nspans, capspans;
	struct wp *wps;
	size_t nwps, capwps;
	struct hmap gidx;    /* (tid, depth) -> waypoint group */
	uint32_t *gcount;    /* waypoints per group */
	size_t ng, capg;
	uint64_t last_gkey[2];
	uint32_t last_g;
	uint32_t *wp_span;   /* per waypoint: its span, or NONE */
	uint32_t *wp_node;   /* per waypoint: the innermost node open after it */
	size_t cap_wp_span, cap_wp_node;
	struct node *nodes;
	size_t nnodes, capnodes;
	struct inl *inls; /* nodes[nspans + i] */
	size_t ninls, capinls;
	struct nent *ntab; /* name -> string id */
	size_t nntab, capntab;
	uint32_t next_sid;
	int oom;
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

/* ---- demangling for names that do not come from llvm-symbolizer ---- */
static const char *demangle(struct ctx *c, const char *name)
{
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
	const char *r = arena_strndup(&c->ar, d, strlen(d));
	free(d);
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

/* Is @file the binary @b wants (build-id check)?  1 yes, 0 no (*found_bid set). */
static int bin_candidate(struct bin *b, const char *file, uint8_t found[20], int *found_len)
{
	struct stat sb;
	if (stat(file, &sb) < 0 || !S_ISREG(sb.st_mode))
		return 0;
	int n = elf_read_build_id(file, found);
	*found_len = n;
	if (n < 0)
		return 0;
	if (!b->bidlen)
		return 1;
	return n == b->bidlen && !memcmp(found, b->bid, (size_t)n);
}

static void bin_find(struct ctx *c, struct bin *b)
{
	char cand[8][4200];
	int nc = 0;
	const struct symz_opts *o = c->o;
	if (o->images) {
		if (b->bidlen) {
			/* perf's build-id cache layout (mt-ptsim's images/) */
			sfmt(cand[nc++], sizeof cand[0], "%s/.build-id/%.2s/%s/elf", o->images,
			     b->bidhex, b->bidhex + 2);
			sfmt(cand[nc++], sizeof cand[0], "%s%s%s/%s/elf", o->images,
			     b->path[0] == '/' ? "" : "/", b->path, b->bidhex);
			sfmt(cand[nc++], sizeof cand[0], "%s/%s", o->images, b->bidhex);
		}
		sfmt(cand[nc++], sizeof cand[0], "%s%s%s", o->images, b->path[0] == '/' ? "" : "/",
		     b->path);
		sfmt(cand[nc++], sizeof cand[0], "%s/%s", o->images, base_name(b->path));
	}
	if (o->symfs)
		sfmt(cand[nc++], sizeof cand[0], "%s%s", o->symfs, b->path);
	sfmt(cand[nc++], sizeof cand[0], "%s", b->path);
	char why[600] = "";
	for (int i = 0; i < nc; i++) {
		uint8_t found[20];
		int flen = -1;
		if (bin_candidate(b, cand[i], found, &flen)) {
			int r = elfinfo_load_nosyms(&b->ei, cand[i]);
			if (r < 0) {
				sfmt(why, sizeof why, "%s: %s", cand[i],
					 r == -ENOEXEC ? "not an ELF file" : strerror(-r));
				continue;
			}
			b->file = arena_strndup(&c->ar, cand[i], strlen(cand[i]));
			b->state = b->file ? 1 : -1;
			if (b->state > 0 && !b->bidlen && b->ei.build_id_len) {
				/* the cache is keyed by build-id: take the file's own */
				memcpy(b->bid, b->ei.build_id, b->ei.build_id_len);
				b->bidlen = b->ei.build_id_len;
				buildid_hex(b->bidhex, b->bid, b->bidlen);
			}
			return;
		}
		if (flen >= 0 && !why[0]) {
			char fh[41];
			buildid_hex(fh, found, (size_t)flen);
			sfmt(why, sizeof why, "%s has build-id %s", cand[i], flen ? fh : "(none)");
		}
	}
	b->state = -1;
	warnf(c, 1, "binary %s (build-id %s) not found%s%s; its addresses are named [unknown @ ...]",
	      b->path, b->bidlen ? b->bidhex : "none", why[0] ? ": " : "", why);
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
	char buf[1200];
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

/* Fills @r from one llvm-symbolizer JSON reply.  0 ok (possibly with no
 * name: r->kind stays PENDING), -1 when the reply is an error or unparsable. */
static int res_from_json(struct ctx *c, struct result *r, const char *line, size_t len)
{
	json_error_t e;
	json_t *j = json_loadb(line, len, 0, &e);
	if (!j)
		return -1;
	int ret = -1;
	json_t *syms = json_object_get(j, "Symbol");
	if (!json_is_array(syms) || json_object_get(j, "Error"))
		goto out;
	ret = 0;
	size_t n = json_array_size(syms);
	if (!n)
		goto out;
	json_t *last = json_array_get(syms, n - 1);
	size_t l;
	const char *fn = json_str(last, "FunctionName", &l);
	if (!l || !strcmp(fn, "??"))
		goto out;
	uint32_t f0 = (uint32_t)c->nframes;
	int have_line = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(syms, i);
		size_t nl, fl;
		const char *nm = json_str(s, "FunctionName", &nl);
		const char *file = json_str(s, "FileName", &fl);
		json_int_t ln = json_integer_value(json_object_get(s, "Line"));
		json_int_t col = json_integer_value(json_object_get(s, "Column"));
		if (!nl || !strcmp(nm, "??"))
			nm = "??", nl = 2;
		if (ln > 0)
			have_line = 1;
		if (frame_push(c, arena_strndup(&c->ar, nm, nl), arena_strndup(&c->ar, file, fl),
			       ln > 0 ? (uint32_t)ln : 0, col > 0 ? (uint32_t)col : 0) == NONE)
			goto out;
	}
	r->f0 = f0;
	r->nf = (uint32_t)n;
	r->entry_vaddr = parse_hex(json_string_value(json_object_get(last, "StartAddress")));
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
			char buf[1200];
			sfmt(buf, sizeof buf, "%s+0x%" PRIx64, c->frames[f0].name,
				 r->vaddr - r->entry_vaddr);
			c->frames[f0].name = arena_strndup(&c->ar, buf, strlen(buf));
			c->frames[f0].name_len = (uint32_t)strlen(buf);
			if (!c->frames[f0].name)
				c->oom = 1;
		}
	}
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

static void cache_index(struct bin *b)
{
	uint8_t *p = b->cbuf, *end = b->cbuf + b->cbuf_len;
	while (p < end) {
		uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break; /* a torn last line (never written by us): ignore */
		*nl = 0;
		char *sp;
		uint64_t va = strtoull((char *)p, &sp, 16);
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

/* ---- address resolution ---- */
static uint32_t want_get(struct ctx *c, uint32_t tid, uint64_t addr)
{
	uint32_t w = hmap_get(&c->want_idx, tid, addr);
	if (w != NONE)
		return w;
	struct want nw = {tid, addr, NONE, 0};
	if (VEC_PUSH(c->wants, c->nwants, c->capwants, nw) < 0 ||
	    hmap_put(&c->want_idx, tid, addr, (uint32_t)(c->nwants - 1)) == NONE) {
		c->oom = 1;
		return NONE;
	}
	return (uint32_t)(c->nwants - 1);
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
	if (!m || m->bin == NONE) {
		struct perfmap *pm = perfmap_get(c, pid);
		const struct perfmap_ent *e = pm ? perfmap_lookup(pm, w->addr) : NULL;
		if (e) {
			char buf[1200];
			const char *nm = demangle(c, e->name);
			if (w->addr == e->start)
				sfmt(buf, sizeof buf, "%s", nm);
			else
				sfmt(buf, sizeof buf, "%s+0x%" PRIx64, nm, w->addr - e->start);
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

static void resolve_all(struct ctx *c)
{
	for (size_t i = 0; i < c->nwants && !c->oom; i++)
		resolve_want(c, &c->wants[i]);
	c->st->unique_addrs = c->nwants;
	/* cache, then the symbolizer for what is left */
	const char **paths = NULL;
	uint64_t *vaddrs = NULL;
	uint32_t *ris = NULL;
	size_t nreq = 0;
	if (c->nres) {
		paths = malloc(c->nres * sizeof *paths);
		vaddrs = malloc(c->nres * sizeof *vaddrs);
		ris = malloc(c->nres * sizeof *ris);
		if (!paths || !vaddrs || !ris) {
			c->oom = 1;
			goto out;
		}
	}
	for (size_t i = 0; i < c->nres; i++) {
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
		if (strchr(b->file, '"') || strchr(b->file, '\n'))
			continue; /* cannot be quoted for llvm-symbolizer: ELF fallback */
		paths[nreq] = b->file;
		vaddrs[nreq] = r->vaddr;
		ris[nreq] = (uint32_t)i;
		nreq++;
	}
	c->st->symbolizer_requests = nreq;
	if (nreq) {
		const char *exe = c->o->symbolizer ? c->o->symbolizer : "llvm-symbolizer";
		int err = 0;
		llvmsym *s = NULL;
		if (*exe)
			s = llvmsym_start(exe, &err);
		if (!s) {
			if (*exe)
				warnf(c, 1, "cannot run %s: %s; names come from ELF symbol tables (no inline frames, no source lines)",
				      exe, strerror(-err));
			else
				warnf(c, 1, "no symbolizer: names come from ELF symbol tables (no inline frames, no source lines)");
		} else {
			struct batch bt = {c, ris, 0};
			int tmo = c->o->timeout_ms > 0 ? c->o->timeout_ms : 30000;
			long r = llvmsym_batch(s, nreq, paths, vaddrs, on_reply, &bt, tmo);
			if (r == -ETIMEDOUT)
				warnf(c, 1, "%s did not answer for %d ms and was killed; the remaining names come from ELF symbol tables",
				      exe, tmo);
			else if (r < 0)
				warnf(c, 1, "%s failed (%s) before answering every request; the remaining names come from ELF symbol tables",
				      exe, strerror((int)-r));
			if (bt.bad)
				warnf(c, 1, "%s gave %zu unusable answers; those names come from ELF symbol tables",
				      exe, bt.bad);
			llvmsym_stop(s, tmo < 2000 ? tmo : 2000);
		}
	}
	/* fallbacks, and per-binary notes */
	for (size_t i = 0; i < c->nres && !c->oom; i++) {
		struct result *r = &c->res[i];
		if (r->bin == NONE)
			continue;
		struct bin *b = &c->bins[r->bin];
		if (r->kind == RES_PENDING) {
			if (!b->ei.has_symtab && !b->stripped_warned++)
				warnf(c, 1, "%s is stripped (no .symtab, no debug info): names from .dynsym or [unknown @ ...]",
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
	for (size_t i = 0; i < c->nbins; i++) {
		struct bin *b = &c->bins[i];
		if (b->n_symtab && !b->n_debug)
			warnf(c, 0, "%s has no debug info: function names only, no inline frames or source lines",
			      b->file);
	}
	for (size_t i = 0; i < c->nbins; i++)
		cache_store(c, &c->bins[i]);
	/* runtime entries */
	for (size_t i = 0; i < c->nwants; i++) {
		struct want *w = &c->wants[i];
		if (w->ri == NONE)
			continue;
		const struct result *r = &c->res[w->ri];
		if (!r->entry_vaddr)
			w->entry_rt = 0;
		else if (r->bin == NONE)
			w->entry_rt = r->entry_vaddr;
		else
			w->entry_rt = w->addr - r->vaddr + r->entry_vaddr;
	}
out:
	free(paths);
	free(vaddrs);
	free(ris);
}

/* ---- spans and inline expansion ---- */

/* Inline levels of a result: level 1 is the outermost inlined frame. */
static inline uint32_t res_levels(const struct result *r)
{
	return r->nf ? r->nf - 1 : 0;
}

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
	return !strcmp(fa->name, fb->name) && ca->line == cb->line && ca->column == cb->column &&
	       !strcmp(ca->file, cb->file);
}

static uint32_t node_new(struct ctx *c, uint64_t begin, uint64_t end)
{
	struct node n = {begin, end, NONE, NONE, NONE, NONE, 0};
	if (BVEC_PUSH(c->nodes, c->nnodes, c->capnodes, n) < 0) {
		c->oom = 1;
		return NONE;
	}
	return (uint32_t)(c->nnodes - 1);
}

static void node_add_child(struct ctx *c, uint32_t parent, uint32_t child)
{
	struct node *p = &c->nodes[parent];
	if (p->last_child == NONE)
		p->first_child = child;
	else
		c->nodes[p->last_child].next_sib = child;
	p->last_child = child;
	c->nodes[child].parent = parent;
}

static int cmp_wp(const void *a, const void *b)
{
	const struct wp *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return (x->grp > y->grp) - (x->grp < y->grp);
}

struct spk {
	uint64_t begin;
	uint32_t seq, si;
};

static int cmp_spk(const void *a, const void *b)
{
	const struct spk *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Puts the waypoints in (tid, depth) groups, each in time order, and gives
 * each one to the span of that thread and depth live at its time. */
static int assign_waypoints(struct ctx *c)
{
	struct grp {
		size_t nsp, wp0, sp0, spf, wpf;
	} *g = NULL;
	uint32_t *sg = NULL;
	struct spk *sporder = NULL;
	struct wp *sorted = NULL;
	size_t cap_sorted = 0;
	int ret = -1;
	if (!c->nwps)
		return 0;
	g = calloc(c->ng, sizeof *g);
	sg = malloc((c->nspans + 1) * sizeof *sg);
	sporder = malloc((c->nspans + 1) * sizeof *sporder);
	sorted = bvec_alloc(&cap_sorted, c->nwps, sizeof *sorted);
	c->wp_span = bvec_alloc(&c->cap_wp_span, c->nwps, sizeof *c->wp_span);
	c->wp_node = bvec_alloc(&c->cap_wp_node, c->nwps, sizeof *c->wp_node);
	if (!g || !sg || !sporder || !sorted || !c->wp_span || !c->wp_node)
		goto out;
	for (size_t i = 0; i < c->nspans; i++) {
		sg[i] = hmap_get(&c->gidx, c->spans[i].tid, c->spans[i].depth);
		if (sg[i] != NONE)
			g[sg[i]].nsp++;
	}
	size_t so = 0, wo = 0;
	for (size_t k = 0; k < c->ng; k++) {
		g[k].sp0 = g[k].spf = so;
		g[k].wp0 = g[k].wpf = wo;
		so += g[k].nsp;
		wo += c->gcount[k];
	}
	/* counting sort by group: stable, so each group keeps the input order */
	for (size_t i = 0; i < c->nwps; i++)
		sorted[g[c->wps[i].grp].wpf++] = c->wps[i];
	bvec_free(c->wps, c->capwps, sizeof *c->wps);
	c->wps = sorted;
	c->capwps = cap_sorted;
	sorted = NULL;
	for (size_t i = 0; i < c->nspans; i++)
		if (sg[i] != NONE)
			sporder[g[sg[i]].spf++] = (struct spk){c->spans[i].begin, (uint32_t)i, (uint32_t)i};
	for (size_t k = 0; k < c->ng; k++) {
		struct wp *wv = c->wps + g[k].wp0;
		struct spk *sv = sporder + g[k].sp0;
		size_t nw = c->gcount[k], ns = g[k].nsp;
		/* streams are in time order per thread; sort (stably) if not */
		size_t i;
		for (i = 1; i < nw && wv[i - 1].time <= wv[i].time; i++)
			;
		if (i < nw) {
			for (size_t j = 0; j < nw; j++)
				wv[j].grp = (uint32_t)j;
			qsort(wv, nw, sizeof *wv, cmp_wp);
		}
		for (i = 1; i < ns && sv[i - 1].begin <= sv[i].begin; i++)
			;
		if (i < ns)
			qsort(sv, ns, sizeof *sv, cmp_spk);
		size_t s = 0;
		for (i = 0; i < nw; i++) {
			const struct wp *w = &wv[i];
			uint32_t pos = (uint32_t)(g[k].wp0 + i);
			c->wp_span[pos] = NONE;
			c->wp_node[pos] = NONE;
			while (s < ns && c->spans[sv[s].si].end < w->time)
				s++;
			if (s == ns || sv[s].begin > w->time) {
				c->st->waypoints_unmatched++;
				continue;
			}
			/* several spans live at this time (zero-length ones): the one
			 * whose function holds the address */
			uint64_t e = w->w != NONE ? c->wants[w->w].entry_rt : 0;
			if (e && c->spans[sv[s].si].func != e) {
				for (size_t t = s + 1; t < ns && t < s + 8 && sv[t].begin <= w->time; t++) {
					if (c->spans[sv[t].si].func == e) {
						s = t;
						break;
					}
				}
			}
			struct span *sp = &c->spans[sv[s].si];
			c->wp_span[pos] = sv[s].si;
			if (sp->wp_first == NONE)
				sp->wp_first = pos;
			sp->wp_last = pos;
		}
	}
	ret = 0;
out:
	if (ret < 0)
		c->oom = 1;
	bvec_free(sorted, cap_sorted, sizeof *sorted);
	free(g);
	free(sg);
	free(sporder);
	return ret;
}

static void close_levels(struct ctx *c, uint32_t *open, uint32_t *nopen, uint32_t keep, uint64_t t)
{
	while (*nopen > keep)
		c->nodes[open[--*nopen]].end = t;
}

/* Inline nodes of span @si from its waypoints. */
static void expand_span(struct ctx *c, uint32_t si, uint32_t **open, size_t *cap_open)
{
	struct span *sp = &c->spans[si];
	if (sp->wp_first == NONE)
		return;
	uint32_t nopen = 0, last_ri = NONE;
	const struct result *cur = NULL;
	for (uint32_t pos = sp->wp_first; pos <= sp->wp_last && !c->oom; pos++) {
		if (c->wp_span[pos] != si)
			continue;
		const struct wp *w = &c->wps[pos];
		const struct want *wt = w->w != NONE ? &c->wants[w->w] : NULL;
		uint32_t ri = wt ? wt->ri : NONE;
		/* an address outside this function says nothing about its inline frames */
		if (ri == NONE || (wt->entry_rt && sp->func && wt->entry_rt != sp->func)) {
			c->wp_node[pos] = nopen ? (*open)[nopen - 1] : si;
			continue;
		}
		if (ri != last_ri) {
			const struct result *r = &c->res[ri];
			uint32_t m = res_levels(r), keep = 0;
			while (keep < nopen && keep < m && level_eq(c, cur, r, keep + 1))
				keep++;
			close_levels(c, *open, &nopen, keep, w->time);
			if (m > *cap_open) {
				uint32_t *no = realloc(*open, m * 2 * sizeof *no);
				if (!no) {
					c->oom = 1;
					return;
				}
				*open = no;
				*cap_open = m * 2;
			}
			for (uint32_t j = keep + 1; j <= m; j++) {
				uint32_t parent = j == 1 ? si : (*open)[j - 2];
				uint32_t n = node_new(c, w->time, sp->end);
				const struct sframe *lf = level_frame(c, r, j);
				struct inl in = {(uint32_t)(lf - c->frames), sp->tid, MTEV_SPAN_INLINE};
				if (n == NONE || VEC_PUSH(c->inls, c->ninls, c->capinls, in) < 0) {
					c->oom = 1;
					return;
				}
				if (w->time == sp->begin)
					c->inls[c->ninls - 1].flags |= sp->flags & MTEV_SPAN_INFERRED_START;
				node_add_child(c, parent, n);
				(*open)[nopen++] = n;
			}
			cur = r;
			last_ri = ri;
		}
		c->wp_node[pos] = nopen ? (*open)[nopen - 1] : si;
	}
	/* what is still open lasts to the span's end */
	for (uint32_t j = 0; j < nopen; j++) {
		c->nodes[(*open)[j]].end = sp->end;
		c->inls[(*open)[j] - c->nspans].flags |= sp->flags & MTEV_SPAN_OPEN_AT_END;
	}
}

/* The node of parent span @pi a child [b, e] called from @callsite hangs under. */
static uint32_t attach_point(struct ctx *c, uint32_t pi, uint64_t b, uint64_t e, uint64_t callsite)
{
	const struct span *p = &c->spans[pi];
	if (p->wp_first == NONE)
		return pi;
	/* the parent's waypoints are in time order: the last one at or before b,
	 * preferring the call instruction itself among those at time b */
	uint32_t lo = p->wp_first, hi = p->wp_last + 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (c->wps[mid].time <= b)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint32_t best = NONE;
	for (uint32_t pos = lo; pos-- > p->wp_first;) {
		if (c->wp_span[pos] != pi)
			continue;
		const struct wp *w = &c->wps[pos];
		if (best == NONE)
			best = pos;
		if (w->time != b)
			break;
		if (callsite && w->w != NONE && c->wants[w->w].addr == callsite) {
			best = pos;
			break;
		}
	}
	if (best == NONE)
		return pi;
	uint32_t n = c->wp_node[best];
	/* climb to a node that holds the whole child */
	while (n != pi && n != NONE && !(c->nodes[n].begin <= b && e <= c->nodes[n].end))
		n = c->nodes[n].parent;
	return n == NONE ? pi : n;
}

/* Builds the span forest: inline nodes and the parent of every node. */
static int build_tree(struct ctx *c, uint32_t *is_root)
{
	struct hmap tidx = {0};
	struct thr *th = NULL;
	size_t nth = 0, capth = 0;
	uint32_t *open = NULL;
	size_t cap_open = 0;
	int ret = -1;
	for (size_t i = 0; i < c->nspans; i++) {
		const struct span *sp = &c->spans[i];
		if (node_new(c, sp->begin, sp->end) == NONE)
			goto out;
	}
	for (uint32_t i = 0; i < c->nspans && !c->oom; i++) {
		struct span *sp = &c->spans[i];
		uint32_t k = hmap_put(&tidx, sp->tid, 0, (uint32_t)nth);
		if (k == NONE)
			goto out;
		if (k == nth) {
			struct thr z = {sp->tid, NULL, 0, 0};
			if (VEC_PUSH(th, nth, capth, z) < 0)
				goto out;
		}
		struct thr *t = &th[k];
		uint32_t parent = NONE;
		if (sp->depth > 0 && sp->depth <= t->n)
			parent = t->stack[sp->depth - 1];
		/* keep stack[0..depth) and put this span at [depth] */
		while (t->cap <= sp->depth)
			if (vec_grow((void **)&t->stack, &t->cap, sizeof *t->stack) < 0)
				goto out;
		for (size_t d = t->n; d < sp->depth; d++)
			t->stack[d] = NONE;
		t->stack[sp->depth] = i;
		t->n = sp->depth + 1;
		expand_span(c, i, &open, &cap_open);
		if (parent == NONE) {
			is_root[i] = 1;
			c->nodes[i].depth = sp->depth;
		} else {
			is_root[i] = 0;
			uint32_t at = attach_point(c, parent, sp->begin, sp->end, sp->callsite);
			node_add_child(c, at, i);
		}
	}
	ret = c->oom ? -1 : 0;
out:
	for (size_t i = 0; i < nth; i++)
		free(th[i].stack);
	free(th);
	free(open);
	hmap_fini(&tidx);
	if (ret < 0)
		c->oom = 1;
	return ret;
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
 * @s must stay valid for the whole run (arena or frames).  0 or -MTEV_E*. */
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
	struct mtev_rec rec = {.kind = MTEV_STRING};
	rec.string.id = c->next_sid;
	rec.string.text = s;
	int r = mtev_write(wr, &rec);
	if (r < 0)
		return r;
	c->ntab[j] = (struct nent){h, s.p, s.len, c->next_sid};
	c->nntab++;
	*sid = c->next_sid++;
	return 0;
}

/* The name of span @si and its string id into @rec.  0 or -MTEV_E*. */
static int span_name(struct ctx *c, mtev_writer *wr, uint32_t si, struct mtev_rec *rec)
{
	const struct span *sp = &c->spans[si];
	if (sp->name_len) {
		rec->span.name = (struct mtev_str){sp->name, sp->name_len};
		return name_sid(c, wr, rec->span.name, &rec->span.name_id);
	}
	const struct result *r = want_res(c, sp->func_w);
	if (!r || !r->nf)
		return 0;
	struct sframe *f = &c->frames[r->f0 + r->nf - 1];
	rec->span.name = (struct mtev_str){f->name, f->name_len};
	if (!f->sid) {
		int e = name_sid(c, wr, rec->span.name, &f->sid);
		if (e < 0)
			return e;
	}
	rec->span.name_id = f->sid;
	return 0;
}

static int write_symbols(struct ctx *c, mtev_writer *wr)
{
	struct hmap seen = {0};
	struct mtev_frame *fr = NULL;
	size_t capfr = 0;
	int ret = 0;
	for (size_t i = 0; i < c->nwants && !ret; i++) {
		const struct want *w = &c->wants[i];
		const struct result *r = want_res(c, (uint32_t)i);
		if (!r || !r->nf)
			continue;
		if (hmap_get(&seen, w->addr, 0) != NONE)
			continue;
		if (hmap_put(&seen, w->addr, 0, 0) == NONE) {
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
	free(fr);
	hmap_fini(&seen);
	return ret;
}

static int cmp_child(const void *a, const void *b, void *arg)
{
	const struct node *nodes = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (nodes[x].begin != nodes[y].begin)
		return nodes[x].begin < nodes[y].begin ? -1 : 1;
	/* Siblings never overlap, so of two that begin together one is empty
	 * ([t, t]) and comes first: the other may end after t. */
	if (nodes[x].end != nodes[y].end)
		return nodes[x].end < nodes[y].end ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Writes the subtree of root span @root in pre-order. */
static int emit_tree(struct ctx *c, mtev_writer *wr, uint32_t root, uint32_t **stk, size_t *capstk,
		     uint32_t **kids, size_t *capkids)
{
	size_t n = 0;
	(*stk)[n++] = root;
	while (n) {
		uint32_t x = (*stk)[--n];
		const struct node *nd = &c->nodes[x];
		struct mtev_rec rec = {.kind = MTEV_SPAN};
		int r;
		rec.span.depth = nd->depth;
		rec.span.begin = nd->begin;
		rec.span.end = nd->end;
		if (x < c->nspans) {
			const struct span *sp = &c->spans[x];
			rec.span.tid = sp->tid;
			rec.span.func = sp->func;
			rec.span.callsite = sp->callsite;
			rec.span.flags = sp->flags;
			if ((r = span_name(c, wr, x, &rec)) < 0)
				return r;
		} else {
			const struct inl *in = &c->inls[x - c->nspans];
			struct sframe *f = &c->frames[in->fi];
			rec.span.tid = in->tid;
			rec.span.flags = in->flags;
			rec.span.name = (struct mtev_str){f->name, f->name_len};
			if (!f->sid && (r = name_sid(c, wr, rec.span.name, &f->sid)) < 0)
				return r;
			rec.span.name_id = f->sid;
			c->st->inline_spans++;
		}
		if ((r = mtev_write(wr, &rec)) < 0)
			return r;
		c->st->spans_out++;
		size_t nk = 0;
		for (uint32_t ch = nd->first_child; ch != NONE; ch = c->nodes[ch].next_sib) {
			if (nk == *capkids && vec_grow((void **)kids, capkids, sizeof **kids) < 0)
				return -MTEV_ENOMEM;
			(*kids)[nk++] = ch;
		}
		if (nk > 1)
			qsort_r(*kids, nk, sizeof **kids, cmp_child, c->nodes);
		while (*capstk < n + nk + 1)
			if (vec_grow((void **)stk, capstk, sizeof **stk) < 0)
				return -MTEV_ENOMEM;
		for (size_t i = nk; i-- > 0;) {
			c->nodes[(*kids)[i]].depth = nd->depth + 1;
			(*stk)[n++] = (*kids)[i];
		}
	}
	return 0;
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
	bvec_free(c->wps, c->capwps, sizeof *c->wps);
	bvec_free(c->wp_span, c->cap_wp_span, sizeof *c->wp_span);
	bvec_free(c->wp_node, c->cap_wp_node, sizeof *c->wp_node);
	bvec_free(c->nodes, c->capnodes, sizeof *c->nodes);
	bvec_free(c->spans, c->capspans, sizeof *c->spans);
	free(c->gcount);
	hmap_fini(&c->gidx);
	free(c->inls);
	free(c->ntab);
	hmap_fini(&c->tid2pid);
	hmap_fini(&c->want_idx);
	hmap_fini(&c->res_idx);
	arena_fini(&c->ar);
}

static int read_all(struct ctx *c, const void *buf, size_t len, uint32_t *hdr_flags)
{
	int err = 0;
	mtev_reader *rd = mtev_reader_alloc_mem(buf, len, &err);
	if (!rd)
		return fail(c->st, SYMZ_EINPUT, "not a usable MTEV stream: %s", mtev_strerror(err));
	*hdr_flags = mtev_reader_header(rd)->flags;
	struct mtev_rec rec;
	int r;
	while ((r = mtev_read(rd, &rec)) > 0 && !c->oom) {
		c->st->records_in++;
		switch (rec.kind) {
		case MTEV_THREAD:
			if (hmap_put(&c->tid2pid, rec.thread.tid, 0, rec.thread.pid) == NONE)
				c->oom = 1;
			break;
		case MTEV_MAP: {
			struct map m = {rec.map.pid, rec.map.time, rec.map.start, rec.map.len,
					rec.map.pgoff, NONE, NULL};
			m.path = arena_strndup(&c->ar, rec.map.path.p, rec.map.path.len);
			if (!m.path) {
				c->oom = 1;
				break;
			}
			if (is_file_backed(m.path))
				m.bin = bin_get(c, rec.map.path.p, rec.map.path.len, rec.map.build_id,
						rec.map.build_id_len);
			if (VEC_PUSH(c->maps, c->nmaps, c->capmaps, m) < 0)
				c->oom = 1;
			break;
		}
		case MTEV_SPAN: {
			struct span s = {rec.span.tid, rec.span.depth, rec.span.flags, rec.span.begin,
					 rec.span.end, rec.span.func, rec.span.callsite, NULL,
					 rec.span.name.len, NONE, NONE, NONE, NONE};
			if (s.name_len && !(s.name = arena_strndup(&c->ar, rec.span.name.p, s.name_len)))
				c->oom = 1;
			if (s.func)
				s.func_w = want_get(c, s.tid, s.func);
			if (s.callsite)
				s.cs_w = want_get(c, s.tid, s.callsite);
			if (BVEC_PUSH(c->spans, c->nspans, c->capspans, s) < 0)
				c->oom = 1;
			c->st->spans_in++;
			break;
		}
		case MTEV_WAYPOINT: {
			uint32_t gk;
			if (c->ng && c->last_gkey[0] == rec.waypoint.tid &&
			    c->last_gkey[1] == rec.waypoint.depth) {
				gk = c->last_g;
			} else {
				gk = hmap_put(&c->gidx, rec.waypoint.tid, rec.waypoint.depth, (uint32_t)c->ng);
				if (gk == c->ng && VEC_PUSH(c->gcount, c->ng, c->capg, 0) < 0)
					gk = NONE;
				if (gk == NONE) {
					c->oom = 1;
					break;
				}
				c->last_gkey[0] = rec.waypoint.tid;
				c->last_gkey[1] = rec.waypoint.depth;
				c->last_g = gk;
			}
			c->gcount[gk]++;
			struct wp w = {rec.waypoint.time, want_get(c, rec.waypoint.tid, rec.waypoint.addr), gk};
			if (BVEC_PUSH(c->wps, c->nwps, c->capwps, w) < 0)
				c->oom = 1;
			c->st->waypoints_in++;
			break;
		}
		default:
			break;
		}
	}
	uint64_t off = mtev_reader_offset(rd);
	mtev_reader_free(rd);
	if (c->oom)
		return fail(c->st, SYMZ_ESYS, "out of memory");
	if (r < 0)
		return fail(c->st, SYMZ_EINPUT, "input: %s at byte offset %" PRIu64, mtev_strerror(r),
			    off);
	if (c->nspans > UINT32_MAX / 2 || c->nwps > UINT32_MAX / 2)
		return fail(c->st, SYMZ_EINPUT, "input too large");
	return 0;
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int symz_stream(const void *buf, size_t len, int out_fd, const struct symz_opts *o,
		struct symz_stats *st)
{
	struct ctx c;
	memset(&c, 0, sizeof c);
	memset(st, 0, sizeof *st);
	c.o = o;
	c.st = st;
	uint32_t flags = 0, *is_root = NULL, *stk = NULL, *kids = NULL;
	size_t capstk = 0, capkids = 0;
	mtev_writer *wr = NULL;
	mtev_reader *rd = NULL;
	double t0 = cpu_now();
	int ret = read_all(&c, buf, len, &flags);
	st->t_read = cpu_now() - t0;
	if (ret < 0)
		goto out;
	if (!c.nspans && !c.nwps && !(flags & MTEV_F_SPANS)) {
		ret = fail(st, SYMZ_EINPUT,
			   "input has no spans (flag 'spans' unset): run mt-segment before mt-symbolize");
		goto out;
	}
	t0 = cpu_now();
	resolve_all(&c);
	st->t_resolve = cpu_now() - t0;
	t0 = cpu_now();
	if (c.oom || assign_waypoints(&c) < 0) {
		ret = fail(st, SYMZ_ESYS, "out of memory");
		goto out;
	}
	is_root = malloc((c.nspans + 1) * sizeof *is_root);
	if (!is_root || build_tree(&c, is_root) < 0) {
		ret = fail(st, SYMZ_ESYS, "out of memory");
		goto out;
	}
	st->t_tree = cpu_now() - t0;
	t0 = cpu_now();
	/* second pass: pass everything through, spans as expanded trees */
	int err = 0;
	rd = mtev_reader_alloc_mem(buf, len, &err);
	wr = rd ? mtev_writer_alloc(out_fd, "mt-symbolize", flags | MTEV_F_SYMBOLS, &err) : NULL;
	if (!wr) {
		ret = fail(st, SYMZ_ESYS, "cannot write output: %s", mtev_strerror(err));
		goto out;
	}
	capstk = capkids = 64;
	stk = malloc(capstk * sizeof *stk);
	kids = malloc(capkids * sizeof *kids);
	if (!stk || !kids) {
		ret = fail(st, SYMZ_ESYS, "out of memory");
		goto out;
	}
	struct mtev_rec rec;
	int r, symbols_done = 0;
	uint32_t si = 0;
	while ((r = mtev_read(rd, &rec)) > 0) {
		int w = 0;
		if ((rec.kind == MTEV_SPAN || rec.kind == MTEV_WAYPOINT) && !symbols_done) {
			symbols_done = 1;
			w = write_symbols(&c, wr);
		}
		if (w < 0) {
			r = w;
			break;
		}
		switch (rec.kind) {
		case MTEV_SPAN:
			if (is_root[si])
				w = emit_tree(&c, wr, si, &stk, &capstk, &kids, &capkids);
			si++;
			break;
		case MTEV_WAYPOINT:
		case MTEV_SYMBOL: /* replaced by ours */
			break;
		case MTEV_STRING:
			if (rec.string.id < SID_BASE) /* else a name of ours (a previous run's) */
				w = mtev_write(wr, &rec);
			break;
		default:
			w = mtev_write(wr, &rec);
		}
		if (w < 0) {
			r = w;
			break;
		}
	}
	if (r == 0 && !symbols_done)
		r = write_symbols(&c, wr);
	if (r == 0)
		r = mtev_writer_finish(wr);
	if (r < 0) {
		ret = fail(st, SYMZ_ESYS, "cannot write output: %s%s%s", mtev_strerror(r),
			   r == -MTEV_EIO ? ": " : "", r == -MTEV_EIO ? strerror(errno) : "");
		goto out;
	}
	st->t_write = cpu_now() - t0;
	ret = 0;
out:
	mtev_writer_free(wr);
	mtev_reader_free(rd);
	free(is_root);
	free(stk);
	free(kids);
	ctx_fini(&c);
	return ret;
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
