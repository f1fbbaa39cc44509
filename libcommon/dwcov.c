#include "dwcov.h"

#include "elfinfo.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *dwcov_state_name(int state)
{
	switch (state) {
	case DWCOV_NONE:
		return "none";
	case DWCOV_RANGES:
		return "ranges";
	}
	return "all";
}

void dwcov_fini(struct dwcov *dc)
{
	free(dc->r);
	memset(dc, 0, sizeof *dc);
}

int dwcov_any(const struct dwcov *dc, uint64_t lo, uint64_t hi)
{
	if (dc->state != DWCOV_RANGES)
		return dc->state == DWCOV_ALL;
	/* the first range ending after lo */
	size_t a = 0, b = dc->n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (dc->r[2 * m + 1] <= lo)
			a = m + 1;
		else
			b = m;
	}
	return a < dc->n && dc->r[2 * a] < hi;
}

/* ---- reading DWARF headers (little-endian; bounds checked) ---- */

struct rd {
	const uint8_t *p;
	size_t n, off;
	int bad;
};

static uint64_t rd_u(struct rd *r, size_t k)
{
	if (r->bad || k > r->n - r->off) {
		r->bad = 1;
		return 0;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < k; i++)
		v |= (uint64_t)r->p[r->off + i] << (8 * i);
	r->off += k;
	return v;
}

/* A unit's length field: *osz gets the offset size (4 or 8); returns the
 * length after the field, 0 with r->bad on a bad one. */
static uint64_t rd_len(struct rd *r, size_t *osz)
{
	uint64_t len = rd_u(r, 4);
	*osz = 4;
	if (len == 0xffffffffu) {
		len = rd_u(r, 8);
		*osz = 8;
	} else if (len >= 0xfffffff0u) {
		r->bad = 1;
	}
	if (!r->bad && len > r->n - r->off)
		r->bad = 1;
	return r->bad ? 0 : len;
}

struct u64v {
	uint64_t *v;
	size_t n, cap;
};

