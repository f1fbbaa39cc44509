#include "dwcov.h"

#include "elfinfo.h"
#include "imgfind.h"
#include "io.h"
#include "sysenv.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *dwcov_state_name(int state)
{
	switch (state) {
	case DWCOV_NONE:
		return "none";
	case DWCOV_RANGES:
		return "ranges";
	}
	return "all";
}

void dwcov_fini(struct dwcov *dc)
{
	free(dc->r);
	free(dc->ir);
	free(dc->ibits);
	free(dc->ib);
	memset(dc, 0, sizeof *dc);
}

int dwcov_any(const struct dwcov *dc, uint64_t lo, uint64_t hi)
{
	if (dc->state != DWCOV_RANGES)
		return dc->state == DWCOV_ALL;
	/* the first range ending after lo */
	size_t a = 0, b = dc->n;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (dc->r[2 * m + 1] <= lo)
			a = m + 1;
		else
			b = m;
	}
	return a < dc->n && dc->r[2 * a] < hi;
}

size_t dwcov_inline(const struct dwcov *dc, uint64_t lo, uint64_t hi, const uint64_t **r)
{
	static const uint64_t all[2] = {0, UINT64_MAX};
	if (!dc->inl_known) {
		*r = all;
		return 1;
	}
	/* the first range ending after lo, and those after it starting below hi */
	size_t a = 0, b = dc->nir;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (dc->ir[2 * m + 1] <= lo)
			a = m + 1;
		else
			b = m;
	}
	size_t e = a;
	while (e < dc->nir && dc->ir[2 * e] < hi)
		e++;
	*r = dc->ir ? dc->ir + 2 * a : NULL;
	return e - a;
}

size_t dwcov_inline_bounds(const struct dwcov *dc, uint64_t lo, uint64_t hi, const uint64_t **b)
{
	size_t a = 0, z = dc->nib;
	while (a < z) {
		size_t m = a + (z - a) / 2;
		if (dc->ib[m] < lo)
			a = m + 1;
		else
			z = m;
	}
	size_t e = a;
	while (e < dc->nib && dc->ib[e] < hi)
		e++;
	*b = dc->ib ? dc->ib + a : NULL;
	return e - a;
}

static int cmp_u64(const void *a, const void *b);

const uint8_t *dwcov_inline_bits(const struct dwcov *dc, uint64_t lo, uint64_t hi, uint64_t *base)
{
	if (!dc->ibits || lo < dc->ibase || hi > dc->iend || lo >= hi)
		return NULL;
	*base = dc->ibase;
	return dc->ibits;
}

/* ---- reading DWARF headers (little-endian; bounds checked) ---- */

struct rd {
	const uint8_t *p;
	size_t n, off;
	int bad;
};

static uint64_t rd_u(struct rd *r, size_t k)
{
	if (r->bad || k > r->n - r->off) {
		r->bad = 1;
		return 0;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < k; i++)
		v |= (uint64_t)r->p[r->off + i] << (8 * i);
	r->off += k;
	return v;
}

/* A unit's length field: *osz gets the offset size (4 or 8); returns the
 * length after the field, 0 with r->bad on a bad one. */
static uint64_t rd_len(struct rd *r, size_t *osz)
{
	uint64_t len = rd_u(r, 4);
	*osz = 4;
	if (len == 0xffffffffu) {
		len = rd_u(r, 8);
		*osz = 8;
	} else if (len >= 0xfffffff0u) {
		r->bad = 1;
	}
	if (!r->bad && len > r->n - r->off)
		r->bad = 1;
	return r->bad ? 0 : len;
}

struct u64v {
	uint64_t *v;
	size_t n, cap;
};

static int u64v_push(struct u64v *x, uint64_t a)
{
	if (mt_grow((void **)&x->v, &x->cap, x->n + 1, sizeof *x->v))
		return -1;
	x->v[x->n++] = a;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_pair(const void *a, const void *b)
{
	return cmp_u64(a, b);
}

/* Offsets of the units of .debug_info that can hold code (not type units). */
static int info_units(const uint8_t *p, size_t n, struct u64v *cu)
{
	struct rd r = {p, n, 0, 0};
	while (r.off < n) {
		size_t start = r.off, osz;
		uint64_t len = rd_len(&r, &osz);
		if (r.bad || len < 3)
			return -1;
		size_t next = r.off + (size_t)len;
		unsigned ver = (unsigned)rd_u(&r, 2);
		if (ver < 2 || ver > 5)
			return -1;
		unsigned type = 1; /* DW_UT_compile */
		if (ver >= 5)
			type = (unsigned)rd_u(&r, 1);
		if (r.bad)
			return -1;
		if (type != 2 && type != 6 && u64v_push(cu, start)) /* not a type unit */
			return -1;
		r.off = next;
	}
	return 0;
}

/* The ranges and unit offsets of .debug_aranges. */
static int aranges(const uint8_t *p, size_t n, struct u64v *rg, struct u64v *cu)
{
	struct rd r = {p, n, 0, 0};
	while (r.off < n) {
		size_t start = r.off, osz;
		uint64_t len = rd_len(&r, &osz);
		if (r.bad)
			return -1;
		size_t end = r.off + (size_t)len;
		unsigned ver = (unsigned)rd_u(&r, 2);
		uint64_t cuoff = rd_u(&r, osz);
		unsigned asz = (unsigned)rd_u(&r, 1), ssz = (unsigned)rd_u(&r, 1);
		if (r.bad || ver != 2 || (asz != 4 && asz != 8) || ssz)
			return -1;
		size_t t = r.off - start, al = 2 * asz; /* tuples align to twice the address size */
		r.off = start + (t + al - 1) / al * al;
		if (u64v_push(cu, cuoff))
			return -1;
		while (r.off + 2 * asz <= end) {
			uint64_t a = rd_u(&r, asz), l = rd_u(&r, asz);
			if (!a && !l)
				break;
			if (l && a + l > a && (u64v_push(rg, a) || u64v_push(rg, a + l)))
				return -1;
		}
		if (r.bad)
			return -1;
		r.off = end;
	}
	return 0;
}

/* ---- inline ranges: DW_TAG_inlined_subroutine in .debug_info ---- */

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	for (unsigned sh = 0;; sh += 7) {
		if (r->bad || r->off >= r->n) {
			r->bad = 1;
			return 0;
		}
		uint8_t b = r->p[r->off++];
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		if (!(b & 0x80))
			return v;
	}
}

