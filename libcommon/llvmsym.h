/* A long-lived llvm-symbolizer coprocess: requests `"PATH" 0xADDR` on its
 * stdin, one JSON reply line per request on its stdout, pipelined.
 *
 * The child is started with posix_spawnp (no shell), its stderr goes to
 * /dev/null.  Requests are written while replies are read (poll() on both
 * pipes), so a long batch never deadlocks on full pipes.  A child that does
 * not answer for @timeout_ms is killed; one that dies ends the batch early.
 *
 * The caller must ignore SIGPIPE (a child that dies makes writes fail with
 * EPIPE instead).  Library code: never prints, never exits. */
#ifndef MT_LLVMSYM_H
#define MT_LLVMSYM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct llvmsym llvmsym;

/* Starts @exe (looked up in PATH when it has no '/') with
 * `--output-style=JSON --inlines --demangle`.  NULL on failure with *err set
 * to a negative errno (-ENOENT when the program does not exist). */
llvmsym *llvmsym_start(const char *exe, int *err);

/* Called once per reply, in request order: @i is the request index, @line the
 * reply (NUL-terminated, without its newline), valid only during the call. */
typedef void (*llvmsym_reply_fn)(void *ctx, size_t i, const char *line, size_t len);

/* The longest reply line taken (a real one is a few KiB): longer is -E2BIG. */
#define LLVMSYM_LINE_MAX ((size_t)16 << 20)

/* Sends @n requests (@paths[i], @vaddrs[i]) and delivers the replies.
 * Returns the number of replies delivered (== @n on success), or a negative
 * errno: -ETIMEDOUT (no whole reply for @timeout_ms; the child and its
 * process group were killed), -E2BIG (a reply line over LLVMSYM_LINE_MAX),
 * -EPIPE (the child died or closed its pipes), -ENOMEM, -EIO.  After an error
 * the coprocess is dead; later batches fail at once with -EPIPE.  Replies
 * delivered before the error were delivered through @fn as usual. */
long llvmsym_batch(llvmsym *s, size_t n, const char *const *paths, const uint64_t *vaddrs,
		   llvmsym_reply_fn fn, void *ctx, int timeout_ms);

/* Is the coprocess still usable? */
int llvmsym_alive(const llvmsym *s);

/* Closes its stdin, waits up to @timeout_ms for it to exit, then kills it.
 * NULL is a no-op. */
void llvmsym_stop(llvmsym *s, int timeout_ms);

#endif
