#include "rustv0.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The grammar, as this file reads it (after "_R"):
 *   path     = "C" ident | "M" impl type | "X" impl type path | "Y" type path
 *            | "N" ns path ident | "I" path {arg} "E" | backref
 *   impl     = ["s" b62] path
 *   ident    = ["s" b62] ["u"] decimal ["_"] bytes
 *   arg      = "L" b62 | "K" const | type
 *   type     = basic | path | "A" type const | "S" type | "T" {type} "E"
 *            | "R" ["L" b62] type | "Q" ["L" b62] type | "P" type | "O" type
 *            | "F" ["G" b62] ["U"] ["K" abi] {type} "E" type
 *            | "D" ["G" b62] {path {"p" ident type}} "E" "L" b62 | backref
 *   const    = type ["n"] {hex} "_" | "p" | backref
 *   backref  = "B" b62 (an offset after "_R", before this one)
 *   b62      = "_" (0) | digits "_" (their value + 1), digits 0-9a-zA-Z
 * then an optional instantiating crate (a path, not shown) and an optional
 * ".suffix". */

struct dm {
	const char *s;
	size_t n, pos;
	char *out;
	size_t cap, len;
	int err, print;
	unsigned depth;
	uint64_t bound; /* lifetimes bound by the enclosing for<...> */
};

enum { MAX_DEPTH = 300 };

static int peek(const struct dm *d)
{
	return d->pos < d->n ? (unsigned char)d->s[d->pos] : 0;
}

static int eat(struct dm *d, int c)
{
	if (d->pos < d->n && d->s[d->pos] == c) {
		d->pos++;
		return 1;
	}
	return 0;
}

static int next(struct dm *d)
{
	if (d->pos >= d->n) {
		d->err = 1;
		return 0;
	}
	return (unsigned char)d->s[d->pos++];
}

static void put(struct dm *d, const char *p, size_t l)
{
	if (!d->print || d->err)
		return;
	if (l >= d->cap - d->len) {
		d->err = 1;
		return;
	}
	memcpy(d->out + d->len, p, l);
	d->len += l;
}

static void puts_(struct dm *d, const char *p)
{
	put(d, p, strlen(p));
}

static void putu(struct dm *d, uint64_t v)
{
	char b[24];
	int l = snprintf(b, sizeof b, "%llu", (unsigned long long)v);
	put(d, b, (size_t)l);
}

static int b62digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 36;
	return -1;
}

static uint64_t base62(struct dm *d)
{
	if (eat(d, '_'))
		return 0;
	uint64_t v = 0;
	for (;;) {
		int c = next(d);
		if (c == '_')
			break;
		int g = b62digit(c);
		if (g < 0 || v > (UINT64_MAX - 1 - (uint64_t)g) / 62) {
			d->err = 1;
			return 0;
		}
		v = v * 62 + (uint64_t)g;
	}
	return v + 1;
}

/* ["tag" b62]: 0 when absent, else the number + 1 */
static uint64_t opt62(struct dm *d, int tag)
{
	if (!eat(d, tag))
		return 0;
	uint64_t v = base62(d);
	if (v == UINT64_MAX)
		d->err = 1;
	return v + 1;
}

static uint64_t decimal(struct dm *d)
{
	int c = next(d);
	if (c < '0' || c > '9') {
		d->err = 1;
		return 0;
	}
	if (c == '0')
		return 0;
	uint64_t v = (uint64_t)(c - '0');
	while (peek(d) >= '0' && peek(d) <= '9') {
		if (v > (UINT64_MAX - 9) / 10) {
			d->err = 1;
			return 0;
		}
		v = v * 10 + (uint64_t)(next(d) - '0');
	}
	return v;
}

struct ident {
	const char *p;
	size_t l;
	int puny;
};

static void undis_ident(struct dm *d, struct ident *id)
{
	id->puny = eat(d, 'u');
	uint64_t l = decimal(d);
	eat(d, '_');
	if (d->err || l > d->n - d->pos) {
		d->err = 1;
		id->p = "", id->l = 0;
		return;
	}
	id->p = d->s + d->pos;
	id->l = (size_t)l;
	d->pos += (size_t)l;
}

static void put_utf8(struct dm *d, uint32_t c)
{
	char b[4];
	size_t l;
	if (c < 0x80)
		b[0] = (char)c, l = 1;
	else if (c < 0x800)
		b[0] = (char)(0xc0 | c >> 6), b[1] = (char)(0x80 | (c & 0x3f)), l = 2;
	else if (c < 0x10000)
		b[0] = (char)(0xe0 | c >> 12), b[1] = (char)(0x80 | (c >> 6 & 0x3f)),
		b[2] = (char)(0x80 | (c & 0x3f)), l = 3;
	else
		b[0] = (char)(0xf0 | c >> 18), b[1] = (char)(0x80 | (c >> 12 & 0x3f)),
		b[2] = (char)(0x80 | (c >> 6 & 0x3f)), b[3] = (char)(0x80 | (c & 0x3f)), l = 4;
	put(d, b, l);
}

