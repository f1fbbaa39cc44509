#include "fnmap.h"
#include "vec.h"

#include "dwcov.h"
#include "elfinfo.h"
#include "imgfind.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct fnfile {
	char *path;
	uint8_t build_id[20];
	uint8_t build_id_len;
	int state; /* 0 not tried, 1 loaded, -1 failed */
	int fd;	   /* for code bytes: -1 not open, -2 cannot */
	const uint8_t *code; /* the file mapped read-only, or NULL (then pread) */
	size_t code_len;
	struct elfinfo ei;
	struct dwcov dw; /* what DWARF covers (read on the first lookup) */
	int dw_state;	 /* 0 not read, 1 read */
	/* function entries no symbol or FDE may name (array_entries): file
	 * addresses, sorted, distinct; read on the first lookup that needs them */
	uint64_t *ent;
	size_t nent;
	int ent_state; /* 0 not read, 1 read */
	/* the owners of symbol-less FDE ranges found to be cold parts
	 * (fde_owner): pairs of file addresses (FDE start, owner entry; owner
	 * 0: none), in the order asked */
	uint64_t *cold;
	size_t ncold, capcold;
};

struct fnmapping {
	uint32_t pid;
	uint32_t file;
	uint64_t start, len, pgoff;
};

struct fnthread {
	uint32_t tid, pid;
};

struct fnmap {
	struct fnfile *files;
	size_t nfiles, capfiles;
	struct fnmapping *maps;
	size_t nmaps, capmaps;
	struct fnthread *thr;
	size_t nthr, capthr;
	size_t last_map; /* lookup cache */
	size_t nmissing;
};

struct fnmap *fnmap_alloc(void)
{
	return calloc(1, sizeof(struct fnmap));
}

void fnmap_free(struct fnmap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfiles; i++) {
		if (m->files[i].state == 1)
			elfinfo_fini(&m->files[i].ei);
		dwcov_fini(&m->files[i].dw);
		free(m->files[i].ent);
		free(m->files[i].cold);
		if (m->files[i].code)
			munmap((void *)m->files[i].code, m->files[i].code_len);
		if (m->files[i].fd >= 0)
			close(m->files[i].fd);
		free(m->files[i].path);
	}
	free(m->files);
	free(m->maps);
	free(m->thr);
	free(m);
}

int fnmap_add_thread(struct fnmap *m, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < m->nthr; i++)
		if (m->thr[i].tid == tid) {
			m->thr[i].pid = pid;
			return 0;
		}
	if (mt_grow((void **)&m->thr, &m->capthr, m->nthr + 1, sizeof *m->thr))
		return -ENOMEM;
	m->thr[m->nthr++] = (struct fnthread){tid, pid};
	return 0;
}

int fnmap_add_map(struct fnmap *m, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
		  const char *path, size_t pathlen, const uint8_t *build_id, size_t build_id_len)
{
	/* [stack], [heap], anonymous: no file.  The vdso has one where it was
	 * saved (perf's cache, mt-ptsim's images: by its build-id): its
	 * functions are entered by tail calls too (ld.so's resolver binding
	 * an IFUNC such as time() to the vdso's own) */
	int vdso = pathlen == 6 && !memcmp(path, "[vdso]", 6);
	if (!pathlen || (path[0] == '[' && !(vdso && build_id_len)))
		return 0;
	size_t f;
	for (f = 0; f < m->nfiles; f++)
		if (strlen(m->files[f].path) == pathlen && !memcmp(m->files[f].path, path, pathlen))
			break;
	if (f == m->nfiles) {
		if (mt_grow((void **)&m->files, &m->capfiles, m->nfiles + 1, sizeof *m->files))
			return -ENOMEM;
		struct fnfile *ff = &m->files[m->nfiles];
		memset(ff, 0, sizeof *ff);
		if (!(ff->path = strndup(path, pathlen)))
			return -ENOMEM;
		if (build_id_len > 20)
			build_id_len = 20;
		if (build_id_len)
			memcpy(ff->build_id, build_id, build_id_len);
		ff->build_id_len = (uint8_t)build_id_len;
		ff->fd = -1;
		m->nfiles++;
	}
	if (mt_grow((void **)&m->maps, &m->capmaps, m->nmaps + 1, sizeof *m->maps))
		return -ENOMEM;
	m->maps[m->nmaps++] = (struct fnmapping){pid, (uint32_t)f, start, len, pgoff};
	return 0;
}

