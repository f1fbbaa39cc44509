/* x86br: the x86 branch classifier of the project.  What a branch
 * instruction is, and how long, from its bytes alone: no tables, no
 * allocation, safe on any bytes (it never reads past @n).
 *
 * It knows the branches Intel PT reports and their lengths; every other
 * instruction is X86BR_NONE.  Checked against capstone on random
 * instructions (tests/unit/test_x86br.c). */
#ifndef MT_X86BR_H
#define MT_X86BR_H

#include <stddef.h>
#include <stdint.h>

enum x86br {
	X86BR_NONE = 0, /* not a branch (or not decodable) */
	X86BR_JCC,	/* jcc, loop*, jrcxz */
	X86BR_JMP,	/* near jmp, direct or indirect */
	X86BR_CALL,	/* near call, direct or indirect */
	X86BR_RET,	/* near ret */
	X86BR_SYSCALL,	/* syscall, sysenter, int n, int3, into, int1, far call */
	X86BR_SYSRET,	/* sysret, sysexit, iret, far ret */
	X86BR_FARJMP,	/* far jmp */
};

/* Classifies the instruction in @b (@n bytes) in @bits (16, 32, 64) mode;
 * sets *size for branches (0 when unknown: the bytes end inside the
 * instruction). */
enum x86br x86br_classify(const uint8_t *b, size_t n, int bits, uint8_t *size);

/* The same, with what a walk of the code needs (mt-ptsim, mt-ptgen). */
struct x86br_insn {
	enum x86br cls;
	uint8_t size;	 /* as x86br_classify's */
	uint8_t trap;	 /* X86BR_SYSCALL, but a trap or a far call (int3, into, int1,
			  * lcall), not a system call (syscall, sysenter, int n) */
	uint8_t direct;	 /* the target is in the instruction (rel8/16/32) */
	uint64_t target; /* direct: where it goes, the instruction being at @ip */
};
void x86br_decode(const uint8_t *b, size_t n, int bits, uint64_t ip, struct x86br_insn *in);

/* ---- the prefixes and ModRM lengths, decoded in one place (x86br; the
 * cached walk takes lengths from libipt's decoder, ptd_walk.c) ---- */

/* The instruction's opcode, past its prefixes: legacy (operand and
 * address size, segment, lock, rep; at most 14), REX (64-bit mode; one
 * that a legacy prefix follows does not count), VEX (c5, c4) and EVEX (62,
 * 64-bit mode) and the 0f, 0f38, 0f3a escapes. */
struct x86_op {
	size_t at;	/* the opcode byte is b[at] */
	uint8_t op;	/* the opcode */
	uint8_t map;	/* 0 one-byte, 1 0f, 2 0f38, 3 0f3a */
	uint8_t vex;	/* VEX or EVEX encoded */
	uint8_t p66;	/* an operand-size prefix */
	uint8_t p67;	/* an address-size prefix */
	uint8_t rexw;	/* REX.W (or VEX.W of c4) */
};

/* Decodes @b (@n bytes) in @bits (16, 32, 64) mode up to its opcode
 * into *o: 1, or 0 when the bytes end first or a VEX/EVEX map is not one
 * of the three. */
static inline int x86_opcode(const uint8_t *b, size_t n, int bits, struct x86_op *o)
{
	size_t i;

	/* legacy prefixes: 26 2e 36 3e 64 65 66 67 f0 f2 f3 */
	static const uint32_t legacy[8] = {0, 0x40404040, 0, 0xf0, 0, 0, 0, 0x000d0000};

	o->map = o->vex = o->p66 = o->p67 = o->rexw = 0;
	for (i = 0; i < n && i < 15; i++) {
		uint8_t c = b[i];
		if (bits == 64 && (c & 0xf0) == 0x40) {
			o->rexw = (c >> 3) & 1; /* REX: the last one counts */
			continue;
		}
		if (!((legacy[c >> 5] >> (c & 31)) & 1))
			break;
		o->p66 |= c == 0x66;
		o->p67 |= c == 0x67;
		o->rexw = 0;
	}
	if (i >= n)
		return 0;
	o->op = b[i];
	if (bits == 64 && (o->op == 0xc5 || o->op == 0xc4 || o->op == 0x62)) {
		/* VEX (2, 3 bytes), EVEX (4) */
		size_t plen = o->op == 0xc5 ? 2 : o->op == 0xc4 ? 3 : 4;
		if (i + plen >= n)
			return 0;
		o->map = o->op == 0xc5 ? 1 : (b[i + 1] & (o->op == 0x62 ? 3 : 0x1f));
		if (o->op == 0xc4)
			o->rexw = b[i + 2] >> 7;
		if (o->map < 1 || o->map > 3)
			return 0;
		i += plen;
		o->vex = 1;
	} else if (o->op == 0x0f) {
		if (++i >= n)
			return 0;
		o->map = 1;
		if (b[i] == 0x38 || b[i] == 0x3a) {
			o->map = b[i] == 0x38 ? 2 : 3;
			if (++i >= n)
				return 0;
		}
	}
	o->at = i;
	o->op = b[i];
	return 1;
}

/* The length of the ModRM byte at b[i] and what follows it (SIB,
 * displacement) in @b (@n bytes), with 16-bit addressing if @addr16: 0
 * when the bytes end first. */
static inline size_t x86_modrm_len(const uint8_t *b, size_t n, size_t i, int addr16)
{
	uint8_t mod, rm;
	size_t len = 1;

	if (i >= n)
		return 0;
	mod = b[i] >> 6;
	rm = b[i] & 7;
	if (mod == 3)
		return 1;
	if (addr16)
		return len + (mod == 0 && rm == 6 ? 2 : mod == 1 ? 1 : mod == 2 ? 2 : 0);
	if (rm == 4) {
		if (i + 1 >= n)
			return 0;
		len++;
		if (mod == 0 && (b[i + 1] & 7) == 5)
			len += 4;
	}
	return len + (mod == 0 && rm == 5 ? 4 : mod == 1 ? 1 : mod == 2 ? 4 : 0);
}

#endif
