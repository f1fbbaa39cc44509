#include "unwind.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct umap {
	uint64_t start, len, pgoff;
	char *file;
	int reported; /* 1 reported, -1 could not be */
};

struct upid {
	uint32_t pid;
	struct umap *maps;
	size_t nmaps, cap;
	Dwfl *dwfl;
	int attached, dirty;
};

struct usample { /* the sample being unwound */
	uint32_t tid;
	const uint64_t *regs;
	const uint8_t *stack;
	uint64_t sp, len;
};

struct unw {
	struct upid *p;
	size_t np, cap;
	struct usample cur;
};

unw *unw_new(void)
{
	return calloc(1, sizeof(unw));
}

static void upid_clear(struct upid *p)
{
	for (size_t i = 0; i < p->nmaps; i++)
		free(p->maps[i].file);
	p->nmaps = 0;
	if (p->dwfl)
		dwfl_end(p->dwfl);
	p->dwfl = NULL;
	p->attached = 0;
}

void unw_free(unw *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->np; i++) {
		upid_clear(&u->p[i]);
		free(u->p[i].maps);
	}
	free(u->p);
	free(u);
}

static struct upid *upid_get(unw *u, uint32_t pid, int create)
{
	for (size_t i = 0; i < u->np; i++)
		if (u->p[i].pid == pid)
			return &u->p[i];
	if (!create)
		return NULL;
	if (u->np == u->cap) {
		size_t nc = u->cap ? 2 * u->cap : 8;
		struct upid *nv = realloc(u->p, nc * sizeof *nv);
		if (!nv)
			return NULL;
		u->p = nv;
		u->cap = nc;
	}
	memset(&u->p[u->np], 0, sizeof u->p[0]);
	u->p[u->np].pid = pid;
	return &u->p[u->np++];
}

static void add_map(struct upid *p, uint64_t start, uint64_t len, uint64_t pgoff, const char *file)
{
	if (p->nmaps == p->cap) {
		size_t nc = p->cap ? 2 * p->cap : 16;
		struct umap *nv = realloc(p->maps, nc * sizeof *nv);
		if (!nv)
			return;
		p->maps = nv;
		p->cap = nc;
	}
	char *f = file ? strdup(file) : NULL;
	if (file && !f)
		return;
	p->maps[p->nmaps++] = (struct umap){start, len, pgoff, f, f ? 0 : -1};
	p->dirty = 1;
}

void unw_map(unw *u, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, const char *file)
{
	struct upid *p = upid_get(u, pid, 1);
	if (p)
		add_map(p, start, len, pgoff, file);
}

void unw_exec(unw *u, uint32_t pid)
{
	struct upid *p = upid_get(u, pid, 0);
	if (p)
		upid_clear(p);
}

void unw_fork(unw *u, uint32_t pid, uint32_t ppid)
{
	if (pid == ppid)
		return;
	struct upid *pp = upid_get(u, ppid, 0);
	if (!pp || !pp->nmaps)
		return;
	size_t ip = (size_t)(pp - u->p);
	struct upid *p = upid_get(u, pid, 1);
	if (!p)
		return;
	pp = &u->p[ip]; /* upid_get may have moved it */
	upid_clear(p);
	for (size_t i = 0; i < pp->nmaps; i++)
		add_map(p, pp->maps[i].start, pp->maps[i].len, pp->maps[i].pgoff, pp->maps[i].file);
}

/* ---- libdwfl callbacks ---- */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	unw *u = arg;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return (pid_t)u->cur.tid;
}

/* Only the stack copy is memory we have (the code is read from the files). */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	(void)dwfl;
	const struct usample *s = &((unw *)arg)->cur;
	if (addr == s->sp - 8) {
		/* below the copy: sampled at a ret after pop %rbp (or leave), the
		 * CFI still says rbp was saved in the slot just popped, whose
		 * value rbp now holds */
		*result = s->regs[6];
		return true;
	}
	if (addr < s->sp || addr - s->sp > s->len || s->len - (addr - s->sp) < 8)
		return false;
	memcpy(result, s->stack + (addr - s->sp), 8);
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const uint64_t *r = ((unw *)arg)->cur.regs;
	/* DWARF x86-64 numbering: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip;
	 * perf's: AX 0 BX 1 CX 2 DX 3 SI 4 DI 5 BP 6 SP 7 IP 8 ... R8 16 */
	Dwarf_Word d[17] = {r[0], r[3], r[2], r[1], r[4], r[5], r[6], r[7]};
	for (int i = 0; i < 8; i++)
		d[8 + i] = r[16 + i];
	d[16] = r[8];
	return dwfl_thread_state_registers(thread, 0, 17, d);
}

