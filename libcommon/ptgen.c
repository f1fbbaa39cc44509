/* ptgen: walk a real binary's code along a seeded, valid path (see ptgen.h). */
#include "ptgen.h"
#include "elfinfo.h"
#include "x86br.h"
#include "io.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

/* Instruction kinds; the branch kinds come from x86br, as in ptsim_synth, STOP is what a walk must never
 * execute (far transfers, traps, hlt, ud2, TSX, undecodable bytes). */
enum { G_OTHER, G_JCC, G_JMP, G_JMPI, G_CALL, G_CALLI, G_RET, G_SYS, G_STOP };

#define INF 0x3fffffffu
#define NONE UINT32_MAX
#define PIE_BASE 0x555555554000ull
#define STACK_TOP 0x7ffffffde000ull

struct node {
	uint64_t ip;
	uint32_t fall, tgt; /* node indices or NONE */
	uint32_t dret;	    /* instructions to a return (callees counted) */
	uint32_t dg;	    /* root frames: distance to a call in the loop set */
	uint32_t dsys;	    /* distance to a system call no branch can avoid */
	uint8_t len, kind, in_g;
};

struct gen {
	const struct ptgen_opts *o;
	csh cs;
	cs_insn *ci;
	uint64_t lo, hi;      /* runtime range of the executable maps */
	const uint8_t **code; /* per map: bytes; found via maps */
	struct ptsim_run *run;
	int32_t *idx;	      /* (ip - lo) -> node index + 1, 0: none */
	uint8_t *is_entry;    /* (ip - lo) -> a function symbol starts there */
	struct node *n;
	size_t nn, ncap;
	uint32_t *work;
	size_t nwork, wcap;
	uint32_t *entries;    /* node index of every function entry */
	size_t nentries;
	uint32_t *ret_fns;    /* entries from which a return is reachable */
	size_t nret_fns;
	uint32_t cheapest;    /* the returning entry with the smallest dret */
	uint32_t *roots;      /* entries in the root loop set */
	size_t nroots;
	int oom;
};

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static const uint8_t *code_at(struct gen *g, uint64_t ip, size_t *avail)
{
	const struct ptsim_map *m = ptsim_find_map(g->run, ip);
	if (!m)
		return NULL;
	*avail = m->len - (ip - m->start);
	return m->bytes + (ip - m->start);
}

static int classify(struct gen *g, uint64_t ip, struct node *nd, uint64_t *target)
{
	size_t avail;
	const uint8_t *code = code_at(g, ip, &avail);
	nd->kind = G_STOP;
	nd->len = 1;
	*target = 0;
	if (!code)
		return 0;
	size_t size = avail < 16 ? avail : 16, n = size;
	const uint8_t *bytes = code;
	uint64_t addr = ip;
	struct x86br_insn xi;
	/* capstone for the length and the instructions a walk must never
	 * run; the project's classifier for the branches */
	if (!cs_disasm_iter(g->cs, &code, &size, &addr, g->ci))
		return 0;
	cs_insn *in = g->ci;
	nd->len = (uint8_t)in->size;
	nd->kind = G_OTHER;
	x86br_decode(bytes, n, 64, ip, &xi);
	if (xi.direct)
		*target = xi.target;
	switch (xi.cls) {
	case X86BR_NONE:
		switch (in->id) {
		case X86_INS_HLT:
		case X86_INS_UD0:
		case X86_INS_UD2:
		case X86_INS_UD2B:
		case X86_INS_XBEGIN:
		case X86_INS_XEND:
		case X86_INS_XABORT:
			nd->kind = G_STOP;
			break;
		default:
			break;
		}
		break;
	case X86BR_JCC:
		nd->kind = G_JCC;
		break;
	case X86BR_JMP:
		nd->kind = xi.direct ? G_JMP : G_JMPI;
		break;
	case X86BR_CALL:
		nd->kind = xi.direct ? G_CALL : G_CALLI;
		break;
	case X86BR_RET:
		nd->kind = G_RET;
		break;
	case X86BR_SYSCALL: /* syscall, sysenter, int n; traps and far calls stop */
		nd->kind = xi.trap ? G_STOP : G_SYS;
		break;
	default: /* sysret, sysexit, iret, far ret, far jmp */
		nd->kind = G_STOP;
		break;
	}
	/* A call to the next instruction pushes no return address in libipt's
	 * model and is not a call in the program's sense: avoid it. */
	if (nd->kind == G_CALL && *target == ip + nd->len)
		nd->kind = G_STOP;
	return 0;
}

