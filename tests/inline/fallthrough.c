/* An inline function entered by falling through a not-taken branch. */
static inline __attribute__((always_inline)) int sq(int x)
{
	int r = x * x;
	__asm__ volatile("" : "+r"(r));
	return r + 3;
}

__attribute__((noinline)) int work(const int *v, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++) {
		if (v[i] & 1)
			s -= v[i];
		else
			s += sq(v[i]);
	}
	return s;
}

/* where mt-ptsim stops (--stop-at): the last instructions stepped are the
 * loop's, not exit's */
__attribute__((noinline)) int done(int s)
{
	__asm__ volatile("" : "+r"(s));
	return s;
}

int main(void)
{
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = i * 7 % 23;
	int s = 0;
	for (int k = 0; k < 10; k++)
		s += work(v, 64);
	return done(s) == 1 ? 1 : 0;
}
