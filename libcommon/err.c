#include "err.h"
#include "io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mt_progname = "mt";

void mt_set_progname(const char *argv0)
{
	const char *s = argv0 ? strrchr(argv0, '/') : NULL;
	mt_progname = s ? s + 1 : (argv0 ? argv0 : "mt");
}

static int progress_shown; /* a progress line is on the terminal, unended */

void mt_progress(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "\r%s: ", mt_progname);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	progress_shown = 1;
}

void mt_progress_end(void)
{
	if (progress_shown)
		fputc('\n', stderr);
	progress_shown = 0;
}

__attribute__((format(printf, 2, 0))) static void vsay(const char *level, const char *fmt, va_list ap)
{
	char buf[1024];
	mt_progress_end();
	int n = snprintf(buf, sizeof buf, "%s: %s", mt_progname, level);
	if (n < 0 || (size_t)n >= sizeof buf)
		n = 0;
	vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	/* one line, always */
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fprintf(stderr, "%s\n", buf);
}

void mt_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("warning: ", fmt, ap);
	va_end(ap);
}

void mt_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
}

void mt_fatal(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("fatal: ", fmt, ap);
	va_end(ap);
	io_out_cleanup(); /* no temporary file outlives a fatal error */
	exit(code);
}
