#!/usr/bin/env bash
# symbolize-gen.sh PROG BASE FUNC...
# Writes (mt-undump text) a span + waypoint stream of one thread of a process
# that has PROG's loadable segments mapped at BASE + their virtual address
# (BASE must be 0 for a non-PIE executable): a root span for main, then for each
# FUNC a depth-1 span with one waypoint per instruction, in address order, 10
# ns apart.  Each direct call inside FUNC to a function of PROG becomes a
# depth-2 span (callsite = the call) with a waypoint per instruction of the
# callee.  Addresses come from objdump, not from mt.
set -euo pipefail
prog=$1 base=$(( $2 )); shift 2
pid=4242
dis=$(objdump -d --no-show-raw-insn "$prog")
insns() { # FUNC -> "ADDR MNEMONIC CALLEE" lines (hex addresses without 0x), padding excluded
	local end=$(( 0x$(sym "$1") + 0x$(nm -S "$prog" | awk -v f="$1" '$4 == f { print $2; exit }') ))
	printf '%s\n' "$dis" | awk -v f="<$1>:" '
		$2 == f { on = 1; next }
		on && NF == 0 { exit }
		on { a = $1; sub(":", "", a); t = ""
		     if ($2 == "call" && match($0, /<[^>+@]*>/)) t = substr($0, RSTART + 1, RLENGTH - 2)
		     print a, $2, t }' | while read -r a m t; do
		[ $(( 0x$a )) -lt $end ] && echo "$a $m $t"; done
}
sym() { nm "$prog" | awk -v f="$1" '$3 == f { print $1; exit }'; }
hex() { printf '0x%x' "$1"; }
bid=$(readelf -n "$prog" | awk '/Build ID/ { print $3 }')
echo 'mtev version=1 producer="symbolize-gen" flags=0x3'
echo "process pid=$pid name=\"$(basename "$prog")\""
echo "thread pid=$pid tid=$pid time=0 name=\"main\""
readelf -lW "$prog" | awk '$1 == "LOAD" { print $2, $3, $6 }' | while read -r off va msz; do
	s=$(( (va & ~0xfff) )); e=$(( (va + msz + 0xfff) & ~0xfff ))
	echo "map pid=$pid time=0 start=$(hex $((base + s))) len=$(hex $((e - s))) pgoff=$(hex $((off & ~0xfff))) prot=0x5 build_id=${bid:--} path=\"$prog\""
done
echo "span tid=$pid depth=0 begin=0 end=1000000000 func=$(hex $((base + 0x$(sym main)))) callsite=0x0 flags=0 name=\"\""
t=1000
for f in "$@"; do
	mapfile -t L < <(insns "$f")
	[ "${#L[@]}" -gt 0 ] || { echo "symbolize-gen: no function $f in $prog" >&2; exit 2; }
	begin=$t
	end=$(( t + 1000 * ${#L[@]} ))
	echo "span tid=$pid depth=1 begin=$begin end=$end func=$(hex $((base + 0x$(sym "$f")))) callsite=0x0 flags=0 name=\"\""
	for l in "${L[@]}"; do
		read -r a m callee <<<"$l"
		echo "waypoint tid=$pid depth=1 time=$t addr=$(hex $((base + 0x$a)))"
		if [ "$m" = call ] && [ -n "$callee" ] && [ -n "$(sym "$callee")" ]; then
			mapfile -t C < <(insns "$callee")
			echo "span tid=$pid depth=2 begin=$t end=$(( t + ${#C[@]} + 1 )) func=$(hex $((base + 0x$(sym "$callee")))) callsite=$(hex $((base + 0x$a))) flags=0 name=\"\""
			ct=$t
			for cl in "${C[@]}"; do
				read -r ca _ _ <<<"$cl"
				ct=$(( ct + 1 ))
				echo "waypoint tid=$pid depth=2 time=$ct addr=$(hex $((base + 0x$ca)))"
			done
		fi
		t=$(( t + 1000 ))
	done
	t=$(( end + 1000 ))
done
echo end
