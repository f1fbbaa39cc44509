/* Inlined helpers (built -O2 -g): clamp and mix are expanded into score,
 * so only the debug info knows they ran. */
static inline int clamp(int x, int lo, int hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

static inline int mix(int a, int b)
{
	return clamp(a * 31 + b, -1000, 1000);
}

__attribute__((noinline)) int score(const int *v, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s = mix(s, v[i]);
	return s;
}

int main(void)
{
	int v[100];
	for (int i = 0; i < 100; i++)
		v[i] = (i * 7919) % 200 - 100;
	int s = 0;
	for (int k = 0; k < 5; k++)
		s += score(v, 100);
	return s == 12345 ? 1 : 0;
}