static const Dwfl_Thread_Callbacks thread_cb = {
	.next_thread = next_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

static char *debuginfo_path;
static const Dwfl_Callbacks offline_cb = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

/* The load bias of @m's file: runtime = bias + p_vaddr, through the PT_LOAD
 * segment that holds file offset pgoff.  0 and *bias, or -1. */
static int map_bias(const struct umap *m, uint64_t *bias)
{
	int fd = open(m->file, O_RDONLY | O_CLOEXEC), r = -1;
	if (fd < 0)
		return -1;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t n = 0;
	if (e && elf_getphdrnum(e, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    !(ph.p_flags & PF_X))
				continue;
			if (m->pgoff >= (ph.p_offset & ~(uint64_t)0xfff) &&
			    m->pgoff < ph.p_offset + ph.p_filesz) {
				*bias = m->start - m->pgoff + ph.p_offset - ph.p_vaddr;
				r = 0;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return r;
}

/* Reports the maps not reported yet; attaches the thread callbacks once a
 * module is there.  0, or -1 when nothing can be unwound. */
static int upid_ready(unw *u, struct upid *p)
{
	if (!p->dwfl) {
		p->dwfl = dwfl_begin(&offline_cb);
		if (!p->dwfl)
			return -1;
		p->attached = 0;
		for (size_t i = 0; i < p->nmaps; i++)
			if (p->maps[i].reported > 0)
				p->maps[i].reported = 0;
		p->dirty = 1;
	}
	if (p->dirty) {
		dwfl_report_begin_add(p->dwfl);
		for (size_t i = 0; i < p->nmaps; i++) {
			struct umap *m = &p->maps[i];
			uint64_t bias;
			if (m->reported)
				continue;
			/* one module per file: its other executable maps are the same */
			int dup = 0;
			for (size_t j = 0; j < i && !dup; j++)
				dup = p->maps[j].reported > 0 && !strcmp(p->maps[j].file, m->file);
			if (dup || map_bias(m, &bias) < 0 ||
			    !dwfl_report_elf(p->dwfl, m->file, m->file, -1, bias, true)) {
				m->reported = -1;
				continue;
			}
			m->reported = 1;
		}
		dwfl_report_end(p->dwfl, NULL, NULL);
		p->dirty = 0;
	}
	if (!p->attached) {
		if (!dwfl_attach_state(p->dwfl, NULL, (pid_t)p->pid, &thread_cb, u))
			return -1;
		p->attached = 1;
	}
	return 0;
}

struct collect {
	uint64_t *ips;
	size_t n, max;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct collect *c = arg;
	Dwarf_Addr pc;
	bool activation;
	if (!dwfl_frame_pc(state, &pc, &activation) || !pc || c->n >= c->max)
		return DWARF_CB_ABORT;
	/* a return address as it is (a perf callchain's convention: the
	 * stages look up ip - 1 for every frame but the first) */
	c->ips[c->n++] = pc;
	return DWARF_CB_OK;
}

size_t unw_sample(unw *u, uint32_t pid, uint32_t tid, const uint64_t regs[UNW_NREGS],
		  uint64_t have, const uint8_t *stack, uint64_t len, uint64_t *ips, size_t max,
		  int *whole)
{
	const uint64_t need = 1u << 6 | 1u << 7 | 1u << 8; /* BP SP IP */
	struct upid *p = upid_get(u, pid, 0);
	if (whole)
		*whole = 0;
	if (!max || (have & need) != need || !p || upid_ready(u, p) < 0)
		return 0;
	u->cur = (struct usample){tid, regs, stack, regs[7], len};
	struct collect c = {ips, 0, max};
	/* 0: the last frame's return address is undefined (its CFI says so:
	 * the outermost frame); -1 an error (memory outside the copy, no
	 * CFI), or frame_cb stopped it */
	int r = dwfl_getthread_frames(p->dwfl, (pid_t)tid, frame_cb, &c);
	if (whole)
		*whole = r == 0 && c.n > 0;
	return c.n;
}
