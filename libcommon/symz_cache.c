#include "symz.h"

#include <fcntl.h>
#include <time.h>

#include "io.h"
#include "sysenv.h"

/* ---- cache: one text file per build-id, "VADDR-HEX JSON" per line ---- */
static int cache_path(struct ctx *c, const struct bin *b, char *out, size_t cap)
{
	if (!c->o->cache_dir || !b->bidlen)
		return -1;
	int n = snprintf(out, cap, "%s/symbolize/%s", c->o->cache_dir, b->bidhex);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* strtoull(s, end, 16), with a fast path for what we write: 1 to 16 hex
 * digits and a space. */
static uint64_t hex_prefix(char *s, char **end)
{
	uint64_t v = 0;
	int k = 0;
	for (;; k++) {
		int d = hex_digit((unsigned char)s[k]);
		if (d < 0)
			break;
		if (k == 16)
			return strtoull(s, end, 16);
		v = v << 4 | (unsigned)d;
	}
	if (!k || s[k] != ' ')
		return strtoull(s, end, 16);
	*end = s + k;
	return v;
}

static void cache_index(struct bin *b)
{
	uint8_t *p = b->cbuf, *end = b->cbuf + b->cbuf_len;
	while (p < end) {
		uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break; /* a torn last line (never written by us): ignore */
		*nl = 0;
		char *sp;
		uint64_t va = hex_prefix((char *)p, &sp);
		if (sp != (char *)p && *sp == ' ')
			hmap_put(&b->cidx, va, 0, (uint32_t)((uint8_t *)sp + 1 - b->cbuf));
		p = nl + 1;
	}
}

void cache_load(struct ctx *c, struct bin *b)
{
	char path[4200];
	b->cache_loaded = 1;
	if (cache_path(c, b, path, sizeof path) < 0)
		return;
	if (io_slurp(path, &b->cbuf, &b->cbuf_len) < 0) {
		b->cbuf = NULL;
		b->cbuf_len = 0;
		return;
	}
	cache_index(b);
}

/* Writes the entries learned in this run merged with what the file holds
 * now (another run may have added some): temp file + rename, so readers see
 * the old or the new file, never a torn one.  Concurrent writers can lose
 * each other's additions (the later rename wins), never corrupt the file. */
void cache_store(struct ctx *c, struct bin *b)
{
	char path[4200], dir[4200], tmp[4300];
	if (!b->ncnew || cache_path(c, b, path, sizeof path) < 0)
		return;
	sfmt(dir, sizeof dir, "%s/symbolize", c->o->cache_dir);
	if (mt_mkdir_p(dir) < 0) {
		warnf(c, 0, "cache: cannot create %s: %s", dir, strerror(errno));
		return;
	}
	uint8_t *cur = NULL;
	size_t cur_len = 0;
	struct hmap have = {0};
	if (io_slurp(path, &cur, &cur_len) == 0) {
		/* keep whole lines only */
		while (cur_len && cur[cur_len - 1] != '\n')
			cur_len--;
		for (uint8_t *p = cur, *end = cur + cur_len; p < end;) {
			uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
			char *sp;
			uint64_t va = strtoull((char *)p, &sp, 16);
			if (sp != (char *)p)
				hmap_put(&have, va, 0, 0);
			p = nl + 1;
		}
	} else {
		cur = NULL;
		cur_len = 0;
	}
	sfmt(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		warnf(c, 0, "cache: cannot write %s: %s", tmp, strerror(errno));
		free(cur);
		hmap_fini(&have);
		return;
	}
	int ok = cur_len ? io_write_all(fd, cur, cur_len) == 0 : 1;
	char *buf = NULL;
	size_t blen = 0, bcap = 0;
	for (size_t i = 0; ok && i < b->ncnew; i++) {
		if (hmap_get(&have, b->cnew[i].vaddr, 0) != NONE)
			continue;
		hmap_put(&have, b->cnew[i].vaddr, 0, 0);
		size_t ll = strlen(b->cnew[i].line);
		if (blen + ll + 32 > bcap) {
			bcap = (blen + ll + 32) * 2;
			char *nb = realloc(buf, bcap);
			if (!nb) {
				ok = 0;
				break;
			}
			buf = nb;
		}
		blen += (size_t)sprintf(buf + blen, "%" PRIx64 " ", b->cnew[i].vaddr);
		memcpy(buf + blen, b->cnew[i].line, ll);
		blen += ll;
		buf[blen++] = '\n';
	}
	if (ok && blen)
		ok = io_write_all(fd, buf, blen) == 0;
	if (close(fd) < 0)
		ok = 0;
	if (ok && rename(tmp, path) < 0)
		ok = 0;
	if (!ok) {
		warnf(c, 0, "cache: cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
	}
	free(buf);
	free(cur);
	hmap_fini(&have);
}

