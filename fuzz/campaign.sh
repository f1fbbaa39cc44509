#!/usr/bin/env bash
# campaign.sh [-n RUNS] [-d DIR] TARGET... — long fuzzing campaigns, outside
# `make test`: each target in turn (one core), under nice -n 19, runs until
# RUNS executions (libFuzzer -runs, seeds included; default 10,000,000) or
# its first finding.
#
# The binaries (build/fuzz/fuzz_TARGET), seeds, dictionaries and the image
# fuzz_ptdecode maps are copied into DIR/bin/ first, so the worktree can be
# rebuilt meanwhile.  In DIR (default /work/fuzzlogs):
#   campaign.log         one line per finished target: start time, target,
#                        executions, seconds, exec/s, "clean" or the finding
#   status               what runs now (target, start, pid)
#   log-TARGET.txt       the fuzzer's output (its last "#N" line is the
#                        progress: executions so far)
#   corpus-TARGET/       the growing corpus (kept between campaigns)
#   TARGET-crash-*, -leak-*, -timeout-*, -oom-*   findings
#
# The whole script is one function, read before it runs: editing or checking
# out this file while a chain runs does not disturb it.
main() {
	cd "$(dirname "$0")/.." || exit 111
	. mk/build-dir.sh
	runs=10000000 dir=/work/fuzzlogs
	while getopts n:d: o; do
		case $o in
		n) runs=$OPTARG ;;
		d) dir=$OPTARG ;;
		*) echo "usage: campaign.sh [-n RUNS] [-d DIR] TARGET..." >&2; exit 2 ;;
		esac
	done
	shift $((OPTIND - 1))
	[ $# -gt 0 ] || { echo "campaign.sh: no targets" >&2; exit 2; }
	. fuzz/flags.sh
	B=$MT_BUILD/fuzz
	mkdir -p "$dir/bin" || exit 111
	dir=$(cd "$dir" && pwd)
	rev=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo +changes)
	for t in "$@"; do
		[ -x "$B/fuzz_$t" ] && [ -d "$B/seeds-$t" ] ||
			{ echo "campaign.sh: $B/fuzz_$t or its seeds missing (make fuzz fuzz-seeds)" >&2; exit 2; }
		cp "$B/fuzz_$t" "$dir/bin/" && rm -rf "$dir/bin/seeds-$t" && cp -r "$B/seeds-$t" "$dir/bin/" || exit 111
		[ -f "fuzz/$t.dict" ] && { cp "fuzz/$t.dict" "$dir/bin/" || exit 111; }
	done
	[ -f "$MT_BUILD/programs/recursion" ] && cp "$MT_BUILD/programs/recursion" "$dir/bin/"
	export FUZZ_PT_IMAGE=$dir/bin/recursion:0x1000:0x78000@0x401000

	for t in "$@"; do
		mapfile -t extra < <(fuzz_flags "$t" | sed "s|^-dict=fuzz/|-dict=$dir/bin/|")
		mkdir -p "$dir/corpus-$t" || exit 111
		start=$(date +%s)
		echo "$t started $(date -u '+%F %T') runs $runs build $rev pid $$" > "$dir/status"
		nice -n 19 "$dir/bin/fuzz_$t" -runs="$runs" -timeout=60 -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix="$dir/$t-" "${extra[@]}" \
			"$dir/corpus-$t" "$dir/bin/seeds-$t" > "$dir/log-$t.txt" 2>&1
		rc=$?
		secs=$(($(date +%s) - start))
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log-$t.txt" | tail -1)
		[ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$dir/log-$t.txt" | tail -1 | tr -d '#')
		if [ "$rc" -eq 0 ]; then
			res=clean
		else
			art=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$dir/log-$t.txt" | tail -1)
			why=$(grep -m1 -E 'FUZZ FINDING|ERROR: |runtime error' "$dir/log-$t.txt" | cut -c1-160)
			res="FINDING exit $rc: ${why:-see log} (input ${art:-none})"
		fi
		printf '%s %s execs=%s seconds=%s exec/s=%s build=%s %s\n' "$(date -u -d @"$start" '+%F %T')" \
			"$t" "${execs:-?}" "$secs" "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" "$rev" "$res" \
			>> "$dir/campaign.log"
	done
	echo "done $(date -u '+%F %T')" > "$dir/status"
}
main "$@"; exit $?
