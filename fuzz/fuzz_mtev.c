/* libFuzzer target: the MTEV reader (formats/mtev.c), the input of every stage.
 *
 * Arbitrary bytes are read three ways and the results must agree:
 *  1. from memory (mtev_reader_alloc_mem);
 *  2. from a descriptor that returns short reads at every boundary
 *     (mtev_reader_alloc on FUZZ_FD_IN), as a pipe from a slow upstream would:
 *     same records, same final status, same error offset;
 *  3. every record read is re-encoded by mtev_write (which must accept it) and
 *     the new stream read back: same records.
 * Each record is also formatted as text, parsed back by mtev_text_parse and
 * formatted again: the two lines must be equal (the mt-dump | mt-undump round
 * trip).  ASan/UBSan catch memory and arithmetic errors on the way.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memfd.h"
#include "mtev.h"
#include "mtev_text.h"
#include "textbuf.h"

static struct mtev_line line, line2;
static struct mtev_text_parser tp;
static struct text t_mem, t_fd, t_written, t_reread;

/* The line for @rec, checked to survive text -> record -> text unchanged. */
static void format_checked(const struct mtev_rec *rec)
{
	FUZZ_ASSERT(mtev_text_format(&line, rec) == 0, "format kind %u", rec->kind);
	struct mtev_rec r2;
	struct mtev_header h2;
	int k = mtev_text_parse(&tp, line.p, line.len, &r2, &h2);
	FUZZ_ASSERT(k == MTEV_TEXT_RECORD, "text of a read record does not parse: %s: %s", tp.err,
		    line.p);
	FUZZ_ASSERT(mtev_text_format(&line2, &r2) == 0, "format of parsed record");
	FUZZ_ASSERT(line.len == line2.len && !memcmp(line.p, line2.p, line.len),
		    "text round trip differs:\n  %s\n  %s", line.p, line2.p);
}

static void header_checked(const struct mtev_header *h, struct text *out)
{
	FUZZ_ASSERT(mtev_text_format_header(&line, h) == 0, "format header");
	struct mtev_rec r2;
	struct mtev_header h2;
	int k = mtev_text_parse(&tp, line.p, line.len, &r2, &h2);
	FUZZ_ASSERT(k == MTEV_TEXT_HEADER, "header text does not parse: %s: %s", tp.err, line.p);
	FUZZ_ASSERT(mtev_text_format_header(&line2, &h2) == 0, "format parsed header");
	FUZZ_ASSERT(line.len == line2.len && !memcmp(line.p, line2.p, line.len),
		    "header text round trip differs:\n  %s\n  %s", line.p, line2.p);
	text_add(out, line.p, line.len);
}

/* Reads @r to its end; the text of every record goes to @out (and, when @w,
 * the record to @w and its text to @written).  Returns mtev_read's last result. */
static int drain(mtev_reader *r, struct text *out, mtev_writer *w, struct text *written,
		 int check_text)
{
	struct mtev_rec rec;
	int n;
	while ((n = mtev_read(r, &rec)) > 0) {
		if (check_text)
			format_checked(&rec);
		else
			FUZZ_ASSERT(mtev_text_format(&line, &rec) == 0, "format");
		text_add(out, line.p, line.len);
		if (!w)
			continue;
		int e = mtev_write(w, &rec);
		FUZZ_ASSERT(e == 0, "writer refused a record the reader accepted (%s): %s",
			    mtev_strerror(e), line.p);
		text_add(written, line.p, line.len);
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int e1, e2;
	t_mem.len = t_fd.len = t_written.len = t_reread.len = 0;

	mtev_reader *r1 = mtev_reader_alloc_mem(data, size, &e1);
	fuzz_in_set(data, size, 1);
	mtev_reader *r2 = mtev_reader_alloc(FUZZ_FD_IN, &e2);
	FUZZ_ASSERT(!r1 == !r2 && e1 == e2, "header: memory reader %d, fd reader %d", e1, e2);
	if (!r1)
		return 0;

	const struct mtev_header *h = mtev_reader_header(r1);
	header_checked(h, &t_mem);
	header_checked(mtev_reader_header(r2), &t_fd);
	fuzz_out_reset();
	int we;
	mtev_writer *w = mtev_writer_alloc(FUZZ_FD_OUT, h->producer, h->flags, &we);
	FUZZ_ASSERT(w, "writer alloc");
	header_checked(h, &t_written);

	int n1 = drain(r1, &t_mem, w, &t_written, 1);
	int n2 = drain(r2, &t_fd, NULL, NULL, 0);
	FUZZ_ASSERT(n1 == n2, "final status: memory %d, fd %d", n1, n2);
	FUZZ_ASSERT(n1 <= 0 && n1 != -MTEV_EIO && n1 != -MTEV_ENOMEM, "status %d", n1);
	FUZZ_ASSERT(mtev_reader_offset(r1) == mtev_reader_offset(r2), "offsets %llu %llu",
		    (unsigned long long)mtev_reader_offset(r1),
		    (unsigned long long)mtev_reader_offset(r2));
	FUZZ_ASSERT(mtev_reader_offset(r1) <= size, "offset past the input");
	FUZZ_ASSERT(t_mem.len == t_fd.len && (!t_mem.len || !memcmp(t_mem.p, t_fd.p, t_mem.len)),
		    "memory and fd readers disagree");

	/* the re-encoded stream reads back as the same records */
	FUZZ_ASSERT(mtev_writer_finish(w) == 0, "writer finish");
	size_t olen;
	const uint8_t *out = fuzz_out(&olen);
	mtev_reader *r3 = mtev_reader_alloc_mem(out, olen, &e1);
	FUZZ_ASSERT(r3, "re-encoded stream header: %s", mtev_strerror(e1));
	header_checked(mtev_reader_header(r3), &t_reread);
	int n3 = drain(r3, &t_reread, NULL, NULL, 0);
	FUZZ_ASSERT(n3 == 0, "re-encoded stream: %s at %llu", mtev_strerror(n3),
		    (unsigned long long)mtev_reader_offset(r3));
	FUZZ_ASSERT(t_written.len == t_reread.len &&
			(!t_written.len || !memcmp(t_written.p, t_reread.p, t_written.len)),
		    "re-encoded stream reads back differently");

	mtev_reader_free(r3);
	mtev_writer_free(w);
	mtev_reader_free(r1);
	mtev_reader_free(r2);
	return 0;
}