static int64_t rd_sleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned sh = 0;
	uint8_t b;
	do {
		if (r->bad || r->off >= r->n) {
			r->bad = 1;
			return 0;
		}
		b = r->p[r->off++];
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
	} while (b & 0x80);
	if (sh < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << sh;
	return (int64_t)v;
}

static void rd_skip(struct rd *r, uint64_t k)
{
	if (r->bad || k > r->n - r->off)
		r->bad = 1;
	else
		r->off += (size_t)k;
}

/* The sections the inline ranges need (NULL p: absent). */
struct dwsec {
	const uint8_t *p;
	size_t n;
};

struct dwsecs {
	struct dwsec info, abbrev, ranges, rnglists, addr;
};

/* One attribute specification of an abbreviation. */
struct aspec {
	uint32_t at, form;
	int64_t ic; /* DW_FORM_implicit_const's value */
};

struct abbr {
	uint64_t code;
	uint32_t tag, first, n; /* specs [first, first + n) */
};

struct abtab {
	struct abbr *a;
	size_t n, cap;
	struct aspec *s;
	size_t ns, caps;
	uint64_t off; /* the table's offset in .debug_abbrev, or UINT64_MAX */
};

static void abtab_fini(struct abtab *t)
{
	free(t->a);
	free(t->s);
}

/* Reads the abbreviation table at @off (unless it is the one @t holds). */
static int abtab_read(struct abtab *t, const struct dwsec *ab, uint64_t off)
{
	if (t->off == off)
		return 0;
	t->n = t->ns = 0;
	t->off = UINT64_MAX;
	if (off >= ab->n)
		return -1;
	struct rd r = {ab->p, ab->n, (size_t)off, 0};
	for (;;) {
		uint64_t code = rd_uleb(&r);
		if (r.bad)
			return -1;
		if (!code)
			break;
		uint64_t tag = rd_uleb(&r);
		rd_u(&r, 1); /* children: not needed, the walk is linear */
		if (t->n == t->cap) {
			size_t nc = t->cap ? 2 * t->cap : 64;
			struct abbr *na = realloc(t->a, nc * sizeof *na);
			if (!na)
				return -1;
			t->a = na;
			t->cap = nc;
		}
		struct abbr *a = &t->a[t->n++];
		a->code = code;
		a->tag = tag > 0xffff ? 0xffff : (uint32_t)tag;
		a->first = (uint32_t)t->ns;
		a->n = 0;
		for (;;) {
			uint64_t at = rd_uleb(&r), form = rd_uleb(&r);
			int64_t ic = form == 0x21 ? rd_sleb(&r) : 0; /* implicit_const */
			if (r.bad)
				return -1;
			if (!at && !form)
				break;
			if (t->ns == t->caps) {
				size_t nc = t->caps ? 2 * t->caps : 256;
				struct aspec *ns = realloc(t->s, nc * sizeof *ns);
				if (!ns)
					return -1;
				t->s = ns;
				t->caps = nc;
			}
			t->s[t->ns++] = (struct aspec){at > 0xffff ? 0xffff : (uint32_t)at,
						       form > 0xffff ? 0xffff : (uint32_t)form, ic};
			a->n++;
		}
	}
	t->off = off;
	return 0;
}

static const struct abbr *abtab_get(const struct abtab *t, uint64_t code)
{
	/* codes are usually 1, 2, 3, ... in order */
	if (code - 1 < t->n && t->a[code - 1].code == code)
		return &t->a[code - 1];
	for (size_t i = 0; i < t->n; i++)
		if (t->a[i].code == code)
			return &t->a[i];
	return NULL;
}

/* The unit being read. */
struct dwunit {
	unsigned ver, asz, osz;
	uint64_t base;	    /* the unit's base address (its DW_AT_low_pc, else 0) */
	uint64_t addr_base; /* DW_AT_addr_base (UINT64_MAX: none) */
	uint64_t rnglists_base;
};

/* An attribute value of the kinds the inline ranges need. */
enum { AV_NONE, AV_ADDR, AV_ADDRX, AV_CONST, AV_SECOFF, AV_RNGLISTX, AV_BAD };

struct aval {
	int kind;
	uint64_t v;
};

/* Reads (or skips) one attribute of form @form.  Returns its value's kind
 * for the forms an address, a length or a range list can take; AV_BAD for a
 * form this reader does not know, or one whose data lies in another file. */
