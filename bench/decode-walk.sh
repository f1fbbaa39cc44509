#!/bin/sh
# bench/decode-walk.sh [MT-DECODE]: the differential check of issue 20's
# cached walk.  Decodes bench/decode-identical.sh's whole corpus (every
# cached mt-ptsim run with and without images, the corrupt inputs, fuzz
# seeds and corpora (FUZZ_CORPUS), the Skylake fixture, raw mode) with
# `--decoder libipt` and `--decoder walk` and requires every byte written
# (output, stdout, stderr, exit code) to be the same; then the mt-ptgen
# traces in bench/out/ (bench/pipeline.sh, bench/walk.sh make them).
# Exit 1 on any difference.
set -u
cd "$(dirname "$0")/.." || exit 111
BIN=$(readlink -f "${1:-bin/mt-decode}")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for dec in libipt walk; do
	printf '#!/bin/sh\nexec "%s" --decoder %s "$@"\n' "$BIN" "$dec" > "$T/$dec"
	chmod +x "$T/$dec"
done
bench/decode-identical.sh "$T/libipt" "$T/walk"
rc=$?
n=0 bad=0
for p in bench/out/ptgen-*/perf.data; do
	[ -f "$p" ] || continue
	d=$(dirname "$p")
	for dec in libipt walk; do
		"$BIN" --decoder $dec --buildid-dir "$d/images" -s -o "$T/$dec.mt" "$p" 2> "$T/$dec.err"
		echo $? >> "$T/$dec.err"
	done
	n=$((n + 1))
	if cmp -s "$T/libipt.mt" "$T/walk.mt" && cmp -s "$T/libipt.err" "$T/walk.err"; then
		:
	else
		bad=$((bad + 1))
		echo "DIFFER: $p"
	fi
done
echo "decode-walk: mt-ptgen traces: $n, $bad differ"
[ "$rc" -eq 0 ] && [ "$bad" -eq 0 ]
