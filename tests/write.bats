#!/usr/bin/env bats
# mt-write, judged by a real viewer: every output is loaded into Perfetto's
# trace processor (v20.1 wasm, tests/perfetto/tp.js) and its slices must equal
# the spans given to mt-write, derived from the input text by
# tests/write/expect-slices.awk (never from mt-write's own output).
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

load perfetto/lib

setup_file() {
	perfetto_install
}

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	W="$BATS_TEST_DIRNAME/write"
	T="$BATS_TEST_TMPDIR"
	TP="$BATS_TEST_DIRNAME/perfetto/tp.js"
}

# expected FILE.txt: the slices the input text asks for, sorted
expected() {
	mtev_slices "$1"
}

# actual TRACE: the slices Perfetto shows (stats must be clean)
actual() {
	perfetto_slices "$1"
}

# check_slices INPUT.txt TRACE: slices equal, and there are some
check_slices() {
	expected "$1" > "$T/exp"
	actual "$2" > "$T/got"
	[ -s "$T/exp" ]
	diff -u "$T/exp" "$T/got"
}

@test "edge cases: FXT slices (name, thread, ts, dur, depth) equal the input spans" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	"$BIN/mt-write" -o "$T/out.fxt" "$T/in.mt"
	[ "$(head -c 8 "$T/out.fxt" | od -An -tx1 | tr -d ' \n')" = "1000044678541600" ]
	check_slices "$W/edge.txt" "$T/out.fxt"
}

@test "edge cases: JSON slices equal the input spans" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	"$BIN/mt-write" -o "$T/out.json" "$T/in.mt"
	# well-formed JSON for a strict parser too
	node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$T/out.json"
	check_slices "$W/edge.txt" "$T/out.json"
}

@test "compressed outputs (.fxt.gz, .json.gz, .fxt.zst, .json.zst) load and equal the input" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	for o in out.fxt.gz out.json.gz out.fxt.zst out.json.zst; do
		"$BIN/mt-write" -o "$T/$o" "$T/in.mt"
		case $o in
		*.gz) gzip -t "$T/$o" ;;
		*.zst) zstd -tq "$T/$o" ;;
		esac
		check_slices "$W/edge.txt" "$T/$o"
	done
	# the format follows the name under the compression suffix
	[ "$(gzip -dc "$T/out.json.gz" | head -c 15)" = '{"traceEvents":' ]
	[ "$(zstd -dcq "$T/out.fxt.zst" | head -c 8 | od -An -tx1 | tr -d ' \n')" = "1000044678541600" ]
}

@test "-f overrides the name, -z compresses stdout, -i reads a file" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	"$BIN/mt-write" -f json -o "$T/out.trace" "$T/in.mt"
	[ "$(head -c 15 "$T/out.trace")" = '{"traceEvents":' ]
	"$BIN/mt-write" -f fxt -z gzip < "$T/in.mt" > "$T/out.gz"
	gzip -t "$T/out.gz"
	check_slices "$W/edge.txt" "$T/out.gz"
	"$BIN/mt-write" -i "$T/in.mt" -o "$T/i.fxt"
	cmp "$T/i.fxt" <("$BIN/mt-write" < "$T/in.mt")
}

@test "JSON: names that are not valid UTF-8 are repaired, the file stays valid JSON" {
	printf 'mtev version=1 producer="t" flags=0\nthread pid=1 tid=1 time=0 name="t\\xff1"\nspan tid=1 depth=0 begin=1 end=2 func=0x0 callsite=0x0 flags=0 name="a\\xc3\\x28b\\xed\\xa0\\x80c\\xe2\\x82\\xacd"\nend\n' | "$BIN/mt-undump" > "$T/in.mt"
	"$BIN/mt-write" -o "$T/out.json" "$T/in.mt"
	node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$T/out.json"
	# each invalid byte becomes "?"; the valid euro sign stays
	[ "$(tp -c "$T/out.json" "select name from slice")" = "a?(b???c€d" ]
	[ "$(tp -c "$T/out.json" "select name from thread where tid = 1")" = "t?1" ]
}

@test "threads and processes carry their names (FXT and JSON)" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	for o in out.fxt out.json; do
		"$BIN/mt-write" -o "$T/$o" "$T/in.mt"
		node "$TP" -c "$T/$o" "select t.tid, t.name, p.pid, p.name from thread t join process p using(upid) where t.tid in (10, 11, 21) order by t.tid" > "$T/th"
		printf '10\tmain\t10\tdemo\n11\tworker "x"\t10\tdemo\n21\tcafé\t20\tother proc\n' > "$T/want"
		diff -u "$T/want" "$T/th"
		# tid 31 had no thread record: it is its own process
		[ "$(node "$TP" "$T/$o" "select p.pid from thread t join process p using(upid) where t.tid = 31")" = 31 ]
	done
}

