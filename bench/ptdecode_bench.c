/* ptdecode_bench: helpers for bench/decode.sh.
 *
 *   ptdecode_bench amplify IN.data OUT.data N
 *       IN is a file-mode perf.data with one AUXTRACE record (mt-ptsim's
 *       per-thread output); OUT is the same recording with that record's
 *       PT repeated N times (each copy is a complete trace: PSB ... TIP.PGD),
 *       so every decoder sees N times the same work.
 *
 *   ptdecode_bench bare PERF.DATA IMAGEDIR
 *       The bare libipt loop mt-decode is measured against: the AUX data of
 *       each queue, images from the MMAP2 records (IMAGEDIR/PATH/BUILDID/elf,
 *       as mt-ptsim and perf lay them out, else PATH), one block decoder
 *       (end_on_call/end_on_jump like mt-decode), sync, drain events,
 *       pt_blk_next and pt_blk_time per block until the end, resync after
 *       errors.  Prints bytes, blocks, instructions and seconds.  With
 *       "plain", blocks run through direct calls and jumps (libipt's
 *       default): the floor for any block-decoder loop, which cannot see
 *       every taken branch.  With "packets", only libipt's packet decoder
 *       (pt_pkt_next over every packet): the floor of any decoder that
 *       parses packets with libipt.
 *
 *   ptdecode_bench par PERF.DATA IMAGEDIR JOBS
 *       The same loop (end_on_call/end_on_jump), serially and then with the
 *       PT of every queue cut at PSBs into chunks decoded by JOBS threads
 *       (one block decoder and one image copy per chunk, the section cache
 *       shared).  Prints both: instructions, errors, wall and CPU seconds.
 *       The instruction counts must be equal (each chunk ends where the next
 *       one's PSB begins; libipt decodes up to the end of its buffer).
 */
#include <errno.h>
#include <fcntl.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include "elfinfo.h"
#include "io.h"
#include "perfdata.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t g64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}
static void s64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static int amplify(const char *in, const char *out, unsigned long n)
{
	uint8_t *b;
	size_t len, off, aux_at = 0;
	uint64_t doff, dsz, psz = 0, delta, feat[4];
	unsigned bit, nfeat = 0;
	FILE *f;

	if (io_slurp(in, &b, &len) < 0 || len < 104 || memcmp(b, "PERFILE2", 8)) {
		fprintf(stderr, "amplify: %s: not a file-mode perf.data\n", in);
		return 2;
	}
	doff = g64(b + 40);
	dsz = g64(b + 48);
	for (off = doff; off + 8 <= doff + dsz;) {
		uint32_t type;
		uint16_t size;
		memcpy(&type, b + off, 4);
		memcpy(&size, b + off + 6, 2);
		if (size < 8)
			break;
		if (type == PD_REC_AUXTRACE) {
			if (aux_at) {
				fprintf(stderr, "amplify: more than one AUXTRACE record\n");
				return 2;
			}
			aux_at = off;
			psz = g64(b + off + 8);
			off += size + psz;
		} else {
			off += size;
		}
	}
	if (!aux_at) {
		fprintf(stderr, "amplify: no AUXTRACE record\n");
		return 2;
	}
	delta = psz * (n - 1);
	memcpy(feat, b + 72, sizeof feat);
	for (bit = 0; bit < 256; bit++)
		nfeat += feat[bit / 64] >> (bit % 64) & 1;
	/* the feature table follows the data; every section it points at
	 * moves by delta */
	for (bit = 0; bit < nfeat; bit++) {
		uint8_t *e = b + doff + dsz + 16 * bit;
		s64(e, g64(e) + delta);
	}
	s64(b + 48, dsz + delta);
	s64(b + aux_at + 8, psz * n);
	f = fopen(out, "wb");
	if (!f)
		return 111;
	fwrite(b, 1, aux_at + 0x30 + psz, f);
	for (unsigned long i = 1; i < n; i++)
		fwrite(b + aux_at + 0x30, 1, psz, f);
	fwrite(b + aux_at + 0x30 + psz, 1, len - (aux_at + 0x30 + psz), f);
	if (fclose(f) != 0)
		return 111;
	free(b);
	return 0;
}

