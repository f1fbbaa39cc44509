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
 * covered". */
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
};

/* Reads the coverage of the ELF file at @path (whose build-id is @id, @idlen
 * bytes, 0 unknown).  Never fails: what cannot be read is DWCOV_ALL. */
void dwcov_load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen);
void dwcov_fini(struct dwcov *dc);

/* The coverage given by the bytes of .debug_info and .debug_aranges (what
 * dwcov_load does once it has them; any bytes: a unit or set it cannot read
 * makes it DWCOV_ALL).  Frees what @dc held. */
void dwcov_parse(struct dwcov *dc, const void *info, size_t ninfo, const void *ar, size_t nar);

/* Does any covered address lie in [lo, hi)?  1 yes (or unknown), 0 no. */
int dwcov_any(const struct dwcov *dc, uint64_t lo, uint64_t hi);

/* For tests: the state and ranges as text ("none", "all", "ranges N") */
const char *dwcov_state_name(int state);

#endif
