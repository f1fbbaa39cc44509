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

	/* errors */
	struct elfinfo bad;
	T_CHECK(elfinfo_load(&bad, "/nonexistent/x") < 0, "missing file is an error");
	T_CHECK(elfinfo_load(&bad, "/etc/hostname") < 0, "a text file is not ELF");
	elfinfo_fini(&ei);
	return T_DONE();
}
