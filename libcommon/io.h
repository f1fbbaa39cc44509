/* I/O helpers: full reads and writes that loop over short counts and EINTR,
 * and output files that appear only when complete (temp file + rename). */
#ifndef MT_IO_H
#define MT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* 0 on success, -1 with errno on error. */
int io_write_all(int fd, const void *buf, size_t len);
/* Bytes read (< len only at end of file), or -1 with errno. */
ssize_t io_read_full(int fd, void *buf, size_t len);
/* Reads a whole file into a malloc'd buffer; -1 with errno on error. */
int io_slurp(const char *path, uint8_t **buf, size_t *len);
int io_slurp_fd(int fd, uint8_t **buf, size_t *len);

/* An output: a path or stdout ("-" or NULL).  Refuses a terminal for binary
 * data unless @force.  A regular file (or a new path) is written to a
 * temporary file PATH.tmp.XXXXXX, created with O_EXCL in PATH's directory, and
 * renamed onto PATH on commit, so PATH appears only complete; a symbolic link
 * is followed (its target is replaced, the link kept).  Anything that is not a
 * regular file (a device, a FIFO, a socket), and every path under /dev/ or
 * /proc/ (/dev/stdout, /dev/fd/N of a process substitution), is opened and
 * written in place: never replaced, never truncated.  While a temporary file
 * exists, SIGINT, SIGTERM, SIGHUP and SIGQUIT remove it before they end the
 * process (where their disposition was the default), and so does mt_fatal(). */
struct io_out {
	int fd;
	char *path, *tmp; /* the target and its temporary file; NULL when in place */
	int slot;         /* in the signal handler's list of temporary files, or -1 */
	int own;          /* fd is ours to close */
};
/* 0 or -1 with errno (EISDIR for "terminal refused"). */
int io_out_open(struct io_out *o, const char *path, int binary, int force);
/* fsync-free rename into place (in place: close); closes fd.  0 or -1 with errno. */
int io_out_commit(struct io_out *o);
/* Removes the temporary file; closes fd.  Safe to call after commit (no-op). */
void io_out_abort(struct io_out *o);
/* Removes every temporary file still open (mt_fatal calls it before exiting). */
void io_out_cleanup(void);

/* Opens @path for reading ("-" or NULL: stdin). -1 with errno. */
int io_open_in(const char *path);

/* Is stderr a terminal (progress reporting)? */
int io_progress_enabled(void);

/* A byte count written as digits with an optional K, M or G suffix (powers of
 * 1024); 0 when it is not one or is below @min. */
size_t io_parse_size(const char *arg, size_t min);

#endif
