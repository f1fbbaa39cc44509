/* ptsim_trace: run a program under ptrace and single-step every thread.
 *
 * Scheduling: at most one ordinary instruction is in flight at a time, so the
 * interleaving of threads is deterministic; a thread that issues a system call
 * stays in flight (it may block) while the others keep stepping. */
#include "ptsim.h"
#include "elfinfo.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PTSIM_MAX_THREADS 4096

enum tstate { T_STOPPED, T_INFLIGHT, T_INSYSCALL, T_SIGDELIVER, T_NEW, T_DEAD };

struct tth {
	uint32_t tid;
	int state;
	int pending_sig;
	uint64_t rip, rsp, rdi, rsi, rax;
	uint64_t sig_at; /* T_SIGDELIVER: where the signal hit */
	int sig_insyscall, sig_no;
};

struct tracer {
	struct ptsim_run *run;
	const struct ptsim_trace_opts *o;
	pid_t pid;
	int memfd;
	struct tth *th;
	size_t nth, thcap;
	size_t rr; /* round-robin cursor */
	uint64_t stop_addr;
	char *err;
	size_t errlen;
	int exclusive; /* a thread issued exit_group: wait for it alone */
	int execd;     /* a successful execve: the run ends (PTSIM_END_EXEC) */
	struct tth *inflight; /* the one ordinary step in flight */
	double t0, last_progress; /* when stepping began, the last progress report */
};

static int fail(struct tracer *t, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct tracer *t, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->err, t->errlen, fmt, ap);
	va_end(ap);
	return code;
}

static int log_ev(struct ptsim_run *r, const struct ptsim_ev *e)
{
	if (r->nev == r->cap) {
		size_t ncap = r->cap ? r->cap * 2 : 65536;
		struct ptsim_ev *n = realloc(r->ev, ncap * sizeof(*n));
		if (!n)
			return -1;
		r->ev = n;
		r->cap = ncap;
	}
	r->ev[r->nev++] = *e;
	return 0;
}

const struct ptsim_map *ptsim_find_map(const struct ptsim_run *run, uint64_t ip)
{
	/* Later maps win: a re-mapped range is appended. */
	for (size_t i = run->nmaps; i-- > 0;) {
		const struct ptsim_map *m = &run->maps[i];
		if (ip >= m->start && ip - m->start < m->len)
			return m;
	}
	return NULL;
}

static struct tth *find_th(struct tracer *t, uint32_t tid)
{
	for (size_t i = 0; i < t->nth; i++)
		if (t->th[i].tid == tid && t->th[i].state != T_DEAD)
			return &t->th[i];
	return NULL;
}

static struct tth *add_th(struct tracer *t, uint32_t tid, int state)
{
	/* Fixed capacity: pointers into the table stay valid. */
	if (!t->th) {
		t->th = calloc(PTSIM_MAX_THREADS, sizeof(*t->th));
		if (!t->th)
			return NULL;
		t->thcap = PTSIM_MAX_THREADS;
	}
	if (t->nth == t->thcap)
		return NULL;
	struct tth *h = &t->th[t->nth++];
	memset(h, 0, sizeof(*h));
	h->tid = tid;
	h->state = state;
	return h;
}

static void read_comm(uint32_t pid, uint32_t tid, char out[16])
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%u/task/%u/comm", pid, tid);
	memset(out, 0, 16);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, 15);
	close(fd);
	if (n > 0 && out[n - 1] == '\n')
		out[n - 1] = 0;
}

static int getregs(struct tth *h)
{
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, h->tid, 0, &regs) < 0)
		return -1;
	h->rip = regs.rip;
	h->rsp = regs.rsp;
	h->rdi = regs.rdi;
	h->rsi = regs.rsi;
	h->rax = regs.orig_rax == (unsigned long long)-1 ? regs.rax : regs.rax;
	h->rax = regs.rax;
	return 0;
}

/* Another tool's uprobe (perf probe, a trigger, mt-capture run elsewhere
 * on the machine) is an int3 the kernel writes into every process mapping
 * that file: the memory then differs from the file by an 0xcc where the
 * probed instruction begins.  The process executes the original
 * instruction (the kernel steps it out of line), and a recording's
 * decoder reads the file, so the code is the file's: each such byte of
 * @m is given back its file byte (same file: device and inode as mapped).
 * Returns how many were. */
static size_t unprobe(struct ptsim_map *m)
{
	struct stat st;
	size_t n = 0;
	int fd = open(m->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && st.st_ino == m->ino && major(st.st_dev) == m->maj &&
	    minor(st.st_dev) == m->min) {
		uint8_t buf[65536];
		for (uint64_t o = 0; o < m->len;) {
			size_t want = m->len - o < sizeof buf ? (size_t)(m->len - o) : sizeof buf;
			ssize_t got = pread(fd, buf, want, (off_t)(m->pgoff + o));
			if (got <= 0)
				break;
			for (ssize_t i = 0; i < got; i++)
				if (m->bytes[o + i] == 0xcc && buf[i] != 0xcc) {
					m->bytes[o + i] = buf[i];
					n++;
				}
			o += (uint64_t)got;
		}
	}
	close(fd);
	return n;
}

