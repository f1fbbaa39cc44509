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
	FN handler, 0x401700
	FN rec, 0x401800
	FN jumper, 0x401900
	FN a.cold, 0x401a00
	FN f, 0x401b00
	FN g, 0x401c00
	FN h, 0x401d00
	.org 0x1000
	.section .note.GNU-stack,"",@progbits
