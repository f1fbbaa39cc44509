/* Functions at fixed addresses for the mt-segment / mt-stitch golden tests:
 * each is 0x100 bytes long (by its symbol size), text starts at 0x401000. */
	.macro FN name, addr
	.org \addr - 0x401000
	.globl \name
	.type \name, @function
\name:
	ret
	.size \name, 0x100
	.endm

	.text
	FN start, 0x401000
	FN main, 0x401100
	FN a, 0x401200
	FN b, 0x401300
	FN c, 0x401400
	FN d, 0x401500
	FN e, 0x401600
	/* e longjmps: an indirect jmp at 0x401610 */
	.org 0x401610 - 0x401000
	jmp *%rdx
	FN handler, 0x401700
	FN rec, 0x401800
	FN jumper, 0x401900
	FN a.cold, 0x401a00
	FN f, 0x401b00
	FN g, 0x401c00
	FN h, 0x401d00

	/* mpcpy jumps into mmove's body (glibc's mempcpy into memmove's);
	 * loop calls mpcpy directly at 0x401f10 */
	.org 0x401e00 - 0x401000
	.globl mpcpy
	.type mpcpy, @function
mpcpy:
	jmp .Lmmove_body
	.size mpcpy, 0x80
	.org 0x401e80 - 0x401000
	.globl mmove
	.type mmove, @function
mmove:
	nop
.Lmmove_body:
	ret
	.size mmove, 0x80
	.org 0x401f00 - 0x401000
	.globl loop
	.type loop, @function
loop:
	.org 0x401f10 - 0x401000
	call mpcpy
	ret
	.size loop, 0x40

	/* an interpreter's recursion: ev calls dis, dis calls obj */
	.org 0x401f40 - 0x401000
	.globl ev
	.type ev, @function
ev:
	.org 0x401f50 - 0x401000
	call dis
	.org 0x401f60 - 0x401000
	call dis
	ret
	.size ev, 0x40
	.org 0x401f80 - 0x401000
	.globl dis
	.type dis, @function
dis:
	.org 0x401f90 - 0x401000
	call obj
	ret
	.size dis, 0x40
	.org 0x401fc0 - 0x401000
	.globl obj
	.type obj, @function
obj:
	ret
	.size obj, 0x40
	.org 0x1000
	.section .note.GNU-stack,"",@progbits
