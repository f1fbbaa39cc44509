/* The one image lookup: which file holds the code, and which the symbols, of
 * a mapped path with a build-id.  mt-decode, mt-segment and mt-symbolize all
 * ask here, so they agree on which file an address comes from (docs/images.md
 * is the description for users).
 *
 * The image directories (every stage's --images DIR, spelled --symfs or
 * --buildid-dir too) are one process-wide list, set by the tool before the
 * first lookup, like $MT_DEBUGINFO_DIR.  A directory may be a perf build-id
 * cache (mt-ptsim's images/), a root file system (perf's --symfs) or a flat
 * directory of binaries: all three layouts are tried in each.
 *
 * Code: for each image directory DIR in the order given, then perf's default
 * cache $HOME/.debug (build-id places only), the first of
 *   DIR/.build-id/XX/REST, and its elf and vdso  (build-id XXREST)
 *   DIR/PATH/BUILD-ID/elf, DIR/PATH/BUILD-ID/vdso
 *   DIR/BUILD-ID
 *   DIR/PATH
 *   DIR/BASENAME
 * and after the image directories, before $HOME/.debug, PATH itself (when it
 * is absolute).  A candidate counts when it is a regular ELF file whose
 * build-id begins with the wanted one (any ELF file when the build-id is not
 * known); the build-id places are skipped without one.
 *
 * Symbols (a separate debug file, for a stripped file): img_debug_candidate.
 * A debug file counts when it carries the same build-id (elfinfo.c, dwcov.c
 * check it). */
#ifndef MT_IMGFIND_H
#define MT_IMGFIND_H

#include <stddef.h>
#include <stdint.h>

/* Adds @dir (copied) to the image directories.  0, or -1 (out of memory). */
int img_dirs_add(const char *dir);
/* Forgets every image directory. */
void img_dirs_clear(void);

/* The file with the code of @path (build-id @bid, @bidlen bytes; 0: not
 * known) into @out (@cap bytes).  1: found.  0: none; @why (@whylen bytes)
 * says why: "not found", or the first file of that name whose build-id
 * differs ("build-id mismatch: FILE has build-id HEX"). */
int img_find(const char *path, const uint8_t *bid, size_t bidlen, char *out, size_t cap,
	     char *why, size_t whylen);

/* The @i-th place (from 0) a separate debug file of @file (the code file
 * img_find found) with build-id @id and .gnu_debuglink name @link (NULL or
 * "": none) is looked for:
 *   the file "debug" next to @file when @file is a perf cache "elf";
 *   DIR/.build-id/XX/REST.debug and DIR/usr/lib/debug/.build-id/XX/REST.debug
 *     for each image directory DIR;
 *   D/.build-id/XX/REST.debug for each D of $MT_DEBUGINFO_DIR
 *     (':'-separated; unset: /usr/lib/debug; empty: none);
 *   then by @link, as gdb and llvm-symbolizer do: FILEDIR/LINK (not @file
 *     itself), FILEDIR/.debug/LINK, D/FILEDIR/LINK for each D of
 *     $MT_DEBUGINFO_DIR (a link holding a '/' is not looked for).
 * Writes it to @buf: 1; -1 when that one does not fit or does not apply:
 * skip it; 0 when there is no @i-th. */
int img_debug_candidate(const char *file, const uint8_t *id, size_t idlen, const char *link,
			unsigned i, char *buf, size_t len);

/* The first of img_debug_candidate's places that is a regular ELF file with
 * build-id @id, into @out (@cap bytes): 1; 0 when there is none (or @idlen
 * is 0).  The file for symbols and source lines is that one, else @file. */
int img_find_debug(const char *file, const uint8_t *id, size_t idlen, char *out, size_t cap);

#endif