/* The node at @ip, decoded on first use (its successors are queued). */
static uint32_t node_at(struct gen *g, uint64_t ip)
{
	if (ip < g->lo || ip >= g->hi)
		return NONE;
	int32_t *slot = &g->idx[ip - g->lo];
	if (*slot)
		return (uint32_t)(*slot - 1);
	if (g->nn == g->ncap) {
		size_t ncap = g->ncap ? g->ncap * 2 : 65536;
		struct node *n = realloc(g->n, ncap * sizeof(*n));
		if (!n) {
			g->oom = 1;
			return NONE;
		}
		g->n = n;
		g->ncap = ncap;
	}
	if (g->nwork == g->wcap) {
		size_t ncap = g->wcap ? g->wcap * 2 : 65536;
		uint32_t *w = realloc(g->work, ncap * sizeof(*w));
		if (!w) {
			g->oom = 1;
			return NONE;
		}
		g->work = w;
		g->wcap = ncap;
	}
	uint32_t k = (uint32_t)g->nn++;
	struct node *nd = &g->n[k];
	memset(nd, 0, sizeof(*nd));
	nd->ip = ip;
	nd->fall = nd->tgt = NONE;
	nd->dret = nd->dg = nd->dsys = INF;
	uint64_t target;
	classify(g, ip, nd, &target);
	nd->tgt = (uint32_t)(target & 0xffffffffu); /* raw, resolved later */
	g->work[g->nwork++] = k;
	*slot = (int32_t)k + 1;
	/* keep the full target until resolution: stash in dg/dret */
	nd->dg = (uint32_t)(target >> 32);
	return k;
}

static void resolve(struct gen *g)
{
	while (g->nwork && !g->oom) {
		uint32_t k = g->work[--g->nwork];
		struct node nd = g->n[k];
		uint64_t target = ((uint64_t)nd.dg << 32) | nd.tgt;
		uint32_t fall = NONE, tgt = NONE;
		/* Falling through into the next function happens only after a
		 * call that does not return (the compiler's view); the walk
		 * must not do it: no edge. */
		uint64_t next = nd.ip + nd.len;
		int into_fn = next >= g->lo && next < g->hi && g->is_entry[next - g->lo];
		switch (nd.kind) {
		case G_OTHER:
		case G_SYS:
		case G_CALLI:
			fall = into_fn ? NONE : node_at(g, next);
			break;
		case G_JCC:
		case G_CALL:
			fall = into_fn ? NONE : node_at(g, next);
			tgt = node_at(g, target);
			break;
		case G_JMP:
			tgt = node_at(g, target);
			break;
		default:
			break;
		}
		g->n[k].fall = fall;
		g->n[k].tgt = tgt;
		g->n[k].dg = INF;
	}
}

static uint32_t sat(uint64_t x) { return x >= INF ? INF : (uint32_t)x; }

/* Shortest distance to a return, by relaxation to the least fixpoint. */
static void analyse_dret(struct gen *g)
{
	uint32_t c = INF; /* cost of a call through a pointer: cheapest entry */
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < g->nentries; i++)
			if (g->n[g->entries[i]].dret < c)
				c = g->n[g->entries[i]].dret;
		for (size_t i = g->nn; i-- > 0;) {
			struct node *nd = &g->n[i];
			uint32_t fd = nd->fall == NONE ? INF : g->n[nd->fall].dret;
			uint32_t td = nd->tgt == NONE ? INF : g->n[nd->tgt].dret;
			uint32_t d = INF;
			switch (nd->kind) {
			case G_RET: d = 1; break;
			case G_OTHER:
			case G_SYS: d = sat(1ull + fd); break;
			case G_JCC: d = sat(1ull + (fd < td ? fd : td)); break;
			case G_JMP: d = sat(1ull + td); break;
			case G_JMPI: d = sat(1ull + c); break;
			case G_CALL: d = td >= INF ? INF : sat(1ull + td + fd); break;
			case G_CALLI: d = c >= INF ? INF : sat(1ull + c + fd); break;
			default: break;
			}
			if (d < nd->dret) {
				nd->dret = d;
				changed = 1;
			}
		}
	}
}

