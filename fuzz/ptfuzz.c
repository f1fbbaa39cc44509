/* Setup shared by the raw-PT fuzz targets (see ptfuzz.h). */
#include "ptfuzz.h"

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

void ptfuzz_init(const char *name)
{
	snprintf(pt_path, sizeof pt_path, "/dev/shm/mt-fuzz-%s.%d", name, (int)getpid());
	atexit(rm_input);
	const char *spec = getenv("FUZZ_PT_IMAGE");
	if (spec) {
		FUZZ_ASSERT(ptd_parse_image_spec(spec, &ptfuzz_image) == 0, "bad FUZZ_PT_IMAGE %s",
			    spec);
		ptfuzz_have_image = 1;
	} else if (access("build/programs/recursion", R_OK) == 0) {
		ptfuzz_image = (struct ptd_image_spec){"build/programs/recursion", 0x1000, 0x78000,
						       0x401000};
		ptfuzz_have_image = 1;
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