static int u64v_push(struct u64v *x, uint64_t a)
{
	if (x->n == x->cap) {
		size_t nc = x->cap ? 2 * x->cap : 64;
		uint64_t *nv = realloc(x->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		x->v = nv;
		x->cap = nc;
	}
	x->v[x->n++] = a;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_pair(const void *a, const void *b)
{
	return cmp_u64(a, b);
}

/* Offsets of the units of .debug_info that can hold code (not type units). */
static int info_units(const uint8_t *p, size_t n, struct u64v *cu)
{
	struct rd r = {p, n, 0, 0};
	while (r.off < n) {
		size_t start = r.off, osz;
		uint64_t len = rd_len(&r, &osz);
		if (r.bad || len < 3)
			return -1;
		size_t next = r.off + (size_t)len;
		unsigned ver = (unsigned)rd_u(&r, 2);
		if (ver < 2 || ver > 5)
			return -1;
		unsigned type = 1; /* DW_UT_compile */
		if (ver >= 5)
			type = (unsigned)rd_u(&r, 1);
		if (r.bad)
			return -1;
		if (type != 2 && type != 6 && u64v_push(cu, start)) /* not a type unit */
			return -1;
		r.off = next;
	}
	return 0;
}

/* The ranges and unit offsets of .debug_aranges. */
static int aranges(const uint8_t *p, size_t n, struct u64v *rg, struct u64v *cu)
{
	struct rd r = {p, n, 0, 0};
	while (r.off < n) {
		size_t start = r.off, osz;
		uint64_t len = rd_len(&r, &osz);
		if (r.bad)
			return -1;
		size_t end = r.off + (size_t)len;
		unsigned ver = (unsigned)rd_u(&r, 2);
		uint64_t cuoff = rd_u(&r, osz);
		unsigned asz = (unsigned)rd_u(&r, 1), ssz = (unsigned)rd_u(&r, 1);
		if (r.bad || ver != 2 || (asz != 4 && asz != 8) || ssz)
			return -1;
		size_t t = r.off - start, al = 2 * asz; /* tuples align to twice the address size */
		r.off = start + (t + al - 1) / al * al;
		if (u64v_push(cu, cuoff))
			return -1;
		while (r.off + 2 * asz <= end) {
			uint64_t a = rd_u(&r, asz), l = rd_u(&r, asz);
			if (!a && !l)
				break;
			if (l && a + l > a && (u64v_push(rg, a) || u64v_push(rg, a + l)))
				return -1;
		}
		if (r.bad)
			return -1;
		r.off = end;
	}
	return 0;
}

/* The bytes of section @scn, decompressed when it is (SHF_COMPRESSED or the
 * GNU .zdebug form).  NULL when it cannot be read. */
static Elf_Data *sec_data(Elf_Scn *scn, const GElf_Shdr *sh, const char *name)
{
	if (sh->sh_type == SHT_NOBITS)
		return NULL;
	if ((sh->sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return NULL;
	if (!strncmp(name, ".zdebug", 7) && elf_compress_gnu(scn, 0, 0) < 0)
		return NULL;
	Elf_Data *d = elf_getdata(scn, NULL);
	return d && d->d_buf && d->d_size ? d : NULL;
}

static int file_exists(const char *p)
{
	return access(p, R_OK) == 0;
}

static void load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen, int depth);

/* A file without .debug_info: its DWARF may be in a separate file, where
 * llvm-symbolizer looks for it (build-id, then .gnu_debuglink). */
static void separate(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen,
		     const char *link, int depth)
{
	char buf[4096], hex[41];
	if (depth) /* a debug file of a debug file: not followed */
		return;
	if (idlen) {
		const char *env = getenv("DEBUGINFOD_URLS");
		if (env && *env) { /* it may come from a server */
			dc->state = DWCOV_ALL;
			return;
		}
		buildid_hex(hex, id, idlen);
		size_t plen = strlen(path);
		/* a perf build-id cache entry: the file "debug" next to "elf" */
		if (plen >= 4 && plen < sizeof buf && !strcmp(path + plen - 4, "/elf")) {
			memcpy(buf, path, plen - 3);
			memcpy(buf + plen - 3, "debug", 6);
			if (file_exists(buf))
				goto found;
		}
		const char *dirs = getenv("MT_DEBUGINFO_DIR");
		if (!dirs)
			dirs = "/usr/lib/debug";
		for (const char *d = dirs; *d;) {
			const char *e = strchr(d, ':');
			size_t n = e ? (size_t)(e - d) : strlen(d);
			int w = snprintf(buf, sizeof buf, "%.*s/.build-id/%.2s/%s.debug", (int)n, d,
					 hex, hex + 2);
			if (n && w > 0 && (size_t)w < sizeof buf && file_exists(buf))
				goto found;
			d = e ? e + 1 : d + n;
		}
	}
	if (link && strchr(link, '/')) { /* a file name, not a path: not looked for */
		dc->state = DWCOV_ALL;
		return;
	}
	if (link && *link) {
		const char *sl = strrchr(path, '/');
		int dl = sl ? (int)(sl - path) : 1;
		const char *dir = sl ? path : ".";
		int w = snprintf(buf, sizeof buf, "%.*s/%s", dl, dir, link);
		if (w > 0 && (size_t)w < sizeof buf && strcmp(buf, path) && file_exists(buf))
			goto found;
		w = snprintf(buf, sizeof buf, "%.*s/.debug/%s", dl, dir, link);
		if (w > 0 && (size_t)w < sizeof buf && file_exists(buf))
			goto found;
		w = snprintf(buf, sizeof buf, "/usr/lib/debug/%.*s/%s", dl, dir, link);
		if (w > 0 && (size_t)w < sizeof buf && file_exists(buf))
			goto found;
	}
	return; /* none: no DWARF */
found:
	load(dc, buf, id, idlen, depth + 1);
}

static void load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen, int depth)
{
	dc->state = DWCOV_ALL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char link[256] = "";
	Elf *e = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		goto out;
	e = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	GElf_Ehdr eh;
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB)
		goto out;
	size_t shstrndx;
	if (elf_getshdrstrndx(e, &shstrndx))
		goto out;
	Elf_Scn *scn = NULL, *info = NULL, *ar = NULL;
	GElf_Shdr sh, info_sh, ar_sh;
	const char *info_name = "", *ar_name = "";
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
		if (!nm)
			continue;
		if (!strcmp(nm, ".debug_info") || !strcmp(nm, ".zdebug_info")) {
			info = scn, info_sh = sh, info_name = nm;
		} else if (!strcmp(nm, ".debug_aranges") || !strcmp(nm, ".zdebug_aranges")) {
			ar = scn, ar_sh = sh, ar_name = nm;
		} else if (!strcmp(nm, ".gnu_debuglink") && sh.sh_type != SHT_NOBITS) {
			Elf_Data *d = elf_getdata(scn, NULL);
			if (d && d->d_buf && d->d_size > 4) {
				size_t k = strnlen(d->d_buf, d->d_size);
				if (k < d->d_size && k < sizeof link)
					memcpy(link, d->d_buf, k + 1);
			}
		} else if (!strcmp(nm, ".gnu_debugaltlink")) {
			goto out; /* dwz: units in another file; not read */
		}
	}
	if (!info || info_sh.sh_type == SHT_NOBITS || !info_sh.sh_size) {
		dc->state = DWCOV_NONE;
		separate(dc, path, id, idlen, link, depth);
		goto out;
	}
	Elf_Data *di = sec_data(info, &info_sh, info_name);
	Elf_Data *da = ar ? sec_data(ar, &ar_sh, ar_name) : NULL;
	if (di && da) /* else unreadable or no ranges: all */
		dwcov_parse(dc, di->d_buf, di->d_size, da->d_buf, da->d_size);
out:
	if (e)
		elf_end(e);
	close(fd);
}