/* The file of @ff's path and build-id (imgfind.h), loaded once. */
static void load_file(struct fnmap *m, struct fnfile *ff)
{
	char buf[4096], why[4400];
	ff->state = -1;
	if (img_find(ff->path, ff->build_id, ff->build_id_len, buf, sizeof buf, why, sizeof why) &&
	    !elfinfo_load(&ff->ei, buf)) {
		ff->state = 1;
		return;
	}
	if (ff->path[0] != '[') /* a vdso not saved: as before, no warning */
		m->nmissing++;
}

size_t fnmap_missing(const struct fnmap *m)
{
	return m->nmissing;
}

const char *fnmap_missing_path(const struct fnmap *m, size_t i)
{
	for (size_t f = 0; f < m->nfiles; f++)
		if (m->files[f].state == -1 && i-- == 0)
			return m->files[f].path;
	return NULL;
}

static uint32_t pid_of(const struct fnmap *m, uint32_t tid, int *known)
{
	for (size_t i = 0; i < m->nthr; i++)
		if (m->thr[i].tid == tid) {
			*known = 1;
			return m->thr[i].pid;
		}
	*known = 0;
	return tid;
}

static int in_map(const struct fnmapping *mp, uint64_t addr)
{
	return addr >= mp->start && addr - mp->start < mp->len;
}

static const struct fnmapping *find_map(struct fnmap *m, uint32_t tid, uint64_t addr)
{
	int known;
	uint32_t pid = pid_of(m, tid, &known);
	for (size_t i = m->nmaps; i-- > 0;)
		if (in_map(&m->maps[i], addr) && (m->maps[i].pid == pid || !known))
			return &m->maps[i];
	return NULL;
}

/* Opens @ff's file for its bytes, once: mapped read-only when it can be
 * (the checks read a few bytes per branch, and a system call each cost
 * more than the rest of mt-segment), else read by pread.  0, or -1: it
 * cannot be read. */
static int open_bytes(struct fnfile *ff)
{
	if (ff->fd == -1) {
		ff->fd = open(ff->ei.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		if (ff->fd < 0) {
			ff->fd = -2;
		} else if (fstat(ff->fd, &st) == 0 && st.st_size > 0) {
			void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, ff->fd, 0);
			if (p != MAP_FAILED) {
				ff->code = p;
				ff->code_len = (size_t)st.st_size;
			}
		}
	}
	return ff->fd < 0 ? -1 : 0;
}

size_t fnmap_read(struct fnmap *m, uint32_t tid, uint64_t addr, uint8_t *buf, size_t len)
{
	if (!m || !m->nmaps)
		return 0;
	const struct fnmapping *mp = find_map(m, tid, addr);
	if (!mp)
		return 0;
	struct fnfile *ff = &m->files[mp->file];
	if (ff->state == 0)
		load_file(m, ff);
	if (ff->state != 1 || open_bytes(ff))
		return 0;
	uint64_t off = addr - mp->start + mp->pgoff;
	if (addr + len > mp->start + mp->len)
		return 0;
	if (ff->code) { /* what pread would give: up to the end of the file */
		if (off >= ff->code_len)
			return 0;
		size_t n = ff->code_len - off < len ? ff->code_len - (size_t)off : len;
		memcpy(buf, ff->code + off, n);
		return n;
	}
	ssize_t n = pread(ff->fd, buf, len, (off_t)off);
	return n > 0 ? (size_t)n : 0;
}

/* A little-endian rel32. */
static int32_t rd32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

uint64_t fnmap_call_target(struct fnmap *m, uint32_t tid, uint64_t ret)
{
	uint8_t b[5];
	if (fnmap_read(m, tid, ret - 5, b, 5) != 5 || b[0] != 0xe8)
		return 0;
	return ret + (uint64_t)(int64_t)rd32(b + 1);
}

