/* x86br, the x86 branch classifier, against capstone (the oracle): class
 * and length of random instructions built around every branch opcode, plus
 * random bytes; and of every instruction of real binaries' code (a linear
 * sweep of their .text sections).  And against libipt's instruction decoder:
 * every near branch it finds among prefixes x opcodes x ModRM bytes has
 * x86br's class and length (the cached walk, libcommon/ptd_walk.c, takes
 * sizes and classes from libipt and direct targets from x86br_decode). */
#include <capstone/capstone.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "x86br.h"
#include "t.h"

static uint64_t rng = 88172645463325252ull;
static unsigned rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)rng;
}

/* capstone's verdict: class and size, X86BR_NONE for non-branches */
static enum x86br oracle(csh h, const uint8_t *b, size_t n, int bits, uint8_t *size,
			       int *valid)
{
	cs_insn *insn;
	size_t cnt = cs_disasm(h, b, n, 0x400000, 1, &insn);
	enum x86br c = X86BR_NONE;
	*valid = cnt == 1;
	*size = 0;
	if (cnt != 1)
		return X86BR_NONE;
	*size = (uint8_t)insn->size;
	switch (insn->id) {
	case X86_INS_JAE: case X86_INS_JA: case X86_INS_JBE: case X86_INS_JB:
	case X86_INS_JE: case X86_INS_JGE: case X86_INS_JG: case X86_INS_JLE:
	case X86_INS_JL: case X86_INS_JNE: case X86_INS_JNO: case X86_INS_JNP:
	case X86_INS_JNS: case X86_INS_JO: case X86_INS_JP: case X86_INS_JS:
	case X86_INS_JCXZ: case X86_INS_JECXZ: case X86_INS_JRCXZ:
	case X86_INS_LOOP: case X86_INS_LOOPE: case X86_INS_LOOPNE:
		c = X86BR_JCC;
		break;
	case X86_INS_JMP:
		c = X86BR_JMP;
		break;
	case X86_INS_LJMP:
		c = X86BR_FARJMP;
		break;
	case X86_INS_CALL:
		c = X86BR_CALL;
		break;
	case X86_INS_RET:
		c = X86BR_RET;
		break;
	case X86_INS_SYSCALL: case X86_INS_SYSENTER: case X86_INS_INT: case X86_INS_INT3:
	case X86_INS_INTO: case X86_INS_INT1: case X86_INS_LCALL:
		c = X86BR_SYSCALL;
		break;
	case X86_INS_SYSRET: case X86_INS_SYSEXIT: case X86_INS_IRET: case X86_INS_IRETD:
	case X86_INS_IRETQ: case X86_INS_RETF: case X86_INS_RETFQ:
		c = X86BR_SYSRET;
		break;
	default:
		break;
	}
	(void)bits;
	cs_free(insn, cnt);
	return c;
}

static const uint8_t branch_ops[][2] = {
	{0x70, 0}, {0x75, 0}, {0x7f, 0}, {0xe0, 0}, {0xe1, 0}, {0xe2, 0}, {0xe3, 0},
	{0xe8, 0}, {0xe9, 0}, {0xeb, 0}, {0xc3, 0}, {0xc2, 0}, {0xcb, 0}, {0xca, 0},
	{0xcf, 0}, {0xcc, 0}, {0xcd, 0}, {0xff, 0x10}, {0xff, 0x18}, {0xff, 0x20},
	{0xff, 0x28}, {0x0f, 0x80}, {0x0f, 0x84}, {0x0f, 0x8f}, {0x0f, 0x05}, {0x0f, 0x34},
	{0x0f, 0x07}, {0x90, 0}, {0x48, 0x89}, {0x0f, 0x1f}, {0xc4, 0xe2}, {0xf3, 0xa4},
};

/* The .text section of the ELF64 file @path: *off, *size (0: none). */
static void text_section(const uint8_t *f, size_t len, uint64_t *off, uint64_t *size)
{
	uint64_t shoff;
	uint16_t shentsize, shnum, shstrndx;
	const uint8_t *strs;
	*off = *size = 0;
	if (len < 64 || memcmp(f, "\177ELF", 4) || f[4] != 2 || f[5] != 1)
		return;
	memcpy(&shoff, f + 0x28, 8);
	memcpy(&shentsize, f + 0x3a, 2);
	memcpy(&shnum, f + 0x3c, 2);
	memcpy(&shstrndx, f + 0x3e, 2);
	if (shentsize != 64 || shstrndx >= shnum || shoff > len || (len - shoff) / 64 < shnum)
		return;
	{
		uint64_t so;
		memcpy(&so, f + shoff + shstrndx * 64 + 0x18, 8);
		if (so >= len)
			return;
		strs = f + so;
	}
	for (unsigned i = 0; i < shnum; i++) {
		const uint8_t *sh = f + shoff + i * 64;
		uint32_t name;
		uint64_t o, s;
		memcpy(&name, sh, 4);
		memcpy(&o, sh + 0x18, 8);
		memcpy(&s, sh + 0x20, 8);
		if (strs + name + 6 <= f + len && !memcmp(strs + name, ".text", 6) && o <= len &&
		    s <= len - o) {
			*off = o;
			*size = s;
		}
	}
}