static int read_form(struct rd *r, const struct dwunit *u, uint64_t form, int64_t ic, uint64_t *v)
{
	for (int hops = 0;; hops++) {
		*v = 0;
		switch (form) {
		case 0x01: /* addr */
			*v = rd_u(r, u->asz);
			return AV_ADDR;
		case 0x03: /* block2 */
			rd_skip(r, rd_u(r, 2));
			return AV_NONE;
		case 0x04: /* block4 */
			rd_skip(r, rd_u(r, 4));
			return AV_NONE;
		case 0x05: /* data2 */
			*v = rd_u(r, 2);
			return AV_CONST;
		case 0x06: /* data4: a range list offset in DWARF 2 and 3 */
			*v = rd_u(r, 4);
			return u->ver < 4 ? AV_SECOFF : AV_CONST;
		case 0x07: /* data8 */
			*v = rd_u(r, 8);
			return u->ver < 4 ? AV_SECOFF : AV_CONST;
		case 0x08: /* string */
			while (!r->bad && r->off < r->n && r->p[r->off])
				r->off++;
			rd_skip(r, 1);
			return AV_NONE;
		case 0x09: /* block */
		case 0x18: /* exprloc */
			rd_skip(r, rd_uleb(r));
			return AV_NONE;
		case 0x0a: /* block1 */
			rd_skip(r, rd_u(r, 1));
			return AV_NONE;
		case 0x0b: /* data1 */
			*v = rd_u(r, 1);
			return AV_CONST;
		case 0x0c: /* flag */
		case 0x11: /* ref1 */
			rd_skip(r, 1);
			return AV_NONE;
		case 0x0d: /* sdata */
			*v = (uint64_t)rd_sleb(r);
			return AV_CONST;
		case 0x0e: /* strp */
		case 0x1f: /* line_strp */
			rd_skip(r, u->osz);
			return AV_NONE;
		case 0x0f: /* udata */
			*v = rd_uleb(r);
			return AV_CONST;
		case 0x10: /* ref_addr: address-sized in DWARF 2 */
			rd_skip(r, u->ver == 2 ? u->asz : u->osz);
			return AV_NONE;
		case 0x12: /* ref2 */
			rd_skip(r, 2);
			return AV_NONE;
		case 0x13: /* ref4 */
			rd_skip(r, 4);
			return AV_NONE;
		case 0x14: /* ref8 */
		case 0x20: /* ref_sig8 */
			rd_skip(r, 8);
			return AV_NONE;
		case 0x15: /* ref_udata */
		case 0x1a: /* strx */
		case 0x22: /* loclistx */
		case 0x1f02: /* GNU_str_index */
			rd_uleb(r);
			return AV_NONE;
		case 0x16: /* indirect: the form comes first */
			form = rd_uleb(r);
			if (r->bad || hops > 4 || form == 0x21) /* implicit_const has no data here */
				return AV_BAD;
			continue;
		case 0x17: /* sec_offset */
			*v = rd_u(r, u->osz);
			return AV_SECOFF;
		case 0x19: /* flag_present */
			return AV_NONE;
		case 0x1b: /* addrx */
		case 0x1f01: /* GNU_addr_index */
			*v = rd_uleb(r);
			return AV_ADDRX;
		case 0x1e: /* data16 */
			rd_skip(r, 16);
			return AV_NONE;
		case 0x21: /* implicit_const */
			*v = (uint64_t)ic;
			return AV_CONST;
		case 0x23: /* rnglistx */
			*v = rd_uleb(r);
			return AV_RNGLISTX;
		case 0x25: /* strx1 */
			rd_skip(r, 1);
			return AV_NONE;
		case 0x26: /* strx2 */
			rd_skip(r, 2);
			return AV_NONE;
		case 0x27: /* strx3 */
			rd_skip(r, 3);
			return AV_NONE;
		case 0x28: /* strx4 */
			rd_skip(r, 4);
			return AV_NONE;
		case 0x29: /* addrx1 */
			*v = rd_u(r, 1);
			return AV_ADDRX;
		case 0x2a: /* addrx2 */
			*v = rd_u(r, 2);
			return AV_ADDRX;
		case 0x2b: /* addrx3 */
			*v = rd_u(r, 3);
			return AV_ADDRX;
		case 0x2c: /* addrx4 */
			*v = rd_u(r, 4);
			return AV_ADDRX;
		}
		/* ref_sup4/8, strp_sup, GNU_ref_alt, GNU_strp_alt (data in a
		 * supplementary file: dwz), anything newer: not read */
		return AV_BAD;
	}
}

/* The address at index @i of the unit's .debug_addr contribution. */
static int addrx(const struct dwsecs *s, const struct dwunit *u, uint64_t i, uint64_t *a)
{
	if (u->addr_base == UINT64_MAX || !s->addr.p || u->addr_base > s->addr.n ||
	    i > (s->addr.n - u->addr_base) / u->asz)
		return -1;
	struct rd r = {s->addr.p, s->addr.n, (size_t)(u->addr_base + i * u->asz), 0};
	*a = rd_u(&r, u->asz);
	return r.bad ? -1 : 0;
}

static int addr_of(const struct dwsecs *s, const struct dwunit *u, const struct aval *x,
		   uint64_t *a)
{
	if (x->kind == AV_ADDR) {
		*a = x->v;
		return 0;
	}
	if (x->kind == AV_ADDRX)
		return addrx(s, u, x->v, a);
	return -1;
}

static int push_range(struct u64v *out, uint64_t lo, uint64_t hi)
{
	if (lo >= hi)
		return 0;
	return u64v_push(out, lo) || u64v_push(out, hi) ? -2 : 0;
}

/* The ranges of a DW_AT_ranges value into @out.  0, -1 unreadable, -2 out
 * of memory. */
