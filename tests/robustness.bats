#!/usr/bin/env bats
# Robustness of the pipeline as Unix filters (issue 9):
#  - for every stage, `a | b` gives the same bytes as `b < saved-a`;
#  - a killed upstream stage (its stream cut short, or the process SIGKILLed
#    mid-stream) makes the next stage report truncated input, exit non-zero, and
#    leave no output file (`-o FILE` does not exist afterwards);
#  - the fuzz targets: every fuzzer-found input in tests/corrupt/ is rejected
#    cleanly by its tool and passes its fuzz target; every seed corpus is
#    replayed once (deterministic; campaigns are `make fuzz-smoke`/`fuzz-run`).
# A stage that is not built yet is skipped with the reason; when it exists the
# assertions are real.
. "$BATS_TEST_DIRNAME/../mk/build-dir.sh"

setup() {
	ROOT="$BATS_TEST_DIRNAME/.."
	BIN="$ROOT/bin"
	T="$BATS_TEST_TMPDIR"
	GOLD="$BATS_TEST_DIRNAME/golden/mtev-all-kinds.txt"
	FUZZ="$MT_BUILD/fuzz"
}

need() {
	for s in "$@"; do
		[ -x "$BIN/$s" ] || skip "$s is not built (stage not merged yet)"
	done
}

# gen_branches N [TID...]: a valid branch stream as text (header, clock,
# process, threads, per thread trace-start, N nested calls/returns, trace-end).
# Deterministic (an LCG, not rand()); addresses stay below 2^31 for mawk.
# With SPANS=1, the span stream of the same run instead (what mt-segment
# would make of it), for the stages after mt-segment when it is not built.
gen_branches() {
	local n=$1
	shift
	awk -v n="$n" -v tids="${*:-101 102}" -v spans="${SPANS:-0}" 'BEGIN {
		s = 12345
		printf "mtev version=1 producer=\"robustness\" flags=0x%x\n", spans ? 3 : 1
		print "clock zero=0 mult=1 shift=0 tsc_hz=0 flags=0"
		print "process pid=100 name=\"synthetic\""
		nt = split(tids, tid, " ")
		for (k = 1; k <= nt; k++)
			printf "thread pid=100 tid=%d time=1000 name=\"t%d\"\n", tid[k], k
		print "map pid=100 time=0 start=0x400000 len=0x10000 pgoff=0x0 prot=0x5 build_id=- path=\"/nonexistent/synthetic\""
		fflush()  # before sort(1) writes to the same output
		for (k = 1; k <= nt; k++) {
			t = 1000; depth = 0; pc = 4198400  # 0x401000
			if (!spans)
				printf "branch tid=%d time=%d type=trace-start from=0x0 to=0x%x\n", tid[k], t, pc
			for (i = 0; i < n; i++) {
				s = (s * 69069 + 1) % 4294967296
				r = int(s / 65536) % 3
				t += 1 + int(s / 65536) % 5
				if (depth == 0 || (depth < 8 && r != 0)) {
					from = pc + 16
					pc = 4202496 + (int(s / 256) % 50) * 256  # 0x402000 + k*0x100
					sb[depth] = t; sf[depth] = pc; sc[depth] = from
					stack[depth++] = from
					if (!spans)
						printf "branch tid=%d time=%d type=call from=0x%x to=0x%x\n", tid[k], t, from, pc
				} else {
					from = pc + 32
					pc = stack[--depth] + 5
					if (spans)  # sort key: tid, begin, depth (pre-order)
						printf "%d %d %d span tid=%d depth=%d begin=%d end=%d func=0x%x callsite=0x%x flags=0 name=\"\"\n", k, sb[depth], depth, tid[k], depth, sb[depth], t, sf[depth], sc[depth] | "sort -k1,1n -k2,2n -k3,3n | cut -d\" \" -f4-"
					else
						printf "branch tid=%d time=%d type=return from=0x%x to=0x%x\n", tid[k], t, from, pc
				}
			}
			if (spans)
				while (depth > 0) {
					depth--
					printf "%d %d %d span tid=%d depth=%d begin=%d end=%d func=0x%x callsite=0x%x flags=open-at-end name=\"\"\n", k, sb[depth], depth, tid[k], depth, sb[depth], t + 1, sf[depth], sc[depth] | "sort -k1,1n -k2,2n -k3,3n | cut -d\" \" -f4-"
				}
			else
				printf "branch tid=%d time=%d type=trace-end from=0x%x to=0x0\n", tid[k], t + 1, pc
		}
		close("sort -k1,1n -k2,2n -k3,3n | cut -d\" \" -f4-")
		print "end"
	}'
}

