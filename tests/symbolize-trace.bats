#!/usr/bin/env bats
# mt-symbolize --trace: mt-write's work in the symbolizer's process
# (docs/write.md, "In mt-symbolize").  The judge is the pipe it replaces,
# `mt-symbolize | mt-write` on the same input: the same trace bytes, the
# same warnings, the same exit status; and a real Perfetto reading the
# one-process trace (tests/perfetto/tp.js), as tests/write.bats reads mt-write's.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

load perfetto/lib

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	C="$BATS_TEST_DIRNAME/.cache/ptsim"
	T="$BATS_TEST_TMPDIR"
	export XDG_CACHE_HOME="$T/xdg"
}

# same_as_pipe NAME IN.mt SYMOPTS WRITEOPTS TRACEOPTS: the pipe (mt-write
# WRITEOPTS) and the one process (--trace TRACEOPTS: the same options as
# mt-symbolize spells them) on IN.mt; fails naming NAME and what differs
same_as_pipe() {
	local name=$1 in=$2 sopts=$3 wopts=$4 topts=$5 rs=0 rw=0 rf=0
	"$BIN/mt-symbolize" $sopts -o "$T/sym.mt" "$in" 2>"$T/sym.err" || rs=$?
	[ "$rs" -le 1 ] || { echo "$name: mt-symbolize failed: $(cat "$T/sym.err")"; return 1; }
	"$BIN/mt-write" $wopts -o "$T/pipe.out" "$T/sym.mt" 2>"$T/write.err" || rw=$?
	"$BIN/mt-symbolize" $sopts --trace$topts -o "$T/one.out" "$in" 2>"$T/one.err" || rf=$?
	local rp=$((rs > rw ? rs : rw))
	[ "$rp" = "$rf" ] || { echo "$name: exit $rf, the pipe's $rs and $rw"; return 1; }
	cmp -s "$T/pipe.out" "$T/one.out" || { echo "$name: the traces differ"; cmp "$T/pipe.out" "$T/one.out"; return 1; }
	# the same warnings (in one process the writer's come as it writes,
	# among the symbolizer's, not after them; an input is named as given)
	cmp -s <(cat "$T/sym.err" "$T/write.err" | sed "s/^mt-[a-z]*: //; s#$T/sym.mt#IN#" | sort) \
		<(sed "s/^mt-symbolize: //; s#$in#IN#" "$T/one.err" | sort) ||
		{ echo "$name: warnings differ"; diff <(cat "$T/sym.err" "$T/write.err") "$T/one.err" | head -5; return 1; }
}

# each_run CHECK: CHECK DIR on every cached mt-ptsim run (every program, clean
# and every fault kind); fails when any differs, or fewer than 60 ran
each_run() {
	local d n=0 bad=0
	for d in "$C"/*/*/; do
		d=${d%/}
		[ -f "$d/perf.data" ] || continue
		"$1" "$d" || bad=$((bad + 1))
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] || skip "no mt-ptsim cache (make ptsim-cache)"
	echo "$n runs, $bad differ"
	[ "$n" -ge 60 ]
	[ "$bad" -eq 0 ]
}

# the one process against the pipe, FXT and JSON, on a run stitched by mt-decode
check_pipe() {
	local d=$1 bad=0
	"$BIN/mt-decode" --stitch --buildid-dir "$d/images" -o "$T/st.mt" "$d/perf.data" 2>/dev/null || [ $? -eq 1 ] || return 0
	same_as_pipe "${d#"$C"/}" "$T/st.mt" "--cache-dir $T/cache --images $d/images" "" "" || bad=1
	same_as_pipe "${d#"$C"/} json" "$T/st.mt" "--cache-dir $T/cache --images $d/images" "-f json" "=json" || bad=1
	return $bad
}

# the two-process pipeline against the six stages (FXT bytes) on a run
check_six() {
	local d=$1 c="--cache-dir $T/cache --images $1/images"
	"$BIN/mt-decode" --buildid-dir "$d/images" "$d/perf.data" 2>/dev/null | "$BIN/mt-segment" 2>/dev/null |
		"$BIN/mt-stitch" 2>/dev/null | "$BIN/mt-symbolize" $c 2>/dev/null | "$BIN/mt-write" > "$T/six.fxt" 2>/dev/null || true
	"$BIN/mt-decode" --stitch --buildid-dir "$d/images" "$d/perf.data" 2>/dev/null |
		"$BIN/mt-symbolize" $c --trace > "$T/two.fxt" 2>/dev/null || true
	[ -s "$T/six.fxt" ] && cmp -s "$T/six.fxt" "$T/two.fxt" || { echo "${d#"$C"/} differs"; return 1; }
}

@test "mt-symbolize --trace writes what mt-symbolize | mt-write writes: every cached mt-ptsim run, every fault kind, FXT and JSON" {
	each_run check_pipe
}

@test "mt-decode --stitch | mt-symbolize --trace writes what the six stages write: every cached mt-ptsim run" {
	each_run check_six
}

