#!/usr/bin/env bats
# mt-stitch across a gap joins a frame only when nothing says it may have
# returned and been called again inside the gap (docs/stitch.md), judged by
# mt-compare's honest score against mt-ptsim's truth (a span joined over two
# true activations is wrong: wrong_joins).  Faulted recordings replayed from
# the cached step logs (tests/.cache/ptsim/runs, `make ptsim-cache`).
# Measured over the corpus' faults: bench/resync.sh, docs/fidelity.md.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
	[ -d "$C/runs" ] || skip "no mt-ptsim cache (make ptsim-cache)"
}

# stitched PROG FAULT: the replay's spans after mt-stitch, scored
stitched() {
	rm -rf "$T/d"
	"$BIN/mt-ptsim" --replay "$C/runs/$1.run" --psb-period 2048 --inject "$2" -o "$T/d" 2>/dev/null || true
	"$BIN/mt-decode" --buildid-dir "$T/d/images" -o "$T/dec.mt" "$T/d/perf.data" 2>/dev/null || true
	"$BIN/mt-segment" -i "$T/dec.mt" -o "$T/seg.mt"
	"$BIN/mt-stitch" --stats -i "$T/seg.mt" -o "$T/st.mt" 2>"$T/st.err"
	run "$BIN/mt-compare" "$T/d/truth-spans.mt" "$T/st.mt"
	echo "$1 $2: ${lines[-1]} / $(cat "$T/st.err")"
}

# Where a drop lands depends on the run (a fresh clone's mt-ptsim run has
# other path lengths, so other instruction counts), so each program is
# faulted at many positions: none may join over two calls (wrong_joins=0,
# wrong=0), and the rules must have split a frame somewhere (split=N > 0).
# (The cached runs this was written on joined over two calls without the
# rules: fnptr drop@30% 4 (recursive frames), dynamic drop@50% 1 (a loop's
# callee), recursion drop@78-82% 118-126 (the recursive frames; without the
# call-site rule still 1: down(300)'s first call from main joined with its
# second, from another call site).)
scan() { # PROG [POSITION...]
	local prog=$1 p splits=0 k n=0
	shift
	[ $# -gt 0 ] || set -- 20 25 30 35 40 45 50 55 60 65 70 75 80
	for p; do
		stitched "$prog" drop@$p%:64
		[[ "${lines[-1]}" == *" wrong_joins=0 wrong=0 "* ]] || return 1
		k=$(sed -n 's/.* split=\([0-9]*\).*/\1/p' "$T/st.err")
		splits=$((splits + ${k:-0}))
		n=$((n + 1))
	done
	echo "$prog: split $splits frames over $n drops"
	[ "$splits" -gt 0 ]
}

@test "stitch: a loop's callee is not joined across a gap (dynamic, drops at 20-80 %)" {
	scan dynamic
}

@test "stitch: a recursive frame is not joined across a gap (fnptr, drops at 20-80 %)" {
	scan fnptr
}

# recursion.c: main calls down(300) three times, from three call sites; the
# calls lie in the last fifth of the run
@test "stitch: a recursion, nor its outermost frame when its caller calls it from another site too (recursion, drops at 74-86 %)" {
	scan recursion 74 76 78 80 82 84 86
}
