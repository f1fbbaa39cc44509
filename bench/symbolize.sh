#!/usr/bin/env bash
# bench/symbolize.sh: mt-symbolize's cost against events and unique addresses,
# and a cold cache against a warm one.  Builds (once, cached in
# BUILD/bench/symbolize/) a C++ program of 24 debug-heavy compilation units.
# Times: wall seconds, and CPU seconds of mt-symbolize plus llvm-symbolizer.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
W=$B/bench/symbolize
GEN=$B/bench/symbolize_gen
SYM=bin/mt-symbolize
mkdir -p "$W"
echo "symbolize bench: building the C++ test binary (first time only: minutes)" >&2
sh bench/symbolize_big.sh "$W/big" 24
BIG=$(cd "$W/big" && pwd)/big
SMALL=$(pwd)/bin/mt-decode

TIMEFORMAT='%R %U %S'
# run LABEL ARGS...: one mt-symbolize run; prints wall and CPU (self + children)
run() {
	local label=$1; shift
	local t
	t=$( { time "$SYM" -s "$@" > /dev/null 2> "$W/err" ; } 2>&1 ) || true
	local n
	# --stats is key=value: unique addresses, symbolizer requests, cache hits
	n=$(sed -n 's/.* unique_addrs=\([0-9]*\) .* cache_hits=\([0-9]*\) symbolizer_requests=\([0-9]*\) .*/\1 \3 \2/p' "$W/err")
	res=$(sed -n 's/.* resolve_s=\([0-9.]*\) .*/\1/p' "$W/err")
	echo "$label $t $n $res" | awk '{ printf "%-28s %8.2f %8.2f %8.3f %8d %8d %8d\n", $1 " " $2 " " $3 " " $4, $5, $6 + $7, $11, $8, $9, $10 }'
	LAST_WALL=$(echo "$t" | cut -d' ' -f1)
	LAST_CPU=$(echo "$t" | awk '{ print $2 + $3 }')
	LAST_RES=$res
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }

echo "# wall_s, cpu_s: whole run (cpu: mt-symbolize + llvm-symbolizer); resolve_s: wall time of"
echo "# the address resolution phase (cache + llvm-symbolizer); output to /dev/null"
printf '%-28s %8s %8s %8s %8s %8s %8s\n' case wall_s cpu_s resolve_s unique requests cachehit

# 1. cold vs warm: 1 M events, ~2000 unique addresses, both binaries
for bin in "$BIG" "$SMALL"; do
	name=$(basename "$bin")
	"$GEN" "$bin" 1000000 2000 > "$W/s.mt"
	rm -rf "$W/cache"
	run "$name 1M-ev 2k-addr cold" --cache-dir "$W/cache" "$W/s.mt"
	cw=$LAST_WALL cc=$LAST_CPU cr=$LAST_RES
	run "$name 1M-ev 2k-addr warm" --cache-dir "$W/cache" "$W/s.mt"
	echo "# $name cold/warm: wall $(ratio "$cw" "$LAST_WALL")x, cpu $(ratio "$cc" "$LAST_CPU")x, resolve phase $(ratio "$cr" "$LAST_RES")x"
	run "$name 1M-ev 2k-addr warm" --cache-dir "$W/cache" "$W/s.mt"
	echo "# $name cold/warm: wall $(ratio "$cw" "$LAST_WALL")x, cpu $(ratio "$cc" "$LAST_CPU")x, resolve phase $(ratio "$cr" "$LAST_RES")x"
done

# 2. events grow, unique addresses fixed (no cache: every run symbolizes)
for ev in 100000 1000000 3000000; do
	"$GEN" "$BIG" $ev 2000 > "$W/s.mt"
	run "big $ev-ev 2k-addr nocache" --no-cache "$W/s.mt"
done

# 3. unique addresses grow, events fixed
for u in 200 2000 20000; do
	"$GEN" "$BIG" 1000000 $u > "$W/s.mt"
	run "big 1M-ev $u-addr nocache" --no-cache "$W/s.mt"
done
rm -f "$W/s.mt" "$W/err"
