/* elfinfo against independent oracles: this test's own binary, the dynamic
 * loader's view of it (dladdr), and readelf's build-id. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfinfo.h"
#include "t.h"

__attribute__((noinline)) int elfinfo_probe_function(int x);
__attribute__((noinline)) int elfinfo_probe_function(int x)
{
	return x * 3 + 1;
}

static uintptr_t load_base(void)
{
	Dl_info di;
	if (!dladdr((void *)elfinfo_probe_function, &di))
		return 0;
	return (uintptr_t)di.dli_fbase;
}

/* A stripped copy whose symbols live in a separate debug file found by
 * build-id (objcopy --only-keep-debug, as Debian's -dbg packages). */
static void check_stripped(const struct elfinfo *ei, const char *exe, uint64_t va,
			   const char *hex)
{
	int r;
	char dir[] = "/tmp/mt-elfinfo.XXXXXX";
	T_CHECK(mkdtemp(dir) != NULL, "temp dir");
	char stripped[4200], dbg[4300], cmd2[20000];
	snprintf(stripped, sizeof stripped, "%s/stripped", dir);
	snprintf(dbg, sizeof dbg, "%s/.build-id/%.2s/%s.debug", dir, hex, hex + 2);
	snprintf(cmd2, sizeof cmd2,
		 "mkdir -p '%s/.build-id/%.2s' && objcopy --only-keep-debug '%s' '%s' && "
		 "strip -s -o '%s' '%s' && objcopy --strip-all /bin/true '%s/other'",
		 dir, hex, exe, dbg, stripped, exe, dir);
	T_CHECK(system(cmd2) == 0, "objcopy/strip: %s", cmd2);
	struct elfinfo st;
	setenv("MT_DEBUGINFO_DIR", "", 1);
	r = elfinfo_load(&st, stripped);
	const struct elf_sym *x = r ? NULL : elfinfo_lookup(&st, va);
	T_CHECK(r == 0 && !st.has_symtab && !st.debug_path &&
			!(x && !strcmp(x->name, "elfinfo_probe_function")),
		"stripped, no debug dir: no .symtab, the function is not named");
	int lookup_ok = r == 0;
	/* without a debug file: the function's start and size from its
	 * .eh_frame FDE, checked against the unstripped symbol table */
	const struct elf_sym *u = elfinfo_lookup(ei, va);
	x = lookup_ok ? elfinfo_lookup(&st, va + 3) : NULL;
	T_CHECK(x && u && x->is_fde && x->addr == u->addr && x->size == u->size,
		"stripped, no debug file: FDE range %s [%#llx, +%llu) = symbol [%#llx, +%llu)",
		x ? x->name : "(none)", x ? (unsigned long long)x->addr : 0ull,
		x ? (unsigned long long)x->size : 0ull, u ? (unsigned long long)u->addr : 0ull,
		u ? (unsigned long long)u->size : 0ull);
	if (!r)
		elfinfo_fini(&st);
	snprintf(cmd2, sizeof cmd2, "/nonexistent:%s", dir);
	setenv("MT_DEBUGINFO_DIR", cmd2, 1);
	r = elfinfo_load(&st, stripped);
	x = r ? NULL : elfinfo_lookup(&st, va + 3);
	T_CHECK(r == 0 && st.has_symtab && st.debug_path && !strcmp(st.debug_path, dbg),
		"stripped: symbols from %s", dbg);
	T_CHECK(x && !strcmp(x->name, "elfinfo_probe_function") && x->addr == va,
		"stripped + debug file: the function is named again");
	T_CHECK(r == 0 && st.nsyms >= ei->nsyms, "as many symbols as the unstripped file (%zu, %zu)",
		r ? 0 : st.nsyms, ei->nsyms);
	if (!r)
		elfinfo_fini(&st);
	r = elfinfo_load_nosyms(&st, stripped);
	T_CHECK(r == 0 && st.has_symtab && st.nsyms == 0, "nosyms: has_symtab says a debug file exists");
	if (!r)
		elfinfo_fini(&st);
	/* a debug file of another build (other build-id inside) is not used */
	snprintf(cmd2, sizeof cmd2, "cp '%s/other' '%s'", dir, dbg);
	T_CHECK(system(cmd2) == 0, "replace the debug file");
	r = elfinfo_load(&st, stripped);
	T_CHECK(r == 0 && !st.has_symtab && !st.debug_path, "a debug file with another build-id is ignored");
	if (!r)
		elfinfo_fini(&st);
	unsetenv("MT_DEBUGINFO_DIR");
	snprintf(cmd2, sizeof cmd2, "rm -rf '%s'", dir);
	T_CHECK(system(cmd2) == 0, "cleanup");
}

