#include "elfinfo.h"
#include "imgfind.h"

#include <capstone/capstone.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens @path for reading if it is a regular file: a FIFO or a device named
 * by a map record or under --symfs must not block or be read (O_NONBLOCK, then
 * fstat).  The fd, or -errno. */
static int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

static int elf_ready(void)
{
	static int ok = -1;
	if (ok < 0)
		ok = elf_version(EV_CURRENT) != EV_NONE;
	return ok;
}

void buildid_hex(char *out, const uint8_t *id, size_t len)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;
	for (i = 0; i < len && i < 20; i++) {
		out[2 * i] = hx[id[i] >> 4];
		out[2 * i + 1] = hx[id[i] & 15];
	}
	out[2 * i] = 0;
}

/* The GNU build-id note among the notes of @d: its length, or -1. */
static int gnu_build_id(Elf_Data *d, uint8_t out[20])
{
	size_t off = 0, noff, doff;
	GElf_Nhdr nh;
	while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp((char *)d->d_buf + noff, "GNU", 4)) {
			size_t n = nh.n_descsz > 20 ? 20 : nh.n_descsz;
			memcpy(out, (char *)d->d_buf + doff, n);
			return (int)n;
		}
	}
	return -1;
}

static int note_build_id(Elf *e, uint8_t out[20])
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		int n = gnu_build_id(d, out);
		if (n >= 0)
			return n;
	}
	/* No section headers (e.g. a memory dump): try program headers. */
	size_t phnum;
	if (elf_getphdrnum(e, &phnum) != 0)
		return 0;
	size_t fsize;
	char *raw = elf_rawfile(e, &fsize);
	for (size_t i = 0; raw && i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		if (ph.p_offset > fsize || ph.p_filesz > fsize - ph.p_offset)
			continue;
		Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		if (!d)
			continue;
		int n = gnu_build_id(d, out);
		if (n >= 0)
			return n;
	}
	return 0;
}

int elf_read_build_id(const char *path, uint8_t out[20])
{
	if (!elf_ready())
		return -EINVAL;
	int fd = open_regular(path);
	if (fd < 0)
		return fd;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int r;
	if (!e || elf_kind(e) != ELF_K_ELF)
		r = -ENOEXEC;
	else
		r = note_build_id(e, out);
	if (e)
		elf_end(e);
	close(fd);
	return r;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->is_fde != y->is_fde) /* a name from the file wins */
		return x->is_fde ? 1 : -1;
	/* prefer sized, then the exported name (.dynsym, then global or weak
	 * binding: malloc, not libc6-dbg's local __GI___libc_malloc), then the
	 * one with fewest leading underscores, then the shorter */
	if ((x->size == 0) != (y->size == 0))
		return x->size == 0 ? 1 : -1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	size_t ux = strspn(x->name, "_"), uy = strspn(y->name, "_");
	if (ux != uy)
		return ux < uy ? -1 : 1;
	size_t lx = strlen(x->name), ly = strlen(y->name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int alias_cmp(const void *a, const void *b)
{
	return strcmp(((const struct elf_sym *)a)->name, ((const struct elf_sym *)b)->name);
}

struct pool {
	char *p;
	size_t len, cap;
};

static long pool_add(struct pool *pl, const char *s, const char *suffix)
{
	size_t a = strlen(s), b = suffix ? strlen(suffix) : 0;
	if (pl->len + a + b + 1 > pl->cap) {
		size_t nc = pl->cap ? pl->cap : 4096;
		while (nc < pl->len + a + b + 1)
			nc *= 2;
		char *np = realloc(pl->p, nc);
		if (!np)
			return -1;
		pl->p = np;
		pl->cap = nc;
	}
	long off = (long)pl->len;
	memcpy(pl->p + pl->len, s, a);
	if (b)
		memcpy(pl->p + pl->len + a, suffix, b);
	pl->p[pl->len + a + b] = 0;
	pl->len += a + b + 1;
	return off;
}

struct symvec {
	struct elf_sym *v;
	long *nameoff;
	size_t n, cap;
};

static int symvec_push(struct symvec *sv, uint64_t addr, uint64_t size, long nameoff, int plt,
		       int label, int rank)
{
	if (sv->n == sv->cap) {
		size_t nc = sv->cap ? sv->cap * 2 : 256;
		struct elf_sym *nv = realloc(sv->v, nc * sizeof *nv);
		if (!nv)
			return -1;
		sv->v = nv;
		long *no = realloc(sv->nameoff, nc * sizeof *no);
		if (!no)
			return -1;
		sv->nameoff = no;
		sv->cap = nc;
	}
	sv->v[sv->n] = (struct elf_sym){addr, size, NULL, (uint8_t)plt, (uint8_t)label, 0, (uint8_t)rank};
	sv->nameoff[sv->n] = nameoff;
	sv->n++;
	return 0;
}

static int in_exec_segment(const struct elfinfo *ei, uint64_t a)
{
	if (!ei->nsegs)
		return 1; /* no program headers (relocatable object): keep everything */
	for (size_t i = 0; i < ei->nsegs; i++)
		if ((ei->segs[i].flags & PF_X) && a >= ei->segs[i].vaddr &&
		    a < ei->segs[i].vaddr + ei->segs[i].memsz)
			return 1;
	return 0;
}

/* Code symbols only: functions, and untyped labels (hand-written assembly)
 * that lie in an executable segment. */
/* How public a name is: 0 exported (.dynsym), 1 global or weak, 2 local. */
static int rank_of(const GElf_Shdr *sh, const GElf_Sym *s)
{
	int b = GELF_ST_BIND(s->st_info);
	if (sh->sh_type == SHT_DYNSYM)
		return 0;
	return b == STB_GLOBAL || b == STB_WEAK ? 1 : 2;
}

static int read_symtab(const struct elfinfo *ei, Elf *e, Elf_Scn *scn, GElf_Shdr *sh,
		       struct symvec *sv, struct pool *pl)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !sh->sh_entsize)
		return 0;
	size_t n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s))
			continue;
		int t = GELF_ST_TYPE(s.st_info);
		if (s.st_shndx == SHN_UNDEF || s.st_value == 0)
			continue;
		if (t != STT_FUNC && t != STT_GNU_IFUNC && t != STT_NOTYPE)
			continue;
		if (!in_exec_segment(ei, s.st_value))
			continue;
		const char *name = elf_strptr(e, sh->sh_link, s.st_name);
		if (!name || !*name)
			continue;
		long off = pool_add(pl, name, NULL);
		if (off < 0 || symvec_push(sv, s.st_value, s.st_size, off, 0, t == STT_NOTYPE,
					rank_of(sh, &s)) < 0)
			return -1;
	}
	return 0;
}