/* Every instruction capstone decodes in the .text of a few real binaries:
 * the classifier must agree on class and (for branches) length. */
static void sweep_binaries(csh h)
{
	static const char *const bins[] = {"build/programs/recursion", "bin/mt-decode",
					   "/usr/bin/perf", "/bin/bash", "/lib/x86_64-linux-gnu/libc.so.6"};
	size_t total = 0, nbr = 0, bad = 0, nfiles = 0, ndec = 0, baddec = 0;
	cs_insn *in;
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	in = cs_malloc(h);
	for (size_t b = 0; b < sizeof bins / sizeof bins[0]; b++) {
		FILE *fp = fopen(bins[b], "rb");
		uint8_t *f;
		long len;
		uint64_t off, size;
		if (!fp)
			continue;
		fseek(fp, 0, SEEK_END);
		len = ftell(fp);
		fseek(fp, 0, SEEK_SET);
		f = len > 0 ? malloc((size_t)len) : NULL;
		if (!f || fread(f, 1, (size_t)len, fp) != (size_t)len) {
			free(f);
			fclose(fp);
			continue;
		}
		fclose(fp);
		text_section(f, (size_t)len, &off, &size);
		if (size)
			nfiles++;
		const uint8_t *p = f + off, *e = f + off + size;
		while (p < e) {
			size_t n = (size_t)(e - p) < 16 ? (size_t)(e - p) : 16, cn = n;
			const uint8_t *cp = p;
			uint64_t addr = 0x400000 + (uint64_t)(p - f);
			uint8_t sz_me, sz_cs;
			int valid;
			enum x86br me, cs;
			if (!cs_disasm_iter(h, &cp, &cn, &addr, in)) {
				p++; /* data in .text: capstone resyncs a byte on */
				continue;
			}
			cs = oracle(h, p, n, 64, &sz_cs, &valid);
			me = x86br_classify(p, n, 64, &sz_me);
			total++;
			nbr += cs != X86BR_NONE;
			/* 0x66/0x67 before a branch: capstone follows AMD (see
			 * the random test); not produced by compilers anyway */
			if (valid && (p[0] != 0x66 && p[0] != 0x67) &&
			    (me != cs || (cs != X86BR_NONE && sz_me != sz_cs))) {
				if (bad++ < 5) {
					printf("# %s +0x%zx:", bins[b], (size_t)(p - f));
					for (size_t k = 0; k < in->size; k++)
						printf(" %02x", p[k]);
					printf(" (%s %s) me=%d/%u capstone=%d/%u\n", in->mnemonic,
					       in->op_str, me, sz_me, cs, sz_cs);
				}
			}
			if (valid && cs != X86BR_NONE && cs == me) {
				/* x86br_decode: direct target and trap, as capstone */
				struct x86br_insn xi;
				const cs_x86 *x = &in->detail->x86;
				int cdirect = x->op_count == 1 && x->operands[0].type == X86_OP_IMM &&
					      (me == X86BR_JCC || me == X86BR_JMP || me == X86BR_CALL);
				int ctrap = in->id == X86_INS_INT3 || in->id == X86_INS_INTO ||
					    in->id == X86_INS_INT1 || in->id == X86_INS_LCALL;
				x86br_decode(p, n, 64, in->address, &xi);
				ndec++;
				if (xi.cls != me || xi.size != sz_me || xi.direct != cdirect ||
				    (cdirect && xi.target != (uint64_t)x->operands[0].imm) ||
				    xi.trap != ctrap) {
					if (baddec++ < 5)
						printf("# decode %s +0x%zx (%s %s): direct %d target 0x%llx trap %d\n",
						       bins[b], (size_t)(p - f), in->mnemonic, in->op_str,
						       xi.direct, (unsigned long long)xi.target, xi.trap);
				}
			}
			p += in->size;
		}
		free(f);
	}
	cs_free(in, 1);
	T_CHECK(nfiles >= 2 && total > 100000 && nbr > 10000,
		"real code: %zu instructions of %zu binaries, %zu branches", total, nfiles, nbr);
	T_CHECK(bad == 0, "classifier agrees with capstone on real code (%zu mismatches)", bad);
	T_CHECK(ndec > 10000 && baddec == 0,
		"x86br_decode's direct targets and traps agree with capstone on %zu branches (%zu mismatches)",
		ndec, baddec);
	cs_option(h, CS_OPT_DETAIL, CS_OPT_OFF);
}