/* Punycode (RFC 3492) with "_" for the delimiter "-": the basic characters,
 * then the insertions of the others. */
static void put_puny(struct dm *d, const char *p, size_t l)
{
	enum { BASE = 36, TMIN = 1, TMAX = 26, SKEW = 38, DAMP = 700, MAXCP = 256 };
	uint32_t cp[MAXCP];
	size_t n = 0, b = 0, i;
	for (i = 0; i < l; i++)
		if (p[i] == '_')
			b = i + 1; /* after the last delimiter */
	if (b > MAXCP) {
		d->err = 1;
		return;
	}
	for (i = 0; i + 1 < b; i++)
		cp[n++] = (unsigned char)p[i];
	uint64_t code = 128, idx = 0, bias = 72;
	for (i = b; i < l;) {
		uint64_t old = idx, w = 1;
		for (uint64_t k = BASE;; k += BASE) {
			if (i >= l) {
				d->err = 1;
				return;
			}
			int c = p[i++];
			uint64_t dg = c >= 'a' && c <= 'z' ? (uint64_t)(c - 'a')
				      : c >= '0' && c <= '9' ? (uint64_t)(c - '0' + 26) : BASE;
			if (dg >= BASE || idx + dg * w > UINT32_MAX) {
				d->err = 1;
				return;
			}
			idx += dg * w;
			uint64_t t = k <= bias ? TMIN : k >= bias + TMAX ? TMAX : k - bias;
			if (dg < t)
				break;
			w *= BASE - t;
			if (w > UINT32_MAX) {
				d->err = 1;
				return;
			}
		}
		/* adapt the bias */
		uint64_t delta = old ? (idx - old) / 2 : (idx - old) / DAMP, k = 0;
		delta += delta / (n + 1);
		while (delta > ((BASE - TMIN) * TMAX) / 2)
			delta /= BASE - TMIN, k += BASE;
		bias = k + (BASE - TMIN + 1) * delta / (delta + SKEW);
		code += idx / (n + 1);
		idx %= n + 1;
		if (code > 0x10ffff || n >= MAXCP) {
			d->err = 1;
			return;
		}
		memmove(cp + idx + 1, cp + idx, (n - idx) * sizeof *cp);
		cp[idx++] = (uint32_t)code;
		n++;
	}
	for (i = 0; i < n; i++)
		put_utf8(d, cp[i]);
}

static void put_ident(struct dm *d, const struct ident *id)
{
	if (id->puny)
		put_puny(d, id->p, id->l);
	else
		put(d, id->p, id->l);
}

static void put_lifetime(struct dm *d, uint64_t i)
{
	if (!i) {
		puts_(d, "'_");
		return;
	}
	if (i > d->bound) {
		d->err = 1;
		return;
	}
	uint64_t depth = d->bound - i;
	if (depth < 26) {
		char b[2] = {'\'', (char)('a' + depth)};
		put(d, b, 2);
	} else {
		puts_(d, "'_");
		putu(d, depth);
	}
}

/* for<'a, ...> : @k more lifetimes bound */
static void binder(struct dm *d, uint64_t k)
{
	if (!k)
		return;
	if (k > 1024 || d->bound + k > 1024) {
		d->err = 1;
		return;
	}
	puts_(d, "for<");
	for (uint64_t j = 0; j < k; j++) {
		if (j)
			puts_(d, ", ");
		d->bound++;
		put_lifetime(d, 1);
	}
	puts_(d, "> ");
}

static int path(struct dm *d, int in_value);
static void type(struct dm *d);
static void konst(struct dm *d);

/* B b62: goes back (only when printing: the text it names was parsed) */
static int backref(struct dm *d, int kind, int in_value)
{
	size_t at = d->pos - 1;
	uint64_t to = base62(d);
	int r = 0;
	if (d->err || to >= at) {
		d->err = 1;
		return 0;
	}
	if (!d->print)
		return 0;
	size_t save = d->pos;
	d->pos = (size_t)to;
	if (kind == 'p')
		r = path(d, in_value);
	else if (kind == 't')
		type(d);
	else
		konst(d);
	d->pos = save;
	return r;
}

static int enter(struct dm *d)
{
	if (++d->depth > MAX_DEPTH)
		d->err = 1;
	return !d->err;
}

/* Returns 1 when the path ends with generic arguments ("<...>" printed
 * last: a dyn trait's bindings go inside them). */