/* PLT entries: .plt / .plt.sec stubs named after their .rela.plt targets. */
static int read_plt(Elf *e, size_t shstrndx, struct symvec *sv, struct pool *pl)
{
	Elf_Scn *scn = NULL, *plt = NULL, *pltsec = NULL, *rela = NULL;
	GElf_Shdr sh, plt_sh = {0}, pltsec_sh = {0}, rela_sh = {0};
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
		if (!nm)
			continue;
		if (!strcmp(nm, ".plt")) {
			plt = scn;
			plt_sh = sh;
		} else if (!strcmp(nm, ".plt.sec")) {
			pltsec = scn;
			pltsec_sh = sh;
		} else if (!strcmp(nm, ".rela.plt")) {
			rela = scn;
			rela_sh = sh;
		}
	}
	if (!plt)
		return 0;
	/* The whole .plt is one "function" for range purposes: PLT0 + stubs. */
	long off0 = pool_add(pl, "[plt]", NULL);
	if (off0 < 0 || symvec_push(sv, plt_sh.sh_addr, plt_sh.sh_size, off0, 1, 0, 0) < 0)
		return -1;
	if (!rela || !rela_sh.sh_entsize)
		return 0;
	Elf_Scn *dynsym = elf_getscn(e, rela_sh.sh_link);
	GElf_Shdr dsh;
	if (!dynsym || !gelf_getshdr(dynsym, &dsh))
		return 0;
	Elf_Data *rd = elf_getdata(rela, NULL), *dd = elf_getdata(dynsym, NULL);
	if (!rd || !dd)
		return 0;
	size_t n = rela_sh.sh_size / rela_sh.sh_entsize;
	uint64_t base, stride = 16;
	if (pltsec)
		base = pltsec_sh.sh_addr;
	else
		base = plt_sh.sh_addr + 16; /* skip PLT0 */
	for (size_t i = 0; i < n; i++) {
		GElf_Rela ra;
		GElf_Sym s;
		if (!gelf_getrela(rd, (int)i, &ra))
			continue;
		if (!gelf_getsym(dd, (int)GELF_R_SYM(ra.r_info), &s))
			continue;
		const char *name = elf_strptr(e, dsh.sh_link, s.st_name);
		if (!name || !*name)
			continue;
		long off = pool_add(pl, name, "@plt");
		if (off < 0 || symvec_push(sv, base + i * stride, stride, off, 1, 0, 0) < 0)
			return -1;
	}
	return 0;
}

