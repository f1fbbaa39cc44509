/* llvmsym: pipelining without deadlock, timeout, a dying child.
 * symz_stream: this very test binary (-O2 -g) names its own functions. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elfinfo.h"
#include "llvmsym.h"
#include "mtev.h"
#include "symbolize.h"
#include "t.h"

static char dir[] = "/tmp/test_symbolize.XXXXXX";

static const char *script(const char *name, const char *body)
{
	static char path[4][256];
	static int k;
	char *p = path[k++ & 3];
	snprintf(p, 256, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	chmod(p, 0755);
	return p;
}

struct echo_ctx {
	size_t n, bad;
};

static void on_echo(void *ctx, size_t i, const char *line, size_t len)
{
	struct echo_ctx *e = ctx;
	char want[64];
	int k = snprintf(want, sizeof want, "\"/x\" 0x%zx", i * 16);
	if ((size_t)k != len || memcmp(line, want, len))
		e->bad++;
	e->n++;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_llvmsym(void)
{
	/* cat echoes each request: 200k requests are ~3 MB each way, far more
	 * than both pipes hold, so this deadlocks unless reads and writes
	 * interleave */
	enum { N = 200000 };
	const char **paths = malloc(N * sizeof *paths);
	uint64_t *va = malloc(N * sizeof *va);
	for (size_t i = 0; i < N; i++) {
		paths[i] = "/x";
		va[i] = i * 16;
	}
	int err = 0;
	llvmsym *s = llvmsym_start(script("echo", "exec cat"), &err);
	T_CHECK(s != NULL, "start a coprocess (err %d)", err);
	struct echo_ctx e = {0, 0};
	long r = llvmsym_batch(s, N, paths, va, on_echo, &e, 10000);
	T_CHECK(r == N && e.n == N && e.bad == 0, "200k pipelined requests, replies in order (%ld, %zu bad)",
		r, e.bad);
	/* the same coprocess serves a second batch */
	e.n = e.bad = 0;
	r = llvmsym_batch(s, 10, paths, va, on_echo, &e, 10000);
	T_CHECK(r == 10 && e.bad == 0, "a second batch on the same process");
	llvmsym_stop(s, 1000);

	s = llvmsym_start(script("hang", "exec sleep 600"), &err);
	double t0 = now();
	e.n = 0;
	r = llvmsym_batch(s, 5, paths, va, on_echo, &e, 300);
	double dt = now() - t0;
	T_CHECK(r == -ETIMEDOUT && e.n == 0, "a silent child times out (%ld)", r);
	T_CHECK(dt < 5, "within a bounded wait (%.2fs)", dt);
	T_CHECK(!llvmsym_alive(s), "and is dead afterwards");
	T_CHECK(llvmsym_batch(s, 1, paths, va, on_echo, &e, 300) == -EPIPE, "later batches fail at once");
	llvmsym_stop(s, 100);

	s = llvmsym_start(script("die", "head -n 3"), &err);
	e.n = e.bad = 0;
	r = llvmsym_batch(s, 1000, paths, va, on_echo, &e, 5000);
	T_CHECK(r == -EPIPE && e.n == 3 && e.bad == 0, "a child that dies after 3 replies: -EPIPE, 3 delivered (%ld, %zu)",
		r, e.n);
	llvmsym_stop(s, 100);

	s = llvmsym_start("/nonexistent/llvm-symbolizer", &err);
	T_CHECK(!s && err == -ENOENT, "a missing program: -ENOENT (%d)", err);
	free(paths);
	free(va);
}

__attribute__((noinline)) int symz_test_target(int x);
__attribute__((noinline)) int symz_test_target(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

/* The executable mapping of this program from /proc/self/maps. */
static int self_map(uint64_t addr, uint64_t *start, uint64_t *len, uint64_t *pgoff, char *path)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4400];
	int found = 0;
	while (!found && fgets(line, sizeof line, f)) {
		uint64_t a, b, off;
		char perm[8];
		int n = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s%n", &a, &b, perm, &off,
			   &n) < 4)
			continue;
		if (addr < a || addr >= b)
			continue;
		char *p = line + n;
		while (*p == ' ')
			p++;
		p[strcspn(p, "\n")] = 0;
		*start = a;
		*len = b - a;
		*pgoff = off;
		strcpy(path, p);
		found = 1;
	}
	fclose(f);
	return found;
}

static void warn_count(void *ctx, int degraded, const char *msg)
{
	(void)msg;
	if (degraded)
		++*(int *)ctx;
}

