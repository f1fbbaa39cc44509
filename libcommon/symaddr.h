/* Where a function of a running process is: ELF symbol -> runtime address,
 * through the PT_LOAD segment that holds it and the process's file mappings
 * (/proc/PID/maps).  The same rule serves non-PIE executables, PIE executables
 * and shared libraries: runtime = map.start + (file_offset - map.offset). */
#ifndef MT_SYMADDR_H
#define MT_SYMADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct symaddr_map {
	uint64_t start, end, offset;
	char perms[5];
	char *path; /* "" for anonymous mappings */
};

struct symaddr_maps {
	struct symaddr_map *v;
	size_t n;
};

/* Reads /proc/PID/maps.  0, or -errno (-ENOENT: no such process, -EACCES). */
int symaddr_maps_read(struct symaddr_maps *m, pid_t pid);
/* Parses the text of a maps file (for tests).  0 or -errno. */
int symaddr_maps_parse(struct symaddr_maps *m, const char *text, size_t len);
void symaddr_maps_fini(struct symaddr_maps *m);

/* Runtime address of file offset @off of @path in @m: 0 and *addr, or -ENOENT
 * when no mapping of that file covers it. */
int symaddr_offset_to_runtime(const struct symaddr_maps *m, const char *path, uint64_t off,
			      uint64_t *addr);

/* Where code is: runtime address, and the file and file offset that hold it. */
struct symaddr_loc {
	uint64_t addr;
	uint64_t offset;
	char path[4096]; /* "" if not file-backed */
};

/* Runtime address @addr -> file and offset, through @m.  0, or -ENOENT when
 * no file mapping covers it. */
int symaddr_runtime_to_file(const struct symaddr_maps *m, uint64_t addr, struct symaddr_loc *loc);

/* Finds function @name in the mapped objects of process @pid: its main
 * executable (/proc/PID/exe) first, then every other mapped file in address
 * order.  0 and *loc filled; -ENOENT: no mapped object defines it; -ESRCH: no
 * such process; other -errno on failure to read the process. */
int symaddr_resolve(pid_t pid, const char *name, struct symaddr_loc *loc);

/* Fills *loc for the runtime address @addr of process @pid.  0, -ENOENT (not
 * in a file mapping), -ESRCH, or -errno. */
int symaddr_locate(pid_t pid, uint64_t addr, struct symaddr_loc *loc);

#endif
