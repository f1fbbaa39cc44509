// A C++ exception thrown through several frames and caught: the frames in
// between end by unwinding, not by returning.
#include <stdexcept>

__attribute__((noinline)) static int inner(int n)
{
	if (n == 0)
		throw std::runtime_error("bottom");
	return inner(n - 1) + 1;
}

__attribute__((noinline)) static int middle(int n)
{
	try {
		return inner(n);
	} catch (const std::runtime_error &) {
		return -1;
	}
}

// Six throws: long enough that one PSB interval (2 KB of PT, where an
// injected fault's data is lost) is a small share of the run.
int main()
{
	int r = 0;
	for (int i = 0; i < 6; i++)
		r += middle(4);
	return r == -6 ? 0 : 1;
}