/* Reads /proc/pid/maps and records every executable mapping not yet known. */
static int scan_maps(struct tracer *t)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/maps", t->pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return fail(t, PTSIM_E_SYS, "cannot read %s: %s", p, strerror(errno));
	char line[4096];
	struct ptsim_run *r = t->run;
	while (fgets(line, sizeof line, f)) {
		unsigned long long s, e, off, ino;
		unsigned maj, min;
		char perms[8], path[4096];
		path[0] = 0;
		int n = sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %4095[^\n]", &s, &e, perms, &off,
			       &maj, &min, &ino, path);
		if (n < 7 || perms[2] != 'x')
			continue;
		char *pp = path;
		while (*pp == ' ')
			pp++;
		if (!strcmp(pp, "[vsyscall]"))
			continue;
		int known = 0;
		for (size_t i = 0; i < r->nmaps; i++)
			if (r->maps[i].start == s && r->maps[i].len == e - s &&
			    !strcmp(r->maps[i].path, pp[0] ? pp : "//anon"))
				known = 1;
		if (known)
			continue;
		struct ptsim_map *nm = realloc(r->maps, (r->nmaps + 1) * sizeof(*nm));
		if (!nm)
			goto nomem;
		r->maps = nm;
		struct ptsim_map *m = &r->maps[r->nmaps];
		memset(m, 0, sizeof(*m));
		m->start = s;
		m->len = e - s;
		m->pgoff = off;
		m->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
			  PROT_EXEC;
		m->maj = maj;
		m->min = min;
		m->ino = ino;
		m->path = strdup(pp[0] ? pp : "//anon");
		m->bytes = malloc(m->len);
		if (!m->path || !m->bytes) {
			free(m->path);
			free(m->bytes);
			goto nomem;
		}
		ssize_t got = pread(t->memfd, m->bytes, m->len, (off_t)m->start);
		if (got < 0)
			got = 0;
		if ((uint64_t)got < m->len)
			memset(m->bytes + got, 0, m->len - (uint64_t)got);
		if (pp[0] == '/') {
			r->unprobed += unprobe(m);
			int bl = elf_read_build_id(pp, m->build_id);
			m->build_id_len = bl > 0 ? (uint8_t)bl : 0;
		} else if (!strcmp(pp, "[vdso]")) {
			char tmp[] = "/tmp/mt-ptsim-vdso.XXXXXX";
			int fd = mkstemp(tmp);
			if (fd >= 0) {
				if (io_write_all(fd, m->bytes, m->len) == 0) {
					int bl = elf_read_build_id(tmp, m->build_id);
					m->build_id_len = bl > 0 ? (uint8_t)bl : 0;
				}
				close(fd);
				unlink(tmp);
			}
		}
		r->nmaps++;
		struct ptsim_ev ev = {.kind = PTSIM_EV_MAP, .arg = r->nmaps - 1};
		if (log_ev(r, &ev) < 0)
			goto nomem;
	}
	fclose(f);
	return 0;
nomem:
	fclose(f);
	return fail(t, PTSIM_E_SYS, "out of memory");
}

static const struct ptsim_map *map_of(struct tracer *t, uint64_t ip)
{
	const struct ptsim_map *m = ptsim_find_map(t->run, ip);
	if (!m && scan_maps(t) == 0)
		m = ptsim_find_map(t->run, ip);
	return m;
}

/* Is the instruction at @ip a system call (syscall, sysenter, int 0x80)? */
static int is_syscall_at(struct tracer *t, uint64_t ip)
{
	const struct ptsim_map *m = map_of(t, ip);
	if (!m || ip + 1 - m->start >= m->len)
		return 0;
	const uint8_t *b = m->bytes + (ip - m->start);
	return (b[0] == 0x0f && (b[1] == 0x05 || b[1] == 0x34)) || (b[0] == 0xcd && b[1] == 0x80);
}

/* Is the instruction at @ip rep-prefixed (a string instruction iterates)? */
static int is_rep_at(struct tracer *t, uint64_t ip)
{
	const struct ptsim_map *m = map_of(t, ip);
	if (!m)
		return 0;
	for (uint64_t i = 0; i < 15 && ip + i - m->start < m->len; i++) {
		uint8_t b = m->bytes[ip + i - m->start];
		if (b == 0xf2 || b == 0xf3)
			return 1;
		if (b == 0x66 || b == 0x67 || b == 0x2e || b == 0x3e || b == 0x26 || b == 0x36 ||
		    b == 0x64 || b == 0x65 || (b >= 0x40 && b <= 0x4f))
			continue;
		return 0;
	}
	return 0;
}

static int sig_caught(pid_t pid, int sig)
{
	char p[64], line[256];
	snprintf(p, sizeof p, "/proc/%d/status", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return 0;
	unsigned long long mask = 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "SigCgt:", 7)) {
			mask = strtoull(line + 7, NULL, 16);
			break;
		}
	fclose(f);
	return sig >= 1 && sig <= 64 && (mask >> (sig - 1)) & 1;
}

