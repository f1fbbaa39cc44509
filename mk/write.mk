# mt-write: a libFuzzer target for the trace writer (clang).  Not part of
# `make test`; `make fuzz-write` builds it (see fuzz/fuzz_write.c).
FUZZ_CC ?= clang-14
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE -Iformats -Ilibcommon

build/fuzz/fuzz_write: fuzz/fuzz_write.c $(wildcard libcommon/*.c libcommon/*.h formats/*.c formats/*.h)
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ fuzz/fuzz_write.c libcommon/tracewrite.c libcommon/fxt.c \
		libcommon/zsink.c libcommon/io.c formats/mtev.c formats/mtev_text.c $(LDLIBS)

.PHONY: fuzz-write
fuzz-write: build/fuzz/fuzz_write