@test "span arguments: loc from the symbol record, inline, flags" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	for o in out.fxt out.json; do
		"$BIN/mt-write" -o "$T/$o" "$T/in.mt"
		q="select s.name, replace(a.key, 'args.', ''), coalesce(a.string_value, cast(a.int_value as text)) from slice s join args a using(arg_set_id) where s.category = 'span' and s.ts in (1000000000100, 1000000000101, 2000) order by s.name, a.key"
		node "$TP" -c "$T/$o" "$q" > "$T/args"
		grep -qx "$(printf 'foo\tloc\t0x401100 a.c:10')" "$T/args"
		grep -qx "$(printf 'sq\tloc\t0x401234 b.h:3')" "$T/args"
		grep -q "$(printf '^sq\tinline\t')" "$T/args"
		grep -qx "$(printf 'main\tflags\tinferred-start,open-at-end')" "$T/args"
		# named through the symbol whose entry is the function: "bar"
		grep -qx "$(printf 'bar\tloc\t0x401200')" "$T/args"
	done
}

@test "gaps and trigger hits become instants at their times" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	"$BIN/mt-write" -o "$T/out.fxt" "$T/in.mt"
	"$BIN/mt-write" -o "$T/out.json" "$T/in.mt"
	# v20.1 keeps FXT instants in the legacy `instants` table, JSON ones in `slice`
	node "$TP" -c "$T/out.fxt" "select ts, name from instants order by ts" > "$T/fi"
	node "$TP" -c "$T/out.json" "select ts, name from slice where category in ('gap', 'trigger') order by ts" > "$T/ji"
	printf '3000\tgap: decode-error\n3500\ttrigger: magic_trace_stop_indicator\n' > "$T/want"
	diff -u "$T/want" "$T/fi"
	diff -u "$T/want" "$T/ji"
}

@test "random span trees (ties, zero lengths, 8 threads): FXT and JSON equal the input" {
	awk -v seed=11 -v threads=4 -v procs=2 -v spans=400 -f "$W/gen-spans.awk" > "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	"$BIN/mt-write" -o "$T/out.fxt" "$T/in.mt"
	"$BIN/mt-write" -o "$T/out.json.gz" "$T/in.mt"
	check_slices "$T/in.txt" "$T/out.fxt"
	check_slices "$T/in.txt" "$T/out.json.gz"
}

@test "stress: > 40000 distinct names and > 300 threads load correctly (FXT and JSON)" {
	awk -v seed=3 -v threads=161 -v procs=2 -v spans=130 -v distinct=1 -f "$W/gen-spans.awk" > "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	expected "$T/in.txt" > "$T/exp"
	[ "$(cut -f1 "$T/exp" | sort -u | wc -l)" -gt 40000 ]
	[ "$(cut -f2 "$T/exp" | sort -u | wc -l)" -gt 300 ]
	"$BIN/mt-write" -s -o "$T/out.fxt" "$T/in.mt" 2> "$T/err"
	# the string and thread tables really were recycled
	grep -q 'fxt_string_reuses=[1-9]' "$T/err"
	grep -q 'fxt_thread_reuses=[1-9]' "$T/err"
	"$BIN/mt-write" -o "$T/out.json" "$T/in.mt"
	for o in out.fxt out.json; do
		# one load (they are the slow part): the thread count, then the slices
		tp -c "$T/$o" "select count(*) from thread where name like 'thr %'" \
			"select s.name, t.tid, s.ts, s.dur, s.depth from slice s join thread_track tt on s.track_id = tt.id join thread t using(utid) where s.category = 'span'" > "$T/res"
		[ "$(sed -n 2p "$T/res")" -eq 322 ]
		sed '1,/^== 2$/d' "$T/res" | LC_ALL=C sort > "$T/got"
		diff -q "$T/exp" "$T/got"
	done
}

@test "pipeline: mt-segment and mt-stitch outputs (tests/golden/segment inputs) load exactly, nothing dropped" {
	SYMFS="$MT_BUILD/tests/segment"
	[ -x "$SYMFS/segfuncs" ] || skip "$MT_BUILD/tests/segment/segfuncs not built (make test builds it)"
	G="$BATS_TEST_DIRNAME/golden/segment"
	for n in seg-empty-return seg-tailcalls seg-recursion seg-longjmp seg-signal seg-thread-life seg-smear stitch-gap-depth0 stitch-gap-depth10; do
		"$BIN/mt-undump" "$G/$n.in.txt" | "$BIN/mt-segment" --symfs "$SYMFS" --no-waypoints > "$T/seg.mt"
		case $n in
		stitch-*) "$BIN/mt-stitch" < "$T/seg.mt" > "$T/in.mt" ;;
		*) cp "$T/seg.mt" "$T/in.mt" ;;
		esac
		"$BIN/mt-dump" "$T/in.mt" > "$T/in.txt"
		# exit 0: the stage's spans keep the span contract
		"$BIN/mt-write" -o "$T/$n.fxt" "$T/in.mt" || { echo "$n: mt-write failed"; return 1; }
		check_slices "$T/in.txt" "$T/$n.fxt" || { echo "$n"; return 1; }
	done
}