/* untyped labels: one that the code before it falls into (after a
 * call) is not a function start; one after a ret is */
static void check_labels(void)
{
	char dir[] = "/tmp/mt-elfinfo.XXXXXX";
	T_CHECK(mkdtemp(dir) != NULL, "temp dir");
	char cmd3[600], so[300];
	snprintf(so, sizeof so, "%s/l.so", dir);
	snprintf(cmd3, sizeof cmd3,
		 "printf '.text\n.globl la, lb, lc, ld\nla: call lc\nlb: ret\nlc: ret\nnop\nld: jmp la\n' > %s/l.s && "
		 "cc -shared -nostdlib -o %s %s/l.s",
		 dir, so, dir);
	T_CHECK(system(cmd3) == 0, "assemble four labels into %s", so);
	struct elfinfo li;
	int lr = elfinfo_load(&li, so);
	const struct elf_sym *la = lr ? NULL : elfinfo_find(&li, "la");
	const struct elf_sym *lc = lr ? NULL : elfinfo_find(&li, "lc");
	const struct elf_sym *ld = lr ? NULL : elfinfo_find(&li, "ld");
	T_CHECK(la && la->is_label && !elfinfo_find(&li, "lb"), "lb (after a call) is dropped");
	const struct elf_sym *in = la ? elfinfo_lookup(&li, la->addr + 5) : NULL;
	T_CHECK(in && in == la, "the address of lb is in la");
	T_CHECK(lc && ld && elfinfo_lookup(&li, lc->addr) == lc && elfinfo_lookup(&li, ld->addr) == ld,
		"lc (after ret) and ld (after ret; nop) are function starts");
	if (!lr)
		elfinfo_fini(&li);
	snprintf(cmd3, sizeof cmd3, "rm -rf '%s'", dir);
	T_CHECK(system(cmd3) == 0, "cleanup");
}

/* C++ landing pads (elfinfo_landing_pad) against the compiler's own LSDA:
 * tests/programs/exact/except.cc (throws, cleanups, catches, a rethrow; at
 * -O2 the pads sit in .cold parts, each part with its own LSDA) built with
 * g++ -S at -O0 and -O2, then assembled keeping the local labels (-Wa,-L):
 * every call-site record of the assembly text (.LEHB start, .LEHE end, the
 * pad's label or 0) gives the address where the call range begins and the
 * pad's address, which the file's bytes must give back. */
