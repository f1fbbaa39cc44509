#!/bin/sh
# symbolize_big.sh OUTDIR NCU [COPIES]: builds OUTDIR/big, a C++ program of
# NCU translation units, each heavy in debug info (STL containers, regex,
# streams: ~1 MB of .debug_info per unit), -O2 -g, linked with COPIES more
# copies of each unit's object (default 3; its one global function renamed
# u -> v, w, x: same code and debug info, own addresses), so the program has
# NCU * (1 + COPIES) compilation units.  llvm-symbolizer's cost is mostly
# parsing the units that the addresses fall in, as with real C++; compiling
# is slow, so the copies make a larger program cheaply.
set -e
out=$1 n=$2 copies=${3:-3}
mkdir -p "$out"
[ -x "$out/big" ] && [ "$(cat "$out/big.n" 2>/dev/null)" = "$n $copies" ] && exit 0
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
i=1
while [ "$i" -le "$n" ]; do
	sym=$(nm --defined-only -g "$out/u$i.o" | awk '$2 == "T" && $3 ~ /^_ZN[0-9]+u[0-9]+4work/ { print $3 }')
	for l in v w x y z; do
		[ "$(printf '%s' vwxyz | cut -c1-"$copies" | grep -c "$l")" -eq 1 ] || continue
		new=$(printf '%s' "$sym" | sed "s/^\(_ZN[0-9]*\)u/\1$l/")
		objcopy --redefine-sym "$sym=$new" "$out/u$i.o" "$out/$l$i.o"
		objs="$objs $out/$l$i.o"
	done
	i=$((i + 1))
done
${CXX:-c++} -O2 -g -o "$out/big" "$out/main.cpp" $objs
echo "$n $copies" > "$out/big.n"
