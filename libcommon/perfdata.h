/* perfdata: a streaming reader of Linux perf.data files, file mode and pipe
 * mode, with parsers for the records mt needs.
 *
 * Usage: pd_open() on a file descriptor (a regular file is mapped, a pipe is
 * read as it comes), then pd_next() until it returns 0 (end of data) or a
 * negative -PD_E* error.  Every pointer in a struct pd_event (and in what the
 * pd_parse_*() functions fill from it) points into the reader and is valid
 * until the next pd_next() or pd_close().  pd_info() describes the recording;
 * in pipe mode it grows as HEADER_ATTR / HEADER_FEATURE records arrive.
 *
 * Only native-endian files are read (a byte-swapped magic is -PD_EENDIAN).
 * Records are returned in file order; perf.data is not globally time-sorted
 * (rounds of per-cpu buffers, separated by FINISHED_ROUND), callers sort.
 *
 * The record layouts follow the kernel's include/uapi/linux/perf_event.h and
 * tools/perf/Documentation/perf.data-file-format.txt.  Names are prefixed
 * PD_ so this header can coexist with <linux/perf_event.h>.
 */
#ifndef MT_PERFDATA_H
#define MT_PERFDATA_H

#include <stddef.h>
#include <stdint.h>

/* Record types. */
enum {
	PD_REC_MMAP = 1,
	PD_REC_LOST = 2,
	PD_REC_COMM = 3,
	PD_REC_EXIT = 4,
	PD_REC_THROTTLE = 5,
	PD_REC_UNTHROTTLE = 6,
	PD_REC_FORK = 7,
	PD_REC_READ = 8,
	PD_REC_SAMPLE = 9,
	PD_REC_MMAP2 = 10,
	PD_REC_AUX = 11,
	PD_REC_ITRACE_START = 12,
	PD_REC_LOST_SAMPLES = 13,
	PD_REC_SWITCH = 14,
	PD_REC_SWITCH_CPU_WIDE = 15,
	PD_REC_NAMESPACES = 16,
	PD_REC_KSYMBOL = 17,
	PD_REC_BPF_EVENT = 18,
	PD_REC_CGROUP = 19,
	PD_REC_TEXT_POKE = 20,
	PD_REC_AUX_OUTPUT_HW_ID = 21,
	PD_REC_KERNEL_MAX = 64, /* below: kernel records (sample_id trailer) */
	PD_REC_HEADER_ATTR = 64,
	PD_REC_HEADER_EVENT_TYPE = 65,
	PD_REC_HEADER_TRACING_DATA = 66,
	PD_REC_HEADER_BUILD_ID = 67,
	PD_REC_FINISHED_ROUND = 68,
	PD_REC_ID_INDEX = 69,
	PD_REC_AUXTRACE_INFO = 70,
	PD_REC_AUXTRACE = 71,
	PD_REC_AUXTRACE_ERROR = 72,
	PD_REC_THREAD_MAP = 73,
	PD_REC_CPU_MAP = 74,
	PD_REC_STAT_CONFIG = 75,
	PD_REC_STAT = 76,
	PD_REC_STAT_ROUND = 77,
	PD_REC_EVENT_UPDATE = 78,
	PD_REC_TIME_CONV = 79,
	PD_REC_HEADER_FEATURE = 80,
	PD_REC_COMPRESSED = 81,
	PD_REC_FINISHED_INIT = 82,
};

/* perf_event_attr.sample_type bits. */
enum {
	PD_SAMPLE_IP = 1u << 0,
	PD_SAMPLE_TID = 1u << 1,
	PD_SAMPLE_TIME = 1u << 2,
	PD_SAMPLE_ADDR = 1u << 3,
	PD_SAMPLE_READ = 1u << 4,
	PD_SAMPLE_CALLCHAIN = 1u << 5,
	PD_SAMPLE_ID = 1u << 6,
	PD_SAMPLE_CPU = 1u << 7,
	PD_SAMPLE_PERIOD = 1u << 8,
	PD_SAMPLE_STREAM_ID = 1u << 9,
	PD_SAMPLE_RAW = 1u << 10,
	PD_SAMPLE_BRANCH_STACK = 1u << 11,
	PD_SAMPLE_REGS_USER = 1u << 12,
	PD_SAMPLE_STACK_USER = 1u << 13,
	PD_SAMPLE_WEIGHT = 1u << 14,
	PD_SAMPLE_DATA_SRC = 1u << 15,
	PD_SAMPLE_IDENTIFIER = 1u << 16,
	PD_SAMPLE_TRANSACTION = 1u << 17,
	PD_SAMPLE_REGS_INTR = 1u << 18,
	PD_SAMPLE_PHYS_ADDR = 1u << 19,
	PD_SAMPLE_AUX = 1u << 20,
	PD_SAMPLE_CGROUP = 1u << 21,
	PD_SAMPLE_DATA_PAGE_SIZE = 1u << 22,
	PD_SAMPLE_CODE_PAGE_SIZE = 1u << 23,
	PD_SAMPLE_WEIGHT_STRUCT = 1u << 24,
};

