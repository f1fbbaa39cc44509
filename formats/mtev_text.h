/* MTEV <-> text: one record per line, `KIND key=value ...` (formats/mtev.md,
 * "Text form").  Used by mt-dump, mt-undump and the tests. */
#ifndef MT_MTEV_TEXT_H
#define MT_MTEV_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "mtev.h"

/* A growable output line.  Free .p with free(). */
struct mtev_line {
	char *p;
	size_t len, cap;
};

/* Formats @rec as one line (no newline) into @out (replacing its content).
 * 0, or -MTEV_ENOMEM. */
int mtev_text_format(struct mtev_line *out, const struct mtev_rec *rec);
int mtev_text_format_header(struct mtev_line *out, const struct mtev_header *h);

/* Parser state: owns the memory that parsed records point into (valid until
 * the next parse). */
struct mtev_text_parser {
	char *sbuf;
	size_t scap, slen;
	uint64_t *ips;
	size_t ips_cap;
	struct mtev_frame *frames;
	size_t frames_cap;
	uint8_t build_id[20];
	uint8_t *raw;
	size_t raw_cap;
	char err[160]; /* the reason, after a failed parse */
};

void mtev_text_parser_fini(struct mtev_text_parser *tp);

enum {
	MTEV_TEXT_RECORD = 1, /* *rec filled */
	MTEV_TEXT_HEADER = 2, /* *hdr filled */
	MTEV_TEXT_END = 3,    /* the `end` line */
	MTEV_TEXT_EMPTY = 0,  /* blank line or # comment */
	MTEV_TEXT_ERROR = -1, /* tp->err says why */
};

/* Parses one line (without its newline). */
int mtev_text_parse(struct mtev_text_parser *tp, const char *line, size_t len,
		    struct mtev_rec *rec, struct mtev_header *hdr);

/* Names of span flag bits ("inferred-start", ...), or NULL. */
const char *mtev_span_flag_name(unsigned bit);

#endif
