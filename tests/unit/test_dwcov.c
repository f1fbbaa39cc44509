/* dwcov against the compiler's own choice: a program linked from one file
 * compiled with -g and one without, in every form the debug information
 * can take (DWARF 4 and 5, compressed, stripped, in a separate file found
 * by build-id or by .gnu_debuglink, without .debug_aranges).  The function
 * of the -g file must be covered, the other one and the C runtime's code
 * not, unless the coverage cannot be known (then everything is). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dwcov.h"
#include "elfinfo.h"
#include "t.h"

static char dir[] = "/tmp/mt-dwcov-XXXXXX";

/* Runs "cd DIR && @cmd"; 0 when it exited 0. */
static int in_dir(const char *cmd)
{
	char buf[4096];
	snprintf(buf, sizeof buf, "cd %s && %s", dir, cmd);
	return system(buf);
}

/* The file ranges of function @name in @exe, from its symbol table. */
static int fn_range(const char *exe, const char *name, uint64_t *lo, uint64_t *hi)
{
	struct elfinfo ei;
	if (elfinfo_load(&ei, exe))
		return -1;
	const struct elf_sym *s = elfinfo_find(&ei, name);
	int r = s && s->size ? 0 : -1;
	if (!r) {
		*lo = s->addr;
		*hi = s->addr + s->size;
	}
	elfinfo_fini(&ei);
	return r;
}

/* Checks @exe's coverage: @state, and when it has ranges, that f_debug is
 * covered and f_plain and _start are not.  The functions' addresses come
 * from @symexe (the unstripped program). */
static void check(const char *what, const char *exe, const char *symexe, int state)
{
	struct dwcov dc;
	uint8_t id[20];
	int idlen = elf_read_build_id(exe, id);
	dwcov_load(&dc, exe, id, idlen > 0 ? (size_t)idlen : 0);
	T_CHECK(dc.state == state, "%s: coverage %s (want %s)", what, dwcov_state_name(dc.state),
		dwcov_state_name(state));
	uint64_t dlo, dhi, plo, phi, slo, shi;
	if (fn_range(symexe, "f_debug", &dlo, &dhi) || fn_range(symexe, "f_plain", &plo, &phi) ||
	    fn_range(symexe, "_start", &slo, &shi)) {
		T_CHECK(0, "%s: symbols of the test program", what);
		dwcov_fini(&dc);
		return;
	}
	int want_d = state != DWCOV_NONE, want_p = state == DWCOV_ALL;
	T_CHECK(dwcov_any(&dc, dlo, dhi) == want_d, "%s: f_debug (-g) %s", what,
		want_d ? "covered" : "not covered");
	T_CHECK(dwcov_any(&dc, plo, phi) == want_p, "%s: f_plain (no -g) %s", what,
		want_p ? "covered" : "not covered");
	T_CHECK(dwcov_any(&dc, slo, shi) == want_p, "%s: _start (crt1.o) %s", what,
		want_p ? "covered" : "not covered");
	/* the ends: a range touching f_debug's last byte, one just after it */
	if (state == DWCOV_RANGES) {
		T_CHECK(dwcov_any(&dc, dhi - 1, dhi), "%s: f_debug's last byte covered", what);
		T_CHECK(dwcov_any(&dc, dlo, dlo + 1), "%s: f_debug's first byte covered", what);
	}
	dwcov_fini(&dc);
}

/* ---- inline ranges, against llvm-dwarfdump ---- */

struct pairs {
	uint64_t *v;
	size_t n, cap;
};