/* The name in @e's .gnu_debuglink into @out ("" when none or too long). */
static void debuglink(Elf *e, size_t shstrndx, char *out, size_t len)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	out[0] = 0;
	while ((scn = elf_nextscn(e, scn))) {
		const char *nm;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(nm = elf_strptr(e, shstrndx, sh.sh_name)) || strcmp(nm, ".gnu_debuglink"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t k = d && d->d_buf ? strnlen(d->d_buf, d->d_size) : len;
		if (k < len && k < d->d_size)
			memcpy(out, d->d_buf, k + 1);
		return;
	}
}

int elf_read_debuglink(const char *path, char *out, size_t len)
{
	if (!len || !elf_ready())
		return -EINVAL;
	out[0] = 0;
	int fd = open_regular(path);
	if (fd < 0)
		return fd;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t shstrndx;
	int r = -ENOEXEC;
	if (e && elf_kind(e) == ELF_K_ELF && !elf_getshdrstrndx(e, &shstrndx)) {
		debuglink(e, shstrndx, out, len);
		r = (int)strlen(out);
	}
	if (e)
		elf_end(e);
	close(fd);
	return r;
}

/* Separate debug file (objcopy --only-keep-debug, Debian's *-dbg packages)
 * of a stripped file with build-id @id, at img_debug_candidate's places (imgfind.h).
 * The debug file must carry the same build-id and a .symtab.  Returns an
 * open Elf (and *fdp) or NULL. */
static Elf *open_debug_file(const char *path, const uint8_t *id, size_t idlen, const char *link,
			    int *fdp, char **dpath)
{
	char buf[4096];
	int k;
	for (unsigned i = 0; (k = img_debug_candidate(path, id, idlen, link, i, buf, sizeof buf));
	     i++) {
		if (k < 0)
			continue;
		int fd = open_regular(buf);
		if (fd < 0)
			continue;
		Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		uint8_t did[20];
		int ok = e && elf_kind(e) == ELF_K_ELF && note_build_id(e, did) == (int)idlen &&
			 !memcmp(did, id, idlen);
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;
		int has = 0;
		while (ok && !has && (scn = elf_nextscn(e, scn)))
			has = gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB;
		if (ok && has) {
			*fdp = fd;
			*dpath = strdup(buf);
			return e;
		}
		if (e)
			elf_end(e);
		close(fd);
	}
	return NULL;
}

/* ---- function starts from .eh_frame (stripped files, no debug file) ---- */

struct rd {
	const uint8_t *p, *end;
	uint64_t va; /* vaddr of p */
	int bad;
};

static uint64_t rd_n(struct rd *r, size_t n)
{
	uint64_t v = 0;
	if ((size_t)(r->end - r->p) < n) {
		r->bad = 1;
		r->p = r->end;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	r->va += n;
	return v;
}

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	for (unsigned sh = 0; r->p < r->end; sh += 7) {
		uint8_t b = *r->p++;
		r->va++;
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		if (!(b & 0x80))
			return v;
	}
	r->bad = 1;
	return v;
}

static uint64_t rd_sleb(struct rd *r)
{
	uint64_t v = 0;
	for (unsigned sh = 0; r->p < r->end; sh += 7) {
		uint8_t b = *r->p++;
		r->va++;
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		if (!(b & 0x80)) {
			if (sh + 7 < 64 && (b & 0x40))
				v |= ~(uint64_t)0 << (sh + 7);
			return v;
		}
	}
	r->bad = 1;
	return v;
}

/* A DW_EH_PE-encoded pointer: absptr/udata/sdata 2, 4, 8, uleb128/sleb128,
 * applied pc-relative (0x10) or relative to @datarel (0x30).  0 + bad
 * otherwise. */