/* Resolves @sym in the main executable to a runtime address (0: absent). */
static uint64_t resolve_sym(struct tracer *t, const char *sym)
{
	char exe[64], path[4096];
	snprintf(exe, sizeof exe, "/proc/%d/exe", t->pid);
	ssize_t n = readlink(exe, path, sizeof path - 1);
	if (n <= 0)
		return 0;
	path[n] = 0;
	struct elfinfo ei;
	if (elfinfo_load(&ei, exe) < 0)
		return 0;
	const struct elf_sym *s = elfinfo_find(&ei, sym);
	uint64_t addr = 0;
	if (s) {
		uint64_t bias = 0;
		if (ei.is_pie) {
			/* Base: the lowest mapping of the executable. */
			for (size_t i = 0; i < t->run->nmaps; i++)
				(void)i;
			char mp[64], line[4096];
			snprintf(mp, sizeof mp, "/proc/%d/maps", t->pid);
			FILE *f = fopen(mp, "re");
			uint64_t base = 0;
			if (f) {
				while (fgets(line, sizeof line, f)) {
					unsigned long long s0, e0, off;
					char perms[8], pth[4096];
					unsigned maj, min;
					unsigned long long ino;
					pth[0] = 0;
					if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %4095s", &s0,
						   &e0, perms, &off, &maj, &min, &ino, pth) == 8 &&
					    !strcmp(pth, path) && off == 0) {
						base = s0;
						break;
					}
				}
				fclose(f);
			}
			uint64_t minv = UINT64_MAX;
			for (size_t i = 0; i < ei.nsegs; i++)
				if (ei.segs[i].vaddr < minv)
					minv = ei.segs[i].vaddr;
			if (minv == UINT64_MAX)
				minv = 0;
			bias = base - (minv & ~0xfffull);
		}
		addr = s->addr + bias;
	}
	elfinfo_fini(&ei);
	return addr;
}

static void kill_all(struct tracer *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		int st;
		while (waitpid(-1, &st, __WALL) > 0 || errno == EINTR)
			;
	}
}

/* Runs the tracee freely to @addr (an int3 there), then stops every thread. */
static int run_to(struct tracer *t, uint64_t addr, const char *sym)
{
	errno = 0;
	long word = ptrace(PTRACE_PEEKTEXT, t->pid, (void *)addr, 0);
	if (errno)
		return fail(t, PTSIM_E_SYS, "cannot read %s at 0x%llx: %s", sym,
			    (unsigned long long)addr, strerror(errno));
	long patched = (word & ~0xffL) | 0xcc;
	if (ptrace(PTRACE_POKETEXT, t->pid, (void *)addr, (void *)patched) < 0)
		return fail(t, PTSIM_E_SYS, "cannot set a breakpoint on %s: %s", sym, strerror(errno));
	if (ptrace(PTRACE_CONT, t->pid, 0, 0) < 0)
		return fail(t, PTSIM_E_SYS, "ptrace: %s", strerror(errno));
	uint32_t hit = 0;
	while (!hit) {
		int st;
		pid_t w = waitpid(-1, &st, __WALL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return fail(t, PTSIM_E_SYS, "waitpid: %s", strerror(errno));
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			struct tth *h = find_th(t, (uint32_t)w);
			if (h)
				h->state = T_DEAD;
			if (w == t->pid)
				return fail(t, PTSIM_E_USAGE, "the program ended before reaching %s", sym);
			continue;
		}
		if (!WIFSTOPPED(st))
			continue;
		int sig = WSTOPSIG(st);
		struct tth *h = find_th(t, (uint32_t)w);
		if (!h)
			h = add_th(t, (uint32_t)w, T_STOPPED);
		if (!h)
			return fail(t, PTSIM_E_SYS, "out of memory");
		if ((st >> 16) == PTRACE_EVENT_CLONE) {
			ptrace(PTRACE_CONT, w, 0, 0);
			continue;
		}
		if (sig == SIGTRAP && getregs(h) == 0 && h->rip == addr + 1) {
			hit = (uint32_t)w;
			break;
		}
		if (sig == SIGSTOP || sig == SIGTRAP)
			sig = 0;
		ptrace(PTRACE_CONT, w, 0, (void *)(long)sig);
	}
	if (ptrace(PTRACE_POKETEXT, t->pid, (void *)addr, (void *)word) < 0)
		return fail(t, PTSIM_E_SYS, "cannot remove the breakpoint: %s", strerror(errno));
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, hit, 0, &regs) < 0)
		return fail(t, PTSIM_E_SYS, "ptrace: %s", strerror(errno));
	regs.rip = addr;
	if (ptrace(PTRACE_SETREGS, hit, 0, &regs) < 0)
		return fail(t, PTSIM_E_SYS, "ptrace: %s", strerror(errno));
	/* Stop the other threads where they are. */
	for (size_t i = 0; i < t->nth; i++) {
		struct tth *h = &t->th[i];
		if (h->state == T_DEAD || h->tid == hit)
			continue;
		syscall(SYS_tgkill, t->pid, h->tid, SIGSTOP);
		for (;;) {
			int st;
			pid_t w = waitpid((pid_t)h->tid, &st, __WALL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 || !WIFSTOPPED(st)) {
				h->state = T_DEAD;
				break;
			}
			if (WSTOPSIG(st) == SIGSTOP)
				break;
			h->pending_sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
		}
	}
	return 0;
}

