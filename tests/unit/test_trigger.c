/* libmagictrace seen by a hardware execute breakpoint (libcommon/trigger.c,
 * the mechanism mt-capture uses), plus symaddr's address rule.
 *
 * Runs tests/programs/capture/mt_calls (or the program given as argv[1], e.g. one
 * built against the installed shared library with pkg-config), stopped at its
 * entry point; resolves magic_trace_stop_indicator in it; watches it; lets
 * it run; then checks the hits are exactly the calls mt_calls documents. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symaddr.h"
#include "t.h"
#include "tracee.h"
#include "trigger.h"

static void test_maps(void)
{
	static const char text[] =
		"555555554000-555555555000 r--p 00000000 fe:01 123 /usr/bin/prog\n"
		"555555555000-555555556000 r-xp 00001000 fe:01 123 /usr/bin/prog\n"
		"7ffff7dd3000-7ffff7df9000 r--p 00000000 fe:01 456 /lib/x86_64-linux-gnu/libc.so.6\n"
		"7ffff7df9000-7ffff7f4e000 r-xp 00026000 fe:01 456 /lib/x86_64-linux-gnu/libc.so.6\n"
		"7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]\n"
		"7ffff7fc1000-7ffff7fc5000 rw-p 00000000 00:00 0 \n";
	struct symaddr_maps m;
	uint64_t a = 0;

	T_CHECK(symaddr_maps_parse(&m, text, sizeof text - 1) == 0 && m.n == 6, "maps: 6 lines");
	T_CHECK(!strcmp(m.v[4].path, "[stack]") && !strcmp(m.v[5].path, "") &&
			!strcmp(m.v[1].perms, "r-xp"),
		"maps: paths and perms");
	T_CHECK(symaddr_offset_to_runtime(&m, "/usr/bin/prog", 0x1234, &a) == 0 && a == 0x555555555234,
		"offset 0x1234 of prog is at 0x555555555234 (%#" PRIx64 ")", a);
	T_CHECK(symaddr_offset_to_runtime(&m, "/lib/x86_64-linux-gnu/libc.so.6", 0x27000, &a) == 0 &&
			a == 0x7ffff7dfa000,
		"libc offset 0x27000 at 0x7ffff7dfa000 (%#" PRIx64 ")", a);
	T_CHECK(symaddr_offset_to_runtime(&m, "/usr/bin/prog", 0x2000, &a) == -ENOENT,
		"an unmapped offset is -ENOENT");
	symaddr_maps_fini(&m);
}

struct want {
	uint64_t a0, a1;
	int thread; /* 0: main thread, k: the k-th thread other than main */
};

static int cmp_hit(const void *a, const void *b)
{
	const struct trigger_hit *x = a, *y = b;
	return (x->time > y->time) - (x->time < y->time);
}

