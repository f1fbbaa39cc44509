/* What a tool takes from its environment: a program found in PATH, the
 * directory for temporary (spill) files. */
#ifndef MT_SYSENV_H
#define MT_SYSENV_H

#include <stddef.h>

/* The executable @name: itself when it holds a '/', else the first
 * DIR/@name along $PATH (unset: /usr/local/bin:/usr/bin:/bin; an empty
 * element is the current directory) that is a regular file this process may
 * execute.  The path goes to @out (@len bytes).  0, or -1 with errno
 * (ENOENT: not in PATH; EACCES: not an executable regular file; else
 * stat's). */
int mt_find_in_path(const char *name, char *out, size_t len);

/* Where temporary files go: $TMPDIR when set and not empty, else /tmp. */
const char *mt_tmp_dir(void);

/* The tools' cache directory: $XDG_CACHE_HOME/mt, else $HOME/.cache/mt,
 * into @out (@cap bytes).  0, or -1 (neither is set, or too long). */
int mt_cache_dir(char *out, size_t cap);

/* mkdir -p @dir (mode 0700 for what it makes): 0, or -1 with errno. */
int mt_mkdir_p(const char *dir);

#endif