static int start_thread(struct tracer *t, struct tth *h, uint32_t parent)
{
	if (getregs(h) < 0)
		return fail(t, PTSIM_E_SYS, "ptrace(GETREGS, %u): %s", h->tid, strerror(errno));
	h->state = T_STOPPED;
	struct ptsim_run *r = t->run;
	struct ptsim_thread *nt = realloc(r->threads, (r->nthreads + 1) * sizeof(*nt));
	if (!nt)
		return fail(t, PTSIM_E_SYS, "out of memory");
	r->threads = nt;
	nt[r->nthreads].tid = h->tid;
	read_comm((uint32_t)t->pid, h->tid, nt[r->nthreads].comm);
	r->nthreads++;
	map_of(t, h->rip);
	struct ptsim_ev ev = {.kind = PTSIM_EV_THREAD, .tid = h->tid, .ip = h->rip, .sp = h->rsp, .arg = parent};
	return log_ev(r, &ev) < 0 ? fail(t, PTSIM_E_SYS, "out of memory") : 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int end_thread(struct tracer *t, struct tth *h)
{
	struct ptsim_ev ev = {.kind = PTSIM_EV_END, .tid = h->tid};
	if (h->state == T_STOPPED || h->state == T_INFLIGHT || h->state == T_NEW)
		ev.ip = h->rip;
	if (h->state == T_SIGDELIVER)
		ev.ip = h->sig_insyscall ? 0 : h->sig_at;
	h->state = T_DEAD;
	return log_ev(t->run, &ev) < 0 ? fail(t, PTSIM_E_SYS, "out of memory") : 0;
}

static int step(struct tracer *t, struct tth *h, int sig)
{
	if (ptrace(PTRACE_SINGLESTEP, h->tid, 0, (void *)(long)sig) < 0)
		return fail(t, PTSIM_E_SYS, "ptrace(SINGLESTEP, %u): %s", h->tid, strerror(errno));
	return 0;
}

/* Issues steps until an ordinary one is in flight (a system call may block,
 * so the others go on meanwhile).  1: the run stops here (the stop symbol,
 * --max-insns), 0: go on, < 0: error. */
static int issue_steps(struct tracer *t)
{
	struct ptsim_run *r = t->run;
	int rc;
	if (t->execd)
		return 1;
	while (!t->inflight && !t->exclusive) {
		struct tth *pick = NULL;
		for (size_t k = 0; k < t->nth; k++) {
			size_t i = (t->rr + 1 + k) % t->nth;
			if (t->th[i].state == T_STOPPED) {
				pick = &t->th[i];
				t->rr = i;
				break;
			}
		}
		if (!pick)
			return 0;
		if (t->stop_addr && pick->rip == t->stop_addr) {
			struct ptsim_ev ev = {.kind = PTSIM_EV_STOP, .tid = pick->tid, .ip = pick->rip,
					      .next = pick->rdi, .sp = pick->rsi};
			if (log_ev(r, &ev) < 0)
				return fail(t, PTSIM_E_SYS, "out of memory");
			r->end = PTSIM_END_STOPPED;
			return 1;
		}
		if (t->o->max_insns && r->insns >= t->o->max_insns) {
			r->end = PTSIM_END_RUNAWAY;
			return 1;
		}
		int sig = pick->pending_sig;
		pick->pending_sig = 0;
		if (is_syscall_at(t, pick->rip)) {
			struct ptsim_ev ev = {.kind = PTSIM_EV_INSN, .flags = PTSIM_F_SYSCALL,
					      .tid = pick->tid, .ip = pick->rip, .sp = pick->rsp,
					      .arg = pick->rax};
			if (log_ev(r, &ev) < 0)
				return fail(t, PTSIM_E_SYS, "out of memory");
			r->insns++;
			pick->state = T_INSYSCALL;
			if (pick->rax == SYS_exit_group)
				t->exclusive = 1;
		} else {
			pick->state = T_INFLIGHT;
			t->inflight = pick;
		}
		if ((rc = step(t, pick, sig)) < 0)
			return rc;
		r->steps++;
	}
	return 0;
}

/* About twice a second: instructions, their rate, and how long --max-insns
 * would still take at that rate (the run may end before). */
static void report_progress(struct tracer *t)
{
	const struct ptsim_run *r = t->run;
	if (!t->o->progress || (r->steps & 0x3fff) != 0)
		return;
	double n = now_s();
	if (n - t->last_progress <= 0.5)
		return;
	t->last_progress = n;
	struct ptsim_progress p = {.insns = r->insns, .max_insns = t->o->max_insns};
	p.rate = (double)r->insns / (n - t->t0);
	p.left = t->o->max_insns > r->insns && p.rate > 0
			 ? (double)(t->o->max_insns - r->insns) / p.rate
			 : 0;
	t->o->progress(t->o->progress_ctx, &p);
}

/* Thread @h (NULL: one not traced) exited or was killed (status @st). */
static int on_exit_status(struct tracer *t, struct tth *h, int st)
{
	struct ptsim_run *r = t->run;
	int rc;
	if (!h)
		return 0;
	if (h == t->inflight)
		t->inflight = NULL;
	if (h->state == T_INSYSCALL && t->exclusive)
		t->exclusive = 0;
	if ((rc = end_thread(t, h)) < 0)
		return rc;
	if ((pid_t)h->tid == t->pid) {
		if (WIFEXITED(st)) {
			r->end = PTSIM_END_EXITED;
			r->status = WEXITSTATUS(st);
		} else if (r->end != PTSIM_END_SIGNALED) {
			r->end = PTSIM_END_SIGNALED;
			r->status = WTERMSIG(st);
		}
	}
	return 0;
}

/* A SIGTRAP stop of @h, which was at @old_rip: the step asked for ended. */
static int on_trap(struct tracer *t, struct tth *h, uint64_t old_rip)
{
	struct ptsim_run *r = t->run;
	struct ptsim_ev ev = {.tid = h->tid};
	switch (h->state) {
	case T_INFLIGHT:
		t->inflight = NULL;
		h->state = T_STOPPED;
		if (h->rip == old_rip && is_rep_at(t, old_rip)) {
			r->steps++; /* a string instruction iterates */
			h->state = T_INFLIGHT;
			t->inflight = h;
			return step(t, h, 0);
		}
		ev.kind = PTSIM_EV_INSN;
		ev.ip = old_rip;
		ev.next = h->rip;
		ev.sp = h->rsp;
		r->insns++;
		break;
	case T_INSYSCALL:
		h->state = T_STOPPED;
		ev.kind = PTSIM_EV_SYSRET;
		ev.ip = h->rip;
		ev.sp = h->rsp;
		break;
	case T_SIGDELIVER:
		h->state = T_STOPPED;
		ev.kind = PTSIM_EV_SIGNAL;
		ev.flags = h->sig_insyscall ? PTSIM_F_INSYSCALL : 0;
		ev.sig = (uint16_t)h->sig_no;
		ev.ip = h->sig_at;
		ev.next = h->rip;
		ev.sp = h->rsp;
		if (t->inflight == h)
			t->inflight = NULL;
		break;
	default:
		/* A trap we did not ask for (int3 in the program). */
		h->pending_sig = SIGTRAP;
		return 0;
	}
	if (log_ev(r, &ev) < 0)
		return fail(t, PTSIM_E_SYS, "out of memory");
	map_of(t, h->rip);
	return 0;
}

/* Signal @sig is about to be delivered to @h, which was at @old_rip. */
static int on_signal(struct tracer *t, struct tth *h, int sig, uint64_t old_rip)
{
	struct ptsim_run *r = t->run;
	int insys = h->state == T_INSYSCALL, rc;
	if (h == t->inflight)
		t->inflight = NULL;
	if (sig == SIGSTOP) {
		h->state = insys ? T_INSYSCALL : T_STOPPED;
		if (insys && (rc = step(t, h, 0)) < 0)
			return rc;
		if (!insys)
			h->rip = old_rip;
		return 0;
	}
	if (!insys)
		h->rip = old_rip; /* not executed */
	if (sig_caught(t->pid, sig)) {
		h->state = T_SIGDELIVER;
		h->sig_at = insys ? h->rip : old_rip;
		if (insys) {
			struct user_regs_struct regs;
			ptrace(PTRACE_GETREGS, h->tid, 0, &regs);
			h->sig_at = regs.rip;
		}
		h->sig_insyscall = insys;
		h->sig_no = sig;
		return step(t, h, sig);
	}
	/* Not caught: ignored (the step goes on) or fatal. */
	if (insys) {
		struct ptsim_ev ev = {.kind = PTSIM_EV_SYSRET, .tid = h->tid, .ip = h->rip, .sp = h->rsp};
		if (log_ev(r, &ev) < 0)
			return fail(t, PTSIM_E_SYS, "out of memory");
	}
	h->state = T_STOPPED;
	h->pending_sig = sig;
	if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT ||
	    sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGQUIT || sig == SIGTRAP ||
	    sig == SIGSYS) {
		r->end = PTSIM_END_SIGNALED;
		r->status = sig;
		r->end_ip = h->rip;
	}
	return 0;
}

