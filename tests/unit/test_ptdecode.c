/* ptdecode's --image spec parser. */
#include <stdlib.h>
#include <string.h>

#include "ptdecode.h"
#include "t.h"

int main(void)
{
	struct ptd_image_spec sp;

	T_CHECK(ptd_parse_image_spec("/bin/ls@0x400000", &sp) == 0 && !strcmp(sp.file, "/bin/ls") &&
			sp.vaddr == 0x400000 && sp.offset == 0 && sp.size == 0,
		"image spec FILE@VADDR");
	free((void *)sp.file);
	T_CHECK(ptd_parse_image_spec("a.bin:0x1000:4096@0x7f0000001000", &sp) == 0 &&
			!strcmp(sp.file, "a.bin") && sp.offset == 0x1000 && sp.size == 4096 &&
			sp.vaddr == 0x7f0000001000,
		"image spec FILE:OFFSET:SIZE@VADDR");
	free((void *)sp.file);
	T_CHECK(ptd_parse_image_spec("a.bin", &sp) < 0, "image spec without @ is refused");
	T_CHECK(ptd_parse_image_spec("a.bin@zz", &sp) < 0, "image spec with a bad address is refused");
	T_CHECK(ptd_parse_image_spec("a.bin:x@0x1", &sp) < 0, "image spec with a bad offset is refused");
	return T_DONE();
}
