/* libmagictrace — mark the moment you want traced.
 *
 * A program calls magic_trace_take_snapshot() when something interesting has
 * just happened.  mt (and magic-trace) place a hardware execute breakpoint on
 * magic_trace_stop_indicator and take the trace snapshot when it runs.
 *
 * ABI (stable): the symbol `magic_trace_stop_indicator`, a global function of
 * two 64-bit integer arguments (System V: rdi = start timestamp or 0, rsi =
 * user argument), returning nothing.  It is never inlined, never removed and
 * never merged with another function, so the breakpoint always fires.
 */
#ifndef MAGIC_TRACE_H
#define MAGIC_TRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The trigger symbol.  Calling it directly is allowed. */
void magic_trace_stop_indicator(uint64_t start, uint64_t arg);

/* Records "now" (TSC) as this thread's start of an interesting interval. */
void magic_trace_mark_start(void);

/* Triggers the snapshot; start = this thread's last mark_start (or 0). */
void magic_trace_take_snapshot(void);
void magic_trace_take_snapshot_with_arg(uint64_t arg);

/* Gate: triggers only when at least @min_ns elapsed since this thread's
 * mark_start (so fast paths do not pay the ~10us breakpoint cost).  Returns 1
 * when it triggered. */
int magic_trace_take_snapshot_if_slower_than(uint64_t min_ns, uint64_t arg);

/* Nanoseconds since this thread's mark_start (0 if never marked). */
uint64_t magic_trace_ns_since_mark(void);

#ifdef __cplusplus
}
#endif
#endif
