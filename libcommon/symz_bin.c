#include "symz.h"
#include "imgfind.h"

/* Binaries: one entry per (path, build-id) of the map records; bin_find
 * finds the file that holds a binary's code, bin_syms its symbol table. */
uint32_t bin_get(struct ctx *c, const char *path, size_t plen, const uint8_t *bid,
			uint8_t bidlen)
{
	for (size_t i = 0; i < c->nbins; i++) {
		struct bin *b = &c->bins[i];
		if (b->bidlen == bidlen && !memcmp(b->bid, bid, bidlen) && strlen(b->path) == plen &&
		    !memcmp(b->path, path, plen))
			return (uint32_t)i;
	}
	struct bin nb;
	memset(&nb, 0, sizeof nb);
	nb.path = arena_strndup(&c->ar, path, plen);
	if (!nb.path)
		return NONE;
	if (bidlen > 20)
		bidlen = 20;
	memcpy(nb.bid, bid, bidlen);
	nb.bidlen = bidlen;
	buildid_hex(nb.bidhex, bid, bidlen);
	if (VEC_PUSH(c->bins, c->nbins, c->capbins, nb) < 0)
		return NONE;
	return (uint32_t)(c->nbins - 1);
}

int is_file_backed(const char *p)
{
	if (p[0] != '/' || !strncmp(p, "//anon", 6) || !strncmp(p, "/dev/zero", 9) ||
	    !strncmp(p, "/tmp/perf-", 10) || !strncmp(p, "/memfd:", 7) ||
	    !strncmp(p, "/SYSV", 5))
		return 0;
	const char *d = strstr(p, " (deleted)");
	return !(d && !d[10]);
}

/* Whether @p is the kernel's [vdso] and its image is saved under its
 * build-id (perf's cache, mt run's images, mt-ptsim's images/[vdso]/ID/vdso:
 * imgfind.h).  One that is not stays an anonymous mapping (a perf map may
 * name it), as before. */
int vdso_saved(const char *p, const uint8_t *bid, uint8_t bidlen)
{
	char file[4096], why[256];
	return !strcmp(p, "[vdso]") && bidlen &&
	       img_find(p, bid, bidlen, file, sizeof file, why, sizeof why);
}

/* The binary's file (imgfind.h), and its separate debug file when it has one:
 * llvm-symbolizer reads the one elfinfo and dwcov read. */
void bin_find(struct ctx *c, struct bin *b)
{
	char file[4096], dbg[4096], why[4400];
	if (img_find(b->path, b->bid, b->bidlen, file, sizeof file, why, sizeof why)) {
		int r = elfinfo_load_nosyms(&b->ei, file);
		if (r == 0) {
			b->file = arena_strndup(&c->ar, file, strlen(file));
			b->sym = b->file;
			b->state = b->file ? 1 : -1;
			if (b->state > 0 && !b->bidlen && b->ei.build_id_len) {
				/* the cache is keyed by build-id: take the file's own */
				memcpy(b->bid, b->ei.build_id, b->ei.build_id_len);
				b->bidlen = b->ei.build_id_len;
				buildid_hex(b->bidhex, b->bid, b->bidlen);
			}
			if (b->state > 0 && img_find_debug(file, b->bid, b->bidlen, dbg, sizeof dbg) &&
			    !(b->sym = arena_strndup(&c->ar, dbg, strlen(dbg))))
				b->sym = b->file;
			return;
		}
		sfmt(why, sizeof why, "%s: %s", file, r == -ENOEXEC ? "not an ELF file" : strerror(-r));
	}
	b->state = -1;
	int nf = !strcmp(why, "not found");
	warnf(c, 1, "binary %s (build-id %s) not found%s%s; its addresses are named [unknown @ ...]",
	      b->path, b->bidlen ? b->bidhex : "none", nf ? "" : ": ", nf ? "" : why);
}

const struct elfinfo *bin_syms(struct bin *b)
{
	if (!b->syms_loaded) {
		struct elfinfo full;
		b->syms_loaded = 1;
		if (elfinfo_load(&full, b->file) == 0) {
			elfinfo_fini(&b->ei);
			b->ei = full;
		}
	}
	return &b->ei;
}

/* ELF symbol table fallback for a result in a found binary. */
