/* What fuzz_ptwalk (raw PT) and fuzz_ptwalkcpu (per-cpu perf.data) share:
 * one decode's result (return value, error message, warnings, statistics,
 * the MTEV bytes) and the comparison of libipt's with the walk's, which
 * aborts at the first difference. */
#ifndef MT_FUZZ_WALKCMP_H
#define MT_FUZZ_WALKCMP_H

#include <stddef.h>
#include <stdint.h>

#include "mtev.h"
#include "ptdecode.h"

/* one run's warnings, concatenated */
struct warns {
	char buf[8192];
	size_t len;
	unsigned n;
};

struct walk_result {
	int ret;
	char errmsg[512];
	struct ptd_stats st;
	struct warns w;
	uint8_t *out; /* kept between inputs */
	size_t outlen, cap;
};

/* ptd_options.warn: appends to the struct warns at @ctx */
void walkcmp_warn(void *ctx, const char *msg);
/* Clears @r's statistics and warnings before a decode. */
void walkcmp_begin(struct walk_result *r);
/* After a decode that returned @ret with @o: its error message, and the
 * writer @w (NULL: none was opened) finished (when @ret is 0) and freed; the
 * MTEV bytes written to FUZZ_FD_OUT copied to r->out. */
void walkcmp_end(struct walk_result *r, int ret, const struct ptd_options *o, mtev_writer *w);
/* Aborts (FUZZ_ASSERT) at the first difference between libipt's @a and the
 * walk's @b. */
void walkcmp_check(const struct walk_result *a, const struct walk_result *b);

#endif
