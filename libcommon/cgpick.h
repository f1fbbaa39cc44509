/* `--call-graph auto`: the best stack unwinder for sampling a process.
 *   lbr    where the CPU records call stacks in its LBR (Intel: perf's cpu
 *          PMU lists "branches" capabilities);
 *   dwarf  else, where the program or a library it maps lacks frame pointers
 *          (most functions do not begin with push %rbp; mov %rsp,%rbp):
 *          frame-pointer walks would skip or lose frames there;
 *   fp     else (cheapest: no stack copies).
 * The decision is made on the process as it is mapped when asked (at its
 * entry point for `mt run`). */
#ifndef MT_CGPICK_H
#define MT_CGPICK_H

#include <stddef.h>
#include <sys/types.h>

/* Returns "lbr", "dwarf" or "fp"; writes why, one line, to @why. */
const char *cg_pick(pid_t pid, char *why, size_t len);

/* Fraction (0..1) of the sized functions of @path (up to 400 of them) that
 * set up a frame pointer; -1 when it cannot tell (no file, no functions). */
double cg_fp_fraction(const char *path);

#endif
