# Benchmarks: `make bench` builds and runs everything in bench/.
BENCH_BINS := $(BUILD)/bench/mtev_bench $(BUILD)/bench/ptdecode_bench

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

bench: all $(BENCH_BINS)
	$(BUILD)/bench/mtev_bench 10000000
	$(Q)for s in bench/*.sh; do [ -f "$$s" ] && sh "$$s" || exit 1; done; true