static int path(struct dm *d, int in_value)
{
	int r = 0;
	if (!enter(d))
		return 0;
	int c = next(d);
	struct ident id;
	switch (c) {
	case 'C':
		opt62(d, 's'); /* the crate's hash */
		undis_ident(d, &id);
		put_ident(d, &id);
		break;
	case 'M':
	case 'X': {
		int p = d->print;
		opt62(d, 's');
		d->print = 0; /* the impl's own path is not shown */
		path(d, 0);
		d->print = p;
		puts_(d, "<");
		type(d);
		if (c == 'X') {
			puts_(d, " as ");
			path(d, 0);
		}
		puts_(d, ">");
		break;
	}
	case 'Y':
		puts_(d, "<");
		type(d);
		puts_(d, " as ");
		path(d, 0);
		puts_(d, ">");
		break;
	case 'N': {
		int ns = next(d);
		path(d, in_value);
		uint64_t dis = opt62(d, 's');
		undis_ident(d, &id);
		if (ns >= 'A' && ns <= 'Z') {
			puts_(d, "::{");
			if (ns == 'C')
				puts_(d, "closure");
			else if (ns == 'S')
				puts_(d, "shim");
			else
				put(d, (const char *)&(char){(char)ns}, 1);
			if (id.l) {
				puts_(d, ":");
				put_ident(d, &id);
			}
			puts_(d, "#");
			putu(d, dis);
			puts_(d, "}");
		} else if (ns >= 'a' && ns <= 'z') {
			if (id.l) {
				puts_(d, "::");
				put_ident(d, &id);
			}
		} else {
			d->err = 1;
		}
		break;
	}
	case 'I':
		path(d, in_value);
		puts_(d, in_value ? "::<" : "<");
		for (int k = 0; !d->err && !eat(d, 'E'); k++) {
			if (k)
				puts_(d, ", ");
			if (eat(d, 'L'))
				put_lifetime(d, base62(d));
			else if (eat(d, 'K'))
				konst(d);
			else
				type(d);
		}
		puts_(d, ">");
		r = 1;
		break;
	case 'B':
		r = backref(d, 'p', in_value);
		break;
	default:
		d->err = 1;
	}
	d->depth--;
	return r;
}

static const char *basic(int c)
{
	switch (c) {
	case 'a': return "i8";
	case 'b': return "bool";
	case 'c': return "char";
	case 'd': return "f64";
	case 'e': return "str";
	case 'f': return "f32";
	case 'h': return "u8";
	case 'i': return "isize";
	case 'j': return "usize";
	case 'l': return "i32";
	case 'm': return "u32";
	case 'n': return "i128";
	case 'o': return "u128";
	case 'p': return "_";
	case 's': return "i16";
	case 't': return "u16";
	case 'u': return "()";
	case 'v': return "...";
	case 'x': return "i64";
	case 'y': return "u64";
	case 'z': return "!";
	default: return NULL;
	}
}

static void fn_sig(struct dm *d)
{
	uint64_t k = opt62(d, 'G'), b = d->bound;
	binder(d, k);
	if (eat(d, 'U'))
		puts_(d, "unsafe ");
	if (eat(d, 'K')) {
		puts_(d, "extern \"");
		if (eat(d, 'C')) {
			puts_(d, "C");
		} else {
			struct ident id;
			undis_ident(d, &id);
			if (id.puny)
				d->err = 1;
			for (size_t i = 0; i < id.l; i++)
				put(d, id.p[i] == '_' ? "-" : id.p + i, 1);
		}
		puts_(d, "\" ");
	}
	puts_(d, "fn(");
	for (int n = 0; !d->err && !eat(d, 'E'); n++) {
		if (n)
			puts_(d, ", ");
		type(d);
	}
	puts_(d, ")");
	if (eat(d, 'u')) {
		/* returns (): not shown */
	} else {
		puts_(d, " -> ");
		type(d);
	}
	d->bound = b;
}

static void dyn_bounds(struct dm *d)
{
	uint64_t k = opt62(d, 'G'), b = d->bound;
	puts_(d, "dyn ");
	binder(d, k);
	for (int n = 0; !d->err && !eat(d, 'E'); n++) {
		if (n)
			puts_(d, " + ");
		int open = path(d, 0), a = 0;
		for (; !d->err && eat(d, 'p'); a++) {
			if (a)
				puts_(d, ", ");
			else if (open && d->print && d->len)
				d->len--, puts_(d, ", "); /* inside its "<...>" */
			else
				puts_(d, "<");
			struct ident id;
			undis_ident(d, &id);
			put_ident(d, &id);
			puts_(d, " = ");
			type(d);
		}
		if (a)
			puts_(d, ">");
	}
	d->bound = b;
}