static int read_ranges(const struct dwsecs *s, const struct dwunit *u, const struct aval *x,
		       struct u64v *out)
{
	uint64_t off;
	if (u->ver < 5) {
		if (x->kind != AV_SECOFF || !s->ranges.p || x->v >= s->ranges.n)
			return -1;
		uint64_t base = u->base, maxa = u->asz == 8 ? UINT64_MAX : 0xffffffffu;
		struct rd r = {s->ranges.p, s->ranges.n, (size_t)x->v, 0};
		for (;;) {
			uint64_t a = rd_u(&r, u->asz), b = rd_u(&r, u->asz);
			if (r.bad)
				return -1;
			if (!a && !b)
				return 0;
			if (a == maxa) {
				base = b;
				continue;
			}
			if (push_range(out, base + a, base + b))
				return -2;
		}
	}
	if (!s->rnglists.p)
		return -1;
	if (x->kind == AV_SECOFF) {
		off = x->v;
	} else if (x->kind == AV_RNGLISTX) {
		uint64_t rb = u->rnglists_base;
		if (rb == UINT64_MAX || rb > s->rnglists.n || x->v > (s->rnglists.n - rb) / u->osz)
			return -1;
		struct rd r = {s->rnglists.p, s->rnglists.n, (size_t)(rb + x->v * u->osz), 0};
		off = rb + rd_u(&r, u->osz);
		if (r.bad)
			return -1;
	} else {
		return -1;
	}
	if (off >= s->rnglists.n)
		return -1;
	uint64_t base = u->base;
	struct rd r = {s->rnglists.p, s->rnglists.n, (size_t)off, 0};
	for (;;) {
		unsigned k = (unsigned)rd_u(&r, 1);
		uint64_t a, b;
		if (r.bad)
			return -1;
		switch (k) {
		case 0: /* end_of_list */
			return 0;
		case 1: /* base_addressx */
			if (addrx(s, u, rd_uleb(&r), &base))
				return -1;
			break;
		case 2: /* startx_endx */
			a = rd_uleb(&r);
			b = rd_uleb(&r);
			if (r.bad || addrx(s, u, a, &a) || addrx(s, u, b, &b))
				return -1;
			if (push_range(out, a, b))
				return -2;
			break;
		case 3: /* startx_length */
			a = rd_uleb(&r);
			b = rd_uleb(&r);
			if (r.bad || addrx(s, u, a, &a))
				return -1;
			if (push_range(out, a, a + b))
				return -2;
			break;
		case 4: /* offset_pair */
			a = rd_uleb(&r);
			b = rd_uleb(&r);
			if (r.bad)
				return -1;
			if (push_range(out, base + a, base + b))
				return -2;
			break;
		case 5: /* base_address */
			base = rd_u(&r, u->asz);
			break;
		case 6: /* start_end */
			a = rd_u(&r, u->asz);
			b = rd_u(&r, u->asz);
			if (r.bad)
				return -1;
			if (push_range(out, a, b))
				return -2;
			break;
		case 7: /* start_length */
			a = rd_u(&r, u->asz);
			b = rd_uleb(&r);
			if (r.bad)
				return -1;
			if (push_range(out, a, a + b))
				return -2;
			break;
		default:
			return -1;
		}
	}
}

/* The ranges of a DIE from its low_pc/high_pc or ranges.  0 (none is fine:
 * an abstract instance), -1 unreadable, -2 out of memory. */
static int die_ranges(const struct dwsecs *s, const struct dwunit *u, const struct aval *lo,
		      const struct aval *hi, const struct aval *rg, struct u64v *out)
{
	if (rg->kind != AV_NONE)
		return read_ranges(s, u, rg, out);
	if (lo->kind == AV_NONE)
		return hi->kind == AV_NONE ? 0 : -1;
	uint64_t a, b;
	if (addr_of(s, u, lo, &a))
		return -1;
	if (hi->kind == AV_NONE) /* one address: counted, to err on the safe side */
		return push_range(out, a, a + 1);
	if (hi->kind == AV_CONST)
		b = a + hi->v;
	else if (addr_of(s, u, hi, &b))
		return -1;
	return push_range(out, a, b);
}

enum {
	AT_LOW_PC = 0x11,
	AT_HIGH_PC = 0x12,
	AT_RANGES = 0x55,
	AT_ADDR_BASE = 0x73,
	AT_RNGLISTS_BASE = 0x74,
	AT_DWO_NAME = 0x76,
	AT_GNU_DWO_NAME = 0x2130,
	AT_GNU_ADDR_BASE = 0x2133,
	TAG_INLINED = 0x1d,
	TAG_IMPORTED_UNIT = 0x3d,
};

/* The inline ranges of one unit (at @start, @len bytes after its length
 * field at @hdr) into @out.  On anything it cannot read, the unit's own
 * ranges go to @out instead (every address of the unit then counts as
 * inside an inline frame); 0, or -1 when even those cannot be known, -2
 * out of memory. */