static int pairs_add(struct pairs *p, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return 0;
	if (p->n + 2 > p->cap) {
		size_t nc = p->cap ? 2 * p->cap : 256;
		uint64_t *nv = realloc(p->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		p->v = nv;
		p->cap = nc;
	}
	p->v[p->n++] = lo;
	p->v[p->n++] = hi;
	return 0;
}

static int cmp_pr(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* sorted, overlapping or touching pairs merged (dwcov's normal form) */
static void pairs_merge(struct pairs *p)
{
	size_t np = p->n / 2, w = 0;
	qsort(p->v, np, 2 * sizeof *p->v, cmp_pr);
	for (size_t i = 0; i < np; i++) {
		if (w && p->v[2 * i] <= p->v[2 * w - 1]) {
			if (p->v[2 * i + 1] > p->v[2 * w - 1])
				p->v[2 * w - 1] = p->v[2 * i + 1];
			continue;
		}
		p->v[2 * w] = p->v[2 * i];
		p->v[2 * w + 1] = p->v[2 * i + 1];
		w++;
	}
	p->n = 2 * w;
}

/* The ranges of every DW_TAG_inlined_subroutine of @exe as llvm-dwarfdump
 * prints them (DW_AT_low_pc/DW_AT_high_pc, high_pc shown absolute, or the
 * "[lo, hi)" lines of DW_AT_ranges), merged.  -1 if it cannot be run. */
static int dump_inline(const char *exe, struct pairs *p)
{
	char cmd[1024], line[1024];
	snprintf(cmd, sizeof cmd, "llvm-dwarfdump --debug-info '%s' 2>/dev/null", exe);
	FILE *f = popen(cmd, "r");
	if (!f)
		return -1;
	int in = 0, in_ranges = 0, n = 0;
	uint64_t lo = 0, hi = 0;
	int have_lo = 0, have_hi = 0;
	for (;;) {
		char *l = fgets(line, sizeof line, f);
		if (!l || strstr(l, "DW_TAG_") || strstr(l, "NULL")) {
			if (in && have_lo && have_hi && pairs_add(p, lo, hi))
				break;
			if (!l)
				break;
			in = strstr(l, "DW_TAG_inlined_subroutine") != NULL;
			n += in;
			have_lo = have_hi = in_ranges = 0;
			continue;
		}
		if (!in)
			continue;
		char *q;
		unsigned long long a, b;
		if ((q = strstr(l, "DW_AT_low_pc")) && sscanf(q, "DW_AT_low_pc (%llx", &a) == 1)
			lo = a, have_lo = 1;
		else if ((q = strstr(l, "DW_AT_low_pc\t(")) && sscanf(q + 14, "%llx", &a) == 1)
			lo = a, have_lo = 1;
		if ((q = strstr(l, "DW_AT_high_pc\t(")) && sscanf(q + 15, "%llx", &a) == 1)
			hi = a, have_hi = 1;
		if (strstr(l, "DW_AT_ranges"))
			in_ranges = 1;
		if (in_ranges && (q = strchr(l, '[')) && sscanf(q, "[%llx, %llx)", &a, &b) == 2 &&
		    pairs_add(p, a, b))
			break;
		if (!strstr(l, "DW_AT_ranges") && strstr(l, "DW_AT_"))
			in_ranges = 0;
	}
	if (pclose(f) != 0 || !n)
		return -1;
	pairs_merge(p);
	return 0;
}

/* dwcov's inline ranges of @exe against llvm-dwarfdump's: the same pairs,
 * and dwcov_inline's slices of the functions f_debug and main. */
static void check_inline(const char *what, const char *exe, const char *dumpexe)
{
	struct pairs want = {0};
	if (dump_inline(dumpexe, &want)) {
		T_CHECK(0, "%s: llvm-dwarfdump shows inlined subroutines", what);
		free(want.v);
		return;
	}
	struct dwcov dc;
	uint8_t id[20];
	int idlen = elf_read_build_id(exe, id);
	dwcov_load(&dc, exe, id, idlen > 0 ? (size_t)idlen : 0);
	T_CHECK(dc.inl_known, "%s: inline ranges known", what);
	int same = dc.inl_known && dc.nir * 2 == want.n &&
		   !memcmp(dc.ir, want.v, want.n * sizeof *want.v);
	T_CHECK(same, "%s: %zu inline ranges, llvm-dwarfdump %zu", what, dc.nir, want.n / 2);
	if (!same && getenv("T_VERBOSE"))
		for (size_t i = 0; i < want.n / 2 || i < dc.nir; i++)
			fprintf(stderr, "  %2zu dwcov %#llx-%#llx  dwarfdump %#llx-%#llx\n", i,
				i < dc.nir ? (unsigned long long)dc.ir[2 * i] : 0ull,
				i < dc.nir ? (unsigned long long)dc.ir[2 * i + 1] : 0ull,
				i < want.n / 2 ? (unsigned long long)want.v[2 * i] : 0ull,
				i < want.n / 2 ? (unsigned long long)want.v[2 * i + 1] : 0ull);
	/* a function's slice: exactly the ranges that meet it */
	uint64_t lo, hi;
	if (!fn_range(dumpexe, "f_debug", &lo, &hi)) {
		const uint64_t *r;
		size_t k = dwcov_inline(&dc, lo, hi, &r), m = 0, first = SIZE_MAX;
		for (size_t i = 0; i < want.n / 2; i++)
			if (want.v[2 * i] < hi && want.v[2 * i + 1] > lo) {
				if (first == SIZE_MAX)
					first = i;
				m++;
			}
		T_CHECK(k == m && m > 0 && (!m || !memcmp(r, want.v + 2 * first, 2 * m * sizeof *r)),
			"%s: f_debug meets %zu inline ranges (want %zu)", what, k, m);
		/* the bitmap: each byte of f_debug, inline or not as llvm-dwarfdump says */
		uint64_t base = 0;
		const uint8_t *bits = dwcov_inline_bits(&dc, lo, hi, &base);
		size_t bad = 0;
		for (uint64_t a = lo; bits && a < hi; a++) {
			int in = 0;
			for (size_t i = 0; i < want.n / 2; i++)
				in |= want.v[2 * i] <= a && a < want.v[2 * i + 1];
			bad += (size_t)(((bits[(a - base) >> 3] >> ((a - base) & 7)) & 1) != in);
		}
		T_CHECK(bits && !bad, "%s: f_debug's inline bitmap (%zu bytes differ)", what, bad);
	}
	dwcov_fini(&dc);
	free(want.v);
}

/* @text into @name in the test directory: 0, or -1 */
static int write_file(const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "w")))
		return -1;
	fputs(text, f);
	return fclose(f) ? -1 : 0;
}

