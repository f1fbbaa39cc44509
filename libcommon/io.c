#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
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

/* ---- outputs ----
 *
 * A regular file (or a path that does not exist yet) is written atomically:
 * a temporary file PATH.tmp.XXXXXX is created with O_CREAT|O_EXCL (mkostemp)
 * in PATH's directory, and renamed onto PATH on commit.  A symbolic link is
 * followed: its target is what is replaced, the link stays.  Anything else
 * (a device, a FIFO, a socket, /dev/stdout, a process substitution; every path
 * under /dev/ or /proc/) is opened and written in place, as any Unix tool does.
 *
 * Temporary files are registered: a SIGINT, SIGTERM, SIGHUP or SIGQUIT
 * unlinks them (async-signal-safe: unlink, then the default action is raised
 * again), and so does mt_fatal() through io_out_cleanup(). */

#define IO_SLOTS 8

static struct {
	volatile sig_atomic_t used;
	pid_t owner;
	char path[PATH_MAX + 16];
} tmp_slots[IO_SLOTS];

static const int io_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static int handlers_set;

static void on_signal(int sig)
{
	int e = errno;
	pid_t me = getpid();
	for (int i = 0; i < IO_SLOTS; i++)
		if (tmp_slots[i].used && tmp_slots[i].owner == me)
			unlink(tmp_slots[i].path);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	errno = e;
	raise(sig); /* delivered, with its default action, when the handler returns */
}

/* Installs on_signal where the disposition is still the default (a tool with
 * its own handling, or a signal ignored by nohup, is left alone). */
static void set_handlers(void)
{
	if (handlers_set)
		return;
	handlers_set = 1;
	for (size_t i = 0; i < sizeof io_sigs / sizeof io_sigs[0]; i++) {
		struct sigaction old, sa;
		if (sigaction(io_sigs[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigfillset(&sa.sa_mask);
		sigaction(io_sigs[i], &sa, NULL);
	}
}

static void block_sigs(sigset_t *old)
{
	sigset_t s;
	sigemptyset(&s);
	for (size_t i = 0; i < sizeof io_sigs / sizeof io_sigs[0]; i++)
		sigaddset(&s, io_sigs[i]);
	sigprocmask(SIG_BLOCK, &s, old);
}

static void unregister(int slot)
{
	if (slot >= 0 && slot < IO_SLOTS)
		tmp_slots[slot].used = 0;
}

void io_out_cleanup(void)
{
	pid_t me = getpid();
	for (int i = 0; i < IO_SLOTS; i++)
		if (tmp_slots[i].used && tmp_slots[i].owner == me) {
			unlink(tmp_slots[i].path);
			tmp_slots[i].used = 0;
		}
}

/* Creates TARGET.tmp.XXXXXX exclusively, registered for removal; called with
 * the signals blocked.  The slot in *slot (-1: none free, still created). */
static int make_tmp(const char *target, char **tmp, int *slot)
{
	size_t n = strlen(target) + 16;
	char *t = malloc(n);
	if (!t) {
		errno = ENOMEM;
		return -1;
	}
	snprintf(t, n, "%s.tmp.XXXXXX", target);
	int fd = mkostemp(t, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		free(t);
		errno = e;
		return -1;
	}
	*slot = -1;
	if (n <= sizeof tmp_slots[0].path)
		for (int i = 0; i < IO_SLOTS; i++)
			if (!tmp_slots[i].used) {
				memcpy(tmp_slots[i].path, t, n);
				tmp_slots[i].owner = getpid();
				tmp_slots[i].used = 1;
				*slot = i;
				break;
			}
	*tmp = t;
	return fd;
}

/* The mode (and, as root, the owner) a new or replaced regular file gets:
 * mkostemp made it 0600.  Best effort: the file is ours either way. */
static void set_mode(int fd, const struct stat *old)
{
	int r;
	if (!old) {
		mode_t m = umask(022);
		umask(m);
		r = fchmod(fd, 0666 & ~m);
	} else {
		r = fchmod(fd, old->st_mode & 07777);
		if (geteuid() == 0 && (old->st_uid != 0 || old->st_gid != 0))
			r |= fchown(fd, old->st_uid, old->st_gid);
	}
	(void)r;
}

static int in_place(const char *path)
{
	return !strncmp(path, "/dev/", 5) || !strncmp(path, "/proc/", 6);
}

int io_out_open(struct io_out *o, const char *path, int binary, int force)
{
	memset(o, 0, sizeof *o);
	o->fd = -1;
	o->slot = -1;
	if (!path || !strcmp(path, "-")) {
		if (binary && !force && isatty(1)) {
			errno = EISDIR;
			return -1;
		}
		o->fd = 1;
		return 0;
	}
	struct stat st, lst;
	int exists = stat(path, &st) == 0;
	if (!exists && errno != ENOENT)
		return -1;
	if (in_place(path) || (exists && !S_ISREG(st.st_mode))) {
		/* written in place: never replaced, never truncated by us (the
		 * shell's redirection decided that for /dev/stdout) */
		int fl = O_WRONLY | O_CLOEXEC | O_NOCTTY;
		if (exists && S_ISREG(st.st_mode))
			fl |= O_APPEND;
		int fd = open(path, fl);
		if (fd < 0)
			return -1;
		if (binary && !force && isatty(fd)) {
			close(fd);
			errno = EISDIR;
			return -1;
		}
		o->fd = fd;
		o->own = 1;
		return 0;
	}
	/* a regular file or nothing yet: through a temporary file.  A symbolic
	 * link is followed: its target is replaced, the link is kept. */
	char *target = NULL;
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
		if (exists) {
			target = realpath(path, NULL);
		} else { /* dangling: create its target through it, in place */
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
			if (fd < 0)
				return -1;
			o->fd = fd;
			o->own = 1;
			return 0;
		}
	} else {
		target = strdup(path);
	}
	if (!target) {
		if (errno != ENOMEM && errno != ENAMETOOLONG)
			errno = ENOMEM;
		return -1;
	}
	sigset_t old;
	block_sigs(&old);
	set_handlers();
	int fd = make_tmp(target, &o->tmp, &o->slot);
	int e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (fd < 0) {
		free(target);
		errno = e;
		return -1;
	}
	set_mode(fd, exists ? &st : NULL);
	o->fd = fd;
	o->own = 1;
	o->path = target;
	return 0;
}

/* Ends an output: closes it, then (a temp file) renames it over the target
 * when @keep and all went well, else removes it.  Signals are blocked while
 * the temp file leaves the cleanup list. */
static int out_end(struct io_out *o, int keep)
{
	int r = 0, e;
	sigset_t old;

	if (o->fd >= 0 && (o->tmp || o->own) && close(o->fd) < 0)
		r = -1;
	else if (o->fd < 0 && o->tmp && keep) {
		r = -1;
		errno = EBADF;
	}
	o->fd = -1;
	o->own = 0;
	if (!o->tmp) /* stdout or in place: only the close can fail */
		return r;
	block_sigs(&old);
	if (keep && r == 0 && rename(o->tmp, o->path) < 0)
		r = -1;
	e = errno;
	if (!keep || r < 0)
		unlink(o->tmp);
	unregister(o->slot);
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	o->slot = -1;
	errno = e;
	return r;
}

int io_out_commit(struct io_out *o)
{
	return out_end(o, 1);
}

void io_out_abort(struct io_out *o)
{
	out_end(o, 0);
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
