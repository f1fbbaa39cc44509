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

bench: all $(BENCH_BINS) $(BUILD)/programs/fnptr
	$(BUILD)/bench/mtev_bench 10000000
	$(Q)for s in bench/*.sh; do [ -f "$$s" ] && sh "$$s" || exit 1; done; true
