/* The stack of one stack sample, repaired where a frame-pointer walk or a
 * short stack copy lost frames (docs/sampling.md).
 *
 * A sample's callchain (mt-decode: the ip, then return addresses) becomes
 * frames, root first, each a function entry and the return address that
 * links it to its parent (0 at the root, or where unknown).  With --kernel
 * the chain begins with the kernel's frames (addresses with the top bit
 * set); the user address after them is where the thread entered the kernel
 * (after its syscall instruction), the user leaf, not a return address, and
 * rules 1 and 2 treat it so.  Three rules,
 * none of which makes up a function that nothing shows:
 *
 * 1. A return address must follow a call instruction (E8 rel32, or FF /2
 *    with any addressing form; an LBR call stack gives the call instructions
 *    themselves): a frame-pointer walk through code that uses rbp for data
 *    goes on with whatever the stack holds, and the chain is cut at the
 *    first entry that cannot be a return address.
 * 2. A leaf sampled where it has no frame of its own (no frame-pointer
 *    prologue, or before it completed, or at its ret) hides its caller: the
 *    walk starts at the caller's caller.  When the call instruction before
 *    that return address is a direct call to a function other than the leaf
 *    (not a PLT stub) that sets up a frame pointer, that callee is the hidden
 *    frame: it is inserted, marked inferred.  (A callee without a frame
 *    pointer that reached the leaf by a jump, a tail call, left no frame.)
 * 3. A chain cut short on its root side (its root is not the root of the
 *    thread's previous stack) is aligned with that previous stack: where the
 *    chain's outermost function appears in it, and the frames after it agree
 *    as far as both go (the leaf side matches), the previous stack's frames
 *    above it are taken, marked inferred.  Of several places, the one whose
 *    frames agree longest, then the outermost. */
#ifndef MT_SAMPSTACK_H
#define MT_SAMPSTACK_H

#include <stddef.h>
#include <stdint.h>

struct fnmap;

struct sstk_frame {
	uint64_t func, link;
	uint8_t inferred; /* SSTK_STITCHED (rules 2, 3) or SSTK_ROOTED */
};

/* How a frame the sample's own chain did not show was found: a repair
 * (rules 2 and 3), or the thread's root chain (mt-decode joined it to the
 * chain at the same return address: the sample's @nroot outermost ips). */
enum { SSTK_STITCHED = 1, SSTK_ROOTED = 2 };

enum { SSTK_NO_REPAIR = 1 }; /* frames as the chain gives them (the "before") */

/* @ips: @n addresses, leaf first, the outermost @nroot of them from the
 * thread's root chain (their frames are marked SSTK_ROOTED).  @prev: the thread's previous stack, root
 * first.  Writes at most @max frames, root first, to @out; returns how many
 * (at most n + 1 + nprev are needed). */
size_t sampstack_build(struct fnmap *fns, uint32_t tid, const uint64_t *ips, uint32_t n,
		       uint32_t nroot, const struct sstk_frame *prev, size_t nprev, struct sstk_frame *out,
		       size_t max, unsigned flags);

#endif