/* perf_event_attr flag bits (the bitfield word). */
enum {
	PD_ATTR_EXCLUDE_USER = 1u << 4,
	PD_ATTR_EXCLUDE_KERNEL = 1u << 5,
	PD_ATTR_SAMPLE_ID_ALL = 1u << 18,
	PD_ATTR_CONTEXT_SWITCH = 1u << 26,
};

/* perf_event_attr.type values. */
enum { PD_TYPE_HARDWARE = 0, PD_TYPE_SOFTWARE = 1, PD_TYPE_BREAKPOINT = 5 };

/* Record header misc bits. */
enum {
	PD_MISC_CPUMODE_MASK = 7,
	PD_MISC_USER = 2,
	PD_MISC_COMM_EXEC = 1u << 13,
	PD_MISC_MMAP_DATA = 1u << 13,
	PD_MISC_SWITCH_OUT = 1u << 13,
	PD_MISC_SWITCH_OUT_PREEMPT = 1u << 14,
	PD_MISC_MMAP_BUILD_ID = 1u << 14,
	PD_MISC_BUILD_ID_SIZE = 1u << 15,
};

/* AUX record flags. */
enum {
	PD_AUX_TRUNCATED = 1,
	PD_AUX_OVERWRITE = 2,
	PD_AUX_PARTIAL = 4,
	PD_AUX_COLLISION = 8,
};

/* Callchain context markers (PERF_CONTEXT_*): values >= PD_CONTEXT_MAX. */
#define PD_CONTEXT_HV ((uint64_t)-32)
#define PD_CONTEXT_KERNEL ((uint64_t)-128)
#define PD_CONTEXT_USER ((uint64_t)-512)
#define PD_CONTEXT_MAX ((uint64_t)-4095)

/* Header features (bit numbers). */
enum {
	PD_FEAT_BUILD_ID = 2,
	PD_FEAT_CPUID = 9,
	PD_FEAT_EVENT_DESC = 12,
	PD_FEAT_PMU_MAPPINGS = 16,
	PD_FEAT_AUXTRACE = 18,
	PD_FEAT_COMPRESSED = 27,
};

enum pd_err {
	PD_EIO = 1,	   /* read failed; errno is set */
	PD_EMAGIC = 2,	   /* not a perf.data file */
	PD_EENDIAN = 3,	   /* perf.data of the other byte order */
	PD_ETRUNC = 4,	   /* file ends inside the header or a record */
	PD_ESIZE = 5,	   /* impossible record or section size */
	PD_ECORRUPT = 6,   /* a field does not parse */
	PD_ENOMEM = 7,
	PD_EUNSUPPORTED = 8, /* a record that cannot be read (e.g. compressed) */
	PD_EINVAL = 9,	   /* bad argument, or a parser called on the wrong type */
	PD_ELIMIT = 10,	   /* an AUXTRACE payload larger than PD_AUX_MAX */
};

/* The largest AUXTRACE payload read (one record holds at most one AUX
 * buffer's worth, perf's default is a few MiB): a larger claim is refused
 * before any of it is buffered (docs/limits.md). */
#define PD_AUX_MAX ((uint64_t)1 << 30)

const char *pd_strerror(int err);
/* "MMAP2", "AUXTRACE", ... or NULL for an unknown type. */
const char *pd_rec_name(uint32_t type);

struct pd_attr {
	uint32_t type, size;
	uint64_t config, sample_period, sample_type, read_format, flags;
	uint32_t bp_type;
	uint64_t config1, config2; /* bp_addr, bp_len for breakpoints */
	uint64_t branch_sample_type, sample_regs_user, sample_regs_intr;
	uint32_t sample_stack_user;
	const uint64_t *ids; /* owned by the reader */
	size_t nids;
	const char *name; /* from EVENT_DESC, or NULL */
};

struct pd_buildid {
	int32_t pid;
	uint16_t misc;
	uint8_t id[20], len;
	const char *filename;
};

struct pd_info {
	int pipe;	       /* pipe-mode stream */
	uint64_t data_offset;  /* file mode: data section */
	uint64_t data_size;
	const struct pd_attr *attrs;
	size_t nattrs;
	const char *cpuid;     /* CPUID feature ("GenuineIntel,6,78,3"), or NULL */
	const struct pd_buildid *buildids;
	size_t nbuildids;
	struct { uint32_t type; const char *name; } *pmus; /* PMU_MAPPINGS */
	size_t npmus;
};

enum {
	PD_HAVE_TID = 1,
	PD_HAVE_TIME = 2,
	PD_HAVE_ID = 4,
	PD_HAVE_STREAM_ID = 8,
	PD_HAVE_CPU = 16,
};

/* The sample_id fields of a kernel record (its trailer, or a sample's). */
struct pd_sample_id {
	unsigned have; /* PD_HAVE_* */
	uint32_t pid, tid, cpu;
	uint64_t time, id, stream_id;
};