int fnmap_is_return_site(struct fnmap *m, uint32_t tid, uint64_t addr)
{
	struct fn_info fi;
	uint64_t target = fnmap_call_target(m, tid, addr);
	return target && fnmap_lookup(m, tid, target, &fi) && fi.entry == target;
}

int fnmap_jumps_into(struct fnmap *m, uint32_t tid, uint64_t x, uint64_t f)
{
	struct fn_info xi, fi;
	uint8_t b[4096];
	if (!fnmap_lookup(m, tid, x, &xi) || xi.entry != x || !fnmap_lookup(m, tid, f, &fi) ||
	    fi.entry != f || fi.is_plt)
		return 0;
	size_t n = xi.end - xi.entry < sizeof b ? (size_t)(xi.end - xi.entry) : sizeof b;
	n = fnmap_read(m, tid, x, b, n);
	for (size_t k = 0; k + 2 <= n; k++) {
		uint64_t to;
		if (b[k] == 0xeb)
			to = x + k + 2 + (uint64_t)(int64_t)(int8_t)b[k + 1];
		else if (b[k] == 0xe9 && k + 5 <= n)
			to = x + k + 5 + (uint64_t)(int64_t)rd32(b + k + 1);
		else
			continue;
		if (to > fi.entry && to < fi.end)
			return 1;
	}
	return 0;
}

int fnmap_call_sites(struct fnmap *m, uint32_t tid, uint64_t caller, uint64_t callee,
		     uint64_t except, int max)
{
	struct fn_info fi;
	if (!fnmap_lookup(m, tid, caller, &fi) || fi.end <= fi.entry)
		return 0;
	uint64_t lo = fi.entry, hi = fi.end - lo > 65536 ? lo + 65536 : fi.end;
	uint8_t b[4096 + 4];
	int found = 0;
	/* chunks overlapping by 4 bytes, so that no rel32 straddles two */
	for (uint64_t a = lo; a + 5 <= hi; a += 4096) {
		size_t want = hi - a < sizeof b ? (size_t)(hi - a) : sizeof b;
		size_t n = fnmap_read(m, tid, a, b, want);
		for (size_t i = 0; i + 5 <= n; i++) {
			if (b[i] != 0xe8)
				continue;
			int32_t rel = rd32(b + i + 1);
			/* the call at @except: its E8 after up to 3 prefixes
			 * (addr32, bnd, ...); another call is 5 bytes away */
			if (a + i + 5 + (uint64_t)(int64_t)rel == callee &&
			    (!except || a + i < except || a + i > except + 3) && ++found >= max)
				return found;
		}
		if (n < want)
			break;
	}
	return found;
}

int fnmap_calls(struct fnmap *m, uint32_t tid, uint64_t caller, uint64_t callee)
{
	return fnmap_call_sites(m, tid, caller, callee, 0, 1);
}

int fnmap_is_indirect_jump(struct fnmap *m, uint32_t tid, uint64_t addr)
{
	uint8_t b[6];
	size_t n = fnmap_read(m, tid, addr, b, sizeof b), i = 0;
	/* prefixes: notrack / segment (3e, 2e), REX */
	while (i + 1 < n && (b[i] == 0x3e || b[i] == 0x2e || (b[i] & 0xf0) == 0x40))
		i++;
	if (i + 1 >= n || b[i] != 0xff)
		return 0;
	unsigned reg = (b[i + 1] >> 3) & 7;
	return reg == 4 || reg == 5;
}

/* The loaded file mapped at @addr in thread @tid's process, and @addr's
 * ELF virtual address in it.  NULL: unknown. */