/* Thread @w (@h: its entry, NULL if not known yet) stopped (status @st). */
static int on_stop(struct tracer *t, pid_t w, struct tth *h, int st)
{
	int sig = WSTOPSIG(st), rc;
	if (!h) {
		/* A new thread's first stop (may come before the clone event). */
		h = add_th(t, (uint32_t)w, T_NEW);
		if (!h)
			return fail(t, PTSIM_E_SYS, "out of memory");
	}
	if (h->state == T_NEW) {
		if ((rc = start_thread(t, h, (uint32_t)t->pid)) < 0)
			return rc;
		if (sig != SIGSTOP && sig != SIGTRAP)
			h->pending_sig = sig;
		return 0;
	}
	if ((st >> 16) == PTRACE_EVENT_CLONE) {
		unsigned long ntid = 0;
		ptrace(PTRACE_GETEVENTMSG, w, 0, &ntid);
		if (!find_th(t, (uint32_t)ntid) && !add_th(t, (uint32_t)ntid, T_NEW))
			return fail(t, PTSIM_E_SYS, "out of memory");
		return step(t, h, 0);
	}
	if ((st >> 16) == PTRACE_EVENT_EXEC) {
		/* execve succeeded: another program replaces this one; its
		 * code, maps and frames are not followed (docs/ptsim.md) */
		t->run->end = PTSIM_END_EXEC;
		t->execd = 1;
		return 0;
	}
	if ((st >> 16) != 0)
		return step(t, h, 0);
	uint64_t old_rip = h->rip;
	if (getregs(h) < 0) {
		if (errno == ESRCH)
			return 0;
		return fail(t, PTSIM_E_SYS, "ptrace(GETREGS): %s", strerror(errno));
	}
	if (sig == SIGTRAP)
		return on_trap(t, h, old_rip);
	return on_signal(t, h, sig, old_rip);
}

