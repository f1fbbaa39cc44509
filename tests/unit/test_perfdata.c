/* perfdata: synthetic perf.data files (file mode, pipe mode with unaligned
 * records, from a pipe fd) whose every field the test chose; each parser
 * must give back exactly those values.  Corrupt headers must fail cleanly. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfdata.h"
#include "t.h"

struct buf {
	uint8_t b[1 << 16];
	size_t n;
};
static void put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}
static void p64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void p32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void p16(struct buf *b, uint16_t v) { put(b, &v, 2); }
static void set16(struct buf *b, size_t at, uint16_t v) { memcpy(b->b + at, &v, 2); }
static void set64(struct buf *b, size_t at, uint64_t v) { memcpy(b->b + at, &v, 8); }

#define ST (PD_SAMPLE_IDENTIFIER | PD_SAMPLE_IP | PD_SAMPLE_TID | PD_SAMPLE_TIME | PD_SAMPLE_CPU | \
	    PD_SAMPLE_CALLCHAIN | PD_SAMPLE_REGS_USER)
#define REGMASK ((1u << 4) | (1u << 5) | (1u << 8)) /* si, di, ip */

static void attr(struct buf *b, uint32_t type, uint64_t config)
{
	size_t at = b->n;
	uint8_t z[112];
	memset(z, 0, sizeof z);
	put(b, z, sizeof z);
	memcpy(b->b + at, &type, 4);
	memcpy(b->b + at + 4, &(uint32_t){112}, 4);
	set64(b, at + 8, config);
	set64(b, at + 24, ST);
	set64(b, at + 40, PD_ATTR_SAMPLE_ID_ALL);
	set64(b, at + 80, REGMASK);
}

static size_t hdr(struct buf *b, uint32_t type, uint16_t misc)
{
	size_t at = b->n;
	p32(b, type);
	p16(b, misc);
	p16(b, 0);
	return at;
}
static void fin(struct buf *b, size_t at) { set16(b, at + 6, (uint16_t)(b->n - at)); }

/* sample_id trailer for ST: tid, time, cpu, identifier */
static void trailer(struct buf *b, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu,
		    uint64_t id)
{
	p32(b, pid);
	p32(b, tid);
	p64(b, time);
	p32(b, cpu);
	p32(b, 0);
	p64(b, id);
}

/* The data records shared by both modes; returns their count. */
static int records(struct buf *b, int pipe)
{
	size_t at;
	int n = 0;
	/* COMM exec */
	at = hdr(b, PD_REC_COMM, PD_MISC_COMM_EXEC);
	p32(b, 100);
	p32(b, 101);
	put(b, "prog\0\0\0\0", 8);
	trailer(b, 100, 101, 5000, 1, 77);
	fin(b, at), n++;
	/* MMAP2 with build-id */
	at = hdr(b, PD_REC_MMAP2, PD_MISC_MMAP_BUILD_ID);
	p32(b, 100);
	p32(b, 101);
	p64(b, 0x400000);
	p64(b, 0x2000);
	p64(b, 0x1000);
	put(b, (uint8_t[]){20, 0, 0, 0}, 4);
	for (int i = 0; i < 20; i++)
		put(b, (uint8_t[]){(uint8_t)(0xa0 + i)}, 1);
	p32(b, 5);
	p32(b, 2);
	put(b, "/bin/prog\0\0\0\0\0\0\0", 16);
	trailer(b, 100, 101, 6000, 1, 77);
	fin(b, at), n++;
	/* SAMPLE: callchain (user context + 3 ips) and user regs */
	at = hdr(b, PD_REC_SAMPLE, PD_MISC_USER);
	p64(b, 88); /* identifier: the second attr */
	p64(b, 0x401234);
	p32(b, 100);
	p32(b, 101);
	p64(b, 7000);
	p32(b, 1);
	p32(b, 0);
	p64(b, 4);
	p64(b, PD_CONTEXT_USER);
	p64(b, 0x401234);
	p64(b, 0x401100);
	p64(b, 0x400800);
	p64(b, 2); /* abi */
	p64(b, 0x51);	    /* si */
	p64(b, 0xd1);	    /* di */
	p64(b, 0x401234); /* ip */
	fin(b, at), n++;
	/* SWITCH_CPU_WIDE out */
	at = hdr(b, PD_REC_SWITCH_CPU_WIDE, PD_MISC_SWITCH_OUT);
	p32(b, 200);
	p32(b, 201);
	trailer(b, 100, 101, 8000, 1, 77);
	fin(b, at), n++;
	/* AUXTRACE with 13 bytes of payload (pipe: unaligned after it) */
	at = hdr(b, PD_REC_AUXTRACE, 0);
	p64(b, pipe ? 13 : 16);
	p64(b, 4096);
	p64(b, 0xabc);
	p32(b, 3);
	p32(b, 101);
	p32(b, 0xffffffff);
	p32(b, 0);
	fin(b, at), n++;
	put(b, "\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82", pipe ? 13 : 16);
	/* TIME_CONV, old 3-field form */
	at = hdr(b, PD_REC_TIME_CONV, 0);
	p64(b, 31);
	p64(b, 976128930);
	p64(b, 12345);
	fin(b, at), n++;
	if (pipe) { /* perf ends a piped recording with a FINISHED_ROUND */
		at = hdr(b, PD_REC_FINISHED_ROUND, 0);
		fin(b, at), n++;
	}
	return n;
}

