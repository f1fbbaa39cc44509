#include "magic_trace.h"

#include <time.h>

/* Thread-local: the start mark of each thread.  We keep both the TSC (passed
 * to the stop indicator, as magic-trace does) and a monotonic time for the gate. */
static __thread uint64_t mark_tsc;
static __thread uint64_t mark_ns;

static uint64_t read_tsc(void)
{
#if defined(__x86_64__) || defined(__i386__)
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
#else
	return 0;
#endif
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* noinline + noipa: no inlining, cloning or interprocedural assumptions; the
 * asm with a memory clobber keeps a body the linker cannot fold (ICF) with
 * another empty function, and `used` keeps it from being dropped. */
__attribute__((noinline, noipa, used, visibility("default"))) void
magic_trace_stop_indicator(uint64_t start, uint64_t arg)
{
	__asm__ volatile("" : : "r"(start), "r"(arg) : "memory");
}

void magic_trace_mark_start(void)
{
	mark_tsc = read_tsc();
	mark_ns = now_ns();
}

void magic_trace_take_snapshot(void)
{
	magic_trace_stop_indicator(mark_tsc, 0);
}

void magic_trace_take_snapshot_with_arg(uint64_t arg)
{
	magic_trace_stop_indicator(mark_tsc, arg);
}

uint64_t magic_trace_ns_since_mark(void)
{
	return mark_ns ? now_ns() - mark_ns : 0;
}

int magic_trace_take_snapshot_if_slower_than(uint64_t min_ns, uint64_t arg)
{
	if (!mark_ns || now_ns() - mark_ns < min_ns)
		return 0;
	magic_trace_stop_indicator(mark_tsc, arg);
	return 1;
}