@test "pipeline: mt-symbolize output (inline spans of a real -O2 binary) loads exactly, names included" {
	PROG="$(cd "$BATS_TEST_DIRNAME/.." && pwd)/${BUILD:-build}/programs/sym_inline"
	[ -x "$PROG" ] || skip "$PROG not built (make test builds it)"
	export XDG_CACHE_HOME="$T/cache"
	"$BATS_TEST_DIRNAME/symbolize-gen.sh" "$PROG" 0x555555554000 sym_accumulate sym_mixed main > "$T/gen.txt"
	"$BIN/mt-undump" "$T/gen.txt" | "$BIN/mt-symbolize" --no-cache > "$T/in.mt"
	"$BIN/mt-dump" "$T/in.mt" > "$T/in.txt"
	grep -q 'flags=inline name="sym_sq"' "$T/in.txt"
	for o in out.fxt out.json; do
		"$BIN/mt-write" -o "$T/$o" "$T/in.mt"
		check_slices "$T/in.txt" "$T/$o"
		# inline spans are marked
		[ "$(node "$TP" "$T/$o" "select count(*) from slice s join args a using(arg_set_id) where a.key in ('inline', 'args.inline') and s.name = 'sym_sq'")" -gt 0 ]
	done
}

@test "a stream with no spans: one fatal line, exit 2, no output file" {
	printf 'mtev version=1 producer="t" flags=0\nprocess pid=1 name="p"\nthread pid=1 tid=1 time=0 name="t"\nend\n' | "$BIN/mt-undump" > "$T/in.mt"
	run "$BIN/mt-write" -o "$T/out.fxt" "$T/in.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == "mt-write: fatal: "*"no span records"* ]]
	[ ! -e "$T/out.fxt" ]
	! ls "$T"/out.fxt.tmp.* 2>/dev/null
}

@test "unbalanced, orphaned, overlapping and backwards spans: left out with warnings, exit 1, the rest loads exactly" {
	"$BIN/mt-undump" "$W/bad-nesting.txt" > "$T/in.mt"
	for o in out.fxt out.json; do
		run "$BIN/mt-write" -o "$T/$o" "$T/in.mt"
		[ "$status" -eq 1 ]
		[[ "$output" == *"warning: span dropped (outside its parent): tid 1 depth 1 begin 150"* ]]
		[[ "$output" == *"warning: span dropped (orphan): tid 1 depth 3"* ]]
		[[ "$output" == *"warning: span dropped (time goes backwards): tid 1 depth 0 begin 250"* ]]
		[[ "$output" == *"warning: span dropped (overlaps its sibling): tid 1 depth 0 begin 399"* ]]
		[[ "$output" == *"5 of 13 spans left out"* ]]
		# loads with clean stats (-c) and holds exactly the other spans
		check_slices "$W/bad-nesting.txt" "$T/$o"
	done
}

@test "random contract-breaking spans: what is written is a subset of the input, at the input's depths, in both formats" {
	for seed in 4 5; do
		awk -v seed=$seed -v n=2000 -f "$W/gen-chaos.awk" > "$T/in.txt"
		"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
		run "$BIN/mt-write" -s -o "$T/out.fxt" "$T/in.mt"
		[ "$status" -eq 1 ]
		written=$(printf '%s\n' "$output" | sed -n 's/^mt-write: spans_written=\([0-9]*\) .*/\1/p')
		"$BIN/mt-write" -o "$T/out.json" "$T/in.mt" 2>/dev/null || true
		expected "$T/in.txt" > "$T/exp"
		actual "$T/out.fxt" > "$T/f"
		actual "$T/out.json" > "$T/j"
		# every slice is an input span with its own name, thread, times and depth
		[ "$(wc -l < "$T/f")" -eq "$written" ]
		[ "$written" -gt 100 ]
		LC_ALL=C comm -23 "$T/f" "$T/exp" > "$T/extra"
		[ ! -s "$T/extra" ]
		cmp "$T/f" "$T/j"
	done
}

