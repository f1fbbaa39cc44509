#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int io_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t io_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int io_slurp_fd(int fd, uint8_t **buf, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	uint8_t *b = malloc(cap);
	if (!b)
		return -1;
	for (;;) {
		if (n == cap) {
			uint8_t *nb = realloc(b, cap * 2);
			if (!nb) {
				free(b);
				errno = ENOMEM;
				return -1;
			}
			b = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(b);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*buf = b;
	*len = n;
	return 0;
}

int io_slurp(const char *path, uint8_t **buf, size_t *len)
{
	int fd = io_open_in(path);
	if (fd < 0)
		return -1;
	int r = io_slurp_fd(fd, buf, len);
	int e = errno;
	if (fd != 0)
		close(fd);
	errno = e;
	return r;
}

int io_open_in(const char *path)
{
	if (!path || !strcmp(path, "-"))
		return 0;
	return open(path, O_RDONLY | O_CLOEXEC);
}

int io_out_open(struct io_out *o, const char *path, int binary, int force)
{
	memset(o, 0, sizeof *o);
	o->fd = -1;
	if (!path || !strcmp(path, "-")) {
		if (binary && !force && isatty(1)) {
			errno = EISDIR;
			return -1;
		}
		o->fd = 1;
		return 0;
	}
	size_t n = strlen(path) + 32;
	o->path = strdup(path);
	o->tmp = malloc(n);
	if (!o->path || !o->tmp) {
		free(o->path);
		free(o->tmp);
		errno = ENOMEM;
		return -1;
	}
	snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
	o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (o->fd < 0) {
		int e = errno;
		free(o->path);
		free(o->tmp);
		o->path = o->tmp = NULL;
		errno = e;
		return -1;
	}
	return 0;
}

int io_out_commit(struct io_out *o)
{
	int r = 0;
	if (!o->tmp)
		return 0;
	if (close(o->fd) < 0)
		r = -1;
	o->fd = -1;
	if (r == 0 && rename(o->tmp, o->path) < 0)
		r = -1;
	int e = errno;
	if (r < 0)
		unlink(o->tmp);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	errno = e;
	return r;
}

void io_out_abort(struct io_out *o)
{
	if (!o->tmp)
		return;
	if (o->fd >= 0)
		close(o->fd);
	unlink(o->tmp);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	o->fd = -1;
}

int io_progress_enabled(void)
{
	return isatty(2);
}

size_t io_parse_size(const char *arg, size_t min)
{
	char *end;
	unsigned sh = 0;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 10);
	if (*end == 'K' || *end == 'k')
		sh = 10, end++;
	else if (*end == 'M' || *end == 'm')
		sh = 20, end++;
	else if (*end == 'G' || *end == 'g')
		sh = 30, end++;
	if (errno || end == arg || *end || arg[0] == '-' || v > (SIZE_MAX >> 30) || (v << sh) < min)
		return 0;
	return (size_t)(v << sh);
}
