/* MTEV: the binary event stream between mt stages.
 *
 * formats/mtev.md is the normative byte-level spec; this is its only codec.
 *
 * Reading: mtev_reader_alloc() on a file descriptor, then mtev_read() until it
 * returns 0 (the END record was seen) or a negative error.  Every pointer in a
 * record returned by mtev_read() (strings, byte arrays, ips, frames, raw payload)
 * points into the reader and is valid until the next mtev_read() or
 * mtev_reader_free().
 *
 * Writing: mtev_writer_alloc() on a file descriptor, mtev_write() per record,
 * mtev_writer_finish() to write the END record and flush.  A stream without its
 * END record is, by definition, truncated: readers report it.
 *
 * All times are nanoseconds of the recording's perf clock (see MTEV_CLOCK).
 * Errors are negative MTEV_E* codes; mtev_strerror() names them.
 */
#ifndef MT_MTEV_H
#define MT_MTEV_H

#include <stddef.h>
#include <stdint.h>

#define MTEV_MAGIC "\x89MTEV\r\n\x1a"
#define MTEV_MAGIC_LEN 8
#define MTEV_VERSION 1	   /* what this codec writes */
#define MTEV_VERSION_MIN 1 /* oldest version this codec reads */
#define MTEV_VERSION_MAX 1 /* newest version this codec reads */

/* Stream header feature flags. */
enum {
	MTEV_F_SORTED = 1u << 0,   /* records of each thread are in time order */
	MTEV_F_SPANS = 1u << 1,	   /* stream carries spans (segment/stitch output) */
	MTEV_F_SYMBOLS = 1u << 2,  /* names resolved (symbolize output) */
	MTEV_F_TRUTH = 1u << 3,	   /* written by mt-ptsim as ground truth */
	MTEV_F_SAMPLING = 1u << 4, /* from a sampling recording (no branches) */
};

/* Record kinds (one byte on the wire).  Branch records use the 32 kinds
 * 0x20..0x3f to carry their type and the "same thread" bit; the codec maps
 * them all to MTEV_BRANCH with .br.type. */
enum mtev_kind {
	MTEV_END = 0x00,
	MTEV_CLOCK = 0x01,
	MTEV_PROCESS = 0x02,
	MTEV_THREAD = 0x03,
	MTEV_MAP = 0x04,
	MTEV_TRIGGER = 0x05,
	MTEV_STRING = 0x06,
	MTEV_SAMPLE = 0x07,
	MTEV_GAP = 0x08,
	MTEV_SEGMENT = 0x09,
	MTEV_SPAN = 0x0a,
	MTEV_WAYPOINT = 0x0b,
	MTEV_SYMBOL = 0x0c,
	MTEV_BRANCH = 0x20,
	MTEV_KIND_RAW = 0x100, /* in-memory only: a kind this codec does not know */
};

enum mtev_branch_type {
	MTEV_BR_CALL = 0,
	MTEV_BR_RETURN = 1,
	MTEV_BR_JUMP = 2, /* unconditional jump, direct or indirect */
	MTEV_BR_JCC = 3,  /* taken conditional branch */
	MTEV_BR_SYSCALL = 4,
	MTEV_BR_SYSRET = 5,
	MTEV_BR_INTERRUPT = 6, /* asynchronous: interrupt, fault, signal delivery */
	MTEV_BR_IRET = 7,
	MTEV_BR_TRACE_START = 8, /* from = 0, to = first traced ip */
	MTEV_BR_TRACE_END = 9,	 /* from = last ip before the disable (or 0), to = 0 */
	MTEV_BR__COUNT = 10,
};

enum mtev_gap_reason {
	MTEV_GAP_DECODE_ERROR = 1, /* decoder error; .code = libipt error code */
	MTEV_GAP_OVERFLOW = 2,	   /* hardware internal buffer overflow */
	MTEV_GAP_LOST = 3,	   /* lost data: truncated AUX, dropped bytes */
	MTEV_GAP_UNTRACED = 4,	   /* tracing disabled / filtered out */
	MTEV_GAP_NO_IMAGE = 5,	   /* code bytes for the ip were unavailable */
	MTEV_GAP__COUNT = 6,
};

