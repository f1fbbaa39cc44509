#include "symz.h"

/* Resolution: a (thread, runtime address) "want" becomes a result (name,
 * file, line, inline chain) through its map and binary, the cache, one
 * llvm-symbolizer batch per window, and the fallbacks. */

int wtab_init(struct wtab *t)
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

/* ---- results ---- */
uint32_t frame_push(struct ctx *c, const char *name, const char *file, uint32_t line,
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

/* ---- address resolution ---- */
uint32_t want_get_slow(struct ctx *c, struct wslot *e, uint32_t tid, uint64_t addr)
{
	uint32_t w = wtab_get(&c->want_idx, tid, addr);
	if (w == NONE) {
		struct want nw = {.addr = addr, .tid = tid, .ri = NONE, .pfi = NONE};
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

/* The entry (file vaddr) of the function whose ".cold" part ("f.cold",
 * "f.cold.7": gcc's hot/cold split) begins at @vaddr, found by name in the
 * same file; 0 when @vaddr is not a cold part's entry, or its function is
 * not found. */
static uint64_t cold_owner(const struct elfinfo *ei, uint64_t vaddr)
{
	const struct elf_sym *s = ei ? elfinfo_lookup(ei, vaddr) : NULL;
	const char *c = s && s->addr == vaddr ? strstr(s->name, ".cold") : NULL;
	char base[512];
	size_t n = c ? (size_t)(c - s->name) : 0;
	if (!c || (c[5] && c[5] != '.') || !n || n >= sizeof base)
		return 0;
	memcpy(base, s->name, n);
	base[n] = 0;
	const struct elf_sym *o = elfinfo_find(ei, base);
	return o ? o->addr : 0;
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
void resolve_pending(struct ctx *c)
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
			if (!b->ei.has_symtab && !b->vdso && !b->stripped_warned++)
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
		w->owner_rt = w->entry_rt;
		if (w->entry_rt && r->bin != NONE) {
			uint64_t o = cold_owner(bin_syms(&c->bins[r->bin]), r->entry_vaddr);
			if (o)
				w->owner_rt = w->addr - r->vaddr + o;
		}
	}
out:
	c->wants_done = c->nwants;
	c->res_done = c->nres;
	free(paths);
	free(vaddrs);
	free(ris);
}

/* At the end: the coprocess, notes per binary, the cache files. */
void resolve_finish(struct ctx *c)
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
		if (b->n_symtab && !b->n_debug && !b->vdso)
			warnf(c, 0, "%s has no debug info: function names only, no inline frames or source lines",
			      b->file);
	}
	for (size_t i = 0; i < c->nbins; i++)
		cache_store(c, &c->bins[i]);
}

