/* Which code of an ELF file DWARF describes: the address ranges of its
 * compile units, read from .debug_aranges.  mt-segment uses it to leave out
 * waypoints that can never carry an inline frame (llvm-symbolizer finds
 * inline frames only in a compile unit's DWARF), so code without debug
 * information (a distribution's libc, hand-written assembly) costs no
 * waypoint records downstream.
 *
 * The answer errs on the side of "covered": a file whose DWARF is elsewhere
 * (a separate debug file by build-id or .gnu_debuglink that exists on this
 * machine: its ranges are read instead), whose .debug_aranges is missing or
 * does not list every compile unit of .debug_info (clang omits it by
 * default), or that cannot be read counts as covered everywhere.  Only a
 * file with no DWARF anywhere, or ranges that list every unit, says "not
 * covered".
 *
 * Inside what DWARF covers, an address can have an inline frame only inside
 * the ranges of a DW_TAG_inlined_subroutine (llvm-symbolizer's inline chain
 * is made of those DIEs): dwcov also reads them, from .debug_info (DWARF 2
 * to 5; DW_AT_low_pc/high_pc or DW_AT_ranges, through .debug_ranges,
 * .debug_rnglists and .debug_addr).  What it cannot read errs on the side
 * of "inline": a unit it cannot parse (an unknown form, dwz's references
 * into another file, split DWARF whose DIEs are in a .dwo, an imported
 * unit) counts as inline over the unit's own ranges, and the whole file
 * does when those cannot be known either.
 *
 * Read by hand rather than through libdw: bench/dwcov_libdw.c compares the
 * two (docs/segment.md has the figures: libdw gives the same inline ranges
 * but drops the aranges sets that list a unit without code, and costs more). */
#ifndef MT_DWCOV_H
#define MT_DWCOV_H

#include <stddef.h>
#include <stdint.h>

enum {
	DWCOV_NONE,   /* no DWARF: no address is covered */
	DWCOV_RANGES, /* only the addresses in r[] are */
	DWCOV_ALL     /* unknown: every address counts as covered */
};

struct dwcov {
	int state;
	uint64_t *r; /* DWCOV_RANGES: sorted, merged [r[2i], r[2i+1]) file vaddrs */
	size_t n;    /* number of ranges */
	/* inline ranges: where an address may have an inline frame */
	int inl_known; /* 1: ir[] holds them all; 0: unknown (every address may) */
	uint64_t *ir;  /* sorted, merged [ir[2i], ir[2i+1]) file vaddrs */
	size_t nir;
	uint8_t *ibits; /* the same as a bitmap: bit k for address ibase + k, */
	uint64_t ibase, iend; /* over [ibase, iend); NULL when too big */
	/* every start and end of an inlined subroutine's range, unmerged:
	 * where an inline chain may change (sorted, unique) */
	uint64_t *ib;
	size_t nib;
};

/* Reads the coverage of the ELF file at @path (whose build-id is @id, @idlen
 * bytes, 0 unknown).  Never fails: what cannot be read is DWCOV_ALL. */
void dwcov_load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen);
/* Where dwcov_load keeps what it read from a file with DWARF, by build-id,
 * for the next process (DIR/dwcov/; NULL or "": nowhere, the default). */
void dwcov_set_cache(const char *dir);
void dwcov_fini(struct dwcov *dc);

/* The coverage given by the bytes of .debug_info and .debug_aranges (what
 * dwcov_load does once it has them; any bytes: a unit or set it cannot read
 * makes it DWCOV_ALL).  Replaces @dc's coverage; its inline ranges stay. */
void dwcov_parse(struct dwcov *dc, const void *info, size_t ninfo, const void *ar, size_t nar);

/* The same and the inline ranges, from raw section bytes (any may be empty;
 * the fuzz target's entry).  Frees what @dc held. */
struct dwcov_raw {
	const uint8_t *info, *abbrev, *aranges, *ranges, *rnglists, *addr;
	size_t ninfo, nabbrev, naranges, nranges, nrnglists, naddr;
};
void dwcov_parse_raw(struct dwcov *dc, const struct dwcov_raw *raw);

/* Does any covered address lie in [lo, hi)?  1 yes (or unknown), 0 no. */
int dwcov_any(const struct dwcov *dc, uint64_t lo, uint64_t hi);

/* The inline ranges that meet [lo, hi): *r gets the first of them (pairs
 * [r[2i], r[2i+1]), sorted, disjoint, not clipped to [lo, hi)); returns how
 * many.  When they are not known, one pair that holds every address.
 * *r points into @dc (or static memory) and lives as long as it. */
size_t dwcov_inline(const struct dwcov *dc, uint64_t lo, uint64_t hi, const uint64_t **r);

/* The same as a bitmap, when [lo, hi) lies within one: bit k (byte k / 8,
 * bit k % 8) says whether address *base + k is in an inline range.  NULL
 * when there is none (then use dwcov_inline). */
const uint8_t *dwcov_inline_bits(const struct dwcov *dc, uint64_t lo, uint64_t hi, uint64_t *base);

/* The addresses in [lo, hi) where an inline chain may change (a range of a
 * DW_TAG_inlined_subroutine begins or ends there): *b gets the first of
 * them; returns how many (0 when they are not known). */
size_t dwcov_inline_bounds(const struct dwcov *dc, uint64_t lo, uint64_t hi, const uint64_t **b);

/* Sorts the @np [lo, hi) pairs of @v (v[2i], v[2i+1]) and merges those that
 * overlap or touch, in place; returns how many pairs are left. */
size_t dwcov_merge(uint64_t *v, size_t np);

/* For tests: the state and ranges as text ("none", "all", "ranges N") */
const char *dwcov_state_name(int state);

#endif
