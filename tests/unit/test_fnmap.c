/* fnmap_pointer_entry against the unstripped file's own symbol table: a
 * stripped shared object (gcc -shared, strip -s) names its crtstuff
 * functions (__do_global_dtors_aux, frame_dummy) and _fini by no symbol and
 * no FDE; the loader calls them through .fini_array, .init_array and DT_FINI.
 * A frame revealed inside one (a snapshot of a process's exit: the 2,000-
 * instruction windows at the end of the corpus' cxx-except and
 * cxx-containers, inside libstdc++'s __do_global_dtors_aux) is named by that
 * entry, which the unstripped .symtab confirms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfinfo.h"
#include "fnmap.h"
#include "t.h"

#define BASE 0x7f0000000000ull

int main(void)
{
	char dir[] = "/tmp/mt-fnmap.XXXXXX";
	if (!mkdtemp(dir)) {
		printf("Bail out! temp dir\n");
		return 1;
	}
	char full[256], strp[256], cmd[1024];
	snprintf(full, sizeof full, "%s/l.so", dir);
	snprintf(strp, sizeof strp, "%s/ls.so", dir);
	snprintf(cmd, sizeof cmd,
		 "printf 'int lib_f(int x) { return x * 3; }\\n' >'%s/l.c' && "
		 "cc -shared -fPIC -O2 -o '%s' '%s/l.c' && strip -s -o '%s' '%s'",
		 dir, full, dir, strp, full);
	T_CHECK(system(cmd) == 0, "cc -shared, strip -s");

	/* the oracle: the unstripped file's .symtab */
	struct elfinfo u, s;
	int ru = elfinfo_load(&u, full), rs = elfinfo_load(&s, strp);
	T_CHECK(ru == 0 && rs == 0 && !s.has_symtab, "both load, the copy is stripped");
	if (ru || rs)
		return T_DONE();
	const char *names[] = {"__do_global_dtors_aux", "frame_dummy", "_fini"};
	struct fnmap *m = fnmap_alloc();
	struct stat st;
	T_CHECK(m && stat(strp, &st) == 0 &&
			!fnmap_add_map(m, 1, BASE, ((uint64_t)st.st_size + 4095) & ~4095ull, 0,
				       strp, strlen(strp), s.build_id, s.build_id_len) &&
			!fnmap_add_thread(m, 1, 1),
		"map the stripped copy at %#llx", BASE);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		const struct elf_sym *x = elfinfo_find(&u, names[i]);
		T_CHECK(x != NULL, "unstripped: %s", names[i]);
		if (!x)
			continue;
		int64_t off = elfinfo_vaddr_to_offset(&s, x->addr);
		uint64_t rt = BASE + (uint64_t)off, in = rt + (x->size > 4 ? 4 : 1), e = 0;
		struct fn_info fi;
		/* what the symbols say: nothing (before: the frame was named by
		 * the address itself) */
		int lk = fnmap_lookup(m, 1, in, &fi);
		T_CHECK(!lk || fi.entry != rt, "stripped: no symbol or FDE starts %s", names[i]);
		T_CHECK(off >= 0 && fnmap_pointer_entry(m, 1, in, &e) && e == rt,
			"stripped: %s + %llu -> entry %#llx (the .symtab's %#llx)", names[i],
			(unsigned long long)(in - rt), (unsigned long long)e,
			(unsigned long long)rt);
	}
	/* a function a symbol names is fnmap_lookup's, never an array entry's */
	const struct elf_sym *f = elfinfo_find(&s, "lib_f");
	uint64_t e = 0;
	T_CHECK(f && !fnmap_pointer_entry(m, 1, BASE + (uint64_t)elfinfo_vaddr_to_offset(&s, f->addr) + 1, &e),
		"lib_f (.dynsym) is no pointer entry's");
	fnmap_free(m);
	elfinfo_fini(&u);
	elfinfo_fini(&s);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	T_CHECK(system(cmd) == 0, "clean up");
	return T_DONE();
}
