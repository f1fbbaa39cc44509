#include "symz.h"

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

/* Is @file the binary @b wants (build-id check)?  1 yes, 0 no (*found_bid set). */
static int bin_candidate(struct bin *b, const char *file, uint8_t found[20], int *found_len)
{
	struct stat sb;
	if (stat(file, &sb) < 0 || !S_ISREG(sb.st_mode))
		return 0;
	int n = elf_read_build_id(file, found);
	*found_len = n;
	if (n < 0)
		return 0;
	if (!b->bidlen)
		return 1;
	return n == b->bidlen && !memcmp(found, b->bid, (size_t)n);
}

void bin_find(struct ctx *c, struct bin *b)
{
	char cand[8][4200];
	int nc = 0;
	const struct symz_opts *o = c->o;
	if (o->images) {
		if (b->bidlen) {
			/* perf's build-id cache layout (mt-ptsim's images/) */
			sfmt(cand[nc++], sizeof cand[0], "%s/.build-id/%.2s/%s/elf", o->images,
			     b->bidhex, b->bidhex + 2);
			sfmt(cand[nc++], sizeof cand[0], "%s%s%s/%s/elf", o->images,
			     b->path[0] == '/' ? "" : "/", b->path, b->bidhex);
			sfmt(cand[nc++], sizeof cand[0], "%s/%s", o->images, b->bidhex);
		}
		sfmt(cand[nc++], sizeof cand[0], "%s%s%s", o->images, b->path[0] == '/' ? "" : "/",
		     b->path);
		sfmt(cand[nc++], sizeof cand[0], "%s/%s", o->images, base_name(b->path));
	}
	if (o->symfs)
		sfmt(cand[nc++], sizeof cand[0], "%s%s", o->symfs, b->path);
	sfmt(cand[nc++], sizeof cand[0], "%s", b->path);
	char why[600] = "";
	for (int i = 0; i < nc; i++) {
		uint8_t found[20];
		int flen = -1;
		if (bin_candidate(b, cand[i], found, &flen)) {
			int r = elfinfo_load_nosyms(&b->ei, cand[i]);
			if (r < 0) {
				sfmt(why, sizeof why, "%s: %s", cand[i],
					 r == -ENOEXEC ? "not an ELF file" : strerror(-r));
				continue;
			}
			b->file = arena_strndup(&c->ar, cand[i], strlen(cand[i]));
			b->state = b->file ? 1 : -1;
			if (b->state > 0 && !b->bidlen && b->ei.build_id_len) {
				/* the cache is keyed by build-id: take the file's own */
				memcpy(b->bid, b->ei.build_id, b->ei.build_id_len);
				b->bidlen = b->ei.build_id_len;
				buildid_hex(b->bidhex, b->bid, b->bidlen);
			}
			return;
		}
		if (flen >= 0 && !why[0]) {
			char fh[41];
			buildid_hex(fh, found, (size_t)flen);
			sfmt(why, sizeof why, "%s has build-id %s", cand[i], flen ? fh : "(none)");
		}
	}
	b->state = -1;
	warnf(c, 1, "binary %s (build-id %s) not found%s%s; its addresses are named [unknown @ ...]",
	      b->path, b->bidlen ? b->bidhex : "none", why[0] ? ": " : "", why);
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
