/* Diagnostics for tools: one line on stderr, "prog: fatal: ...".
 * Library code never calls these; tools do.
 * Exit codes used by every tool (documented in each --help):
 *   0 ok, 1 the data had errors (output still written),
 *   2 usage or unusable input, 111 system error. */
#ifndef MT_ERR_H
#define MT_ERR_H

#include <stdarg.h>

enum { MT_EXIT_OK = 0, MT_EXIT_DEGRADED = 1, MT_EXIT_USAGE = 2, MT_EXIT_SYS = 111 };

extern const char *mt_progname;

void mt_set_progname(const char *argv0);
void mt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A progress line on a terminal (the caller checks io_progress_enabled):
 * "\rprog: ..." rewritten in place.  mt_progress_end ends it with a newline;
 * every diagnostic above ends it first, so none is written over it. */
void mt_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mt_progress_end(void);
/* Prints "prog: fatal: ..." and exits with @code. */
void mt_fatal(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

#endif