static uint64_t rd_enc(struct rd *r, uint8_t enc, uint64_t datarel)
{
	uint64_t at = r->va, v;
	switch (enc & 0x0f) {
	case 0x00: case 0x04: v = rd_n(r, 8); break;
	case 0x01: v = rd_uleb(r); break;
	case 0x09: v = rd_sleb(r); break;
	case 0x02: v = rd_n(r, 2); break;
	case 0x03: v = rd_n(r, 4); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_n(r, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_n(r, 4); break;
	case 0x0c: v = rd_n(r, 8); break;
	default: r->bad = 1; return 0;
	}
	switch (enc & 0x70) {
	case 0x00: return v;
	case 0x10: return v + at;
	case 0x30: return v + datarel;
	}
	r->bad = 1;
	return 0;
}

/* Bytes of the file at [va, va+len) through the PT_LOAD segments. */
static int rd_at(const struct elfinfo *ei, const char *raw, size_t rawsize, uint64_t va,
		 uint64_t len, struct rd *r)
{
	int64_t off = elfinfo_vaddr_to_offset(ei, va);
	if (off < 0 || (uint64_t)off > rawsize || len > rawsize - (uint64_t)off)
		return -1;
	r->p = (const uint8_t *)raw + off;
	r->end = r->p + len;
	r->va = va;
	r->bad = 0;
	return 0;
}

/* The FDE at @fva: its pc range, through its CIE's 'R' encoding, and
 * (@lsda not NULL) the address of its LSDA, through the CIE's 'L' encoding
 * (0: none; -1 returned when it cannot be read). */
static int fde_read(const struct elfinfo *ei, const char *raw, size_t rawsize, uint64_t fva,
		    uint64_t *lo, uint64_t *len, uint64_t *lsda)
{
	struct rd r;
	if (rd_at(ei, raw, rawsize, fva, 8, &r))
		return -1;
	uint64_t flen = rd_n(&r, 4);
	if (flen == 0 || flen >= 0xfffffff0u || rd_at(ei, raw, rawsize, fva + 4, flen, &r))
		return -1;
	uint64_t cie_ptr = rd_n(&r, 4);
	if (!cie_ptr)
		return -1; /* a CIE, not an FDE */
	uint64_t cva = fva + 4 - cie_ptr;
	struct rd c;
	if (rd_at(ei, raw, rawsize, cva, 4, &c))
		return -1;
	uint64_t clen = rd_n(&c, 4);
	if (clen == 0 || clen >= 0xfffffff0u || rd_at(ei, raw, rawsize, cva + 4, clen, &c) ||
	    rd_n(&c, 4) != 0)
		return -1;
	unsigned version = (unsigned)rd_n(&c, 1);
	const char *aug = (const char *)c.p;
	size_t al = strnlen(aug, (size_t)(c.end - c.p));
	if (al == (size_t)(c.end - c.p))
		return -1;
	c.p += al + 1;
	c.va += al + 1;
	uint8_t fenc = 0;    /* absptr */
	uint8_t lenc = 0xff; /* no LSDA */
	rd_uleb(&c); /* code alignment */
	rd_uleb(&c); /* data alignment (sleb: only skipped) */
	if (version == 1)
		rd_n(&c, 1);
	else
		rd_uleb(&c);
	if (aug[0] == 'z') {
		rd_uleb(&c);
		for (const char *a = aug + 1; *a && !c.bad; a++) {
			if (*a == 'R')
				fenc = (uint8_t)rd_n(&c, 1);
			else if (*a == 'P')
				rd_enc(&c, (uint8_t)rd_n(&c, 1) & 0x7f, 0);
			else if (*a == 'L')
				lenc = (uint8_t)rd_n(&c, 1);
			else if (*a != 'S' && *a != 'B')
				return -1;
		}
	} else if (aug[0]) {
		return -1;
	}
	if (c.bad)
		return -1;
	*lo = rd_enc(&r, fenc, 0);
	*len = rd_enc(&r, fenc & 0x0f, 0);
	if (r.bad)
		return -1;
	if (!lsda)
		return 0;
	*lsda = 0;
	if (aug[0] != 'z' || lenc == 0xff)
		return 0;
	uint64_t alen = rd_uleb(&r);
	if (r.bad || alen > (uint64_t)(r.end - r.p) || (lenc & 0x80)) /* indirect: not read */
		return -1;
	*lsda = rd_enc(&r, lenc, 0);
	return r.bad ? -1 : 0;
}

static int fde_range(const struct elfinfo *ei, const char *raw, size_t rawsize, uint64_t fva,
		     uint64_t *lo, uint64_t *len)
{
	return fde_read(ei, raw, rawsize, fva, lo, len, NULL);
}

/* The size of one value of DW_EH_PE encoding @enc (0: not fixed). */
static unsigned enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case 0x02: case 0x0a: return 2;
	case 0x03: case 0x0b: return 4;
	case 0x00: case 0x04: case 0x0c: return 8;
	}
	return 0;
}

/* The LSDA at @lsda of a function whose FDE begins at @start: the landing
 * pad of the call-site entry that holds @va (0: none).  0, or -1 when the
 * table cannot be read. */
