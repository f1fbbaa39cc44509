# Benchmarks: `make bench` builds and runs everything in bench/.
# bench/pipeline.sh (the issue-9 table: bare libipt loop, mt-decode, perf
# script, the whole pipeline, peak RSS) walks $(BUILD)/programs/fnptr with
# mt-ptgen; BENCH_INSNS (default 50M) and BENCH_REPS (default 3) size it.
# Every benchmark program, here only: bench/NAME.c -> $(BUILD)/bench/NAME
# (seg_gen feeds bench/segment.sh, symbolize_gen bench/symbolize.sh).
BENCH_BINS := $(BUILD)/bench/mtev_bench $(BUILD)/bench/ptdecode_bench $(BUILD)/bench/seg_gen \
	$(BUILD)/bench/symbolize_gen $(BUILD)/bench/dwcov_libdw $(BUILD)/bench/loadlat

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The benchmarks that run alone with their defaults; the others compare two
# builds (compare-*.sh, decode-ab.sh, decode-identical.sh, symbolize-json.sh),
# build a corpus (corpus.sh, symbolize_big.sh) or read make test's mt-ptsim
# cache (decode-keep, decode-walk, fidelity, resync, small, stacks): run them by hand.
BENCH_SCRIPTS := pipeline walk decode decode-par parallel instructions \
	segment symbolize write-bench

bench: all $(BENCH_BINS) $(BUILD)/programs/fnptr
	$(BUILD)/bench/mtev_bench 10000000
	$(Q)for s in $(BENCH_SCRIPTS); do sh bench/$$s.sh || exit 1; done
