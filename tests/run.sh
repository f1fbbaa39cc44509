#!/bin/sh
# run.sh UNIT... — run C unit tests (TAP) then every bats file; end with
# one line "N passed, N failed"; exit non-zero on any failure.
cd "$(dirname "$0")/.." || exit 111
log=$(mktemp); out=$(mktemp); trap 'rm -f "$log" "$out"' EXIT
for t in "$@"; do
	echo "# unit: $t"
	"$t" </dev/null >"$out" 2>&1; rc=$?
	cat "$out"; cat "$out" >>"$log"
	# a unit binary that crashes or exits non-zero counts as a failure
	[ $rc -eq 0 ] || echo "not ok - $t exited with status $rc" | tee -a "$log"
done
if ls tests/*.bats >/dev/null 2>&1; then
	bats --tap --timing tests/*.bats </dev/null 2>&1 | tee -a "$log"
fi
pass=$(grep -c '^ok ' "$log")
fail=$(grep -c '^not ok ' "$log")
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
