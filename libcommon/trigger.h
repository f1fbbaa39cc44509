/* Trigger: an event that fires when any thread of the watched processes,
 * including threads they create later, executes one address.
 *
 * Two mechanisms, both perf_event_open sampling events:
 * - TRIGGER_HW: a hardware execute breakpoint (PERF_TYPE_BREAKPOINT,
 *   HW_BREAKPOINT_X).  No change to the traced program, any user allowed by
 *   perf_event_paranoid.  Some virtual machines accept the event but never
 *   deliver it (their guests get no debug-register exceptions):
 *   trigger_hw_works() checks.
 * - TRIGGER_UPROBE: a uprobe (the "uprobe" PMU: file + offset), which plants
 *   an int3 in the watched processes' copy of the page.  Works everywhere
 *   uprobes do, but needs CAP_PERFMON or root.
 *
 * Why this shape: a per-task event with inherit cannot be mmapped, and one
 * without inherit sees only its own thread.  So, for each watched thread,
 * one event per CPU with inherit = 1 (threads created later inherit it), and
 * all events of a CPU write into one ring (PERF_EVENT_IOC_SET_OUTPUT).  Each
 * sample carries time, pid/tid, ip, the user registers (rdi and rsi are the
 * two arguments of magic_trace_stop_indicator) and a copy of the top
 * TRIGGER_STACK bytes of the user stack: with the registers, what a DWARF
 * unwinder needs for the call chain at the hit (libcommon/unwind.h; the
 * frames older than a PT snapshot, docs/exactness.md).
 *
 * Functions return >= 0 or a negative errno; they never print. */
#ifndef MT_TRIGGER_H
#define MT_TRIGGER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct trigger_hit {
	uint32_t pid, tid;
	uint64_t time; /* perf clock, ns (the clock perf record uses by default) */
	uint64_t ip; /* the watched address */
	uint64_t arg0, arg1; /* rdi, rsi */
	/* the user registers, indexed by PERF_REG_X86_* (@have: which are
	 * set), and the stack copy from rsp up (@ustack_len bytes, 0 none);
	 * both point into the trigger's buffer, valid until the next
	 * trigger_read() */
	const uint64_t *uregs;
	uint64_t have;
	const uint8_t *ustack;
	uint64_t ustack_len;
};

enum { TRIGGER_NREGS = 24, TRIGGER_STACK = 16384 };

enum trigger_mech { TRIGGER_HW = 1, TRIGGER_UPROBE = 2 };

/* Where to stop: the runtime address in the process, and (for uprobes) the
 * file that holds the code and its file offset. */
struct trigger_point {
	uint64_t addr;
	const char *path;
	uint64_t offset;
};

struct trigger;

/* 0 and *out, or -errno (-ENODEV: uprobe asked for but no uprobe PMU). */
int trigger_alloc(struct trigger **out, enum trigger_mech mech);

/* Does a hardware execute breakpoint fire on this machine?  Checks on the
 * calling thread with a function of its own.  1 yes, 0 no (the event opens
 * but never counts), -errno if it cannot be opened (-EACCES, -ENOENT...). */
int trigger_hw_works(void);
void trigger_free(struct trigger *t); /* NULL is fine; closes every event */

/* Watches @pt in thread @tid (and every thread it creates afterwards).
 * -ESRCH: no such thread; -EACCES/-EPERM: not allowed (perf_event_paranoid,
 * ptrace permission, or CAP_PERFMON for uprobes); -ENOSPC: no free debug
 * register; other -errno from perf_event_open/mmap. */
int trigger_watch_thread(struct trigger *t, pid_t tid, const struct trigger_point *pt);

/* Watches every current thread of process @pid (/proc/PID/task, rescanned
 * until no new thread appears) and, by inheritance, every later one.
 * Returns the number of threads watched, or -errno. */
int trigger_watch_process(struct trigger *t, pid_t pid, const struct trigger_point *pt);

/* File descriptors to poll for POLLIN (one per CPU ring). */
size_t trigger_poll_fds(const struct trigger *t, int *fds, size_t max);

/* Moves up to @max pending hits, in ring order per CPU, into @hits; returns
 * how many, or -errno.  Their registers and stack copies stay valid until
 * the next call.  *lost (if not NULL) accumulates samples the kernel
 * dropped because a ring was full. */
int trigger_read(struct trigger *t, struct trigger_hit *hits, size_t max, uint64_t *lost);

#endif