# one_fatal_line FILE PROG: FILE is exactly one line "PROG: fatal: ..."
one_fatal_line() {
	[ "$(wc -l < "$1")" -eq 1 ] || { echo "stderr is not one line:"; cat "$1"; return 1; }
	grep -q "^$2: fatal: " "$1" || { echo "not a fatal line:"; cat "$1"; return 1; }
}

# ---- mt-undump | mt-dump ----

@test "mt-undump | mt-dump gives the same bytes as mt-dump < saved (small and >64 KiB streams)" {
	need mt-undump mt-dump
	gen_branches 20000 > "$T/big.txt"
	for src in "$GOLD" "$T/big.txt"; do
		"$BIN/mt-undump" "$src" > "$T/saved.mt"
		"$BIN/mt-undump" "$src" | "$BIN/mt-dump" > "$T/piped.txt"
		"$BIN/mt-dump" < "$T/saved.mt" > "$T/redirected.txt"
		cmp "$T/piped.txt" "$T/redirected.txt"
		# and both are the canonical text: the input itself
		cmp "$T/piped.txt" "$src"
	done
	[ "$(stat -c %s "$T/saved.mt")" -gt 131072 ] # crossed the 64 KiB buffers
}

@test "mt-dump | mt-undump gives the same bytes as mt-undump < saved" {
	need mt-undump mt-dump
	gen_branches 20000 > "$T/big.txt"
	"$BIN/mt-undump" -o "$T/a.mt" "$T/big.txt"
	"$BIN/mt-dump" "$T/a.mt" > "$T/saved.txt"
	"$BIN/mt-dump" "$T/a.mt" | "$BIN/mt-undump" > "$T/piped.mt"
	"$BIN/mt-undump" < "$T/saved.txt" > "$T/redirected.mt"
	cmp "$T/piped.mt" "$T/redirected.mt"
	cmp "$T/piped.mt" "$T/a.mt"
}

@test "mt-dump: an MTEV stream cut anywhere (killed upstream) is reported truncated, exit 2, no end line" {
	need mt-undump mt-dump
	gen_branches 20000 > "$T/big.txt"
	"$BIN/mt-undump" -o "$T/a.mt" "$T/big.txt"
	size=$(stat -c %s "$T/a.mt")
	for cut in 1 8 16 17 18 19 20 21 22 23 30 $((size / 7)) $((size / 3)) 65535 65536 65537 \
		$((size / 2)) $((size - 3)) $((size - 2)) $((size - 1)); do
		head -c "$cut" "$T/a.mt" | "$BIN/mt-dump" > "$T/out" 2> "$T/err" && st=0 || st=$?
		[ "$st" -eq 2 ] || { echo "cut $cut: status $st"; return 1; }
		one_fatal_line "$T/err" mt-dump
		grep -q 'truncated stream' "$T/err" || { echo "cut $cut:"; cat "$T/err"; return 1; }
		[ "$(tail -n 1 "$T/out")" != end ] || { echo "cut $cut: text looks complete"; return 1; }
	done
	# nothing at all from upstream: refused too (not MTEV), never an empty success
	: | "$BIN/mt-dump" > "$T/out" 2> "$T/err" && st=0 || st=$?
	[ "$st" -eq 2 ] && one_fatal_line "$T/err" mt-dump
}

