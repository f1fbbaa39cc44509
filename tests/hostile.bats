#!/usr/bin/env bats
# Hostile input (issue 17): crashes, hangs, memory that follows a number read
# from the input, wrong output accepted, messages.  Every input is generated
# here (small scripts) or kept under tests/corrupt/.  Memory bounds are checked
# with `ulimit -v`: a stage that sized something by a number it read fails
# under the bound; one that follows what it holds runs.

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	C="$BATS_TEST_DIRNAME/corrupt"
}

# one_line FILE TOOL: FILE is exactly one "TOOL: fatal: ..." line
one_line() {
	[ "$(wc -l < "$1")" -eq 1 ] || { echo "expected one line:"; cat "$1"; return 1; }
	grep -q "^$2: fatal: " "$1" || { echo "not a fatal line of $2:"; cat "$1"; return 1; }
}

# header + one process/thread (pid 10, tid 11)
hdr() {
	echo 'mtev version=1 producer="hostile" flags=0x1'
	echo 'process pid=10 name="p"'
	echo 'thread pid=10 tid=11 time=5 name="t"'
}

# ---- 1. mt-stitch spill reader ----

@test "mt-stitch --mem-limit 256: a record bigger than the limit (5 MB name) is read back from the spill, same bytes as in memory" {
	python3 - > "$T/in.txt" <<-'EOF'
	print('mtev version=1 producer="hostile" flags=0x1')
	print('process pid=10 name="p"')
	print('thread pid=10 tid=11 time=5 name="t"')
	print('segment tid=11 index=0 begin=100 end=10000 reason=start')
	print('string id=1 text="' + 'a' * 5000000 + '"')
	for b in (100, 110, 120, 300, 310, 320):
	    print('span tid=11 depth=0 begin=%d end=%d func=0x401000 callsite=0x0 flags=0 name_id=1' % (b, b + 5))
	    if b == 120:
	        print('gap tid=11 begin=200 end=210 reason=overflow code=0 offset=- ip=0x0 message=""')
	print('end')
	EOF
	"$BIN/mt-undump" -o "$T/in.mt" "$T/in.txt"
	"$BIN/mt-stitch" -i "$T/in.mt" -o "$T/mem.mt"
	TMPDIR="$T" "$BIN/mt-stitch" --mem-limit 256 -i "$T/in.mt" -o "$T/spill.mt"
	cmp "$T/mem.mt" "$T/spill.mt"
	[ -z "$(ls "$T" | grep '\.tmp\.')" ]
}

@test "mt-stitch --mem-limit 256: 50 spans with 300-byte names spill and read back, same bytes as in memory" {
	{
		hdr
		echo 'segment tid=11 index=0 begin=100 end=10000 reason=start'
		awk 'BEGIN { n = ""; for (i = 0; i < 300; i++) n = n "a"
			for (i = 0; i < 50; i++) printf "span tid=11 depth=0 begin=%d end=%d func=0x401000 callsite=0x0 flags=0 name=\"%s\"\n", 100 + i * 10, 105 + i * 10, n }'
		echo end
	} | "$BIN/mt-undump" -o "$T/in.mt"
	"$BIN/mt-stitch" -i "$T/in.mt" -o "$T/mem.mt"
	TMPDIR="$T" "$BIN/mt-stitch" --mem-limit 256 -i "$T/in.mt" -o "$T/spill.mt"
	cmp "$T/mem.mt" "$T/spill.mt"
	[ "$("$BIN/mt-dump" "$T/spill.mt" | grep -c '^span')" -eq 50 ]
}

# ---- 2. mt-symbolize: a depth number is not a size ----

@test "mt-symbolize: a span at depth 4294967295 (a 60-byte stream) runs in 300 MB and keeps the depth" {
	{
		hdr
		echo 'segment tid=11 index=0 begin=100 end=10000 reason=start'
		echo 'span tid=11 depth=4294967295 begin=100 end=200 func=0x401000 callsite=0x0 flags=0 name=""'
		echo 'span tid=11 depth=100000000 begin=300 end=400 func=0x401000 callsite=0x0 flags=0 name=""'
		echo end
	} | "$BIN/mt-undump" -o "$T/in.mt"
	run bash -c 'ulimit -v 300000; "$0/mt-symbolize" --no-symbolizer --no-cache -i "$1" -o "$2"' "$BIN" "$T/in.mt" "$T/out.mt"
	# 1: the names are degraded (no binary mapped), the output complete
	[ "$status" -eq 1 ] || { echo "status $status: $output"; return 1; }
	"$BIN/mt-dump" "$T/out.mt" | grep -q '^span tid=11 depth=4294967295 begin=100 '
	"$BIN/mt-dump" "$T/out.mt" | grep -q '^span tid=11 depth=100000000 begin=300 '
}

