#!/usr/bin/env bash
# smoke.sh [-t SECONDS] [-j JOBS] [-r] TARGET... — run each libFuzzer target
# (build/fuzz/fuzz_TARGET) for SECONDS, JOBS at a time, over its growing corpus
# fuzz/corpus-TARGET/ and its seeds build/fuzz/seeds-TARGET/.
# -r replays instead: every seed of build/fuzz/seeds-TARGET/ and every kept
# finding tests/corrupt/fuzz-TARGET-* runs once (-runs=0, no mutation, no
# growing corpus): deterministic, what `make test` runs.
# Prints one line per target (execs, coverage, corpus); on a finding prints the
# end of the fuzzer's log and the crashing input, and exits 1.
# Logs: build/fuzz/log-TARGET-PID.txt; crashers: build/fuzz/TARGET-crash-*.
cd "$(dirname "$0")/.." || exit 111
. mk/build-dir.sh
secs=30 jobs=2 replay=0
while getopts t:j:r o; do
	case $o in
	r) replay=1 ;;
	t) secs=$OPTARG ;;
	j) jobs=$OPTARG ;;
	*) echo "usage: smoke.sh [-t SECONDS] [-j JOBS] [-r] TARGET..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "smoke.sh: no targets" >&2; exit 2; }
B=$MT_BUILD/fuzz
. fuzz/flags.sh

run_one() {
	local t=$1 extra
	mapfile -t extra < <(fuzz_flags "$t")
	if [ "$replay" = 1 ]; then
		# whole inputs: -max_len would cut the seeds and the kept findings
		mapfile -t extra < <(fuzz_flags "$t" | grep -v '^-max_len=')
		# libFuzzer takes directories: the kept findings are copied into one
		rm -rf "$B/kept-$t" && mkdir -p "$B/kept-$t" || exit 111
		rm -rf "$B/kept-$t-ptprog" && mkdir -p "$B/kept-$t-ptprog" || exit 111
		for f in tests/corrupt/fuzz-"$t"-*; do
			case $f in
			*-ptprog.pt) cp "$f" "$B/kept-$t-ptprog/" ;; # found against fuzz/ptprog.c
			*) [ -f "$f" ] && cp "$f" "$B/kept-$t/" ;;
			esac
		done
		# -runs=0: each input of the directories runs exactly once, no
		# mutation.  The raw-PT targets' kept findings were found against
		# the recursion test program's code (before fuzz/ptprog.c), and
		# replay against it, except those named *-ptprog.pt: those and the
		# seeds against ptprog first.
		case $t in
		ptdecode | ptwalk | ptresync)
			"$B/fuzz_$t" -runs=0 -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
				-artifact_prefix="$B/$t-" "${extra[@]}" "$B/seeds-$t" "$B/kept-$t-ptprog" \
				> "$B/log-$t-$$.txt" 2>&1 &&
				FUZZ_PT_IMAGE=$MT_BUILD/programs/recursion:0x1000:0x78000@0x401000 \
					"$B/fuzz_$t" -runs=0 -timeout=60 -rss_limit_mb=2048 \
					-print_final_stats=1 -artifact_prefix="$B/$t-" "${extra[@]}" \
					"$B/kept-$t" >> "$B/log-$t-$$.txt" 2>&1
			;;
		*)
			"$B/fuzz_$t" -runs=0 -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
				-artifact_prefix="$B/$t-" "${extra[@]}" "$B/seeds-$t" "$B/kept-$t" \
				> "$B/log-$t-$$.txt" 2>&1
			;;
		esac
		echo $? > "$B/rc-$t-$$"
		return
	fi
	mkdir -p "fuzz/corpus-$t"
	"$B/fuzz_$t" -max_total_time="$secs" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$B/$t-" "${extra[@]}" "fuzz/corpus-$t" "$B/seeds-$t" \
		> "$B/log-$t-$$.txt" 2>&1
	echo $? > "$B/rc-$t-$$"
}

for t in "$@"; do
	[ -x "$B/fuzz_$t" ] || { echo "smoke.sh: $B/fuzz_$t not built" >&2; exit 2; }
	rm -f "$B/rc-$t-$$"
done
for t in "$@"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
	run_one "$t" &
done
wait

fail=0
for t in "$@"; do
	log=$B/log-$t-$$.txt rc=$(cat "$B/rc-$t-$$" 2>/dev/null || echo 111)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{ n += $1 } END { if (NR) print n }')
	done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
	corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$done_line")
	if [ "$rc" -eq 0 ]; then
		if [ "$replay" = 1 ]; then
		# whole inputs: -max_len would cut the seeds and the kept findings
		mapfile -t extra < <(fuzz_flags "$t" | grep -v '^-max_len=')
			echo "fuzz_$t: ok: ${execs:-?} inputs replayed, cov ${cov:-?}"
		else
			echo "fuzz_$t: ok: ${execs:-?} execs in ${secs}s, cov ${cov:-?}, corpus ${corp:-?}"
		fi
	else
		fail=1
		echo "fuzz_$t: FINDING (exit $rc) after ${execs:-?} execs; log $log"
		grep -E 'FUZZ FINDING|ERROR: |SUMMARY: |runtime error|Test unit written' "$log" | head -10
		tail -30 "$log" | sed 's/^/    /'
	fi
done
exit $fail
