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

int mt_cache_dir(char *out, size_t cap)
{
	const char *x = getenv("XDG_CACHE_HOME");
	int n;
	if (x && *x)
		n = snprintf(out, cap, "%s/mt", x);
	else if ((x = getenv("HOME")) && *x)
		n = snprintf(out, cap, "%s/.cache/mt", x);
	else
		return -1;
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int mt_mkdir_p(const char *dir)
{
	char tmp[4200];
	int n = snprintf(tmp, sizeof tmp, "%s", dir);
	if (n < 0 || (size_t)n >= sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(tmp, 0700) < 0 && errno != EEXIST ? -1 : 0;
}
