#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"

void drv_init(int argc, char **argv)
{
	mt_set_progname(argc > 0 ? argv[0] : NULL);
	if (argc > 0)
		argv[0] = (char *)mt_progname; /* getopt's messages say "mt-dump:" */
	opterr = 0;
}

void drv_usage(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	mt_fatal(MT_EXIT_USAGE, "%s (see %s --help)", msg, mt_progname);
}

void drv_getopt_error(int c, char **argv)
{
	/* optind is past the offending argument (or its missing value) */
	const char *arg = optind > 0 ? argv[optind - 1] : "?";
	if (c == ':') {
		if (optopt && strncmp(arg, "--", 2))
			drv_usage("option '-%c' needs a value", optopt);
		drv_usage("option '%s' needs a value", arg);
	}
	if (optopt && strncmp(arg, "--", 2))
		drv_usage("unknown option '-%c'", optopt);
	drv_usage("unknown option '%s'", arg);
}

const char *drv_input(int argc, char **argv, const char *in_opt)
{
	if (!in_opt && optind < argc)
		in_opt = argv[optind++];
	if (optind < argc)
		drv_usage("unexpected argument '%s'", argv[optind]);
	return in_opt;
}

int drv_exit_errno(int e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
	case EISDIR:
	case EACCES:
	case EPERM:
	case ELOOP:
	case ENAMETOOLONG:
	case ENXIO:
		return MT_EXIT_USAGE;
	default:
		return MT_EXIT_SYS;
	}
}

int drv_exit_mtev(int err)
{
	if (err < 0)
		err = -err;
	return err == MTEV_EIO || err == MTEV_ENOMEM ? MT_EXIT_SYS : MT_EXIT_USAGE;
}

const char *drv_name(const char *path)
{
	return !path || !strcmp(path, "-") ? "stdin" : path;
}

int drv_open_in(const char *path)
{
	int fd = io_open_in(path);
	if (fd < 0)
		mt_fatal(drv_exit_errno(errno), "unable to open %s: %s", drv_name(path),
			 strerror(errno));
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
		mt_fatal(MT_EXIT_USAGE, "unable to open %s: %s", drv_name(path), strerror(EISDIR));
	return fd;
}

static const char *mtev_reason(int err)
{
	if (err < 0)
		err = -err;
	return err == MTEV_EIO ? strerror(errno) : mtev_strerror(err);
}

mtev_reader *drv_reader(const char *path, int fd)
{
	int err = 0;
	mtev_reader *r = mtev_reader_alloc(fd, &err);
	if (!r)
		mt_fatal(drv_exit_mtev(err), "unable to read %s: %s", drv_name(path),
			 mtev_reason(err));
	return r;
}

void drv_read_failed(const char *path, mtev_reader *r, int err, const char *extra)
{
	int e = errno;
	unsigned long long off = (unsigned long long)mtev_reader_offset(r);
	errno = e;
	if (err == -MTEV_EIO || err == MTEV_EIO)
		mt_fatal(MT_EXIT_SYS, "unable to read %s: %s%s", drv_name(path), strerror(e),
			 extra ? extra : "");
	mt_fatal(drv_exit_mtev(err), "unable to read %s: %s at byte offset %llu%s", drv_name(path),
		 mtev_strerror(err < 0 ? -err : err), off, extra ? extra : "");
}

void drv_input_error(int code, const char *path, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	mt_fatal(code ? code : MT_EXIT_USAGE, "unable to read %s: %s", drv_name(path), msg);
}

void drv_out_open(struct io_out *o, const char *path, int binary, int force)
{
	if (io_out_open(o, path, binary, force) == 0)
		return;
	int e = errno;
	struct stat st;
	/* EISDIR is io_out_open's "a terminal refused"; a real directory is not */
	if (e == EISDIR &&
	    (!path || !strcmp(path, "-") || (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))))
		mt_fatal(MT_EXIT_USAGE, "refusing to write binary to a terminal "
					"(use -o FILE or --force)");
	mt_fatal(MT_EXIT_SYS, "unable to open %s: %s", path && strcmp(path, "-") ? path : "stdout",
		 strerror(e));
}

void drv_out_commit(struct io_out *o, const char *path)
{
	if (io_out_commit(o) < 0)
		drv_write_failed(o, path, NULL);
}

void drv_write_failed(struct io_out *o, const char *path, const char *reason)
{
	char msg[512];
	snprintf(msg, sizeof msg, "%s", reason ? reason : strerror(errno));
	if (o)
		io_out_abort(o);
	mt_fatal(MT_EXIT_SYS, "unable to write %s: %s", path && strcmp(path, "-") ? path : "stdout",
		 msg);
}

int drv_progress_due(struct timespec *last)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if ((last->tv_sec || last->tv_nsec) &&
	    (now.tv_sec - last->tv_sec) * 1000000000L + (now.tv_nsec - last->tv_nsec) < 250000000L)
		return 0;
	*last = now;
	return 1;
}
