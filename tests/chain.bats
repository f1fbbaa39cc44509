#!/usr/bin/env bats
# The frames older than a snapshot (issue 15, item 9; docs/exactness.md, "The
# frames older than the window"): the call chain at the trigger (hits.mt, a
# sample record flagged chain) joined to the trace's stack by mt-segment.
# Judged by mt-compare --absolute-depth against mt-ptsim's truth, which knows
# the whole stack from the first instruction (its hits.mt holds the chain a
# DWARF unwind at each thread's end gives).
load lib/branchin

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
	[ -d "$C/window" ] || skip "no mt-ptsim cache (make ptsim-cache)"
}

# spans D SRC HITS OUT: SRC (truth|decode) of run D, with HITS (a file or
# "none") appended as mt does, through mt-segment and mt-stitch into OUT;
# mt-segment's stderr in $T/seg.err
spans() {
	local d=$1 src=$2 hits=$3 out=$4
	branch_input "$d" "$src" "$T/in.mt"
	if [ "$hits" != none ]; then
		"$BIN/mt-cat" -o "$T/in2.mt" "$T/in.mt" "$hits"
		mv "$T/in2.mt" "$T/in.mt"
	fi
	"$BIN/mt-segment" --stats --images "$d/images" -i "$T/in.mt" -o "$T/seg.mt" 2> "$T/seg.err"
	"$BIN/mt-stitch" -i "$T/seg.mt" -o "$out" 2>/dev/null
}

wrong() { sed -n 's/.* wrong=\([0-9]*\) .*/\1/p' "$1" | tail -1; }

@test "windows with the trigger's call chain: 0 wrong spans with --absolute-depth, every frame down to _start" {
	n=0 before=0 added=0
	for d in "$C"/window/*/; do
		d=${d%/}
		p=$(basename "$d")
		# traced from main (--start-at): its truth knows no frame below
		# __libc_start_call_main, so its root is not _start (its window,
		# which begins inside the C++ unwinder, is judged in
		# segment-ptsim.bats: min-depth frames, docs/exactness.md)
		[ "$p" = exception ] && continue
		[ -s "$d/hits.mt" ] || { echo "$p: no hits.mt"; return 1; }
		for src in truth decode; do
			spans "$d" $src "$d/hits.mt" "$T/out.mt"
			grep -q ' chains_unjoined=0 ' "$T/seg.err" || { echo "$p $src: $(cat "$T/seg.err")"; return 1; }
			"$BIN/mt-compare" -b "$d/truth.mt" --absolute-depth --max-wrong 0 "$d/truth-spans.mt" \
				"$T/out.mt" > "$T/cmp.txt" ||
				{ echo "$p $src: $(tail -1 "$T/cmp.txt")"; grep -m5 '^wrong:' "$T/cmp.txt"; return 1; }
			# the outer frames the chain added are flagged (none when
			# the window's returns revealed every frame: dynamic)
			k=$(sed -n 's/.* chain_frames=\([0-9]*\) .*/\1/p' "$T/seg.err")
			added=$((added + k))
			[ "$("$BIN/mt-dump" -k span "$T/out.mt" | grep -c 'flags=inferred-start,open-at-end,callchain')" -eq "$k" ] ||
				{ echo "$p $src: not $k spans flagged callchain"; return 1; }
		done
		# the main thread's root is _start (named from the images)
		"$BIN/mt-symbolize" --images "$d/images" -o "$T/sym.mt" "$T/out.mt" 2>/dev/null || [ $? -eq 1 ]
		pid=$("$BIN/mt-dump" -k process "$d/truth.mt" | sed -n 's/^process pid=\([0-9]*\) .*/\1/p')
		root=$("$BIN/mt-dump" -k span "$T/sym.mt" | grep "^span tid=$pid depth=0 " | grep -v inline | tail -1)
		[[ "$root" == *'name="_start"'* ]] || { echo "$p: root $root"; return 1; }
		# without the chain the same window is wrong at absolute depths
		spans "$d" decode none "$T/out0.mt"
		"$BIN/mt-compare" -b "$d/truth.mt" --absolute-depth "$d/truth-spans.mt" "$T/out0.mt" > "$T/cmp0.txt" || true
		before=$((before + $(wrong "$T/cmp0.txt")))
		# mt-compare's default (outer frames no trace sees set aside)
		# sets the chain's frames aside too: the same score either way
		a=$("$BIN/mt-compare" -b "$d/truth.mt" "$d/truth-spans.mt" "$T/out.mt" | tail -1)
		b=$("$BIN/mt-compare" -b "$d/truth.mt" "$d/truth-spans.mt" "$T/out0.mt" | tail -1)
		[ "$a" = "$b" ] || { echo "$p: default score with the chain: $a; without: $b"; return 1; }
		n=$((n + 1))
	done
	echo "programs $n, outer frames added $added, wrong spans without the chain $before"
	[ "$n" -ge 10 ]
	[ "$added" -gt 0 ]
	[ "$before" -gt 0 ]
}