/* Distance to a system call that is certain once there (straight-line code,
 * direct jumps and calls, both ways of a jcc): the walk avoids these most of
 * the time, else the syscall wrappers of libc, a few instructions long,
 * dominate the trace.  Least fixpoint by relaxation. */
#define SYS_NEAR 64

static void analyse_sys(struct gen *g)
{
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = g->nn; i-- > 0;) {
			struct node *nd = &g->n[i];
			uint32_t fd = nd->fall == NONE ? INF : g->n[nd->fall].dsys;
			uint32_t td = nd->tgt == NONE ? INF : g->n[nd->tgt].dsys;
			uint32_t d = INF;
			switch (nd->kind) {
			case G_SYS: d = 0; break;
			case G_OTHER: d = sat(1ull + fd); break;
			case G_JMP:
			case G_CALL: d = sat(1ull + td); break;
			case G_JCC: d = sat(1ull + (fd > td ? fd : td)); break;
			default: break;
			}
			if (d < nd->dsys) {
				nd->dsys = d;
				changed = 1;
			}
		}
	}
}

/* A call whose callee can return: the walk may take it. */
static int good_call(const struct gen *g, const struct node *nd)
{
	if (nd->kind == G_CALL)
		return nd->tgt != NONE && g->n[nd->tgt].dret < INF;
	return nd->kind == G_CALLI && g->nret_fns;
}

/* The root loop set G: the greatest set of nodes from which a call that
 * returns into G is reachable through G without executing a return or an
 * indirect jump.  A thread's outermost frame stays in G forever; dg is the
 * distance to such a call. */
static void analyse_roots(struct gen *g)
{
	for (size_t i = 0; i < g->nn; i++) {
		struct node *nd = &g->n[i];
		/* no system calls in the root loop, not even in a callee's
		 * first block: a root loop through a syscall wrapper would
		 * make the trace mostly system calls */
		nd->in_g = nd->kind == G_OTHER || nd->kind == G_JCC || nd->kind == G_JMP ||
			   (good_call(g, nd) && (nd->kind == G_CALLI || g->n[nd->tgt].dsys >= SYS_NEAR));
	}
	for (int removed = 1; removed;) {
		removed = 0;
		for (size_t i = 0; i < g->nn; i++)
			g->n[i].dg = INF;
		for (int changed = 1; changed;) {
			changed = 0;
			for (size_t i = g->nn; i-- > 0;) {
				struct node *nd = &g->n[i];
				if (!nd->in_g)
					continue;
				uint32_t fd = nd->fall != NONE && g->n[nd->fall].in_g ? g->n[nd->fall].dg : INF;
				uint32_t td = nd->tgt != NONE && g->n[nd->tgt].in_g ? g->n[nd->tgt].dg : INF;
				uint32_t d;
				switch (nd->kind) {
				case G_CALL:
				case G_CALLI:
					d = nd->fall != NONE && g->n[nd->fall].in_g ? 0 : INF;
					break;
				case G_JCC: d = sat(1ull + (fd < td ? fd : td)); break;
				case G_JMP: d = sat(1ull + td); break;
				default: d = sat(1ull + fd); break;
				}
				if (d < nd->dg) {
					nd->dg = d;
					changed = 1;
				}
			}
		}
		for (size_t i = 0; i < g->nn; i++)
			if (g->n[i].in_g && g->n[i].dg >= INF) {
				g->n[i].in_g = 0;
				removed = 1;
			}
	}
}

