#!/usr/bin/env bats
# mt-segment, mt-stitch and mt-compare against mt-ptsim's ground truth, on
# every program of the cache (tests/.cache/ptsim, built by `make test`).
# Figures and the known differences: docs/segment.md.
load lib/branchin

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
	[ -d "$C/clean" ] || skip "no mt-ptsim cache (make ptsim-cache)"
}

# check VARIANT PROG SOURCE STAGES COMPARE-OPTIONS...: run SOURCE (truth|decode)
# through STAGES (seg|stitch) and compare with the truth; fails with the summary
check() {
	local v=$1 p=$2 src=$3 stages=$4
	shift 4
	local d="$C/$v/$p"
	branch_input "$d" "$src" "$T/in.mt"
	[ "$src" = truth ] || [ -s "$T/in.mt" ] || { echo "$v/$p: mt-decode wrote nothing"; return 1; }
	# the run's own images (as mt run passes its capture's): the vdso's
	# symbols are there, not in whatever ~/.debug holds
	"$BIN/mt-segment" $SEGOPTS --images "$d/images" -i "$T/in.mt" -o "$T/seg.mt" 2>/dev/null || { echo "$v/$p: mt-segment failed"; return 1; }
	if [ "$stages" = stitch ]; then
		"$BIN/mt-stitch" -i "$T/seg.mt" -o "$T/out.mt" 2>/dev/null || { echo "$v/$p: mt-stitch failed"; return 1; }
	else
		mv "$T/seg.mt" "$T/out.mt"
	fi
	"$BIN/mt-compare" "$@" "$d/truth-spans.mt" "$T/out.mt" > "$T/cmp.txt" ||
		{ echo "$v/$p $src $stages: $(tail -1 "$T/cmp.txt")"; grep -m5 '^wrong:' "$T/cmp.txt"; return 1; }
}

EXACT="--min-precision 1 --min-recall 1 --max-wrong 0"

# Stripped libraries (libc, ld.so) get their function symbols from the
# build-id debug files of libc6-dbg (tools/deps.sh), libgcc_s and libstdc++
# from their .eh_frame FDEs: the truth (mt-ptsim) and mt-segment use the same
# elfinfo, so every program is exact with and without the call-target
# fallback (--no-call-targets).
@test "truth.mt of every clean and noretcomp run: every true span exactly, root frames included" {
	n=0
	for v in clean noretcomp; do
		for d in "$C/$v"/*/; do
			p=$(basename "$d")
			SEGOPTS=--no-call-targets check $v $p truth seg $EXACT
			SEGOPTS= check $v $p truth seg $EXACT
			n=$((n + 1))
		done
	done
	[ "$n" -ge 10 ]
}

@test "mt-decode output of every clean and noretcomp run: every true span exactly" {
	for v in clean noretcomp; do
		for d in "$C/$v"/*/; do
			SEGOPTS= check $v "$(basename "$d")" decode seg $EXACT
		done
	done
}