static void type(struct dm *d)
{
	if (!enter(d))
		return;
	int c = next(d);
	const char *b = basic(c);
	if (b) {
		puts_(d, b);
	} else {
		switch (c) {
		case 'A':
			puts_(d, "[");
			type(d);
			puts_(d, "; ");
			konst(d);
			puts_(d, "]");
			break;
		case 'S':
			puts_(d, "[");
			type(d);
			puts_(d, "]");
			break;
		case 'T': {
			int n = 0;
			puts_(d, "(");
			for (; !d->err && !eat(d, 'E'); n++) {
				if (n)
					puts_(d, ", ");
				type(d);
			}
			puts_(d, n == 1 ? ",)" : ")");
			break;
		}
		case 'R':
		case 'Q':
			puts_(d, "&");
			if (eat(d, 'L')) {
				uint64_t l = base62(d);
				if (l) {
					put_lifetime(d, l);
					puts_(d, " ");
				}
			}
			if (c == 'Q')
				puts_(d, "mut ");
			type(d);
			break;
		case 'P':
		case 'O':
			puts_(d, c == 'P' ? "*const " : "*mut ");
			type(d);
			break;
		case 'F':
			fn_sig(d);
			break;
		case 'D': {
			dyn_bounds(d);
			if (!eat(d, 'L')) {
				d->err = 1;
				break;
			}
			uint64_t l = base62(d);
			if (l) {
				puts_(d, " + ");
				put_lifetime(d, l);
			}
			break;
		}
		case 'B':
			backref(d, 't', 0);
			break;
		default:
			d->pos--;
			path(d, 0);
		}
	}
	d->depth--;
}

static void konst(struct dm *d)
{
	if (!enter(d))
		return;
	if (eat(d, 'p')) {
		puts_(d, "_");
	} else if (eat(d, 'B')) {
		backref(d, 'k', 0);
	} else {
		int t = next(d), neg = 0;
		if (strchr("ahtmyojlxnsi", t) && t) {
			neg = eat(d, 'n');
		} else if (t != 'b' && t != 'c') {
			d->err = 1; /* str, refs, arrays, ADTs: not read here */
		}
		size_t h = d->pos;
		while (d->pos < d->n && d->s[d->pos] != '_') {
			if (b62digit(d->s[d->pos]) < 0 || b62digit(d->s[d->pos]) > 15)
				d->err = 1;
			d->pos++;
		}
		size_t nh = d->pos - h;
		if (!nh)
			d->err = 1; /* zero is "0" */
		if (!eat(d, '_'))
			d->err = 1;
		uint64_t v = 0;
		for (size_t i = 0; i < nh && i < 16; i++)
			v = v << 4 | (uint64_t)b62digit(d->s[h + i]);
		if (d->err) {
			/* nothing */
		} else if (t == 'b') {
			if (v > 1 || nh > 16)
				d->err = 1;
			puts_(d, v ? "true" : "false");
		} else if (t == 'c') {
			if (nh > 8 || v > 0x10ffff)
				d->err = 1;
			puts_(d, "'");
			if (v == '\'' || v == '\\')
				puts_(d, "\\"), put_utf8(d, (uint32_t)v);
			else if (v == '\n')
				puts_(d, "\\n");
			else if (v == '\t')
				puts_(d, "\\t");
			else if (v == '\r')
				puts_(d, "\\r");
			else if (v < 0x20 || v >= 0x7f) {
				char e[16];
				snprintf(e, sizeof e, "\\u{%llx}", (unsigned long long)v);
				puts_(d, e);
			} else
				put_utf8(d, (uint32_t)v);
			puts_(d, "'");
		} else {
			if (neg)
				puts_(d, "-");
			if (nh > 16) {
				puts_(d, "0x");
				put(d, d->s + h, nh);
			} else {
				putu(d, v);
			}
		}
	}
	d->depth--;
}

long rustv0_demangle(const char *name, char *out, size_t cap)
{
	if (strncmp(name, "_R", 2) || !cap)
		return -1;
	const char *s = name + 2;
	size_t n = 0;
	while (s[n] && s[n] != '.') {
		char c = s[n];
		if (!(c == '_' || b62digit(c) >= 0))
			return -1;
		n++;
	}
	struct dm d = {.s = s, .n = n, .out = out, .cap = cap, .print = 1};
	if (!(peek(&d) >= 'A' && peek(&d) <= 'Z'))
		return -1; /* an encoding version: none is defined */
	path(&d, 1);
	if (!d.err && d.pos < d.n && peek(&d) >= 'A' && peek(&d) <= 'Z') {
		d.print = 0; /* the instantiating crate */
		path(&d, 0);
		d.print = 1;
	}
	if (d.err || d.pos != d.n)
		return -1;
	if (s[n]) {
		puts_(&d, " (");
		puts_(&d, s + n);
		puts_(&d, ")");
	}
	if (d.err)
		return -1;
	out[d.len] = 0;
	return (long)d.len;
}
