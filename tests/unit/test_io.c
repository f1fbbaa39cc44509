/* io: outputs appear only when committed; aborted outputs leave nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "t.h"

int main(void)
{
	char dir[] = "/tmp/mt-test-io-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char path[256];
	snprintf(path, sizeof path, "%s/out.bin", dir);
	struct io_out o;
	struct stat st;
	T_CHECK(io_out_open(&o, path, 1, 0) == 0, "open output");
	T_CHECK(io_write_all(o.fd, "hello", 5) == 0, "write");
	T_CHECK(stat(path, &st) != 0, "not visible before commit");
	T_CHECK(io_out_commit(&o) == 0 && stat(path, &st) == 0 && st.st_size == 5, "visible after commit");

	char path2[256];
	snprintf(path2, sizeof path2, "%s/aborted.bin", dir);
	T_CHECK(io_out_open(&o, path2, 1, 0) == 0, "open second output");
	io_write_all(o.fd, "partial", 7);
	io_out_abort(&o);
	T_CHECK(stat(path2, &st) != 0, "aborted output leaves no file");
	char cmd[300];
	snprintf(cmd, sizeof cmd, "ls %s | wc -l", dir);
	FILE *p = popen(cmd, "r");
	int files = -1;
	if (p && fscanf(p, "%d", &files) != 1)
		files = -1;
	if (p)
		pclose(p);
	T_CHECK(files == 1, "no temp file left behind (%d entries)", files);

	uint8_t *buf;
	size_t len;
	T_CHECK(io_slurp(path, &buf, &len) == 0 && len == 5 && !memcmp(buf, "hello", 5), "slurp reads it back");
	free(buf);
	T_CHECK(io_slurp("/nonexistent", &buf, &len) < 0, "slurp of a missing file fails");
	unlink(path);
	rmdir(dir);

	T_CHECK(io_parse_size("4M", 256) == 4u << 20, "4M is 4 MiB");
	T_CHECK(io_parse_size("512", 256) == 512 && io_parse_size("2k", 256) == 2048, "plain and k sizes");
	T_CHECK(io_parse_size("100", 256) == 0, "below the minimum: 0");
	T_CHECK(io_parse_size("-1", 1) == 0 && io_parse_size("4X", 1) == 0 && io_parse_size("", 1) == 0,
		"negative, bad suffix, empty: 0");
	return T_DONE();
}