@test "a truncated MTEV stream: fatal, exit 2, no output file; --partial writes what was read" {
	awk -v seed=5 -v threads=2 -v procs=1 -v spans=300 -f "$W/gen-spans.awk" > "$T/in.txt"
	"$BIN/mt-undump" "$T/in.txt" > "$T/in.mt"
	size=$(stat -c %s "$T/in.mt")
	head -c $((size / 2)) "$T/in.mt" > "$T/cut.mt"
	run "$BIN/mt-write" -o "$T/out.fxt" "$T/cut.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == "mt-write: fatal: "*"truncated"*"no output written" ]]
	[ ! -e "$T/out.fxt" ]
	! ls "$T"/out.fxt.tmp.* 2>/dev/null
	run "$BIN/mt-write" --partial -o "$T/out.fxt" "$T/cut.mt"
	[ "$status" -eq 1 ]
	# what it wrote is a prefix of the input's spans, and loads cleanly
	n=$(actual "$T/out.fxt" | wc -l)
	[ "$n" -gt 0 ]
	[ "$n" -lt "$(expected "$T/in.txt" | wc -l)" ]
	actual "$T/out.fxt" | LC_ALL=C comm -23 - <(expected "$T/in.txt") > "$T/extra"
	[ ! -s "$T/extra" ]
}

@test "not MTEV, and an empty input: fatal, exit 2, no output file" {
	printf 'hello, world\n' > "$T/junk"
	run "$BIN/mt-write" -o "$T/out.fxt" "$T/junk"
	[ "$status" -eq 2 ]
	[[ "${lines[0]}" == "mt-write: fatal: "* ]]
	[ ! -e "$T/out.fxt" ]
	run "$BIN/mt-write" -o "$T/out.fxt" /dev/null
	[ "$status" -eq 2 ]
	[ ! -e "$T/out.fxt" ]
	# the project's corrupt MTEV corpus: one fatal line each, never a file
	for f in "$BATS_TEST_DIRNAME"/corrupt/mtev-*.mt; do
		run "$BIN/mt-write" -o "$T/out.fxt" "$f"
		[ "$status" -eq 2 ] || { echo "$f: status $status"; return 1; }
		[ "${#lines[@]}" -eq 1 ] || { echo "$f: $output"; return 1; }
		[[ "${lines[0]}" == "mt-write: fatal: "* ]]
		[ ! -e "$T/out.fxt" ]
		! ls "$T"/out.fxt.tmp.* 2>/dev/null
	done
}

@test "a killed run leaves no output file" {
	"$BIN/mt-undump" "$W/edge.txt" > "$T/in.mt"
	mkfifo "$T/fifo"
	"$BIN/mt-write" -o "$T/out.fxt" "$T/fifo" &
	pid=$!
	exec 7> "$T/fifo"
	# the header and some records, but never the end: mt-write blocks reading
	head -c 200 "$T/in.mt" >&7
	# wait (bounded) until it has created its temporary file
	for i in $(seq 1 500); do
		ls "$T"/out.fxt.tmp.* >/dev/null 2>&1 && break
		read -r -t 0.01 <> <(:) || true
	done
	kill -9 "$pid"
	wait "$pid" || true
	exec 7>&-
	[ ! -e "$T/out.fxt" ]
}

@test "--help and usage errors" {
	run "$BIN/mt-write" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"Exit status"* ]]
	run "$BIN/mt-write" -f xml
	[ "$status" -eq 2 ]
	run "$BIN/mt-write" --bogus
	[ "$status" -eq 2 ]
	run "$BIN/mt-write" -o "$T/x.fxt" "$T/does-not-exist"
	[ "$status" -eq 2 ]
	[ ! -e "$T/x.fxt" ]
}

@test "tp.js: rejects a corrupt FXT and reports stats errors" {
	# an FXT record of size 0 after the magic: the engine must refuse it
	printf '\x10\x00\x04\x46\x78\x54\x16\x00\x00\x00\x00\x00\x00\x00\x00\x00' > "$T/bad.fxt"
	run node "$TP" "$T/bad.fxt" "select count(*) from slice"
	[ "$status" -eq 1 ]
	# a timestamp that overflows the tick conversion: a stats error, caught by -c
	printf '\x10\x00\x04\x46\x78\x54\x16\x00\x21\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00' > "$T/of.fxt"
	printf '\x44\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x40\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00' >> "$T/of.fxt"
	run node "$TP" "$T/of.fxt" "select 1"
	[ "$status" -eq 0 ]
	run node "$TP" -c "$T/of.fxt" "select 1"
	[[ "$output" == *"fuchsia_timestamp_overflow"* ]]
	[ "$status" -eq 1 ]
}
