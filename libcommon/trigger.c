#include "trigger.h"

#include <asm/perf_regs.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RING_DATA_PAGES 32 /* per CPU; a sample is ~16.6 KB (the stack copy) */
/* the user registers recorded: every general one (perf refuses ds, es, fs
 * and gs on x86-64) */
#define TRIG_REGS 0xff0fffull

struct ring {
	int fd; /* the event the ring belongs to; -1: none yet */
	void *base;
	size_t size; /* data area bytes */
};

struct trigger {
	enum trigger_mech mech;
	uint32_t uprobe_type; /* PMU type of "uprobe" */
	int ncpu;
	uint8_t *online; /* per CPU */
	struct ring *rings; /* one per CPU */
	int *fds;	    /* every event */
	size_t nfds, capfds;
	pid_t *tids;	    /* HW: threads watched; UPROBE: processes watched */
	size_t ntids, captids;
	struct trigger_point *probes; /* UPROBE: probes opened (path owned) */
	uint8_t *hbuf; /* the registers and stack copies of the last read's hits */
	size_t hcap;
	size_t nprobes;
	long page;
};

/* /sys/devices/system/cpu/online is a list like "0-3,6"; if unreadable,
 * every CPU counts as online. */
static void read_online(uint8_t *online, int ncpu)
{
	char buf[4096];
	int fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		memset(online, 1, (size_t)ncpu);
		return;
	}
	buf[n] = 0;
	for (char *p = buf; *p && *p != '\n';) {
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long c = a; c <= b && c < ncpu; c++)
			if (c >= 0)
				online[c] = 1;
		p = *end == ',' ? end + 1 : end;
	}
}

static int read_pmu_type(const char *pmu, uint32_t *type)
{
	char path[128], buf[32];
	snprintf(path, sizeof path, "/sys/bus/event_source/devices/%s/type", pmu);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENODEV;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -ENODEV;
	buf[n] = 0;
	*type = (uint32_t)strtoul(buf, NULL, 10);
	return 0;
}

int trigger_alloc(struct trigger **out, enum trigger_mech mech)
{
	uint32_t uptype = 0;
	if (mech == TRIGGER_UPROBE && read_pmu_type("uprobe", &uptype) < 0)
		return -ENODEV;
	struct trigger *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->mech = mech;
	t->uprobe_type = uptype;
	t->ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	t->page = sysconf(_SC_PAGESIZE);
	if (t->ncpu < 1)
		t->ncpu = 1;
	t->rings = calloc((size_t)t->ncpu, sizeof *t->rings);
	if (!t->rings) {
		free(t);
		return -ENOMEM;
	}
	t->online = calloc((size_t)t->ncpu, 1);
	if (!t->online) {
		free(t->rings);
		free(t);
		return -ENOMEM;
	}
	for (int c = 0; c < t->ncpu; c++)
		t->rings[c].fd = -1;
	read_online(t->online, t->ncpu);
	*out = t;
	return 0;
}

void trigger_free(struct trigger *t)
{
	if (!t)
		return;
	for (int c = 0; c < t->ncpu; c++)
		if (t->rings[c].base)
			munmap(t->rings[c].base, t->rings[c].size + (size_t)t->page);
	for (size_t i = 0; i < t->nfds; i++)
		close(t->fds[i]);
	free(t->fds);
	free(t->tids);
	for (size_t i = 0; i < t->nprobes; i++)
		free((char *)t->probes[i].path);
	free(t->probes);
	free(t->hbuf);
	free(t->rings);
	free(t->online);
	free(t);
}

static int push_fd(struct trigger *t, int fd)
{
	if (t->nfds == t->capfds) {
		size_t n = t->capfds ? 2 * t->capfds : 16;
		int *v = realloc(t->fds, n * sizeof *v);
		if (!v)
			return -ENOMEM;
		t->fds = v;
		t->capfds = n;
	}
	t->fds[t->nfds++] = fd;
	return 0;
}

static int watching(const struct trigger *t, pid_t tid)
{
	for (size_t i = 0; i < t->ntids; i++)
		if (t->tids[i] == tid)
			return 1;
	return 0;
}

static void trig_attr(const struct trigger *t, struct perf_event_attr *a,
		      const struct trigger_point *pt)
{
	memset(a, 0, sizeof *a);
	a->size = sizeof *a;
	if (t->mech == TRIGGER_UPROBE) {
		a->type = t->uprobe_type;
		a->config1 = (uint64_t)(uintptr_t)pt->path; /* uprobe_path */
		a->config2 = pt->offset;		    /* probe_offset */
	} else {
		a->type = PERF_TYPE_BREAKPOINT;
		a->bp_type = HW_BREAKPOINT_X;
		a->bp_addr = pt->addr;
		a->bp_len = sizeof(long);
	}
	a->sample_period = 1;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
			 PERF_SAMPLE_STACK_USER;
	a->sample_regs_user = TRIG_REGS;
	a->sample_stack_user = TRIGGER_STACK;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->inherit = 1;
	a->wakeup_events = 1;
	a->remove_on_exec = 1; /* an exec'd child has other code at that address */
}

