/* x86br: the x86 branch classifier (see x86br.h). */
#include "x86br.h"

/* The branches of the 0f map, the opcode @op at b[@i]: *sz the length */
static enum x86br classify_0f(uint8_t op, size_t i, int opsz16, size_t *sz, size_t *rel)
{
	switch (op) {
	case 0x80 ... 0x8f:
		*sz = i + 1 + (opsz16 ? 2 : 4);
		*rel = i + 1;
		return X86BR_JCC;
	case 0x05:
	case 0x34:
		*sz = i + 1;
		return X86BR_SYSCALL;
	case 0x07:
	case 0x35:
		*sz = i + 1;
		return X86BR_SYSRET;
	default:
		return X86BR_NONE;
	}
}

/* x86br_classify, and the details x86br_decode adds: *trap for a
 * syscall-class instruction that is a trap or a far call, *rel the offset
 * of a relative target (0: none). */
static enum x86br classify(const uint8_t *b, size_t n, int bits, uint8_t *size, int *trap,
			   size_t *rel)
{
	struct x86_op o;
	size_t i, sz = 0;
	int opsz16, addr16;
	enum x86br cls = X86BR_NONE;

	*size = 0;
	if (!x86_opcode(b, n, bits, &o) || o.vex || o.map > 1)
		return X86BR_NONE;
	i = o.at;
	opsz16 = o.p66 ? bits != 16 : bits == 16;
	addr16 = o.p67 ? bits == 32 : bits == 16;
	if (bits == 64)
		opsz16 = 0; /* near branches ignore 0x66 in 64-bit mode (Intel) */
	if (o.map == 1) {
		cls = classify_0f(o.op, i, opsz16, &sz, rel);
		if (cls == X86BR_NONE)
			return cls;
	} else switch (b[i]) {
	case 0x70 ... 0x7f:
	case 0xe0 ... 0xe3:
		cls = X86BR_JCC;
		sz = i + 2;
		*rel = i + 1;
		break;
	case 0xe8:
		cls = X86BR_CALL;
		sz = i + 1 + (opsz16 ? 2 : 4);
		*rel = i + 1;
		break;
	case 0xe9:
		cls = X86BR_JMP;
		sz = i + 1 + (opsz16 ? 2 : 4);
		*rel = i + 1;
		break;
	case 0xeb:
		cls = X86BR_JMP;
		sz = i + 2;
		*rel = i + 1;
		break;
	case 0xc3:
		cls = X86BR_RET;
		sz = i + 1;
		break;
	case 0xc2:
		cls = X86BR_RET;
		sz = i + 3;
		break;
	case 0xcb:
	case 0xcf:
		cls = X86BR_SYSRET;
		sz = i + 1;
		break;
	case 0xca:
		cls = X86BR_SYSRET;
		sz = i + 3;
		break;
	case 0xcc:
	case 0xce:
	case 0xf1:
		cls = X86BR_SYSCALL;
		sz = i + 1;
		*trap = 1;
		break;
	case 0xcd:
		cls = X86BR_SYSCALL;
		sz = i + 2;
		break;
	case 0x9a:
		if (bits == 64)
			return X86BR_NONE;
		cls = X86BR_SYSCALL;
		sz = i + 1 + (opsz16 ? 4 : 6);
		*trap = 1;
		break;
	case 0xea:
		if (bits == 64)
			return X86BR_NONE;
		cls = X86BR_FARJMP;
		sz = i + 1 + (opsz16 ? 4 : 6);
		break;
	case 0xff: {
		uint8_t reg;
		size_t ml;
		if (i + 1 >= n)
			return X86BR_NONE;
		reg = (b[i + 1] >> 3) & 7;
		if (reg == 2)
			cls = X86BR_CALL;
		else if (reg == 3)
			cls = X86BR_SYSCALL, *trap = 1; /* far call */
		else if (reg == 4)
			cls = X86BR_JMP;
		else if (reg == 5)
			cls = X86BR_FARJMP;
		else
			return X86BR_NONE;
		ml = x86_modrm_len(b, n, i + 1, addr16);
		if (!ml)
			return cls;
		sz = i + 1 + ml;
		break;
	}
	default:
		return X86BR_NONE;
	}
	if (sz <= 15)
		*size = (uint8_t)sz;
	return cls;
}

enum x86br x86br_classify(const uint8_t *b, size_t n, int bits, uint8_t *size)
{
	int trap = 0;
	size_t rel = 0;
	return classify(b, n, bits, size, &trap, &rel);
}

void x86br_decode(const uint8_t *b, size_t n, int bits, uint64_t ip, struct x86br_insn *in)
{
	int trap = 0;
	size_t rel = 0;
	in->cls = classify(b, n, bits, &in->size, &trap, &rel);
	in->trap = in->cls == X86BR_SYSCALL && trap;
	in->direct = 0;
	in->target = 0;
	if (rel && in->size && in->size <= n) {
		/* the displacement is the instruction's last bytes */
		uint64_t d = 0;
		size_t k, len = in->size - rel;
		for (k = len; k-- > 0;)
			d = d << 8 | b[rel + k];
		if (len < 8 && (d >> (8 * len - 1)) & 1)
			d |= ~0ull << (8 * len); /* sign-extend */
		in->direct = 1;
		in->target = ip + in->size + d;
		if (bits == 16)
			in->target &= 0xffff;
		else if (bits == 32)
			in->target &= 0xffffffff;
	}
}
