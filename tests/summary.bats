#!/usr/bin/env bats
# mt-summary (the terminal summary of `mt run`/`mt decode`/`mt summary`)
# against mt-ptsim's ground truth: the stack it prints at the trigger (or at
# the end of each thread's trace) must be the true one.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
}

need_cache() {
	[ -d "$C/clean" ] || skip "no mt-ptsim cache (make ptsim-cache)"
}

# stages D SRC OUT: SRC (truth|decode) of the cached run D through decode (or
# the truth's branches), segment, stitch and symbolize, with mt-ptsim's
# hits.mt (the trigger, and each thread's call chain at its end) appended as
# mt does with mt-capture's
stages() {
	local d=$1 src=$2 out=$3
	if [ "$src" = truth ]; then
		cp "$d/truth.mt" "$T/in.mt"
	else
		"$BIN/mt-decode" --buildid-dir "$d/images" -o "$T/dec.mt" "$d/perf.data" 2>/dev/null || true
		"$BIN/mt-cat" -o "$T/in.mt" "$T/dec.mt" "$d/hits.mt"
	fi
	# exit 1: degraded data, output written
	"$BIN/mt-segment" --symfs "$d/images" -i "$T/in.mt" -o "$T/seg.mt" 2>/dev/null || [ $? -eq 1 ]
	"$BIN/mt-stitch" -i "$T/seg.mt" -o "$T/st.mt" 2>/dev/null || [ $? -eq 1 ]
	"$BIN/mt-symbolize" --images "$d/images" -o "$out" "$T/st.mt" 2>/dev/null || [ $? -eq 1 ]
}

# truth_stack D: the true stack from truth-spans.mt (functions, no inline
# frames), at the trigger of truth.mt or at the end of each thread's spans,
# by mtev-semantics' rule (begun by then; not left, or left only by the end
# of the trace): lines "TID DEPTH FUNC"
truth_stack() {
	local trig
	trig=$("$BIN/mt-dump" -k trigger "$1/truth.mt" | sed -n 's/.* time=\([0-9]*\).*/\1/p' | sort -n | tail -1)
	"$BIN/mt-dump" -k span "$1/truth-spans.mt" | awk -v trig="${trig:--1}" '
	function v(k,  i, a) { for (i = 2; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return a[2] } }
	{ n++; tid[n] = v("tid"); dep[n] = v("depth"); b[n] = v("begin") + 0; e[n] = v("end") + 0
	  f[n] = v("func"); oae[n] = v("flags") ~ /open-at-end/
	  if (e[n] > last[tid[n]]) last[tid[n]] = e[n] }
	END {
		for (i = 1; i <= n; i++) {
			t = last[tid[i]]; if (trig >= 0 && trig < t) t = trig
			if (b[i] <= t && (t < e[i] || (t == e[i] && oae[i])))
				printf "%s %s %s\n", tid[i], dep[i], substr(f[i], 3)
		}
	}' | sort -n -k1,1 -k2,2
}

@test "mt-summary: the stack at the trigger equals the truth's (mt-ptsim snapshot: decoded and truth.mt, through every stage)" {
	need_cache
	d="$C/clean/snapshot"
	stages "$d" decode "$T/dec.sym.mt"
	stages "$d" truth "$T/truth.sym.mt"
	"$BIN/mt-summary" -t "$T/dec.sym.mt" > "$T/dec.sum"
	"$BIN/mt-summary" -t "$T/truth.sym.mt" > "$T/truth.sum"
	# the trigger is there, with its function on top of the stack
	grep -q $'^trigger\t.*\tmagic_trace_stop_indicator$' "$T/dec.sum"
	grep $'^stack\t' "$T/dec.sum" | tail -1 | grep -q $'\tmagic_trace_stop_indicator$'
	# the whole stack, names and inline frames included, equals that of truth.mt
	diff <(grep -v '^top' "$T/truth.sum") <(grep -v '^top' "$T/dec.sum")
	# its function frames equal the true call tree's (truth-spans.mt)
	truth_stack "$d" > "$T/want"
	awk -F'\t' '$1 == "stack" && $5 == 0 { print $2, $3, $4 }' "$T/dec.sum" | sort -n -k1,1 -k2,2 > "$T/got"
	[ "$(wc -l < "$T/want")" -ge 5 ]
	diff "$T/want" "$T/got"
}