/* libipt's instruction decoder over a fixed trace (PSB, MODE.Exec 64-bit,
 * PSBEND, TIP.PGE to 0x1000) whose image serves ipt_code */
static uint8_t ipt_code[16];

static int ipt_read(uint8_t *buf, size_t size, const struct pt_asid *asid, uint64_t ip, void *ctx)
{
	(void)asid;
	(void)ctx;
	if (ip < 0x1000 || ip >= 0x1000 + sizeof ipt_code)
		return -pte_nomap;
	if (size > 0x1000 + sizeof ipt_code - ip)
		size = 0x1000 + sizeof ipt_code - ip;
	memcpy(buf, ipt_code + (ip - 0x1000), size);
	return (int)size;
}

static void libipt_branches(void)
{
	static const uint8_t pfx[][3] = {{0}, {1, 0x66}, {1, 0x67}, {1, 0x48}, {2, 0x66, 0x48}, {1, 0xf3}};
	uint8_t tr[64];
	struct pt_config cfg;
	struct pt_packet pk[4];
	struct pt_encoder *e;
	struct pt_insn_decoder *dec;
	uint64_t len = 0;
	size_t nbr = 0, bad = 0, p, k;
	unsigned map, op, m;

	memset(pk, 0, sizeof pk);
	pk[0].type = ppt_psb;
	pk[1].type = ppt_mode;
	pk[1].payload.mode.leaf = pt_mol_exec;
	pk[1].payload.mode.bits.exec.csl = 1;
	pk[2].type = ppt_psbend;
	pk[3].type = ppt_tip_pge;
	pk[3].payload.ip.ipc = pt_ipc_sext_48;
	pk[3].payload.ip.ip = 0x1000;
	pt_config_init(&cfg);
	cfg.begin = tr;
	cfg.end = tr + sizeof tr;
	e = pt_alloc_encoder(&cfg);
	for (k = 0; k < 4; k++)
		pt_enc_next(e, &pk[k]);
	pt_enc_get_offset(e, &len);
	pt_free_encoder(e);
	cfg.end = tr + len;
	dec = pt_insn_alloc_decoder(&cfg);
	pt_image_set_callback(pt_insn_get_image(dec), ipt_read, NULL);
	for (p = 0; p < sizeof pfx / sizeof pfx[0]; p++)
		for (map = 0; map < 2; map++)
			for (op = 0; op < 256; op++)
				for (m = 0; m < 256; m++) {
					struct pt_insn in;
					struct pt_event ev;
					struct x86br_insn xi;
					size_t n = pfx[p][0];
					int st;

					memcpy(ipt_code, pfx[p] + 1, n);
					if (map)
						ipt_code[n++] = 0x0f;
					ipt_code[n++] = (uint8_t)op;
					ipt_code[n++] = (uint8_t)m;
					for (k = n; k < sizeof ipt_code; k++)
						ipt_code[k] = (uint8_t)(0x25 + 0x11 * k);
					st = pt_insn_sync_set(dec, 0);
					while (st >= 0 && (st & pts_event_pending))
						st = pt_insn_event(dec, &ev, sizeof ev);
					memset(&in, 0, sizeof in);
					st = pt_insn_next(dec, &in, sizeof in);
					if ((st < 0 && st == -pte_bad_insn) || !in.size)
						continue;
					if (in.iclass != ptic_call && in.iclass != ptic_jump &&
					    in.iclass != ptic_cond_jump)
						continue;
					nbr++;
					x86br_decode(ipt_code, 15, 64, 0x1000, &xi);
					if (xi.size != in.size ||
					    xi.cls != (in.iclass == ptic_call   ? X86BR_CALL
						       : in.iclass == ptic_jump ? X86BR_JMP
										: X86BR_JCC)) {
						if (bad++ < 5)
							printf("# libipt class %d size %u, x86br %d/%u: %02x %02x %02x %02x\n",
							       in.iclass, in.size, xi.cls, (unsigned)xi.size,
							       ipt_code[0], ipt_code[1], ipt_code[2],
							       ipt_code[3]);
					}
				}
	pt_insn_free_decoder(dec);
	T_CHECK(nbr > 10000 && bad == 0,
		"x86br_decode sizes and classes every near branch libipt decodes (%zu of them, %zu mismatches)",
		nbr, bad);
}