/* d.c (with -g) linked with p.c (without), in each DWARF version: only
 * d.c's units are covered */
static void check_units(void)
{
	char exe[256], cmd[1024];

	/* -gz: compressed sections */
	static const char *flags[] = {"-gdwarf-4", "-gdwarf-5", "-gdwarf-5 -gz"};
	for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
		snprintf(exe, sizeof exe, "%s/prog%zu", dir, i);
		snprintf(cmd, sizeof cmd,
			 "cc -O2 %s -c d.c -o d.o && cc -O2 -g0 -c p.c -o p.o && "
			 "cc -Wl,--build-id -o prog%zu d.o p.o",
			 flags[i], i);
		if (in_dir(cmd) || access(exe, X_OK)) {
			T_CHECK(0, "building the test program with cc %s", flags[i]);
			continue;
		}
		char what[64];
		snprintf(what, sizeof what, "cc %s", flags[i]);
		check(what, exe, exe, DWCOV_RANGES);
	}
}

/* -gsplit-dwarf: the .dwo is not read, so the unit's functions count as
 * inline throughout */
static void check_split_dwarf(const char *what, const char *exe)
{
	struct dwcov dc;
	dwcov_load(&dc, exe, NULL, 0);
	const uint64_t *r;
	size_t k = dwcov_inline(&dc, 0x1000, 0x1001, &r);
	uint64_t lo = 0, hi = 0;
	int got = !fn_range(exe, "f_debug", &lo, &hi);
	size_t kf = got ? dwcov_inline(&dc, lo, hi, &r) : 0;
	T_CHECK(got && kf == 1 && r[0] <= lo && r[1] >= hi,
		"%s: the unit's functions count as inline throughout (%zu, %zu)", what,
		k, kf);
	dwcov_fini(&dc);
}

