/* Start a command stopped, so that a tracer can attach before it runs.
 *
 * tracee_spawn() forks, makes the child a ptrace tracee, execs the command
 * and runs it up to its ELF entry point: the dynamic loader has then mapped
 * every library the program was linked with, and not one instruction of the
 * program itself has run.  The child stays stopped until tracee_release().
 *
 * Functions return >= 0 or a negative errno; they never print. */
#ifndef MT_TRACEE_H
#define MT_TRACEE_H

#include <sys/types.h>

/* Child's pid, or -errno: the errno of a failed execvp (-ENOENT: no such
 * command, -EACCES, -ENOEXEC...), -ECHILD if the child died before its entry
 * point, other -errno for fork/ptrace failures.  @argv[0] is looked up in
 * PATH.  @child_setup, if not NULL, runs in the child before the exec
 * (async-signal-safe code only). */
pid_t tracee_spawn(char *const argv[], void (*child_setup)(void *), void *arg);

/* Detaches: the child runs.  0 or -errno. */
int tracee_release(pid_t pid);

#endif