@test "mt-undump: mt-dump's text cut anywhere (killed mt-dump upstream) is refused, exit 2, no output" {
	need mt-undump mt-dump
	gen_branches 2000 > "$T/big.txt"
	size=$(stat -c %s "$T/big.txt")
	lines=$(wc -l < "$T/big.txt")
	# mid-line cuts, and cuts at line ends (every line parses: only `end` is missing)
	for cut in 1 40 $((size / 7)) $((size / 2)) $((size - 5)) $((size - 2)); do
		head -c "$cut" "$T/big.txt" > "$T/cut.txt"
		"$BIN/mt-undump" -o "$T/out.mt" "$T/cut.txt" 2> "$T/err" && st=0 || st=$?
		[ "$st" -eq 2 ] || { echo "cut $cut: status $st"; return 1; }
		one_fatal_line "$T/err" mt-undump
		[ ! -e "$T/out.mt" ]
		[ -z "$(ls "$T"/out.mt.tmp.* 2>/dev/null)" ]
	done
	for n in 1 2 $((lines / 2)) $((lines - 1)); do
		head -n "$n" "$T/big.txt" | "$BIN/mt-undump" > "$T/out.mt" 2> "$T/err" && st=0 || st=$?
		[ "$st" -eq 2 ] || { echo "first $n lines: status $st"; return 1; }
		one_fatal_line "$T/err" mt-undump
		grep -q "no 'end' line" "$T/err"
		# nothing downstream takes the stream as complete
		run "$BIN/mt-dump" "$T/out.mt"
		[ "$status" -eq 2 ]
	done
	# the whole text is accepted; headerless hand-written text needs no `end`
	"$BIN/mt-undump" "$T/big.txt" | "$BIN/mt-dump" | cmp - "$T/big.txt"
	sed '1d;$d' "$T/big.txt" | "$BIN/mt-undump" | "$BIN/mt-dump" -k branch > "$T/nohdr.txt"
	[ "$(grep -c '^branch ' "$T/nohdr.txt")" -eq "$(grep -c '^branch ' "$T/big.txt")" ]
}

# Feeds BIG text to a real mt-undump through a FIFO that stays open, so the
# process is alive and mid-stream when it is killed.  Synchronization is by pipe
# back-pressure, not by sleeping: `cat` into the FIFO returns only once
# mt-undump has consumed all but at most a pipe's worth (64 KiB) of the text,
# i.e. it has parsed well over 64 KiB of MTEV and flushed at least once.
start_undump_fifo() { # start_undump_fifo OUT ARGS...: sets $prod; fd 7 = its input
	local out=$1
	shift
	mkfifo "$T/in"
	exec 7<>"$T/in"
	"$BIN/mt-undump" "$@" < "$T/in" > "$out" &
	prod=$!
}

@test "SIGKILL of mt-undump mid-stream: mt-dump downstream reports truncation, exit 2, no end line" {
	need mt-undump mt-dump
	gen_branches 30000 | grep -v '^end$' > "$T/big.txt"
	mkfifo "$T/mid"
	"$BIN/mt-dump" < "$T/mid" > "$T/out" 2> "$T/err" &
	cons=$!
	start_undump_fifo "$T/mid"
	timeout 120 cat "$T/big.txt" >&7
	kill -9 "$prod"
	wait "$prod" && pst=0 || pst=$?
	exec 7>&-
	wait "$cons" && st=0 || st=$?
	[ "$pst" -eq 137 ] # it was alive (blocked on more input) when killed
	[ "$st" -eq 2 ] || { echo "mt-dump status $st"; cat "$T/err"; return 1; }
	one_fatal_line "$T/err" mt-dump
	grep -q 'truncated stream' "$T/err"
	[ "$(wc -l < "$T/out")" -gt 1000 ] # it really was mid-stream
	[ "$(tail -n 1 "$T/out")" != end ]
}

@test "SIGKILL of mt-undump -o FILE mid-stream: FILE does not exist" {
	need mt-undump
	gen_branches 30000 | grep -v '^end$' > "$T/big.txt"
	start_undump_fifo /dev/null -o "$T/out.mt"
	timeout 120 cat "$T/big.txt" >&7
	# mid-stream: it has written part of its output to the temporary file
	tmp=$(ls "$T"/out.mt.tmp.* 2>/dev/null | head -1)
	[ -n "$tmp" ]
	[ "$(stat -c %s "$tmp")" -ge 65536 ]
	kill -9 "$prod"
	wait "$prod" && pst=0 || pst=$?
	exec 7>&-
	[ "$pst" -eq 137 ]
	[ ! -e "$T/out.mt" ]
}

