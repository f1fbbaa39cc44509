/* The setup fuzz_ptdecode and fuzz_ptwalk share: the image both decode
 * against, the input handed to ptd_decode_raw as a file, the options of a
 * raw decode and its output writer (on FUZZ_FD_OUT, see memfd.h).
 *
 * The image is the code of fuzz/ptprog.c (build/fuzz/ptprog, its executable
 * segment where the ELF file puts it), so that the PT seeds, mt-ptsim's
 * recordings of it (mk/fuzz.mk, fuzz/seeds.sh), decode for real.
 * FUZZ_PT_IMAGE=FILE:OFFSET:SIZE@VADDR picks another, FUZZ_PT_IMAGE=FILE
 * another ELF file's executable segment (the findings kept from before
 * ptprog decode against build/programs/recursion:0x1000:0x78000@0x401000,
 * fuzz/smoke.sh).  Without the file the targets decode against no image
 * (every ip a gap).
 */
#ifndef MT_FUZZ_PTFUZZ_H
#define MT_FUZZ_PTFUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "mtev.h"
#include "ptdecode.h"

/* the image (valid when ptfuzz_have_image) */
extern struct ptd_image_spec ptfuzz_image;
extern int ptfuzz_have_image;

/* Once, from LLVMFuzzerInitialize: the image and the input file's path
 * (/dev/shm/mt-fuzz-@name.PID, removed at exit). */
void ptfuzz_init(const char *name);
/* Writes @data to the input file; returns its path for ptd_decode_raw. */
const char *ptfuzz_input(const uint8_t *data, size_t size);
/* @o cleared and set for a raw decode of the image as pid 1, tid 1 on an
 * Intel family 6 model 0x5e part (the usual errata workarounds), warnings
 * to @warn. */
void ptfuzz_options(struct ptd_options *o, void (*warn)(void *, const char *), void *warn_ctx);
/* ptd_decode_raw's open_out: one MTEV writer on FUZZ_FD_OUT per decode
 * (the caller empties FUZZ_FD_OUT before the decode: fuzz_out_reset). */
int ptfuzz_open_out(void *ctx, uint32_t flags, mtev_writer **w);
/* The writer ptfuzz_open_out opened for this decode (NULL: none); the next
 * decode may open one again. */
mtev_writer *ptfuzz_take_out(void);
/* Whether @a lies in the image (always, without one). */
int ptfuzz_in_image(uint64_t a);

#endif
