#!/bin/sh
# What resynchronizing before the next PSB (docs/decode.md) gains on the
# corpus faults: every faulted configuration of bench/corpus.sh's output
# (run its build, step and variants stages first) decoded without and with
# `mt-decode --resync`, each through mt-segment | mt-stitch and scored by
# mt-compare against the truth (its default, honest window): frame-time
# coverage, wrong spans, kept branches the truth has not (kept-w; the goal is
# 0) and kept / true branches, without -> with --resync.
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

# one decode through the pipeline: "coverage wrong kept-w kept truth"
score() {
	d=$1
	shift
	$NICE "$B/mt-decode" "$@" --buildid-dir "$d/images" -o "$T/dec.mt" "$d/perf.data" 2>/dev/null
	k=$("$B/mt-compare" --kept-branches "$d/truth.mt" "$T/dec.mt" 2>/dev/null | tail -1)
	$NICE "$B/mt-segment" -i "$T/dec.mt" -o "$T/seg.mt" 2>/dev/null
	$NICE "$B/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt" 2>/dev/null
	l=$("$B/mt-compare" "$d/truth-spans.mt" "$T/st.mt" 2>/dev/null | tail -1)
	get() { printf '%s' "$2" | sed -n "s/.*[ :]$1=\\([^ ]*\\).*/\\1/p"; }
	echo "$(get coverage "$l") $(get wrong "$l") $(get wrong "$k") $(get kept "$k") $(get truth "$k")"
}

printf '%-15s %-12s %17s %9s %7s %19s\n' program config coverage wrong kept-w kept/truth
progs=${*:-$(cd "$O" && for d in */whole; do [ -d "$d" ] && dirname "$d"; done)}
for p in $progs; do
	for d in "$O/$p"/*@*; do
		[ -f "$d/truth-spans.mt" ] || continue
		set -- $(score "$d")
		oc=$1 ow=$2 ok=$4
		set -- $(score "$d" --resync)
		printf '%-15s %-12s %8s->%8s %4s->%4s %7s %9s->%9s\n' "$p" "$(basename "$d")" "$oc" "$1" \
			"$ow" "$2" "$3" "$ok" "$4/$5"
	done
done