struct qdata {
	uint32_t idx;
	uint8_t *buf;
	size_t len, cap;
};

static int par(struct qdata *q, size_t nq, struct pt_image *img, const struct pd_info *info,
	       unsigned jobs);

/* The image's files, so that each parallel worker can build its own section
 * cache: sections shared between threads are locked on every access, and the
 * lock, not the decoding, then sets the pace. */
struct secfile {
	char *file;
	uint64_t pgoff, len, addr;
};
static struct secfile *secfiles;
static size_t nsecfiles;

static void secfile_add(const char *file, uint64_t pgoff, uint64_t len, uint64_t addr)
{
	struct secfile *v = realloc(secfiles, (nsecfiles + 1) * sizeof *v);
	if (!v)
		return;
	secfiles = v;
	secfiles[nsecfiles] = (struct secfile){strdup(file), pgoff, len, addr};
	if (secfiles[nsecfiles].file)
		nsecfiles++;
}

/* bare: the executable maps of the recording become sections of @img */
static void bare_add_mmap(const struct pd_event *ev, const struct pd_info *info, const char *imgdir,
			  struct pt_image_section_cache *isc, struct pt_image *img)
{
	struct pd_mmap m;
	char file[4096], hex[41];
	const uint8_t *bid = NULL;
	size_t k;
	int isid;

	if (pd_parse_mmap(ev, &m) < 0 || !(m.prot & 4))
		return;
	for (k = 0; k < info->nbuildids; k++)
		if (!strcmp(info->buildids[k].filename, m.filename))
			bid = info->buildids[k].id;
	snprintf(file, sizeof file, "%s", m.filename);
	if (bid) {
		struct stat st;
		buildid_hex(hex, bid, 20);
		snprintf(file, sizeof file, "%s/%s/%s/elf", imgdir, m.filename, hex);
		if (stat(file, &st) < 0)
			snprintf(file, sizeof file, "%s/%s/%s/vdso", imgdir, m.filename, hex);
		if (stat(file, &st) < 0)
			snprintf(file, sizeof file, "%s", m.filename);
	}
	isid = pt_iscache_add_file(isc, file, m.pgoff, m.len, m.addr);
	if (isid >= 0) {
		pt_image_add_cached(img, isc, isid, NULL);
		secfile_add(file, m.pgoff, m.len, m.addr);
	}
}

/* bare: an AUXTRACE record's data appended to its queue's (64 queues at most) */
static void bare_add_aux(const struct pd_event *ev, struct qdata *q, size_t *nq)
{
	struct pd_auxtrace a;
	size_t i;

	pd_parse_auxtrace(ev, &a);
	for (i = 0; i < *nq && q[i].idx != a.idx; i++)
		;
	if (i == *nq) {
		if (*nq == 64)
			return;
		memset(&q[*nq], 0, sizeof q[*nq]);
		q[(*nq)++].idx = a.idx;
	}
	if (q[i].len + ev->payload_size > q[i].cap) {
		q[i].cap = (q[i].len + ev->payload_size) * 2;
		q[i].buf = realloc(q[i].buf, q[i].cap);
	}
	memcpy(q[i].buf + q[i].len, ev->payload, ev->payload_size);
	q[i].len += ev->payload_size;
}