# exception: the window (the last 10000 instructions) begins inside libgcc's
# unwinder, under 6 frames (inner x5, __cxa_throw) that the landing pad ends
# without any branch of theirs in the window: no trace of the window shows
# them (mt-compare drops them, unwound=6), and the unwinder's frames cannot
# get their true depths (min-depth, judged apart below).  Every other run
# has no such frame (unwound=0: the rule hides nothing else).
@test "--window snapshots (truth.mt and decoded): every true span exactly, root frames included" {
	n=0
	for d in "$C/window"/*/; do
		p=$(basename "$d")
		u=0
		[ "$p" = exception ] && u=6
		SEGOPTS= check window $p truth seg $EXACT
		grep -q " unwound=$u\$" "$T/cmp.txt" || { echo "$p truth: $(tail -1 "$T/cmp.txt")"; return 1; }
		SEGOPTS= check window $p decode seg $EXACT
		grep -q " unwound=$u\$" "$T/cmp.txt" || { echo "$p decode: $(tail -1 "$T/cmp.txt")"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -ge 10 ]
}

# Where a window begins depends on the run (its environment moves a few
# instructions), so one window a program is one draw.  This walks the
# window's start across consecutive sizes until it has begun right after a
# return (or a system call's return) at that return's own timestamp: the
# frame that returned ended at the window's first time, yet before its first
# instruction; mt-ptsim's truth leaves it out (time slots, docs/ptsim.md),
# the clean truth shows the return.  Every window walked is exact; signal
# must meet 3 such windows, tailcall 1 (a CI run once missed one span so).
@test "--window starts walked one instruction at a time (signal, tailcall): exact at every start, frames ended just before the window are not in its truth" {
	for p in signal tailcall; do
		need=1
		[ $p = signal ] && need=3
		"$BIN/mt-dump" -k branch "$C/clean/$p/truth.mt" | grep -E ' type=(return|sysret) ' > "$T/ret.txt"
		mkdir -p "$T/c/walk"
		found=0 w=10000
		while [ $found -lt $need ] && [ $w -lt 11000 ]; do
			rm -rf "$T/c/walk/$p"
			"$BIN/mt-ptsim" --replay "$C/runs/$p.run" --psb-period 2048 --window $w \
				-o "$T/c/walk/$p" 2>/dev/null
			C="$T/c" SEGOPTS= check walk $p truth seg $EXACT || { echo "window $w"; return 1; }
			s=$("$BIN/mt-dump" -k branch "$T/c/walk/$p/truth.mt" | head -1)
			[[ "$s" == *" type=trace-start "* ]]
			t=${s#* time=}; t=${t%% *}
			grep -q " time=$t .* to=${s##* to=}\$" "$T/ret.txt" && found=$((found + 1))
			w=$((w + 1))
		done
		echo "# $p: $found of $need found by window $w" >&3
		[ $found -ge $need ]
	done
}

# glibc's mempcpy (the cpu's variant: __mempcpy_avx512_unaligned_erms here)
# sets its result and jumps into memcpy's body.  A window that begins there
# shows memcpy's code under the frame mempcpy's call made: no trace of it can
# name mempcpy, and mt-compare (the run's symbols, from DIR/images) judges
# the frame by the code it runs.  The windows are found from the clean
# truth's jumps into a mempcpy entry: the window size whose trace-start falls
# at that time (mt-ptsim's clock: a cycle an instruction, 500 a system call),
# then the sizes around it.
@test "--window beginning in memcpy's body under a mempcpy frame: exact, that frame named by the code it runs" {
	p=tailcall
	prog="${MT_BUILD:-$BATS_TEST_DIRNAME/../build}/programs/$p"
	nm "$prog" | awk '$3 ~ /^__mempcpy_/ { print $1 }' | sed 's/^0*/0x/' > "$T/mp.txt"
	[ -s "$T/mp.txt" ] || skip "no __mempcpy_* in this libc"
	"$BIN/mt-dump" -k branch "$C/clean/$p/truth.mt" | awk 'NR == FNR { m[$1] = 1; next }
		{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
		v["to"] in m { print v["time"] }' "$T/mp.txt" - > "$T/times.txt"
	[ -s "$T/times.txt" ]
	mkdir -p "$T/c/mp"
	first() { "$BIN/mt-dump" -k branch "$T/c/mp/$p/truth.mt" | head -1 | sed 's/.* time=\([0-9]*\) .*/\1/'; }
	named=0
	while read -r t; do
		# the size whose window begins at t
		w=10000
		for i in 1 2 3 4 5 6; do
			rm -rf "$T/c/mp/$p"
			"$BIN/mt-ptsim" --replay "$C/runs/$p.run" --psb-period 2048 --window $w -o "$T/c/mp/$p" 2>/dev/null
			w=$(awk -v w=$w -v s="$(first)" -v t=$t 'BEGIN { n = w + (s - t) * 2.2; printf "%d\n", n < 1 ? 1 : n }')
		done
		for k in $(seq $((w - 60)) $((w + 60))); do
			rm -rf "$T/c/mp/$p"
			"$BIN/mt-ptsim" --replay "$C/runs/$p.run" --psb-period 2048 --window $k -o "$T/c/mp/$p" 2>/dev/null
			C="$T/c" SEGOPTS= check mp $p truth seg $EXACT || { echo "window $k"; return 1; }
			grep -q "named by the code they run: 1)" "$T/cmp.txt" && named=$((named + 1))
		done
		[ $named -gt 0 ] && break
	done < "$T/times.txt"
	echo "# windows named by their code: $named" >&3
	[ $named -gt 0 ]
}

@test "--window exception: the window begins inside the unwinder under 6 frames no branch shows: judged unseen (--count-unwound: missed), the unwinder's frames flagged min-depth, no wrong span" {
	for src in truth decode; do
		SEGOPTS= check window exception $src stitch $EXACT
		grep -q " unwound=6\$" "$T/cmp.txt"
		"$BIN/mt-dump" -k span "$T/out.mt" | grep -q 'min-depth'
		# counted, the 6 unknowable frames (of 200) are all that is missed
		"$BIN/mt-compare" --count-unwound -v --min-precision 1 --max-wrong 0 \
			"$C/window/exception/truth-spans.mt" "$T/out.mt" > "$T/cmp2.txt"
		grep -q " truth=200 .* unwound=0\$" "$T/cmp2.txt"
		[ "$(grep -c '^missed:' "$T/cmp2.txt")" -eq 6 ]
		# the same 6: suspended when the window began, ended together
		[ "$(grep '^missed:' "$T/cmp2.txt" | sed 's/.* end=\([0-9]*\).*/\1/' | sort -u | wc -l)" -eq 1 ]
	done
}

# Share of the true frame-time that lies inside the decoder's gaps (from the
# fault, or the last PSB before a corrupt byte, to the next PSB) in frames
# that begin or end there: no trace shows where they begin or end (frames
# live across the whole gap are not counted: mt-stitch can join them).
# Reads $T/in.mt (decoded) and the truth.
gap_share() {
	{ "$BIN/mt-dump" -k gap "$T/in.mt"; "$BIN/mt-dump" -k span "$1/truth-spans.mt"; } | awk '
	function v(k,  i, a) { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return a[2] } }
	$1 == "gap" { n++; gt[n] = v("tid"); gb[n] = v("begin"); ge[n] = v("end"); next }
	$1 == "span" { t = v("tid"); b = v("begin"); e = v("end"); tot += e - b
		for (i = 1; i <= n; i++) if (gt[i] == t && !(b <= gb[i] && e >= ge[i])) {
			lo = b > gb[i] ? b : gb[i]; hi = e < ge[i] ? e : ge[i]
			if (hi > lo) in_gap += hi - lo } }
	END { printf "%.4f\n", tot ? in_gap / tot : 0 }'
}

