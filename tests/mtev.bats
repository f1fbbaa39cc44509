#!/usr/bin/env bats
# MTEV codec through mt-dump / mt-undump: exact round trips, filters, and
# every corrupt input rejected with one line and exit 2.

setup() {
	BIN="$BATS_TEST_DIRNAME/../bin"
	T="$BATS_TEST_TMPDIR"
}

@test "mt-undump | mt-dump reproduces canonical text exactly" {
	"$BIN/mt-undump" "$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt" > "$T/a.mt"
	"$BIN/mt-dump" "$T/a.mt" > "$T/a.txt"
	diff -u "$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt" "$T/a.txt"
}

@test "mt-dump | mt-undump is byte-identical" {
	"$BIN/mt-undump" "$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt" > "$T/a.mt"
	"$BIN/mt-dump" "$T/a.mt" | "$BIN/mt-undump" > "$T/b.mt"
	cmp "$T/a.mt" "$T/b.mt"
}

@test "every record kind of the golden file is present (the round trip covers all kinds)" {
	for k in mtev clock process thread map trigger string branch sample gap segment span waypoint symbol raw end; do
		grep -q "^$k\\b" "$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt" || { echo "missing $k"; return 1; }
	done
}

@test "mt-undump accepts any key order, defaults and comments" {
	printf '# a comment\n\nbranch to=0x20 type=call tid=7 from=0x10 time=5\n' | "$BIN/mt-undump" | "$BIN/mt-dump" -k branch > "$T/o"
	[ "$(cat "$T/o")" = "branch tid=7 time=5 type=call from=0x10 to=0x20" ]
}

@test "mt-dump -k selects kinds and omits header and end" {
	"$BIN/mt-undump" "$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt" | "$BIN/mt-dump" -k branch,gap > "$T/o"
	[ "$(grep -c '^branch ' "$T/o")" -eq "$(grep -c '^branch ' "$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt")" ]
	[ "$(grep -c '^gap ' "$T/o")" -eq 2 ]
	! grep -qv -e '^branch ' -e '^gap ' "$T/o"
}

@test "corrupt MTEV inputs: one fatal line naming the problem, exit 2" {
	for f in "$BATS_TEST_DIRNAME"/corrupt/mtev-*.mt; do
		run "$BIN/mt-dump" "$f"
		[ "$status" -eq 2 ] || { echo "$f: status $status"; return 1; }
		err=$("$BIN/mt-dump" "$f" 2>&1 >/dev/null) || true
		[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || { echo "$f: $err"; return 1; }
		case "$err" in "mt-dump: fatal: "*) ;; *) echo "$f: $err"; return 1 ;; esac
	done
}

@test "truncated and corrupt records name their byte offset" {
	run "$BIN/mt-dump" "$BATS_TEST_DIRNAME/corrupt/mtev-truncated-record.mt"
	[[ "$output" == *"truncated stream at byte offset "* ]]
	run "$BIN/mt-dump" "$BATS_TEST_DIRNAME/corrupt/mtev-huge-size.mt"
	[[ "$output" == *"impossible record size at byte offset 21"* ]]
}

@test "a stream cut anywhere is reported as truncated, never read as complete" {
	"$BIN/mt-undump" "$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt" > "$T/a.mt"
	size=$(stat -c %s "$T/a.mt")
	for cut in $(seq 0 7 $((size - 1))); do
		head -c "$cut" "$T/a.mt" > "$T/cut.mt"
		run "$BIN/mt-dump" "$T/cut.mt"
		[ "$status" -eq 2 ] || { echo "cut at $cut: status $status"; return 1; }
	done
}

@test "bad text: one fatal line with the line number, exit 2, no output file" {
	for f in "$BATS_TEST_DIRNAME"/corrupt/undump-*.txt; do
		run "$BIN/mt-undump" -o "$T/out.mt" "$f"
		[ "$status" -eq 2 ] || { echo "$f: status $status"; return 1; }
		[[ "$output" == "mt-undump: fatal: "*"line "* ]] || { echo "$f: $output"; return 1; }
		[ ! -e "$T/out.mt" ] || { echo "$f left an output file"; return 1; }
		! ls "$T"/out.mt.tmp.* 2>/dev/null
	done
}

@test "mt-undump refuses to write binary to a terminal" {
	command -v script >/dev/null || skip "script(1) not installed"
	run script -qec "$BIN/mt-undump $BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt" /dev/null </dev/null
	[ "$status" -ne 0 ]
	[[ "$output" == *"refusing to write binary to a terminal"* ]]
}

@test "--help on stdout, exit 0; misuse exit 2" {
	for t in mt-dump mt-undump; do
		run "$BIN/$t" --help
		[ "$status" -eq 0 ]
		[[ "$output" == usage:* ]]
		run "$BIN/$t" --bogus
		[ "$status" -eq 2 ]
	done
}