/* bare 2: the packet layer alone: every packet decoded, nothing walked */
static void bare_packets(const struct qdata *q, size_t nq)
{
	uint64_t npkt = 0, tnt = 0, bytes = 0, errors = 0;
	double t0, t1;
	size_t i;

	t0 = now();
	for (i = 0; i < nq; i++) {
		struct pt_config cfg;
		struct pt_packet_decoder *pd;
		struct pt_packet pk;
		int st;
		pt_config_init(&cfg);
		cfg.begin = q[i].buf;
		cfg.end = q[i].buf + q[i].len;
		pd = pt_pkt_alloc_decoder(&cfg);
		bytes += q[i].len;
		while (pt_pkt_sync_forward(pd) >= 0) {
			while ((st = pt_pkt_next(pd, &pk, sizeof pk)) > 0) {
				npkt++;
				if (pk.type == ppt_tnt_8 || pk.type == ppt_tnt_64)
					tnt += pk.payload.tnt.bit_size;
			}
			if (st != -pte_eos)
				errors++;
			else
				break;
		}
		pt_pkt_free_decoder(pd);
	}
	t1 = now();
	printf("packets: %" PRIu64 " bytes %" PRIu64 " packets %" PRIu64 " tnt bits %" PRIu64
	       " errors %.3f s %.1f MB/s\n",
	       bytes, npkt, tnt, errors, t1 - t0, (double)bytes / (t1 - t0) / 1e6);
}

struct bare_count {
	uint64_t blocks, insns, errors, tsum;
};

/* The block decoder's configuration as mt-decode makes it (the recording's
 * cpu and its errata; a block ends at every branch) unless @plain */
static void bench_config(struct pt_config *cfg, const struct pd_info *info, int plain)
{
	unsigned fam = 0, mod = 0, step = 0;

	pt_config_init(cfg);
	if (info->cpuid && sscanf(info->cpuid, "GenuineIntel,%u,%u,%u", &fam, &mod, &step) >= 2) {
		cfg->cpu.vendor = pcv_intel;
		cfg->cpu.family = (uint16_t)fam;
		cfg->cpu.model = (uint8_t)mod;
		cfg->cpu.stepping = (uint8_t)step;
		pt_cpu_errata(&cfg->errata, &cfg->cpu);
	}
	cfg->nom_freq = 22;
	cfg->flags.variant.block.end_on_call = !plain;
	cfg->flags.variant.block.end_on_jump = !plain;
}

/* Every block of @dec, synchronizing at each PSB after an error, into *@n
 * (counted in locals: par's chunks share cache lines) */
static void blk_loop(struct pt_block_decoder *dec, struct bare_count *n)
{
	struct pt_block blk;
	struct pt_event pev;
	uint64_t blocks = 0, insns = 0, tsum = 0, errors = 0;
	int st;

	for (;;) {
		st = pt_blk_sync_forward(dec);
		if (st < 0)
			break;
		for (;;) {
			uint64_t tsc;
			uint32_t lm, lc;
			while (st & pts_event_pending) {
				st = pt_blk_event(dec, &pev, sizeof pev);
				if (st < 0)
					break;
			}
			if (st < 0)
				break;
			st = pt_blk_next(dec, &blk, sizeof blk);
			blocks++;
			insns += blk.ninsn;
			if (pt_blk_time(dec, &tsc, &lm, &lc) >= 0)
				tsum += tsc;
			if (st < 0)
				break;
		}
		if (st != -pte_eos)
			errors++;
	}
	n->blocks += blocks;
	n->insns += insns;
	n->tsum += tsum;
	n->errors += errors;
}

/* bare: one queue through libipt's block decoder, as mt-decode configures it
 * (a block ends at every branch) unless @plain */
static void bare_blocks(const struct qdata *q, struct pt_image *img, const struct pd_info *info,
			int plain, struct bare_count *n)
{
	struct pt_config cfg;
	struct pt_block_decoder *dec;

	bench_config(&cfg, info, plain);
	cfg.begin = q->buf;
	cfg.end = q->buf + q->len;
	dec = pt_blk_alloc_decoder(&cfg);
	pt_blk_set_image(dec, img);
	blk_loop(dec, n);
	pt_blk_free_decoder(dec);
}

