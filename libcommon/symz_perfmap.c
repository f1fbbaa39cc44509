#include "symz.h"

/* perf-PID.map (JIT code): "START SIZE NAME" lines, later lines win. */
struct perfmap *perfmap_get(struct ctx *c, uint32_t pid)
{
	for (size_t i = 0; i < c->npmaps; i++)
		if (c->pmaps[i].pid == pid)
			return &c->pmaps[i];
	struct perfmap pm = {pid, 1, NULL, 0};
	size_t cap = 0;
	char path[4200];
	sfmt(path, sizeof path, "%s/perf-%" PRIu32 ".map",
		 c->o->perf_map_dir ? c->o->perf_map_dir : "/tmp", pid);
	FILE *f = fopen(path, "r");
	if (f) {
		char line[4096];
		while (fgets(line, sizeof line, f)) {
			char *p = line, *q;
			uint64_t st = strtoull(p, &q, 16);
			if (q == p || *q != ' ')
				continue;
			p = q + 1;
			uint64_t sz = strtoull(p, &q, 16);
			if (q == p || *q != ' ')
				continue;
			p = q + 1;
			size_t nl = strcspn(p, "\n");
			struct perfmap_ent e = {st, sz, arena_strndup(&c->ar, p, nl)};
			if (!e.name || VEC_PUSH(pm.e, pm.n, cap, e) < 0) {
				c->oom = 1;
				break;
			}
		}
		fclose(f);
	}
	if (VEC_PUSH(c->pmaps, c->npmaps, c->cappmaps, pm) < 0) {
		free(pm.e);
		c->oom = 1;
		return NULL;
	}
	return &c->pmaps[c->npmaps - 1];
}

const struct perfmap_ent *perfmap_lookup(const struct perfmap *pm, uint64_t addr)
{
	/* later lines win: JIT code can be replaced at the same address */
	for (size_t i = pm->n; i-- > 0;)
		if (addr >= pm->e[i].start && addr - pm->e[i].start < pm->e[i].size)
			return &pm->e[i];
	return NULL;
}

/* Inline levels of a result: level 1 is the outermost inlined frame. */
