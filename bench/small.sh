#!/bin/sh
# bench/small.sh [REPS [RUN]] — what a small trace costs each stage, where
# fixed costs (starting, reading the binaries' symbols and DWARF, starting
# llvm-symbolizer) are most of the work: CPU milliseconds (task-clock, mean
# of REPS runs, default 10, `perf stat -r`) of every stage on one cached
# mt-ptsim run (RUN, default tests/.cache/ptsim/clean/dynamic: a program
# linked to libc, whose debug file libc6-dbg holds), mt-segment without and
# with its DWARF cache, mt-symbolize without its cache (llvm-symbolizer
# started every run) and with it warm; the bare libipt loop on the same
# trace; each tool's --help (start-up alone).  Needs `make bench`, and
# `make test`'s mt-ptsim cache (without it: skipped, exit 0).
set -e
cd "$(dirname "$0")/.."
. mk/build-dir.sh
R=${1:-10}
RUN=${2:-tests/.cache/ptsim/clean/dynamic}
BARE=$MT_BUILD/bench/ptdecode_bench
# make bench runs every bench/*.sh: without the cache this one has nothing to run
[ -f "$RUN/perf.data" ] || { echo "small.sh: skipped: no $RUN/perf.data (make test builds the mt-ptsim cache)"; exit 0; }
[ -x "$BARE" ] || { echo "small.sh: $BARE missing: run make bench" >&2; exit 2; }
command -v perf >/dev/null || { echo "small.sh: perf missing" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
I=$RUN/images

# ms NAME CMD...: the mean task-clock of R runs of CMD (stdout discarded;
# exit 1, degraded output such as mt-symbolize's unnamed vdso, is success)
ms() {
	name=$1
	shift
	"$@" >/dev/null 2>"$TMP/err" || [ $? -eq 1 ] ||
		{ echo "small.sh: $name failed:" >&2; cat "$TMP/err" >&2; exit 1; }
	perf stat -x, -e task-clock -r "$R" -o "$TMP/stat" "$@" >/dev/null 2>&1 || true
	printf '| %s | %s |\n' "$name" "$(awk -F, '$3 == "task-clock" { printf "%.1f", $1 }' "$TMP/stat")"
}

bin/mt-decode --buildid-dir "$I" -o "$TMP/d.mt" "$RUN/perf.data" 2>/dev/null || [ $? -eq 1 ]
bin/mt-segment --no-cache --images "$I" -o "$TMP/s.mt" "$TMP/d.mt" 2>/dev/null
bin/mt-stitch -o "$TMP/t.mt" "$TMP/s.mt" 2>/dev/null
bin/mt-segment --cache-dir "$TMP/cache" --images "$I" "$TMP/d.mt" >/dev/null 2>&1
bin/mt-symbolize --cache-dir "$TMP/cache" --images "$I" -o "$TMP/y.mt" "$TMP/t.mt" 2>/dev/null || [ $? -eq 1 ]
echo "bench/small.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run: $RUN ($(wc -c <"$RUN/perf.data") bytes of perf.data, $(bin/mt-dump -k branch "$TMP/d.mt" | wc -l) branches); mean of $R"
echo
echo "| what | cpu ms |"
echo "|---|---:|"
ms "bare libipt block-decoder loop" "$BARE" bare "$RUN/perf.data" "$I"
ms "mt-decode" bin/mt-decode --buildid-dir "$I" "$RUN/perf.data"
ms "mt-segment --no-cache (reads the DWARF)" bin/mt-segment --no-cache --images "$I" "$TMP/d.mt"
ms "mt-segment, its DWARF cache warm" bin/mt-segment --cache-dir "$TMP/cache" --images "$I" "$TMP/d.mt"
ms "mt-stitch" bin/mt-stitch "$TMP/s.mt"
ms "mt-symbolize --no-cache (llvm-symbolizer every run)" bin/mt-symbolize --no-cache --images "$I" "$TMP/t.mt"
ms "mt-symbolize, its cache warm" bin/mt-symbolize --cache-dir "$TMP/cache" --images "$I" "$TMP/t.mt"
ms "mt-write" bin/mt-write --force "$TMP/y.mt"
for t in mt-decode mt-segment mt-stitch mt-symbolize mt-write; do
	ms "$t --help" "bin/$t" --help
done
ms "llvm-symbolizer, one address" sh -c 'echo 0x1000 | llvm-symbolizer --obj=/bin/true'
