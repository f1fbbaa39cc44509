#!/bin/sh
# bench/decode.sh [RUNDIR [COPIES]]: mt-decode against the bare libipt
# block-decoder loop and against `perf script --itrace=b`, on the same data
# in one run.
#
# RUNDIR is an mt-ptsim output directory (perf.data, images/); default: the
# biggest cached clean run in tests/.cache/ptsim.  Its PT is repeated COPIES
# times (default: enough for ~8 MB) by `ptdecode_bench amplify`, so all three
# decoders chew through a big trace of real code.  Times are CPU seconds
# (user + sys, best of 3; perf: one run), throughput in MB of PT per CPU
# second: this VM is shared, wall time is noise.
set -e
cd "$(dirname "$0")/.."
. mk/build-dir.sh
BENCH=$MT_BUILD/bench/ptdecode_bench
[ -x "$BENCH" ] && [ -x bin/mt-decode ] || { echo "decode.sh: run make bench first" >&2; exit 2; }
RUN=$1
if [ -z "$RUN" ]; then
	RUN=$(ls -S tests/.cache/ptsim/clean/*/perf.data 2>/dev/null | head -1)
	RUN=${RUN%/perf.data}
fi
if [ -z "$RUN" ] || [ ! -f "$RUN/perf.data" ]; then
	echo "decode.sh: no mt-ptsim run (give RUNDIR, or build the ptsim cache: make test)" >&2
	exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
base=$(bin/mt-decode --records "$RUN/perf.data" | sed -n 's/.* AUXTRACE .* aux_size=\([0-9]*\) .*/\1/p' | head -1)
N=${2:-$((8000000 / base + 1))}
"$BENCH" amplify "$RUN/perf.data" "$TMP/big.data" "$N"
PT=$((base * N))

cpu() { # command...: best-of-3 user+sys seconds
	best=
	for i in 1 2 3; do
		/usr/bin/time -o "$TMP/t" -f '%U %S' "$@" > /dev/null 2>&1 || true
		t=$(awk '{ print $1 + $2 }' "$TMP/t")
		best=$(echo "$t ${best:-$t}" | awk '{ print ($1 < $2) ? $1 : $2 }')
	done
	echo "$best"
}
echo "data: $RUN, PT repeated $N times: $PT bytes"
t_plain=$(cpu "$BENCH" bare "$TMP/big.data" "$RUN/images" plain)
t_bare=$(cpu "$BENCH" bare "$TMP/big.data" "$RUN/images")
t_dec=$(cpu bin/mt-decode --buildid-dir "$RUN/images" -o /dev/null "$TMP/big.data")
/usr/bin/time -o "$TMP/t" -f '%U %S' perf --buildid-dir "$RUN/images" script --itrace=b -i "$TMP/big.data" > /dev/null 2>&1
t_perf=$(awk '{ print $1 + $2 }' "$TMP/t")
bin/mt-decode -s --buildid-dir "$RUN/images" -o /dev/null "$TMP/big.data" 2>&1 | sed 's/^/  /'
awk -v pt="$PT" -v a="$t_plain" -v b="$t_bare" -v d="$t_dec" -v p="$t_perf" 'BEGIN {
	printf "  bare libipt loop, plain blocks:          %6.2f s  %6.2f MB/s\n", a, pt / a / 1e6
	printf "  bare libipt loop, end_on_call/jump:      %6.2f s  %6.2f MB/s\n", b, pt / b / 1e6
	printf "  mt-decode (to MTEV, /dev/null):          %6.2f s  %6.2f MB/s\n", d, pt / d / 1e6
	printf "  perf script --itrace=b > /dev/null:      %6.2f s  %6.2f MB/s\n", p, pt / p / 1e6
	printf "  mt-decode / bare (end_on_call/jump):  %.2fx   (goal >= 0.7x)\n", b / d
	printf "  mt-decode / bare (plain):             %.2fx\n", a / d
	printf "  mt-decode vs perf script:             %.1fx faster (goal >= 10x)\n", p / d
}'
