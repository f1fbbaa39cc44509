#include "symz.h"
#include "rustv0.h"

#include <dlfcn.h>

/* ---- Rust's legacy mangling, after an Itanium demangler ----
 * A legacy Rust name demangles as C++ would, into a path whose last element
 * is the hash "h" + 16 hex digits, with rustc's escapes left in the
 * elements: "$LT$" <, "$GT$" >, "$LP$" (, "$RP$" ), "$C$" ",", "$SP$" @,
 * "$BP$" *, "$RF$" &, "$uXX$" the character XX (hex), ".." "::", and a
 * leading "_$" for "$".  Drops the hash and decodes the escapes in place
 * (the result is never longer); returns the new length.  A name without the
 * hash is not Rust's and is left alone.  (v0 names, "_R...": rustv0.h.) */
size_t rust_tidy(char *s, size_t n)
{
	if (n < 20 || memcmp(s + n - 19, "::h", 3))
		return n;
	for (size_t i = n - 16; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return n;
	static const struct {
		const char *esc;
		char ch;
	} tab[] = {{"$LT$", '<'}, {"$GT$", '>'}, {"$LP$", '('}, {"$RP$", ')'}, {"$C$", ','},
		   {"$SP$", '@'}, {"$BP$", '*'}, {"$RF$", '&'}};
	size_t end = n - 19, w = 0;
	for (size_t i = 0; i < end;) {
		if (s[i] == '$') {
			size_t k;
			for (k = 0; k < sizeof tab / sizeof tab[0]; k++) {
				size_t l = strlen(tab[k].esc);
				if (end - i >= l && !memcmp(s + i, tab[k].esc, l)) {
					s[w++] = tab[k].ch;
					i += l;
					break;
				}
			}
			if (k < sizeof tab / sizeof tab[0])
				continue;
			if (end - i >= 5 && s[i + 1] == 'u' && s[i + 4] == '$') {
				unsigned v = 0, ok = 1;
				for (size_t j = i + 2; j < i + 4; j++) {
					char ch = s[j];
					int dg = ch >= '0' && ch <= '9' ? ch - '0'
						 : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
					if (dg < 0)
						ok = 0;
					else
						v = v * 16 + (unsigned)dg;
				}
				if (ok && v >= 0x20 && v < 0x7f) {
					s[w++] = (char)v;
					i += 5;
					continue;
				}
			}
		} else if (s[i] == '.' && i + 1 < end && s[i + 1] == '.') {
			s[w++] = ':';
			s[w++] = ':';
			i += 2;
			continue;
		} else if (s[i] == '_' && i + 1 < end && s[i + 1] == '$' &&
			   (i == 0 || s[i - 1] == ':' || s[i - 1] == '<')) {
			i++; /* "_$" starts an element that begins with an escape */
			continue;
		}
		s[w++] = s[i++];
	}
	s[w] = 0;
	return w;
}

/* ---- demangling for names that do not come from llvm-symbolizer ---- */
const char *demangle(struct ctx *c, const char *name)
{
	if (!strncmp(name, "_R", 2)) { /* Rust v0 */
		char buf[4096];
		long l = rustv0_demangle(name, buf, sizeof buf);
		char *r = l < 0 ? NULL : arena_strndup(&c->ar, buf, (size_t)l);
		return r ? r : name;
	}
	if (strncmp(name, "_Z", 2) != 0)
		return name;
	if (!c->demangle) {
		/* optional: libstdc++'s demangler, when it is installed */
		void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		void *f = h ? dlsym(h, "__cxa_demangle") : NULL;
		if (!f)
			return name;
		*(void **)&c->demangle = f;
	}
	int status = 0;
	char *d = c->demangle(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return name;
	}
	char *r = arena_strndup(&c->ar, d, strlen(d));
	free(d);
	if (r)
		rust_tidy(r, strlen(r));
	return r ? r : name;
}

