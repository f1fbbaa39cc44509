#include "llvmsym.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct llvmsym {
	pid_t pid;
	int to_fd, from_fd; /* our ends: its stdin, its stdout */
	int dead;
	char *in;	    /* reply bytes not yet split into lines */
	size_t in_len, in_cap;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

llvmsym *llvmsym_start(const char *exe, int *err)
{
	int to[2] = {-1, -1}, from[2] = {-1, -1};
	posix_spawn_file_actions_t fa;
	int fa_ok = 0, r;
	llvmsym *s = calloc(1, sizeof *s);
	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	s->to_fd = s->from_fd = -1;
	if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	if ((r = posix_spawn_file_actions_init(&fa)) != 0) {
		r = -r;
		goto fail;
	}
	fa_ok = 1;
	/* dup2 clears FD_CLOEXEC on the copies, so only 0, 1, 2 reach the child */
	if ((r = posix_spawn_file_actions_adddup2(&fa, to[0], 0)) != 0 ||
	    (r = posix_spawn_file_actions_adddup2(&fa, from[1], 1)) != 0 ||
	    (r = posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0)) != 0) {
		r = -r;
		goto fail;
	}
	char *argv[] = {(char *)exe, (char *)"--output-style=JSON", (char *)"--inlines",
			(char *)"--demangle", NULL};
	/* its own process group: a symbolizer killed for a timeout takes the
	 * processes it started with it */
	posix_spawnattr_t sa;
	if ((r = posix_spawnattr_init(&sa)) != 0) {
		r = -r;
		goto fail;
	}
	if ((r = posix_spawnattr_setflags(&sa, POSIX_SPAWN_SETPGROUP)) != 0 ||
	    (r = posix_spawnattr_setpgroup(&sa, 0)) != 0) {
		posix_spawnattr_destroy(&sa);
		r = -r;
		goto fail;
	}
	r = posix_spawnp(&s->pid, exe, &fa, &sa, argv, environ);
	posix_spawnattr_destroy(&sa);
	if (r != 0) {
		r = -r;
		goto fail;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(to[0]);
	close(from[1]);
	s->to_fd = to[1];
	s->from_fd = from[0];
	fcntl(s->to_fd, F_SETFL, fcntl(s->to_fd, F_GETFL) | O_NONBLOCK);
	fcntl(s->from_fd, F_SETFL, fcntl(s->from_fd, F_GETFL) | O_NONBLOCK);
	return s;
fail:
	if (fa_ok)
		posix_spawn_file_actions_destroy(&fa);
	close_fd(&to[0]);
	close_fd(&to[1]);
	close_fd(&from[0]);
	close_fd(&from[1]);
	free(s);
	*err = r;
	return NULL;
}

int llvmsym_alive(const llvmsym *s)
{
	return s && !s->dead;
}

static void kill_child(llvmsym *s)
{
	close_fd(&s->to_fd);
	close_fd(&s->from_fd);
	if (s->pid > 0) {
		kill(-s->pid, SIGKILL); /* its process group: what it started too */
		kill(s->pid, SIGKILL);
		while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
			;
		s->pid = 0;
	}
	s->dead = 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long llvmsym_batch(llvmsym *s, size_t n, const char *const *paths, const uint64_t *vaddrs,
		   llvmsym_reply_fn fn, void *ctx, int timeout_ms)
{
	if (!s || s->dead)
		return -EPIPE;
	enum { OUT_CAP = 1 << 16 };
	char *out = malloc(OUT_CAP);
	if (!out)
		return -ENOMEM;
	size_t out_len = 0, out_off = 0, next = 0, done = 0;
	long ret = 0;
	int64_t deadline = now_ms() + timeout_ms;
	while (done < n) {
		/* refill the request buffer with whole lines */
		if (out_off == out_len && next < n) {
			out_len = out_off = 0;
			while (next < n) {
				char line[4200];
				int k = snprintf(line, sizeof line, "\"%s\" 0x%" PRIx64 "\n", paths[next],
						 vaddrs[next]);
				if (k < 0 || (size_t)k >= sizeof line) /* path too long: never sent */
					k = snprintf(line, sizeof line, "\"/\" 0x0\n");
				if (out_len + (size_t)k > OUT_CAP)
					break;
				memcpy(out + out_len, line, (size_t)k);
				out_len += (size_t)k;
				next++;
			}
		}
		struct pollfd pf[2] = {{s->from_fd, POLLIN, 0}, {s->to_fd, POLLOUT, 0}};
		int np = (out_off < out_len && s->to_fd >= 0) ? 2 : 1;
		int64_t left = deadline - now_ms();
		if (left < 0)
			left = 0;
		int pr = poll(pf, (nfds_t)np, (int)left);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			ret = -EIO;
			break;
		}
		if (pr == 0) {
			ret = -ETIMEDOUT;
			break;
		}
		int progress = 0;
		if (np == 2 && (pf[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(s->to_fd, out + out_off, out_len - out_off);
			if (w > 0) {
				out_off += (size_t)w;
				progress = 1;
			} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
				/* it closed its stdin: read what it still says, then stop */
				close_fd(&s->to_fd);
			}
		}
		if (pf[0].revents & (POLLIN | POLLERR | POLLHUP)) {
			if (s->in_len >= LLVMSYM_LINE_MAX) {
				/* one reply line longer than any real one: a
				 * broken symbolizer, not a bigger buffer */
				ret = -E2BIG;
				break;
			}
			if (s->in_cap - s->in_len < 65536) {
				size_t nc = s->in_cap ? s->in_cap * 2 : 131072;
				char *ni = realloc(s->in, nc);
				if (!ni) {
					ret = -ENOMEM;
					break;
				}
				s->in = ni;
				s->in_cap = nc;
			}
			ssize_t rd = read(s->from_fd, s->in + s->in_len, s->in_cap - s->in_len - 1);
			if (rd == 0) {
				ret = -EPIPE;
				break;
			}
			if (rd < 0 && errno != EAGAIN && errno != EINTR) {
				ret = -EIO;
				break;
			}
			if (rd > 0) {
				s->in_len += (size_t)rd;
				size_t off = 0;
				char *nl;
				/* progress is a whole reply: bytes without an end
				 * do not hold the timeout off */
				while (done < n && (nl = memchr(s->in + off, '\n', s->in_len - off))) {
					*nl = 0;
					fn(ctx, done++, s->in + off, (size_t)(nl - (s->in + off)));
					off = (size_t)(nl - s->in) + 1;
					progress = 1;
				}
				memmove(s->in, s->in + off, s->in_len - off);
				s->in_len -= off;
			}
		}
		if (progress)
			deadline = now_ms() + timeout_ms;
	}
	free(out);
	if (ret < 0) {
		kill_child(s);
		return ret;
	}
	return (long)done;
}

void llvmsym_stop(llvmsym *s, int timeout_ms)
{
	if (!s)
		return;
	close_fd(&s->to_fd);
	close_fd(&s->from_fd);
	if (s->pid > 0) {
		int64_t deadline = now_ms() + timeout_ms;
		for (;;) {
			pid_t w = waitpid(s->pid, NULL, WNOHANG);
			if (w == s->pid || (w < 0 && errno != EINTR))
				break;
			if (now_ms() >= deadline) {
				kill(-s->pid, SIGKILL);
				kill(s->pid, SIGKILL);
				while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
					;
				break;
			}
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
		}
	}
	free(s->in);
	free(s);
}