static int unit_inline(const struct dwsecs *s, struct abtab *ab, size_t hdr,
		       size_t end, size_t osz, struct u64v *out)
{
	struct rd r = {s->info.p, end, hdr, 0};
	struct dwunit u = {0};
	u.osz = (unsigned)osz;
	u.ver = (unsigned)rd_u(&r, 2);
	u.addr_base = u.rnglists_base = UINT64_MAX;
	unsigned type = 1;
	uint64_t aoff;
	if (u.ver >= 5) {
		type = (unsigned)rd_u(&r, 1);
		u.asz = (unsigned)rd_u(&r, 1);
		aoff = rd_u(&r, osz);
		if (type == 4 || type == 5) /* skeleton, split_compile: a dwo_id */
			rd_skip(&r, 8);
		else if (type == 2 || type == 6) /* type units: no code */
			return 0;
		else if (type != 1 && type != 3)
			return -1;
	} else {
		aoff = rd_u(&r, osz);
		u.asz = (unsigned)rd_u(&r, 1);
	}
	if (r.bad || (u.asz != 4 && u.asz != 8) || u.ver < 2 || u.ver > 5 ||
	    abtab_read(ab, &s->abbrev, aoff))
		return -1;
	size_t mark = out->n;
	int unit_ok = type == 1 || type == 3, first = 1, rc = 0;
	struct aval cu_lo = {AV_NONE, 0}, cu_hi = {AV_NONE, 0}, cu_rg = {AV_NONE, 0};
	while (r.off < end) {
		uint64_t code = rd_uleb(&r);
		if (r.bad)
			goto bad;
		if (!code) {
			if (first)
				goto bad;
			continue;
		}
		const struct abbr *a = abtab_get(ab, code);
		if (!a)
			goto bad;
		int want = first || a->tag == TAG_INLINED;
		struct aval lo = {AV_NONE, 0}, hi = {AV_NONE, 0}, rg = {AV_NONE, 0};
		for (uint32_t i = 0; i < a->n; i++) {
			const struct aspec *sp = &ab->s[a->first + i];
			uint64_t v;
			int k = read_form(&r, &u, sp->form, sp->ic, &v);
			if (k == AV_BAD || r.bad)
				goto bad;
			if (!want)
				continue;
			switch (sp->at) {
			case AT_LOW_PC:
				lo = (struct aval){k, v};
				break;
			case AT_HIGH_PC:
				hi = (struct aval){k, v};
				break;
			case AT_RANGES:
				rg = (struct aval){k, v};
				break;
			case AT_ADDR_BASE:
			case AT_GNU_ADDR_BASE:
				if (first)
					u.addr_base = v;
				break;
			case AT_RNGLISTS_BASE:
				if (first)
					u.rnglists_base = v;
				break;
			case AT_DWO_NAME:
			case AT_GNU_DWO_NAME: /* split DWARF: the inline frames are in the .dwo */
				if (first)
					unit_ok = 0;
				break;
			}
		}
		if (first) {
			first = 0;
			cu_lo = lo, cu_hi = hi, cu_rg = rg;
			if (lo.kind != AV_NONE && addr_of(s, &u, &lo, &u.base))
				goto bad;
			if (!unit_ok)
				goto bad;
			continue;
		}
		if (a->tag == TAG_IMPORTED_UNIT) /* DIEs of another unit (dwz): not followed */
			goto bad;
		if (a->tag == TAG_INLINED && (rc = die_ranges(s, &u, &lo, &hi, &rg, out)) != 0) {
			if (rc == -2)
				return -2;
			goto bad;
		}
	}
	return 0;
bad:
	/* the unit's own ranges stand for its inline ranges */
	out->n = mark;
	if (first)
		return -1;
	rc = die_ranges(s, &u, &cu_lo, &cu_hi, &cu_rg, out);
	if (rc)
		return rc;
	return out->n > mark ? 0 : -1;
}

size_t dwcov_merge(uint64_t *v, size_t np)
{
	size_t w = 0;
	if (np)
		qsort(v, np, 2 * sizeof *v, cmp_pair);
	for (size_t i = 0; i < np; i++) {
		uint64_t lo = v[2 * i], hi = v[2 * i + 1];
		if (w && lo <= v[2 * w - 1]) {
			if (hi > v[2 * w - 1])
				v[2 * w - 1] = hi;
			continue;
		}
		v[2 * w] = lo;
		v[2 * w + 1] = hi;
		w++;
	}
	return w;
}

static size_t merge_pairs(struct u64v *v)
{
	size_t w = dwcov_merge(v->v, v->n / 2);
	v->n = 2 * w;
	return w;
}

/* A bitmap of the inline ranges over the code they span (@xlo, @xhi: the
 * file's code), unless that is huge: a test per waypoint in mt-segment */
static void inline_bits(struct dwcov *dc, uint64_t xlo, uint64_t xhi)
{
	enum { MAX_SPAN = 1u << 26 }; /* 64 MiB of code, an 8 MiB bitmap */
	size_t w = dc->nir;
	uint64_t b = w && dc->ir[0] < xlo ? dc->ir[0] : xlo;
	uint64_t e = w && dc->ir[2 * w - 1] > xhi ? dc->ir[2 * w - 1] : xhi;
	b &= ~(uint64_t)7;
	if (w && e > b && e - b <= MAX_SPAN) {
		dc->ibits = calloc((size_t)((e - b) / 8 + 1), 1);
		if (dc->ibits) {
			dc->ibase = b;
			dc->iend = e;
			for (size_t i = 0; i < w; i++)
				for (uint64_t a = dc->ir[2 * i] - b; a < dc->ir[2 * i + 1] - b; a++)
					dc->ibits[a >> 3] |= (uint8_t)(1u << (a & 7));
		}
	}
}

/* The inline ranges of every unit of .debug_info into dc; dc->inl_known
 * stays 0 when they cannot be known.  [xlo, xhi): the file's code (its
 * executable sections), which the bitmap covers too. */