static int push_tid(struct trigger *t, pid_t tid)
{
	if (t->ntids == t->captids) {
		size_t n = t->captids ? 2 * t->captids : 16;
		pid_t *v = realloc(t->tids, n * sizeof *v);
		if (!v)
			return -ENOMEM;
		t->tids = v;
		t->captids = n;
	}
	t->tids[t->ntids++] = tid;
	return 0;
}

/* Opens one event per online CPU for task @tid (-1: every task), each
 * writing into that CPU's ring. */
static int open_on_cpus(struct trigger *t, pid_t tid, const struct perf_event_attr *a)
{
	int opened = 0, r;

	for (int c = 0; c < t->ncpu; c++) {
		if (!t->online[c])
			continue;
		int fd = (int)syscall(SYS_perf_event_open, a, tid, c, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			return -errno;
		struct ring *rg = &t->rings[c];
		if (rg->fd < 0) {
			size_t len = (size_t)t->page * (1 + RING_DATA_PAGES);
			void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (p == MAP_FAILED) {
				r = -errno;
				close(fd);
				return r;
			}
			rg->fd = fd;
			rg->base = p;
			rg->size = (size_t)t->page * RING_DATA_PAGES;
		} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, rg->fd) < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if ((r = push_fd(t, fd)) < 0) {
			close(fd);
			return r;
		}
		opened++;
	}
	return opened ? 0 : -ENODEV;
}

/* Uprobes: an inherited uprobe event re-reads its path through a user
 * pointer in the forking task's address space, so inheriting one opened by
 * another process fails (and makes the traced program's clone() fail with
 * EFAULT).  Instead, one system-wide event per CPU (root only, like every
 * uprobe event) and hits filtered by process. */
