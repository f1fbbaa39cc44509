#!/bin/sh
# symbolize_big.sh OUTDIR NCU: builds OUTDIR/big, a C++ program of NCU
# translation units, each heavy in debug info (STL containers, regex,
# streams: ~1 MB of .debug_info per unit), -O2 -g.  llvm-symbolizer's cost
# is mostly parsing the units that the addresses fall in, as with real C++.
set -e
out=$1 n=$2
mkdir -p "$out"
[ -x "$out/big" ] && [ "$(cat "$out/big.n" 2>/dev/null)" = "$n" ] && exit 0
i=1
while [ "$i" -le "$n" ]; do
	cat > "$out/u$i.cpp" <<EOC
#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
namespace u$i {
__attribute__((noinline)) long work(const std::vector<std::string> &v)
{
	std::map<std::string, int> m;
	std::unordered_map<std::string, long> h;
	for (auto &s : v) { m[s]++; h[s] += (long)s.size() * $i; }
	std::regex re("a+b*");
	long n = 0;
	for (auto &s : v) if (std::regex_match(s, re)) n++;
	std::ostringstream os; os << n << m.size() << h.size();
	std::vector<std::string> w(v); std::sort(w.begin(), w.end());
	return n + (long)os.str().size() + (long)w.size();
}
}
EOC
	i=$((i + 1))
done
{
	echo '#include <string>'
	echo '#include <vector>'
	i=1; while [ "$i" -le "$n" ]; do echo "namespace u$i { long work(const std::vector<std::string> &); }"; i=$((i + 1)); done
	echo 'int main(int argc, char **argv) { std::vector<std::string> v(argv, argv + argc); long s = 0;'
	i=1; while [ "$i" -le "$n" ]; do echo "s += u$i::work(v);"; i=$((i + 1)); done
	echo 'return (int)(s & 1); }'
} > "$out/main.cpp"
objs=""
i=1
while [ "$i" -le "$n" ]; do
	[ -f "$out/u$i.o" ] || ${CXX:-c++} -O2 -g -c -o "$out/u$i.o" "$out/u$i.cpp" &
	objs="$objs $out/u$i.o"
	# two compilers at a time
	[ $((i % 2)) -eq 0 ] && wait
	i=$((i + 1))
done
wait
${CXX:-c++} -O2 -g -o "$out/big" "$out/main.cpp" $objs
echo "$n" > "$out/big.n"