static struct fnfile *locate(struct fnmap *m, uint32_t tid, uint64_t addr,
			     const struct fnmapping **mpp, int64_t *vap)
{
	if (!m || !m->nmaps)
		return NULL;
	int known;
	uint32_t pid = pid_of(m, tid, &known);
	const struct fnmapping *mp = NULL;
	if (m->last_map < m->nmaps && in_map(&m->maps[m->last_map], addr) &&
	    (m->maps[m->last_map].pid == pid || !known))
		mp = &m->maps[m->last_map];
	/* latest mapping wins; an unknown thread searches every process */
	for (size_t i = m->nmaps; !mp && i-- > 0;)
		if (in_map(&m->maps[i], addr) && (m->maps[i].pid == pid || !known)) {
			mp = &m->maps[i];
			m->last_map = i;
		}
	if (!mp)
		return NULL;
	struct fnfile *ff = &m->files[mp->file];
	if (ff->state == 0)
		load_file(m, ff);
	if (ff->state != 1)
		return NULL;
	int64_t va = elfinfo_offset_to_vaddr(&ff->ei, addr - mp->start + mp->pgoff);
	if (va < 0)
		return NULL;
	*mpp = mp;
	*vap = va;
	return ff;
}

int fnmap_same_file(struct fnmap *m, uint32_t tid, uint64_t a, uint64_t b)
{
	const struct fnmapping *mp;
	int64_t va;
	struct fnfile *fa = locate(m, tid, a, &mp, &va);
	return fa && fa == locate(m, tid, b, &mp, &va);
}

/* The runtime address of file address @va of @ff mapped by @mp, or 0. */
static uint64_t runtime_of(const struct fnfile *ff, const struct fnmapping *mp, uint64_t va)
{
	for (size_t i = 0; i < ff->ei.nsegs; i++) {
		const struct elf_seg *sg = &ff->ei.segs[i];
		if (va >= sg->vaddr && va - sg->vaddr < sg->filesz) {
			uint64_t off = va - sg->vaddr + sg->offset;
			if (off >= mp->pgoff && off - mp->pgoff < mp->len)
				return mp->start + (off - mp->pgoff);
		}
	}
	return 0;
}

/* @ff's ELF entry (e_entry, 0: none) and whether it has a PT_INTERP
 * (a program the dynamic loader starts), from its bytes.  0, or -1: it
 * cannot be read. */
static int elf_start(struct fnfile *ff, uint64_t *entry, int *interp)
{
	Elf64_Ehdr eh;
	if (open_bytes(ff) || pread(ff->fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return -1;
	*entry = eh.e_entry;
	*interp = 0;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(ff->fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) !=
		    (ssize_t)sizeof ph)
			return -1;
		if (ph.p_type == PT_INTERP)
			*interp = 1;
	}
	return 0;
}

int fnmap_program_entry(struct fnmap *m, uint32_t tid, uint64_t ldso, uint64_t *entry)
{
	const struct fnmapping *mp;
	int64_t va;
	int known, interp;
	uint64_t e;
	struct fnfile *ff = locate(m, tid, ldso, &mp, &va);
	if (!ff || elf_start(ff, &e, &interp) || interp || !e || (uint64_t)va != e)
		return 0;
	uint32_t pid = pid_of(m, tid, &known);
	/* in map order: the program is mapped first (then the loader, then
	 * what it loads), so the other files are seldom read for this */
	for (size_t i = 0; i < m->nmaps; i++) {
		const struct fnmapping *p = &m->maps[i];
		struct fnfile *pf = &m->files[p->file];
		if ((known && p->pid != pid) || pf == ff)
			continue;
		if (pf->state == 0)
			load_file(m, pf);
		uint64_t pe, r;
		if (pf->state == 1 && !elf_start(pf, &pe, &interp) && interp && pe &&
		    (r = runtime_of(pf, p, pe))) {
			*entry = r;
			return 1;
		}
	}
	return 0;
}

int fnmap_landing_pad(struct fnmap *m, uint32_t tid, uint64_t addr, uint64_t *pad)
{
	const struct fnmapping *mp;
	int64_t va;
	uint64_t p;
	struct fnfile *ff = locate(m, tid, addr, &mp, &va);
	if (!ff || open_bytes(ff) || !ff->code ||
	    elfinfo_landing_pad(&ff->ei, ff->code, ff->code_len, (uint64_t)va, &p))
		return 0;
	*pad = p ? p + (addr - (uint64_t)va) : 0;
	return 1;
}

