#!/usr/bin/env bash
# campaign-summary.sh [-t TARGET] [-b BIN] [-q] DIR... — what the campaigns in
# DIR (fuzz/campaign.sh -d DIR) ran: one line per run, then per target and
# build the executions and whether any run found something.
#
# A run is one libFuzzer process, its output in DIR/runs/TARGET-START.log (its
# first line "# mt-campaign target=T build=COMMIT bin=SHA start=EPOCH" names
# what ran).  Its executions: libFuzzer's final stat::number_of_executed_units
# when it ended (done, interrupted by SIGINT/SIGTERM, or a finding), else the
# last "#N" status line it printed (a run killed with SIGKILL, or still
# running: at most the executions since that line are not counted).  "new" is
# that minus the executions of its start-up replay of the corpus and seeds
# (the "#N INITED" line; 0 before it): the mutated inputs, what a 10-million campaign
# counts (docs/fuzz.md).  Older campaign directories (DIR/log-TARGET*.txt,
# one run per target, the build from DIR/campaign.log or DIR/status) are read
# too, with bin "-".
#
# -t TARGET, -b BIN: only the runs of that target / binary (sha1 prefix of
# DIR/bin/fuzz_TARGET, 12 digits).  -q: print only the sum of "new" over the
# selected runs that found nothing (what campaign.sh resumes from).
# Exit status: 0, or 1 when a selected run found something.
tsel="" bsel="" quiet=0
while getopts t:b:q o; do
	case $o in
	t) tsel=$OPTARG ;;
	b) bsel=$OPTARG ;;
	q) quiet=1 ;;
	*) echo "usage: campaign-summary.sh [-t TARGET] [-b BIN] [-q] DIR..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "campaign-summary.sh: no directory" >&2; exit 2; }

# one line per run: target build bin start execs new state log
runs() {
	local d f t b st rpid
	for d in "$@"; do
		[ -d "$d" ] || { echo "campaign-summary.sh: $d: not a directory" >&2; continue; }
		# the running run of each target (status-TARGET, or the old
		# single status file): "... pid PID ... log LOG"
		for f in "$d"/runs/*.log "$d"/log-*.txt; do
			[ -f "$f" ] && [ ! -L "$f" ] || continue
			rpid=""
			if [ "${f#"$d"/runs/}" != "$f" ]; then
				t=$(sed -n '1s/^# mt-campaign .*target=\([^ ]*\).*/\1/p' "$f")
				st=$(cat "$d"/status-"$t" 2>/dev/null)
				[[ $st == *"log $f"* ]] && rpid=$(sed -n 's/.* fpid \([0-9]*\).*/\1/p' <<<"$st")
				[ -n "$rpid" ] && [ -d "/proc/$rpid" ] || rpid=""
			else
				t=${f##*/log-}
				t=${t%.txt}
				t=${t%%-stopped-*}
				b=$(grep -E "^[0-9-]+ [0-9:]+ $t execs=" "$d/campaign.log" 2>/dev/null |
					tail -1 | sed -n 's/.* build=\([^ ]*\).*/\1/p')
				[ -n "$b" ] || b=$(sed -n "s/^$t started .* build \([^ ]*\).*/\1/p" "$d/status" 2>/dev/null)
			fi
			awk -v file="$f" -v tgt="$t" -v build="${b:-?}" -v rpid="$rpid" '
				NR == 1 && /^# mt-campaign / {
					for (i = 3; i <= NF; i++) {
						split($i, kv, "=")
						m[kv[1]] = kv[2]
					}
					tgt = m["target"]; build = m["build"]; bin = m["bin"]; start = m["start"]
					next
				}
				/^#[0-9]+[ \t]/ { n = substr($1, 2) + 0; last = n; if ($2 == "INITED") { inited = n; init_seen = 1 } }
				/^stat::number_of_executed_units:/ { final = $2 + 0; have_final = 1 }
				/^Done [0-9]+ runs in/ { done = 1 }
				/libFuzzer: run interrupted/ { intr = 1 }
				# a slow unit (libFuzzer reports an input over 10 s of wall
				# time, far below the -timeout) is no finding: a loaded machine
				# descheduling a nice-19 run gives them
				/Test unit written to/ && !/slow-unit-/ { found = 1 }
				/FUZZ FINDING|^==[0-9]+==ERROR|runtime error:|ERROR: libFuzzer|^SUMMARY: / { found = 1 }
				END {
					execs = have_final ? final : last + 0
					state = found ? "FINDING" : done ? "done" : intr ? "interrupted" \
						: rpid != "" ? "running" : "killed"
					if (bin == "") bin = "-"
					if (start == "") start = "-"
					printf "%s %s %s %s %d %d %s %s\n", tgt, build, bin, start, execs,
						init_seen ? execs - inited : 0, state, file
				}' "$f"
		done
	done | while read -r t b bin start rest; do
		[ "$start" = - ] || start=$(date -u -d "@$start" '+%m-%dT%H:%M')
		echo "$t $b $bin $start $rest"
	done
}

mapfile -t lines < <(runs "$@" | awk -v t="$tsel" -v b="$bsel" '(t == "" || $1 == t) && (b == "" || $3 == b)')
found=0
for l in "${lines[@]}"; do
	[[ $l == *" FINDING "* ]] && found=1
done
if [ "$quiet" = 1 ]; then
	printf '%s\n' "${lines[@]}" | awk '$7 != "FINDING" { s += $6 } END { print s + 0 }'
	exit $found
fi
printf '%s\n' "${lines[@]}" | awk '
	NF >= 8 {
		if (!hdr++)
			printf "%-10s %-14s %-12s %-11s %12s %12s  %s\n", "target", "build", "bin", "start",
				"execs", "new", "state (log)"
		printf "%-10s %-14s %-12s %-11s %12d %12d  %s (%s)\n", $1, $2, $3, $4, $5, $6, $7, $8
	}
	END { if (!hdr) print "no runs" }'
echo
printf '%-10s %-12s %-14s %5s %12s %12s  %s\n' target bin build runs execs new result
printf '%s\n' "${lines[@]}" | awk '
	NF >= 8 {
		k = $1 " " $3 " " $2
		runs[k]++; ex[k] += $5; nw[k] += $6
		if ($7 == "FINDING") fd[k]++
		if ($7 == "running") rn[k]++
	}
	END {
		for (k in runs) {
			split(k, p, " ")
			printf "%-10s %-12s %-14s %5d %12d %12d  %s%s\n", p[1], p[2], p[3], runs[k], ex[k], nw[k],
				fd[k] ? fd[k] " run(s) found something" : "nothing found", rn[k] ? ", running" : ""
		}
	}' | sort
exit $found
