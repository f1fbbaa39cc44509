#!/usr/bin/env bats
# mt-ptgen: its PT is valid for the real binary it walks.  Judged by libipt
# (mt-decode, against the binary's own code) and by perf's decoder, both
# against the generated truth; plus determinism and bad use.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"
load lib/branches

setup() {
	cd "$BATS_TEST_DIRNAME/.." || exit 1
	T=$BATS_TEST_TMPDIR
	B=$MT_BUILD/programs/fnptr
}

# Branch records of an MTEV stream, each thread's in order, threads one after
# the other (decoders interleave threads differently; per thread the order
# is defined).
branches() {
	bin/mt-dump "$1" | awk '$1 == "branch" { print $2, $0 }' | sort -s -k1,1 | cut -d' ' -f2-
}

@test "mt-ptgen --help documents the options and exit codes" {
	run bin/mt-ptgen --help
	[ "$status" -eq 0 ]
	for w in --output --insns --seed --threads --root --max-depth --budget --psb-period \
		--noretcomp --no-spans --stats "Exit codes"; do
		[[ "$output" == *"$w"* ]] || { echo "missing: $w"; false; }
	done
}

@test "mt-decode decodes 1M generated instructions (3 threads) to exactly the truth, times included" {
	bin/mt-ptgen -n 1M --threads 3 --seed 11 --stats -o "$T/g" "$B"
	[ -s "$T/g/perf.data" ]
	[ -s "$T/g/truth.mt" ]
	[ -s "$T/g/truth-spans.mt" ]
	bin/mt-decode --buildid-dir "$T/g/images" -o "$T/dec.mt" "$T/g/perf.data"
	branches "$T/g/truth.mt" >"$T/truth.txt"
	branches "$T/dec.mt" >"$T/dec.txt"
	# three threads, and every kind a walk produces
	[ "$(awk '{ print $2 }' "$T/truth.txt" | sort -u | wc -l)" -eq 3 ]
	for k in call return jump jcc syscall sysret trace-start trace-end; do
		grep -q "type=$k " "$T/truth.txt" || { echo "no $k"; false; }
	done
	[ "$(wc -l <"$T/truth.txt")" -gt 100000 ]
	diff "$T/truth.txt" "$T/dec.txt" | head -5 >"$T/diff"
	[ ! -s "$T/diff" ] || { cat "$T/diff"; false; }
}

@test "without return compression and with a short PSB period, mt-decode still gives the truth" {
	bin/mt-ptgen -n 300k --noretcomp --psb-period 512 --seed 5 --no-spans -o "$T/g" "$B"
	[ ! -e "$T/g/truth-spans.mt" ]
	bin/mt-decode --buildid-dir "$T/g/images" -o "$T/dec.mt" "$T/g/perf.data"
	branches "$T/g/truth.mt" >"$T/truth.txt"
	branches "$T/dec.mt" >"$T/dec.txt"
	[ -s "$T/truth.txt" ]
	cmp "$T/truth.txt" "$T/dec.txt"
}

@test "perf script --itrace=b gives the truth's branches (2 threads)" {
	bin/mt-ptgen -n 200k --threads 2 --seed 3 --no-spans -o "$T/g" "$B"
	perf_branches "$T/g" >"$T/perf.txt"
	truth_branches "$T/g" >"$T/truth.txt"
	[ "$(wc -l <"$T/truth.txt")" -gt 20000 ]
	diff "$T/perf.txt" "$T/truth.txt" | head -5 >"$T/diff"
	[ ! -s "$T/diff" ] || { cat "$T/diff"; false; }
}