/* The function whose cold part is the symbol-less FDE range [@lo, @hi)
 * (file addresses) of a stripped file: the code of one other function jumps
 * into it (jmp or jcc rel32) and nothing calls its start (E8 rel32).  The
 * file's executable bytes are read at every offset, not instruction by
 * instruction, so a false hit is possible: the owner must hold more than
 * half of the jumps' sources.  Only ranges not 8-byte aligned are tried
 * (gcc aligns functions, not the .cold parts it splits off), which also
 * keeps a tail-called function from being taken for a cold part.  0: none. */
static uint64_t fde_owner(struct fnfile *ff, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < ff->ncold; i++)
		if (ff->cold[2 * i] == lo)
			return ff->cold[2 * i + 1];
	uint64_t owner = 0, src_fn[64];
	size_t nsrc = 0, total = 0;
	int called = 0;
	if ((lo & 7) && !open_bytes(ff) && ff->code) {
		for (size_t k = 0; k < ff->ei.nsegs && !called; k++) {
			const struct elf_seg *g = &ff->ei.segs[k];
			if (!(g->flags & PF_X) || g->offset >= ff->code_len)
				continue;
			size_t n = g->filesz < ff->code_len - g->offset ? (size_t)g->filesz
									 : ff->code_len - (size_t)g->offset;
			const uint8_t *b = ff->code + g->offset;
			for (size_t i = 0; i + 6 <= n; i++) {
				size_t len = b[i] == 0xe8 || b[i] == 0xe9 ? 5
					     : b[i] == 0x0f && (b[i + 1] & 0xf0) == 0x80 ? 6 : 0;
				if (!len)
					continue;
				uint64_t src = g->vaddr + i;
				uint64_t to = src + len + (uint64_t)(int64_t)rd32(b + i + len - 4);
				if (to < lo || to >= hi || (src >= lo && src < hi))
					continue;
				if (b[i] == 0xe8) {
					called |= to == lo;
					continue;
				}
				const struct elf_sym *x = elfinfo_lookup(&ff->ei, src);
				total++;
				if (x && nsrc < sizeof src_fn / sizeof *src_fn)
					src_fn[nsrc++] = x->addr;
			}
		}
		/* the most frequent source function, if more than half of all */
		size_t best = 0;
		for (size_t i = 0; i < nsrc && !called; i++) {
			size_t c = 0;
			for (size_t j = 0; j < nsrc; j++)
				c += src_fn[j] == src_fn[i];
			if (c > best) {
				best = c;
				owner = src_fn[i];
			}
		}
		if (called || 2 * best <= total)
			owner = 0;
	}
	if (mt_grow((void **)&ff->cold, &ff->capcold, 2 * ff->ncold + 2, sizeof *ff->cold) == 0) {
		ff->cold[2 * ff->ncold] = lo;
		ff->cold[2 * ff->ncold + 1] = owner;
		ff->ncold++;
	}
	return owner;
}

