# mt-ptgen (tools/mt-ptgen.c, oracles/ptgen.c): tests/ptgen.bats walks the
# static test program fnptr (glibc included: ~1000 functions of real code).
TEST_PREREQS += $(PROG_DIR)/fnptr
