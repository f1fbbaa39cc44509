#include "symz.h"

#include <jansson.h>

/* llvm-symbolizer's JSON replies to results: a layout matcher for LLVM 14's
 * output, a strict reader, then jansson for the rest (docs/symbolize.md, JSON:
 * why not jansson alone). */

static uint64_t parse_hex(const char *s)
{
	if (!s || !*s)
		return 0;
	return strtoull(s, NULL, 16);
}

static const char *json_str(json_t *o, const char *key, size_t *len)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v)) {
		*len = 0;
		return "";
	}
	*len = json_string_length(v);
	return json_string_value(v);
}

/* One entry of a reply's "Symbol" array (strings not NUL-terminated). */
struct jframe {
	const char *nm, *file;
	size_t nl, fl;
	long long line, col;
};

/* Fills @r from the frames of one reply (innermost first) and the last
 * one's StartAddress.  0 (possibly with no name: r->kind stays PENDING) or
 * -1 (out of memory). */
static int res_fill(struct ctx *c, struct result *r, const struct jframe *fr, size_t n,
		    uint64_t start)
{
	if (!n || !fr[n - 1].nl || (fr[n - 1].nl == 2 && !memcmp(fr[n - 1].nm, "??", 2)))
		return 0;
	uint32_t f0 = (uint32_t)c->nframes;
	int have_line = 0;
	for (size_t i = 0; i < n; i++) {
		const char *nm = fr[i].nm;
		size_t nl = fr[i].nl;
		if (!nl || (nl == 2 && !memcmp(nm, "??", 2)))
			nm = "??", nl = 2;
		if (fr[i].line > 0)
			have_line = 1;
		char *nd = arena_strndup(&c->ar, nm, nl);
		if (nd && nl > 19)
			nl = rust_tidy(nd, nl);
		if (nd && i == n - 1 && start && r->bin != NONE && c->bins[r->bin].state > 0) {
			/* one address, one name: another name of the function's
			 * symbol (a debug file's __GI__IO_setb) becomes its
			 * preferred, exported one (_IO_setb), as in the fallback */
			const struct elf_sym *ps =
				elfinfo_named_at(bin_syms(&c->bins[r->bin]), start, nd);
			if (ps && strcmp(ps->name, nd))
				nd = arena_strndup(&c->ar, ps->name, strlen(ps->name));
		}
		if (frame_push(c, nd, arena_strndup(&c->ar, fr[i].file, fr[i].fl),
			       fr[i].line > 0 && fr[i].line <= UINT32_MAX ? (uint32_t)fr[i].line : 0,
			       fr[i].col > 0 && fr[i].col <= UINT32_MAX ? (uint32_t)fr[i].col : 0) == NONE)
			return -1;
	}
	r->f0 = f0;
	r->nf = (uint32_t)n;
	r->entry_vaddr = start;
	r->kind = have_line ? RES_DEBUG : RES_SYMTAB;
	if (!have_line && n == 1 && r->bin != NONE) {
		/* symbol-table answer: say where in the function, as the ELF fallback does */
		struct bin *b = &c->bins[r->bin];
		if (!r->entry_vaddr) {
			const struct elf_sym *s = elfinfo_lookup(bin_syms(b), r->vaddr);
			if (s)
				r->entry_vaddr = s->addr;
		}
		if (r->entry_vaddr && r->vaddr != r->entry_vaddr) {
			/* "%s+0x%x" cut to 1199 bytes (as the fallbacks' names) */
			const char *nm = c->frames[f0].name;
			size_t nl = c->frames[f0].name_len, hl = 0;
			char hex[20];
			for (uint64_t off = r->vaddr - r->entry_vaddr; off; off >>= 4)
				hex[hl++] = "0123456789abcdef"[off & 15];
			size_t full = nl + 3 + hl, cut = full < 1199 ? full : 1199;
			char *buf = arena_alloc(&c->ar, full + 1);
			if (!buf) {
				c->oom = 1;
			} else {
				char *o = buf;
				memcpy(o, nm, nl);
				memcpy(o + nl, "+0x", 3);
				for (size_t k = 0; k < hl; k++)
					o[nl + 3 + k] = hex[hl - 1 - k];
				buf[cut] = 0;
				c->frames[f0].name = buf;
				c->frames[f0].name_len = (uint32_t)cut;
			}
		}
	}
	return 0;
}

static int jframes_room(struct ctx *c, size_t n)
{
	return mt_grow((void **)&c->jf, &c->capjf, n, sizeof *c->jf) < 0 ? -1 : 0;
}