int fnmap_owner(struct fnmap *m, uint32_t tid, uint64_t addr, struct fn_info *out)
{
	if (!fnmap_lookup(m, tid, addr, out))
		return 0;
	if (!out->is_plt) {
		/* a stripped file's cold part: only its own FDE names it */
		const struct fnmapping *mp;
		int64_t va;
		struct fnfile *ff = locate(m, tid, addr, &mp, &va);
		const struct elf_sym *x = ff ? elfinfo_lookup(&ff->ei, (uint64_t)va) : NULL;
		if (x && x->is_fde) {
			uint64_t bias = addr - (uint64_t)va;
			uint64_t o = fde_owner(ff, x->addr, out->end - bias);
			return o ? fnmap_lookup(m, tid, o + bias, out) : 1;
		}
	}
	const char *c = out->name ? strstr(out->name, ".cold") : NULL;
	if (!c || (c[5] && c[5] != '.'))
		return 1;
	char base[512];
	size_t n = (size_t)(c - out->name);
	const struct fnmapping *mp;
	int64_t va;
	struct fnfile *ff = locate(m, tid, addr, &mp, &va);
	if (!ff || n >= sizeof base)
		return 0;
	memcpy(base, out->name, n);
	base[n] = 0;
	const struct elf_sym *x = elfinfo_find(&ff->ei, base);
	if (!x)
		return 0;
	return fnmap_lookup(m, tid, x->addr + (addr - (uint64_t)va), out);
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int in_exec_seg(const struct elfinfo *ei, uint64_t va)
{
	for (size_t i = 0; i < ei->nsegs; i++)
		if ((ei->segs[i].flags & PF_X) && va >= ei->segs[i].vaddr &&
		    va - ei->segs[i].vaddr < ei->segs[i].memsz)
			return 1;
	return 0;
}

/* The function entries that the loader calls through a pointer: every
 * element of .preinit_array, .init_array and .fini_array (the link writes
 * each pointer's value into the section, also where a relative relocation
 * sets it at load time), and the starts of .init and .fini.  A stripped
 * shared object names none of them: crtstuff's __do_global_dtors_aux and
 * frame_dummy have neither a symbol nor an FDE, and a trace that begins
 * inside them (a snapshot of a process's exit) learns them from a return
 * alone.  Little-endian ELF64 only; anything else gives none. */
static void array_entries(struct fnfile *ff)
{
	ff->ent_state = 1;
	if (open_bytes(ff) || !ff->code || ff->code_len < sizeof(Elf64_Ehdr))
		return;
	const uint8_t *f = ff->code;
	Elf64_Ehdr eh;
	memcpy(&eh, f, sizeof eh);
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    eh.e_shoff > ff->code_len || eh.e_shnum > (ff->code_len - eh.e_shoff) / sizeof(Elf64_Shdr))
		return;
	Elf64_Shdr str = {0};
	if (eh.e_shstrndx < eh.e_shnum)
		memcpy(&str, f + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof str, sizeof str);
	size_t cap = 0;
	for (size_t i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr sh;
		memcpy(&sh, f + eh.e_shoff + i * sizeof sh, sizeof sh);
		uint64_t one[1], *v = one;
		size_t n = 0;
		if (sh.sh_type == SHT_INIT_ARRAY || sh.sh_type == SHT_FINI_ARRAY ||
		    sh.sh_type == SHT_PREINIT_ARRAY) {
			if (sh.sh_offset > ff->code_len || sh.sh_size > ff->code_len - sh.sh_offset)
				continue;
			n = (size_t)(sh.sh_size / 8);
			v = NULL;
		} else if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) &&
			   str.sh_type == SHT_STRTAB && sh.sh_name < str.sh_size &&
			   str.sh_offset <= ff->code_len && str.sh_size <= ff->code_len - str.sh_offset) {
			const char *nm = (const char *)f + str.sh_offset + sh.sh_name;
			size_t left = (size_t)(str.sh_size - sh.sh_name);
			if ((left > 5 && !memcmp(nm, ".init", 6)) || (left > 5 && !memcmp(nm, ".fini", 6))) {
				one[0] = sh.sh_addr;
				n = 1;
			}
		}
		for (size_t k = 0; k < n; k++) {
			uint64_t a = v ? v[k] : rd64(f + sh.sh_offset + k * 8);
			if (!in_exec_seg(&ff->ei, a))
				continue;
			if (mt_grow((void **)&ff->ent, &cap, ff->nent + 1, sizeof *ff->ent))
				return;
			ff->ent[ff->nent++] = a;
		}
	}
	if (!ff->nent)
		return;
	qsort(ff->ent, ff->nent, sizeof *ff->ent, cmp_u64);
	size_t w = 1;
	for (size_t i = 1; i < ff->nent; i++)
		if (ff->ent[i] != ff->ent[w - 1])
			ff->ent[w++] = ff->ent[i];
	ff->nent = w;
}

/* The symbol with the greatest address <= @va, or NULL. */
static const struct elf_sym *sym_at_or_below(const struct elfinfo *ei, uint64_t va)
{
	size_t lo = 0, hi = ei->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ei->syms[mid].addr <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &ei->syms[lo - 1] : NULL;
}

