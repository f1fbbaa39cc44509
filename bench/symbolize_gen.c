/* symbolize_gen BINARY EVENTS UNIQUE: writes (stdout) an MTEV span stream of
 * one thread running code of BINARY: about EVENTS spans + waypoints whose
 * addresses are drawn from about UNIQUE distinct addresses: the entries of
 * UNIQUE/9 functions spread evenly over the binary's code (so over all its
 * compilation units) and 8 addresses inside each; only functions whose
 * symbol contains NAME-PART when it is given.  For bench/symbolize.sh. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfinfo.h"
#include "mtev.h"

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: symbolize_gen BINARY EVENTS UNIQUE [NAME-PART]\n");
		return 2;
	}
	const char *path = argv[1];
	uint64_t events = strtoull(argv[2], NULL, 0), unique = strtoull(argv[3], NULL, 0);
	struct elfinfo ei;
	if (elfinfo_load(&ei, path) < 0 || !ei.nsyms || !unique) {
		fprintf(stderr, "symbolize_gen: cannot read %s\n", path);
		return 2;
	}
	/* functions of 64 bytes or more, in address order; pick nfun evenly */
	struct elf_sym *all = malloc(ei.nsyms * sizeof *all);
	size_t nall = 0;
	for (size_t i = 0; i < ei.nsyms; i++)
		if (ei.syms[i].size >= 64 && !ei.syms[i].is_plt &&
		    (argc < 5 || strstr(ei.syms[i].name, argv[4])))
			all[nall++] = ei.syms[i];
	size_t per = 8, nfun = (size_t)((unique + per) / (per + 1));
	if (nfun > nall)
		nfun = nall;
	if (!nfun)
		nfun = 1;
	struct elf_sym *fs = malloc(nfun * sizeof *fs);
	for (size_t i = 0; i < nfun; i++)
		fs[i] = all[i * nall / nfun];
	free(all);
	uint64_t base = ei.is_pie ? 0x555555554000ull : 0;
	int err;
	mtev_writer *w = mtev_writer_alloc(1, "symbolize_gen", MTEV_F_SORTED | MTEV_F_SPANS, &err);
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_THREAD;
	r.thread.pid = r.thread.tid = 1000;
	r.thread.name = mtev_cstr("bench");
	mtev_write(w, &r);
	for (size_t i = 0; i < ei.nsegs; i++) {
		memset(&r, 0, sizeof r);
		r.kind = MTEV_MAP;
		r.map.pid = 1000;
		r.map.start = base + (ei.segs[i].vaddr & ~0xfffull);
		r.map.len = ((ei.segs[i].vaddr + ei.segs[i].memsz + 0xfff) & ~0xfffull) -
			    (ei.segs[i].vaddr & ~0xfffull);
		r.map.pgoff = ei.segs[i].offset & ~0xfffull;
		r.map.prot = 5;
		r.map.build_id_len = ei.build_id_len;
		r.map.build_id = ei.build_id;
		r.map.path = mtev_cstr(path);
		mtev_write(w, &r);
	}
	/* root span, then children of 1 span + 9 waypoints each */
	uint64_t nspans = events / 10, t = 1000;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SPAN;
	r.span.tid = 1000;
	r.span.begin = 0;
	r.span.end = 100 * nspans + 2000;
	r.span.func = base + fs[0].addr;
	mtev_write(w, &r);
	uint64_t k = 0;
	for (uint64_t s = 0; s < nspans; s++) {
		const struct elf_sym *f = &fs[s % nfun];
		memset(&r, 0, sizeof r);
		r.kind = MTEV_SPAN;
		r.span.tid = 1000;
		r.span.depth = 1;
		r.span.begin = t;
		r.span.end = t + 90;
		r.span.func = base + f->addr;
		mtev_write(w, &r);
		for (int j = 0; j < 9; j++) {
			memset(&r, 0, sizeof r);
			r.kind = MTEV_WAYPOINT;
			r.waypoint.tid = 1000;
			r.waypoint.depth = 1;
			r.waypoint.time = t + 1 + 10 * (uint64_t)j;
			uint64_t off = 4 * ((k++ % per) + 1);
			if (off >= f->size)
				off = f->size - 1;
			r.waypoint.addr = base + f->addr + off;
			mtev_write(w, &r);
		}
		t += 100;
	}
	mtev_writer_finish(w);
	mtev_writer_free(w);
	free(fs);
	elfinfo_fini(&ei);
	return 0;
}