static int watch_uprobe(struct trigger *t, pid_t pid, const struct trigger_point *pt)
{
	struct perf_event_attr a;
	int r;

	if (!watching(t, pid) && (r = push_tid(t, pid)) < 0)
		return r;
	for (size_t i = 0; i < t->nprobes; i++)
		if (t->probes[i].offset == pt->offset && !strcmp(t->probes[i].path, pt->path))
			return 0;
	struct trigger_point *v = realloc(t->probes, (t->nprobes + 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	t->probes = v;
	v[t->nprobes] = *pt;
	if (!(v[t->nprobes].path = strdup(pt->path)))
		return -ENOMEM;
	t->nprobes++;
	trig_attr(t, &a, pt);
	a.inherit = 0;
	a.remove_on_exec = 0;
	return open_on_cpus(t, -1, &a);
}

static pid_t tgid_of(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	char *p = strstr(buf, "\nTgid:");
	return p ? (pid_t)strtol(p + 6, NULL, 10) : -EIO;
}

int trigger_watch_thread(struct trigger *t, pid_t tid, const struct trigger_point *pt)
{
	struct perf_event_attr a;
	int r;

	if (t->mech == TRIGGER_UPROBE) {
		pid_t pid = tgid_of(tid);
		return pid < 0 ? pid : watch_uprobe(t, pid, pt);
	}
	if (watching(t, tid))
		return 0;
	trig_attr(t, &a, pt);
	if ((r = open_on_cpus(t, tid, &a)) < 0)
		return r;
	return push_tid(t, tid);
}

int trigger_watch_process(struct trigger *t, pid_t pid, const struct trigger_point *pt)
{
	char path[64];
	int total = 0, added;

	if (t->mech == TRIGGER_UPROBE) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return -ESRCH;
		int r = watch_uprobe(t, pid, pt);
		return r < 0 ? r : 1;
	}
	/* A thread that appears while we scan was created either by a thread we
	 * already watch (it inherits the event) or by one we did not (we find
	 * it on the next pass).  Stop when a pass adds nothing. */
	do {
		DIR *d;
		struct dirent *e;

		added = 0;
		snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
		if (!(d = opendir(path)))
			return errno == ENOENT ? -ESRCH : -errno;
		while ((e = readdir(d))) {
			char *end;
			long tid = strtol(e->d_name, &end, 10);
			if (*end || tid <= 0 || watching(t, (pid_t)tid))
				continue;
			int r = trigger_watch_thread(t, (pid_t)tid, pt);
			if (r == -ESRCH) /* it exited meanwhile */
				continue;
			if (r < 0) {
				closedir(d);
				return r;
			}
			added++;
		}
		closedir(d);
		total += added;
	} while (added);
	return total ? total : -ESRCH;
}

size_t trigger_poll_fds(const struct trigger *t, int *fds, size_t max)
{
	size_t n = 0;
	for (int c = 0; c < t->ncpu && n < max; c++)
		if (t->rings[c].fd >= 0)
			fds[n++] = t->rings[c].fd;
	return n;
}

static void ring_copy(const struct ring *rg, const uint8_t *data, uint64_t pos, void *dst, size_t len)
{
	size_t off = (size_t)(pos % rg->size);
	size_t first = len < rg->size - off ? len : rg->size - off;
	memcpy(dst, data + off, first);
	memcpy((uint8_t *)dst + first, data, len - first);
}

/* One hit's registers and stack copy, kept in t->hbuf at offset @off:
 * TRIGGER_NREGS registers, then the stack. */
static int keep_hit(struct trigger *t, size_t off, size_t len)
{
	if (off + len <= t->hcap)
		return 0;
	size_t n = t->hcap ? t->hcap : 65536;
	while (n < off + len)
		n *= 2;
	uint8_t *v = realloc(t->hbuf, n);
	if (!v)
		return -ENOMEM;
	t->hbuf = v;
	t->hcap = n;
	return 0;
}

int trigger_read(struct trigger *t, struct trigger_hit *hits, size_t max, uint64_t *lost)
{
	size_t n = 0, used = 0;
	size_t *where = max ? calloc(max, sizeof *where) : NULL;
	if (max && !where)
		return -ENOMEM;

	for (int c = 0; c < t->ncpu && n < max; c++) {
		struct ring *rg = &t->rings[c];
		if (!rg->base)
			continue;
		struct perf_event_mmap_page *mp = rg->base;
		const uint8_t *data = (const uint8_t *)rg->base + t->page;
		uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = mp->data_tail;

		while (tail < head && n < max) {
			struct perf_event_header h;
			uint64_t rec[4];
			enum { NR = __builtin_popcountll(TRIG_REGS) };

			ring_copy(rg, data, tail, &h, sizeof h);
			if (h.size < sizeof h || h.size > head - tail) {
				free(where);
				return -EPROTO;
			}
			/* ip; pid,tid; time; abi; the registers (when abi is
			 * not NONE), in bit order; the stack's size, its bytes
			 * and their dynamic size (when the size is not 0) */
			if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof h + 5 * 8) {
				uint64_t p = tail + sizeof h, end = tail + h.size;
				uint64_t regs[TRIGGER_NREGS] = {0}, have = 0, size = 0, dyn = 0;
				ring_copy(rg, data, p, rec, 4 * 8);
				p += 4 * 8;
				if (rec[3] != PERF_SAMPLE_REGS_ABI_NONE) {
					uint64_t v[NR];
					if (p + sizeof v > end)
						goto skip;
					ring_copy(rg, data, p, v, sizeof v);
					p += sizeof v;
					for (unsigned b = 0, k = 0; b < TRIGGER_NREGS; b++)
						if (TRIG_REGS >> b & 1) {
							regs[b] = v[k++];
							have |= 1ull << b;
						}
				}
				if (p + 8 > end)
					goto skip;
				ring_copy(rg, data, p, &size, 8);
				p += 8;
				if (size) {
					if (p + size + 8 > end)
						goto skip;
					ring_copy(rg, data, p + size, &dyn, 8);
					if (dyn < size)
						size = dyn;
				}
				if (t->mech == TRIGGER_UPROBE && !watching(t, (pid_t)(uint32_t)rec[1]))
					goto skip;
				size_t need = sizeof regs + size;
				if (keep_hit(t, used, need) < 0) {
					free(where);
					return -ENOMEM;
				}
				memcpy(t->hbuf + used, regs, sizeof regs);
				if (size)
					ring_copy(rg, data, p, t->hbuf + used + sizeof regs, size);
				struct trigger_hit *x = &hits[n];
				where[n++] = used;
				used += (need + 7) & ~(size_t)7;
				x->ip = rec[0];
				x->pid = (uint32_t)rec[1];
				x->tid = (uint32_t)(rec[1] >> 32);
				x->time = rec[2];
				x->arg1 = regs[PERF_REG_X86_SI];
				x->arg0 = regs[PERF_REG_X86_DI];
				x->have = have;
				x->ustack_len = size;
			} else if (h.type == PERF_RECORD_LOST && h.size >= sizeof h + 16) {
				ring_copy(rg, data, tail + sizeof h, rec, 16);
				if (lost)
					*lost += rec[1];
			}
		skip:
			tail += h.size;
		}
		__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
	}
	/* the buffer may have moved while it grew */
	for (size_t i = 0; i < n; i++) {
		hits[i].uregs = (const uint64_t *)(const void *)(t->hbuf + where[i]);
		hits[i].ustack = hits[i].ustack_len ? t->hbuf + where[i] + TRIGGER_NREGS * 8 : NULL;
	}
	free(where);
	return (int)n;
}

/* The self-test's target: a real function whose address is taken. */
__attribute__((noinline, noipa)) static void hw_probe_target(void)
{
	__asm__ volatile("" ::: "memory");
}

int trigger_hw_works(void)
{
	struct perf_event_attr a;
	void (*volatile fn)(void) = hw_probe_target;
	uint64_t count = 0;
	int fd, r;

	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_BREAKPOINT;
	a.bp_type = HW_BREAKPOINT_X;
	a.bp_addr = (uint64_t)(uintptr_t)hw_probe_target;
	a.bp_len = sizeof(long);
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	fn();
	fn();
	r = read(fd, &count, sizeof count) == (ssize_t)sizeof count ? (count == 2) : -EIO;
	close(fd);
	return r;
}