/* inline ranges: i.c inlines at several depths, from loops (split
 * ranges: DW_AT_ranges) and straight-line code (low_pc/high_pc), in
 * each DWARF version, by gcc and by clang when it is there */
static int check_inline_versions(void)
{
	char exe[256], cmd[1024];

	if (write_file("i.c",
		       "static inline __attribute__((always_inline)) int sq(int x) { return x * x; }\n"
		       "static inline __attribute__((always_inline)) int poly(int x)\n"
		       "{ return sq(x) + 3 * x + (x > 7 ? sq(x - 7) : 1); }\n"
		       "int g_sink(int);\n"
		       "static inline __attribute__((always_inline)) int calls(int x)\n"
		       "{ int y = g_sink(x + 1); if (y > 100) y = poly(y); return y * 7; }\n"
		       "int f_debug(int n)\n"
		       "{ int s = 0; for (int i = 0; i < n; i++) { s += poly(i); if (s & 1) s ^= calls(s); }\n"
		       "  return s + calls(n); }\n"
		       "int g_sink(int x) { __asm__ volatile(\"\" ::: \"memory\"); return x ^ 0x55; }\n"
		       "int main(int c, char **v) { (void)v; return f_debug(c * 1000) & 1; }\n") < 0)
		return -1;
	static const struct {
		const char *cc, *flags;
	} iv[] = {
		{"cc", "-gdwarf-2"},	     {"cc", "-gdwarf-3"},
		{"cc", "-gdwarf-4"},	     {"cc", "-gdwarf-5"},
		{"cc", "-gdwarf-5 -gz"},     {"cc", "-gdwarf-4 -gz=zlib-gnu"},
		{"cc", "-gdwarf-5 -gsplit-dwarf"}, /* the .dwo is not read: unknown */
		{"cc", "-gdwarf-4 -gsplit-dwarf"}, {"clang-14", "-gdwarf-5 -gsplit-dwarf"},
		{"clang-14", "-gdwarf-4"},   {"clang-14", "-gdwarf-5"},
		{"clang-14", "-gdwarf-5 -gz"},
	};
	for (size_t i = 0; i < sizeof iv / sizeof *iv; i++) {
		char what[96];
		snprintf(what, sizeof what, "inline ranges, %s %s", iv[i].cc, iv[i].flags);
		snprintf(cmd, sizeof cmd, "command -v %s >/dev/null", iv[i].cc);
		if (in_dir(cmd)) {
			printf("ok %d - # SKIP %s: no %s\n", ++t_n, what, iv[i].cc);
			continue;
		}
		snprintf(exe, sizeof exe, "%s/iprog%zu", dir, i);
		snprintf(cmd, sizeof cmd, "%s -O2 %s -Wl,--build-id -o iprog%zu i.c", iv[i].cc,
			 iv[i].flags, i);
		if (in_dir(cmd) || access(exe, X_OK)) {
			T_CHECK(0, "building the inline test program: %s", cmd);
			continue;
		}
		if (strstr(iv[i].flags, "split")) {
			check_split_dwarf(what, exe);
			continue;
		}
		check_inline(what, exe, exe);
		if (strstr(iv[i].flags, "-gz")) { /* the oracle reads the uncompressed copy */
			snprintf(cmd, sizeof cmd, "objcopy --decompress-debug-sections iprog%zu iprog%zu.u",
				 i, i);
			char u[300];
			snprintf(u, sizeof u, "%s.u", exe);
			if (!in_dir(cmd))
				check_inline(what, exe, u);
		}
	}
	return 0;
}