static void check_landing_pads(void)
{
	char dir[] = "/tmp/mt-elfinfo.XXXXXX";
	T_CHECK(mkdtemp(dir) != NULL, "temp dir");
	char cmd[4096], exe[64], line[200];
	for (int o = 0; o <= 2; o += 2) {
		snprintf(exe, sizeof exe, "%s/x%d", dir, o);
		snprintf(cmd, sizeof cmd,
			 "g++ -O%d -S -o %s.s tests/programs/exact/except.cc && "
			 "g++ -no-pie -Wa,-L -o %s %s.s && nm %s > %s.nm && "
			 "awk 'FNR == NR { a[$3] = $1; next } /^\\.LLSDACSB/ { f = 1; n = 0; next } "
			 "/^\\.LLSDACSE/ { f = 0 } f && $1 == \".uleb128\" { n++; split($2, b, \"-\"); "
			 "if (n %% 4 == 1) s = b[1]; if (n %% 4 == 3) print a[s], b[1] == \"0\" ? 0 : a[b[1]] }' "
			 "%s.nm %s.s",
			 o, exe, exe, exe, exe, exe, exe, exe);
		FILE *p = popen(cmd, "r");
		struct elfinfo li;
		int r = -1, nrec = 0, npad = 0, bad = 0;
		static char raw[4 << 20];
		size_t n = 0;
		while (p && fgets(line, sizeof line, p)) {
			unsigned long long at, want, pad = 1;
			if (sscanf(line, "%llx %llx", &at, &want) != 2) {
				bad++;
				continue;
			}
			if (r < 0 && (r = elfinfo_load(&li, exe)) == 0) {
				FILE *f = fopen(exe, "rb");
				n = f ? fread(raw, 1, sizeof raw, f) : 0;
				if (f)
					fclose(f);
			}
			uint64_t got = 1;
			int k = r || !n ? -2 : elfinfo_landing_pad(&li, raw, n, at, &got);
			pad = got;
			nrec++;
			npad += want != 0;
			if (k || pad != want) {
				bad++;
				T_CHECK(0, "-O%d: the call at %#llx: pad %#llx (%d), the compiler's %#llx", o,
					at, pad, k, want);
			}
		}
		if (p)
			pclose(p);
		T_CHECK(nrec >= 8 && npad >= 4 && !bad,
			"-O%d: %d call-site records (%d with a pad) of the compiler's LSDA read back", o,
			nrec, npad);
		if (!r) {
			/* main has no handler at -O0 (no LSDA, no pad); an
			 * address in no FDE: unknown */
			const struct elf_sym *m = elfinfo_find(&li, "main");
			uint64_t pad = 1;
			if (o == 0)
				T_CHECK(m && elfinfo_landing_pad(&li, raw, n, m->addr + 1, &pad) == 0 &&
						pad == 0,
					"no landing pad in main");
			T_CHECK(elfinfo_landing_pad(&li, raw, n, 0x10, &pad) == -1, "no FDE: unknown");
			elfinfo_fini(&li);
		}
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	T_CHECK(system(cmd) == 0, "cleanup");
}

int main(void)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n < 0)
		return 1;
	exe[n] = 0;
	struct elfinfo ei;
	int r = elfinfo_load(&ei, exe);
	T_CHECK(r == 0, "load %s", exe);
	if (r)
		return T_DONE();

	/* dli_fbase is the load address of the lowest segment; for a non-PIE it is
	 * the ELF address itself, so subtract only for PIE */
	uintptr_t base = ei.is_pie ? load_base() : 0;
	uint64_t va = (uint64_t)((uintptr_t)elfinfo_probe_function - base);
	const struct elf_sym *s = elfinfo_lookup(&ei, va);
	T_CHECK(s && !strcmp(s->name, "elfinfo_probe_function"), "lookup of a function's own address: %s",
		s ? s->name : "(none)");
	s = elfinfo_lookup(&ei, va + 3);
	T_CHECK(s && !strcmp(s->name, "elfinfo_probe_function"), "lookup inside the function");
	s = elfinfo_find(&ei, "main");
	T_CHECK(s && s->addr == (uint64_t)((uintptr_t)main - base), "find main by name");

	/* a call to a libc function goes through a PLT stub in this binary */
	int plt = 0;
	for (size_t i = 0; i < ei.nsyms; i++)
		plt += ei.syms[i].is_plt && strstr(ei.syms[i].name, "@plt") != NULL;
	T_CHECK(plt > 0, "PLT stubs are named (%d found)", plt);

	/* segments: the function's address maps to a file offset whose bytes are
	 * the function's bytes in memory */
	int64_t off = elfinfo_vaddr_to_offset(&ei, va);
	int ok = 0;
	if (off >= 0) {
		FILE *f = fopen(exe, "rb");
		unsigned char b[16];
		if (f && fseek(f, off, SEEK_SET) == 0 && fread(b, 1, 16, f) == 16)
			ok = !memcmp(b, (void *)elfinfo_probe_function, 16);
		if (f)
			fclose(f);
	}
	T_CHECK(ok, "vaddr_to_offset gives the function's bytes");
	T_CHECK(off >= 0 && elfinfo_offset_to_vaddr(&ei, (uint64_t)off) == (int64_t)va, "offset_to_vaddr inverts it");

	/* build-id agrees with readelf */
	char cmd[4200], line[256], hex[41];
	snprintf(cmd, sizeof cmd, "readelf -n '%s' | sed -n 's/.*Build ID: *//p'", exe);
	FILE *p = popen(cmd, "r");
	line[0] = 0;
	if (p && fgets(line, sizeof line, p))
		line[strcspn(line, "\n")] = 0;
	if (p)
		pclose(p);
	buildid_hex(hex, ei.build_id, ei.build_id_len);
	T_CHECK(ei.build_id_len == 20 && !strcmp(hex, line), "build-id %s equals readelf's %s", hex, line);
	uint8_t id2[20];
	T_CHECK(elf_read_build_id(exe, id2) == 20 && !memcmp(id2, ei.build_id, 20), "elf_read_build_id agrees");

	check_stripped(&ei, exe, va, hex);
	check_labels();
	check_landing_pads();

	/* errors */
	struct elfinfo bad;
	T_CHECK(elfinfo_load(&bad, "/nonexistent/x") < 0, "missing file is an error");
	T_CHECK(elfinfo_load(&bad, "/etc/hostname") < 0, "a text file is not ELF");
	elfinfo_fini(&ei);
	return T_DONE();
}
