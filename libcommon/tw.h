/* tw.h: mt-write's modules (private to libcommon/tracewrite.c and
 * libcommon/tw_*.c; the API is tracewrite.h).
 *
 * tracewrite.c holds the span contract (what is written: balance, order,
 * the time range; see tracewrite.h) and the tables every format needs
 * (threads, functions and their names, names by reference).  What a format
 * writes is behind struct tw_backend: tw_fxt.c (Fuchsia trace format) and
 * tw_json.c (Chrome JSON).  A new format is one new file and one entry in
 * tw_alloc. */
#ifndef MT_TW_H
#define MT_TW_H

#include "tracewrite.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fxt.h"
#include "hmap.h"
#include "mtev_text.h"
#include "vec.h"

/* Why begin/end events for spans with children: Perfetto closes a complete
 * slice as soon as a slice begins at or after its end, so a zero-length span
 * at its parent's end (common with coarse PT timing) would lose its depth.
 * With begin/end pairs, emitted per thread in nesting order, the viewer's
 * stable sort by time rebuilds the exact tree.  A leaf can never be that
 * parent, so in FXT a leaf is one complete event (24 bytes instead of 32):
 * each thread holds its last span back until the next one says whether it
 * has children.  JSON uses begin/end throughout, because a JSON "dur" goes
 * through a double and can lose a nanosecond.  (Checked in tests/write.bats.) */

#define JBUF_SIZE (256u * 1024)
#ifndef TW_FN_INIT /* the fuzz build's is smaller (mk/fuzz.mk) */
#define TW_FN_INIT 1024 /* functions t->fn has room for at first */
#endif
#define JROOM 65536u  /* a JSON event never exceeds this (strings are clipped) */
#define MAX_NAME 8000 /* longest name or string argument written */

struct frame {
	uint64_t begin, end;
	uint32_t jtail; /* JSON: offset in the thread's arena of this frame's E-event tail */
	/* FXT: the top frame may be held back (not yet written) */
	uint32_t fn;	/* index in t->fn */
	uint32_t flags; /* span flags */
	int pending;	/* not written yet */
	int named;	/* its name: 1 in the thread's pname (the span's own name), 2 t->nm[nm] */
	uint32_t nm;	/* named == 2: index in t->nm (a name by reference) */
};

struct thr {
	uint32_t tid, pid;
	int has_pid, used;
	struct fxt_ref_cache tref;
	struct frame *st;
	uint32_t open, cap;
	uint32_t dropped_at; /* depth of the last dropped span while its subtree lasts */
	uint64_t last_begin;
	int any;
	char *ja; /* JSON: tails of the open frames' E events, stack discipline */
	size_t jlen, jcap;
	char *pname; /* FXT: the held-back span's own name */
	char jids[48]; /* JSON: ","pid":P,"tid":T,"ts": for jids_pid */
	uint8_t jids_len;
	uint32_t jids_pid;
	size_t pname_len, pname_cap;
};

/* A function (span.func or a symbol address).  Symbol records only store
 * their raw text here; the strings a span needs are built on the first span
 * that uses the function (most symbols are interior addresses no span names). */
struct func {
	uint64_t addr;
	uint32_t sname_off, sname_len; /* symbol name (clipped) in t->arena */
	uint32_t file_off, file_len;   /* source file (clipped, up to a NUL) */
	uint32_t line;
	uint8_t has_name, has_src; /* a symbol gave a name; a file (even if cut to nothing) */
	int sym;   /* 2: from a symbol for this address, 1: derived from an entry, 0: none */
	int ready; /* the strings below match the fields above */
	uint32_t name_off, name_len;   /* the slice name, in t->arena */
	uint32_t loc_off, loc_len;     /* "0x... file:line" */
	struct fxt_ref_cache name_c, loc_c;
	/* FXT: the slice shape of the last span written for it (flags, and the
	 * name's source: named 0 = this function's name, 2 = t->nm[memo_nm]) */
	struct fxt_memo memo;
	uint32_t memo_flags, memo_named, memo_nm;
	uint32_t jname_off, jname_len; /* JSON-escaped name, quotes included */
	uint32_t jloc_off, jloc_len;
};