# The fallback for stripped libraries without debug files: function starts
# and sizes from .eh_frame FDEs (libcommon/elfinfo.h), for the truth and for
# mt-segment alike (MT_DEBUGINFO_DIR= hides libc6-dbg's files from both).
# The runs are re-synthesized from the cached step logs (no stepping).
@test "stripped libraries without debug files (.eh_frame function starts): clean exact, windows as known" {
	for p in dynamic sym_inline exception; do
		for w in "" "--window 10000"; do
			rm -rf "$T/nd"
			MT_DEBUGINFO_DIR= "$BIN/mt-ptsim" --replay "$C/runs/$p.run" --psb-period 2048 $w -o "$T/nd" 2>/dev/null
			for o in "" --no-call-targets; do
				MT_DEBUGINFO_DIR= "$BIN/mt-segment" $o --images "$T/nd/images" -i "$T/nd/truth.mt" -o "$T/nd.mt" 2>/dev/null
				run "$BIN/mt-compare" "$T/nd/truth-spans.mt" "$T/nd.mt"
				echo "$p ${w:-clean} ${o:-default}: ${lines[-1]}"
				case "$p/$w" in
				exception/--window*) ;; # the unwinder window: see above
				dynamic/--window*)
					# ld.so's _start (assembly, no FDE, no symbol) is the
					# window's root, revealed by a return into it: its
					# entry is unknowable, func = the address seen (1 span)
					[[ "${lines[-1]}" == *" wrong=1 "* ]] ;;
				*) [[ "${lines[-1]}" == *"precision=1.000000 recall=1.000000 "*" wrong=0 "* ]] ;;
				esac
			done
		done
	done
}

# every fault kind, every program: after mt-stitch no wrong span and >= 95%
# of the true frame-time covered.  A run below 95% passes only when the gap
# itself holds more than 4.5% of its frame-time (these runs are short: 8-18 KB
# of PT, and a PSB interval is 2 KB, perf's smallest psb_period), with >= all
# that lies outside the gap less 0.5%; or more than 3% with >= all that lies
# outside it less 2.5%: mt-compare credits no time inside a gap to a frame
# mt-stitch did not join across it (one seen returning at that depth before:
# docs/stitch.md), fnptr's drop/corrupt/truncate: 0.947, gap 0.0325, three
# such frames (joined, one of the seven was two calls: 1 wrong span); or more
# than 3% with >= all outside it less 3%: dynamic's drop/corrupt/truncate
# (0.935, gap 0.0376; the cache's runs are the same in every clone since
# they step in one environment) cut ld.so's relocation loop, whose callee
# (live across the gap) is called once per object: one call or two, no
# branch says, and mt-stitch leaves it unjoined (0.027 lost outside the
# gap).  The output names each such run.
# Before mt-stitch: bench/fidelity.sh, and the last test.
faults() {
	local v=$1 p cov share
	n=0
	for d in "$C/$v"/*/; do
		p=$(basename "$d")
		SEGOPTS= check $v $p decode stitch --max-wrong 0
		cov=$(tail -1 "$T/cmp.txt" | sed 's/.* coverage=\([0-9.]*\) .*/\1/')
		n=$((n + 1))
		awk -v c="$cov" 'BEGIN { exit !(c >= 0.95) }' && continue
		share=$(gap_share "$d")
		echo "# $v/$p: coverage $cov < 0.95; the gap holds $share of the true frame-time" >&3
		awk -v c="$cov" -v s="$share" 'BEGIN { exit !((s > 0.045 && c >= 1 - s - 0.005) ||
			(s > 0.03 && c >= 1 - s - 0.03)) }' ||
			{ echo "$v/$p: coverage $cov, gap share $share"; return 1; }
	done
	[ "$n" -ge 10 ]
}