@test "mt-symbolize --trace: the Skylake recording, gzip and zstd outputs, --no-args, --window 1" {
	local fx=/work/shared/fixtures/intel_pt-skylake-4.14
	[ -d "$fx" ] || fx=$BATS_TEST_DIRNAME/fixtures/intel_pt-skylake-4.14
	[ -f "$fx/perf.data.intel_pt-4.14" ] || skip "no Skylake fixture"
	"$BIN/mt-decode" --stitch -o "$T/st.mt" "$fx/perf.data.intel_pt-4.14" 2>/dev/null || [ $? -eq 1 ]
	[ "$("$BIN/mt-dump" -k span "$T/st.mt" | wc -l)" -gt 5 ]
	local bad=0
	same_as_pipe skylake "$T/st.mt" "--cache-dir $T/cache --window 1" "" "" || bad=$((bad + 1))
	same_as_pipe "skylake gzip" "$T/st.mt" "--cache-dir $T/cache" "-z gzip" " --compress gzip" || bad=$((bad + 1))
	same_as_pipe "skylake zstd 5" "$T/st.mt" "--cache-dir $T/cache" "-z zstd -l 5" " --compress zstd --level 5" || bad=$((bad + 1))
	same_as_pipe "skylake json gzip 9" "$T/st.mt" "--cache-dir $T/cache" "-f json -z gzip -l 9" "=json --compress gz --level 9" ||
		bad=$((bad + 1))
	same_as_pipe "skylake no-args" "$T/st.mt" "--cache-dir $T/cache" "--no-args" " --no-args" || bad=$((bad + 1))
	[ "$bad" -eq 0 ]
}

@test "mt-symbolize --trace's trace read by Perfetto: the slices of the spans it symbolized, names included" {
	[ -d "$C/clean/sym_inline" ] || skip "no mt-ptsim cache (make ptsim-cache)"
	perfetto_install
	local d=$C/clean/sym_inline
	"$BIN/mt-decode" --stitch --buildid-dir "$d/images" -o "$T/st.mt" "$d/perf.data"
	"$BIN/mt-symbolize" --cache-dir "$T/cache" --images "$d/images" -o "$T/sym.mt" "$T/st.mt"
	"$BIN/mt-symbolize" --cache-dir "$T/cache" --images "$d/images" --trace -o "$T/one.fxt" "$T/st.mt"
	"$BIN/mt-symbolize" --cache-dir "$T/cache" --images "$d/images" -o "$T/one.json" --trace "$T/st.mt"
	mtev_slices "$T/sym.mt" > "$T/exp"
	[ "$(grep -c . "$T/exp")" -gt 100 ]
	grep -q "^sym_sq$(printf '\t')" "$T/exp" # an inline frame, by name
	perfetto_slices "$T/one.fxt" > "$T/got"
	diff -u "$T/exp" "$T/got"
	perfetto_slices "$T/one.json" > "$T/got"
	diff -u "$T/exp" "$T/got"
}

@test "mt-symbolize --trace: spans that break the contract are left out with mt-write's warnings, exit 1; a stream without spans warns, exit 1" {
	"$BIN/mt-undump" "$BATS_TEST_DIRNAME/write/bad-nesting.txt" > "$T/bad.mt"
	same_as_pipe bad-nesting "$T/bad.mt" "--no-symbolizer --no-cache" "" ""
	grep -q "5 of 13 spans left out" "$T/one.err"
	printf 'mtev version=1 producer="mt-stitch" flags=0x7\nprocess pid=1 name="p"\nthread pid=1 tid=1 time=0 name="t"\nend\n' | "$BIN/mt-undump" > "$T/empty.mt"
	same_as_pipe empty "$T/empty.mt" "--no-symbolizer --no-cache" "-f json" "=json"
	grep -q "no spans (nothing was recorded)" "$T/one.err"
}

@test "mt-symbolize --trace: usage errors, unusable input, a full disk: one line each, no file left" {
	[ -d "$C/clean/fnptr" ] || skip "no mt-ptsim cache (make ptsim-cache)"
	local d=$C/clean/fnptr
	"$BIN/mt-decode" --stitch --buildid-dir "$d/images" -o "$T/st.mt" "$d/perf.data"
	mkdir "$T/o"
	for a in "--compress gzip" "--no-args" "--level 3" "-o $T/o/x.fxt" "-o $T/o/x.json.gz" "--trace=xml" "--trace --compress lz4"; do
		run "$BIN/mt-symbolize" --no-cache $a "$T/st.mt"
		[ "$status" -eq 2 ]
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == "mt-symbolize: fatal: "* ]]
	done
	local size cut
	size=$(stat -c %s "$T/st.mt")
	for cut in 1 17 3000 $((size / 2)) $((size - 1)); do # a killed upstream
		head -c "$cut" "$T/st.mt" | { run "$BIN/mt-symbolize" --no-cache --trace -o "$T/o/cut.fxt"
			[ "$status" -eq 2 ]
			[ "${#lines[@]}" -eq 1 ]
			[[ "$output" == "mt-symbolize: fatal: "* ]]; }
	done
	run bash -c "'$BIN/mt-symbolize' --no-cache --images '$d/images' --trace '$T/st.mt' >/dev/full"
	[ "$status" -eq 111 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"No space left on device"* ]]
	[ -z "$(ls -A "$T/o")" ]
}
