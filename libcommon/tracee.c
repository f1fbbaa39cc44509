#include "tracee.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static int entry_point(pid_t pid, uint64_t *entry)
{
	char path[64];
	uint64_t av[2];
	int fd, r = -ENOENT;

	snprintf(path, sizeof path, "/proc/%d/auxv", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	while (read(fd, av, sizeof av) == (ssize_t)sizeof av && av[0] != AT_NULL)
		if (av[0] == AT_ENTRY) {
			*entry = av[1];
			r = 0;
			break;
		}
	close(fd);
	return r;
}

/* Waits for the next stop of @pid with signal @want; other signals that
 * arrive first are delivered to the child.  0, -ECHILD if it died. */
static int wait_stop(pid_t pid, int want)
{
	for (;;) {
		int st;
		if (waitpid(pid, &st, 0) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ECHILD;
		if (!WIFSTOPPED(st))
			continue;
		if (WSTOPSIG(st) == want)
			return 0;
		if (ptrace(PTRACE_CONT, pid, 0, (void *)(long)WSTOPSIG(st)) < 0)
			return -errno;
	}
}

/* Runs the stopped child to @entry with a one-shot int3. */
static int run_to(pid_t pid, uint64_t entry)
{
	struct user_regs_struct regs;
	long word;
	int r;

	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, pid, (void *)entry, 0);
	if (errno)
		return -errno;
	if (ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)((word & ~0xffL) | 0xcc)) < 0)
		return -errno;
	if (ptrace(PTRACE_CONT, pid, 0, 0) < 0)
		return -errno;
	if ((r = wait_stop(pid, SIGTRAP)) < 0)
		return r;
	if (ptrace(PTRACE_GETREGS, pid, 0, &regs) < 0)
		return -errno;
	if (regs.rip != entry + 1)
		return -EPROTO;
	regs.rip = entry;
	if (ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)word) < 0 ||
	    ptrace(PTRACE_SETREGS, pid, 0, &regs) < 0)
		return -errno;
	return 0;
}

pid_t tracee_spawn(char *const argv[], void (*child_setup)(void *), void *arg)
{
	int p[2], err = 0, r;
	uint64_t entry = 0;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(p[0]);
		close(p[1]);
		return r;
	}
	if (pid == 0) {
		close(p[0]);
		if (child_setup)
			child_setup(arg);
		if (ptrace(PTRACE_TRACEME, 0, 0, 0) < 0) {
			err = errno;
		} else {
			execvp(argv[0], argv);
			err = errno;
		}
		if (write(p[1], &err, sizeof err) < 0)
			_exit(127);
		_exit(127);
	}
	close(p[1]);
	/* The pipe closes on a successful exec; a failed one sends errno. */
	do
		n = read(p[0], &err, sizeof err);
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n == (ssize_t)sizeof err) {
		waitpid(pid, NULL, 0);
		return -(err ? err : EIO);
	}
	/* The exec stop (SIGTRAP), then on to the entry point. */
	if ((r = wait_stop(pid, SIGTRAP)) < 0)
		return r;
	if ((r = entry_point(pid, &entry)) < 0 || (r = run_to(pid, entry)) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return r;
	}
	return pid;
}

int tracee_release(pid_t pid)
{
	return ptrace(PTRACE_DETACH, pid, 0, 0) < 0 ? -errno : 0;
}
