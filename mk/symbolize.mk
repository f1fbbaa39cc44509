# mt-symbolize: test programs (-O2 -g with known inlined helpers; stripped and
# debug-info-free copies; C++ names) and the unit test's extra needs.
SYM_PROGDIR := $(BUILD)/programs
SYM_PROGS := $(SYM_PROGDIR)/sym_inline $(SYM_PROGDIR)/sym_inline.stripped \
	$(SYM_PROGDIR)/sym_inline.nodebug $(SYM_PROGDIR)/sym_cxx

$(SYM_PROGDIR)/sym_inline: tests/programs/sym_inline.c
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O2 -g -fno-omit-frame-pointer -Wl,--build-id -o $@ $<
$(SYM_PROGDIR)/sym_inline.stripped: $(SYM_PROGDIR)/sym_inline
	$(Q)strip --strip-all -o $@ $<
$(SYM_PROGDIR)/sym_inline.nodebug: $(SYM_PROGDIR)/sym_inline
	$(Q)strip --strip-debug -o $@ $<
$(SYM_PROGDIR)/sym_cxx: tests/programs/sym_cxx.cpp
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -O2 -g -Wl,--build-id -o $@ $<

programs: $(SYM_PROGS)
TEST_PREREQS += $(SYM_PROGS)

# Benchmark stream generator (bench/symbolize.sh).
BENCH_BINS += $(BUILD)/bench/symbolize_gen
