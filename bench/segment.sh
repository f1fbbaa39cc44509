#!/bin/sh
# mt-segment / mt-stitch: peak RSS per branch record and time against the
# number of branch records (synthetic streams from bench/seg_gen).
# Usage: sh bench/segment.sh [N...]   (default: 1M 2M 4M 8M branches)
set -e
cd "$(dirname "$0")/.."
. mk/build-dir.sh
GEN=$MT_BUILD/bench/seg_gen
[ -x "$GEN" ] || make -s "$GEN"
out=${TMPDIR:-/tmp}/mt-segbench.$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
sizes=${*:-1000000 2000000 4000000 8000000}
printf '%-9s %-7s %7s %10s %12s %10s %10s %9s %9s\n' branches callpct in_MB peakRSS_MB RSS_B/branch wall_ns/br cpu_ns/br stitch_MB stitch_s
for pct in 30 50; do
	for n in $sizes; do
		"$GEN" "$n" 1 "$pct" > "$out/in.mt"
		/usr/bin/time -f '%M %e %U %S' -o "$out/t" bin/mt-segment --no-symbols -i "$out/in.mt" -o "$out/seg.mt"
		read -r kb secs us ss < "$out/t"
		/usr/bin/time -f '%M %e' -o "$out/t2" bin/mt-stitch -i "$out/seg.mt" -o /dev/null
		read -r kb2 secs2 < "$out/t2"
		insz=$(stat -c %s "$out/in.mt")
		awk -v n="$n" -v kb="$kb" -v s="$secs" -v sz="$insz" -v pct="$pct" -v s2="$secs2" \
			-v cpu="$us $ss" -v kb2="$kb2" 'BEGIN { split(cpu, c, " ");
			printf "%-9d %-7d %7.1f %10.1f %12.1f %10.0f %10.0f %9.1f %9.2f\n", n, pct, sz / 1048576, kb / 1024,
				kb * 1024 / n, s * 1e9 / n, (c[1] + c[2]) * 1e9 / n, kb2 / 1024, s2 }'
	done
done
