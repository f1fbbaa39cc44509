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

#endif
