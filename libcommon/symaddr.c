#include "symaddr.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfinfo.h"
#include "io.h"

void symaddr_maps_fini(struct symaddr_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

/* One line: "start-end perms offset dev inode [path]". */
static int parse_line(struct symaddr_map *e, const char *s, size_t len)
{
	char buf[4096 + 256];
	int pathpos = -1;
	unsigned long long start, end, off;

	if (len >= sizeof buf)
		return -ENAMETOOLONG;
	memcpy(buf, s, len);
	buf[len] = 0;
	if (sscanf(buf, "%llx-%llx %4s %llx %*s %*s %n", &start, &end, e->perms, &off, &pathpos) < 4)
		return -EINVAL;
	e->start = start;
	e->end = end;
	e->offset = off;
	e->path = strdup(pathpos >= 0 ? buf + pathpos : "");
	return e->path ? 0 : -ENOMEM;
}

int symaddr_maps_parse(struct symaddr_maps *m, const char *text, size_t len)
{
	size_t cap = 0;
	m->v = NULL;
	m->n = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t l = nl ? (size_t)(nl - (text + i)) : len - i;
		if (l) {
			if (m->n == cap) {
				size_t ncap = cap ? 2 * cap : 64;
				struct symaddr_map *nv = realloc(m->v, ncap * sizeof *nv);
				if (!nv) {
					symaddr_maps_fini(m);
					return -ENOMEM;
				}
				m->v = nv;
				cap = ncap;
			}
			int r = parse_line(&m->v[m->n], text + i, l);
			if (r < 0) {
				symaddr_maps_fini(m);
				return r;
			}
			m->n++;
		}
		i += l + 1;
	}
	return 0;
}

int symaddr_maps_read(struct symaddr_maps *m, pid_t pid)
{
	char path[64];
	uint8_t *buf;
	size_t len;

	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	if (io_slurp(path, &buf, &len) < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	int r = symaddr_maps_parse(m, (const char *)buf, len);
	free(buf);
	/* An unreadable maps file of another user's process reads as empty. */
	if (r == 0 && m->n == 0)
		return -EACCES;
	return r;
}

int symaddr_offset_to_runtime(const struct symaddr_maps *m, const char *path, uint64_t off,
			      uint64_t *addr)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct symaddr_map *e = &m->v[i];
		if (strcmp(e->path, path))
			continue;
		if (off >= e->offset && off < e->offset + (e->end - e->start)) {
			*addr = e->start + (off - e->offset);
			return 0;
		}
	}
	return -ENOENT;
}

int symaddr_runtime_to_file(const struct symaddr_maps *m, uint64_t addr, struct symaddr_loc *loc)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct symaddr_map *e = &m->v[i];
		if (addr >= e->start && addr < e->end && e->path[0] == '/') {
			loc->addr = addr;
			loc->offset = e->offset + (addr - e->start);
			snprintf(loc->path, sizeof loc->path, "%s", e->path);
			return 0;
		}
	}
	return -ENOENT;
}

int symaddr_locate(pid_t pid, uint64_t addr, struct symaddr_loc *loc)
{
	struct symaddr_maps m;
	int r = symaddr_maps_read(&m, pid);
	if (r < 0)
		return r;
	r = symaddr_runtime_to_file(&m, addr, loc);
	symaddr_maps_fini(&m);
	return r;
}

static int try_object(const struct symaddr_maps *m, const char *path, const char *name,
		      struct symaddr_loc *loc)
{
	struct elfinfo ei;
	int r = elfinfo_load(&ei, path);
	if (r < 0)
		return r;
	const struct elf_sym *s = elfinfo_find(&ei, name);
	r = -ENOENT;
	if (s && !s->is_plt && s->addr) {
		int64_t off = elfinfo_vaddr_to_offset(&ei, s->addr);
		if (off >= 0 && symaddr_offset_to_runtime(m, path, (uint64_t)off, &loc->addr) == 0) {
			loc->offset = (uint64_t)off;
			snprintf(loc->path, sizeof loc->path, "%s", path);
			r = 0;
		}
	}
	elfinfo_fini(&ei);
	return r;
}

int symaddr_resolve(pid_t pid, const char *name, struct symaddr_loc *loc)
{
	struct symaddr_maps m;
	char link[64], exe[4096];
	ssize_t n;
	int r;

	r = symaddr_maps_read(&m, pid);
	if (r < 0)
		return r;
	snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
	n = readlink(link, exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	r = -ENOENT;
	if (n > 0 && try_object(&m, exe, name, loc) == 0) {
		r = 0;
		goto out;
	}
	for (size_t i = 0; i < m.n; i++) {
		const char *p = m.v[i].path;
		if (p[0] != '/' || !strcmp(p, exe))
			continue;
		/* each file once: only at its first mapping */
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(m.v[j].path, p);
		if (seen)
			continue;
		if (try_object(&m, p, name, loc) == 0) {
			r = 0;
			break;
		}
	}
out:
	symaddr_maps_fini(&m);
	return r;
}