int main(void)
{
	csh h64;
	int i, mism = 0, checked = 0, branches = 0;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h64) != CS_ERR_OK) {
		T_CHECK(0, "capstone opens");
		return T_DONE();
	}
	for (i = 0; i < 200000; i++) {
		uint8_t b[16];
		size_t n = 0, k;
		uint8_t sz_me, sz_cs;
		int valid;
		enum x86br me, cs;
		/* prefixes (no 0x66: its branch semantics differ between
		 * vendors and capstone follows AMD; no 0x67: capstone 4 gets
		 * branch lengths wrong with it, see the fixed cases below),
		 * REX, opcode, random tail */
		unsigned np = rnd() % 3;
		for (k = 0; k < np; k++) {
			static const uint8_t pf[] = {0xf2, 0xf3, 0x2e, 0x3e, 0x64, 0x65, 0x40, 0x48, 0x41};
			b[n++] = pf[rnd() % sizeof pf];
		}
		if (i % 4 == 3) {
			while (n < 16)
				b[n++] = (uint8_t)rnd();
			for (k = 0; k < 5; k++)
				if (b[k] == 0x66)
					b[k] = 0x90;
		} else {
			const uint8_t *op = branch_ops[rnd() % (sizeof branch_ops / 2)];
			b[n++] = op[0];
			if (op[0] == 0x0f || op[0] == 0xff || op[0] == 0x48 || op[0] == 0xc4 ||
			    op[0] == 0xf3) {
				uint8_t m = op[1];
				if (op[0] == 0xff)
					m = (uint8_t)((rnd() & 0xc7) | op[1]);
				b[n++] = m;
			}
			while (n < 16)
				b[n++] = (uint8_t)rnd();
		}
		me = x86br_classify(b, 16, 64, &sz_me);
		cs = oracle(h64, b, 16, 64, &sz_cs, &valid);
		if (!valid)
			continue;
		/* REX before a legacy prefix is ignored by the cpu; skip the
		 * encodings where capstone and hardware are known to disagree */
		checked++;
		if (cs != X86BR_NONE)
			branches++;
		if (me != cs || (cs != X86BR_NONE && sz_me != sz_cs)) {
			if (mism++ < 5) {
				printf("# mismatch:");
				for (k = 0; k < 16; k++)
					printf(" %02x", b[k]);
				printf(" me=%d/%u capstone=%d/%u\n", me, sz_me, cs, sz_cs);
			}
		}
	}
	sweep_binaries(h64);
	cs_close(&h64);
	T_CHECK(checked > 100000 && branches > 50000, "%d instructions checked, %d branches",
		checked, branches);
	T_CHECK(mism == 0, "classifier agrees with capstone on class and length (%d mismatches)",
		mism);

	{
		uint8_t sz;
		static const uint8_t sysc[] = {0x0f, 0x05}, jcc16[] = {0x66, 0x0f, 0x84, 0, 0};
		T_CHECK(x86br_classify(sysc, 2, 64, &sz) == X86BR_SYSCALL && sz == 2, "syscall");
		T_CHECK(x86br_classify(jcc16, 5, 32, &sz) == X86BR_JCC && sz == 5,
			"66 jcc rel16 in 32-bit mode is 5 bytes");
		T_CHECK(x86br_classify(jcc16, 5, 64, &sz) == X86BR_JCC && sz == 7,
			"66 jcc in 64-bit mode keeps rel32 (Intel)");
		T_CHECK(x86br_classify(sysc, 1, 64, &sz) == X86BR_NONE, "cut instruction: none");
		{
			/* SDM: 0x67 changes no immediate or displacement size of
			 * these (capstone 4 disagrees) */
			static const uint8_t c67[] = {0x67, 0x48, 0xe8, 1, 2, 3, 4};
			static const uint8_t r67[] = {0x67, 0x48, 0xc2, 8, 0};
			static const uint8_t j67[] = {0x67, 0xff, 0x24, 0x25, 0, 0, 0, 0}; /* jmp [disp32] */
			T_CHECK(x86br_classify(c67, 7, 64, &sz) == X86BR_CALL && sz == 7, "67 48 call rel32");
			T_CHECK(x86br_classify(r67, 5, 64, &sz) == X86BR_RET && sz == 5, "67 48 ret imm16");
			T_CHECK(x86br_classify(j67, 8, 64, &sz) == X86BR_JMP && sz == 8,
				"67 jmp [sib disp32]");
		}
	}

	libipt_branches();
	return T_DONE();
}