/* a form the reader does not know, in the DIEs of the inlined
 * subroutines (their abbreviation's first attribute, patched to 0x7f):
 * that unit's code counts as inline throughout, never as none */
static void check_bad_form(void)
{
	char buf[512];
	FILE *f;

	if (!in_dir("objcopy --dump-section .debug_abbrev=ab.bin iprog2")) {
		snprintf(buf, sizeof buf, "%s/ab.bin", dir);
		f = fopen(buf, "r+b");
		uint8_t ab[65536];
		size_t n = f ? fread(ab, 1, sizeof ab, f) : 0, hit = 0;
		/* code, DW_TAG_inlined_subroutine, children, DW_AT_abstract_origin, DW_FORM_ref4 */
		for (size_t i = 0; i + 5 <= n; i++)
			if (ab[i] && ab[i] < 0x80 && ab[i + 1] == 0x1d && ab[i + 2] <= 1 &&
			    ab[i + 3] == 0x31 && ab[i + 4] == 0x13) {
				ab[i + 4] = 0x7f;
				hit++;
			}
		if (f) {
			rewind(f);
			hit = fwrite(ab, 1, n, f) == n ? hit : 0;
			fclose(f);
		}
		T_CHECK(hit && !in_dir("objcopy --update-section .debug_abbrev=ab.bin iprog2 badform"),
			"patching a form in .debug_abbrev (%zu abbreviations)", hit);
		struct dwcov dc;
		snprintf(buf, sizeof buf, "%s/badform", dir);
		dwcov_load(&dc, buf, NULL, 0);
		uint64_t lo = 0, hi = 0;
		const uint64_t *r = NULL;
		int got = !fn_range(buf, "f_debug", &lo, &hi);
		size_t k = got ? dwcov_inline(&dc, lo, hi, &r) : 0;
		T_CHECK(got && k == 1 && r[0] <= lo && r[1] >= hi,
			"an unknown form: f_debug counts as inline throughout (%zu ranges)", k);
		dwcov_fini(&dc);
	} else {
		T_CHECK(0, "objcopy --dump-section");
	}

}

/* the test programs of the end-to-end tests, when built */
static void check_programs(void)
{
	static const char *progs[] = {"build/programs/inline", "build/programs/sym_inline",
				      "build/programs/sym_cxx"};
	for (size_t i = 0; i < sizeof progs / sizeof *progs; i++) {
		if (access(progs[i], R_OK))
			continue;
		struct pairs want = {0};
		struct dwcov dc;
		dwcov_load(&dc, progs[i], NULL, 0);
		int ok = !dump_inline(progs[i], &want);
		T_CHECK(ok && dc.inl_known && dc.nir * 2 == want.n &&
				!memcmp(dc.ir, want.v, want.n * sizeof *want.v),
			"inline ranges of %s: %zu, llvm-dwarfdump %zu", progs[i], dc.nir, want.n / 2);
		dwcov_fini(&dc);
		free(want.v);
	}

}

/* prog0 without DWARF, without .debug_aranges, its DWARF in a separate
 * file (by build-id, by .gnu_debuglink) */