static int trace_loop(struct tracer *t)
{
	struct ptsim_run *r = t->run;
	int rc;
	t->t0 = t->last_progress = now_s();
	for (;;) {
		size_t live = 0;
		for (size_t i = 0; i < t->nth; i++)
			if (t->th[i].state != T_DEAD)
				live++;
		if (!live)
			break;
		if ((rc = issue_steps(t)) < 0)
			return rc;
		if (rc == 1)
			break;
		report_progress(t);
		int st;
		pid_t w = waitpid(-1, &st, __WALL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECHILD)
				break;
			return fail(t, PTSIM_E_SYS, "waitpid: %s", strerror(errno));
		}
		struct tth *h = find_th(t, (uint32_t)w);
		if (WIFEXITED(st) || WIFSIGNALED(st))
			rc = on_exit_status(t, h, st);
		else if (WIFSTOPPED(st))
			rc = on_stop(t, w, h, st);
		if (rc < 0)
			return rc;
	}
	r->seconds = now_s() - t->t0;
	if (t->o->progress)
		t->o->progress(t->o->progress_ctx, NULL);
	return 0;
}

int ptsim_trace(struct ptsim_run *run, const struct ptsim_trace_opts *o, char *err, size_t errlen)
{
	struct tracer t = {.run = run, .o = o, .err = err, .errlen = errlen, .memfd = -1};
	memset(run, 0, sizeof(*run));
	int rc = 0;
	const char *prog = o->argv[0];

	/* The command line for COMM/CMDLINE. */
	size_t cl = 1;
	for (char *const *a = o->argv; *a; a++)
		cl += strlen(*a) + 1;
	run->cmdline = calloc(1, cl);
	if (!run->cmdline)
		return fail(&t, PTSIM_E_SYS, "out of memory");
	for (char *const *a = o->argv; *a; a++) {
		if (a != o->argv)
			strcat(run->cmdline, " ");
		strcat(run->cmdline, *a);
	}

	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return fail(&t, PTSIM_E_SYS, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		return fail(&t, PTSIM_E_SYS, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(pfd[0]);
		personality(ADDR_NO_RANDOMIZE);
		if (ptrace(PTRACE_TRACEME, 0, 0, 0) < 0) {
			int e = errno;
			(void)!write(pfd[1], &e, sizeof e);
			_exit(127);
		}
		execv(o->path ? o->path : prog, o->argv);
		int e = errno;
		(void)!write(pfd[1], &e, sizeof e);
		_exit(127);
	}
	close(pfd[1]);
	t.pid = pid;
	run->pid = (uint32_t)pid;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			close(pfd[0]);
			return fail(&t, PTSIM_E_SYS, "waitpid: %s", strerror(errno));
		}
	int cerr = 0;
	ssize_t n = read(pfd[0], &cerr, sizeof cerr);
	close(pfd[0]);
	if (n == (ssize_t)sizeof cerr || !WIFSTOPPED(st)) {
		if (WIFSTOPPED(st))
			kill_all(&t);
		else
			waitpid(pid, &st, 0);
		return fail(&t, PTSIM_E_USAGE, "cannot execute %s: %s", prog,
			    n == (ssize_t)sizeof cerr ? strerror(cerr) : "it did not start");
	}
	if (ptrace(PTRACE_SETOPTIONS, pid, 0,
		   PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL) < 0) {
		rc = fail(&t, PTSIM_E_SYS, "ptrace(SETOPTIONS): %s", strerror(errno));
		goto out;
	}
	char mp[64];
	snprintf(mp, sizeof mp, "/proc/%d/mem", pid);
	t.memfd = open(mp, O_RDONLY | O_CLOEXEC);
	if (t.memfd < 0) {
		rc = fail(&t, PTSIM_E_SYS, "cannot open %s: %s", mp, strerror(errno));
		goto out;
	}
	read_comm((uint32_t)pid, (uint32_t)pid, run->comm);
	if (!add_th(&t, (uint32_t)pid, T_STOPPED)) {
		rc = fail(&t, PTSIM_E_SYS, "out of memory");
		goto out;
	}
	if ((rc = scan_maps(&t)) < 0)
		goto out;
	if (o->start_at) {
		uint64_t a = resolve_sym(&t, o->start_at);
		if (!a) {
			rc = fail(&t, PTSIM_E_USAGE, "--start-at: no symbol %s in %s", o->start_at, prog);
			goto out;
		}
		if ((rc = run_to(&t, a, o->start_at)) < 0)
			goto out;
		snprintf(run->start_symbol, sizeof run->start_symbol, "%s", o->start_at);
	}
	{
		const char *stop = o->stop_at ? o->stop_at : "magic_trace_stop_indicator";
		t.stop_addr = resolve_sym(&t, stop);
		if (!t.stop_addr && o->stop_at) {
			rc = fail(&t, PTSIM_E_USAGE, "--stop-at: no symbol %s in %s", o->stop_at, prog);
			goto out;
		}
		if (t.stop_addr)
			snprintf(run->stop_symbol, sizeof run->stop_symbol, "%s", stop);
	}
	for (size_t i = 0; i < t.nth; i++) {
		if (t.th[i].state == T_DEAD)
			continue;
		t.th[i].state = T_NEW;
		if ((rc = start_thread(&t, &t.th[i], 0)) < 0)
			goto out;
	}
	rc = trace_loop(&t);
	if (rc < 0)
		goto out;
	/* Stop: whatever still lives ends here. */
	for (size_t i = 0; i < t.nth; i++)
		if (t.th[i].state != T_DEAD && (rc = end_thread(&t, &t.th[i])) < 0)
			goto out;
out:
	kill_all(&t);
	if (t.memfd >= 0)
		close(t.memfd);
	free(t.th);
	return rc;
}

