/* Unwinding sampled user stacks (perf record --call-graph dwarf): the user
 * registers and a copy of the top of the user stack, taken at each sample,
 * unwound with the call frame information (.eh_frame, .debug_frame) of the
 * mapped files by elfutils' libdwfl, as perf does.
 *
 * The caller tells it what each process maps (the files already looked up,
 * by build-id, where the other stages find them) and asks for a sample's
 * frames: the sampled ip, then the return addresses, innermost first (the
 * order of a perf callchain).  The unwinder stops where the stack copy ends
 * or a frame has no CFI (JIT code, hand-written assembly without it). */
#ifndef MT_UNWIND_H
#define MT_UNWIND_H

#include <stddef.h>
#include <stdint.h>

typedef struct unw unw;

/* NULL: out of memory. */
unw *unw_new(void);
void unw_free(unw *u);

/* Process @pid maps file @file (the one to read: NULL when it was not
 * found) at [start, start+len) from file offset @pgoff. */
void unw_map(unw *u, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
	     const char *file);
/* @pid exec'ed: its maps are gone. */
void unw_exec(unw *u, uint32_t pid);
/* @pid was forked from @ppid: it has its parent's maps. */
void unw_fork(unw *u, uint32_t pid, uint32_t ppid);

/* perf's x86-64 user register numbers (PERF_REG_X86_*) that matter here. */
enum { UNW_NREGS = 24 };

/* Unwinds one sample of thread @tid of @pid: @regs indexed by PERF_REG_X86_*
 * (AX 0 ... IP 8 ..., R8 16 ... R15 23; @have says which are set), @stack
 * the @len bytes of user stack from the sampled sp.  Writes at most @max
 * addresses to @ips.  Returns how many (0: nothing known, e.g. no file for
 * the ip; the ip alone when nothing describes its frame).  *@whole (when not
 * NULL): 1 when the unwinding reached the thread's outermost frame, the one
 * whose call frame information says it has no caller (_start, a thread's
 * clone), 0 when it stopped before (the copy ended, a frame had no CFI). */
size_t unw_sample(unw *u, uint32_t pid, uint32_t tid, const uint64_t regs[UNW_NREGS],
		  uint64_t have, const uint8_t *stack, uint64_t len, uint64_t *ips, size_t max,
		  int *whole);

#endif