static void check_debug_files(void)
{
	char exe[256], buf[512], cmd[1024];

	snprintf(exe, sizeof exe, "%s/prog0", dir);

	/* no DWARF at all */
	T_CHECK(!in_dir("objcopy --strip-debug prog0 nodebug"), "objcopy --strip-debug");
	snprintf(buf, sizeof buf, "%s/nodebug", dir);
	check("objcopy --strip-debug", buf, exe, DWCOV_NONE);

	/* .debug_aranges removed: the units' ranges are not known */
	T_CHECK(!in_dir("objcopy --remove-section .debug_aranges prog0 noaranges"),
		"objcopy --remove-section");
	snprintf(buf, sizeof buf, "%s/noaranges", dir);
	check("no .debug_aranges", buf, exe, DWCOV_ALL);

	/* DWARF in a separate file found by build-id ($MT_DEBUGINFO_DIR) */
	uint8_t id[20];
	char hex[41];
	int idlen = elf_read_build_id(exe, id);
	T_CHECK(idlen == 20, "the test program has a build-id");
	buildid_hex(hex, id, idlen > 0 ? (size_t)idlen : 0);
	snprintf(cmd, sizeof cmd,
		 "mkdir -p dbg/.build-id/%.2s && objcopy --only-keep-debug prog0 "
		 "dbg/.build-id/%.2s/%s.debug && objcopy --strip-debug prog0 split",
		 hex, hex, hex + 2);
	T_CHECK(!in_dir(cmd), "objcopy --only-keep-debug");
	snprintf(buf, sizeof buf, "%s/dbg", dir);
	setenv("MT_DEBUGINFO_DIR", buf, 1);
	snprintf(buf, sizeof buf, "%s/split", dir);
	check("separate debug file by build-id", buf, exe, DWCOV_RANGES);
	setenv("MT_DEBUGINFO_DIR", "", 1);
	check("separate debug file, not looked for", buf, exe, DWCOV_NONE);

	/* ... and by .gnu_debuglink: next to it, in .debug/ next to it, gone */
	T_CHECK(!in_dir("objcopy --only-keep-debug prog0 prog0.dbg && "
			"objcopy --strip-debug --add-gnu-debuglink=prog0.dbg prog0 linked && "
			"mkdir sub sub/.debug && objcopy --only-keep-debug prog0 sub/.debug/p.dbg && "
			"objcopy --strip-debug prog0 sub/linked2 && "
			"(cd sub/.debug && objcopy --add-gnu-debuglink=p.dbg ../linked2) && "
			"cp prog0.dbg gone.dbg && "
			"objcopy --strip-debug --add-gnu-debuglink=gone.dbg prog0 gone && rm gone.dbg"),
		"objcopy --add-gnu-debuglink");
	snprintf(buf, sizeof buf, "%s/linked", dir);
	check(".gnu_debuglink next to it", buf, exe, DWCOV_RANGES);
	snprintf(buf, sizeof buf, "%s/sub/linked2", dir);
	check(".gnu_debuglink in .debug/", buf, exe, DWCOV_RANGES);
	snprintf(buf, sizeof buf, "%s/gone", dir);
	check(".gnu_debuglink to a missing file", buf, exe, DWCOV_NONE);
}

/* what cannot be read counts as covered */
static void check_unreadable(void)
{
	char buf[512];
	struct dwcov dc;

	dwcov_load(&dc, "/nonexistent/file", NULL, 0);
	T_CHECK(dc.state == DWCOV_ALL && dwcov_any(&dc, 0, 1), "a missing file: all covered");
	dwcov_fini(&dc);
	snprintf(buf, sizeof buf, "%s/d.c", dir);
	dwcov_load(&dc, buf, NULL, 0);
	T_CHECK(dc.state == DWCOV_ALL, "not ELF: all covered");
	dwcov_fini(&dc);
}

int main(void)
{
	char cmd[1024];

	if (!mkdtemp(dir))
		return 1;
	if (write_file("d.c", "static inline int sq(int x) { return x * x; }\n"
			      "int f_debug(int x) { return sq(x) + sq(x + 1); }\n") < 0 ||
	    write_file("p.c", "int f_debug(int);\n"
			      "int f_plain(int x) { return f_debug(x) * 3; }\n"
			      "int main(int c, char **v) { (void)v; return f_plain(c); }\n") < 0)
		return 1;
	check_units();
	if (check_inline_versions() < 0)
		return 1;
	check_bad_form();
	check_programs();
	check_debug_files();
	check_unreadable();

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		T_CHECK(0, "cleanup");
	return T_DONE();
}