@test "a chain that does not match the trace's stack adds nothing, and says so once" {
	d="$C/window/recursion"
	spans "$d" decode none "$T/plain.mt"
	cp "$T/seg.mt" "$T/plain.seg.mt"
	# the chain with its second return address replaced by its last one
	# (a return address into _start): the frame below the top is then not
	# the function the trace shows there
	"$BIN/mt-dump" "$d/hits.mt" > "$T/h.txt"
	grep -q '^sample .* flags=1$' "$T/h.txt"
	awk '/^sample/ { split($0, a, "ips="); split(a[2], b, " "); n = split(b[1], ip, ",");
		ip[3] = ip[n]; s = ip[1]; for (i = 2; i <= n; i++) s = s "," ip[i];
		$0 = a[1] "ips=" s " " b[2] } { print }' "$T/h.txt" > "$T/bad.txt"
	! diff -q "$T/h.txt" "$T/bad.txt" >/dev/null
	"$BIN/mt-undump" "$T/bad.txt" > "$T/bad.mt"
	spans "$d" decode "$T/bad.mt" "$T/bad.out.mt"
	grep -q ' chains=1 chains_joined=0 chains_unjoined=1 chains_sampled=0 chain_frames=0 ' "$T/seg.err"
	[ "$(grep -c 'could not be joined' "$T/seg.err")" -eq 1 ]
	# nothing added: the same spans as without a chain
	cmp <("$BIN/mt-dump" -k span "$T/plain.seg.mt") <("$BIN/mt-dump" -k span "$T/seg.mt")
	# and the intact chain does add frames to that run
	spans "$d" decode "$d/hits.mt" "$T/good.mt"
	grep -q ' chains_joined=1 chains_unjoined=0 chains_sampled=0 chain_frames=[1-9]' "$T/seg.err"
}

@test "the chain sample's flags survive mt-dump | mt-undump, and a reader without them sees a plain sample" {
	d="$C/window/threads"
	"$BIN/mt-dump" "$d/hits.mt" > "$T/h.txt"
	[ "$(grep -c '^sample .* flags=1$' "$T/h.txt")" -ge 2 ]
	"$BIN/mt-undump" "$T/h.txt" | cmp - "$d/hits.mt"
}

# A trigger inside the window (in PT mode the thread runs on after the
# breakpoint until the snapshot): the chain joins the stack live at its time.
# The chain is made from the truth's call tree at a time mid-window (the top
# frame's entry, then each frame's call site + 1: a return address minus 1
# lies in the caller, which is all the join looks at).
@test "a chain from the middle of the window joins the stack live then: 0 wrong spans with --absolute-depth" {
	d="$C/window/fnptr"
	b=$("$BIN/mt-dump" -k branch "$d/truth.mt" | sed -n 's/.* time=\([0-9]*\) .*/\1/p' | sort -n | uniq |
		awk '{ a[NR] = $1 } END { print a[int(NR / 2) + 1] }')
	t=$((b - 1)) # after every event of the previous instant
	last=$("$BIN/mt-dump" -k branch "$d/truth.mt" | sed -n 's/.* time=\([0-9]*\) .*/\1/p' | sort -n | tail -1)
	[ "$t" -lt "$last" ]
	pid=$("$BIN/mt-dump" -k process "$d/truth.mt" | sed -n 's/^process pid=\([0-9]*\) .*/\1/p')
	set -- $("$BIN/mt-dump" -k span "$d/truth-spans.mt" | awk -v t=$t -v pid=$pid '
	function v(k,  i, a) { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return a[2] } }
	v("tid") == pid && v("begin") <= t && t < v("end") && v("func") != "0x0" {
		dep = v("depth"); f[dep] = v("func"); cs[dep] = v("callsite"); if (dep > top) top = dep }
	END { print f[top]; for (k = top; k >= 1; k--) print cs[k] }')
	[ $# -ge 4 ]
	s=$1
	shift
	for c in "$@"; do s="$s,$(printf '0x%x' $((c + 1)))"; done
	echo "sample pid=$pid tid=$pid time=$t ips=$s flags=1" > "$T/mid.txt"
	cat "$T/mid.txt"
	"$BIN/mt-undump" "$T/mid.txt" > "$T/mid.mt"
	spans "$d" decode "$T/mid.mt" "$T/out.mt"
	grep -q ' chains_joined=1 chains_unjoined=0 chains_sampled=0 chain_frames=[1-9]' "$T/seg.err"
	"$BIN/mt-compare" -b "$d/truth.mt" --absolute-depth --max-wrong 0 --min-recall 1 \
		"$d/truth-spans.mt" "$T/out.mt"
}
