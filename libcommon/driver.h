/* The stage driver: what every stage tool (mt-decode, mt-segment, mt-stitch,
 * mt-symbolize, mt-write, mt-cat, mt-dump, mt-undump, mt-compare) does the
 * same way, so that the same bad input gives the same exit code and the same
 * message from every one of them.
 *
 * Messages are one line, "PROG: fatal: unable to VERB WHAT: REASON":
 *   unable to open IN: No such file or directory           exit 2
 *   unable to open IN: Is a directory                      exit 2
 *   unable to read IN: truncated stream at byte offset N   exit 2
 *   unable to read IN: not an MTEV stream (bad magic)      exit 2
 *   unable to read IN: Input/output error                  exit 111
 *   unable to write OUT: No space left on device           exit 111
 * A usage error is one line too, "PROG: fatal: MESSAGE (see PROG --help)",
 * exit 2.  The exit policy (err.h): 0 ok, 1 degraded data, 2 usage or unusable
 * input, 111 system error.  Every fatal exit removes the temporary output
 * files (io.h), so no output that looks complete is ever left behind. */
#ifndef MT_DRIVER_H
#define MT_DRIVER_H

#include <time.h>

#include <stdint.h>

#include "io.h"
#include "mtev.h"

/* Sets the program name (getopt's messages too) and makes getopt quiet:
 * drv_getopt_error() reports instead.  Call first in main. */
void drv_init(int argc, char **argv);
/* Exits 2 with "PROG: fatal: MESSAGE (see PROG --help)". */
void drv_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* getopt_long returned '?' or ':' (optstring starts with ':'): one line. */
void drv_getopt_error(int c, char **argv) __attribute__((noreturn));
/* After getopt: a stage's one input, `-i FILE` (@in_opt) or the one operand,
 * NULL when neither is given; any other operand is a usage error. */
const char *drv_input(int argc, char **argv, const char *in_opt);

/* The exit code for an errno met opening or reading an input: 2 when the
 * input named cannot be used (missing, a directory, no permission, ...), else
 * 111. */
int drv_exit_errno(int e);
/* Whether a progress line is due (mt_progress): at the first call, then at
 * most four times a second; @last is the caller's, zeroed at first. */
int drv_progress_due(struct timespec *last);

/* The exit code for a -MTEV_E* (or MTEV_E*): 111 for MTEV_EIO and
 * MTEV_ENOMEM, else 2. */
int drv_exit_mtev(int err);

/* "stdin" for NULL or "-", else @path. */
const char *drv_name(const char *path);
/* Opens an input (NULL or "-": stdin, fd 0); refuses a directory.  Exits on
 * failure: "unable to open IN: REASON". */
int drv_open_in(const char *path);
/* An MTEV reader on @fd; exits on a bad header: "unable to read IN: REASON". */
mtev_reader *drv_reader(const char *path, int fd);
/* Exits for mtev_read()'s error @err at @r's offset, @extra appended. */
void drv_read_failed(const char *path, mtev_reader *r, int err, const char *extra)
	__attribute__((noreturn));
/* Exits 2 (or 111) with "unable to read IN: MESSAGE" (@code 0: 2). */
void drv_input_error(int code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

/* Opens the output (io_out_open); exits on failure, 2 for a terminal refused
 * binary data, else 111 "unable to open OUT: REASON". */
void drv_out_open(struct io_out *o, const char *path, int binary, int force);
/* Commits the output; exits 111 "unable to write OUT: REASON" on failure. */
void drv_out_commit(struct io_out *o, const char *path);
/* Exits 111 "unable to write OUT: REASON" (@reason NULL: strerror(errno)),
 * removing the temporary file first. */
void drv_write_failed(struct io_out *o, const char *path, const char *reason)
	__attribute__((noreturn));

#endif