/* ---- loading ---- */
static int load_maps(struct gen *g, struct elfinfo *ei, const char *path, char *err, size_t errlen)
{
	uint8_t *file;
	size_t flen;
	struct stat st;
	if (io_slurp(path, &file, &flen) < 0 || stat(path, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return PTSIM_E_USAGE;
	}
	uint64_t base = ei->is_pie ? PIE_BASE : 0;
	struct ptsim_run *run = g->run;
	run->maps = calloc(ei->nsegs ? ei->nsegs : 1, sizeof(*run->maps));
	if (!run->maps) {
		free(file);
		snprintf(err, errlen, "out of memory");
		return PTSIM_E_SYS;
	}
	char *rp = realpath(path, NULL);
	g->lo = UINT64_MAX;
	g->hi = 0;
	for (size_t i = 0; i < ei->nsegs; i++) {
		const struct elf_seg *s = &ei->segs[i];
		if (!(s->flags & 1 /* PF_X */) || !s->memsz)
			continue;
		struct ptsim_map *m = &run->maps[run->nmaps];
		uint64_t va = s->vaddr & ~0xfffull, end = (s->vaddr + s->memsz + 0xfff) & ~0xfffull;
		m->start = base + va;
		m->len = end - va;
		m->pgoff = s->offset & ~0xfffull;
		m->prot = PROT_READ | PROT_EXEC;
		m->maj = major(st.st_dev);
		m->min = minor(st.st_dev);
		m->ino = st.st_ino;
		m->path = strdup(rp ? rp : path);
		memcpy(m->build_id, ei->build_id, 20);
		m->build_id_len = ei->build_id_len;
		m->bytes = calloc(1, m->len);
		if (!m->path || !m->bytes) {
			free(m->path);
			free(m->bytes);
			free(file);
			free(rp);
			snprintf(err, errlen, "out of memory");
			return PTSIM_E_SYS;
		}
		uint64_t fend = s->offset + s->filesz;
		if (fend > flen)
			fend = flen;
		if (m->pgoff < fend)
			memcpy(m->bytes, file + m->pgoff, fend - m->pgoff < m->len ? fend - m->pgoff : m->len);
		run->nmaps++;
		if (m->start < g->lo)
			g->lo = m->start;
		if (m->start + m->len > g->hi)
			g->hi = m->start + m->len;
	}
	free(file);
	free(rp);
	if (!run->nmaps) {
		snprintf(err, errlen, "%s: no executable segment", path);
		return PTSIM_E_USAGE;
	}
	if (g->hi - g->lo > (1ull << 30)) {
		snprintf(err, errlen, "%s: executable segments span more than 1 GiB", path);
		return PTSIM_E_USAGE;
	}
	return 0;
}

/* ---- the walk ---- */
struct frame {
	uint32_t ret;	 /* node to return to */
	uint32_t count;	 /* instructions run in the caller frame so far */
};

struct walker {
	uint32_t tid, cur, depth, count;
	uint64_t sp, rng;
	struct frame *st;
	size_t stcap;
	int started;
};

static int push_ev(struct gen *g, const struct ptsim_ev *e)
{
	struct ptsim_run *run = g->run;
	if (run->nev == run->cap) {
		size_t ncap = run->cap ? run->cap + run->cap / 2 : 1 << 16;
		struct ptsim_ev *n = realloc(run->ev, ncap * sizeof(*n));
		if (!n)
			return -1;
		run->ev = n;
		run->cap = ncap;
	}
	run->ev[run->nev++] = *e;
	return 0;
}

static uint32_t pick_fn(struct gen *g, struct walker *w, int steer)
{
	if (steer)
		return g->cheapest;
	/* Mostly functions that do not begin with a system call. */
	for (int tries = 0;; tries++) {
		uint32_t f = g->ret_fns[rng_next(&w->rng) % g->nret_fns];
		if (g->n[f].dsys >= SYS_NEAR || tries == 8)
			return f;
	}
}

/* One slice of @n instructions of walker @w; -1 out of memory. */
static int walk(struct gen *g, struct walker *w, uint64_t n, struct ptgen_stats *st)
{
	const unsigned maxd = g->o->max_depth ? g->o->max_depth : 24;
	const unsigned budget = g->o->budget ? g->o->budget : 3000;
	struct ptsim_ev e;
	memset(&e, 0, sizeof e);
	e.tid = w->tid;
	for (uint64_t i = 0; i < n; i++) {
		const struct node *nd = &g->n[w->cur];
		uint32_t next;
		int root = w->depth == 0;
		int steer = w->depth >= maxd || w->count >= budget;
		w->count++;
		e.kind = PTSIM_EV_INSN;
		e.flags = 0;
		e.ip = nd->ip;
		switch (nd->kind) {
		case G_JCC: {
			uint32_t a = nd->fall, b = nd->tgt;
			int oka, okb;
			uint32_t da, db;
			if (root) {
				oka = a != NONE && g->n[a].in_g;
				okb = b != NONE && g->n[b].in_g;
				da = oka ? g->n[a].dg : INF;
				db = okb ? g->n[b].dg : INF;
			} else {
				da = a != NONE ? g->n[a].dret : INF;
				db = b != NONE ? g->n[b].dret : INF;
				oka = da < INF;
				okb = db < INF;
			}
			if (oka && okb && steer) {
				next = da <= db ? a : b;
			} else if (oka && okb) {
				uint64_t r = rng_next(&w->rng);
				int sa = g->n[a].dsys < SYS_NEAR, sb = g->n[b].dsys < SYS_NEAR;
				if (sa != sb && (r >> 32) % 64)
					next = sa ? b : a; /* 63 times in 64: no syscall */
				else
					next = r & 1 ? a : b;
			} else
				next = oka ? a : b;
			break;
		}
		case G_CALL:
		case G_CALLI:
			next = nd->kind == G_CALL ? nd->tgt : pick_fn(g, w, steer && !root);
			if (w->depth + 1 >= w->stcap) {
				size_t ncap = w->stcap * 2;
				struct frame *f = realloc(w->st, ncap * sizeof(*f));
				if (!f)
					return -1;
				w->st = f;
				w->stcap = ncap;
			}
			w->st[w->depth].ret = nd->fall;
			w->st[w->depth].count = w->count;
			w->depth++;
			w->count = 0;
			w->sp -= 8;
			st->calls++;
			if (w->depth > st->max_depth)
				st->max_depth = w->depth;
			break;
		case G_RET:
			if (!w->depth)
				return -2; /* cannot happen: roots stay in G */
			w->depth--;
			next = w->st[w->depth].ret;
			w->count = w->st[w->depth].count;
			w->sp += 8;
			st->returns++;
			break;
		case G_JMPI:
			next = pick_fn(g, w, steer);
			break;
		case G_JMP:
			next = nd->tgt;
			break;
		case G_SYS:
			e.flags = PTSIM_F_SYSCALL;
			e.next = 0;
			e.sp = w->sp;
			if (push_ev(g, &e) < 0)
				return -1;
			e.kind = PTSIM_EV_SYSRET;
			e.flags = 0;
			e.ip = nd->ip + nd->len;
			e.next = 0;
			if (push_ev(g, &e) < 0)
				return -1;
			st->syscalls++;
			w->cur = nd->fall;
			g->run->insns++;
			continue;
		default:
			next = nd->fall;
			break;
		}
		if (next == NONE)
			return -2;
		e.next = g->n[next].ip;
		e.sp = w->sp;
		if (push_ev(g, &e) < 0)
			return -1;
		w->cur = next;
		g->run->insns++;
	}
	return 0;
}

static int cmp_u32_dret(const void *a, const void *b, void *ctx)
{
	const struct gen *g = ctx;
	uint32_t x = g->n[*(const uint32_t *)a].dret, y = g->n[*(const uint32_t *)b].dret;
	return x < y ? -1 : x > y;
}

int ptgen_walk(struct ptsim_run *run, const struct ptgen_opts *o, struct ptgen_stats *stp,
	       char *err, size_t errlen)
{
	struct gen g;
	struct elfinfo ei;
	struct ptgen_stats st;
	struct walker *w = NULL;
	struct timespec t0, t1;
	int rc = PTSIM_E_SYS;
	unsigned nthreads = o->threads ? o->threads : 1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&g, 0, sizeof g);
	memset(&st, 0, sizeof st);
	memset(run, 0, sizeof(*run));
	g.o = o;
	g.run = run;
	if (nthreads > 64) {
		snprintf(err, errlen, "at most 64 threads");
		return PTSIM_E_USAGE;
	}
	int e = elfinfo_load(&ei, o->path);
	if (e < 0) {
		snprintf(err, errlen, "%s: %s", o->path, e == -ENOEXEC ? "not an ELF file" : strerror(-e));
		return PTSIM_E_USAGE;
	}
	if (!ei.nsyms) {
		snprintf(err, errlen, "%s: no function symbols", o->path);
		elfinfo_fini(&ei);
		return PTSIM_E_USAGE;
	}
	rc = load_maps(&g, &ei, o->path, err, errlen);
	if (rc < 0)
		goto out;
	rc = PTSIM_E_SYS;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &g.cs) != CS_ERR_OK) {
		snprintf(err, errlen, "capstone: cannot open the x86-64 disassembler");
		goto out;
	}
	cs_option(g.cs, CS_OPT_DETAIL, CS_OPT_ON);
	g.ci = cs_malloc(g.cs);
	g.idx = calloc(g.hi - g.lo, sizeof(*g.idx));
	g.is_entry = calloc(g.hi - g.lo, 1);
	g.entries = calloc(ei.nsyms, sizeof(*g.entries));
	if (!g.ci || !g.idx || !g.is_entry || !g.entries)
		goto oom;
	uint64_t base = ei.is_pie ? PIE_BASE : 0;
	for (size_t i = 0; i < ei.nsyms; i++)
		if (base + ei.syms[i].addr >= g.lo && base + ei.syms[i].addr < g.hi)
			g.is_entry[base + ei.syms[i].addr - g.lo] = 1;
	const struct elf_sym *root_sym = o->root ? elfinfo_find(&ei, o->root) : NULL;
	uint32_t root_node = NONE;
	if (o->root && !root_sym) {
		snprintf(err, errlen, "%s: no function named %s", o->path, o->root);
		rc = PTSIM_E_USAGE;
		goto out;
	}
	for (size_t i = 0; i < ei.nsyms; i++) {
		uint32_t k = node_at(&g, base + ei.syms[i].addr);
		if (k == NONE)
			continue;
		/* keep one entry per node */
		if (g.idx[base + ei.syms[i].addr - g.lo] == (int32_t)k + 1 &&
		    (!g.nentries || g.entries[g.nentries - 1] != k))
			g.entries[g.nentries++] = k;
		if (root_sym == &ei.syms[i])
			root_node = k;
		resolve(&g);
	}
	if (g.oom)
		goto oom;
	st.functions = g.nentries;
	st.nodes = g.nn;
	analyse_dret(&g);
	analyse_sys(&g);
	g.ret_fns = calloc(g.nentries + 1, sizeof(*g.ret_fns));
	g.roots = calloc(g.nentries + 1, sizeof(*g.roots));
	if (!g.ret_fns || !g.roots)
		goto oom;
	for (size_t i = 0; i < g.nentries; i++)
		if (g.n[g.entries[i]].dret < INF)
			g.ret_fns[g.nret_fns++] = g.entries[i];
	if (!g.nret_fns) {
		snprintf(err, errlen, "%s: no function can return", o->path);
		rc = PTSIM_E_USAGE;
		goto out;
	}
	qsort_r(g.ret_fns, g.nret_fns, sizeof(*g.ret_fns), cmp_u32_dret, &g);
	g.cheapest = g.ret_fns[0];
	st.returning = g.nret_fns;
	analyse_roots(&g);
	for (size_t i = 0; i < g.nentries; i++)
		if (g.n[g.entries[i]].in_g)
			g.roots[g.nroots++] = g.entries[i];
	st.roots = g.nroots;
	if (root_node != NONE && !g.n[root_node].in_g) {
		snprintf(err, errlen, "%s cannot be a root: no loop with a call in it", o->root);
		rc = PTSIM_E_USAGE;
		goto out;
	}
	if (!g.nroots) {
		snprintf(err, errlen, "%s: no function has a loop with a call in it (a root)", o->path);
		rc = PTSIM_E_USAGE;
		goto out;
	}

	/* the run */
	const char *bn = strrchr(o->path, '/') ? strrchr(o->path, '/') + 1 : o->path;
	run->pid = 4242;
	snprintf(run->comm, sizeof run->comm, "%s", bn);
	run->cmdline = strdup(o->path);
	run->threads = calloc(nthreads, sizeof(*run->threads));
	w = calloc(nthreads, sizeof(*w));
	if (!run->cmdline || !run->threads || !w)
		goto oom;
	run->nthreads = nthreads;
	/* The log is written once, in order: ask for transparent huge pages,
	 * page faults are most of the cost of filling it otherwise. */
	run->cap = o->insns + o->insns / 8 + 1024;
	{
		size_t bytes = run->cap * sizeof(*run->ev), huge = 2u << 20;
		void *p = NULL;
		if (posix_memalign(&p, huge, bytes))
			goto oom;
		if (bytes >= huge)
			madvise(p, bytes & ~(huge - 1), MADV_HUGEPAGE);
		run->ev = p;
	}
	for (size_t i = 0; i < run->nmaps; i++) {
		struct ptsim_ev me = {.kind = PTSIM_EV_MAP, .tid = run->pid, .arg = i};
		if (push_ev(&g, &me) < 0)
			goto oom;
	}
	uint64_t seed = o->seed;
	for (unsigned t = 0; t < nthreads; t++) {
		struct walker *x = &w[t];
		x->tid = run->pid + t;
		x->rng = seed ^ (0x5851F42D4C957F2Dull * (t + 1));
		rng_next(&x->rng);
		x->cur = t == 0 && root_node != NONE ? root_node : g.roots[rng_next(&x->rng) % g.nroots];
		x->sp = STACK_TOP - (uint64_t)t * 0x1000000;
		x->stcap = 64;
		x->st = malloc(x->stcap * sizeof(*x->st));
		if (!x->st)
			goto oom;
		run->threads[t].tid = x->tid;
		snprintf(run->threads[t].comm, sizeof run->threads[t].comm, "%s", bn);
	}
	uint64_t left = o->insns, srng = seed ^ 0xA0761D6478BD642Full;
	unsigned t = 0;
	while (left) {
		struct walker *x = &w[t];
		if (!x->started) {
			struct ptsim_ev te = {.kind = PTSIM_EV_THREAD, .tid = x->tid, .ip = g.n[x->cur].ip};
			if (push_ev(&g, &te) < 0)
				goto oom;
			x->started = 1;
		}
		uint64_t n = nthreads == 1 ? left : 1000 + rng_next(&srng) % 20000;
		if (n > left)
			n = left;
		int r = walk(&g, x, n, &st);
		if (r == -1)
			goto oom;
		if (r < 0) {
			snprintf(err, errlen, "internal error: the walk left the valid set at %#llx",
				 (unsigned long long)g.n[x->cur].ip);
			rc = PTSIM_E_SYS;
			goto out;
		}
		left -= n;
		t = (t + 1) % nthreads;
	}
	for (unsigned k = 0; k < nthreads; k++) {
		if (!w[k].started)
			continue;
		struct ptsim_ev ee = {.kind = PTSIM_EV_END, .tid = w[k].tid, .ip = g.n[w[k].cur].ip};
		if (push_ev(&g, &ee) < 0)
			goto oom;
	}
	run->steps = run->insns;
	run->end = PTSIM_END_RUNAWAY;
	run->status = 0;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
	rc = PTSIM_E_SYS;
out:
	clock_gettime(CLOCK_MONOTONIC, &t1);
	st.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	run->seconds = st.seconds;
	if (stp)
		*stp = st;
	if (w)
		for (unsigned k = 0; k < nthreads; k++)
			free(w[k].st);
	free(w);
	free(g.idx);
	free(g.is_entry);
	free(g.n);
	free(g.work);
	free(g.entries);
	free(g.ret_fns);
	free(g.roots);
	if (g.ci)
		cs_free(g.ci, 1);
	if (g.cs)
		cs_close(&g.cs);
	elfinfo_fini(&ei);
	if (rc < 0)
		ptsim_run_fini(run);
	return rc;
}
