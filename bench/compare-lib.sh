# Sourced by bench/compare-outputs.sh and bench/compare-segment.sh: one()
# runs a tool of two builds ($OLD, $NEW) in $T and counts runs, same, diff.

# one LABEL TOOL ARGS... (OUT in ARGS is replaced by an output path):
# runs TOOL of both builds, compares output file, stdout, stderr, exit code
one() {
	local label=$1 tool=$2
	shift 2
	local v
	for v in old new; do
		local dir=$OLD
		[ $v = new ] && dir=$NEW
		local args=() a
		for a in "$@"; do
			case $a in
			OUT*) args+=("$T/$v.out${a#OUT}") ;;
			CACHE) args+=("$T/cache.$v") ;;
			*) args+=("$a") ;;
			esac
		done
		rm -f "$T/$v.out"*
		"$dir/$tool" "${args[@]}" > "$T/$v.stdout" 2> "$T/$v.stderr" < /dev/null
		echo $? > "$T/$v.rc"
		sed -i "s|$T/$v|T|g; s|$dir/||g" "$T/$v.stderr"
	done
	runs=$((runs + 1))
	local bad=
	cmp -s "$T/old.rc" "$T/new.rc" || bad="$bad exit($(cat "$T/old.rc")/$(cat "$T/new.rc"))"
	cmp -s "$T/old.stdout" "$T/new.stdout" || bad="$bad stdout"
	cmp -s "$T/old.stderr" "$T/new.stderr" || bad="$bad stderr"
	local f
	for f in "$T"/old.out*; do
		[ -e "$f" ] || continue
		local g=$T/new.out${f#"$T"/old.out}
		cmp -s "$f" "$g" || bad="$bad ${f#"$T"/old.}"
	done
	for f in "$T"/new.out*; do
		[ -e "$f" ] || continue
		[ -e "$T/old.out${f#"$T"/new.out}" ] || bad="$bad extra:${f#"$T"/new.}"
	done
	if [ -n "$bad" ]; then
		diff=$((diff + 1))
		echo "DIFF $label: $tool $*:$bad"
	else
		same=$((same + 1))
	fi
}

# cached_runs: "DIR LABEL" of every cached mt-ptsim run that has a perf.data,
# of the variants in $VARIANTS only when set ("clean window")
cached_runs() {
	local d v
	for d in tests/.cache/ptsim/*/*/; do
		v=${d#tests/.cache/ptsim/}
		v=${v%%/*}
		[ -z "${VARIANTS:-}" ] || case " $VARIANTS " in *" $v "*) ;; *) continue ;; esac
		[ -f "$d/perf.data" ] || continue
		v=${d#tests/.cache/ptsim/}
		echo "$d ${v%/}"
	done
}
