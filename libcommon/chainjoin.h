/* Joining a call chain to a trace's stack (issue 15, item 9).
 *
 * A frame that is live through a whole PT window and has a live child
 * through it takes no branch in the window: the trace cannot show it.  The
 * call chain at the trigger (the breakpoint sample's user stack, unwound;
 * mt-ptsim writes the true one) names those frames.  This joins the two at
 * one instant: the trace's stack there (function entries, outermost first)
 * must be the innermost part of the chain, frame for frame (the function
 * containing the chain's ip faces the top frame, the one containing each
 * return address minus 1 the frame below); the chain's entries beyond the
 * stack's root are the frames the trace could not see.
 *
 * Nothing is guessed: a chain that does not match the stack at every level
 * it shares with it is not joined (docs/exactness.md). */
#ifndef MT_CHAINJOIN_H
#define MT_CHAINJOIN_H

#include <stddef.h>
#include <stdint.h>

/* The entry of the function containing @addr (the address itself when no
 * symbol knows it). */
typedef uint64_t (*chainjoin_entry_fn)(void *ctx, uint64_t addr);

/* @chain: the ip, then return addresses, innermost first (@nchain);
 * @stack: the trace's frames' function entries, outermost first (@nstack,
 * at least 1).  On a match writes the outer frames' function entries,
 * outermost first, to @out (at most @max) and returns how many (0: the
 * chain reaches no further than the stack); -1 when they do not match, or
 * @max is too small. */
int chainjoin(const uint64_t *chain, size_t nchain, const uint64_t *stack, size_t nstack,
	      chainjoin_entry_fn entry, void *ctx, uint64_t *out, size_t max);

#endif
