#!/bin/sh
# Instruction counts (valgrind --tool=callgrind) of every stage on one trace:
# reproducible where CPU seconds are not (a shared 2-core VM, page faults
# that cost ~20 us each).  Complements bench/pipeline.sh (CPU, wall, RSS).
#
#   sh bench/instructions.sh [INSNS]     (default 5M; trace cached in bench/out/ptgen-INSNS)
#
# Counts are of each process alone (llvm-symbolizer, a child of mt-symbolize,
# is not counted: mt-symbolize runs with a warm cache, prepared by one run
# first, so it has nothing to ask).  Needs valgrind; skipped without it.
set -e
cd "$(dirname "$0")/.."
N=${1:-${BENCH_CG_INSNS:-5M}}
command -v valgrind >/dev/null 2>&1 || { echo "instructions.sh: valgrind not installed: skipped"; exit 0; }
. bench/ptgen-trace
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# the stages' inputs, made once
bin/mt-decode --buildid-dir "$D/images" -o "$TMP/dec.mt" "$D/perf.data"
bin/mt-segment -i "$TMP/dec.mt" -o "$TMP/seg.mt"
bin/mt-stitch -i "$TMP/seg.mt" -o "$TMP/st.mt"
bin/mt-symbolize --images "$D/images" --cache-dir "$TMP/cache" -o "$TMP/sym.mt" "$TMP/st.mt" || [ $? -eq 1 ]
# every function's waypoints (as if DWARF described the whole binary)
bin/mt-segment --stitch --all-waypoints -i "$TMP/dec.mt" -o "$TMP/sta.mt"
bin/mt-symbolize --images "$D/images" --cache-dir "$TMP/cache" "$TMP/sta.mt" >/dev/null || [ $? -eq 1 ]
NWPA=$(bin/mt-dump -k waypoint "$TMP/sta.mt" | wc -l)
BR=$(bin/mt-dump -k branch "$TMP/dec.mt" | wc -l)
NWP=$(bin/mt-dump -k waypoint "$TMP/st.mt" | wc -l)
NSP=$(bin/mt-dump -k span "$TMP/st.mt" | wc -l)

cg() { # name, command...
	name=$1
	shift
	valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$name" "$@" >/dev/null 2>"$TMP/$name.err" ||
		[ $? -eq 1 ] || { echo "instructions.sh: $name failed" >&2; cat "$TMP/$name.err" >&2; exit 1; }
	sed -n 's/^==[0-9]*== I *refs: *//p' "$TMP/$name.err" | tr -d , >"$TMP/$name.ir"
}
cg bare "$BARE" bare "$D/perf.data" "$D/images"
cg decode bin/mt-decode --buildid-dir "$D/images" "$D/perf.data"
cg walk bin/mt-decode --decoder walk --buildid-dir "$D/images" "$D/perf.data"
cg segment bin/mt-segment -i "$TMP/dec.mt"
cg stitch bin/mt-stitch -i "$TMP/seg.mt"
cg segstitch bin/mt-segment --stitch -i "$TMP/dec.mt"
cg symbolize bin/mt-symbolize --images "$D/images" --cache-dir "$TMP/cache" "$TMP/st.mt"
cg write bin/mt-write -o "$TMP/out.fxt" "$TMP/sym.mt"
cg segstitch_all bin/mt-segment --stitch --all-waypoints -i "$TMP/dec.mt"
# decode, segment and stitch in one process: one thread, and two (callgrind
# runs the threads one at a time; it counts both)
cg onestitch bin/mt-decode --stitch --segment-serial --buildid-dir "$D/images" "$D/perf.data"
cg onestitch_t bin/mt-decode --stitch --buildid-dir "$D/images" "$D/perf.data"
# symbolize and write in one process (what mt-symbolize | mt-write writes)
cg symtrace bin/mt-symbolize --trace --force --images "$D/images" --cache-dir "$TMP/cache" "$TMP/st.mt"
cg symbolize_all bin/mt-symbolize --images "$D/images" --cache-dir "$TMP/cache" "$TMP/sta.mt"

