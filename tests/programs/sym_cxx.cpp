// mt-symbolize test program: C++ names (namespaces, templates) to demangle.
#include <cstdio>

namespace symtest {
template <class T> struct Acc {
	__attribute__((noinline)) static T run(T n)
	{
		T s = 0;
		for (T i = 0; i < n; i++)
			s += twice(i);
		return s;
	}
	static inline __attribute__((always_inline)) T twice(T x) { return (x * 31) ^ (x >> 2); }
};
} // namespace symtest

int main(int argc, char **)
{
	std::printf("%ld\n", symtest::Acc<long>::run(argc + 2));
	return 0;
}