enum mtev_span_flags {
	MTEV_SPAN_INFERRED_START = 1u << 0, /* began before its segment: begin = segment start */
	MTEV_SPAN_OPEN_AT_END = 1u << 1,    /* still live when its segment ended */
	MTEV_SPAN_UNTRACED = 1u << 2,	    /* [syscall], [untraced]: time outside the trace */
	MTEV_SPAN_ERROR = 1u << 3,	    /* a gap made visible ([decode error: ...]) */
	MTEV_SPAN_INLINE = 1u << 4,	    /* an inlined frame (mt-symbolize) */
	MTEV_SPAN_STITCHED = 1u << 5,	    /* continued across a gap by mt-stitch */
	MTEV_SPAN_INTERRUPT = 1u << 6,	    /* [interrupt] / signal delivery */
	MTEV_SPAN_SYSCALL = 1u << 7,	    /* [syscall] */
	MTEV_SPAN_SAMPLED = 1u << 8,	    /* from stack samples: times are bounds */
	MTEV_SPAN_CALLCHAIN = 1u << 9,	    /* an outer frame from a call chain, no branch seen */
	MTEV_SPAN_MIN_DEPTH = 1u << 10,	    /* depth is a lower bound: unseen frames may lie below */
};

enum mtev_sample_flags {
	/* the call chain at a trigger or at the end of a thread's trace (joined
	 * to the trace's stack by mt-segment), not a periodic stack sample */
	MTEV_SAMPLE_CHAIN = 1u << 0,
	/* bits 8-15: how many of the outermost ips are not from this sample's
	 * own chain but from its thread's root chain (mt-decode: a
	 * frame-pointer sample completed to the thread's root) */
	MTEV_SAMPLE_ROOTED_SHIFT = 8,
	MTEV_SAMPLE_ROOTED_MASK = 0xffu << 8,
};

struct mtev_str {
	const char *p; /* not NUL-terminated on read; may be NULL when len == 0 */
	uint32_t len;
};

struct mtev_frame { /* one level of an inline chain, innermost first */
	struct mtev_str name, file;
	uint32_t line, column;
};

struct mtev_rec {
	unsigned kind; /* enum mtev_kind, or MTEV_KIND_RAW */
	union {
		struct { /* perf time = zero + (tsc * mult) >> shift, as perf's TIME_CONV */
			uint64_t time_zero, time_mult, time_shift;
			uint64_t tsc_hz; /* 0 when unknown */
			uint64_t flags;	 /* reserved, 0 */
		} clock;
		struct {
			uint32_t pid;
			struct mtev_str name;
		} process;
		struct {
			uint32_t pid, tid;
			uint64_t time; /* first seen */
			struct mtev_str name;
		} thread;
		struct {
			uint32_t pid;
			uint64_t time, start, len, pgoff;
			uint32_t prot; /* PROT_* bits */
			uint8_t build_id_len;
			const uint8_t *build_id; /* up to 20 bytes */
			struct mtev_str path;
		} map;
		struct {
			uint32_t pid, tid;
			uint64_t time, addr;
			uint64_t arg0, arg1; /* rdi, rsi at the stop indicator */
			struct mtev_str symbol;
		} trigger;
		struct {
			uint32_t id;
			struct mtev_str text;
		} string;
		struct {
			uint32_t tid;
			uint64_t time;
			unsigned type; /* enum mtev_branch_type */
			uint64_t from, to;
		} br;
		struct {
			uint32_t pid, tid;
			uint64_t time;
			uint32_t nips;
			const uint64_t *ips; /* leaf first */
			uint32_t flags;	     /* enum mtev_sample_flags */
		} sample;
		struct {
			uint32_t tid;
			uint64_t begin, end;
			unsigned reason; /* enum mtev_gap_reason */
			int32_t code;	 /* decoder error code (libipt pte_*), 0 if none */
			uint64_t offset; /* byte offset in the thread's trace, or ~0 */
			uint64_t ip;	 /* last known ip, or 0 */
			struct mtev_str message;
		} gap;
		struct {
			uint32_t tid;
			uint32_t index; /* per thread, from 0 */
			uint64_t begin, end;
			unsigned reason; /* why it began: 0 = thread/trace start, else a gap reason */
		} segment;
		struct {
			uint32_t tid;
			uint32_t depth; /* 0 = root */
			uint64_t begin, end;
			uint64_t func;	   /* function entry address (0 for synthetic spans) */
			uint64_t callsite; /* address of the call instruction, or 0 */
			uint32_t flags;	   /* enum mtev_span_flags */
			struct mtev_str name; /* empty: name comes from func */
			/* 0, or the id of a string record earlier in the stream that
			 * holds the name (a name by reference).  The reader fills
			 * .name from it; the writer writes the reference when it has
			 * written that string record, else .name's text. */
			uint32_t name_id;
		} span;
		struct {
			uint32_t tid;
			uint32_t depth; /* depth of the frame the address is in */
			uint64_t time, addr;
		} waypoint;
		struct {
			uint64_t addr;	/* runtime address */
			uint64_t entry; /* entry of the physical function, 0 if unknown */
			uint32_t nframes;
			const struct mtev_frame *frames; /* innermost first; last = physical */
		} symbol;
		struct {
			unsigned kind; /* the wire kind byte */
			uint32_t len;
			const uint8_t *data;
		} raw;
	};
};

