#include "zsink.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "io.h"

#define OUT_SIZE (256u * 1024)

struct zsink {
	int fd;
	enum zsink_kind kind;
	z_stream gz;
	ZSTD_CCtx *zc;
	uint8_t *out;
	uint64_t out_bytes;
	int finished;
};

zsink *zsink_alloc(int fd, enum zsink_kind kind, int level)
{
	zsink *z = calloc(1, sizeof *z);
	if (!z)
		return NULL;
	z->fd = fd;
	z->kind = kind;
	if (kind != ZSINK_PLAIN && !(z->out = malloc(OUT_SIZE)))
		goto fail;
	if (kind == ZSINK_GZIP) {
		/* windowBits 15 + 16: a gzip wrapper rather than a zlib one */
		if (deflateInit2(&z->gz, level ? level : 6, Z_DEFLATED, 15 + 16, 8,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			goto fail;
	} else if (kind == ZSINK_ZSTD) {
		z->zc = ZSTD_createCCtx();
		if (!z->zc || ZSTD_isError(ZSTD_CCtx_setParameter(z->zc, ZSTD_c_compressionLevel,
								 level ? level : 3)))
			goto fail;
	}
	return z;
fail:
	if (kind == ZSINK_ZSTD)
		ZSTD_freeCCtx(z->zc);
	free(z->out);
	free(z);
	errno = ENOMEM;
	return NULL;
}

void zsink_free(zsink *z)
{
	if (!z)
		return;
	if (z->kind == ZSINK_GZIP)
		deflateEnd(&z->gz);
	ZSTD_freeCCtx(z->zc);
	free(z->out);
	free(z);
}

static int put(zsink *z, const void *p, size_t n)
{
	if (io_write_all(z->fd, p, n) < 0)
		return -1;
	z->out_bytes += n;
	return 0;
}

static int gz_run(zsink *z, const void *buf, size_t len, int flush)
{
	z->gz.next_in = (Bytef *)(uintptr_t)buf;
	for (;;) {
		/* zlib's avail_in is 32-bit: feed large buffers in pieces */
		uInt take = len > (1u << 30) ? (1u << 30) : (uInt)len;
		z->gz.avail_in = take;
		int last = take == len;
		int rc;
		do {
			z->gz.next_out = z->out;
			z->gz.avail_out = OUT_SIZE;
			rc = deflate(&z->gz, last ? flush : Z_NO_FLUSH);
			if (rc == Z_STREAM_ERROR) {
				errno = EIO;
				return -1;
			}
			if (put(z, z->out, OUT_SIZE - z->gz.avail_out) < 0)
				return -1;
		} while (z->gz.avail_out == 0 || (last && flush == Z_FINISH && rc != Z_STREAM_END));
		len -= take;
		if (last)
			return 0;
	}
}

static int zstd_run(zsink *z, const void *buf, size_t len, ZSTD_EndDirective mode)
{
	ZSTD_inBuffer in = {buf, len, 0};
	for (;;) {
		ZSTD_outBuffer out = {z->out, OUT_SIZE, 0};
		size_t rem = ZSTD_compressStream2(z->zc, &out, &in, mode);
		if (ZSTD_isError(rem)) {
			errno = EIO;
			return -1;
		}
		if (put(z, z->out, out.pos) < 0)
			return -1;
		if (mode == ZSTD_e_end ? rem == 0 : in.pos == in.size)
			return 0;
	}
}

int zsink_write(zsink *z, const void *buf, size_t len)
{
	if (z->finished) {
		errno = EINVAL;
		return -1;
	}
	switch (z->kind) {
	case ZSINK_GZIP:
		return gz_run(z, buf, len, Z_NO_FLUSH);
	case ZSINK_ZSTD:
		return zstd_run(z, buf, len, ZSTD_e_continue);
	default:
		return put(z, buf, len);
	}
}

int zsink_finish(zsink *z)
{
	if (z->finished)
		return 0;
	z->finished = 1;
	switch (z->kind) {
	case ZSINK_GZIP:
		return gz_run(z, "", 0, Z_FINISH);
	case ZSINK_ZSTD:
		return zstd_run(z, "", 0, ZSTD_e_end);
	default:
		return 0;
	}
}

uint64_t zsink_bytes_out(const zsink *z)
{
	return z->out_bytes;
}

enum zsink_kind zsink_kind_from_name(const char *name, size_t *stem_len)
{
	size_t n = name ? strlen(name) : 0;
	enum zsink_kind k = ZSINK_PLAIN;
	if (n > 3 && !strcmp(name + n - 3, ".gz")) {
		k = ZSINK_GZIP;
		n -= 3;
	} else if (n > 4 && !strcmp(name + n - 4, ".zst")) {
		k = ZSINK_ZSTD;
		n -= 4;
	}
	if (stem_len)
		*stem_len = n;
	return k;
}