static int bare(const char *path, const char *imgdir, int plain, unsigned jobs)
{
	pd_reader *r;
	struct pd_event ev;
	struct qdata q[64];
	size_t nq = 0, i;
	struct pt_image_section_cache *isc = pt_iscache_alloc(NULL);
	struct pt_image *img = pt_image_alloc(NULL);
	int fd = open(path, O_RDONLY), ret;
	struct bare_count n = {0};
	uint64_t bytes = 0;
	double t0, t1;
	const struct pd_info *info;

	if (fd < 0 || pd_open(&r, fd) < 0) {
		fprintf(stderr, "bare: cannot read %s\n", path);
		return 2;
	}
	info = pd_info(r);
	while ((ret = pd_next(r, &ev)) > 0) {
		if (ev.type == PD_REC_MMAP2 || ev.type == PD_REC_MMAP)
			bare_add_mmap(&ev, info, imgdir, isc, img);
		else if (ev.type == PD_REC_AUXTRACE)
			bare_add_aux(&ev, q, &nq);
	}
	if (jobs)
		return par(q, nq, img, info, jobs);
	if (plain == 2) {
		bare_packets(q, nq);
		pd_close(r);
		return 0;
	}
	t0 = now();
	for (i = 0; i < nq; i++) {
		bytes += q[i].len;
		bare_blocks(&q[i], img, info, plain, &n);
	}
	t1 = now();
	printf("bare%s: %" PRIu64 " bytes %" PRIu64 " blocks %" PRIu64 " insns %" PRIu64
	       " errors %.3f s %.1f MB/s (%" PRIu64 ")\n",
	       plain ? " (plain blocks)" : "", bytes, n.blocks, n.insns, n.errors, t1 - t0,
	       (double)bytes / (t1 - t0) / 1e6, n.tsum & 1);
	pd_close(r);
	return 0;
}

/* ---- par: PSB-delimited chunks decoded in parallel ---- */
struct chunk {
	const uint8_t *begin, *end;
	uint64_t insns, blocks, errors;
};

struct pjob {
	struct chunk *c;
	size_t nc;
	size_t *next; /* shared work counter */
	pthread_mutex_t *mu;
	struct pt_image *img;
	const struct pt_config *base;
};

static void decode_chunk(struct chunk *c, struct pt_image *img, const struct pt_config *base)
{
	struct pt_config cfg = *base;
	struct pt_block_decoder *dec;
	struct bare_count n = {0};

	cfg.begin = (uint8_t *)c->begin;
	cfg.end = (uint8_t *)c->end;
	dec = pt_blk_alloc_decoder(&cfg);
	if (!dec) {
		c->errors++;
		return;
	}
	pt_blk_set_image(dec, img);
	blk_loop(dec, &n);
	c->blocks += n.blocks;
	c->insns += n.insns;
	c->errors += n.errors;
	pt_blk_free_decoder(dec);
}