v() { cat "$TMP/$1.ir"; }
echo "bench/instructions.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), trace $D: $N instructions of $BIN,"
echo "  $BR branches -> $NSP spans + $NWP waypoints ($NWPA with --all-waypoints); callgrind instruction counts (millions)"
awk -v br="$BR" -v bare="$(v bare)" -v dec="$(v decode)" -v walk="$(v walk)" -v seg="$(v segment)" -v st="$(v stitch)" \
	-v ss="$(v segstitch)" -v sym="$(v symbolize)" -v wr="$(v write)" \
	-v ssa="$(v segstitch_all)" -v syma="$(v symbolize_all)" \
	-v one="$(v onestitch)" -v onet="$(v onestitch_t)" -v syt="$(v symtrace)" 'BEGIN {
	printf "\n| what | M instructions | per branch | vs mt-decode | vs bare loop |\n|---|---:|---:|---:|---:|\n"
	row("bare libipt block-decoder loop", bare)
	row("mt-decode", dec)
	row("mt-decode --decoder walk", walk)
	row("mt-segment", seg)
	row("mt-stitch", st)
	row("mt-segment --stitch", ss)
	row("mt-symbolize (warm cache)", sym)
	row("mt-write (fxt)", wr)
	row("pipeline: decode, segment, stitch, symbolize, write", dec + seg + st + sym + wr)
	row("pipeline: decode, segment --stitch, symbolize, write", dec + ss + sym + wr)
	row("mt-segment --stitch --all-waypoints", ssa)
	row("mt-symbolize of that (warm cache)", syma)
	row("pipeline: decode, segment --stitch --all-waypoints, symbolize, write", dec + ssa + syma + wr)
	row("pipeline: decode --decoder walk, segment, stitch, symbolize, write", walk + seg + st + sym + wr)
	row("pipeline: decode --decoder walk, segment --stitch, symbolize, write", walk + ss + sym + wr)
	row("pipeline: decode --decoder walk, segment --stitch --all-waypoints, symbolize, write", walk + ssa + syma + wr)
	row("mt-decode --stitch --segment-serial (decode, segment, stitch: one thread)", one)
	row("mt-decode --stitch (the segmenter in a thread of its own)", onet)
	row("pipeline: decode --stitch --segment-serial, symbolize, write", one + sym + wr)
	row("pipeline: decode --stitch, symbolize, write", onet + sym + wr)
	row("mt-symbolize --trace (warm cache; symbolize and write in one process)", syt)
	row("pipeline: decode --stitch --segment-serial, symbolize --trace", one + syt)
	row("pipeline: decode --stitch, symbolize --trace", onet + syt)
	printf "\nmt-decode vs the bare loop: %.3fx (goal >= 0.7x); pipeline vs mt-decode: %.2fx, with --stitch %.2fx, with --all-waypoints %.2fx (goal <= 2x)\n",
		bare / dec, (dec + seg + st + sym + wr) / dec, (dec + ss + sym + wr) / dec, (dec + ssa + syma + wr) / dec
	printf "pipeline vs the bare loop (issue 20: goal <= 1.5x): libipt path %.2fx, with --stitch %.2fx; walk %.2fx, with --stitch %.2fx, with --all-waypoints %.2fx\n",
		(dec + seg + st + sym + wr) / bare, (dec + ss + sym + wr) / bare,
		(walk + seg + st + sym + wr) / bare, (walk + ss + sym + wr) / bare, (walk + ssa + syma + wr) / bare
	printf "pipeline with mt-decode --stitch vs the bare loop: %.2fx (one thread: %.2fx)\n", (onet + sym + wr) / bare, (one + sym + wr) / bare
	printf "mt-decode --stitch | mt-symbolize --trace vs the bare loop: %.2fx (one thread: %.2fx)\n", (onet + syt) / bare, (one + syt) / bare
}
function row(what, n) { printf "| %s | %.1f | %.0f | %.2fx | %.2fx |\n", what, n / 1e6, n / br, n / dec, n / bare }'
