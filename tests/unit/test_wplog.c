/* libcommon/wplog.h: every entry comes back exactly, in both encodings. */
#include "wplog.h"
#include "t.h"

#include <stdlib.h>

struct e {
	uint64_t time, addr;
	int32_t level;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(void)
{
	enum { N = 200000 };
	struct e *v = malloc(N * sizeof *v);
	struct wplog l = {0};
	if (!v)
		return 1;
	uint64_t t = 1000, a = 0x401000;
	int32_t lv = 0;
	size_t mark = 0, at_mark = 0;
	int put_ok = 1;
	for (size_t i = 0; i < N; i++) {
		uint64_t r = next();
		switch (r % 8) { /* mostly small steps, some of every escape */
		case 0:
			t += r >> 40; /* up to 2^24: far in time */
			break;
		case 1:
			t -= (r >> 8) & 3; /* time going back */
			break;
		default:
			t += (r >> 8) & 7;
		}
		switch ((r >> 16) % 16) {
		case 0:
			a = 0x7f0000000000ull + (r >> 20); /* another library */
			break;
		case 1:
			a -= (r >> 24) & 0x3ffff;
			break;
		case 2:
			a += 1u << 18; /* just outside the short form */
			break;
		case 3:
			a -= (1u << 18) + 1;
			break;
		default:
			a += (r >> 24) & 63;
		}
		switch ((r >> 32) % 8) {
		case 0:
			lv += 1;
			break;
		case 1:
			lv -= 1;
			break;
		case 2:
			lv += (int32_t)((r >> 36) & 7) - 3;
			break;
		case 3:
			lv = -(int32_t)((r >> 40) & 1023); /* promoted roots: negative */
			break;
		}
		v[i] = (struct e){t, a, lv};
		if (i == N / 2) {
			wplog_mark(&l);
			mark = l.n;
			at_mark = i;
		}
		if (wplog_put(&l, t, a, lv))
			put_ok = 0;
	}
	T_CHECK(put_ok, "%d entries put", N);
	T_CHECK(l.n < (size_t)N * 3, "short and medium forms used (%zu words for %d entries)", l.n, N);
	struct wpcur c;
	wpcur_init(&c, &l, 0, l.n);
	size_t i = 0, bad = 0;
	while (wpcur_next(&c)) {
		if (i >= N || c.time != v[i].time || c.addr != v[i].addr || c.level != v[i].level)
			bad++;
		i++;
	}
	T_CHECK(i == N && !bad, "all read back (%zu read, %zu wrong)", i, bad);
	wpcur_init(&c, &l, mark, l.n);
	for (i = at_mark, bad = 0; wpcur_next(&c); i++)
		if (c.time != v[i].time || c.addr != v[i].addr || c.level != v[i].level)
			bad++;
	T_CHECK(i == N && !bad, "a cursor from a mark reads the rest (%zu wrong)", bad);
	wplog_clear(&l);
	T_CHECK(!wplog_put(&l, 5, 6, -7) && l.n == 6, "first entry after clear: absolute");
	T_CHECK(!wplog_put(&l, 5 + 1023, 6 + (1 << 18) - 1, -6) && l.n == 7, "largest short steps");
	T_CHECK(!wplog_put(&l, 5 + 1023, 6 - 1, -7) && l.n == 8, "most negative short address step");
	wpcur_init(&c, &l, 0, l.n);
	int ok = wpcur_next(&c) && c.time == 5 && c.addr == 6 && c.level == -7;
	ok = ok && wpcur_next(&c) && c.time == 1028 && c.addr == 6 + (1 << 18) - 1 && c.level == -6;
	ok = ok && wpcur_next(&c) && c.time == 1028 && c.addr == 5 && c.level == -7 && !wpcur_next(&c);
	T_CHECK(ok, "edge entries read back");
	wplog_clear(&l);
	int mok = !wplog_put(&l, 100, 0x400000, 3) && l.n == 6;
	mok = mok && !wplog_put(&l, 100 + 1024, 0x400000 + (1 << 18), 4) && l.n == 8; /* medium */
	mok = mok && !wplog_put(&l, 100 + 1024 + (1u << 27) - 1, 0x440000 - ((uint64_t)1 << 31), 3) &&
	      l.n == 10; /* medium, its extremes */
	mok = mok && !wplog_put(&l, 100 + 1024 + (1u << 27) - 1 + (1u << 27), 0x400000, 3) &&
	      l.n == 16; /* time step too large: absolute */
	wpcur_init(&c, &l, 0, l.n);
	mok = mok && wpcur_next(&c) && c.time == 100 && c.addr == 0x400000 && c.level == 3;
	mok = mok && wpcur_next(&c) && c.time == 1124 && c.addr == 0x400000 + (1 << 18) && c.level == 4;
	mok = mok && wpcur_next(&c) && c.time == 1124 + (1u << 27) - 1 &&
	      c.addr == 0x440000 - ((uint64_t)1 << 31) && c.level == 3;
	mok = mok && wpcur_next(&c) && c.time == 1124 + (1u << 27) - 1 + (1u << 27) &&
	      c.addr == 0x400000 && c.level == 3 && !wpcur_next(&c);
	T_CHECK(mok, "medium form (two words) at its limits, and past them");
	wplog_free(&l);
	free(v);
	return T_DONE();
}