static void inline_ranges(struct dwcov *dc, const struct dwsecs *s, uint64_t xlo, uint64_t xhi)
{
	struct u64v v = {0};
	struct abtab ab = {0};
	ab.off = UINT64_MAX;
	if (!s->info.p || !s->abbrev.p)
		goto out;
	struct rd r = {s->info.p, s->info.n, 0, 0};
	while (r.off < s->info.n) {
		size_t osz;
		uint64_t len = rd_len(&r, &osz);
		if (r.bad || len < 3)
			goto out;
		size_t hdr = r.off, next = r.off + (size_t)len;
		if (unit_inline(s, &ab, hdr, next, osz, &v))
			goto out;
		r.off = next;
	}
	/* the unmerged boundaries first */
	free(dc->ib);
	dc->ib = v.n ? malloc(v.n * sizeof *dc->ib) : NULL;
	dc->nib = 0;
	if (dc->ib) {
		memcpy(dc->ib, v.v, v.n * sizeof *dc->ib);
		qsort(dc->ib, v.n, sizeof *dc->ib, cmp_u64);
		for (size_t i = 0; i < v.n; i++)
			if (!dc->nib || dc->ib[dc->nib - 1] != dc->ib[i])
				dc->ib[dc->nib++] = dc->ib[i];
	}
	size_t w = merge_pairs(&v);
	dc->ir = v.v;
	dc->nir = w;
	dc->inl_known = 1;
	v.v = NULL;
	inline_bits(dc, xlo, xhi);
out:
	free(v.v);
	abtab_fini(&ab);
}

/* The bytes of section @scn, decompressed when it is (SHF_COMPRESSED or the
 * GNU .zdebug form).  NULL when it cannot be read. */