static void check_records(pd_reader *r, const char *mode, int pipe)
{
	struct pd_event ev;
	int got = 0, ok_comm = 0, ok_mmap = 0, ok_sample = 0, ok_sw = 0, ok_aux = 0, ok_tc = 0;
	int ret;
	while ((ret = pd_next(r, &ev)) > 0) {
		got++;
		if (ev.type == PD_REC_COMM) {
			struct pd_comm c;
			ok_comm = pd_parse_comm(&ev, &c) == 0 && c.pid == 100 && c.tid == 101 && c.exec &&
				  !strcmp(c.comm, "prog") && ev.sid.time == 5000 && ev.sid.cpu == 1 &&
				  ev.sid.id == 77 && ev.attr && ev.attr->type == 8;
		} else if (ev.type == PD_REC_MMAP2) {
			struct pd_mmap m;
			ok_mmap = pd_parse_mmap(&ev, &m) == 0 && m.addr == 0x400000 && m.len == 0x2000 &&
				  m.pgoff == 0x1000 && m.prot == 5 && m.flags == 2 &&
				  m.build_id_len == 20 && m.build_id[0] == 0xa0 && m.build_id[19] == 0xb3 &&
				  !strcmp(m.filename, "/bin/prog") && ev.sid.time == 6000;
		} else if (ev.type == PD_REC_SAMPLE) {
			struct pd_sample s;
			int ok1, ok2;
			ok_sample = ev.attr && ev.attr->type == PD_TYPE_BREAKPOINT &&
				    pd_parse_sample(&ev, &s) == 0 && s.ip == 0x401234 && s.pid == 100 &&
				    s.tid == 101 && s.time == 7000 && s.cpu == 1 && s.nr_ips == 4 &&
				    s.ips[0] == PD_CONTEXT_USER && s.ips[3] == 0x400800 &&
				    pd_sample_reg(&s, ev.attr, 5, &ok1) == 0xd1 && ok1 &&
				    pd_sample_reg(&s, ev.attr, 4, &ok2) == 0x51 && ok2;
		} else if (ev.type == PD_REC_SWITCH_CPU_WIDE) {
			struct pd_switch sw;
			ok_sw = pd_parse_switch(&ev, &sw) == 0 && sw.out && sw.cpu_wide &&
				sw.next_prev_pid == 200 && sw.next_prev_tid == 201 && ev.sid.time == 8000;
		} else if (ev.type == PD_REC_AUXTRACE) {
			struct pd_auxtrace a;
			ok_aux = pd_parse_auxtrace(&ev, &a) == 0 && a.size == (pipe ? 13u : 16u) &&
				 a.offset == 4096 && a.idx == 3 && a.tid == 101 && a.cpu == -1 &&
				 ev.payload_size == a.size && ev.payload[0] == 0x02 && ev.payload[1] == 0x82;
		} else if (ev.type == PD_REC_TIME_CONV) {
			struct pd_time_conv tc;
			ok_tc = pd_parse_time_conv(&ev, &tc) == 0 && tc.time_shift == 31 &&
				tc.time_mult == 976128930 && tc.time_zero == 12345 && !tc.extended;
		}
	}
	T_CHECK(ret == 0, "%s: clean end (%d)", mode, ret);
	T_CHECK(ok_comm, "%s: COMM and its sample_id", mode);
	T_CHECK(ok_mmap, "%s: MMAP2 with build-id", mode);
	T_CHECK(ok_sample, "%s: SAMPLE callchain and user regs, attr by identifier", mode);
	T_CHECK(ok_sw, "%s: SWITCH_CPU_WIDE", mode);
	T_CHECK(ok_aux, "%s: AUXTRACE and its payload", mode);
	T_CHECK(ok_tc, "%s: TIME_CONV", mode);
	(void)got;
}

