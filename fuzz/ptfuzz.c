/* Setup shared by the raw-PT fuzz targets (see ptfuzz.h). */
#include "ptfuzz.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memfd.h"

struct ptd_image_spec ptfuzz_image;
int ptfuzz_have_image;
static char pt_path[64];
static mtev_writer *cur_w;

static void rm_input(void)
{
	unlink(pt_path);
}

/* @path's executable segment (its first PT_LOAD with PF_X) as the image;
 * 0 if @path is not a 64-bit ELF file with one. */
static int elf_image(const char *path)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open(path, O_RDONLY), ok = 0;
	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
	    !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof ph)
		for (unsigned i = 0; i < eh.e_phnum && !ok; i++) {
			if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) !=
			    (ssize_t)sizeof ph)
				break;
			if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_filesz) {
				ptfuzz_image = (struct ptd_image_spec){path, ph.p_offset,
								       ph.p_filesz, ph.p_vaddr};
				ok = 1;
			}
		}
	close(fd);
	return ok;
}

void ptfuzz_init(const char *name)
{
	snprintf(pt_path, sizeof pt_path, "/dev/shm/mt-fuzz-%s.%d", name, (int)getpid());
	atexit(rm_input);
	const char *spec = getenv("FUZZ_PT_IMAGE");
	if (spec && strchr(spec, '@')) {
		FUZZ_ASSERT(ptd_parse_image_spec(spec, &ptfuzz_image) == 0, "bad FUZZ_PT_IMAGE %s",
			    spec);
		ptfuzz_have_image = 1;
	} else if (spec) {
		FUZZ_ASSERT(elf_image(spec), "FUZZ_PT_IMAGE %s: no ELF file with code", spec);
		ptfuzz_have_image = 1;
	} else {
		ptfuzz_have_image = elf_image("build/fuzz/ptprog");
	}
}

const char *ptfuzz_input(const uint8_t *data, size_t size)
{
	int fd = open(pt_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_ASSERT(fd >= 0, "%s: %s", pt_path, strerror(errno));
	FUZZ_ASSERT(!size || write(fd, data, size) == (ssize_t)size, "write %s", pt_path);
	close(fd);
	return pt_path;
}

void ptfuzz_options(struct ptd_options *o, void (*warn)(void *, const char *), void *warn_ctx)
{
	memset(o, 0, sizeof *o);
	o->images = ptfuzz_have_image ? &ptfuzz_image : NULL;
	o->nimages = ptfuzz_have_image ? 1 : 0;
	o->raw_pid = 1;
	o->raw_tid = 1;
	o->cpu_family = 6; /* an Intel part with the usual errata workarounds */
	o->cpu_model = 0x5e;
	o->warn = warn;
	o->warn_ctx = warn_ctx;
}

int ptfuzz_open_out(void *ctx, uint32_t flags, mtev_writer **w)
{
	int err;
	(void)ctx;
	FUZZ_ASSERT(!cur_w, "output opened twice");
	*w = cur_w = mtev_writer_alloc(FUZZ_FD_OUT, "mt-decode", flags, &err);
	return *w ? 0 : -1;
}

mtev_writer *ptfuzz_take_out(void)
{
	mtev_writer *w = cur_w;
	cur_w = NULL;
	return w;
}

int ptfuzz_in_image(uint64_t a)
{
	return !ptfuzz_have_image ||
	       (a >= ptfuzz_image.vaddr && a < ptfuzz_image.vaddr + ptfuzz_image.size);
}
