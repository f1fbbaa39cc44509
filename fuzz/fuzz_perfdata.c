/* libFuzzer target: the perf.data reader (libcommon/perfdata.c), mt-decode's input.
 *
 * The same bytes are read from memory (pd_open_mem: file mode in place, pipe
 * mode as a buffer) and from a descriptor that is not a regular file and
 * returns short reads (pd_open: the pipe path, `perf record -o - | mt-decode`);
 * the two readers must agree on the header, on every record (type, size,
 * offset, bytes, AUXTRACE payload, attr, sample_id) and on the final status
 * and error offset.  Every record is handed to every pd_parse_*(): the one for
 * its type must not crash (strings and arrays it returns are read through, so
 * ASan checks their bounds), the others must say -PD_EINVAL.  pd_info() is
 * read through as well.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memfd.h"
#include "perfdata.h"

static volatile uint64_t sink; /* keeps the reads from being optimized out */

static void touch(const void *p, size_t n)
{
	const volatile uint8_t *b = p;
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += b[i];
	sink += s;
}

static void touch_str(const char *s)
{
	if (s)
		touch(s, strlen(s) + 1);
}

static void check_info(const pd_reader *r)
{
	const struct pd_info *in = pd_info(r);
	for (size_t i = 0; i < in->nattrs; i++) {
		const struct pd_attr *a = &in->attrs[i];
		touch(a->ids, a->nids * sizeof *a->ids);
		touch_str(a->name);
		for (size_t k = 0; k < a->nids; k++) {
			const struct pd_attr *b = pd_attr_by_id(r, a->ids[k]);
			FUZZ_ASSERT(b != NULL, "attr id %llu not found", (unsigned long long)a->ids[k]);
		}
	}
	touch_str(in->cpuid);
	for (size_t i = 0; i < in->nbuildids; i++) {
		touch(in->buildids[i].id, in->buildids[i].len);
		FUZZ_ASSERT(in->buildids[i].len <= 20, "build-id length %u", in->buildids[i].len);
		touch_str(in->buildids[i].filename);
	}
	for (size_t i = 0; i < in->npmus; i++)
		touch_str(in->pmus[i].name);
}

#define PARSE(want, call)                                                                          \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		ok = 0;                                                                            \
		FUZZ_ASSERT(rc_ == 0 || rc_ == -PD_ECORRUPT || rc_ == -PD_EINVAL, "%s: %d", #call,  \
			    rc_);                                                                  \
		FUZZ_ASSERT((want) || rc_ == -PD_EINVAL,                                           \
			    "%s accepted a record of type %u", #call, ev->type);                   \
		if ((want) && rc_ == 0)                                                            \
			ok = 1;                                                                    \
	} while (0)

static void parse_all(const struct pd_event *ev)
{
	uint32_t t = ev->type;
	int ok = 0;
	struct pd_mmap m;
	struct pd_comm c;
	struct pd_fork f;
	struct pd_switch sw;
	struct pd_aux ax;
	struct pd_itrace_start is;
	struct pd_auxtrace at;
	struct pd_auxtrace_info ai;
	struct pd_time_conv tc;
	struct pd_sample s;

	PARSE(t == PD_REC_MMAP || t == PD_REC_MMAP2, pd_parse_mmap(ev, &m));
	if (ok) {
		touch_str(m.filename);
		FUZZ_ASSERT(m.build_id_len <= 20, "mmap build-id length %u", m.build_id_len);
	}
	PARSE(t == PD_REC_COMM, pd_parse_comm(ev, &c));
	if (ok)
		touch_str(c.comm);
	PARSE(t == PD_REC_FORK || t == PD_REC_EXIT, pd_parse_fork(ev, &f));
	PARSE(t == PD_REC_SWITCH || t == PD_REC_SWITCH_CPU_WIDE, pd_parse_switch(ev, &sw));
	PARSE(t == PD_REC_AUX, pd_parse_aux(ev, &ax));
	PARSE(t == PD_REC_ITRACE_START, pd_parse_itrace_start(ev, &is));
	PARSE(t == PD_REC_AUXTRACE, pd_parse_auxtrace(ev, &at));
	if (ok)
		touch(ev->payload, ev->payload_size);
	PARSE(t == PD_REC_AUXTRACE_INFO, pd_parse_auxtrace_info(ev, &ai));
	if (ok)
		touch(ai.priv, ai.npriv * sizeof *ai.priv);
	PARSE(t == PD_REC_TIME_CONV, pd_parse_time_conv(ev, &tc));
	PARSE(t == PD_REC_SAMPLE && ev->attr, pd_parse_sample(ev, &s));
	if (ok) {
		touch(s.ips, s.nr_ips * sizeof *s.ips);
		touch(s.lbr, s.nr_lbr * sizeof *s.lbr);
		touch(s.regs_user, s.nregs_user * sizeof *s.regs_user);
		int have;
		for (unsigned reg = 0; reg < 24; reg++)
			sink += pd_sample_reg(&s, ev->attr, reg, &have);
	}
}

