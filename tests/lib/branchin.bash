# Loaded by chain.bats, exact.bats and segment-ptsim.bats: the branch stream
# a cached mt-ptsim run gives the later stages.  Needs $BIN.

# branch_input D SRC OUT: run D's branches into OUT, from SRC: truth (its
# truth.mt) or decode (mt-decode of its perf.data with its images; stderr
# dropped, a failed decode leaves what it wrote for the caller to judge)
branch_input() {
	if [ "$2" = truth ]; then
		cp "$1/truth.mt" "$3"
	else
		"$BIN/mt-decode" --buildid-dir "$1/images" -o "$3" "$1/perf.data" 2>/dev/null || true
	fi
}