static void *pworker(void *arg)
{
	struct pjob *j = arg;
	struct pt_image_section_cache *isc = pt_iscache_alloc(NULL);
	struct pt_image *img = pt_image_alloc(NULL);
	(void)j->img;
	for (size_t i = 0; i < nsecfiles; i++) {
		const struct secfile *f = &secfiles[i];
		int isid = pt_iscache_add_file(isc, f->file, f->pgoff, f->len, f->addr);
		if (isid >= 0)
			pt_image_add_cached(img, isc, isid, NULL);
	}
	for (;;) {
		pthread_mutex_lock(j->mu);
		size_t k = (*j->next)++;
		pthread_mutex_unlock(j->mu);
		if (k >= j->nc)
			break;
		decode_chunk(&j->c[k], img, j->base);
	}
	pt_image_free(img);
	pt_iscache_free(isc);
	return NULL;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_chunks(struct chunk *c, size_t nc, struct pt_image *img, const struct pt_config *base,
		      unsigned jobs, double *wall, double *cpu)
{
	pthread_t th[64];
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	size_t next = 0;
	struct pjob j = {c, nc, &next, &mu, img, base};
	double w0 = now(), c0 = cpu_s();
	if (jobs > 64)
		jobs = 64;
	for (unsigned t = 0; t < jobs; t++)
		if (pthread_create(&th[t], NULL, pworker, &j))
			return -1;
	for (unsigned t = 0; t < jobs; t++)
		pthread_join(th[t], NULL);
	*wall = now() - w0;
	*cpu = cpu_s() - c0;
	return 0;
}

static int par(struct qdata *q, size_t nq, struct pt_image *img, const struct pd_info *info,
	       unsigned jobs)
{
	struct pt_config base;
	struct chunk *whole = calloc(nq + 1, sizeof(*whole)), *cut = NULL;
	size_t ncut = 0, capcut = 0;
	uint64_t total = 0;

	bench_config(&base, info, 0);
	for (size_t i = 0; i < nq; i++)
		total += q[i].len;
	/* Chunks of about total / (8 * jobs) bytes, cut at PSBs. */
	uint64_t want = total / (8 * jobs) + 1;
	for (size_t i = 0; i < nq; i++) {
		struct pt_config pc = base;
		struct pt_packet_decoder *pd;
		uint64_t off, start = 0;
		whole[i].begin = q[i].buf;
		whole[i].end = q[i].buf + q[i].len;
		pc.begin = q[i].buf;
		pc.end = q[i].buf + q[i].len;
		pd = pt_pkt_alloc_decoder(&pc);
		while (pd && pt_pkt_sync_forward(pd) >= 0) {
			if (pt_pkt_get_sync_offset(pd, &off) < 0)
				break;
			if (off - start >= want) {
				if (ncut == capcut) {
					capcut = capcut ? capcut * 2 : 64;
					cut = realloc(cut, capcut * sizeof(*cut));
				}
				cut[ncut++] = (struct chunk){q[i].buf + start, q[i].buf + off, 0, 0, 0};
				start = off;
			}
		}
		if (pd)
			pt_pkt_free_decoder(pd);
		if (ncut == capcut) {
			capcut = capcut ? capcut * 2 : 64;
			cut = realloc(cut, capcut * sizeof(*cut));
		}
		cut[ncut++] = (struct chunk){q[i].buf + start, q[i].buf + q[i].len, 0, 0, 0};
	}
	double sw, sc, pw, pcpu;
	uint64_t si = 0, se = 0, pi = 0, pe = 0;
	run_chunks(whole, nq, img, &base, 1, &sw, &sc);
	run_chunks(cut, ncut, img, &base, jobs, &pw, &pcpu);
	for (size_t i = 0; i < nq; i++)
		si += whole[i].insns, se += whole[i].errors;
	for (size_t i = 0; i < ncut; i++)
		pi += cut[i].insns, pe += cut[i].errors;
	printf("serial: %zu queues %" PRIu64 " insns %" PRIu64 " errors %.3f s wall %.3f s cpu\n", nq, si, se,
	       sw, sc);
	printf("par %u: %zu chunks %" PRIu64 " insns %" PRIu64 " errors %.3f s wall %.3f s cpu "
	       "speedup %.2fx %s\n",
	       jobs, ncut, pi, pe, pw, pcpu, sw / pw, si == pi && se == pe ? "same" : "DIFFERENT");
	free(whole);
	free(cut);
	return si == pi && se == pe ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "amplify"))
		return amplify(argv[2], argv[3], strtoul(argv[4], NULL, 0));
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "bare"))
		return bare(argv[2], argv[3],
			    argc == 5 ? !strcmp(argv[4], "plain") ? 1 : !strcmp(argv[4], "packets") ? 2 : 0 : 0, 0);
	if (argc == 5 && !strcmp(argv[1], "par") && atoi(argv[4]) >= 1)
		return bare(argv[2], argv[3], 0, (unsigned)atoi(argv[4]));
	fprintf(stderr, "usage: ptdecode_bench amplify IN OUT N | bare PERF.DATA IMAGEDIR [plain|packets] | par PERF.DATA IMAGEDIR JOBS\n");
	return 2;
}
