#!/bin/sh
# compare-insns.sh OLD_BIN NEW_BIN: callgrind instruction counts of
# mt-symbolize (warm cache) and mt-write (FXT, JSON) of two builds
# (directories holding mt-*) on the trace of bench/instructions.sh, in one
# invocation: for a change that must not cost more.
set -e
cd "$(dirname "$0")/.."
OLD=$(cd "$1" && pwd) NEW=$(cd "$2" && pwd)
N=${N:-5M}
. bench/ptgen-trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$OLD/mt-decode" --buildid-dir "$D/images" -o "$TMP/dec.mt" "$D/perf.data"
"$OLD/mt-segment" --stitch -i "$TMP/dec.mt" -o "$TMP/st.mt"
"$OLD/mt-segment" --stitch --all-waypoints -i "$TMP/dec.mt" -o "$TMP/sta.mt"
for in in st sta; do
	"$OLD/mt-symbolize" --images "$D/images" --cache-dir "$TMP/cache" -o "$TMP/$in.sym.mt" "$TMP/$in.mt" || [ $? -eq 1 ]
done
cg() { # command...: instructions
	valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
		sed -n 's/^==[0-9]*== I *refs: *//p' | tr -d ,
}
echo "compare-insns.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), trace $D; callgrind instructions"
echo "OLD=$OLD NEW=$NEW"
printf '%-40s %14s %14s %7s\n' what OLD NEW NEW/OLD
row() { # label args... (BIN replaced by each build's directory)
	label=$1
	shift
	o=$(cg $(echo "$@" | sed "s|BIN|$OLD|g"))
	n=$(cg $(echo "$@" | sed "s|BIN|$NEW|g"))
	awk -v l="$label" -v o="$o" -v n="$n" 'BEGIN { printf "%-40s %14d %14d %7.4f\n", l, o, n, n / o }'
}
row "mt-symbolize warm" BIN/mt-symbolize --images "$D/images" --cache-dir "$TMP/cache" -o /dev/null "$TMP/st.mt"
row "mt-symbolize warm, every waypoint" BIN/mt-symbolize --images "$D/images" --cache-dir "$TMP/cache" -o /dev/null "$TMP/sta.mt"
row "mt-symbolize --no-symbolizer" BIN/mt-symbolize --no-symbolizer --no-cache --images "$D/images" -o /dev/null "$TMP/st.mt"
row "mt-write fxt" BIN/mt-write -f fxt --force -o /dev/null "$TMP/st.sym.mt"
row "mt-write json" BIN/mt-write -f json -o /dev/null "$TMP/st.sym.mt"
row "mt-write fxt, every waypoint" BIN/mt-write -f fxt --force -o /dev/null "$TMP/sta.sym.mt"
