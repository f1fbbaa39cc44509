/* libFuzzer target: the MTEV text parser (formats/mtev_text.c), mt-undump's input.
 *
 * The input is split into lines and parsed as mt-undump does.  For every line
 * that parses:
 *  - formatting the parsed record, parsing that line and formatting again gives
 *    the same line (canonical text is a fixed point);
 *  - the record is accepted by mtev_write (whatever parses must be encodable);
 * and the whole encoded stream, read back by mtev_read, gives exactly the
 * canonical lines of the records written, in order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memfd.h"
#include "mtev.h"
#include "mtev_text.h"
#include "textbuf.h"

static struct mtev_line line, line2;
static struct mtev_text_parser tp, tp2;

static struct text t_in, t_back;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	mtev_writer *w = NULL;
	struct mtev_rec rec, r2;
	struct mtev_header hdr, h2;
	int err;
	t_in.len = t_back.len = 0;
	fuzz_out_reset();

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		/* the parser gets exactly the line, in its own allocation, so that
		 * ASan sees any read past its end */
		char *ln = malloc(n ? n : 1);
		if (!ln)
			abort();
		memcpy(ln, p, n);
		p += n + (nl ? 1 : 0);
		int k = mtev_text_parse(&tp, ln, n, &rec, &hdr);
		FUZZ_ASSERT(k >= MTEV_TEXT_ERROR && k <= MTEV_TEXT_END, "parse result %d", k);
		if (k == MTEV_TEXT_ERROR) {
			FUZZ_ASSERT(tp.err[0], "error without a reason");
			free(ln);
			break; /* mt-undump stops at the first bad line */
		}
		if (k == MTEV_TEXT_HEADER) {
			FUZZ_ASSERT(mtev_text_format_header(&line, &hdr) == 0, "format header");
			FUZZ_ASSERT(mtev_text_parse(&tp2, line.p, line.len, &r2, &h2) == MTEV_TEXT_HEADER,
				    "canonical header does not parse: %s: %s", tp2.err, line.p);
			FUZZ_ASSERT(mtev_text_format_header(&line2, &h2) == 0, "format header");
			FUZZ_ASSERT(line.len == line2.len && !memcmp(line.p, line2.p, line.len),
				    "header not a fixed point:\n  %s\n  %s", line.p, line2.p);
			if (!w && hdr.version == MTEV_VERSION) {
				w = mtev_writer_alloc(FUZZ_FD_OUT, hdr.producer, hdr.flags, &err);
				FUZZ_ASSERT(w, "writer");
			}
		} else if (k == MTEV_TEXT_RECORD) {
			FUZZ_ASSERT(mtev_text_format(&line, &rec) == 0, "format kind %u", rec.kind);
			FUZZ_ASSERT(mtev_text_parse(&tp2, line.p, line.len, &r2, &h2) == MTEV_TEXT_RECORD,
				    "canonical line does not parse: %s: %s", tp2.err, line.p);
			FUZZ_ASSERT(mtev_text_format(&line2, &r2) == 0, "format");
			FUZZ_ASSERT(line.len == line2.len && !memcmp(line.p, line2.p, line.len),
				    "line not a fixed point:\n  %s\n  %s", line.p, line2.p);
			if (!w) {
				w = mtev_writer_alloc(FUZZ_FD_OUT, "fuzz", 0, &err);
				FUZZ_ASSERT(w, "writer");
			}
			int e = mtev_write(w, &rec);
			FUZZ_ASSERT(e == 0, "parsed record not encodable (%s): %s", mtev_strerror(e), line.p);
			text_add(&t_in, line.p, line.len);
		}
		free(ln);
		if (k == MTEV_TEXT_END)
			break;
	}
	if (!w)
		return 0;
	FUZZ_ASSERT(mtev_writer_finish(w) == 0, "finish");
	mtev_writer_free(w);

	size_t olen;
	const uint8_t *out = fuzz_out(&olen);
	mtev_reader *r = mtev_reader_alloc_mem(out, olen, &err);
	FUZZ_ASSERT(r, "encoded stream header: %s", mtev_strerror(err));
	int n;
	while ((n = mtev_read(r, &r2)) > 0) {
		FUZZ_ASSERT(mtev_text_format(&line, &r2) == 0, "format");
		text_add(&t_back, line.p, line.len);
	}
	FUZZ_ASSERT(n == 0, "encoded stream: %s at %llu", mtev_strerror(n),
		    (unsigned long long)mtev_reader_offset(r));
	FUZZ_ASSERT(t_in.len == t_back.len && (!t_in.len || !memcmp(t_in.p, t_back.p, t_in.len)),
		    "encoded stream reads back differently:\n--- parsed\n%.*s--- read back\n%.*s",
		    (int)t_in.len, t_in.p, (int)t_back.len, t_back.p);
	mtev_reader_free(r);
	return 0;
}
