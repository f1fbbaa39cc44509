#!/usr/bin/env bash
# campaign.sh [-n RUNS] [-c SECONDS] [-d DIR] TARGET... — long fuzzing
# campaigns, outside `make test`: each target in turn, under nice -n 19, until
# the campaign directory holds RUNS mutated executions (default 10,000,000) of
# the target's current binary, or a run finds something.  Resumable: run it
# again with the same DIR and it goes on from the count its earlier runs left
# (fuzz/campaign-summary.sh -q), over the corpus they grew (all the state
# libFuzzer has).  One target per invocation at a time; several invocations
# (other targets) may share DIR.
#
# The work is cut into runs (libFuzzer processes) of at most SECONDS each
# (default 1800), so a campaign killed without warning loses at most the
# executions since its run's last "#N" status line.  The binaries
# (build/fuzz/fuzz_TARGET), seeds, dictionaries, the program the raw-PT
# targets map (build/fuzz/ptprog) and the summary script are copied into
# DIR/bin/ first, so the worktree can be rebuilt meanwhile; executions are
# counted per binary (its sha1): a rebuilt target starts from 0.  In DIR (default /work/fuzzlogs):
#   runs/TARGET-START.log  each run's output, after a first line
#                        "# mt-campaign target= build= bin= start= secs="
#   campaign.log         one line per finished run: start time, target,
#                        executions, seconds, exec/s, build, "clean" (done or
#                        cut by its time), or the finding
#   status-TARGET        what runs now (target, start, wrapper and fuzzer
#                        pids, log)
#   log-TARGET.txt       a symlink to the target's last run log
#   corpus-TARGET/       the growing corpus (kept between campaigns)
#   TARGET-crash-*, -leak-*, -timeout-*, -oom-*   findings
# fuzz/campaign-summary.sh DIR prints every run and the totals.
#
# The whole script is one function, read before it runs: editing or checking
# out this file while a chain runs does not disturb it.
main() {
	cd "$(dirname "$0")/.." || exit 111
	. mk/build-dir.sh
	runs=10000000 dir=/work/fuzzlogs chunk=1800
	while getopts n:c:d: o; do
		case $o in
		n) runs=$OPTARG ;;
		c) chunk=$OPTARG ;;
		d) dir=$OPTARG ;;
		*) echo "usage: campaign.sh [-n RUNS] [-c SECONDS] [-d DIR] TARGET..." >&2; exit 2 ;;
		esac
	done
	shift $((OPTIND - 1))
	[ $# -gt 0 ] || { echo "campaign.sh: no targets" >&2; exit 2; }
	. fuzz/flags.sh
	B=$MT_BUILD/fuzz
	mkdir -p "$dir/bin" "$dir/runs" || exit 111
	dir=$(cd "$dir" && pwd)
	rev=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo +changes)
	for t in "$@"; do
		[ -x "$B/fuzz_$t" ] && [ -d "$B/seeds-$t" ] ||
			{ echo "campaign.sh: $B/fuzz_$t or its seeds missing (make fuzz fuzz-seeds)" >&2; exit 2; }
		cp "$B/fuzz_$t" "$dir/bin/" && rm -rf "$dir/bin/seeds-$t" && cp -r "$B/seeds-$t" "$dir/bin/" || exit 111
		[ -f "fuzz/$t.dict" ] && { cp "fuzz/$t.dict" "$dir/bin/" || exit 111; }
	done
	# shared by the invocations: replaced only when it differs
	if [ -f "$B/ptprog" ] && ! cmp -s "$B/ptprog" "$dir/bin/ptprog"; then
		cp "$B/ptprog" "$dir/bin/ptprog.$$" && mv "$dir/bin/ptprog.$$" "$dir/bin/ptprog"
	fi
	cmp -s fuzz/campaign-summary.sh "$dir/bin/campaign-summary.sh" ||
		{ cp fuzz/campaign-summary.sh "$dir/bin/cs.$$" && mv "$dir/bin/cs.$$" "$dir/bin/campaign-summary.sh"; } || exit 111
	export FUZZ_PT_IMAGE=$dir/bin/ptprog

	for t in "$@"; do
		mapfile -t extra < <(fuzz_flags "$t" | sed "s|^-dict=fuzz/|-dict=$dir/bin/|")
		mkdir -p "$dir/corpus-$t" || exit 111
		bin=$(sha1sum "$dir/bin/fuzz_$t" | cut -c1-12)
		while :; do
			have=$(bash "$dir/bin/campaign-summary.sh" -q -t "$t" -b "$bin" "$dir") || {
				echo "campaign.sh: $t: a run of this binary ($bin) found something: fix it first" >&2
				break
			}
			[ "$have" -lt "$runs" ] || break
			start=$(date +%s)
			log=$dir/runs/$t-$(date -u -d @"$start" '+%Y%m%dT%H%M%SZ').log
			echo "# mt-campaign target=$t build=$rev bin=$bin start=$start secs=$chunk" > "$log"
			ln -sfn "runs/${log##*/}" "$dir/log-$t.txt"
			# -runs counts the start-up replay of corpus and seeds too
			# (a few more executions than files: the empty input...)
			replay=$(($(find "$dir/corpus-$t" "$dir/bin/seeds-$t" -type f | wc -l) + 64))
			nice -n 19 "$dir/bin/fuzz_$t" -runs=$((runs - have + replay)) -max_total_time="$chunk" \
				-timeout=60 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/$t-" \
				"${extra[@]}" "$dir/corpus-$t" "$dir/bin/seeds-$t" >> "$log" 2>&1 &
			fpid=$!
			echo "$t started $(date -u -d @"$start" '+%F %T') build $rev bin $bin pid $$ fpid $fpid log $log" \
				> "$dir/status-$t"
			wait "$fpid"
			rc=$?
			secs=$(($(date +%s) - start))
			execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
			[ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
			if [ "$rc" -eq 0 ]; then
				res=clean
			elif grep -q 'libFuzzer: run interrupted' "$log" &&
				! grep -qE 'Test unit written to|FUZZ FINDING' "$log"; then
				res="interrupted (exit $rc)" # SIGINT/SIGTERM: its executions count
			else
				art=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | tail -1)
				why=$(grep -m1 -E 'FUZZ FINDING|ERROR: |runtime error' "$log" | cut -c1-160)
				res="FINDING exit $rc: ${why:-see log} (input ${art:-none})"
			fi
			printf '%s %s execs=%s seconds=%s exec/s=%s build=%s bin=%s %s\n' \
				"$(date -u -d @"$start" '+%F %T')" "$t" "${execs:-?}" "$secs" \
				"$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" "$rev" "$bin" "$res" >> "$dir/campaign.log"
			[ "$rc" -eq 0 ] || break
			# no mutated input in a whole run (the replay took it all):
			# more of the same would not get further
			[ "$(bash "$dir/bin/campaign-summary.sh" -q -t "$t" -b "$bin" "$dir")" -gt "$have" ] || {
				echo "campaign.sh: $t: a run of $chunk s executed no mutated input (-c too short?)" >&2
				break
			}
		done
		n=$(bash "$dir/bin/campaign-summary.sh" -q -t "$t" -b "$bin" "$dir") && why=done || why="stopped, a run found something"
		echo "$t $why $(date -u '+%F %T'): $n executions of bin $bin without a finding" > "$dir/status-$t"
	done
}
main "$@"; exit $?