static struct buf fb, pb;

int main(void)
{
	pd_reader *r;
	size_t data_at, attrs_at, ids_at, feat_at;
	const struct pd_info *in;

	/* ---- file mode ---- */
	fb.n = 104;
	memcpy(fb.b, "PERFILE2", 8);
	set64(&fb, 8, 104);
	set64(&fb, 16, 112 + 16);
	ids_at = fb.n;
	p64(&fb, 77);
	p64(&fb, 78);
	p64(&fb, 88);
	attrs_at = fb.n;
	attr(&fb, 8, 0x2001);
	p64(&fb, ids_at);
	p64(&fb, 16);
	attr(&fb, PD_TYPE_BREAKPOINT, 0);
	p64(&fb, ids_at + 16);
	p64(&fb, 8);
	set64(&fb, 24, attrs_at);
	set64(&fb, 32, fb.n - attrs_at);
	data_at = fb.n;
	records(&fb, 0);
	set64(&fb, 40, data_at);
	set64(&fb, 48, fb.n - data_at);
	/* features: BUILD_ID (2) and CPUID (9) */
	set64(&fb, 72, (1u << PD_FEAT_BUILD_ID) | (1u << PD_FEAT_CPUID));
	feat_at = fb.n;
	fb.n += 32;
	{
		size_t s1 = fb.n, at;
		at = hdr(&fb, PD_REC_HEADER_BUILD_ID, PD_MISC_BUILD_ID_SIZE);
		p32(&fb, 100);
		for (int i = 0; i < 20; i++)
			put(&fb, (uint8_t[]){(uint8_t)i}, 1);
		put(&fb, (uint8_t[]){20, 0, 0, 0}, 4);
		put(&fb, "/bin/prog\0\0\0\0\0\0\0", 16);
		fin(&fb, at);
		set64(&fb, feat_at, s1);
		set64(&fb, feat_at + 8, fb.n - s1);
		s1 = fb.n;
		p32(&fb, 24);
		put(&fb, "GenuineIntel,6,106,6\0\0\0\0", 24);
		set64(&fb, feat_at + 16, s1);
		set64(&fb, feat_at + 24, fb.n - s1);
	}
	T_CHECK(pd_open_mem(&r, fb.b, fb.n) == 0, "file mode opens");
	in = pd_info(r);
	T_CHECK(!in->pipe && in->nattrs == 2 && in->attrs[0].config == 0x2001 &&
			in->attrs[0].nids == 2 && in->attrs[1].type == PD_TYPE_BREAKPOINT,
		"file mode: attrs and ids");
	T_CHECK(in->cpuid && !strcmp(in->cpuid, "GenuineIntel,6,106,6"), "file mode: CPUID feature");
	T_CHECK(in->nbuildids == 1 && in->buildids[0].len == 20 && in->buildids[0].id[19] == 19 &&
			!strcmp(in->buildids[0].filename, "/bin/prog"),
		"file mode: BUILD_ID feature");
	check_records(r, "file", 0);
	pd_close(r);

	/* truncated inside the data: ETRUNC after the whole records */
	{
		struct pd_event ev;
		int ret, n = 0;
		T_CHECK(pd_open_mem(&r, fb.b, data_at + 100) == 0, "cut file opens");
		while ((ret = pd_next(r, &ev)) > 0)
			n++;
		T_CHECK(ret == -PD_ETRUNC && n == 1, "cut file: one record, then truncated (%d, %d)", n,
			ret);
		pd_close(r);
	}

	/* ---- pipe mode: attrs as HEADER_ATTR, feature records of odd size ---- */
	memcpy(pb.b, "PERFILE2", 8);
	pb.n = 8;
	p64(&pb, 16);
	{
		size_t at = hdr(&pb, PD_REC_HEADER_ATTR, 0);
		attr(&pb, 8, 0x2001);
		p64(&pb, 77);
		p64(&pb, 78);
		fin(&pb, at);
		at = hdr(&pb, PD_REC_HEADER_ATTR, 0);
		attr(&pb, PD_TYPE_BREAKPOINT, 0);
		p64(&pb, 88);
		fin(&pb, at);
		at = hdr(&pb, PD_REC_HEADER_FEATURE, 0);
		p64(&pb, PD_FEAT_CPUID);
		p32(&pb, 21);
		put(&pb, "GenuineIntel,6,78,3\0\0", 21); /* 8 + 8 + 4 + 21 = 41: unaligned */
		fin(&pb, at);
	}
	records(&pb, 1);
	T_CHECK(pd_open_mem(&r, pb.b, pb.n) == 0, "pipe mode opens");
	check_records(r, "pipe (memory)", 1);
	in = pd_info(r);
	T_CHECK(in->pipe && in->nattrs == 2 && in->cpuid && !strcmp(in->cpuid, "GenuineIntel,6,78,3"),
		"pipe mode: HEADER_ATTR and HEADER_FEATURE");
	pd_close(r);
	{
		int fds[2];
		if (pipe(fds) == 0 && write(fds[1], pb.b, pb.n) == (ssize_t)pb.n) {
			close(fds[1]);
			T_CHECK(pd_open(&r, fds[0]) == 0, "pipe mode from a pipe fd opens");
			check_records(r, "pipe (fd)", 1);
			pd_close(r);
			close(fds[0]);
		}
	}

	/* ---- bad headers ---- */
	{
		uint8_t bad[200];
		memcpy(bad, fb.b, sizeof bad);
		memcpy(bad, "PERFILE3", 8);
		T_CHECK(pd_open_mem(&r, bad, sizeof bad) == -PD_EMAGIC, "bad magic");
		memcpy(bad, "2ELIFREP", 8);
		T_CHECK(pd_open_mem(&r, bad, sizeof bad) == -PD_EENDIAN, "other endian");
		T_CHECK(pd_open_mem(&r, fb.b, 50) == -PD_ETRUNC, "cut header");
		memcpy(bad, fb.b, sizeof bad);
		memcpy(bad + 16, &(uint64_t){7}, 8);
		T_CHECK(pd_open_mem(&r, bad, sizeof bad) == -PD_ESIZE, "bad attr_size");
		T_CHECK(pd_open_mem(&r, "", 0) == -PD_ETRUNC, "empty");
	}
	{
		/* a zero-size record inside the data */
		struct buf *z = malloc(sizeof *z);
		struct pd_event ev;
		int ret;
		*z = fb;
		set16(z, data_at + 6, 0);
		T_CHECK(pd_open_mem(&r, z->b, z->n) == 0, "zero-size record: opens");
		ret = pd_next(r, &ev);
		T_CHECK(ret == -PD_ESIZE && pd_offset(r) == data_at, "zero-size record: ESIZE at its offset");
		pd_close(r);
		free(z);
	}
	{
		uint64_t t = pd_tsc_to_perf_time(2200000000ull, 31, 976128930, 5);
		T_CHECK(t >= 1000000004ull && t <= 1000000005ull,
			"TIME_CONV arithmetic: 2.2e9 ticks at 2.2 GHz ~ 1 s (%llu)", (unsigned long long)t);
		/* quot/rem split: (3 << 31) + (1 << 30) ticks at mult 2^31 = 3.5 * 2^31 */
		t = pd_tsc_to_perf_time((3ull << 31) + (1ull << 30), 31, 1ull << 31, 0);
		T_CHECK(t == (3ull << 31) + (1ull << 30), "TIME_CONV keeps the remainder");
	}
	return T_DONE();
}