/* The function holding @va, which no symbol holds, that only an array
 * entry (array_entries) names: the greatest entry E <= @va with no symbol
 * between E and @va, up to the next symbol or entry.  1: found, *e0 = E
 * (a file address). */
static int array_function(struct fnfile *ff, uint64_t va, uint64_t *e0)
{
	if (!ff->ent_state)
		array_entries(ff);
	size_t lo = 0, hi = ff->nent;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ff->ent[mid] <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return 0;
	uint64_t e = ff->ent[lo - 1];
	const struct elf_sym *b = sym_at_or_below(&ff->ei, va);
	if (b && b->addr >= e && b->addr != e)
		return 0; /* a symbol (sized, not holding @va, or @s) lies between */
	if (b && b->addr == e)
		return 0; /* the symbol itself names it */
	uint64_t end = lo < ff->nent ? ff->ent[lo] : UINT64_MAX;
	const struct elf_sym *n = b ? b + 1 : ff->ei.syms;
	if (n < ff->ei.syms + ff->ei.nsyms && n->addr < end)
		end = n->addr;
	if (end <= va)
		return 0;
	*e0 = e;
	return 1;
}

int fnmap_pointer_entry(struct fnmap *m, uint32_t tid, uint64_t addr, uint64_t *entry)
{
	const struct fnmapping *mp;
	int64_t va;
	uint64_t e;
	struct fnfile *ff = locate(m, tid, addr, &mp, &va);
	if (!ff || elfinfo_lookup(&ff->ei, (uint64_t)va) ||
	    elfinfo_stub(&ff->ei, (uint64_t)va, &e, &e) || !array_function(ff, (uint64_t)va, &e))
		return 0;
	*entry = e + (addr - (uint64_t)va);
	return 1;
}

int fnmap_lookup(struct fnmap *m, uint32_t tid, uint64_t addr, struct fn_info *out)
{
	const struct fnmapping *mp;
	int64_t va;
	struct fnfile *ff = locate(m, tid, addr, &mp, &va);
	if (!ff)
		return 0;
	const struct elf_sym *s = elfinfo_lookup(&ff->ei, (uint64_t)va);
	uint64_t bias = addr - (uint64_t)va;
	uint64_t se, sx;
	if (elfinfo_stub(&ff->ei, (uint64_t)va, &se, &sx)) {
		/* a PLT stub, named or not: its own entry (docs/exactness.md) */
		memset(out, 0, sizeof *out);
		out->entry = se + bias;
		out->end = sx + bias;
		out->name = s && s->is_plt && s->addr == se ? s->name : "[plt]";
		out->is_plt = 1;
		return 1;
	}
	if (!s)
		return 0;
	uint64_t end;
	if (s->size)
		end = s->addr + s->size;
	else {
		const struct elf_sym *n = s + 1, *lim = ff->ei.syms + ff->ei.nsyms;
		while (n < lim && n->addr <= s->addr)
			n++;
		end = n < lim ? n->addr : (uint64_t)va + 1;
		if (n >= lim) { /* last symbol, unsized: up to the end of the mapping */
			uint64_t mend = mp->start + mp->len - bias;
			end = mend > s->addr ? mend : (uint64_t)va + 1;
		}
	}
	if (!ff->dw_state) {
		dwcov_load(&ff->dw, ff->ei.path, ff->ei.build_id, ff->ei.build_id_len);
		ff->dw_state = 1;
	}
	out->may_inline = dwcov_any(&ff->dw, s->addr, end);
	out->ninl = dwcov_inline(&ff->dw, s->addr, end, &out->inl);
	out->inl_bias = bias;
	uint64_t bb = 0;
	out->inl_bits = out->ninl ? dwcov_inline_bits(&ff->dw, s->addr, end, &bb) : NULL;
	out->inl_bits_base = bb + bias;
	out->ninlb = out->ninl ? dwcov_inline_bounds(&ff->dw, s->addr, end, &out->inlb) : 0;
	out->entry = s->addr + bias;
	out->end = end + bias;
	out->name = s->name;
	out->is_plt = s->is_plt;
	return 1;
}
