#include "sysenv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int runnable(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0) {
		errno = EACCES;
		return -1;
	}
	return 0;
}

int mt_find_in_path(const char *name, char *out, size_t len)
{
	if (strchr(name, '/')) {
		snprintf(out, len, "%s", name);
		return runnable(name);
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (;;) {
		const char *c = strchr(path, ':');
		size_t l = c ? (size_t)(c - path) : strlen(path);
		snprintf(out, len, "%.*s/%s", (int)l, l ? path : ".", name);
		if (runnable(out) == 0)
			return 0;
		if (!c)
			break;
		path = c + 1;
	}
	snprintf(out, len, "%s", name);
	errno = ENOENT;
	return -1;
}

const char *mt_tmp_dir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}