struct pd_event {
	uint32_t type;
	uint16_t misc, size;
	const uint8_t *raw;	  /* the whole record, header included: size bytes */
	uint64_t offset;	  /* of the record in the file or stream */
	const uint8_t *payload;	  /* AUXTRACE / TRACING_DATA bytes after the record */
	uint64_t payload_size;
	const struct pd_attr *attr; /* the event it belongs to, or NULL */
	struct pd_sample_id sid;    /* have == 0 when none */
};

typedef struct pd_reader pd_reader;

/* Reads the file header (and, in file mode, attrs and features) from @fd.
 * The reader does not close @fd.  0 or -PD_E*. */
int pd_open(pd_reader **out, int fd);
/* Same over a memory buffer (@buf must outlive the reader). */
int pd_open_mem(pd_reader **out, const void *buf, size_t len);
void pd_close(pd_reader *r);
const struct pd_info *pd_info(const pd_reader *r);
/* 1: a record in *ev; 0: end of data; <0: -PD_E* (pd_offset() says where).
 * -PD_ETRUNC with ev->raw set: the record the data ends in (its payload cut
 * short); with ev->raw NULL: the data ends before a whole record header. */
int pd_next(pd_reader *r, struct pd_event *ev);
uint64_t pd_offset(const pd_reader *r);
/* The attr with sample id @id, or NULL. */
const struct pd_attr *pd_attr_by_id(const pd_reader *r, uint64_t id);

/* ---- record parsers: 0 or -PD_ECORRUPT / -PD_EINVAL ---- */
struct pd_mmap { /* MMAP or MMAP2 */
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t prot;	/* MMAP2; MMAP: PROT_EXEC unless MISC_MMAP_DATA */
	uint32_t flags; /* MMAP2 */
	uint8_t build_id[20], build_id_len;
	const char *filename;
};
int pd_parse_mmap(const struct pd_event *ev, struct pd_mmap *m);

struct pd_comm {
	uint32_t pid, tid;
	int exec;
	const char *comm;
};
int pd_parse_comm(const struct pd_event *ev, struct pd_comm *c);

struct pd_fork { /* FORK or EXIT */
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};
int pd_parse_fork(const struct pd_event *ev, struct pd_fork *f);

struct pd_switch { /* SWITCH or SWITCH_CPU_WIDE */
	int out, preempt;
	int cpu_wide;
	uint32_t next_prev_pid, next_prev_tid; /* cpu_wide only */
};
int pd_parse_switch(const struct pd_event *ev, struct pd_switch *s);

struct pd_aux {
	uint64_t aux_offset, aux_size, flags;
};
int pd_parse_aux(const struct pd_event *ev, struct pd_aux *a);

struct pd_itrace_start {
	uint32_t pid, tid;
};
int pd_parse_itrace_start(const struct pd_event *ev, struct pd_itrace_start *s);

struct pd_auxtrace {
	uint64_t size, offset, reference;
	uint32_t idx, tid;
	int32_t cpu;
};
int pd_parse_auxtrace(const struct pd_event *ev, struct pd_auxtrace *a);

struct pd_auxtrace_info {
	uint32_t type; /* 1 = intel_pt */
	const uint64_t *priv;
	size_t npriv;
};
int pd_parse_auxtrace_info(const struct pd_event *ev, struct pd_auxtrace_info *ai);

struct pd_time_conv {
	uint64_t time_shift, time_mult, time_zero;
	uint64_t time_cycles, time_mask;
	int cap_user_time_zero, cap_user_time_short;
	int extended; /* the last four fields were present */
};
int pd_parse_time_conv(const struct pd_event *ev, struct pd_time_conv *tc);

struct pd_lbr_entry {
	uint64_t from, to, flags;
};

struct pd_sample {
	uint64_t ip, addr, id, stream_id, period, time;
	uint32_t pid, tid, cpu;
	uint64_t nr_ips;
	const uint64_t *ips; /* callchain, with PD_CONTEXT_* markers */
	uint64_t nr_lbr;
	const struct pd_lbr_entry *lbr;
	uint64_t regs_abi; /* 0: no user regs */
	const uint64_t *regs_user; /* one per bit of attr->sample_regs_user, ascending */
	unsigned nregs_user;
	const uint8_t *stack_user; /* PERF_SAMPLE_STACK_USER: the copy from the user sp */
	uint64_t stack_size;	   /* its valid bytes (dyn_size) */
};
/* Needs ev->attr (the reader sets it for samples). */
int pd_parse_sample(const struct pd_event *ev, struct pd_sample *s);
/* The user register @regno (PERF_REG_X86_*: DI = 5, SI = 4, IP = 8) of a
 * sample, 0 and *ok = 0 when it was not sampled. */
uint64_t pd_sample_reg(const struct pd_sample *s, const struct pd_attr *attr, unsigned regno,
		       int *ok);

/* perf's TSC -> perf time conversion. */
static inline uint64_t pd_tsc_to_perf_time(uint64_t tsc, uint64_t shift, uint64_t mult,
					   uint64_t zero)
{
	uint64_t quot, rem;
	if (shift >= 64)
		return zero;
	quot = tsc >> shift;
	rem = tsc & (((uint64_t)1 << shift) - 1);
	return zero + quot * mult + ((rem * mult) >> shift);
}

#endif
