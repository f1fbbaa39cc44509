/* Compiler attributes used in more than one file. */
#ifndef MT_COMPILER_H
#define MT_COMPILER_H

/* Turns gcc's SLP vectorizer off for one function.  In the waypoint output
 * loops (segment.c, stitch.c) it pairs a waypoint's time and address in a
 * vector register: twice the instructions. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_SLP __attribute__((optimize("no-tree-slp-vectorize")))
#else
#define NO_SLP
#endif

#endif