static void test_self(void)
{
	uint64_t fn = (uint64_t)(uintptr_t)symz_test_target, start = 0, len = 0, pgoff = 0;
	char path[4400] = "";
	T_CHECK(self_map(fn, &start, &len, &pgoff, path), "found our own text mapping");
	char in[4500], out[4500];
	snprintf(in, sizeof in, "%s/in.mt", dir);
	snprintf(out, sizeof out, "%s/out.mt", dir);
	int fd = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int err;
	mtev_writer *w = mtev_writer_alloc(fd, "test", MTEV_F_SPANS, &err);
	struct mtev_rec r = {.kind = MTEV_MAP};
	r.map.pid = (uint32_t)getpid();
	r.map.start = start;
	r.map.len = len;
	r.map.pgoff = pgoff;
	r.map.path = mtev_cstr(path);
	mtev_write(w, &r);
	struct mtev_rec t = {.kind = MTEV_THREAD};
	t.thread.pid = t.thread.tid = (uint32_t)getpid();
	mtev_write(w, &t);
	struct mtev_rec s = {.kind = MTEV_SPAN};
	s.span.tid = (uint32_t)getpid();
	s.span.begin = 10;
	s.span.end = 20;
	s.span.func = fn;
	mtev_write(w, &s);
	s.span.begin = 30;
	s.span.end = 40;
	s.span.func = 0;
	s.span.name = mtev_cstr("[syscall]");
	mtev_write(w, &s);
	mtev_writer_finish(w);
	mtev_writer_free(w);
	close(fd);

	int nwarn = 0;
	for (int pass = 0; pass < 2; pass++) {
		struct symz_opts o = {0};
		o.timeout_ms = 10000;
		o.warn = warn_count;
		o.warn_ctx = &nwarn;
		if (pass)
			o.symbolizer = ""; /* ELF symbol table only */
		uint8_t *buf;
		size_t n;
		FILE *f = fopen(in, "rb");
		fseek(f, 0, SEEK_END);
		n = (size_t)ftell(f);
		rewind(f);
		buf = malloc(n);
		T_CHECK(fread(buf, 1, n, f) == n, "read input");
		fclose(f);
		int ofd = open(out, O_RDWR | O_CREAT | O_TRUNC, 0644);
		struct symz_stats st;
		int rc = symz_stream(buf, n, ofd, &o, &st);
		T_CHECK(rc == 0, "pass %d: symz_stream ok (%s)", pass, st.err);
		T_CHECK(st.degraded == pass, "pass %d: degraded %d", pass, st.degraded);
		lseek(ofd, 0, SEEK_SET);
		mtev_reader *rd = mtev_reader_alloc(ofd, &err);
		struct mtev_rec x;
		int got_name = 0, got_sys = 0, got_sym = 0;
		while (rd && mtev_read(rd, &x) > 0) {
			if (x.kind == MTEV_SPAN && x.span.func == fn && x.span.name.len == 16 &&
			    !memcmp(x.span.name.p, "symz_test_target", 16))
				got_name = 1;
			if (x.kind == MTEV_SPAN && x.span.name.len == 9 && !memcmp(x.span.name.p, "[syscall]", 9))
				got_sys = 1;
			if (x.kind == MTEV_SYMBOL && x.symbol.addr == fn && x.symbol.entry == fn &&
			    x.symbol.nframes >= 1)
				got_sym = 1;
		}
		mtev_reader_free(rd);
		close(ofd);
		free(buf);
		T_CHECK(got_name, "pass %d: the span of symz_test_target is named after it", pass);
		T_CHECK(got_sys, "pass %d: a synthetic span keeps its name", pass);
		T_CHECK(got_sym, "pass %d: a symbol record for its entry", pass);
	}
	T_CHECK(nwarn == 1, "one degrading warning, for the pass without a symbolizer (%d)", nwarn);
}

static void test_elf_nosyms(void)
{
	struct elfinfo a, b;
	int ra = elfinfo_load(&a, "/proc/self/exe"), rb = elfinfo_load_nosyms(&b, "/proc/self/exe");
	T_CHECK(ra == 0 && rb == 0, "elfinfo_load and elfinfo_load_nosyms of ourselves");
	T_CHECK(a.nsyms > 0 && b.nsyms == 0 && a.has_symtab == b.has_symtab,
		"nosyms: no symbols, same has_symtab (%zu)", a.nsyms);
	T_CHECK(a.nsegs == b.nsegs && !memcmp(a.segs, b.segs, a.nsegs * sizeof *a.segs) &&
			a.build_id_len == b.build_id_len &&
			!memcmp(a.build_id, b.build_id, a.build_id_len) && a.is_pie == b.is_pie,
		"nosyms: same segments and build-id");
	elfinfo_fini(&a);
	elfinfo_fini(&b);
}

static void test_bad_input(void)
{
	struct symz_opts o = {0};
	struct symz_stats st;
	int rc = symz_stream("garbage", 7, -1, &o, &st);
	T_CHECK(rc == -SYMZ_EINPUT && st.err[0], "garbage: -SYMZ_EINPUT (%s)", st.err);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_llvmsym();
	test_self();
	test_bad_input();
	test_elf_nosyms();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		T_CHECK(0, "cleanup");
	return T_DONE();
}
