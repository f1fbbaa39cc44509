#!/bin/sh
# What resynchronizing before the next PSB (docs/decode.md) gains on the
# corpus faults: every faulted configuration of bench/corpus.sh's output
# (run its build, step and variants stages first) decoded without and with
# `mt-decode --resync`, each through mt-segment | mt-stitch and scored by
# mt-compare against the truth (its default, honest window): frame-time
# coverage, wrong spans (joins: of them, spans joined across a gap over two
# activations), kept branches the truth has not (kept-w; the goal is 0) and
# kept / true branches, without -> with --resync, the gap share (mt-compare's
# gap=: the true frame-time no trace shows) without -> with; "95" when the
# coverage with it reaches 0.95.  The last line: the totals.
#   sh bench/resync.sh [PROGRAM...]     (default: every program there)
# CORPUS_OUT: the corpus directory (default bench/out/corpus); CORPUS_BIN:
# the mt tools (default bin/).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${CORPUS_BIN:-$ROOT/bin}
O=${CORPUS_OUT:-$ROOT/bench/out/corpus}
NICE="nice -n 10"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# one decode through the pipeline: "coverage wrong kept-w kept truth joins gap"
score() {
	d=$1
	shift
	$NICE "$B/mt-decode" "$@" --buildid-dir "$d/images" -o "$T/dec.mt" "$d/perf.data" 2>/dev/null
	# the same decode as the last one: the same score
	if [ -f "$T/last.mt" ] && cmp -s "$T/dec.mt" "$T/last.mt"; then
		cat "$T/last.txt"
		return
	fi
	cp "$T/dec.mt" "$T/last.mt"
	k=$("$B/mt-compare" --kept-branches "$d/truth.mt" "$T/dec.mt" 2>/dev/null | tail -1)
	$NICE "$B/mt-segment" --images "$d/images" -i "$T/dec.mt" -o "$T/seg.mt" 2>/dev/null
	$NICE "$B/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt" 2>/dev/null
	l=$("$B/mt-compare" "$d/truth-spans.mt" "$T/st.mt" 2>/dev/null | tail -1)
	get() { printf '%s' "$2" | sed -n "s/.*[ :]$1=\\([^ ]*\\).*/\\1/p"; }
	echo "$(get coverage "$l") $(get wrong "$l") $(get wrong "$k") $(get kept "$k") $(get truth "$k") $(get wrong_joins "$l") $(get gap "$l")" |
		tee "$T/last.txt"
}

printf '%-15s %-12s %19s %11s %9s %7s %21s %15s\n' program config coverage wrong joins kept-w kept/truth gap
progs=${*:-$(cd "$O" && for d in */whole; do [ -d "$d" ] && dirname "$d"; done)}
for p in $progs; do
	for d in "$O/$p"/*@*; do
		[ -f "$d/truth-spans.mt" ] || continue
		set -- $(score "$d")
		oc=$1 ow=$2 ok=$4 oj=$6 okw=$3 og=$7
		set -- $(score "$d" --resync)
		r=$(awk -v b="$1" 'BEGIN { if (b >= 0.95) printf "95" }')
		printf '%-15s %-12s %19s %11s %9s %7s %21s %15s %s\n' "$p" "$(basename "$d")" "$oc->$1" \
			"$ow->$2" "$oj->$6" "$okw->$3" "$ok->$4/$5" \
			"$(awk -v a="$og" -v b="$7" 'BEGIN { printf "%.4f->%.4f", a, b }')" "$r"
	done
done | awk '{ print }
	{ n++; split($3, c, "->"); split($4, w, "->"); split($5, j, "->"); split($6, k, "->")
	  lo0 += c[1] < 0.95; lo1 += c[2] < 0.95; w0 += w[1]; w1 += w[2]; j0 += j[1]; j1 += j[2]; k0 += k[1]; k1 += k[2]
	  if (c[1] < 0.95 && c[2] >= 0.95) up++ }
	END { printf "rows %d; below 0.95: %d -> %d (%d reach 0.95 with --resync); wrong spans %d -> %d (joins %d -> %d); kept-w %d -> %d\n",
		n, lo0, lo1, up, w0, w1, j0, j1, k0, k1 }'
