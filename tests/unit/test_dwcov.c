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

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	char exe[256], buf[512], cmd[1024];
	FILE *f;
	snprintf(buf, sizeof buf, "%s/d.c", dir);
	if (!(f = fopen(buf, "w")))
		return 1;
	fputs("static inline int sq(int x) { return x * x; }\n"
	      "int f_debug(int x) { return sq(x) + sq(x + 1); }\n", f);
	fclose(f);
	snprintf(buf, sizeof buf, "%s/p.c", dir);
	if (!(f = fopen(buf, "w")))
		return 1;
	fputs("int f_debug(int);\n"
	      "int f_plain(int x) { return f_debug(x) * 3; }\n"
	      "int main(int c, char **v) { (void)v; return f_plain(c); }\n", f);
	fclose(f);

	/* -g for d.c only, in each DWARF version; -gz: compressed sections */
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

	/* what cannot be read counts as covered */
	struct dwcov dc;
	dwcov_load(&dc, "/nonexistent/file", NULL, 0);
	T_CHECK(dc.state == DWCOV_ALL && dwcov_any(&dc, 0, 1), "a missing file: all covered");
	dwcov_fini(&dc);
	snprintf(buf, sizeof buf, "%s/d.c", dir);
	dwcov_load(&dc, buf, NULL, 0);
	T_CHECK(dc.state == DWCOV_ALL, "not ELF: all covered");
	dwcov_fini(&dc);

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		T_CHECK(0, "cleanup");
	return T_DONE();
}