@test "overflow: after mt-stitch >= 95% of true frame-time covered and no wrong span, every program" {
	faults overflow
}

@test "drop: after mt-stitch >= 95% of true frame-time covered and no wrong span" {
	faults drop
}

@test "corrupt: after mt-stitch >= 95% of true frame-time covered and no wrong span" {
	faults corrupt
}

@test "truncate: after mt-stitch >= 95% of true frame-time covered and no wrong span" {
	faults truncate
}

# How much a fault costs before stitching depends on where it lands (the
# overflow in recursion's run loses 4.5 %, in signal's 75 %): most runs lose
# more than 5 %, and mt-stitch gives every run back at least what it had.
@test "injected faults: before mt-stitch most of the same traces lose more than 5 % of their frame-time; mt-stitch gives it back" {
	n=0 lost=0
	for d in "$C/overflow"/*/; do
		p=$(basename "$d")
		SEGOPTS= check overflow $p decode seg
		cov=$(tail -1 "$T/cmp.txt" | sed 's/.* coverage=\([0-9.]*\) .*/\1/')
		SEGOPTS= check overflow $p decode stitch --min-coverage 0.95 --max-wrong 0
		cov2=$(tail -1 "$T/cmp.txt" | sed 's/.* coverage=\([0-9.]*\) .*/\1/')
		echo "$p: before $cov after $cov2"
		awk -v a="$cov" -v b="$cov2" 'BEGIN { exit !(b >= a) }'
		awk -v a="$cov" 'BEGIN { exit !(a < 0.95) }' && lost=$((lost + 1))
		n=$((n + 1))
	done
	echo "$lost of $n lose more than 5 % before mt-stitch"
	[ "$n" -ge 10 ]
	[ $((2 * lost)) -gt "$n" ]
}

@test "mt-stitch spilling to a temporary file (--mem-limit 256) writes the same bytes as in memory; mt-segment --stitch the same records" {
	n=0
	for v in overflow corrupt; do
		for p in recursion threads dynamic exception; do
			d="$C/$v/$p"
			[ -d "$d" ] || continue
			"$BIN/mt-decode" --buildid-dir "$d/images" -o "$T/in.mt" "$d/perf.data" 2>/dev/null || true
			"$BIN/mt-segment" -i "$T/in.mt" -o "$T/seg.mt" 2>/dev/null
			"$BIN/mt-stitch" --stats -i "$T/seg.mt" -o "$T/a.mt" 2>"$T/a.err"
			TMPDIR="$T" "$BIN/mt-stitch" --mem-limit 256 -i "$T/seg.mt" -o "$T/b.mt" 2>/dev/null
			cmp "$T/a.mt" "$T/b.mt" || { echo "$v/$p: spilled output differs"; return 1; }
			# mt-segment --stitch: the same records, header aside
			TMPDIR="$T" "$BIN/mt-segment" --stitch --mem-limit 1K -i "$T/in.mt" -o "$T/c.mt" 2>/dev/null
			cmp <("$BIN/mt-dump" "$T/a.mt" | sed 1d) <("$BIN/mt-dump" "$T/c.mt" | sed 1d) ||
				{ echo "$v/$p: mt-segment --stitch differs from mt-segment | mt-stitch"; return 1; }
			grep -q 'gap_spans=[1-9]' "$T/a.err" || { echo "$v/$p: no gap to join"; return 1; }
			n=$((n + 1))
		done
	done
	[ "$n" -ge 6 ]
	# the temporary files are gone
	[ -z "$(ls "$T" | grep mt-stitch)" ]
}

