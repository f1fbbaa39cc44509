// Exceptions thrown through several frames, caught, rethrown, at -O2.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

struct parse_error : std::runtime_error {
	using std::runtime_error::runtime_error;
};

static std::map<std::string, int> table;

__attribute__((noinline)) static int parse(const std::string &s)
{
	if (s.empty() || s[0] == '#')
		throw parse_error("bad token " + s);
	int v = 0;
	for (char c : s) {
		if (c < '0' || c > '9')
			throw std::invalid_argument(s);
		v = v * 10 + (c - '0');
	}
	return v;
}

__attribute__((noinline)) static int lookup(const std::string &s)
{
	auto it = table.find(s);
	if (it != table.end())
		return it->second;
	try {
		int v = parse(s);
		table.emplace(s, v);
		return v;
	} catch (const parse_error &) {
		throw;
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 200;
	std::vector<std::string> toks;
	for (int i = 0; i < n; i++)
		toks.push_back(i % 7 == 3 ? "#" + std::to_string(i) : i % 11 == 5 ? "x" + std::to_string(i) : std::to_string(i * 31 % 500));
	long sum = 0;
	int bad = 0, inval = 0;
	for (auto &t : toks) {
		try {
			sum += lookup(t);
		} catch (const parse_error &) {
			bad++;
		} catch (const std::exception &) {
			inval++;
		}
	}
	std::printf("%ld %d %d\n", sum, bad, inval);
	return 0;
}