/* ---- a JSON reader for llvm-symbolizer's replies (the common case) ----
 * Strict: anything it does not expect (floats, odd escapes, deep nesting)
 * makes it give up, and jansson reads the reply instead. */
struct jcur {
	const char *p, *end;
	char *out; /* decoded strings go here: never longer than the input */
};

static void js_ws(struct jcur *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int js_hex4(const char *p, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = p[i];
		unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
			     : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
			     : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) : 16u;
		if (d > 15)
			return -1;
		*v = *v << 4 | d;
	}
	return 0;
}

/* The first byte at or after @p that ends a plain run of string bytes: a
 * quote, a backslash or a control character; @end if none.  Eight bytes at a
 * time: the borrows of the subtractions below can flag a byte above a true
 * hit, never one below, so the lowest flag is the first such byte. */
static inline const char *js_plain_end(const char *p, const char *end)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	while (end - p >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
		uint64_t hit = ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w);
		hit &= highs;
		if (hit)
			return p + (__builtin_ctzll(hit) >> 3);
		p += 8;
	}
	while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
		p++;
	return p;
}

/* A string at j->p: *s, *n (when @s) point into the input when it has no
 * escape, else to its decoded copy in j->out. */
static int js_str(struct jcur *j, const char **s, size_t *n)
{
	if (j->p >= j->end || *j->p != '"')
		return -1;
	j->p++;
	const char *e = js_plain_end(j->p, j->end);
	if (e < j->end && *e == '"') {
		if (s) {
			*s = j->p;
			*n = (size_t)(e - j->p);
		}
		j->p = e + 1;
		return 0;
	}
	/* an escape (or an error): decode the plain prefix and go on bytewise */
	char *o = j->out, *o0 = o;
	memcpy(o, j->p, (size_t)(e - j->p));
	o += e - j->p;
	j->p = e;
	while (j->p < j->end) {
		char ch = *j->p++;
		if (ch == '"') {
			if (s) {
				*s = o0;
				*n = (size_t)(o - o0);
				j->out = o;
			}
			return 0;
		}
		if ((unsigned char)ch < 0x20)
			return -1;
		if (ch != '\\') {
			*o++ = ch;
			continue;
		}
		if (j->p >= j->end)
			return -1;
		ch = *j->p++;
		switch (ch) {
		case '"': case '\\': case '/': *o++ = ch; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned u;
			if (j->end - j->p < 4 || js_hex4(j->p, &u) < 0)
				return -1;
			j->p += 4;
			if (u >= 0xd800 && u <= 0xdfff)
				return -1; /* surrogates: left to jansson */
			if (u < 0x80) {
				*o++ = (char)u;
			} else if (u < 0x800) {
				*o++ = (char)(0xc0 | u >> 6);
				*o++ = (char)(0x80 | (u & 0x3f));
			} else {
				*o++ = (char)(0xe0 | u >> 12);
				*o++ = (char)(0x80 | ((u >> 6) & 0x3f));
				*o++ = (char)(0x80 | (u & 0x3f));
			}
			break;
		}
		default: return -1;
		}
	}
	return -1;
}

static int js_int(struct jcur *j, long long *v)
{
	const char *p = j->p;
	int neg = 0;
	if (p < j->end && *p == '-')
		neg = 1, p++;
	if (p >= j->end || *p < '0' || *p > '9')
		return -1;
	long long x = 0;
	while (p < j->end && *p >= '0' && *p <= '9') {
		if (x > (LLONG_MAX - 9) / 10)
			return -1;
		x = x * 10 + (*p++ - '0');
	}
	if (p < j->end && (*p == '.' || *p == 'e' || *p == 'E'))
		return -1;
	j->p = p;
	*v = neg ? -x : x;
	return 0;
}

/* Skips one value of any kind. */
/* After a member or element: 1 after ',' (another follows), 0 after @close,
 * -1 for anything else. */
static int js_sep(struct jcur *j, char close)
{
	js_ws(j);
	if (j->p >= j->end)
		return -1;
	char ch = *j->p++;
	return ch == ',' ? 1 : ch == close ? 0 : -1;
}