void ptsim_run_fini(struct ptsim_run *run)
{
	if (!run)
		return;
	for (size_t i = 0; i < run->nmaps; i++) {
		free(run->maps[i].path);
		free(run->maps[i].bytes);
	}
	free(run->maps);
	free(run->ev);
	free(run->threads);
	free(run->cmdline);
	memset(run, 0, sizeof(*run));
}

/* ---- the run file: "MTPTSIM1", then little-endian fields ---- */
struct wbuf {
	FILE *f;
	int bad;
};
static void w64(struct wbuf *w, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	if (fwrite(b, 1, 8, w->f) != 8)
		w->bad = 1;
}
static void wbytes(struct wbuf *w, const void *p, size_t n)
{
	w64(w, n);
	if (n && fwrite(p, 1, n, w->f) != n)
		w->bad = 1;
}

int ptsim_run_save(const struct ptsim_run *r, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "we");
	if (!f) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	struct wbuf w = {f, 0};
	fwrite("MTPTSIM1", 1, 8, f);
	w64(&w, r->pid);
	wbytes(&w, r->comm, 16);
	wbytes(&w, r->cmdline, strlen(r->cmdline));
	w64(&w, r->steps);
	w64(&w, r->insns);
	uint64_t secs;
	memcpy(&secs, &r->seconds, 8);
	w64(&w, secs);
	w64(&w, (uint64_t)r->end);
	w64(&w, (uint64_t)r->status);
	w64(&w, r->end_ip);
	wbytes(&w, r->stop_symbol, strlen(r->stop_symbol));
	wbytes(&w, r->start_symbol, strlen(r->start_symbol));
	w64(&w, r->nthreads);
	for (size_t i = 0; i < r->nthreads; i++) {
		w64(&w, r->threads[i].tid);
		wbytes(&w, r->threads[i].comm, 16);
	}
	w64(&w, r->nmaps);
	for (size_t i = 0; i < r->nmaps; i++) {
		const struct ptsim_map *m = &r->maps[i];
		w64(&w, m->start);
		w64(&w, m->len);
		w64(&w, m->pgoff);
		w64(&w, m->prot);
		w64(&w, m->maj);
		w64(&w, m->min);
		w64(&w, m->ino);
		wbytes(&w, m->path, strlen(m->path));
		wbytes(&w, m->build_id, m->build_id_len);
		wbytes(&w, m->bytes, m->len);
	}
	w64(&w, r->nev);
	for (size_t i = 0; i < r->nev; i++) {
		const struct ptsim_ev *e = &r->ev[i];
		w64(&w, (uint64_t)e->kind | (uint64_t)e->flags << 8 | (uint64_t)e->sig << 16 |
				(uint64_t)e->tid << 32);
		w64(&w, e->ip);
		w64(&w, e->next);
		w64(&w, e->sp);
		w64(&w, e->arg);
	}
	if (fclose(f) != 0 || w.bad) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