# ---- mt-decode: perf.data in ----

SKY=/work/shared/fixtures/intel_pt-skylake-4.14
PTSIM_RUN="$BATS_TEST_DIRNAME/.cache/ptsim/clean/recursion"

# decode_inputs: "FILE ARGS..." lines: the Skylake fixture (file and pipe
# mode; no binaries: gaps) and an mt-ptsim recording with its images.
decode_inputs() {
	[ -f "$SKY/perf.data.intel_pt-4.14" ] && echo "$SKY/perf.data.intel_pt-4.14 --no-images"
	[ -f "$SKY/perf.data.piped.intel_pt-4.14" ] && echo "$SKY/perf.data.piped.intel_pt-4.14 --no-images"
	[ -f "$PTSIM_RUN/perf.data" ] && echo "$PTSIM_RUN/perf.data --buildid-dir $PTSIM_RUN/images"
	true
}

@test "mt-decode: cat perf.data | mt-decode gives the same bytes as mt-decode < perf.data (file and pipe mode)" {
	need mt-decode
	[ -n "$(decode_inputs)" ] || skip "no perf.data inputs (fixture or mt-ptsim cache)"
	while read -r f args; do
		# shellcheck disable=SC2086
		cat "$f" | "$BIN/mt-decode" $args > "$T/piped" 2> "$T/piped.err" && s1=0 || s1=$?
		# shellcheck disable=SC2086
		"$BIN/mt-decode" $args < "$f" > "$T/redirected" 2> /dev/null && s2=0 || s2=$?
		[ "$s1" -eq "$s2" ] && [ "$s1" -le 1 ] || { echo "$f: status $s1 vs $s2"; cat "$T/piped.err"; return 1; }
		cmp "$T/piped" "$T/redirected"
		"$BIN/mt-dump" "$T/piped" > /dev/null
	done < <(decode_inputs)
}

@test "mt-decode: a perf.data cut inside a record (killed recorder) -> truncated, exit 2, no -o file" {
	need mt-decode
	[ -n "$(decode_inputs)" ] || skip "no perf.data inputs (fixture or mt-ptsim cache)"
	while read -r f args; do
		# cut in the middle of the first record of each kind and size, of
		# every AUX and AUXTRACE record (the trace data: each cut leaves
		# another part of the trace undecoded), and of the last one (a
		# cut's cost is decoding what comes before it: every 5th record
		# took 191 decodes, most of them SWITCH_CPU_WIDE records alike)
		"$BIN/mt-decode" --records "$f" | awk '$1 ~ /^0x/ { for (i = 3; i <= NF; i++) if ($i ~ /^size=/) { split($i, kv, "="); print $1, kv[2], $2 } }' > "$T/recs"
		[ -s "$T/recs" ]
		{ awk '!seen[$3 " " $2]++ || $3 ~ /^AUX/' "$T/recs"; tail -1 "$T/recs"; } | sort -u | while read -r off size _; do
			cut=$((off + size / 2))
			rm -f "$T/out.mt"
			# shellcheck disable=SC2086
			head -c "$cut" "$f" | timeout 120 "$BIN/mt-decode" $args -o "$T/out.mt" 2> "$T/err" && st=0 || st=$?
			[ "$st" -eq 2 ] || { echo "$f cut at $cut: status $st"; cat "$T/err"; return 1; }
			[ "$(grep -c ': fatal: ' "$T/err")" -eq 1 ] && grep -q '^mt-decode: fatal: .*truncated' "$T/err" ||
				{ echo "$f cut at $cut:"; cat "$T/err"; return 1; }
			[ ! -e "$T/out.mt" ] || { echo "$f cut at $cut: output left"; return 1; }
		done
	done < <(decode_inputs)
}