static int js_skip(struct jcur *j, int depth)
{
	js_ws(j);
	if (j->p >= j->end || depth > 16)
		return -1;
	char ch = *j->p;
	if (ch == '"')
		return js_str(j, NULL, NULL);
	if (ch == '{' || ch == '[') {
		char close = ch == '{' ? '}' : ']';
		j->p++;
		js_ws(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return 0;
		}
		for (;;) {
			if (ch == '{') {
				js_ws(j);
				if (js_str(j, NULL, NULL) < 0)
					return -1;
				js_ws(j);
				if (j->p >= j->end || *j->p++ != ':')
					return -1;
			}
			if (js_skip(j, depth + 1) < 0)
				return -1;
			int more = js_sep(j, close);
			if (more <= 0)
				return more;
		}
	}
	long long v;
	if (ch == '-' || (ch >= '0' && ch <= '9'))
		return js_int(j, &v);
	static const char *const lit[] = {"true", "false", "null"};
	for (int i = 0; i < 3; i++) {
		size_t l = strlen(lit[i]);
		if ((size_t)(j->end - j->p) >= l && !memcmp(j->p, lit[i], l)) {
			j->p += l;
			return 0;
		}
	}
	return -1;
}

static int js_key(const char *k, size_t kl, const char *want)
{
	return strlen(want) == kl && !memcmp(k, want, kl);
}

/* One object of the "Symbol" array into @f. */
static int js_frame(struct jcur *j, struct jframe *f, uint64_t *start)
{
	memset(f, 0, sizeof *f);
	f->nm = f->file = "";
	*start = 0;
	js_ws(j);
	if (j->p >= j->end || *j->p++ != '{')
		return -1;
	js_ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		const char *k;
		size_t kl;
		js_ws(j);
		if (js_str(j, &k, &kl) < 0)
			return -1;
		js_ws(j);
		if (j->p >= j->end || *j->p++ != ':')
			return -1;
		js_ws(j);
		int e;
		if (js_key(k, kl, "FunctionName"))
			e = js_str(j, &f->nm, &f->nl);
		else if (js_key(k, kl, "FileName"))
			e = js_str(j, &f->file, &f->fl);
		else if (js_key(k, kl, "Line"))
			e = js_int(j, &f->line);
		else if (js_key(k, kl, "Column"))
			e = js_int(j, &f->col);
		else if (js_key(k, kl, "StartAddress")) {
			const char *sa;
			size_t sl;
			e = js_str(j, &sa, &sl);
			if (!e && sl) {
				char tmp[32];
				if (sl >= sizeof tmp)
					return -1;
				memcpy(tmp, sa, sl);
				tmp[sl] = 0;
				*start = parse_hex(tmp);
			}
		} else
			e = js_skip(j, 2);
		if (e < 0)
			return -1;
		int more = js_sep(j, '}');
		if (more <= 0)
			return more;
	}
}

static inline int js_lit(struct jcur *j, const char *lit, size_t n)
{
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n))
		return -1;
	j->p += n;
	return 0;
}

#define JS_LIT(j, s) js_lit((j), (s), sizeof(s) - 1)

/* A StartAddress string as parse_hex reads it: "0x" and 1 to 16 hex digits
 * here, else -1 (left to the general reader). */
static int js_start_hex(const char *s, size_t n, uint64_t *v)
{
	if (n < 3 || n > 18 || s[0] != '0' || s[1] != 'x')
		return -1;
	uint64_t x = 0;
	for (size_t i = 2; i < n; i++) {
		int d = hex_digit((unsigned char)s[i]);
		if (d < 0)
			return -1;
		x = x << 4 | (unsigned)d;
	}
	*v = x;
	return 0;
}

/* A reply exactly as llvm-symbolizer writes it (these keys in this order,
 * no spaces): read by matching it.  0 / -1 as res_from_json, -2 for
 * anything else (then the general reader decides). */