struct rbuf {
	const uint8_t *p, *end;
	int bad;
};
static uint64_t r64(struct rbuf *b)
{
	if (b->end - b->p < 8) {
		b->bad = 1;
		b->p = b->end;
		return 0;
	}
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)b->p[i] << (8 * i);
	b->p += 8;
	return v;
}
/* Returns a malloc'd copy (NUL-terminated) of a length-prefixed field. */
static void *rbytes(struct rbuf *b, size_t *len)
{
	uint64_t n = r64(b);
	if (b->bad || n > (uint64_t)(b->end - b->p)) {
		b->bad = 1;
		return NULL;
	}
	uint8_t *m = malloc(n + 1);
	if (!m) {
		b->bad = 1;
		return NULL;
	}
	memcpy(m, b->p, n);
	m[n] = 0;
	b->p += n;
	if (len)
		*len = n;
	return m;
}

int ptsim_run_load(struct ptsim_run *r, const char *path, char *err, size_t errlen)
{
	uint8_t *buf;
	size_t len;
	memset(r, 0, sizeof(*r));
	if (io_slurp(path, &buf, &len) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		return PTSIM_E_SYS;
	}
	struct rbuf b = {buf + 8, buf + len, 0};
	if (len < 8 || memcmp(buf, "MTPTSIM1", 8)) {
		snprintf(err, errlen, "not an mt-ptsim run file");
		free(buf);
		return PTSIM_E_USAGE;
	}
	size_t n;
	r->pid = (uint32_t)r64(&b);
	char *s = rbytes(&b, &n);
	if (s)
		memcpy(r->comm, s, n < 16 ? n : 16);
	free(s);
	r->cmdline = rbytes(&b, NULL);
	r->steps = r64(&b);
	r->insns = r64(&b);
	uint64_t secs = r64(&b);
	memcpy(&r->seconds, &secs, 8);
	r->end = (int)r64(&b);
	r->status = (int)r64(&b);
	r->end_ip = r64(&b);
	s = rbytes(&b, &n);
	if (s)
		snprintf(r->stop_symbol, sizeof r->stop_symbol, "%s", s);
	free(s);
	s = rbytes(&b, &n);
	if (s)
		snprintf(r->start_symbol, sizeof r->start_symbol, "%s", s);
	free(s);
	uint64_t nt = r64(&b);
	if (nt > 1u << 20)
		b.bad = 1;
	if (!b.bad) {
		r->threads = calloc(nt ? nt : 1, sizeof(*r->threads));
		if (!r->threads)
			b.bad = 1;
	}
	for (uint64_t i = 0; !b.bad && i < nt; i++) {
		r->threads[i].tid = (uint32_t)r64(&b);
		s = rbytes(&b, &n);
		if (s)
			memcpy(r->threads[i].comm, s, n < 16 ? n : 16);
		free(s);
		r->nthreads++;
	}
	uint64_t nm = r64(&b);
	if (nm > 1u << 16)
		b.bad = 1;
	if (!b.bad) {
		r->maps = calloc(nm ? nm : 1, sizeof(*r->maps));
		if (!r->maps)
			b.bad = 1;
	}
	for (uint64_t i = 0; !b.bad && i < nm; i++) {
		struct ptsim_map *m = &r->maps[i];
		m->start = r64(&b);
		m->len = r64(&b);
		m->pgoff = r64(&b);
		m->prot = (uint32_t)r64(&b);
		m->maj = (uint32_t)r64(&b);
		m->min = (uint32_t)r64(&b);
		m->ino = r64(&b);
		m->path = rbytes(&b, NULL);
		uint8_t *bid = rbytes(&b, &n);
		if (bid && n <= 20) {
			memcpy(m->build_id, bid, n);
			m->build_id_len = (uint8_t)n;
		}
		free(bid);
		m->bytes = rbytes(&b, &n);
		if (!b.bad && n != m->len)
			b.bad = 1;
		r->nmaps++;
	}
	uint64_t ne = r64(&b);
	if (ne > (uint64_t)(b.end - b.p) / 40)
		b.bad = 1;
	if (!b.bad) {
		r->ev = malloc((ne ? ne : 1) * sizeof(*r->ev));
		if (!r->ev)
			b.bad = 1;
		r->cap = ne;
	}
	for (uint64_t i = 0; !b.bad && i < ne; i++) {
		struct ptsim_ev *e = &r->ev[i];
		uint64_t h = r64(&b);
		e->kind = (uint8_t)h;
		e->flags = (uint8_t)(h >> 8);
		e->sig = (uint16_t)(h >> 16);
		e->tid = (uint32_t)(h >> 32);
		e->ip = r64(&b);
		e->next = r64(&b);
		e->sp = r64(&b);
		e->arg = r64(&b);
		if (e->kind == PTSIM_EV_MAP && e->arg >= r->nmaps)
			b.bad = 1;
		r->nev++;
	}
	free(buf);
	if (b.bad || !r->cmdline) {
		snprintf(err, errlen, "corrupt or truncated run file");
		ptsim_run_fini(r);
		return PTSIM_E_USAGE;
	}
	return 0;
}