@test "the walk follows the binary: calls go to function entries, returns right after a call" {
	bin/mt-ptgen -n 200k --seed 9 --no-spans -o "$T/g" "$B"
	# objdump's view of the binary: function entries (labels and direct call
	# targets), and the
	# address after every call instruction
	objdump -d --no-show-raw-insn "$B" | awk '
		/^[0-9a-f]+ <.*>:$/ { print "entry 0x" $1; next }
		/^ *[0-9a-f]+:\t/ { a = $1; sub(/:$/, "", a); if (after) print "after 0x" a;
			after = ($2 ~ /^call/)
			# direct call targets: function entries without a label
			# (IRELATIVE PLT stubs of a static binary)
			if (after && $3 ~ /^[0-9a-f]+$/) print "entry 0x" $3 }' | sed 's/0x0*/0x/' | sort -u >"$T/objdump"
	bin/mt-dump "$T/g/truth.mt" | awk '$1 == "branch" && / type=(call|return) / {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print (v["type"] == "call" ? "entry " : "after ") v["to"] }' | sort -u >"$T/walk"
	grep -q '^entry' "$T/walk" && grep -q '^after' "$T/walk"
	comm -23 "$T/walk" "$T/objdump" >"$T/bad"
	[ ! -s "$T/bad" ] || { head "$T/bad"; false; }
}

@test "the same seed gives the same files; another seed another walk" {
	bin/mt-ptgen -n 100k --seed 42 -o "$T/a" "$B"
	bin/mt-ptgen -n 100k --seed 42 -o "$T/b" "$B"
	bin/mt-ptgen -n 100k --seed 43 -o "$T/c" "$B"
	cmp "$T/a/perf.data" "$T/b/perf.data"
	cmp "$T/a/truth.mt" "$T/b/truth.mt"
	run cmp -s "$T/a/truth.mt" "$T/c/truth.mt"
	[ "$status" -ne 0 ]
}

@test "--root: the first thread's outermost frame is that function, and it never returns" {
	bin/mt-ptgen -n 100k --seed 1 --root main -o "$T/g" "$B" || skip "main has no loop through a call"
	main=$(nm "$B" | awk '$3 == "main" { print $1 }' | sed 's/^0*//')
	bin/mt-dump "$T/g/truth.mt" | grep -m1 "type=trace-start" | grep -qE "to=0x$main( |\$)"
}

@test "bad use: one error line and exit 2" {
	run bin/mt-ptgen -n 1000 "$B"
	[ "$status" -eq 2 ]
	run bin/mt-ptgen -n 1000 -o "$T/x" tests/ptgen.bats
	[ "$status" -eq 2 ]
	[[ "$output" == "mt-ptgen: fatal: "* ]]
	[ "${#lines[@]}" -eq 1 ]
	[ ! -e "$T/x/perf.data" ]
	run bin/mt-ptgen -n 1000 -o "$T/x" /nonexistent
	[ "$status" -eq 2 ]
	strip -o "$T/stripped" "$B"
	run bin/mt-ptgen -n 1000 -o "$T/x" "$T/stripped"
	[ "$status" -eq 2 ]
	[[ "$output" == "mt-ptgen: fatal: "* ]]
	run bin/mt-ptgen -n 1000 --root no_such_function -o "$T/x" "$B"
	[ "$status" -eq 2 ]
	run bin/mt-ptgen -n 0 -o "$T/x" "$B"
	[ "$status" -eq 2 ]
	run bin/mt-ptgen --threads 65 -o "$T/x" "$B"
	[ "$status" -eq 2 ]
}

@test "the whole pipeline on a generated trace: every span obeys the span contract (mt-write leaves none out)" {
	bin/mt-ptgen -n 300k --seed 2 --no-spans -o "$T/g" "$B"
	bin/mt-decode --buildid-dir "$T/g/images" "$T/g/perf.data" | bin/mt-segment | bin/mt-stitch |
		bin/mt-symbolize --images "$T/g/images" --cache-dir "$T/cache" >"$T/sym.mt"
	run bin/mt-write -o "$T/out.fxt" "$T/sym.mt"
	echo "$output" | head -5
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ -s "$T/out.fxt" ]
}