static int res_from_json_tmpl(struct ctx *c, struct result *r, const char *line, size_t len)
{
	struct jcur j = {line, line + len, c->js};
	const char *sv;
	size_t sl, n = 0;
	uint64_t start = 0;
	if (JS_LIT(&j, "{\"Address\":") || js_str(&j, NULL, NULL) ||
	    JS_LIT(&j, ",\"ModuleName\":") || js_str(&j, NULL, NULL) ||
	    JS_LIT(&j, ",\"Symbol\":["))
		return -2;
	if (j.p < j.end && *j.p == ']') {
		j.p++;
	} else {
		for (;;) {
			if (jframes_room(c, n + 1) < 0)
				return -2;
			struct jframe *f = &c->jf[n];
			long long skip;
			if (JS_LIT(&j, "{\"Column\":") || js_int(&j, &f->col) ||
			    JS_LIT(&j, ",\"Discriminator\":") || js_int(&j, &skip) ||
			    JS_LIT(&j, ",\"FileName\":") || js_str(&j, &f->file, &f->fl) ||
			    JS_LIT(&j, ",\"FunctionName\":") || js_str(&j, &f->nm, &f->nl) ||
			    JS_LIT(&j, ",\"Line\":") || js_int(&j, &f->line) ||
			    JS_LIT(&j, ",\"StartAddress\":") || js_str(&j, &sv, &sl) ||
			    JS_LIT(&j, ",\"StartFileName\":") || js_str(&j, NULL, NULL) ||
			    JS_LIT(&j, ",\"StartLine\":") || js_int(&j, &skip) || JS_LIT(&j, "}"))
				return -2;
			start = 0;
			if (sl && js_start_hex(sv, sl, &start) < 0)
				return -2;
			n++;
			if (j.p < j.end && *j.p == ',') {
				j.p++;
				continue;
			}
			if (JS_LIT(&j, "]"))
				return -2;
			break;
		}
	}
	if (JS_LIT(&j, "}") || j.p != j.end)
		return -2;
	return res_fill(c, r, c->jf, n, start) < 0 ? -1 : 0;
}

/* The fast reader: 0 / -1 as res_from_json, -2 when it gives up. */
static int res_from_json_fast(struct ctx *c, struct result *r, const char *line, size_t len)
{
	if (c->capjs < len + 1) {
		char *nb = realloc(c->js, len + 1);
		if (!nb)
			return -2;
		c->js = nb;
		c->capjs = len + 1;
	}
	int t = res_from_json_tmpl(c, r, line, len);
	if (t != -2)
		return t;
	struct jcur j = {line, line + len, c->js};
	size_t n = 0;
	int have_syms = 0, err = 0;
	uint64_t start = 0;
	js_ws(&j);
	if (j.p >= j.end || *j.p++ != '{')
		return -2;
	for (;;) {
		const char *k;
		size_t kl;
		js_ws(&j);
		if (js_str(&j, &k, &kl) < 0)
			return -2;
		js_ws(&j);
		if (j.p >= j.end || *j.p++ != ':')
			return -2;
		js_ws(&j);
		if (js_key(k, kl, "Symbol")) {
			if (j.p >= j.end || *j.p != '[')
				return -2;
			j.p++;
			n = 0;
			have_syms = 1;
			js_ws(&j);
			if (j.p < j.end && *j.p == ']') {
				j.p++;
			} else {
				for (;;) {
					uint64_t st;
					if (jframes_room(c, n + 1) < 0 || js_frame(&j, &c->jf[n], &st) < 0)
						return -2;
					start = st; /* the last frame's */
					n++;
					int more = js_sep(&j, ']');
					if (more < 0)
						return -2;
					if (!more)
						break;
				}
			}
		} else {
			if (js_key(k, kl, "Error"))
				err = 1;
			if (js_skip(&j, 1) < 0)
				return -2;
		}
		int more = js_sep(&j, '}');
		if (more < 0)
			return -2;
		if (!more)
			break;
	}
	js_ws(&j);
	if (j.p != j.end)
		return -2;
	if (!have_syms || err)
		return -1;
	return res_fill(c, r, c->jf, n, start) < 0 ? -1 : 0;
}

/* Fills @r from one llvm-symbolizer JSON reply.  0 ok (possibly with no
 * name: r->kind stays PENDING), -1 when the reply is an error or unparsable. */
int res_from_json(struct ctx *c, struct result *r, const char *line, size_t len)
{
	int fast = res_from_json_fast(c, r, line, len);
	if (fast != -2)
		return fast;
	c->st->json_slow++;
	json_error_t e;
	json_t *j = json_loadb(line, len, 0, &e);
	if (!j)
		return -1;
	int ret = -1;
	json_t *syms = json_object_get(j, "Symbol");
	if (!json_is_array(syms) || json_object_get(j, "Error"))
		goto out;
	size_t n = json_array_size(syms);
	if (jframes_room(c, n + 1) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(syms, i);
		struct jframe *f = &c->jf[i];
		f->nm = json_str(s, "FunctionName", &f->nl);
		f->file = json_str(s, "FileName", &f->fl);
		f->line = json_integer_value(json_object_get(s, "Line"));
		f->col = json_integer_value(json_object_get(s, "Column"));
	}
	uint64_t start = n ? parse_hex(json_string_value(json_object_get(json_array_get(syms, n - 1),
									  "StartAddress")))
			   : 0;
	ret = res_fill(c, r, c->jf, n, start);
out:
	json_decref(j);
	return ret;
}

