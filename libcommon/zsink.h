/* zsink: a byte sink onto a file descriptor, optionally compressed with
 * gzip (zlib) or zstd (libzstd), with its own buffering.
 * Errors are -1 with errno set (EIO for a compressor failure). */
#ifndef MT_ZSINK_H
#define MT_ZSINK_H

#include <stddef.h>
#include <stdint.h>

enum zsink_kind { ZSINK_PLAIN = 0, ZSINK_GZIP = 1, ZSINK_ZSTD = 2 };

typedef struct zsink zsink;

/* @level: compressor level, 0 for the library's default.  @fd is not closed. */
zsink *zsink_alloc(int fd, enum zsink_kind kind, int level);
void zsink_free(zsink *z);
/* 0 or -1 (errno). */
int zsink_write(zsink *z, const void *buf, size_t len);
/* Ends the compressed stream and writes everything out. 0 or -1 (errno). */
int zsink_finish(zsink *z);
uint64_t zsink_bytes_out(const zsink *z); /* bytes written to fd */

/* The kind a file name asks for: ".gz" -> GZIP, ".zst" -> ZSTD, else PLAIN.
 * *@stem_len (if not NULL) gets the length of the name without that suffix. */
enum zsink_kind zsink_kind_from_name(const char *name, size_t *stem_len);

#endif