struct tw {
	struct tw_opts o;
	const struct tw_backend *be; /* the format */
	zsink *out;
	fxt_writer *fx; /* FXT */
	int err;
	int started;
	/* threads: tid -> index in thr[] */
	struct thr *thr;
	uint32_t nthr;
	size_t thrcap;
	struct hmap tidx;
	/* functions: addr -> index in fn[] */
	struct func *fn;
	uint32_t nfn;
	size_t fncap;
	struct hmap fidx;
	char *arena;
	size_t alen, acap;
	/* names by reference (span name_id): string id -> index in nm[] */
	struct rname {
		uint32_t name_off, name_len; /* in the arena */
		uint32_t jname_off, jname_len; /* JSON-quoted, 0 until first needed */
		struct fxt_ref_cache c;
	} *nm;
	uint32_t nnm;
	size_t nmcap;
	struct hmap nmidx; /* only entries made since their id's last string record */
	/* JSON output */
	char *jb;
	size_t jlen;
	uint64_t jflushed;
	int jfirst;
	/* interned constant strings (FXT) */
	struct fxt_ref_cache c_span, c_gap, c_trigger, c_loc, c_inline, c_flags;
	struct fxt_ref_cache c_flagset[1u << 9];
	/* flags_text() of flags values below 1 << 9, built once each: len + 1, 0 = not yet */
	struct {
		uint32_t off, len1;
	} flagtext[1u << 9];
	uint32_t last_tid, last_thr; /* thread_get's memo: index + 1, 0 = none */
	/* FXT: the category and arguments of span slices, kept from span to span */
	struct fxt_str s_span;
	struct fxt_arg a_loc, a_inline, a_flags;
	struct fxt_memo end_memo; /* the end event (no strings) */
	struct tw_stats st;
	char msg[512];
};

#define TW_TIME_MAX ((uint64_t)INT64_MAX)

/* One output format.  Every function returns 0 or -TW_E* (through fail()). */
struct tw_backend {
	/* Allocates the format's writer (tw_alloc); -TW_ENOMEM. */
	int (*open)(tw *t);
	/* Frees it (tw_free). */
	void (*close)(tw *t);
	/* The trace's header, before the first record. */
	int (*start)(tw *t);
	/* Process @pid's and thread @th's names (@n bytes, clipped, not 0). */
	int (*process)(tw *t, const struct mtev_rec *r, size_t n);
	int (*thread)(tw *t, struct thr *th, const struct mtev_rec *r, size_t n);
	/* Span @r has passed the contract and is frame @f, just pushed on @th
	 * (@rn its name by reference, or NULL). */
	int (*span)(tw *t, struct thr *th, struct frame *f, const struct mtev_rec *r,
		    struct rname *rn);
	/* The frames of @th above depth @d end, from the top down (th->open
	 * becomes @d; one call for them all, not one a frame). */
	int (*end_to)(tw *t, struct thr *th, uint32_t d);
	/* Instants: gap @r named @name (@n bytes), its message clipped to @mlen,
	 * its duration @dur; trigger @r named @name. */
	int (*gap)(tw *t, struct thr *th, const struct mtev_rec *r, const char *name, size_t n,
		   size_t mlen, uint64_t dur);
	int (*trigger)(tw *t, struct thr *th, const struct mtev_rec *r, const char *name, size_t n);
	/* After the last end: the trace's tail, everything handed to the zsink. */
	int (*finish)(tw *t);
	/* Bytes written and the format's own counts into @st. */
	void (*stats)(const tw *t, struct tw_stats *st);
	/* func_build made @f's texts: the format's forms of them (may be NULL). */
	int (*func_built)(tw *t, struct func *f);
};
extern const struct tw_backend tw_fxt_backend, tw_json_backend;

/* tracewrite.c: errors, warnings, the string arena, texts */
int fail(tw *t, int e);
void warn(tw *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int arena_add(tw *t, const char *p, size_t len, uint32_t *off);
size_t clip(const char *p, size_t len, size_t max);
int func_build(tw *t, struct func *f);
size_t flags_str_slow(tw *t, unsigned flags, char tmp[256], const char **p);

/* The text of @flags (see flags_text) in *@p, its length returned; values
 * below 1 << 9 are built once and kept in the arena, others go in @tmp. */
static inline size_t flags_str(tw *t, unsigned flags, char tmp[256], const char **p)
{
	if (!(flags & ~(unsigned)MTEV_SPAN_INLINE))
		return 0;
	if (flags < (1u << 9) && t->flagtext[flags].len1) {
		*p = t->arena + t->flagtext[flags].off;
		return t->flagtext[flags].len1 - 1;
	}
	return flags_str_slow(t, flags, tmp, p);
}

#endif
