#!/bin/sh
# bench/decode-par.sh [REPS [JOBS]] — mt-decode -j 1 against -j JOBS
# (default 2): wall and CPU (user + sys) medians of REPS runs (default 5),
# interleaved, on the 50M trace (bench/pipeline.sh's: mt-ptgen's walk of
# build/programs/fnptr, 50M instructions, one thread) and on a four-thread
# mt-ptgen trace of the same program (20M instructions); the outputs of
# both settings must be identical.  The machine is shared: the load before
# and after is printed, and wall-clock ratios are only as good as it.
set -e
cd "$(dirname "$0")/.."
R=${1:-5}
J=${2:-2}
N=50M
. bench/ptgen-trace
T4=bench/out/par-20M-t4
if [ ! -f "$T4/perf.data" ] || [ bin/mt-ptgen -nt "$T4/perf.data" ] || [ "$BIN" -nt "$T4/perf.data" ]; then
	rm -rf "$T4"
	bin/mt-ptgen --no-spans --threads 4 -n 20M -o "$T4" "$BIN" >/dev/null 2>&1
fi
echo "bench/decode-par.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for d in "$D" "$T4"; do
	: >"$TMP/times"
	i=0
	while [ $i -lt "$R" ]; do
		for j in 1 "$J"; do
			/usr/bin/time -f "$j %e %U %S %M" -a -o "$TMP/times" \
				bin/mt-decode -j "$j" --buildid-dir "$d/images" -o "$TMP/j$j.mt" "$d/perf.data"
		done
		cmp -s "$TMP/j1.mt" "$TMP/j$J.mt" || { echo "decode-par.sh: -j $J output differs from -j 1 on $d" >&2; exit 1; }
		i=$((i + 1))
	done
	bin/mt-decode -s -j "$J" --buildid-dir "$d/images" -o /dev/null "$d/perf.data" 2>"$TMP/stats" || true
	awk -v d="$d" -v J="$J" -v st="$(grep parallel "$TMP/stats" | sed 's/^mt-decode: parallel: //')" '
		function med(v, k,   i, j, x) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x } return (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }
		$1 == 1 { w1[++a] = $2; c1[a] = $3 + $4; m1 = $5 }
		$1 == J { w2[++b] = $2; c2[b] = $3 + $4; m2 = $5 }
		END {
			W1 = med(w1, a); W2 = med(w2, b); C1 = med(c1, a); C2 = med(c2, b)
			printf "  %s: -j 1 %.2f s wall %.2f s cpu %d MB; -j %s %.2f s wall %.2f s cpu %d MB; wall %.2fx faster, cpu %.2fx; output identical (%s)\n",
				d, W1, C1, m1 / 1024, J, W2, C2, m2 / 1024, W1 / W2, C2 / C1, st
		}' "$TMP/times"
done
echo "  load after: $(cut -d' ' -f1-3 /proc/loadavg)"
