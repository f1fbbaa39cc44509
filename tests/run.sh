#!/bin/sh
# run.sh UNIT... — run C unit tests (TAP) then every bats file; end with
# one line "N passed, N failed"; exit non-zero on any failure.
cd "$(dirname "$0")/.." || exit 111
log=$(mktemp); out=$(mktemp); cache=$(mktemp -d); trap 'rm -rf "$log" "$out" "$cache"' EXIT
# the tools' default cache (mt-segment's DWARF, mt-symbolize's names): the
# run's own, empty at its start, not the user's
export XDG_CACHE_HOME="$cache"
for t in "$@"; do
	echo "# unit: $t"
	"$t" </dev/null >"$out" 2>&1; rc=$?
	cat "$out"; cat "$out" >>"$log"
	# a unit binary that crashes or exits non-zero counts as a failure
	[ $rc -eq 0 ] || echo "not ok - $t exited with status $rc" | tee -a "$log"
done
if ls tests/*.bats >/dev/null 2>&1; then
	plan=$(bats --count tests/*.bats)
	{ bats --tap --timing tests/*.bats </dev/null 2>&1; echo "# bats exit status $?"; } | tee "$out" | tee -a "$log"
	# a bats run that dies part-way (killed, out of disk) must not pass
	# on the tests it got through: every planned test has a result
	got=$(grep -Ec '^(not )?ok [0-9]+ ' "$out")
	rc=$(sed -n 's/^# bats exit status \([0-9]*\)$/\1/p' "$out")
	if [ "$got" -ne "$plan" ] || { [ "$rc" != 0 ] && ! grep -q '^not ok ' "$out"; }; then
		echo "not ok - bats ran $got of $plan tests and exited with status $rc" | tee -a "$log"
	fi
fi
pass=$(grep -c '^ok ' "$log")
fail=$(grep -c '^not ok ' "$log")
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
