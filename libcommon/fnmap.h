/* Function ranges of a traced process, from its memory maps and the ELF
 * symbol tables of the mapped files (libcommon/elfinfo).  Used by mt-segment
 * to tell an intra-function jump from a tail call and to name the function
 * that contains an address (the caller revealed by a return).
 *
 * Files are found by img_find (imgfind.h: the --images directories, then
 * PATH itself); each is loaded once, lazily, on the first lookup that needs
 * it.  A file that cannot be loaded makes its
 * addresses unknown (lookups return 0), never an error. */
#ifndef MT_FNMAP_H
#define MT_FNMAP_H

#include <stddef.h>
#include <stdint.h>

struct fnmap;

struct fn_info {
	uint64_t entry, end; /* runtime range [entry, end) */
	const char *name;    /* owned by the fnmap; valid until fnmap_free() */
	int is_plt;
	int may_inline; /* DWARF may describe inline frames in it (libcommon/dwcov.h) */
	/* where in it an address may have an inline frame: ninl pairs
	 * [inl[2i], inl[2i+1]) of file addresses (runtime = file + inl_bias),
	 * sorted, possibly reaching past [entry, end) (libcommon/dwcov.h,
	 * dwcov_inline); owned by the fnmap */
	const uint64_t *inl;
	size_t ninl;
	uint64_t inl_bias;
	/* the same as a bitmap (NULL: none): bit k for runtime address
	 * inl_bits_base + k, valid over [entry, end) */
	const uint8_t *inl_bits;
	uint64_t inl_bits_base;
	/* where in it an inline chain may change (dwcov_inline_bounds): ninlb
	 * file addresses (runtime = file + inl_bias), sorted; owned by the fnmap */
	const uint64_t *inlb;
	size_t ninlb;
};

/* NULL on allocation failure. */
struct fnmap *fnmap_alloc(void);
void fnmap_free(struct fnmap *m);

/* Records a mapping of @path (not NUL-terminated, @pathlen bytes) at
 * [start, start+len) from file offset @pgoff in process @pid.  0 or -ENOMEM. */
int fnmap_add_map(struct fnmap *m, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
		  const char *path, size_t pathlen, const uint8_t *build_id, size_t build_id_len);

/* Tells which process a thread belongs to (from THREAD records).  0 or -ENOMEM. */
int fnmap_add_thread(struct fnmap *m, uint32_t pid, uint32_t tid);

/* The function containing @addr in the address space of thread @tid.
 * 1: found, *out filled; 0: unknown (no map, no file, no symbol). */
int fnmap_lookup(struct fnmap *m, uint32_t tid, uint64_t addr, struct fn_info *out);

/* The entry of the function containing @addr when no symbol, FDE or PLT
 * stub holds it but the loader calls it through a pointer: the greatest
 * element of the file's .preinit_array, .init_array or .fini_array, or the
 * start of .init or .fini, at or below @addr with no symbol in between
 * (crtstuff's __do_global_dtors_aux and frame_dummy in a stripped shared
 * object).  Only for naming a frame that a return or a trace's start
 * reveals: a jump to such an entry is no tail call to fnmap_lookup (nor to
 * mt-ptsim's truth).  1: found, *entry set; 0: unknown. */
int fnmap_pointer_entry(struct fnmap *m, uint32_t tid, uint64_t addr, uint64_t *entry);

/* The same, but for an address in a ".cold" part of a function (gcc's
 * hot/cold split, "f.cold"), the function it belongs to ("f", by name in
 * the same file).  0: unknown. */
int fnmap_owner(struct fnmap *m, uint32_t tid, uint64_t addr, struct fn_info *out);

/* Are @a and @b in the same loaded file?  1 yes, 0 no or unknown. */
int fnmap_same_file(struct fnmap *m, uint32_t tid, uint64_t a, uint64_t b);
/* Is @ldso the entry of the dynamic loader (the ELF entry of a file with
 * no PT_INTERP, mapped in @tid's process beside a program that has one),
 * which ends by a jump to the program's entry?  1: *entry is the program's
 * entry (runtime address); 0: no, or unknown. */
int fnmap_program_entry(struct fnmap *m, uint32_t tid, uint64_t ldso, uint64_t *entry);

/* Reads @len code bytes at runtime address @addr of thread @tid from the
 * mapped file.  Returns the number of bytes read (0: unknown). */
size_t fnmap_read(struct fnmap *m, uint32_t tid, uint64_t addr, uint8_t *buf, size_t len);

/* Is @addr a return site: right after a direct call (E8 rel32) to the entry
 * of a known function?  1 yes, 0 no or unknown. */
int fnmap_is_return_site(struct fnmap *m, uint32_t tid, uint64_t addr);

/* The target of the direct call (E8 rel32) that ends at @ret, or 0 (none,
 * or no code). */
uint64_t fnmap_call_target(struct fnmap *m, uint32_t tid, uint64_t ret);

/* Does the code of the function at entry @x jump (EB rel8, E9 rel32) into
 * the body of the function at entry @f, past its entry (glibc's mempcpy
 * into memmove's body)?  Bytes, not decoded instructions: a caller needs
 * other evidence too.  1 yes, 0 no or unknown. */
int fnmap_jumps_into(struct fnmap *m, uint32_t tid, uint64_t x, uint64_t f);

/* Is the instruction at @addr an indirect jmp (FF /4, FF /5, with prefixes)?
 * 1 yes, 0 no or unknown. */
int fnmap_is_indirect_jump(struct fnmap *m, uint32_t tid, uint64_t addr);

/* Does the function containing @caller call @callee directly (an E8 rel32
 * anywhere in its code whose target is @callee; its first 64 KiB)?  1 yes,
 * 0 no or unknown.  Calls through a PLT stub or a pointer are not seen. */
int fnmap_calls(struct fnmap *m, uint32_t tid, uint64_t caller, uint64_t callee);

/* The direct calls to @callee in the function containing @caller (as
 * fnmap_calls looks for them), not counting the one at @except (0: none):
 * how many, up to @max (0: none, or unknown). */
int fnmap_call_sites(struct fnmap *m, uint32_t tid, uint64_t caller, uint64_t callee,
		     uint64_t except, int max);

/* The C++ landing pad (runtime address) of the call at @addr, from its
 * function's LSDA (elfinfo_landing_pad): 1 known, *pad filled (0: the call
 * has none); 0 unknown. */
int fnmap_landing_pad(struct fnmap *m, uint32_t tid, uint64_t addr, uint64_t *pad);

/* Number of mapped files that could not be loaded (for a warning). */
size_t fnmap_missing(const struct fnmap *m);
/* Path of the @i-th file that could not be loaded, or NULL. */
const char *fnmap_missing_path(const struct fnmap *m, size_t i);

#endif
