#!/bin/sh
# bench/psb-cut.sh [N] [DIR...] — what a PSB-parallel walk could rely on:
# a recording's PT decoded whole (raw mode, --pt with its images) against the
# same PT cut at a PSB and decoded from there (what a worker thread starting a
# chunk at that PSB sees), for N PSBs (default 12) spread over the trace.
# Per cut: the records the cut decode writes, how many of its first records
# differ from the whole decode's last records (the longest common suffix,
# compared whole, then without the time field), and the records of the cut's
# first PSB interval (the cut decoded up to the next PSB alone).  A warm-up
# within the first interval means a chunk decoded from the PSB before it
# (one interval of overlap) gives the serial records from its own PSB on.
# DIR: an mt-ptgen or mt-ptsim output directory (perf.data, images/), one
# thread; default the 5M mt-ptgen trace (bench/out/ptgen-5M, made by
# bench/pipeline.sh 5M) and the five real programs of bench/out/ptsim-real
# (made by bench/walk.sh).  docs/decode.md ("Toward a PSB-parallel walk").
set -e
cd "$(dirname "$0")/.."
N=${1:-12}
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
	set -- bench/out/ptgen-5M
	for p in perl sort gzip sed mawk; do
		[ -d bench/out/ptsim-real/$p ] && set -- "$@" bench/out/ptsim-real/$p
	done
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

. bench/rawargs

# dec FILE OUT: FILE's branch records, one per line (time type from to), to OUT
dec() {
	# shellcheck disable=SC2086
	bin/mt-decode --pt "$1" $RAWARGS --cpu 6/106/6 2>/dev/null | bin/mt-dump -k branch |
		sed 's/^branch tid=[0-9]* //' >"$2"
}

# warm B AR BR: how many of B's first lines are not in the longest common
# suffix of B and the whole decode (AR, BR: the two reversed)
warm() {
	nb=$(wc -l <"$1")
	c=$(cmp "$2" "$3" 2>/dev/null | sed -n 's/.* line \([0-9]*\).*/\1/p')
	[ -n "$c" ] || c=$((nb + 1))
	echo $((nb - c + 1))
}

echo "bench/psb-cut.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), main $(git rev-parse --short HEAD 2>/dev/null), $N cuts per trace"
printf '%-28s %9s %8s %7s | %9s %8s %8s %8s %s\n' trace records PSBs "cut@" "cut recs" "warm" "warm-nt" "1st int" "within"
for d in "$@"; do
	rawargs "$d"
	dec "$TMP/raw.pt" "$TMP/a"
	tac "$TMP/a" >"$TMP/ar"
	cut -d' ' -f2- "$TMP/ar" >"$TMP/arn"
	na=$(wc -l <"$TMP/a")
	LC_ALL=C grep -obUaP '(\x02\x82){8}' "$TMP/raw.pt" | cut -d: -f1 >"$TMP/psbs"
	np=$(wc -l <"$TMP/psbs")
	size=$(wc -c <"$TMP/raw.pt")
	step=$((np / (N + 1)))
	[ "$step" -ge 1 ] || step=1
	i=$step
	k=0
	while [ "$i" -le "$np" ] && [ "$k" -lt "$N" ]; do
		off=$(sed -n "${i}p" "$TMP/psbs")
		next=$(sed -n "$((i + 1))p" "$TMP/psbs")
		[ -n "$next" ] || next=$size
		tail -c +$((off + 1)) "$TMP/raw.pt" >"$TMP/cut.pt"
		dec "$TMP/cut.pt" "$TMP/b"
		head -c $((next - off)) "$TMP/cut.pt" >"$TMP/int.pt"
		dec "$TMP/int.pt" "$TMP/i"
		tac "$TMP/b" >"$TMP/br"
		cut -d' ' -f2- "$TMP/br" >"$TMP/brn"
		w=$(warm "$TMP/b" "$TMP/ar" "$TMP/br")
		wn=$(warm "$TMP/b" "$TMP/arn" "$TMP/brn")
		ni=$(wc -l <"$TMP/i")
		within=no
		[ "$w" -le "$ni" ] && within=yes
		printf '%-28s %9s %8s %7s | %9s %8s %8s %8s %s\n' "$(basename "$d")" "$na" "$np" "$off" \
			"$(wc -l <"$TMP/b")" "$w" "$wn" "$ni" "$within"
		i=$((i + step))
		k=$((k + 1))
	done
done
echo "warm: the cut's first records that differ from the whole decode (its trace-start"
echo "included); warm-nt: the same without times; 1st int: the cut's records up to the"
echo "next PSB; within: the warm-up ends inside the first interval"
