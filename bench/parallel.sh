#!/bin/sh
# bench/parallel.sh [INSNS [REPS]] — how the bare libipt block-decoder loop
# scales when the PT is cut at PSBs into chunks decoded by 2 threads
# (build/bench/ptdecode_bench par), on a one-thread and a four-thread
# mt-ptgen trace of build/programs/fnptr (INSNS, default 20M).  Each run
# first decodes serially, then in parallel, and checks that both decoded the
# same number of instructions without errors.  Median of REPS (default 3)
# wall-clock speedups; the machine is shared, so wall times are noisy.
set -e
cd "$(dirname "$0")/.."
. mk/build-dir.sh
N=${1:-20M}
R=${2:-3}
BIN=$MT_BUILD/programs/fnptr
BENCH=$MT_BUILD/bench/ptdecode_bench
[ -x "$BENCH" ] && [ -x bin/mt-ptgen ] && [ -x "$BIN" ] || { echo "parallel.sh: run make bench first" >&2; exit 2; }
mkdir -p bench/out
echo "bench/parallel.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 4; do
	D=bench/out/par-$N-t$t
	if [ ! -f "$D/perf.data" ] || [ bin/mt-ptgen -nt "$D/perf.data" ]; then
		rm -rf "$D"
		bin/mt-ptgen --no-spans --threads $t -n "$N" -o "$D" "$BIN"
	fi
	: >"$D/par.txt"
	i=0
	while [ $i -lt "$R" ]; do
		"$BENCH" par "$D/perf.data" "$D/images" 2 >>"$D/par.txt" ||
			{ echo "parallel.sh: parallel decode differs from serial" >&2; cat "$D/par.txt" >&2; exit 1; }
		i=$((i + 1))
	done
	awk -v t=$t -v n="$N" '
		/^serial/ { sw[++a] = $8; sc[a] = $11; ins = $4 }
		/^par/ { pw[++b] = $9; pc[b] = $12; ch = $3; if ($NF != "same") bad = 1 }
		function med(v, k,   i, j, x) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x } return (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }
		END {
			s = med(sw, a); p = med(pw, b)
			printf "  %s insns, %d PT queue(s), %d chunks: serial %.2f s wall (%.2f cpu), 2 threads %.2f s wall (%.2f cpu): %.2fx, output %s\n",
				n, t, ch, s, med(sc, a), p, med(pc, b), s / p, bad ? "DIFFERENT" : "same instructions"
		}' "$D/par.txt"
done