static void test_watch(const char *prog, enum trigger_mech mech)
{
	static const struct want want[] = {
		{1, 3, 0}, {2, 6, 0}, {3, 9, 0}, {101, 201, 1}, {102, 202, 2}, {103, 203, 3}, {0, 77, 0},
	};
	const size_t nwant = sizeof want / sizeof want[0];
	char *argv[] = {(char *)prog, NULL};
	const char *mname = mech == TRIGGER_HW ? "hardware breakpoint" : "uprobe";
	struct symaddr_loc loc;
	struct trigger_hit hits[64];
	struct trigger *t = NULL;
	struct trigger_point pt;
	uint64_t addr = 0, lost = 0;
	int st = 0, n, r;
	pid_t pid;

	pid = tracee_spawn(argv, NULL, NULL);
	T_CHECK(pid > 0, "%s starts stopped at its entry point (%d)", prog, (int)pid);
	if (pid <= 0)
		return;
	T_CHECK(symaddr_resolve(pid, "no_such_function_anywhere", &loc) == -ENOENT,
		"an undefined name is -ENOENT");
	r = symaddr_resolve(pid, "magic_trace_stop_indicator", &loc);
	addr = loc.addr;
	T_CHECK(r == 0 && addr, "magic_trace_stop_indicator resolved at %#" PRIx64 " in %s+%#" PRIx64,
		addr, loc.path, loc.offset);
	pt = (struct trigger_point){loc.addr, loc.path, loc.offset};
	r = trigger_alloc(&t, mech);
	T_CHECK(r == 0, "trigger_alloc (%s)", mname);
	if (r < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return;
	}
	r = trigger_watch_process(t, pid, &pt);
	T_CHECK(r == 1, "%s: watching the one thread of the stopped process (%d: %s)", mname, r,
		r < 0 ? strerror(-r) : "ok");
	T_CHECK(tracee_release(pid) == 0, "released");
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exits 0 (status %#x)", prog, st);
	/* Each sample is in its ring before the breakpoint returns to the thread. */
	n = trigger_read(t, hits, 64, &lost);
	T_CHECK(n == (int)nwant && lost == 0, "%s: %d hits, %d calls made (lost %" PRIu64 ")",
		mname, n, (int)nwant, lost);
	if (n < 0)
		n = 0;
	qsort(hits, (size_t)n, sizeof *hits, cmp_hit);
	uint32_t tids[4] = {(uint32_t)pid, 0, 0, 0};
	for (size_t i = 0; i < nwant && i < (size_t)n; i++) {
		const struct trigger_hit *h = &hits[i];
		const struct want *w = &want[i];
		int args_ok = h->arg1 == w->a1 && (w->a1 == 77 ? h->arg0 != 0 : h->arg0 == w->a0);
		T_CHECK(args_ok && h->ip == addr && h->pid == (uint32_t)pid,
			"call %zu: args (%" PRIu64 ", %" PRIu64 ") ip %#" PRIx64 " pid %u", i + 1,
			h->arg0, h->arg1, h->ip, h->pid);
		if (w->thread)
			tids[w->thread] = h->tid;
		else
			T_CHECK(h->tid == (uint32_t)pid, "call %zu is in the main thread", i + 1);
	}
	T_CHECK(tids[1] && tids[2] && tids[3] && tids[1] != (uint32_t)pid &&
			tids[2] != (uint32_t)pid && tids[3] != (uint32_t)pid && tids[1] != tids[2] &&
			tids[2] != tids[3] && tids[1] != tids[3],
		"the workers' calls come from three other threads (%u %u %u)", tids[1], tids[2],
		tids[3]);
	trigger_free(t);
}

static void test_errors(void)
{
	char *argv[] = {"/nonexistent/program", NULL};
	struct trigger *t = NULL;
	struct trigger_point pt = {0x1000, "/bin/sh", 0x1000};
	T_CHECK(tracee_spawn(argv, NULL, NULL) == -ENOENT, "a missing program is -ENOENT");
	T_CHECK(trigger_alloc(&t, TRIGGER_HW) == 0, "trigger_alloc");
	/* pid_max is at most 2^22 */
	T_CHECK(trigger_watch_process(t, 4194304 + 1, &pt) == -ESRCH,
		"a process that does not exist is -ESRCH");
	trigger_free(t);
	struct symaddr_maps m;
	T_CHECK(symaddr_maps_read(&m, 4194304 + 1) == -ESRCH, "its maps: -ESRCH");
}

int main(int argc, char **argv)
{
	test_maps();
	test_errors();
	const char *prog = argc > 1 ? argv[1] : "tests/programs/capture/mt_calls";
	/* Some VMs (this project's CI VM among them) accept hardware breakpoint
	 * events but never deliver them; the trigger then falls back to uprobes. */
	int hw = trigger_hw_works();
	if (hw == 1)
		test_watch(prog, TRIGGER_HW);
	else
		printf("ok %d - hardware breakpoint test # SKIP hardware execute breakpoints do not fire "
		       "on this machine (self-test: %s)\n",
		       ++t_n, hw == 0 ? "opened, never counted" : strerror(-hw));
	if (geteuid() == 0)
		test_watch(prog, TRIGGER_UPROBE);
	else
		printf("ok %d - uprobe test # SKIP uprobes need root\n", ++t_n);
	return T_DONE();
}