static Elf_Data *sec_data(Elf_Scn *scn, const GElf_Shdr *sh, const char *name)
{
	if (sh->sh_type == SHT_NOBITS)
		return NULL;
	if ((sh->sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
		return NULL;
	if (!strncmp(name, ".zdebug", 7) && elf_compress_gnu(scn, 0, 0) < 0)
		return NULL;
	Elf_Data *d = elf_getdata(scn, NULL);
	return d && d->d_buf && d->d_size ? d : NULL;
}

static int file_exists(const char *p)
{
	return access(p, R_OK) == 0;
}

static void load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen, int depth);

/* ---- the cache: what load() read from a file with DWARF ----
 *
 * DIR/dwcov/BUILDID (dwcov_set_cache; files without a build-id are not
 * cached): a header naming the file it was read from (device, inode, size,
 * modification time, path) and the results (coverage, inline ranges and
 * boundaries).  Used only while that file is the same one: a debug package
 * upgraded or reinstalled gives a new inode or time, and the entry is made
 * again.  Written to a temporary file and renamed; an entry that does not
 * read back whole is ignored.  On this VM libc's separate debug file
 * (libc6-dbg, compressed sections) cost mt-segment ~100 ms a run to read;
 * its entry ~0.1 ms. */
static char cache_dir[4096];

void dwcov_set_cache(const char *dir)
{
	if (!dir || strlen(dir) >= sizeof cache_dir)
		cache_dir[0] = 0;
	else
		strcpy(cache_dir, dir);
}

#define DWC_MAGIC "MTDWCOV1"

struct dwc_head {
	char magic[8];
	uint64_t dev, ino, size, mtime, mtime_ns;
	uint32_t pathlen;
	int32_t state, inl_known;
	uint64_t n, nir, nib;
	uint64_t sum; /* dwc_sum of the three arrays */
};

/* FNV-1a over the results' words: an entry changed in place (not only cut)
 * is not read */
static uint64_t dwc_sum(uint64_t h, const uint64_t *v, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		h = (h ^ v[i]) * 0x100000001b3ull;
	return h;
}

static int cache_path(char *out, size_t cap, const uint8_t *id, size_t idlen)
{
	char hex[2 * 64 + 1];
	if (!cache_dir[0] || !idlen || idlen > 64)
		return -1;
	for (size_t i = 0; i < idlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	int k = snprintf(out, cap, "%s/dwcov/%s", cache_dir, hex);
	return k < 0 || (size_t)k >= cap ? -1 : 0;
}

static void cache_key(struct dwc_head *h, const struct stat *st, const char *path)
{
	memset(h, 0, sizeof *h);
	memcpy(h->magic, DWC_MAGIC, 8);
	h->dev = (uint64_t)st->st_dev;
	h->ino = (uint64_t)st->st_ino;
	h->size = (uint64_t)st->st_size;
	h->mtime = (uint64_t)st->st_mtim.tv_sec;
	h->mtime_ns = (uint64_t)st->st_mtim.tv_nsec;
	h->pathlen = (uint32_t)strlen(path);
}

/* @n bytes from @fd into @p: 0, else -1 (an error or the end first) */
static int read_all(int fd, void *p, size_t n)
{
	return io_read_full(fd, p, n) == (ssize_t)n ? 0 : -1;
}

/* Whether the @n pairs [v[2i], v[2i+1]) are non-empty, sorted and disjoint */
static int sorted_pairs(const uint64_t *v, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (v[2 * i] >= v[2 * i + 1] || (i && v[2 * i - 1] > v[2 * i]))
			return 0;
	return 1;
}

/* The results for the file @path (@st) from the cache into @dc (its
 * coverage and inline fields empty): 0, else -1 (nothing changed). */
static int cache_get(struct dwcov *dc, const char *path, const struct stat *st, const uint8_t *id,
		     size_t idlen, uint64_t xlo, uint64_t xhi)
{
	char cp[4096], pb[4096];
	struct dwc_head want, h;
	if (cache_path(cp, sizeof cp, id, idlen))
		return -1;
	int fd = open(cp, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	cache_key(&want, st, path);
	uint64_t *r = NULL, *ir = NULL, *ib = NULL;
	struct stat cs;
	if (read_all(fd, &h, sizeof h) || memcmp(h.magic, want.magic, 8) || h.dev != want.dev ||
	    h.ino != want.ino || h.size != want.size || h.mtime != want.mtime ||
	    h.mtime_ns != want.mtime_ns || h.pathlen != want.pathlen || h.pathlen >= sizeof pb ||
	    read_all(fd, pb, h.pathlen) || memcmp(pb, path, h.pathlen) || fstat(fd, &cs) ||
	    h.n > (uint64_t)cs.st_size || h.nir > (uint64_t)cs.st_size || h.nib > (uint64_t)cs.st_size ||
	    (uint64_t)cs.st_size != sizeof h + h.pathlen + 8 * (2 * h.n + 2 * h.nir + h.nib) ||
	    (h.state != DWCOV_NONE && h.state != DWCOV_RANGES && h.state != DWCOV_ALL))
		goto bad;
	if ((h.n && !(r = malloc(16 * h.n))) || (h.nir && !(ir = malloc(16 * h.nir))) ||
	    (h.nib && !(ib = malloc(8 * h.nib))) || (h.n && read_all(fd, r, 16 * h.n)) ||
	    (h.nir && read_all(fd, ir, 16 * h.nir)) || (h.nib && read_all(fd, ib, 8 * h.nib)))
		goto bad;
	close(fd);
	fd = -1;
	if (dwc_sum(dwc_sum(dwc_sum(0xcbf29ce484222325ull, r, 2 * h.n), ir, 2 * h.nir), ib, h.nib) !=
	    h.sum)
		goto bad;
	/* what dwcov_any, dwcov_inline and the bitmap assume: sorted,
	 * disjoint, non-empty pairs; sorted unique boundaries */
	if (!sorted_pairs(r, h.n) || !sorted_pairs(ir, h.nir))
		goto bad;
	for (uint64_t i = 1; i < h.nib; i++)
		if (ib[i - 1] >= ib[i])
			goto bad;
	dc->state = h.state;
	dc->r = r;
	dc->n = h.n;
	dc->inl_known = h.inl_known != 0;
	dc->ir = ir;
	dc->nir = h.nir;
	dc->ib = ib;
	dc->nib = h.nib;
	if (dc->inl_known)
		inline_bits(dc, xlo, xhi);
	return 0;
bad:
	free(r);
	free(ir);
	free(ib);
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Keeps @dc's results for the file @path (@st); failures only cost the
 * next run the reading. */
static void cache_put(const struct dwcov *dc, const char *path, const struct stat *st,
		      const uint8_t *id, size_t idlen)
{
	char cp[4096], tmp[4096 + 16];
	struct dwc_head h;
	if (cache_path(cp, sizeof cp, id, idlen))
		return;
	snprintf(tmp, sizeof tmp, "%s/dwcov", cache_dir);
	if (mt_mkdir_p(tmp))
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", cp);
	int fd = mkstemp(tmp);
	if (fd < 0)
		return;
	cache_key(&h, st, path);
	h.state = dc->state;
	h.inl_known = dc->inl_known;
	h.n = dc->state == DWCOV_RANGES ? dc->n : 0;
	h.nir = dc->inl_known ? dc->nir : 0;
	h.nib = dc->inl_known ? dc->nib : 0;
	h.sum = dwc_sum(dwc_sum(dwc_sum(0xcbf29ce484222325ull, dc->r, 2 * h.n), dc->ir, 2 * h.nir),
			dc->ib, h.nib);
	int bad = io_write_all(fd, &h, sizeof h) || io_write_all(fd, path, h.pathlen) ||
		  (h.n && io_write_all(fd, dc->r, 16 * h.n)) || (h.nir && io_write_all(fd, dc->ir, 16 * h.nir)) ||
		  (h.nib && io_write_all(fd, dc->ib, 8 * h.nib));
	if (close(fd) || bad || rename(tmp, cp))
		unlink(tmp);
}

/* A file without .debug_info: its DWARF may be in a separate file, where
 * llvm-symbolizer looks for it (build-id, then .gnu_debuglink). */
static void separate(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen,
		     const char *link, int depth)
{
	char buf[4096];
	if (depth) /* a debug file of a debug file: not followed */
		return;
	if (idlen) {
		const char *env = getenv("DEBUGINFOD_URLS");
		if (env && *env) { /* it may come from a server */
			dc->state = DWCOV_ALL;
			return;
		}
	}
	/* by build-id, then by link: where elfinfo looks for a stripped
	 * file's symbols (imgfind.h) */
	int k;
	for (unsigned i = 0; (k = img_debug_candidate(path, id, idlen, link, i, buf, sizeof buf)); i++)
		if (k > 0 && file_exists(buf))
			goto found;
	if (link && strchr(link, '/')) /* a file name, not a path: not looked for */
		dc->state = DWCOV_ALL;
	return; /* none: no DWARF */
found:
	load(dc, buf, id, idlen, depth + 1);
}

static void load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen, int depth)
{
	dc->state = DWCOV_ALL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char link[256] = "";
	Elf *e = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		goto out;
	e = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	GElf_Ehdr eh;
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB)
		goto out;
	size_t shstrndx;
	if (elf_getshdrstrndx(e, &shstrndx))
		goto out;
	Elf_Scn *scn = NULL, *info = NULL, *ar = NULL, *aux[4] = {NULL, NULL, NULL, NULL};
	GElf_Shdr sh, info_sh, ar_sh, aux_sh[4];
	const char *info_name = "", *ar_name = "", *aux_name[4];
	struct stat st;
	struct dwsecs ds;
	memset(&ds, 0, sizeof ds);
	uint64_t xlo = UINT64_MAX, xhi = 0; /* the code */
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(e, shstrndx, sh.sh_name);
		if (!nm)
			continue;
		if ((sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR) &&
		    sh.sh_size && sh.sh_addr + sh.sh_size > sh.sh_addr) {
			if (sh.sh_addr < xlo)
				xlo = sh.sh_addr;
			if (sh.sh_addr + sh.sh_size > xhi)
				xhi = sh.sh_addr + sh.sh_size;
		}
		int a = -1;
		const char *base = !strncmp(nm, ".zdebug_", 8) ? nm + 8 : !strncmp(nm, ".debug_", 7) ? nm + 7 : "";
		if (!strcmp(base, "abbrev"))
			a = 0;
		else if (!strcmp(base, "ranges"))
			a = 1;
		else if (!strcmp(base, "rnglists"))
			a = 2;
		else if (!strcmp(base, "addr"))
			a = 3;
		if (a >= 0) { /* read once the cache is asked (below) */
			aux[a] = scn, aux_sh[a] = sh, aux_name[a] = nm;
			continue;
		}
		if (!strcmp(nm, ".debug_info") || !strcmp(nm, ".zdebug_info")) {
			info = scn, info_sh = sh, info_name = nm;
		} else if (!strcmp(nm, ".debug_aranges") || !strcmp(nm, ".zdebug_aranges")) {
			ar = scn, ar_sh = sh, ar_name = nm;
		} else if (!strcmp(nm, ".gnu_debuglink") && sh.sh_type != SHT_NOBITS) {
			Elf_Data *d = elf_getdata(scn, NULL);
			if (d && d->d_buf && d->d_size > 4) {
				size_t k = strnlen(d->d_buf, d->d_size);
				if (k < d->d_size && k < sizeof link)
					memcpy(link, d->d_buf, k + 1);
			}
		} else if (!strcmp(nm, ".gnu_debugaltlink")) {
			goto out; /* dwz: units in another file; not read */
		}
	}
	if (!info || info_sh.sh_type == SHT_NOBITS || !info_sh.sh_size) {
		dc->state = DWCOV_NONE;
		separate(dc, path, id, idlen, link, depth);
		goto out;
	}
	int have_st = !fstat(fd, &st);
	if (have_st && !cache_get(dc, path, &st, id, idlen, xlo, xhi))
		goto out;
	struct dwsec *auxd[4] = {&ds.abbrev, &ds.ranges, &ds.rnglists, &ds.addr};
	for (int a = 0; a < 4; a++) {
		Elf_Data *d = aux[a] ? sec_data(aux[a], &aux_sh[a], aux_name[a]) : NULL;
		if (d)
			*auxd[a] = (struct dwsec){d->d_buf, d->d_size};
	}
	Elf_Data *di = sec_data(info, &info_sh, info_name);
	if (di) {
		ds.info = (struct dwsec){di->d_buf, di->d_size};
		inline_ranges(dc, &ds, xlo, xhi);
	}
	Elf_Data *da = ar ? sec_data(ar, &ar_sh, ar_name) : NULL;
	if (di && da) /* else unreadable or no ranges: all */
		dwcov_parse(dc, di->d_buf, di->d_size, da->d_buf, da->d_size);
	if (have_st)
		cache_put(dc, path, &st, id, idlen);
out:
	if (e)
		elf_end(e);
	close(fd);
}

void dwcov_parse(struct dwcov *dc, const void *info, size_t ninfo, const void *ar, size_t nar)
{
	struct u64v rg = {0}, acu = {0}, icu = {0};
	free(dc->r); /* the coverage only: the inline ranges stay */
	dc->r = NULL;
	dc->n = 0;
	dc->state = DWCOV_ALL;
	if (info_units(info, ninfo, &icu) || aranges(ar, nar, &rg, &acu))
		goto out;
	/* every unit must have its ranges listed */
	if (icu.n && !acu.n)
		goto out;
	if (acu.n)
		qsort(acu.v, acu.n, sizeof *acu.v, cmp_u64);
	for (size_t i = 0; i < icu.n; i++)
		if (!bsearch(&icu.v[i], acu.v, acu.n, sizeof *acu.v, cmp_u64))
			goto out;
	size_t w = merge_pairs(&rg);
	dc->state = w ? DWCOV_RANGES : DWCOV_NONE;
	dc->r = rg.v;
	dc->n = w;
	rg.v = NULL;
out:
	free(rg.v);
	free(acu.v);
	free(icu.v);
}

void dwcov_parse_raw(struct dwcov *dc, const struct dwcov_raw *raw)
{
	struct dwsecs ds = {{raw->info, raw->ninfo},
			    {raw->abbrev, raw->nabbrev},
			    {raw->ranges, raw->nranges},
			    {raw->rnglists, raw->nrnglists},
			    {raw->addr, raw->naddr}};
	dwcov_fini(dc);
	inline_ranges(dc, &ds, UINT64_MAX, 0);
	dwcov_parse(dc, raw->info, raw->ninfo, raw->aranges, raw->naranges);
}

void dwcov_load(struct dwcov *dc, const char *path, const uint8_t *id, size_t idlen)
{
	memset(dc, 0, sizeof *dc);
	load(dc, path, id, idlen, 0);
}