# ---- 4. mt-segment: a FIFO as a mapped path does not block ----

@test "mt-segment: a FIFO named by a map record or found under --symfs is skipped, no hang" {
	mkfifo "$T/fifo"
	mkdir "$T/symfs" && mkfifo "$T/symfs/lib.so"
	{
		hdr
		echo "map pid=10 time=0 start=0x401000 len=0x1000 pgoff=0x1000 prot=0x5 build_id=- path=\"$T/fifo\""
		echo "map pid=10 time=0 start=0x501000 len=0x1000 pgoff=0x1000 prot=0x5 build_id=- path=\"/lib.so\""
		echo 'branch tid=11 time=8000 type=trace-start from=0x0 to=0x401110'
		echo 'branch tid=11 time=8010 type=call from=0x401120 to=0x501200'
		echo 'branch tid=11 time=8020 type=return from=0x501210 to=0x401125'
		echo end
	} | "$BIN/mt-undump" -o "$T/in.mt"
	run timeout 20 "$BIN/mt-segment" -i "$T/in.mt" -o "$T/a.mt"
	[ "$status" -eq 0 ] || { echo "status $status: $output"; return 1; }
	run timeout 20 "$BIN/mt-segment" --symfs "$T/symfs" -i "$T/in.mt" -o "$T/b.mt"
	[ "$status" -eq 0 ] || { echo "status $status: $output"; return 1; }
	"$BIN/mt-dump" "$T/b.mt" | grep -q '^span tid=11 depth=1 '
}

# ---- 5. mt-undump: line limit, out of memory, empty input, raw bytes ----

@test "mt-undump /dev/zero: one line naming the line limit, exit 2, within 300 MB" {
	run bash -c 'ulimit -v 300000; timeout 60 "$0/mt-undump" /dev/zero -o "$1"' "$BIN" "$T/o.mt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "mt-undump: fatal: /dev/zero: line 1: line longer than 64 MiB"* ]]
	[ ! -e "$T/o.mt" ]
}

@test "mt-undump: out of memory is an error (exit 111), never the end of input" {
	run bash -c 'ulimit -v 60000; timeout 60 "$0/mt-undump" /dev/zero -o "$1"' "$BIN" "$T/o.mt"
	[ "$status" -eq 111 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "mt-undump: fatal: out of memory"* ]]
	[ ! -e "$T/o.mt" ]
}

@test "mt-undump: empty input (an mt-dump killed before its first line) is refused, exit 2" {
	for input in '' '\n\n' '# only a comment\n'; do
		printf "$input" > "$T/in.txt"
		run "$BIN/mt-undump" -o "$T/o.mt" "$T/in.txt"
		[ "$status" -eq 2 ]
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == *"empty input"* ]]
		[ ! -e "$T/o.mt" ]
	done
	# what mt-dump writes for the smallest stream is accepted
	"$BIN/mt-undump" -o "$T/min.mt" <<<'end'
	"$BIN/mt-dump" "$T/min.mt" | "$BIN/mt-undump" | cmp - "$T/min.mt"
}

@test "mt-undump: raw bytes of the input (ESC, CR, control, non-UTF-8) are escaped in the message" {
	printf 'process pid=1 na\033[31m\rme\001\377\376=1 x\n' > "$T/in.txt"
	run "$BIN/mt-undump" -o "$T/o.mt" "$T/in.txt"
	[ "$status" -eq 2 ]
	[ "${#lines[@]}" -eq 1 ]
	! LC_ALL=C grep -q $'[\001-\037\177-\377]' <<<"$output"
	[[ "$output" == *'na\x1b[31m\x0dme\x01\xff\xfe'* ]]
	# UTF-8 is kept as it is
	printf 'process pid=1 n\303\251=1\n' > "$T/in.txt"
	run "$BIN/mt-undump" -o "$T/o.mt" "$T/in.txt"
	[ "$status" -eq 2 ]
	[[ "$output" == *$'n\303\251'* ]]
}

@test "mt-undump: a raw record of a short-waypoint kind (0x40-0x47) is refused at parse (fuzz_mtev_text finding)" {
	run "$BIN/mt-undump" -o "$T/o.mt" "$C/fuzz-mtev_text-raw-short-waypoint-kind.txt"
	[ "$status" -eq 2 ]
	[[ "$output" == *"raw kind 0x40 is a known kind"* ]]
	for k in 41 47; do
		run "$BIN/mt-undump" -o "$T/o.mt" <<<"raw kind=0x$k data=00"
		[ "$status" -eq 2 ]
	done
	"$BIN/mt-undump" -o "$T/o.mt" <<<"raw kind=0x48 data=00"
}
