# mt-write's libFuzzer target is fuzz/fuzz_write.c, built with the other
# targets by mk/fuzz.mk; `make fuzz-write` builds just it.
.PHONY: fuzz-write
fuzz-write: build/fuzz/fuzz_write