@test "the real pipeline on an mt-ptsim recording: each stage piped from the one before equals it reading the saved output" {
	need mt-decode mt-segment
	[ -f "$PTSIM_RUN/perf.data" ] || skip "no mt-ptsim recording cached ($PTSIM_RUN)"
	"$BIN/mt-decode" --buildid-dir "$PTSIM_RUN/images" "$PTSIM_RUN/perf.data" > "$T/s0" 2> /dev/null || [ $? -eq 1 ]
	prev=mt-decode prev_args="--buildid-dir $PTSIM_RUN/images" prev_in="$PTSIM_RUN/perf.data" i=0
	for b in mt-segment mt-stitch mt-symbolize mt-write; do
		[ -x "$BIN/$b" ] || continue
		args=$(stage_args "$b")
		[ "$b" != mt-segment ] || args="" # real binaries: ELF symbols on
		# shellcheck disable=SC2086
		"$BIN/$prev" $prev_args < "$prev_in" 2> /dev/null | "$BIN/$b" $args > "$T/piped" 2> "$T/err" && s1=0 || s1=$?
		# shellcheck disable=SC2086
		"$BIN/$b" $args < "$T/s$i" > "$T/redirected" 2> /dev/null && s2=0 || s2=$?
		[ "$s1" -eq "$s2" ] && [ "$s1" -le 1 ] || { echo "$prev | $b: $s1, $b < saved: $s2"; cat "$T/err"; return 1; }
		cmp "$T/piped" "$T/redirected" || { echo "$prev | $b differs from $b < saved"; return 1; }
		prev_in="$T/s$i" i=$((i + 1))
		cp "$T/redirected" "$T/s$i"
		prev=$b prev_args=$args
	done
	[ "$i" -ge 1 ]
}

# ---- every MTEV stage of the pipeline ----

# stage_args STAGE: options these tests give every run of STAGE (no system
# state: no symbol cache, no symbolizer, no ELF files for synthetic addresses).
stage_args() {
	case $1 in
	mt-segment) echo "--no-symbols" ;;
	mt-symbolize) echo "--no-symbolizer --no-cache" ;;
	mt-write) echo "-f fxt" ;;
	esac
}

# upstream STAGE: the stage whose output STAGE reads in these tests (the
# nearest earlier stage that is built; mt-undump of synthetic text otherwise).
upstream() {
	local prev=mt-undump s
	for s in mt-segment mt-stitch mt-symbolize mt-write; do
		[ "$s" = "$1" ] && { echo "$prev"; return; }
		[ -x "$BIN/$s" ] && prev=$s
	done
}

# run_chain: the synthetic branch stream through every built stage; the input
# each stage gets is saved as $T/in-STAGE.mt.  A stage may exit 1 (degraded
# data, output written), never more on this valid input.
run_chain() {
	local s cur="$T/chain-0.mt" st
	gen_branches 3000 > "$T/chain.txt"
	"$BIN/mt-undump" -o "$cur" "$T/chain.txt"
	for s in mt-segment mt-stitch mt-symbolize mt-write; do
		if [ "$s" != mt-segment ] && [ ! -x "$BIN/mt-segment" ] && [ "$cur" = "$T/chain-0.mt" ]; then
			# no stage makes spans yet: start after mt-segment from spans
			SPANS=1 gen_branches 3000 > "$T/chain.txt"
			"$BIN/mt-undump" -o "$cur" "$T/chain.txt"
		fi
		cp "$cur" "$T/in-$s.mt"
		[ -x "$BIN/$s" ] && [ "$s" != mt-write ] || continue
		# shellcheck disable=SC2046
		"$BIN/$s" $(stage_args "$s") < "$cur" > "$T/out-$s.mt" 2> "$T/err-$s" && st=0 || st=$?
		[ "$st" -le 1 ] || { echo "$s failed on valid input ($st):"; cat "$T/err-$s"; return 1; }
		cur="$T/out-$s.mt"
	done
}

