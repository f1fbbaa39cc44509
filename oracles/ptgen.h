/* ptgen: a fast generator of big, valid execution logs for a real binary.
 *
 * Instead of single-stepping a program (ptsim_trace, ~37k instructions/s),
 * ptgen_walk() walks the binary's own code along a pseudo-random but valid
 * path and fills the same struct ptsim_run, so that ptsim_synth() and the
 * ptsim_write_*() functions turn it into perf.data, images/ and the truth
 * exactly as for a traced run:
 *   - conditional branches go either way, chosen by a seeded generator;
 *   - direct jumps and calls go where the code says;
 *   - returns go to the shadow stack's top (the instruction after the call);
 *   - indirect jumps and calls go to the entry of a real function (a random
 *     one that can return);
 *   - system calls return to the next instruction.
 * Every path stays one the code allows.  A static analysis of the binary
 * (recursive descent from every function symbol, capstone) gives each
 * instruction its shortest distance to a return, counting the callees; the
 * walk never takes a branch from which no return is reachable (noreturn
 * calls, hlt, ud2, ...), steers to the nearest return once the call depth
 * reaches max_depth or a frame has run budget instructions, and keeps each
 * thread's outermost frame in a loop that contains a call, so a thread's
 * root frame never returns.  The stack pointer is modelled (8 bytes per
 * call) so that ptsim_synth's frame tracking works as for real runs.
 *
 * Library code: never prints, never exits. */
#ifndef MT_PTGEN_H
#define MT_PTGEN_H

#include <stddef.h>
#include <stdint.h>

#include "ptsim.h"

struct ptgen_opts {
	const char *path;   /* the ELF executable (with a symbol table) */
	uint64_t insns;	    /* instructions to generate, all threads */
	uint64_t seed;
	unsigned threads;   /* 1..64; they take turns in random slices */
	unsigned max_depth; /* steer to returns at this call depth (default 24) */
	unsigned budget;    /* steer after this many instructions in one frame
			     * (default 3000) */
	const char *root;   /* the outermost function of thread 1, or NULL:
			     * chosen by the seed */
};

struct ptgen_stats {
	size_t functions;   /* function symbols analysed */
	size_t nodes;	    /* instructions decoded */
	size_t returning;   /* functions from whose entry a return is reachable */
	size_t roots;	    /* functions usable as a thread's root */
	uint64_t calls, returns, syscalls, max_depth;
	double seconds;	    /* analysis + walk */
};

enum { PTGEN_E_INPUT = -3 }; /* the binary cannot be read as an ELF file */

/* 0 on success; PTGEN_E_INPUT (@err: why the binary is unusable),
 * PTSIM_E_USAGE (a binary with no usable root) or PTSIM_E_SYS with @err set.  @run is filled like ptsim_trace() fills it (release it
 * with ptsim_run_fini()); @st may be NULL. */
int ptgen_walk(struct ptsim_run *run, const struct ptgen_opts *o, struct ptgen_stats *st, char *err,
	       size_t errlen);

#endif
