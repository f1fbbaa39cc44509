/* ptd_list: --records, every perf.data record as one line of text. */
#include "ptd_int.h"

#include <inttypes.h>
#include <stdio.h>

int ptd_list_records(int fd_in, FILE *out, struct ptd_options *opts)
{
	pd_reader *r;
	struct pd_event ev;
	int ret;

	opts->errmsg[0] = 0;
	ret = pd_open(&r, fd_in);
	if (ret < 0) {
		snprintf(opts->errmsg, sizeof opts->errmsg, "%s: %s (in the header)", INNAME(opts),
			 pd_strerror(ret));
		return ret == -PD_EIO ? -PTD_ESYS : -PTD_EINPUT;
	}
	fprintf(out, "# %s mode\n", pd_info(r)->pipe ? "pipe" : "file");
	while ((ret = pd_next(r, &ev)) > 0) {
		const char *name = pd_rec_name(ev.type);
		fprintf(out, "0x%" PRIx64 " %s type=%u size=%u", ev.offset, name ? name : "UNKNOWN",
			ev.type, ev.size);
		if (ev.sid.have & PD_HAVE_TIME)
			fprintf(out, " time=%" PRIu64, ev.sid.time);
		if (ev.sid.have & PD_HAVE_CPU)
			fprintf(out, " cpu=%u", ev.sid.cpu);
		switch (ev.type) {
		case PD_REC_AUXTRACE: {
			struct pd_auxtrace a;
			if (pd_parse_auxtrace(&ev, &a) == 0)
				fprintf(out, " idx=%u aux_size=%" PRIu64 " aux_offset=%" PRIu64
					     " tid=%u aux_cpu=%d",
					a.idx, a.size, a.offset, a.tid, a.cpu);
			break;
		}
		case PD_REC_MMAP:
		case PD_REC_MMAP2: {
			struct pd_mmap m;
			if (pd_parse_mmap(&ev, &m) == 0)
				fprintf(out, " pid=%d tid=%d addr=0x%" PRIx64 " len=0x%" PRIx64
					     " pgoff=0x%" PRIx64 " prot=%u file=%s",
					(int)m.pid, (int)m.tid, m.addr, m.len, m.pgoff, m.prot,
					m.filename);
			break;
		}
		case PD_REC_COMM: {
			struct pd_comm c;
			if (pd_parse_comm(&ev, &c) == 0)
				fprintf(out, " pid=%u tid=%u exec=%d comm=%s", c.pid, c.tid, c.exec,
					c.comm);
			break;
		}
		case PD_REC_SWITCH:
		case PD_REC_SWITCH_CPU_WIDE: {
			struct pd_switch s;
			if (pd_parse_switch(&ev, &s) == 0)
				fprintf(out, " out=%d next_prev=%u/%u", s.out, s.next_prev_pid,
					s.next_prev_tid);
			break;
		}
		default:
			break;
		}
		fputc('\n', out);
	}
	if (ret < 0)
		snprintf(opts->errmsg, sizeof opts->errmsg, "%s: %s at offset 0x%" PRIx64, INNAME(opts),
			 pd_strerror(ret), pd_offset(r));
	pd_close(r);
	if (ret == -PD_EIO)
		return -PTD_ESYS;
	return ret < 0 ? -PTD_EINPUT : 0;
}