static int lsda_pad(const struct elfinfo *ei, const char *raw, size_t rawsize, uint64_t lsda,
		    uint64_t start, uint64_t va, uint64_t *pad)
{
	struct rd r;
	int64_t off = elfinfo_vaddr_to_offset(ei, lsda);
	if (off < 0 || (uint64_t)off >= rawsize ||
	    rd_at(ei, raw, rawsize, lsda, rawsize - (uint64_t)off, &r))
		return -1;
	uint64_t lpstart = start;
	uint8_t e = (uint8_t)rd_n(&r, 1);
	if (e != 0xff) {
		if (e & 0x80)
			return -1;
		lpstart = rd_enc(&r, e, 0);
	}
	if ((uint8_t)rd_n(&r, 1) != 0xff) /* the type table's offset */
		rd_uleb(&r);
	uint8_t cse = (uint8_t)rd_n(&r, 1);
	uint64_t cslen = rd_uleb(&r);
	if (r.bad || cslen > (uint64_t)(r.end - r.p))
		return -1;
	r.end = r.p + cslen;
	*pad = 0;
	while (r.p < r.end) {
		uint64_t cs = rd_enc(&r, cse, 0), len = rd_enc(&r, cse, 0), lp = rd_enc(&r, cse, 0);
		rd_uleb(&r); /* the action */
		if (r.bad)
			return -1;
		if (va >= start + cs && va - (start + cs) < len) {
			*pad = lp ? lpstart + lp : 0;
			return 0;
		}
	}
	return 0; /* in no entry: no landing pad (the unwinder would terminate) */
}

int elfinfo_landing_pad(const struct elfinfo *ei, const void *rawv, size_t rawsize, uint64_t va,
			uint64_t *pad)
{
	const char *raw = rawv;
	struct rd r;
	if (!ei->eh_hdr || !raw || rd_at(ei, raw, rawsize, ei->eh_hdr, ei->eh_hdr_size, &r) ||
	    rd_n(&r, 1) != 1)
		return -1;
	uint64_t hdr = ei->eh_hdr;
	uint8_t pe = (uint8_t)rd_n(&r, 1), ce = (uint8_t)rd_n(&r, 1), te = (uint8_t)rd_n(&r, 1);
	rd_enc(&r, pe, hdr);
	uint64_t n = rd_enc(&r, ce, hdr);
	unsigned es = enc_size(te);
	if (r.bad || te == 0xff || !es || n > (uint64_t)(r.end - r.p) / (2 * es))
		return -1;
	/* the last entry whose start is at or below @va */
	size_t lo = 0, hi = (size_t)n;
	const uint8_t *tab = r.p;
	uint64_t tva = r.va;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct rd m = {tab + mid * 2 * es, tab + (mid + 1) * 2 * es, tva + mid * 2 * es, 0};
		if (rd_enc(&m, te, hdr) <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	struct rd m = {tab + (lo - 1) * 2 * es, tab + lo * 2 * es, tva + (lo - 1) * 2 * es, 0};
	uint64_t start = rd_enc(&m, te, hdr), fva = rd_enc(&m, te, hdr), flo, flen, lsda;
	if (m.bad || fde_read(ei, raw, rawsize, fva, &flo, &flen, &lsda) || flo != start ||
	    va - flo >= flen)
		return -1;
	if (!lsda) {
		*pad = 0; /* no LSDA: no landing pad anywhere in it */
		return 0;
	}
	return lsda_pad(ei, raw, rawsize, lsda, flo, va, pad);
}

/* One synthesized symbol per FDE of PT_GNU_EH_FRAME's search table. */
static int read_eh_frame(struct elfinfo *ei, Elf *e, struct symvec *sv, struct pool *pl)
{
	size_t phnum, rawsize;
	const char *raw = elf_rawfile(e, &rawsize);
	if (!raw || elf_getphdrnum(e, &phnum))
		return 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME)
			continue;
		struct rd r;
		uint64_t hdr = ph.p_vaddr;
		if (rd_at(ei, raw, rawsize, hdr, ph.p_filesz, &r) || rd_n(&r, 1) != 1)
			return 0;
		uint8_t pe = (uint8_t)rd_n(&r, 1), ce = (uint8_t)rd_n(&r, 1),
			te = (uint8_t)rd_n(&r, 1);
		rd_enc(&r, pe, hdr);
		uint64_t n = rd_enc(&r, ce, hdr);
		if (r.bad || te == 0xff || n > ph.p_filesz / 2)
			return 0;
		/* names: "[FILE+0xADDR]"; in a perf build-id cache
		 * (.../FILE/BUILD-ID/elf) FILE is two levels up */
		const char *path = ei->path ? ei->path : "?", *base = path, *b1 = NULL, *b2 = NULL;
		size_t blen;
		for (const char *c = path; *c; c++)
			if (*c == '/') {
				b2 = b1;
				b1 = base;
				base = c + 1;
			}
		blen = strlen(base);
		if (!strcmp(base, "elf") && b2) {
			base = b2;
			blen = (size_t)(strchr(b2, '/') - b2);
		}
		for (uint64_t k = 0; k < n && !r.bad; k++) {
			uint64_t start = rd_enc(&r, te, hdr), fva = rd_enc(&r, te, hdr), lo, len;
			if (r.bad || fde_range(ei, raw, rawsize, fva, &lo, &len) || lo != start ||
			    !len || !in_exec_segment(ei, lo))
				continue;
			char name[300];
			snprintf(name, sizeof name, "[%.*s+0x%" PRIx64 "]", (int)(blen > 256 ? 256 : blen),
				 base, lo);
			long off = pool_add(pl, name, NULL);
			if (off < 0 || symvec_push(sv, lo, len, off, 0, 0, 3) < 0)
				return -1;
			sv->v[sv->n - 1].is_fde = 1;
		}
		return 0;
	}
	return 0;
}