# Debian's python3.11 is stripped: its cold parts have an FDE and no name.
# A switch's jump table in a function's hot part lands in its own cold part
# (an indirect jmp into code no frame's range holds).  Before: taken for a
# longjmp into a caller above the root, the whole stack re-rooted, every
# span wrong (the sixth probe corpus' py-valerr: 12,596 wrong spans).
@test "an indirect jmp (a switch's jump table) into the cold part of a stripped frame's function: no frame re-rooted, exact" {
	[ -x /usr/bin/python3.11 ] || skip "no /usr/bin/python3.11"
	"$BIN/mt-ptsim" --max-insns 300000 --start-at PyRun_SimpleStringFlags -o "$T/py" -- /usr/bin/python3.11 -c \
		"n=[0];exec(\"for i in range(300):\n try: int('x%d'%i)\n except ValueError: n[0]+=1\");print(n[0])" \
		> /dev/null 2> "$T/ptsim.err" || [ $? -eq 1 ]
	"$BIN/mt-decode" --buildid-dir "$T/py/images" -o "$T/d.mt" "$T/py/perf.data"
	run "$BIN/mt-segment" --stats --images "$T/py/images" -i "$T/d.mt" -o "$T/s.mt"
	echo "$output"
	[ "$status" -eq 0 ]
	# one segment: the jump neither re-roots the stack nor begins a new one
	[[ "$output" == *" segments=1 "* ]]
	"$BIN/mt-stitch" -i "$T/s.mt" -o "$T/t.mt"
	"$BIN/mt-compare" --max-wrong 0 --min-precision 1 --min-coverage 0.999 "$T/py/truth-spans.mt" "$T/t.mt" > "$T/cmp.txt" ||
		{ tail -1 "$T/cmp.txt"; return 1; }
}

# mt-segment's DWARF cache (libcommon/dwcov.c: what it read of each file with
# DWARF, by build-id, used while that file is the same one).
@test "the DWARF cache: the bytes of --no-cache when written, read back, cut, changed in place or holding another file's entry; --no-cache writes none; XDG_CACHE_HOME is the default" {
	local d="$C/clean/exception"
	[ -d "$d" ] || skip "no clean/exception run"
	branch_input "$d" decode "$T/in.mt"
	seg() { "$BIN/mt-segment" "$@" --images "$d/images" -i "$T/in.mt" 2>/dev/null; }
	XDG_CACHE_HOME="$T/x" seg --no-cache -o "$T/a.mt"
	[ -s "$T/a.mt" ]
	[ ! -e "$T/x" ]
	seg --cache-dir "$T/c" -o "$T/b.mt"
	cmp "$T/a.mt" "$T/b.mt"
	# the program (-g) and libc's separate debug file (libc6-dbg) at least
	[ "$(ls "$T/c/dwcov" | wc -l)" -ge 2 ]
	[ -z "$(ls "$T/c/dwcov" | grep tmp)" ]
	cp -r "$T/c" "$T/c0"
	seg --cache-dir "$T/c" -o "$T/b.mt"
	cmp "$T/a.mt" "$T/b.mt"
	diff -r "$T/c0" "$T/c"
	# cut by a byte: not read, made again
	for f in "$T"/c/dwcov/*; do truncate -s -1 "$f"; done
	seg --cache-dir "$T/c" -o "$T/b.mt"
	cmp "$T/a.mt" "$T/b.mt"
	diff -r "$T/c0" "$T/c"
	# a byte of the largest entry changed in place, in the middle and the
	# last (the top byte of its last boundary: the order still holds, only
	# the sum tells): read again
	big=$(ls -S "$T"/c/dwcov/* | head -1)
	for off in $(( $(wc -c < "$big") / 2 )) $(( $(wc -c < "$big") - 1 )); do
		byte=$(od -An -tu1 -j "$off" -N1 "$big" | tr -d ' ')
		printf "\\$(printf %o $((255 - byte)))" | dd of="$big" bs=1 seek="$off" conv=notrunc 2>/dev/null
		! cmp -s "$big" "$T/c0/dwcov/$(basename "$big")"
		seg --cache-dir "$T/c" -o "$T/b.mt"
		cmp "$T/a.mt" "$T/b.mt"
		diff -r "$T/c0" "$T/c"
	done
	# the largest entry (libc's) under every build-id: its key names another
	# file, so each is read again
	big=$(ls -S "$T"/c/dwcov/* | head -1)
	for f in "$T"/c/dwcov/*; do [ "$f" = "$big" ] || cp "$big" "$f"; done
	seg --cache-dir "$T/c" -o "$T/b.mt"
	cmp "$T/a.mt" "$T/b.mt"
	diff -r "$T/c0" "$T/c"
	XDG_CACHE_HOME="$T/x" seg -o "$T/b.mt"
	cmp "$T/a.mt" "$T/b.mt"
	diff -r "$T/c0/dwcov" "$T/x/mt/dwcov"
}
