#include "chainjoin.h"

int chainjoin(const uint64_t *chain, size_t nchain, const uint64_t *stack, size_t nstack,
	      chainjoin_entry_fn entry, void *ctx, uint64_t *out, size_t max)
{
	if (!nstack || !nchain)
		return -1;
	/* chain[k] faces stack[nstack - 1 - k]: a return address is the
	 * instruction after its call, so its function is that of the byte
	 * before it (a call may be its function's last instruction) */
	size_t shared = nchain < nstack ? nchain : nstack;
	for (size_t k = 0; k < shared; k++) {
		uint64_t a = k ? chain[k] - 1 : chain[k];
		if (entry(ctx, a) != stack[nstack - 1 - k])
			return -1;
	}
	if (nchain <= nstack)
		return 0;
	size_t n = nchain - nstack;
	if (n > max)
		return -1;
	for (size_t i = 0; i < n; i++)
		out[i] = entry(ctx, chain[nchain - 1 - i] - 1);
	return (int)n;
}