static int same_attr(const struct pd_attr *a, const struct pd_attr *b)
{
	if (!a || !b)
		return a == b;
	return a->type == b->type && a->config == b->config && a->sample_type == b->sample_type &&
	       a->flags == b->flags && a->nids == b->nids;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pd_reader *r1, *r2;
	int e1 = pd_open_mem(&r1, data, size);
	fuzz_in_set(data, size, 1);
	int e2 = pd_open(&r2, FUZZ_FD_IN);
	FUZZ_ASSERT(e1 == e2, "open: memory %d (%s), fd %d (%s)", e1, pd_strerror(e1), e2,
		    pd_strerror(e2));
	if (e1 < 0) {
		FUZZ_ASSERT(e1 != -PD_EIO && e1 != -PD_ENOMEM, "open: %s", pd_strerror(e1));
		return 0;
	}
	const struct pd_info *i1 = pd_info(r1), *i2 = pd_info(r2);
	FUZZ_ASSERT(i1->pipe == i2->pipe && i1->nattrs == i2->nattrs, "headers differ");
	check_info(r1);

	struct pd_event a, b;
	int n1, n2;
	uint64_t nrec = 0;
	for (;;) {
		n1 = pd_next(r1, &a);
		n2 = pd_next(r2, &b);
		FUZZ_ASSERT(n1 == n2, "record %llu: memory %d, fd %d", (unsigned long long)nrec, n1, n2);
		if (n1 <= 0)
			break;
		nrec++;
		FUZZ_ASSERT(a.type == b.type && a.misc == b.misc && a.size == b.size &&
				    a.offset == b.offset && a.payload_size == b.payload_size,
			    "record %llu differs (type %u/%u size %u/%u offset %llu/%llu)",
			    (unsigned long long)nrec, a.type, b.type, a.size, b.size,
			    (unsigned long long)a.offset, (unsigned long long)b.offset);
		FUZZ_ASSERT(a.size >= 8, "record of %u bytes", a.size);
		FUZZ_ASSERT(!memcmp(a.raw, b.raw, a.size), "record %llu bytes differ",
			    (unsigned long long)nrec);
		FUZZ_ASSERT(!a.payload_size || !memcmp(a.payload, b.payload, a.payload_size),
			    "payload differs");
		FUZZ_ASSERT(same_attr(a.attr, b.attr), "attr differs");
		FUZZ_ASSERT(!memcmp(&a.sid, &b.sid, sizeof a.sid), "sample_id differs");
		parse_all(&a);
		/* pipe mode: attrs arrive as records */
		if (a.type == PD_REC_HEADER_ATTR || a.type == PD_REC_HEADER_FEATURE)
			check_info(r1);
	}
	FUZZ_ASSERT(n1 != -PD_EIO && n1 != -PD_ENOMEM, "pd_next: %s", pd_strerror(n1));
	FUZZ_ASSERT(pd_offset(r1) == pd_offset(r2), "error offsets %llu %llu",
		    (unsigned long long)pd_offset(r1), (unsigned long long)pd_offset(r2));
	pd_close(r1);
	pd_close(r2);
	return 0;
}
