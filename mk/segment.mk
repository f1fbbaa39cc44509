# mt-segment / mt-stitch / mt-compare: the golden tests' ELF (functions at
# fixed addresses, so hand-written streams can name them).
SEGFUNCS := build/tests/segment/segfuncs
$(SEGFUNCS): tests/golden/segment/funcs.S
	@mkdir -p $(dir $@)
	$(Q)$(CC) -nostdlib -static -no-pie -Wl,-Ttext=0x401000 -Wl,-e,start -Wl,--build-id=none -o $@ $<
TEST_PREREQS += $(SEGFUNCS)

BENCH_BINS += $(BUILD)/bench/seg_gen
