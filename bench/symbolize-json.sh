#!/bin/sh
# symbolize-json.sh OLD NEW: two mt-symbolize binaries (e.g. before and after
# a change to how llvm-symbolizer's JSON replies are read) measured in one
# invocation: callgrind instructions with a warm cache (every address's reply
# read back from the cache file, nothing asked) on bench/out/ptgen-5M (the
# trace of bench/instructions.sh) with and without --all-waypoints, and on
# bench/symbolize's stream (1M events over 20k addresses of mt-decode's own
# binary).  Instruction counts, not seconds: the figures do not depend on how
# busy the machine is.
set -e
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2
N=5M
. bench/ptgen-trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bin/mt-decode --buildid-dir "$D/images" -o "$TMP/dec.mt" "$D/perf.data"
bin/mt-segment --stitch -i "$TMP/dec.mt" -o "$TMP/st.mt"
bin/mt-segment --stitch --all-waypoints -i "$TMP/dec.mt" -o "$TMP/sta.mt"
${BUILD:-build}/bench/symbolize_gen "$(pwd)/bin/mt-decode" 1000000 20000 > "$TMP/gen.mt"
for v in OLD NEW; do
	eval sym=\$$v
	for in in st sta gen; do # fill the caches
		"$sym" --images "$D/images" --cache-dir "$TMP/cache.$v" -o /dev/null "$TMP/$in.mt" || [ $? -eq 1 ]
	done
done
cg() { # bin input
	valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" --images "$D/images" \
		--cache-dir "$TMP/cache.$v" -o /dev/null "$TMP/$2.mt" 2>&1 >/dev/null |
		sed -n 's/^==[0-9]*== I *refs: *//p' | tr -d ,
}
echo "symbolize-json.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "OLD=$OLD NEW=$NEW"
printf '%-34s %14s %14s %7s\n' "warm cache, callgrind" OLD NEW NEW/OLD
for in in st sta gen; do
	v=OLD; o=$(cg "$OLD" $in)
	v=NEW; n=$(cg "$NEW" $in)
	awk -v l="$in" -v o="$o" -v n="$n" 'BEGIN { printf "%-34s %14d %14d %7.3f\n", l, o, n, n / o }'
done