/* capstone, opened the first time a label is checked (drop_fallen_into):
 * linked, its 1.8 MB of relocations cost every process that links this
 * file ~370 page faults at start, ~4.6 ms on this VM (docs/bench.md), and
 * most never disassemble.  Not found: no label is dropped, as when
 * cs_open fails. */
#define CS_STR_(x) #x
#define CS_STR(x) CS_STR_(x)
static struct {
	cs_err (*open)(cs_arch, cs_mode, csh *);
	cs_err (*close)(csh *);
	cs_insn *(*malloc)(csh);
	void (*free)(cs_insn *, size_t);
	bool (*disasm_iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
	int ok;
} csf;
static pthread_once_t csf_once = PTHREAD_ONCE_INIT;

static void csf_load(void)
{
	void *h = dlopen("libcapstone.so." CS_STR(CS_API_MAJOR), RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&csf.open = dlsym(h, "cs_open");
	*(void **)&csf.close = dlsym(h, "cs_close");
	*(void **)&csf.malloc = dlsym(h, "cs_malloc");
	*(void **)&csf.free = dlsym(h, "cs_free");
	*(void **)&csf.disasm_iter = dlsym(h, "cs_disasm_iter");
	csf.ok = csf.open && csf.close && csf.malloc && csf.free && csf.disasm_iter;
}

/* Does the code before label @l, from the kept symbol @p, fall into it? */
static int falls_into(const struct elfinfo *ei, const char *raw, size_t rawsize, csh cs,
		      const struct elf_sym *p, const struct elf_sym *l)
{
	if (p->is_plt || l->addr - p->addr > 4096 || (p->size && p->addr + p->size <= l->addr))
		return 0;
	int64_t off = elfinfo_vaddr_to_offset(ei, p->addr);
	if (off < 0 || (uint64_t)off + (l->addr - p->addr) > rawsize ||
	    elfinfo_vaddr_to_offset(ei, l->addr - 1) != off + (int64_t)(l->addr - p->addr - 1))
		return 0;
	const uint8_t *code = (const uint8_t *)raw + off;
	size_t len = l->addr - p->addr;
	uint64_t a = p->addr;
	cs_insn *in = csf.malloc(cs);
	unsigned last = X86_INS_INVALID;
	if (!in)
		return 0;
	while (len && csf.disasm_iter(cs, &code, &len, &a, in))
		if (in->id != X86_INS_NOP)
			last = in->id;
	csf.free(in, 1);
	if (len || a != l->addr)
		return 0; /* does not decode up to the label: data, or not code */
	switch (last) {
	case X86_INS_INVALID:
	case X86_INS_RET:
	case X86_INS_RETF:
	case X86_INS_JMP:
	case X86_INS_LJMP:
	case X86_INS_UD2:
	case X86_INS_HLT:
	case X86_INS_INT3:
		return 0;
	default:
		return 1;
	}
}

/* Drops the labels that code falls into (see elfinfo.h). */
static void drop_fallen_into(const struct elfinfo *ei, Elf *e, struct elf_sym *v, size_t *n)
{
	size_t rawsize, w = 0;
	const char *raw = elf_rawfile(e, &rawsize);
	csh cs;
	int have = 0;
	for (size_t i = 0; i < *n; i++) {
		if (v[i].is_label && w && raw) {
			if (!have) {
				pthread_once(&csf_once, csf_load);
				if (!csf.ok || csf.open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
					raw = NULL;
				have = raw != NULL;
			}
			if (have && falls_into(ei, raw, rawsize, cs, &v[w - 1], &v[i]))
				continue;
		}
		v[w++] = v[i];
	}
	if (have)
		csf.close(&cs);
	*n = w;
}

static int load(struct elfinfo *ei, const char *path, int want_syms)
{
	memset(ei, 0, sizeof *ei);
	if (!elf_ready())
		return -EINVAL;
	int fd = open_regular(path);
	if (fd < 0)
		return fd;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int r = 0;
	struct symvec sv = {0};
	struct pool pl = {0};
	Elf *de = NULL; /* the debug file of a stripped file */
	int dfd = -1;
	if (!e || elf_kind(e) != ELF_K_ELF) {
		r = -ENOEXEC;
		goto out;
	}
	GElf_Ehdr eh;
	if (!gelf_getehdr(e, &eh)) {
		r = -ENOEXEC;
		goto out;
	}
	ei->path = strdup(path);
	ei->is_pie = eh.e_type == ET_DYN;
	ei->build_id_len = (uint8_t)note_build_id(e, ei->build_id);

	size_t phnum = 0;
	if (elf_getphdrnum(e, &phnum) == 0 && phnum) {
		ei->segs = calloc(phnum, sizeof *ei->segs);
		for (size_t i = 0; ei->segs && i < phnum; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
				ei->eh_hdr = ph.p_vaddr;
				ei->eh_hdr_size = ph.p_filesz;
			}
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			ei->segs[ei->nsegs++] = (struct elf_seg){ph.p_vaddr, ph.p_memsz, ph.p_offset,
								 ph.p_filesz, ph.p_flags};
		}
	}

	size_t shstrndx = 0;
	elf_getshdrstrndx(e, &shstrndx);
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
	GElf_Shdr sh, symtab_sh, dynsym_sh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *snm = elf_strptr(e, shstrndx, sh.sh_name);
		if (snm && sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) &&
		    (!strcmp(snm, ".plt") || !strcmp(snm, ".plt.sec") || !strcmp(snm, ".plt.got") ||
		     !strcmp(snm, ".iplt")) &&
		    ei->nstubsecs < sizeof ei->stubsecs / sizeof ei->stubsecs[0])
			ei->stubsecs[ei->nstubsecs++] = (struct elf_stubsec){
				sh.sh_addr, sh.sh_size, sh.sh_entsize >= 8 ? sh.sh_entsize : 16};
		if (sh.sh_type == SHT_SYMTAB) {
			symtab = scn;
			symtab_sh = sh;
		} else if (sh.sh_type == SHT_DYNSYM) {
			dynsym = scn;
			dynsym_sh = sh;
		}
	}
	ei->has_symtab = symtab != NULL;
	/* stripped: function symbols from its debug file, as perf and gdb do */
	if (!symtab && ei->build_id_len) {
		char link[256];
		debuglink(e, shstrndx, link, sizeof link);
		de = open_debug_file(path, ei->build_id, ei->build_id_len, link, &dfd,
				     &ei->debug_path);
	}
	if (de)
		ei->has_symtab = 1;
	if (!want_syms)
		goto out;
	if (symtab && read_symtab(ei, e, symtab, &symtab_sh, &sv, &pl) < 0)
		r = -ENOMEM;
	scn = NULL;
	while (!r && de && (scn = elf_nextscn(de, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB &&
		    read_symtab(ei, de, scn, &sh, &sv, &pl) < 0)
			r = -ENOMEM;
	if (!r && dynsym && read_symtab(ei, e, dynsym, &dynsym_sh, &sv, &pl) < 0)
		r = -ENOMEM;
	if (!r && read_plt(e, shstrndx, &sv, &pl) < 0)
		r = -ENOMEM;
	if (!r && !ei->has_symtab && read_eh_frame(ei, e, &sv, &pl) < 0)
		r = -ENOMEM;
	if (r)
		goto out;
	/* names were pool offsets while the pool could move; fix them up now */
	for (size_t i = 0; i < sv.n; i++)
		sv.v[i].name = pl.p + sv.nameoff[i];
	if (sv.n > 1) /* qsort(NULL, 0) is undefined */
		qsort(sv.v, sv.n, sizeof *sv.v, sym_cmp);
	/* one symbol per address: the first after sorting (sized, exported,
	 * then by name); the others are kept as its aliases, by name */
	size_t w = 0, na = 0;
	struct elf_sym *al = malloc((sv.n ? sv.n : 1) * sizeof *al);
	if (!al) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < sv.n; i++)
		if (!w || sv.v[w - 1].addr != sv.v[i].addr)
			sv.v[w++] = sv.v[i];
		else if (!sv.v[i].is_fde && !sv.v[i].is_plt)
			al[na++] = sv.v[i];
	qsort(al, na, sizeof *al, alias_cmp);
	ei->aliases = al;
	ei->naliases = na;
	drop_fallen_into(ei, e, sv.v, &w);
	ei->syms = sv.v;
	ei->nsyms = w;
	ei->strpool = pl.p;
	sv.v = NULL;
	pl.p = NULL;
out:
	free(sv.v);
	free(sv.nameoff);
	free(pl.p);
	if (de)
		elf_end(de);
	if (dfd >= 0)
		close(dfd);
	if (e)
		elf_end(e);
	close(fd);
	if (r)
		elfinfo_fini(ei);
	return r;
}

int elfinfo_load(struct elfinfo *ei, const char *path)
{
	return load(ei, path, 1);
}

int elfinfo_load_nosyms(struct elfinfo *ei, const char *path)
{
	return load(ei, path, 0);
}

void elfinfo_fini(struct elfinfo *ei)
{
	free(ei->path);
	free(ei->debug_path);
	free(ei->segs);
	free(ei->syms);
	free(ei->aliases);
	free(ei->strpool);
	memset(ei, 0, sizeof *ei);
}

const struct elf_sym *elfinfo_lookup(const struct elfinfo *ei, uint64_t vaddr)
{
	size_t lo = 0, hi = ei->nsyms;
	/* last symbol with addr <= vaddr */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ei->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* a PLT stub sits inside the [plt] range symbol: prefer the innermost */
	for (size_t i = lo; i-- > 0;) {
		const struct elf_sym *s = &ei->syms[i];
		if (s->size) {
			if (vaddr < s->addr + s->size)
				return s;
			/* a sized symbol that does not cover vaddr: maybe an enclosing one does */
			if (lo - i > 4)
				return NULL;
			continue;
		}
		/* unsized: extends to the next symbol */
		return s;
	}
	return NULL;
}

int elfinfo_stub(const struct elfinfo *ei, uint64_t vaddr, uint64_t *entry, uint64_t *end)
{
	for (unsigned i = 0; i < ei->nstubsecs; i++) {
		const struct elf_stubsec *x = &ei->stubsecs[i];
		if (vaddr < x->addr || vaddr - x->addr >= x->size)
			continue;
		uint64_t k = (vaddr - x->addr) / x->entsize;
		*entry = x->addr + k * x->entsize;
		*end = *entry + x->entsize;
		if (*end > x->addr + x->size)
			*end = x->addr + x->size;
		return 1;
	}
	return 0;
}

static const struct elf_sym *sym_at(const struct elfinfo *ei, uint64_t addr)
{
	size_t lo = 0, hi = ei->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ei->syms[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ei->nsyms && ei->syms[lo].addr == addr ? &ei->syms[lo] : NULL;
}

/* The first alias named @name or after it (aliases are sorted by name). */
static size_t alias_first(const struct elfinfo *ei, const char *name)
{
	size_t lo = 0, hi = ei->naliases;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(ei->aliases[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct elf_sym *elfinfo_find(const struct elfinfo *ei, const char *name)
{
	for (size_t i = 0; i < ei->nsyms; i++)
		if (!strcmp(ei->syms[i].name, name))
			return &ei->syms[i];
	/* another name of a function: the function's own symbol */
	size_t lo = alias_first(ei, name);
	if (lo < ei->naliases && !strcmp(ei->aliases[lo].name, name))
		return sym_at(ei, ei->aliases[lo].addr);
	return NULL;
}

const struct elf_sym *elfinfo_named_at(const struct elfinfo *ei, uint64_t addr, const char *name)
{
	const struct elf_sym *s = sym_at(ei, addr);
	if (!s || !strcmp(s->name, name))
		return s;
	size_t lo = alias_first(ei, name);
	for (; lo < ei->naliases && !strcmp(ei->aliases[lo].name, name); lo++)
		if (ei->aliases[lo].addr == addr)
			return s;
	return NULL;
}

int64_t elfinfo_vaddr_to_offset(const struct elfinfo *ei, uint64_t vaddr)
{
	for (size_t i = 0; i < ei->nsegs; i++) {
		const struct elf_seg *s = &ei->segs[i];
		if (vaddr >= s->vaddr && vaddr < s->vaddr + s->filesz)
			return (int64_t)(vaddr - s->vaddr + s->offset);
	}
	return -1;
}

int64_t elfinfo_offset_to_vaddr(const struct elfinfo *ei, uint64_t off)
{
	for (size_t i = 0; i < ei->nsegs; i++) {
		const struct elf_seg *s = &ei->segs[i];
		if (off >= s->offset && off < s->offset + s->filesz)
			return (int64_t)(off - s->offset + s->vaddr);
	}
	return -1;
}