struct mtev_header {
	uint16_t version;
	uint32_t flags;
	char producer[64]; /* NUL-terminated */
};

enum mtev_err {
	MTEV_EIO = 1,	    /* read or write failed; errno is set */
	MTEV_EMAGIC = 2,    /* not an MTEV stream */
	MTEV_EVERSION = 3,  /* version outside [MTEV_VERSION_MIN, MTEV_VERSION_MAX] */
	MTEV_ETRUNC = 4,    /* stream ended inside a record or without END */
	MTEV_ESIZE = 5,	    /* impossible record size */
	MTEV_ECORRUPT = 6,  /* record payload does not parse */
	MTEV_ENOMEM = 7,
	MTEV_EINVAL = 8,    /* bad argument (e.g. writing an invalid record) */
	MTEV_EAFTEREND = 9, /* data after the END record */
	MTEV_EREF = 10,	    /* a span names a string id no earlier string record defined */
};

/* Largest record payload the codec accepts (bytes). */
#define MTEV_MAX_PAYLOAD (1u << 24)

const char *mtev_strerror(int err);
const char *mtev_kind_name(unsigned kind);    /* "branch", ... or NULL */
const char *mtev_branch_name(unsigned type);  /* "call", ... or NULL */
const char *mtev_gap_name(unsigned reason);   /* "decode-error", ... or NULL */
int mtev_branch_from_name(const char *s, size_t len); /* type, or -1 */
int mtev_gap_from_name(const char *s, size_t len);    /* reason, or -1 */

/* ---- reader ---- */
typedef struct mtev_reader mtev_reader;

/* Reads the stream header from @fd.  On error returns NULL and sets *err. */
mtev_reader *mtev_reader_alloc(int fd, int *err);
/* Same, over a memory buffer (@buf must outlive the reader). */
mtev_reader *mtev_reader_alloc_mem(const void *buf, size_t len, int *err);
void mtev_reader_free(mtev_reader *r);
const struct mtev_header *mtev_reader_header(const mtev_reader *r);
/* 1: a record in *rec; 0: END seen (clean end of stream); <0: -MTEV_E*. */
int mtev_read(mtev_reader *r, struct mtev_rec *rec);
/* Byte offset of the start of the last record read (or of the error). */
uint64_t mtev_reader_offset(const mtev_reader *r);
/* The branch records that come next, up to @n, read as mtev_read reads them
 * (rec[i].kind and .br set; @off, if not NULL, gets each one's offset) in a
 * loop of their own.  Stops before any other record, before one not wholly
 * in the reader's buffer and before one mtev_read would refuse: the next
 * mtev_read gives that one, or its error.  How many it read (0: call
 * mtev_read). */
size_t mtev_read_branches(mtev_reader *r, struct mtev_rec *rec, uint64_t *off, size_t n);

/* ---- writer ---- */
typedef struct mtev_writer mtev_writer;

/* Writes the stream header to @fd.  @producer: the stage name. */
mtev_writer *mtev_writer_alloc(int fd, const char *producer, uint32_t flags, int *err);
void mtev_writer_free(mtev_writer *w); /* does not close fd, does not finish */
/* 0 or -MTEV_E*.  A MTEV_KIND_RAW record is written back byte for byte. */
int mtev_write(mtev_writer *w, const struct mtev_rec *rec);
/* mtev_write of the branch records that lead @rec[0..n) while their time is
 * at most @limit (the same bytes): how many it wrote, or the first error */
long mtev_write_upto(mtev_writer *w, const struct mtev_rec *rec, size_t n, uint64_t limit);
/* Writes END and flushes.  0 or -MTEV_E*. */
int mtev_writer_finish(mtev_writer *w);
int mtev_writer_flush(mtev_writer *w);
uint64_t mtev_writer_bytes(const mtev_writer *w); /* bytes written so far */

/* A writer whose records go to @fn, in order, not into bytes: each as a
 * reader of the stream would read it back (a span whose name is a string
 * record's id, with an empty or equal text, gets that record's text and
 * keeps the id; a span with another text loses the id) and refused with
 * the same errors, so a stage can feed the next one in process (mt-symbolize
 * --trace).  @fn returns 0 or a negative MTEV_E* (-MTEV_EIO with errno set),
 * which the writer keeps and returns from then on.  mtev_writer_finish()
 * calls nothing; mtev_writer_flush() does nothing; mtev_writer_bytes() is 0. */
typedef int (*mtev_sink_fn)(void *ctx, const struct mtev_rec *rec);
mtev_writer *mtev_writer_alloc_sink(mtev_sink_fn fn, void *ctx, int *err);

/* Convenience: a string view of a C string. */
static inline struct mtev_str mtev_cstr(const char *s)
{
	struct mtev_str r = {s, 0};
	if (s)
		while (s[r.len])
			r.len++;
	return r;
}

#endif
