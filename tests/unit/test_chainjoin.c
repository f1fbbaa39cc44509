/* libcommon/chainjoin.c: a call chain joined to a trace's stack. Functions
 * here are 0x100-byte ranges: the entry of an address is its 0x100 multiple. */
#include "chainjoin.h"
#include "t.h"

static uint64_t entry(void *ctx, uint64_t a)
{
	(void)ctx;
	return a & ~(uint64_t)0xff;
}

int main(void)
{
	uint64_t out[8];
	/* chain: ip in 0x500; return addresses into 0x400, 0x300, 0x200, 0x100 */
	const uint64_t chain[] = {0x510, 0x420, 0x330, 0x240, 0x150};
	const uint64_t stack[] = {0x300, 0x400, 0x500}; /* outermost first */
	int n = chainjoin(chain, 5, stack, 3, entry, NULL, out, 8);
	T_CHECK(n == 2 && out[0] == 0x100 && out[1] == 0x200,
		"the frames beyond the root, outermost first (n=%d)", n);
	/* a return address that is the first byte after a call at a function's
	 * end: its function is that of the byte before it */
	const uint64_t chain_end[] = {0x510, 0x500, 0x330};
	const uint64_t stack2[] = {0x400, 0x500};
	n = chainjoin(chain_end, 3, stack2, 2, entry, NULL, out, 8);
	T_CHECK(n == 1 && out[0] == 0x300, "return address minus 1 (n=%d)", n);
	/* a level that differs: nothing */
	const uint64_t stack3[] = {0x300, 0x400, 0x600};
	T_CHECK(chainjoin(chain, 5, stack3, 3, entry, NULL, out, 8) == -1, "top differs: not joined");
	const uint64_t stack4[] = {0x200, 0x400, 0x500};
	T_CHECK(chainjoin(chain, 5, stack4, 3, entry, NULL, out, 8) == -1,
		"the root differs: not joined");
	/* a chain no longer than the stack adds nothing */
	T_CHECK(chainjoin(chain, 3, stack, 3, entry, NULL, out, 8) == 0, "same depth: 0 frames");
	T_CHECK(chainjoin(chain, 2, stack, 3, entry, NULL, out, 8) == 0,
		"a shorter chain that matches: 0 frames");
	T_CHECK(chainjoin(chain, 5, stack, 3, entry, NULL, out, 1) == -1, "no room: not joined");
	T_CHECK(chainjoin(chain, 0, stack, 3, entry, NULL, out, 8) == -1 &&
			chainjoin(chain, 5, stack, 0, entry, NULL, out, 8) == -1,
		"empty chain or stack: not joined");
	return T_DONE();
}
