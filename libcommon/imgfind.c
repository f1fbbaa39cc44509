#include "imgfind.h"

#include "elfinfo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char **dirs;
static size_t ndirs;

int img_dirs_add(const char *dir)
{
	char **v = realloc(dirs, (ndirs + 1) * sizeof *v);
	if (!v)
		return -1;
	dirs = v;
	if (!(dirs[ndirs] = strdup(dir)))
		return -1;
	ndirs++;
	return 0;
}

void img_dirs_clear(void)
{
	for (size_t i = 0; i < ndirs; i++)
		free(dirs[i]);
	free(dirs);
	dirs = NULL;
	ndirs = 0;
}

static const char *home_debug(char *buf, size_t len)
{
	const char *h = getenv("HOME");
	if (!h || !*h)
		return NULL;
	int w = snprintf(buf, len, "%s/.debug", h);
	return w > 0 && (size_t)w < len ? buf : NULL;
}

struct search {
	const uint8_t *bid;
	size_t bidlen;
	char *out;
	size_t cap;
	char *why;
	size_t whylen;
	int mismatch;
};

/* Is @file (printf-formatted) the image?  1: yes, copied to s->out. */
static int try(struct search *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int try(struct search *s, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	struct stat st;
	if (w < 0 || (size_t)w >= sizeof buf || stat(buf, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	uint8_t got[20];
	int n = elf_read_build_id(buf, got);
	if (n < 0)
		return 0;
	if (s->bidlen && ((size_t)n < s->bidlen || memcmp(got, s->bid, s->bidlen))) {
		if (!s->mismatch++) {
			char hex[41];
			buildid_hex(hex, got, (size_t)n);
			snprintf(s->why, s->whylen, "build-id mismatch: %s has build-id %s", buf,
				 n ? hex : "(none)");
		}
		return 0;
	}
	if ((size_t)w >= s->cap)
		return 0;
	memcpy(s->out, buf, (size_t)w + 1);
	return 1;
}

/* The build-id places under @dir. */
static int try_bid(struct search *s, const char *dir, const char *path, const char *hex)
{
	const char *sep = path[0] == '/' ? "" : "/";
	return try(s, "%s/.build-id/%.2s/%s", dir, hex, hex + 2) ||
	       try(s, "%s/.build-id/%.2s/%s/elf", dir, hex, hex + 2) ||
	       try(s, "%s/.build-id/%.2s/%s/vdso", dir, hex, hex + 2) ||
	       try(s, "%s%s%s/%s/elf", dir, sep, path, hex) ||
	       try(s, "%s%s%s/%s/vdso", dir, sep, path, hex);
}

int img_find(const char *path, const uint8_t *bid, size_t bidlen, char *out, size_t cap,
	     char *why, size_t whylen)
{
	struct search s = {bid, bidlen, out, cap, why, whylen, 0};
	char hex[41], home[4096];
	const char *base = strrchr(path, '/');
	const char *sep = path[0] == '/' ? "" : "/";
	base = base ? base + 1 : path;
	if (bidlen > 20)
		s.bidlen = bidlen = 20;
	buildid_hex(hex, bid, bidlen);
	snprintf(why, whylen, "not found");
	for (size_t i = 0; i < ndirs; i++) {
		const char *d = dirs[i];
		if (bidlen && (try_bid(&s, d, path, hex) || try(&s, "%s/%s", d, hex)))
			return 1;
		if (*path && (try(&s, "%s%s%s", d, sep, path) || try(&s, "%s/%s", d, base)))
			return 1;
	}
	if (path[0] == '/' && try(&s, "%s", path))
		return 1;
	const char *h = home_debug(home, sizeof home);
	if (bidlen && h && try_bid(&s, h, path, hex))
		return 1;
	return 0;
}

/* printf into @buf: 1, or -1 when it does not fit. */
static int put(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int put(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return w < 0 || (size_t)w >= len ? -1 : 1;
}

/* The @i-th element of the ':'-separated @list into *@d, *@n: 1, or 0 when
 * there is none. */
static int nth(const char *list, unsigned i, const char **d, size_t *n)
{
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ':');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (i-- == 0) {
			*d = p, *n = l;
			return 1;
		}
		p = e ? e + 1 : p + l;
	}
	return 0;
}

int img_debug_candidate(const char *file, const uint8_t *id, size_t idlen, const char *link,
			unsigned i, char *buf, size_t len)
{
	char hex[41];
	const char *dd = getenv("MT_DEBUGINFO_DIR"), *d;
	size_t n;
	if (!dd)
		dd = "/usr/lib/debug";
	if (idlen > 20)
		idlen = 20;
	buildid_hex(hex, id, idlen);
	size_t flen = strlen(file);
	if (i == 0) /* perf's cache: "debug" next to "elf" */
		return flen < 4 || strcmp(file + flen - 4, "/elf")
			       ? -1
			       : put(buf, len, "%.*sdebug", (int)(flen - 3), file);
	i--;
	if (i < 2 * ndirs) /* the image directories */
		return !idlen ? -1
			      : put(buf, len, "%s%s/.build-id/%.2s/%s.debug", dirs[i / 2],
				    i % 2 ? "/usr/lib/debug" : "", hex, hex + 2);
	i -= (unsigned)(2 * ndirs);
	unsigned nd = 0;
	while (nth(dd, nd, &d, &n))
		nd++;
	if (i < nd) { /* the debug directories, by build-id */
		nth(dd, i, &d, &n);
		return !idlen || !n ? -1
				    : put(buf, len, "%.*s/.build-id/%.2s/%s.debug", (int)n, d, hex,
					  hex + 2);
	}
	i -= nd;
	/* by .gnu_debuglink: next to the file, in its .debug/, under each
	 * debug directory */
	const char *sl = strrchr(file, '/');
	int dl = sl ? (int)(sl - file) : 1;
	const char *dir = sl ? file : ".";
	int r;
	if (i == 0)
		r = put(buf, len, "%.*s/%s", dl, dir, link ? link : "");
	else if (i == 1)
		r = put(buf, len, "%.*s/.debug/%s", dl, dir, link ? link : "");
	else if (nth(dd, i - 2, &d, &n))
		r = n ? put(buf, len, "%.*s/%.*s/%s", (int)n, d, dl, dir, link ? link : "") : -1;
	else
		return 0;
	if (!link || !*link || strchr(link, '/') || !strcmp(buf, file))
		return -1;
	return r;
}

int img_find_debug(const char *file, const uint8_t *id, size_t idlen, char *out, size_t cap)
{
	char buf[4096], link[256];
	int k;
	if (!idlen)
		return 0;
	if (elf_read_debuglink(file, link, sizeof link) <= 0)
		link[0] = 0;
	for (unsigned i = 0; (k = img_debug_candidate(file, id, idlen, link, i, buf, sizeof buf));
	     i++) {
		uint8_t got[20];
		struct stat st;
		if (k < 0 || stat(buf, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		int n = elf_read_build_id(buf, got);
		if (n < 0 || (size_t)n < idlen || memcmp(got, id, idlen) || strlen(buf) >= cap)
			continue;
		memcpy(out, buf, strlen(buf) + 1);
		return 1;
	}
	return 0;
}
