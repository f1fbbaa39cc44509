/* FXT: an encoder for the Fuchsia trace format (the subset Perfetto reads).
 *
 * Everything is 64-bit little-endian words.  The encoder keeps the two
 * reference tables the format has: strings (slots 1..32767) and threads
 * (slots 1..255).  When a table is full, the least recently used slot is
 * re-registered for the new value (a String or Thread record overwrites a
 * slot), so a trace may use any number of distinct strings and threads.
 * Slots used by the record being built are never evicted by it.
 *
 * Output goes to a sink callback through a buffer; a sink error stops the
 * encoder (every later call returns the same error).  Errors are negative
 * FXT_E* codes; nothing here prints or exits.
 */
#ifndef MT_FXT_H
#define MT_FXT_H

#include <stddef.h>
#include <stdint.h>

#define FXT_MAGIC_WORD 0x0016547846040010ull
#define FXT_MAX_STRING_SLOTS 0x7fff
#define FXT_MAX_THREAD_SLOTS 0xff
#define FXT_MAX_ARGS 15
/* Longer strings are cut (at a UTF-8 boundary) to keep records in bounds. */
#define FXT_MAX_STRING_LEN 16000

enum fxt_err {
	FXT_EIO = 1,	/* the sink failed; errno as it left it */
	FXT_ENOMEM = 2,
	FXT_EINVAL = 3, /* bad argument (too many args, record too large) */
};

enum fxt_event_type {
	FXT_EV_INSTANT = 0,
	FXT_EV_COUNTER = 1,
	FXT_EV_BEGIN = 2,
	FXT_EV_END = 3,
	FXT_EV_COMPLETE = 4,
};

enum fxt_arg_type {
	FXT_ARG_NULL = 0,
	FXT_ARG_INT32 = 1,
	FXT_ARG_UINT32 = 2,
	FXT_ARG_INT64 = 3,
	FXT_ARG_UINT64 = 4,
	FXT_ARG_DOUBLE = 5,
	FXT_ARG_STRING = 6,
	FXT_ARG_POINTER = 7,
	FXT_ARG_KOID = 8,
	FXT_ARG_BOOL = 9,
};

/* A caller-side memo of where a string (or thread) lives in the table, so a
 * value used again and again is found without hashing.  Zero-initialize;
 * valid only with the writer that filled it. */
struct fxt_ref_cache {
	uint32_t gen;
	uint16_t slot;
};

/* A string to put in a record.  @cache may be NULL.  @inline_: write the
 * bytes in the record instead of interning them (for one-off strings). */
struct fxt_str {
	const char *p;
	size_t len;
	struct fxt_ref_cache *cache;
	int inline_;
};

struct fxt_arg {
	unsigned type; /* enum fxt_arg_type */
	struct fxt_str name;
	union {
		int64_t i;
		uint64_t u;
		double d;
		int b;
		struct fxt_str s;
	};
};

typedef int (*fxt_sink_fn)(void *ctx, const void *buf, size_t len); /* 0 or -1 */

typedef struct fxt_writer fxt_writer;

/* @sink receives the bytes; @ctx is passed back.  NULL on ENOMEM. */
fxt_writer *fxt_writer_alloc(fxt_sink_fn sink, void *ctx);
void fxt_writer_free(fxt_writer *w); /* does not flush */

/* Magic number record then initialization record (@ticks_per_second).
 * Call first, once. */
int fxt_begin(fxt_writer *w, uint64_t ticks_per_second);

/* Kernel object records: a process named @name; a thread (koid @tid) named
 * @name that belongs to process @pid (an argument "process" of type koid). */
int fxt_process(fxt_writer *w, uint64_t pid, struct fxt_str name);
int fxt_thread_name(fxt_writer *w, uint64_t pid, uint64_t tid, struct fxt_str name);

/* An event record on thread (@pid, @tid).  @extra: the end timestamp of a
 * complete event, the counter id of a counter; ignored otherwise. */
int fxt_event(fxt_writer *w, unsigned type, uint64_t pid, uint64_t tid,
	      struct fxt_ref_cache *thread_cache, struct fxt_str category, struct fxt_str name,
	      uint64_t ts, const struct fxt_arg *args, unsigned nargs, uint64_t extra);

/* fxt_event with its strings and arguments by pointer (a NULL string is
 * empty): the same record.  For hot paths that keep their fxt_str and fxt_arg
 * objects (with caches) from one event to the next. */
int fxt_eventp(fxt_writer *w, unsigned type, uint64_t pid, uint64_t tid,
	       struct fxt_ref_cache *thread_cache, const struct fxt_str *category,
	       const struct fxt_str *name, uint64_t ts, const struct fxt_arg *const *args,
	       unsigned nargs, uint64_t extra);

/* A memo of one event shape (category, name, arguments) for hot paths that
 * write many events of the same shape: the string slots and argument words,
 * valid as long as no string slot has been reused since.  Zero-initialize
 * (empty); valid only with the writer that filled it. */
#define FXT_MEMO_ARGS 4
struct fxt_memo {
	uint64_t epoch; /* string slot reuses when filled, + 1; 0 = empty */
	uint16_t cat, name;
	uint16_t use[2 + 2 * FXT_MEMO_ARGS]; /* slots in the order a record uses them */
	uint8_t nuse, nargs, nwords;
	uint64_t words[2 * FXT_MEMO_ARGS]; /* the argument words */
};

/* fxt_eventp that also fills @m with the event's shape when every string is
 * interned with a cache and the arguments are at most FXT_MEMO_ARGS (else
 * @m is left empty).  The caller must then use @m only for events with the
 * same category, name and arguments (string values included). */
int fxt_eventp_memo(fxt_writer *w, struct fxt_memo *m, unsigned type, uint64_t pid,
		    uint64_t tid, struct fxt_ref_cache *thread_cache,
		    const struct fxt_str *category, const struct fxt_str *name, uint64_t ts,
		    const struct fxt_arg *const *args, unsigned nargs, uint64_t extra);

/* The event of the shape @m holds, on the cached thread: the same record and
 * the same table updates as the fxt_eventp call that filled @m would make
 * now.  Returns 1 (nothing done) when @m is empty or stale, or the thread is
 * not cached: then call fxt_eventp_memo. */
int fxt_event_memo(fxt_writer *w, const struct fxt_memo *m, unsigned type,
		   struct fxt_ref_cache *thread_cache, uint64_t ts, uint64_t extra);

/* Hands the buffered bytes to the sink. */
int fxt_flush(fxt_writer *w);

struct fxt_stats {
	uint64_t bytes;		  /* written so far, buffered included */
	uint64_t string_records;  /* String records written (registrations) */
	uint64_t string_evictions;
	uint64_t thread_records;
	uint64_t thread_evictions;
	uint64_t events;
};
void fxt_writer_stats(const fxt_writer *w, struct fxt_stats *st);

#endif
