/* A hot/cold split function in a stripped program (Debian's python3): the
 * cold part has no symbol, only its own FDE, so it reads as a function of
 * its own, and the hot part enters it in the middle, right after a call (a
 * "return site"), by a conditional branch and by a direct jmp.  Both stay in
 * work()'s frame; neither is a longjmp or an exception landing.
 * Built -O2 -s, main exported to .dynsym for mt-ptsim --start-at. */
#include <stdio.h>

__attribute__((noinline)) int note(int v)
{
	__asm__ volatile("" : "+r"(v));
	return v + 1;
}

int work(int v);

/* work(v): v & 7 == 0: jcc into the cold part (join1); else v & 3 == 0:
 * direct jmp into it (join2); else hot only.  The cold part's own entry
 * (the call before join1) is never run: the FDE names it all the same. */
__asm__(".text\n"
	".globl work\n"
	".type work, @function\n"
	"work:\n"
	"	.cfi_startproc\n"
	"	push %rbx\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbx, -16\n"
	"	mov %edi, %ebx\n"
	"	test $7, %edi\n"
	"	je .Ljoin1\n"
	"	test $3, %edi\n"
	"	jne 1f\n"
	"	jmp .Ljoin2\n"
	"1:	call note\n"
	"	add %eax, %ebx\n"
	".Lback:\n"
	"	mov %ebx, %eax\n"
	"	pop %rbx\n"
	"	.cfi_def_cfa_offset 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size work, .-work\n"
	"work_cold:\n"
	"	.cfi_startproc\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbx, -16\n"
	"	call note\n"
	".Ljoin1:\n"
	"	add $1, %ebx\n"
	"	call note\n"
	".Ljoin2:\n"
	"	add $2, %ebx\n"
	"	mov %ebx, %edi\n"
	"	call note\n"
	"	mov %eax, %ebx\n"
	"	jmp .Lback\n"
	"	.cfi_endproc\n");

int main(void)
{
	int s = 0;
	for (int i = 0; i < 64; i++)
		s += work(i);
	printf("%d\n", s);
	return 0;
}