# pipe_equal STAGE: `upstream | STAGE` equals `STAGE < saved-upstream`, bytes
# and exit status.
pipe_equal() {
	local b=$1 a
	need mt-undump "$b"
	a=$(upstream "$b")
	run_chain
	# shellcheck disable=SC2046
	if [ "$a" = mt-undump ]; then
		"$BIN/mt-undump" "$T/chain.txt" | "$BIN/$b" $(stage_args "$b") > "$T/piped" 2> "$T/piped.err" && s1=0 || s1=$?
	else
		"$BIN/$a" $(stage_args "$a") < "$T/in-$a.mt" | "$BIN/$b" $(stage_args "$b") > "$T/piped" 2> "$T/piped.err" && s1=0 || s1=$?
	fi
	# shellcheck disable=SC2046
	"$BIN/$b" $(stage_args "$b") < "$T/in-$b.mt" > "$T/redirected" 2> "$T/redirected.err" && s2=0 || s2=$?
	[ "$s1" -eq "$s2" ] || { echo "$a | $b: status $s1, $b < saved: $s2"; cat "$T/piped.err"; return 1; }
	[ "$s1" -le 1 ] || { echo "$b failed on valid input ($s1):"; cat "$T/piped.err"; return 1; }
	[ -s "$T/redirected" ] || { echo "$b wrote nothing"; return 1; }
	cmp "$T/piped" "$T/redirected"
}

# cut_input STAGE: its input cut at many places (a killed upstream) must give
# one fatal line naming the truncation, a non-zero status, and no -o file.
cut_input() {
	local b=$1 size cut
	need mt-undump "$b"
	run_chain
	size=$(stat -c %s "$T/in-$b.mt")
	for cut in 1 10 17 20 $((size / 5)) $((size / 2)) $((size * 4 / 5)) $((size - 2)) $((size - 1)); do
		[ "$cut" -ge 1 ] && [ "$cut" -lt "$size" ] || continue
		rm -f "$T/out"
		# shellcheck disable=SC2046
		head -c "$cut" "$T/in-$b.mt" | "$BIN/$b" $(stage_args "$b") -o "$T/out" 2> "$T/err" && st=0 || st=$?
		[ "$st" -ne 0 ] || { echo "$b: input cut at $cut/$size: exit 0"; return 1; }
		grep -qi 'truncat' "$T/err" || { echo "$b: cut at $cut/$size, no truncation message:"; cat "$T/err"; return 1; }
		grep -q "^$b: fatal: " "$T/err" || { echo "$b: cut at $cut/$size, no fatal line:"; cat "$T/err"; return 1; }
		[ ! -e "$T/out" ] || { echo "$b: cut at $cut/$size left an output file (status $st)"; return 1; }
		! ls "$T"/out.tmp.* 2>/dev/null || { echo "$b: left a temporary file"; return 1; }
		[ "$b" != mt-write ] || continue
		# on stdout: what went out must not read as a complete stream downstream
		# shellcheck disable=SC2046
		head -c "$cut" "$T/in-$b.mt" | "$BIN/$b" $(stage_args "$b") > "$T/out.mt" 2> /dev/null || true
		"$BIN/mt-dump" "$T/out.mt" > /dev/null 2>&1 && { echo "$b: cut at $cut/$size: stdout is a complete stream"; return 1; }
	done
	# nothing at all from upstream
	# shellcheck disable=SC2046
	: | "$BIN/$b" $(stage_args "$b") -o "$T/out" 2> "$T/err" && st=0 || st=$?
	[ "$st" -ne 0 ] && [ ! -e "$T/out" ] || { echo "$b: empty input: status $st"; return 1; }
}

@test "mt-segment: upstream | mt-segment gives the same bytes as mt-segment < saved" {
	pipe_equal mt-segment
}
@test "mt-segment: cut input (killed upstream) -> truncated, non-zero, no -o file" {
	cut_input mt-segment
}
@test "mt-stitch: upstream | mt-stitch gives the same bytes as mt-stitch < saved" {
	pipe_equal mt-stitch
}
@test "mt-stitch: cut input (killed upstream) -> truncated, non-zero, no -o file" {
	cut_input mt-stitch
}
@test "mt-symbolize: upstream | mt-symbolize gives the same bytes as mt-symbolize < saved" {
	pipe_equal mt-symbolize
}
@test "mt-symbolize: cut input (killed upstream) -> truncated, non-zero, no -o file" {
	cut_input mt-symbolize
}
@test "mt-write: upstream | mt-write gives the same bytes as mt-write < saved" {
	pipe_equal mt-write
}
@test "mt-write: cut input (killed upstream) -> truncated, non-zero, no -o file" {
	cut_input mt-write
}

# ---- fuzzing ----

