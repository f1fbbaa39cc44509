#!/bin/sh
# write-bench.sh [SPANS] — mt-write size and speed on a generated span stream
# (tests/write/gen-spans.awk: random trees on 8 threads, 3000 functions named
# by symbol records).  Prints bytes per span and spans written per second
# (best of 3, wall clock, reading MTEV included) for FXT with and without
# arguments, JSON, and compressed FXT.
# Run from the repository root after `make`: sh bench/write-bench.sh 1000000
set -e
cd "$(dirname "$0")/.."
n=${1:-1000000}
out=bench/out/write
mkdir -p "$out"
awk -v seed=9 -v threads=4 -v procs=2 -v spans=$((n / 8)) -v pool=3000 -v named=0 \
	-f tests/write/gen-spans.awk | bin/mt-undump > "$out/in.mt"
spans=$(bin/mt-dump -k span "$out/in.mt" | wc -l)
echo "write-bench: $spans spans; input $(stat -c %s "$out/in.mt") bytes of MTEV"
run() { # label output [mt-write options...]; output "-": stdout to /dev/null (CPU only)
	label=$1 o=$2
	shift 2
	best=
	for i in 1 2 3; do
		t0=$(date +%s%N)
		if [ "$o" = - ]; then
			bin/mt-write --force "$@" "$out/in.mt" > /dev/null
		else
			bin/mt-write "$@" -o "$o" "$out/in.mt"
		fi
		t1=$(date +%s%N)
		best=$(awk -v a="$best" -v b=$((t1 - t0)) 'BEGIN { print (a == "" || b < a) ? b : a }')
	done
	sz=0
	[ "$o" = - ] || sz=$(stat -c %s "$o")
	awk -v l="$label" -v sz="$sz" -v n="$spans" -v ns="$best" 'BEGIN {
		if (sz) printf "%-24s %11d bytes %6.1f bytes/span %6.3f s %11.0f spans/s\n", l, sz, sz / n, ns / 1e9, n / (ns / 1e9)
		else printf "%-24s %11s       %6s           %6.3f s %11.0f spans/s\n", l, "-", "-", ns / 1e9, n / (ns / 1e9) }'
	[ "$o" = - ] || rm -f "$o"
}
run fxt "$out/a.fxt"
run "fxt --no-args" "$out/b.fxt" --no-args
run json "$out/c.json"
run fxt.zst "$out/d.fxt.zst"
run fxt.gz "$out/e.fxt.gz"
run json.zst "$out/f.json.zst"
run "fxt > /dev/null" -
run "json > /dev/null" - -f json
rm -f "$out/in.mt"