@test "mt-summary: every clean and window mt-ptsim run, the stack at the end of each thread equals the truth's" {
	need_cache
	n=0
	for v in clean window; do
		for d in "$C/$v"/*/; do
			d=${d%/}
			p=$(basename "$d")
			stages "$d" decode "$T/x.mt"
			"$BIN/mt-summary" -t "$T/x.mt" > "$T/x.sum"
			truth_stack "$d" > "$T/want"
			awk -F'\t' '$1 == "stack" && $5 == 0 { print $2, $3, $4 }' "$T/x.sum" | sort -n -k1,1 -k2,2 > "$T/got"
			[ -s "$T/want" ] || { echo "$v/$p: no true stack"; return 1; }
			# windows too: the frames no branch of the window shows
			# (_start, under a __libc_start_call_main that ends by
			# exit) come from the call chain at the end (hits.mt)
			diff "$T/want" "$T/got" || { echo "$v/$p: stacks differ"; return 1; }
			n=$((n + 1))
		done
	done
	[ "$n" -ge 20 ]
}

@test "mt-summary: the longest calls are the longest complete spans, with their durations, longest first" {
	need_cache
	d="$C/clean/snapshot"
	stages "$d" decode "$T/x.mt"
	"$BIN/mt-summary" -t -n 3 "$T/x.mt" | awk -F'\t' '$1 == "top" { print $3, $4 }' > "$T/got"
	# the same from the dump: spans neither clipped at the start nor open at the end
	"$BIN/mt-dump" -k span "$T/x.mt" | grep -v 'inferred-start\|open-at-end' |
		sed 's/.* begin=\([0-9]*\) end=\([0-9]*\) .*/\1 \2/' | awk '{ print $2 - $1, $1 }' |
		sort -k1,1nr -k2,2n | head -3 > "$T/want"
	[ "$(wc -l < "$T/got")" -eq 3 ]
	diff "$T/want" "$T/got"
	# the human form names the file and line of a function with DWARF
	run "$BIN/mt-summary" "$T/x.mt"
	[ "$status" -eq 0 ]
	[[ "$output" == *"stack at the trigger, outermost first:"* ]]
	[[ "$output" == *"magic_trace_stop_indicator"*"magic_trace.c:"* ]]
	[[ "$output" == *"interesting"*"snapshot.c:"*"called from snapshot.c:"* ]]
}

@test "mt-summary: bad input is one clear line and exit 2" {
	run "$BIN/mt-summary" "$T/nothing"
	[ "$status" -eq 2 ]
	[[ "$output" == "mt-summary: fatal: unable to open $T/nothing"* ]]
	printf 'not mtev' > "$T/bad.mt"
	run "$BIN/mt-summary" "$T/bad.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	printf 'mtev version=1 producer="x" flags=0x2\nspan tid=1 depth=0 begin=1 end=5 func=0x10\nend\n' | "$BIN/mt-undump" > "$T/t.mt"
	head -c -1 "$T/t.mt" > "$T/trunc.mt"
	run "$BIN/mt-summary" "$T/trunc.mt"
	[ "$status" -eq 2 ]
	[[ "$output" == *"truncated"* ]]
	printf 'mtev version=1 producer="x" flags=0x2\nspan tid=1 depth=4294967295 begin=1 end=5 func=0x10\nend\n' | "$BIN/mt-undump" > "$T/deep.mt"
	run "$BIN/mt-summary" "$T/deep.mt"
	[ "$status" -eq 2 ]
	[[ "$output" == *"a span of depth 4294967295"* ]]
	run "$BIN/mt-summary" -n x "$T/t.mt"
	[ "$status" -eq 2 ]
	run "$BIN/mt-summary" --help
	[ "$status" -eq 0 ]
}

@test "mt decode prints the summary and the mt serve line; mt summary DIR prints it again" {
	need_cache
	mkdir -p "$T/cap"
	cp -a "$C/clean/snapshot/perf.data" "$C/clean/snapshot/images" "$T/cap/"
	"$BIN/mt-dump" -k trigger "$C/clean/snapshot/truth.mt" | "$BIN/mt-undump" > "$T/cap/hits.mt"
	MT_STATE_DIR="$T/state" "$BATS_TEST_DIRNAME/../pipelines/mt" decode "$T/cap" 2> "$T/err"
	grep -q "stack at the trigger, outermost first:" "$T/err"
	grep -q "^ *5  magic_trace_stop_indicator " "$T/err"
	grep -q "^mt: look at it offline: mt serve $T/cap/trace.fxt " "$T/err"
	[ "$(cat "$T/state/last-trace")" = "$T/cap/trace.fxt" ]
	run "$BATS_TEST_DIRNAME/../pipelines/mt" summary -n 2 "$T/cap"
	[ "$status" -eq 0 ]
	[[ "$output" == *"magic_trace_stop_indicator"* ]]
	[ "$(grep -c ' (at +' <<< "$output")" -eq 2 ]
	run "$BATS_TEST_DIRNAME/../pipelines/mt" summary
	[ "$status" -eq 2 ]
}
