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
 *       every taken branch.
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

static int bare(const char *path, const char *imgdir, int plain)
{
	pd_reader *r;
	struct pd_event ev;
	struct qdata q[64];
	size_t nq = 0, i;
	struct pt_image_section_cache *isc = pt_iscache_alloc(NULL);
	struct pt_image *img = pt_image_alloc(NULL);
	int fd = open(path, O_RDONLY), ret;
	uint64_t blocks = 0, insns = 0, bytes = 0, errors = 0, tsum = 0;
	double t0, t1;
	const struct pd_info *info;

	if (fd < 0 || pd_open(&r, fd) < 0) {
		fprintf(stderr, "bare: cannot read %s\n", path);
		return 2;
	}
	info = pd_info(r);
	while ((ret = pd_next(r, &ev)) > 0) {
		if (ev.type == PD_REC_MMAP2 || ev.type == PD_REC_MMAP) {
			struct pd_mmap m;
			char file[4096], hex[41];
			const uint8_t *bid = NULL;
			size_t k;
			if (pd_parse_mmap(&ev, &m) < 0 || !(m.prot & 4))
				continue;
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
			int isid = pt_iscache_add_file(isc, file, m.pgoff, m.len, m.addr);
			if (isid >= 0)
				pt_image_add_cached(img, isc, isid, NULL);
		} else if (ev.type == PD_REC_AUXTRACE) {
			struct pd_auxtrace a;
			pd_parse_auxtrace(&ev, &a);
			for (i = 0; i < nq && q[i].idx != a.idx; i++)
				;
			if (i == nq) {
				if (nq == 64)
					continue;
				memset(&q[nq], 0, sizeof q[nq]);
				q[nq++].idx = a.idx;
			}
			if (q[i].len + ev.payload_size > q[i].cap) {
				q[i].cap = (q[i].len + ev.payload_size) * 2;
				q[i].buf = realloc(q[i].buf, q[i].cap);
			}
			memcpy(q[i].buf + q[i].len, ev.payload, ev.payload_size);
			q[i].len += ev.payload_size;
		}
	}
	t0 = now();
	for (i = 0; i < nq; i++) {
		struct pt_config cfg;
		struct pt_block_decoder *dec;
		struct pt_block blk;
		struct pt_event pev;
		int st;
		unsigned fam = 0, mod = 0, step = 0;

		pt_config_init(&cfg);
		cfg.begin = q[i].buf;
		cfg.end = q[i].buf + q[i].len;
		if (info->cpuid && sscanf(info->cpuid, "GenuineIntel,%u,%u,%u", &fam, &mod, &step) >= 2) {
			cfg.cpu.vendor = pcv_intel;
			cfg.cpu.family = (uint16_t)fam;
			cfg.cpu.model = (uint8_t)mod;
			cfg.cpu.stepping = (uint8_t)step;
			pt_cpu_errata(&cfg.errata, &cfg.cpu);
		}
		cfg.nom_freq = 22;
		/* mt-decode's configuration: a block ends at every branch */
		cfg.flags.variant.block.end_on_call = !plain;
		cfg.flags.variant.block.end_on_jump = !plain;
		dec = pt_blk_alloc_decoder(&cfg);
		pt_blk_set_image(dec, img);
		bytes += q[i].len;
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
		pt_blk_free_decoder(dec);
	}
	t1 = now();
	printf("bare%s: %" PRIu64 " bytes %" PRIu64 " blocks %" PRIu64 " insns %" PRIu64
	       " errors %.3f s %.1f MB/s (%" PRIu64 ")\n",
	       plain ? " (plain blocks)" : "", bytes, blocks, insns, errors, t1 - t0, (double)bytes / (t1 - t0) / 1e6, tsum & 1);
	pd_close(r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "amplify"))
		return amplify(argv[2], argv[3], strtoul(argv[4], NULL, 0));
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "bare"))
		return bare(argv[2], argv[3], argc == 5 && !strcmp(argv[4], "plain"));
	fprintf(stderr, "usage: ptdecode_bench amplify IN OUT N | bare PERF.DATA IMAGEDIR [plain]\n");
	return 2;
}