void dwcov_parse(struct dwcov *dc, const void *info, size_t ninfo, const void *ar, size_t nar)
{
	struct u64v rg = {0}, acu = {0}, icu = {0};
	free(dc->r);
	memset(dc, 0, sizeof *dc);
	dc->state = DWCOV_ALL;
	if (info_units(info, ninfo, &icu) || aranges(ar, nar, &rg, &acu))
		goto out;
	/* every unit must have its ranges listed */
	if (icu.n && !acu.n)
		goto out;
	if (acu.n)
		qsort(acu.v, acu.n, sizeof *acu.v, cmp_u64);
	for (size_t i = 0; i < icu.n; i++)
		if (!bsearch(&icu.v[i], acu.v, acu.n, sizeof *acu.v, cmp_u64))
			goto out;
	/* sort the [lo, hi) pairs and merge them */
	size_t np = rg.n / 2, w = 0;
	if (np)
		qsort(rg.v, np, 2 * sizeof *rg.v, cmp_pair);
	for (size_t i = 0; i < np; i++) {
		uint64_t lo = rg.v[2 * i], hi = rg.v[2 * i + 1];
		if (w && lo <= rg.v[2 * w - 1]) {
			if (hi > rg.v[2 * w - 1])
				rg.v[2 * w - 1] = hi;
			continue;
		}
		rg.v[2 * w] = lo;
		rg.v[2 * w + 1] = hi;
		w++;
	}
	dc->state = w ? DWCOV_RANGES : DWCOV_NONE;
	dc->r = rg.v;
	dc->n = w;
	rg.v = NULL;
out:
	free(rg.v);
	free(acu.v);
	free(icu.v);
}

void dwcov_load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen)
{
	memset(dc, 0, sizeof *dc);
	load(dc, path, id, idlen, 0);
}