@test "fuzzer-found inputs in tests/corrupt/fuzz-*: the tool accepts or rejects each cleanly" {
	ls "$BATS_TEST_DIRNAME"/corrupt/fuzz-* >/dev/null 2>&1 || skip "no fuzzer-found inputs"
	for f in "$BATS_TEST_DIRNAME"/corrupt/fuzz-*; do
		variants=("")
		case ${f##*/} in
		fuzz-mtev_text-*) tool=mt-undump ;;
		fuzz-mtev-*) tool=mt-dump ;;
		fuzz-perfdata-*) tool=mt-decode variants=("--no-images") ;;
		fuzz-ptdecode-* | fuzz-ptwalk-* | fuzz-ptresync-*) # raw PT, against the image it was found with (before fuzz/ptprog.c), both decoders, and --resync
			tool=mt-decode
			[ -f "$MT_BUILD/programs/recursion" ] || continue
			img="--cpu 6/94/3 --image $MT_BUILD/programs/recursion:0x1000:0x78000@0x401000"
			case $f in *-ptprog.pt) img="--cpu 6/94/3 --image $MT_BUILD/fuzz/ptprog:0x1000@0x401000" ;; esac
			variants=("$img --pt" "--decoder walk $img --pt" "--resync $img --pt") ;;
		fuzz-write-*) tool=mt-write variants=("-f fxt" "-f json") ;;
		fuzz-ptwalkcpu-*) # perf.data of fuzz/ptprog.c (per-cpu), both decoders
			tool=mt-decode
			img="--buildid-dir $MT_BUILD/fuzz/ptsim/clean/images"
			variants=("--decoder libipt $img" "--decoder walk $img") ;;
		fuzz-dwcov-*) continue ;; # DWARF section bytes: no tool reads them alone
		*) echo "$f: which tool?"; return 1 ;;
		esac
		[ -x "$BIN/$tool" ] || continue
		for v in "${variants[@]}"; do
			rm -f "$T/out"
			# shellcheck disable=SC2086
			if [ "$tool" = mt-dump ]; then
				"$BIN/$tool" "$f" > "$T/out" 2> "$T/err" && st=0 || st=$?
			else
				timeout 120 "$BIN/$tool" -o "$T/out" $v "$f" 2> "$T/err" < /dev/null && st=0 || st=$?
			fi
			# 0 ok, 1 degraded data (output written, warnings), 2 refused
			case $st in
			0 | 1) [ "$st" = 1 ] || [ ! -s "$T/err" ] || { echo "$f: $tool $v ok but said:"; cat "$T/err"; return 1; } ;;
			2) one_fatal_line "$T/err" "$tool"
			   [ "$tool" = mt-dump ] || [ ! -e "$T/out" ] || { echo "$f: output left"; return 1; } ;;
			*) echo "$f: $tool $v exit $st"; cat "$T/err"; return 1 ;;
			esac
		done
	done
}

# make test replays (deterministic); campaigns are `make fuzz-smoke` / `make fuzz-run`.
@test "fuzz replay: every target runs its seed corpus and kept findings (tests/corrupt/fuzz-*) once with no finding (sanitizers on)" {
	[ -x "$FUZZ/fuzz_mtev" ] || skip "fuzz targets not built (clang with libFuzzer not installed)"
	targets=$(cd "$ROOT/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
	for t in $targets; do
		[ -x "$FUZZ/fuzz_$t" ] || { echo "fuzz_$t not built"; return 1; }
	done
	# every kept finding (tests/corrupt/fuzz-TARGET-*) is replayed by its
	# target, with the sanitizers on: none may name a target there is not
	for f in "$BATS_TEST_DIRNAME"/corrupt/fuzz-*; do
		[ -f "$f" ] || continue
		t=${f##*/fuzz-}
		t=${t%%-*}
		[ -x "$FUZZ/fuzz_$t" ] || { echo "$f: no target fuzz_$t"; return 1; }
	done
	# two targets at a time (each replay is deterministic: -runs=0)
	# shellcheck disable=SC2086
	run bash "$ROOT/fuzz/smoke.sh" -r -j 2 $targets
	echo "$output"
	[ "$status" -eq 0 ]
}
