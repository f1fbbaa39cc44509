#include "cgpick.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elfinfo.h"
#include "symaddr.h"

double cg_fp_fraction(const char *path)
{
	struct elfinfo ei;
	if (elfinfo_load(&ei, path) < 0)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t funcs = 0, withfp = 0;
	/* an even spread over the table, at most 400 functions */
	size_t step = ei.nsyms > 400 ? ei.nsyms / 400 : 1;
	for (size_t i = 0; fd >= 0 && i < ei.nsyms; i += step) {
		const struct elf_sym *s = &ei.syms[i];
		uint8_t b[8];
		if (s->is_plt || s->size < 16)
			continue;
		int64_t off = elfinfo_vaddr_to_offset(&ei, s->addr);
		if (off < 0 || pread(fd, b, 8, off) != 8)
			continue;
		unsigned k = !memcmp(b, "\xf3\x0f\x1e\xfa", 4) ? 4 : 0; /* endbr64 */
		funcs++;
		withfp += b[k] == 0x55 && !memcmp(b + k + 1, "\x48\x89\xe5", 3);
	}
	if (fd >= 0)
		close(fd);
	elfinfo_fini(&ei);
	return funcs ? (double)withfp / (double)funcs : -1;
}

static int have_lbr(void)
{
	/* Intel's core PMU describes its LBR; AMD's and VMs' do not */
	return access("/sys/bus/event_source/devices/cpu/caps/branches", R_OK) == 0;
}

const char *cg_pick(pid_t pid, char *why, size_t len)
{
	if (have_lbr()) {
		snprintf(why, len, "call graph: lbr (the CPU records call stacks)");
		return "lbr";
	}
	struct symaddr_maps m;
	const char *lacks = NULL;
	if (symaddr_maps_read(&m, pid) == 0) {
		for (size_t i = 0; i < m.n && !lacks; i++) {
			const char *p = m.v[i].path;
			if (p[0] != '/' || !strchr(m.v[i].perms, 'x') || strstr(p, "/ld-linux"))
				continue;
			double f = cg_fp_fraction(p); /* one executable map per file */
			if (f >= 0 && f < 0.5) {
				const char *b = strrchr(p, '/');
				snprintf(why, len,
					 "call graph: dwarf (%s has no frame pointers, no LBR on this CPU)",
					 b ? b + 1 : p);
				lacks = "dwarf";
			}
		}
		symaddr_maps_fini(&m);
	}
	if (lacks)
		return lacks;
	snprintf(why, len, "call graph: fp (the program and its libraries keep frame pointers, "
			   "no LBR on this CPU)");
	return "fp";
}
