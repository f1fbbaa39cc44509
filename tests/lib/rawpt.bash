# Loaded by decode.bats and decode-walk.bats: a cached mt-ptsim run as raw
# PT (ptxed style) for mt-decode's raw mode (--pt FILE --image ...).  Needs
# $BIN.

# raw_pt D OUT: the PT bytes of run D's one AUXTRACE record into OUT
raw_pt() {
	local line off sz
	line=$("$BIN/mt-decode" --records "$1/perf.data" | grep ' AUXTRACE ' | head -1)
	off=${line%% *}
	sz=$(echo "$line" | sed 's/.*aux_size=\([0-9]*\).*/\1/')
	dd if="$1/perf.data" of="$2" bs=1 skip=$((off + 48)) count="$sz" 2>/dev/null
}

# image_args D: one --image FILE:OFFSET:SIZE@VADDR per executable map of run
# D, the file from the run's build-id cache
image_args() {
	local d=$1 k pid tm start len pgoff prot bid path f args=""
	while read -r k pid tm start len pgoff prot bid path; do
		path=${path#path=}; path=${path//\"/}
		f=$(ls "$d/images/$path/${bid#build_id=}/elf" "$d/images/$path/${bid#build_id=}/vdso" 2>/dev/null | head -1)
		args="$args --image $f:${pgoff#pgoff=}:${len#len=}@${start#start=}"
	done < <("$BIN/mt-decode" --buildid-dir "$d/images" "$d/perf.data" 2>/dev/null | "$BIN/mt-dump" -k map)
	echo "$args"
}
