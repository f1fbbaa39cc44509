#!/bin/sh
# bench/decode-ab.sh OLD NEW [RUNDIR [COPIES [REPS]]]: two mt-decode builds on the
# same big trace in one run, interleaved (old, new, old, new, ...) so that
# the machine's drift hits both alike; then the instructions each executes
# (callgrind on a smaller copy: deterministic, the stable figure).
#
# RUNDIR is an mt-ptsim output directory (perf.data, images/); default: the
# biggest cached clean run.  Its PT is repeated COPIES times (default: ~8 MB)
# by `ptdecode_bench amplify`.  REPS (default 7) runs of each; CPU seconds
# (user + sys): median and best.  For refactoring: the ratio should be 1
# within noise.
set -e
cd "$(dirname "$0")/.."
. mk/build-dir.sh
OLD=$(readlink -f "${1:?usage: decode-ab.sh OLD NEW [RUNDIR [COPIES [REPS]]]}")
NEW=$(readlink -f "${2:?usage: decode-ab.sh OLD NEW [RUNDIR [COPIES [REPS]]]}")
BENCH=$MT_BUILD/bench/ptdecode_bench
[ -x "$BENCH" ] || { echo "decode-ab.sh: run make bench first" >&2; exit 2; }
RUN=$3
if [ -z "$RUN" ]; then
	RUN=$(ls -S tests/.cache/ptsim/clean/*/perf.data 2>/dev/null | head -1)
	RUN=${RUN%/perf.data}
fi
[ -f "$RUN/perf.data" ] || { echo "decode-ab.sh: no mt-ptsim run" >&2; exit 2; }
REPS=${5:-7}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
base=$("$OLD" --records "$RUN/perf.data" | sed -n 's/.* AUXTRACE .* aux_size=\([0-9]*\) .*/\1/p' | head -1)
N=${4:-$((8000000 / base + 1))}
"$BENCH" amplify "$RUN/perf.data" "$TMP/big.data" "$N"
"$BENCH" amplify "$RUN/perf.data" "$TMP/small.data" "$(((N + 9) / 10))"
echo "data: $RUN, PT repeated $N times: $((base * N)) bytes; $REPS runs each, interleaved"

i=0
while [ "$i" -lt "$REPS" ]; do
	for b in old new; do
		bin=$OLD
		[ $b = new ] && bin=$NEW
		/usr/bin/time -o "$TMP/t" -f '%U %S' "$bin" --buildid-dir "$RUN/images" -o /dev/null "$TMP/big.data" 2>/dev/null || true
		awk '{ print $1 + $2 }' "$TMP/t" >> "$TMP/$b"
	done
	i=$((i + 1))
done
stat() { sort -n "$1" | awk '{ a[NR] = $1 } END { printf "median %.3f s  best %.3f s", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, a[1] }'; }
med() { sort -n "$1" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "  old: $(stat "$TMP/old")"
echo "  new: $(stat "$TMP/new")"
echo "  new / old (median CPU): $(echo "$(med "$TMP/new") $(med "$TMP/old")" | awk '{ printf "%.3f", $1 / $2 }')"
if command -v valgrind > /dev/null; then
	for b in old new; do
		bin=$OLD
		[ $b = new ] && bin=$NEW
		valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$b" "$bin" --buildid-dir "$RUN/images" \
			-o /dev/null "$TMP/small.data" > /dev/null 2> "$TMP/vg.$b" || true
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$TMP/vg.$b" > "$TMP/ir.$b"
	done
	echo "  instructions (callgrind, PT x $(((N + 9) / 10))): old $(cat "$TMP/ir.old"), new $(cat "$TMP/ir.new"):" \
		"new / old $(echo "$(cat "$TMP/ir.new") $(cat "$TMP/ir.old")" | awk '{ printf "%.4f", $1 / $2 }')"
fi
