// C++ exceptions: throws, catches, rethrows and cleanups; at -O2 the
// landing pads sit in "f(int) [clone .cold]" parts, entered by the unwinder
// (a jump into another function's .cold part unwinds to that function's
// frame).  Built at -O2 (except) and -O0 (except_O0).
#include <stdexcept>
#include <string>

struct Guard {
	int *n;
	~Guard() { ++*n; }
};

__attribute__((noinline)) int leaf(int i)
{
	if (i % 3 == 0)
		throw std::runtime_error("leaf");
	return i * 2;
}

__attribute__((noinline)) int middle(int i, int *cleaned)
{
	Guard g{cleaned};
	return leaf(i) + 1;
}

__attribute__((noinline)) int rethrower(int i, int *cleaned)
{
	try {
		return middle(i, cleaned);
	} catch (const std::runtime_error &) {
		++*cleaned;
		throw;
	}
}

__attribute__((noinline)) int top(int i, int *cleaned)
{
	try {
		return rethrower(i, cleaned);
	} catch (const std::exception &e) {
		return (int)std::string(e.what()).size();
	}
}

int main()
{
	int cleaned = 0, sum = 0;
	for (int i = 0; i < 4; i++)
		sum += top(i, &cleaned);
	return sum > 0 && cleaned > 0 ? 0 : 1;
}
