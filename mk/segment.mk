# mt-segment / mt-stitch / mt-compare: the golden tests' ELF (functions at
# fixed addresses, so hand-written streams can name them).
SEGFUNCS := $(BUILD)/tests/segment/segfuncs
$(SEGFUNCS): tests/golden/segment/funcs.S
	@mkdir -p $(dir $@)
	$(Q)$(CC) -nostdlib -static -no-pie -Wl,-Ttext=0x401000 -Wl,-e,start -Wl,--build-id=none -o $@ $<
TEST_PREREQS += $(SEGFUNCS)

# The same code assembled with DWARF (-g): mt-segment keeps its waypoints.
SEGFUNCS_DWARF := $(BUILD)/tests/segment-dwarf/segfuncs
$(SEGFUNCS_DWARF): tests/golden/segment/funcs.S
	@mkdir -p $(dir $@)
	$(Q)$(CC) -g -nostdlib -static -no-pie -Wl,-Ttext=0x401000 -Wl,-e,start -Wl,--build-id=none -o $@ $<
TEST_PREREQS += $(SEGFUNCS_DWARF)
