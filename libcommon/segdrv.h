/* segdrv: mt-segment's driver (options, the segmenter with its stitcher,
 * errors, warnings and counters), shared by mt-segment and by mt-decode
 * --segment/--stitch, which feeds the decoder's records to it in process
 * (docs/segment.md, "In mt-decode"). */
#ifndef MT_SEGDRV_H
#define MT_SEGDRV_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "mtev.h"
#include "segment.h"
#include "stitch.h"

struct fnmap;

struct segdrv_opts {
	int no_symbols, no_waypoints, no_smear, no_call_targets, all_waypoints;
	int no_sample_repair, stitch, no_cache, any;
	size_t mem_limit;
	const char *cache_dir;
};

/* The long options both tools take (values SEGDRV_O_FIRST and up). */
enum { SEGDRV_O_FIRST = 0x400 };
extern const struct option segdrv_longopts[];
/* How many entries segdrv_longopts has (without its terminator). */
size_t segdrv_nlongopts(void);
/* The options' help lines. */
extern const char segdrv_help[];

void segdrv_opts_init(struct segdrv_opts *o);
/* Takes option @c (with @arg) when it is one of segdrv_longopts: 1, else 0.
 * A bad value is a usage error (exit). */
int segdrv_opt(struct segdrv_opts *o, int c, const char *arg);
/* Sets the DWARF coverage cache from the options (once, before segdrv_open). */
void segdrv_cache(const struct segdrv_opts *o);

struct segdrv {
	segmenter *s;
	stitcher *sti;
	struct fnmap *fns;
	int stitch_err; /* the stitcher's error behind a -SEG_EEMIT */
};

/* The segmenter (and with --stitch its stitcher) writing to @w; exits when
 * out of memory. */
void segdrv_open(struct segdrv *d, const struct segdrv_opts *o, mtev_writer *w);
/* Exits on the segmenter's error @e (or the stitcher's behind it); @out and
 * @path name the output. */
void segdrv_fail(struct segdrv *d, struct io_out *out, const char *path, int e)
	__attribute__((noreturn));
/* Closes every segment and the stitcher's groups; exits on an error. */
void segdrv_finish(struct segdrv *d, struct io_out *out, const char *path);
/* The warnings, and with @stats the counters, on stderr, each counter line
 * beginning "@prefix: ". */
void segdrv_report(struct segdrv *d, int stats, const char *prefix);
void segdrv_free(struct segdrv *d);

#endif
