#include "sampstack.h"

#include <string.h>

#include "fnmap.h"

static uint64_t entry_of(struct fnmap *fns, uint32_t tid, uint64_t a)
{
	struct fn_info fi;
	return fns && fnmap_lookup(fns, tid, a, &fi) ? fi.entry : a;
}

/* Length of an FF /2 (indirect near call) from its ModRM byte on. */
static unsigned modrm_len(uint8_t m, uint8_t sib)
{
	unsigned mod = m >> 6, rm = m & 7;
	if (mod == 3)
		return 2;
	if (mod == 0)
		return rm == 4 ? ((sib & 7) == 5 ? 7 : 3) : rm == 5 ? 6 : 2;
	if (mod == 1)
		return rm == 4 ? 4 : 3;
	return rm == 4 ? 7 : 6;
}

/* Does a call instruction end at @ret, or (an LBR call stack gives the
 * call sites themselves) begin there?  1 yes, 0 no, -1 unknown (no code). */
static int after_call(struct fnmap *fns, uint32_t tid, uint64_t ret)
{
	uint8_t b[16];
	if (!fns || ret < 8 || fnmap_read(fns, tid, ret - 8, b, 16) != 16)
		return -1;
	if (b[3] == 0xe8 || b[8] == 0xe8)
		return 1;
	for (unsigned l = 2; l <= 7; l++) {
		const uint8_t *p = b + 8 - l;
		if (p[0] == 0xff && (p[1] >> 3 & 7) == 2 && modrm_len(p[1], l > 2 ? p[2] : 0) == l)
			return 1;
	}
	/* at a call: FF /2, with a REX prefix or not */
	const uint8_t *p = b + 8 + ((b[8] & 0xf0) == 0x40);
	return p[0] == 0xff && (p[1] >> 3 & 7) == 2;
}

/* The target of the direct call that ends at @ret (a return address) or
 * begins there (an LBR call site), or 0. */
static uint64_t call_target(struct fnmap *fns, uint32_t tid, uint64_t ret)
{
	if (!fns)
		return 0;
	uint64_t to = fnmap_call_target(fns, tid, ret);
	return to ? to : fnmap_call_target(fns, tid, ret + 5);
}

/* Where the function at @entry has set up its frame pointer: the offset
 * after its [endbr64;] push %rbp; mov %rsp,%rbp.  0: no such prologue; -1
 * unknown (no code). */
static int fp_prologue(struct fnmap *fns, uint32_t tid, uint64_t entry)
{
	uint8_t b[8];
	if (fnmap_read(fns, tid, entry, b, 8) != 8)
		return -1;
	unsigned k = !memcmp(b, "\xf3\x0f\x1e\xfa", 4) ? 4 : 0; /* endbr64 */
	return b[k] == 0x55 && !memcmp(b + k + 1, "\x48\x89\xe5", 3) ? (int)k + 4 : 0;
}

/* Has the function at @entry no frame of its own at @ip (a frame-pointer
 * walk from there skips its caller)?  1 yes, 0 no or unknown. */
static int no_frame_at(struct fnmap *fns, uint32_t tid, uint64_t entry, uint64_t ip)
{
	uint8_t c = 0;
	int pro = fp_prologue(fns, tid, entry);
	if (pro <= 0)
		return pro == 0; /* no frame pointer at all */
	if (ip < entry + (uint64_t)pro)
		return 1; /* before the frame is set up */
	return fnmap_read(fns, tid, ip, &c, 1) == 1 && c == 0xc3; /* at its ret: popped */
}

static int same(const struct sstk_frame *a, const struct sstk_frame *b)
{
	return a->func == b->func && a->link == b->link;
}

size_t sampstack_build(struct fnmap *fns, uint32_t tid, const uint64_t *ips, uint32_t n,
		       uint32_t nroot, const struct sstk_frame *prev, size_t nprev, struct sstk_frame *out,
		       size_t max, unsigned flags)
{
	int repair = !(flags & SSTK_NO_REPAIR);
	/* --kernel: the kernel's frames come first; the user frame below them
	 * is where the thread entered the kernel (after its syscall, or where
	 * an interrupt came), no return address */
	uint32_t nk = 0;
	while (nk < n && ips[nk] >> 63)
		nk++;
	uint32_t lf = nk < n ? nk : 0; /* the user leaf */
	uint32_t m = n;
	/* rule 1: the chain ends before the first entry that is no return address */
	for (uint32_t k = 1; repair && k < n; k++)
		if (k != lf && after_call(fns, tid, ips[k]) == 0) {
			m = k;
			break;
		}
	if (!m || max < (size_t)m + 1)
		return 0;
	/* root first: frame d runs at ips[m-1-d], linked by its parent's ip */
	size_t w = 0;
	for (uint32_t d = 0; d < m; d++) {
		uint32_t k = m - 1 - d;
		uint64_t ip = ips[k];
		out[w++] = (struct sstk_frame){entry_of(fns, tid, k && k != lf ? ip - 1 : ip),
					       d ? ips[m - d] : 0, 0};
	}
	/* the root chain's frames: the functions of its return addresses
	 * (what rule 1 cut of them is gone) */
	for (uint32_t d = 0; nroot > n - m && d < nroot - (n - m); d++)
		out[d].inferred = SSTK_ROOTED;
	/* rule 2: the user leaf's hidden caller (out[u]: the user leaf) */
	if (repair && m >= lf + 2) {
		size_t u = m - 1 - lf;
		uint64_t ret = ips[lf + 1], leaf = out[u].func;
		uint64_t tgt = call_target(fns, tid, ret);
		struct fn_info fi;
		/* the hidden caller keeps a frame pointer (else the walk would not
		 * have skipped it, and a function without one that calls nothing
		 * here jumped to the leaf: a tail call, no frame of its own) */
		if (tgt && tgt != leaf && no_frame_at(fns, tid, leaf, ips[lf]) &&
		    fnmap_lookup(fns, tid, tgt, &fi) && fi.entry == tgt && !fi.is_plt &&
		    fp_prologue(fns, tid, tgt) > 0) {
			memmove(out + u + 1, out + u, (w - u) * sizeof *out);
			out[u + 1].link = 0; /* called from somewhere in tgt */
			out[u] = (struct sstk_frame){tgt, ret, SSTK_STITCHED};
			w++;
		}
	}
	/* rule 3: a root cut off, aligned with the previous stack */
	if (repair && nprev && out[0].func != prev[0].func) {
		size_t best = 0, bestlen = 0;
		for (size_t j = 1; j < nprev; j++) {
			if (prev[j].func != out[0].func)
				continue;
			size_t l = 1;
			while (l < w && j + l < nprev && same(&prev[j + l], &out[l]))
				l++;
			if (l > bestlen)
				best = j, bestlen = l;
		}
		if (bestlen && best + w <= max) {
			memmove(out + best, out, w * sizeof *out);
			for (size_t j = 0; j < best; j++) {
				out[j] = prev[j];
				out[j].inferred = SSTK_STITCHED;
			}
			out[best].link = prev[best].link;
			w += best;
		}
	}
	return w;
}
