# mt-symbolize: test programs (-O2 -g with known inlined helpers; stripped and
# debug-info-free copies; C++ names, PIE).
SYM_PROGDIR := $(PROG_DIR)
SYM_PROGS := $(SYM_PROGDIR)/sym_inline $(SYM_PROGDIR)/sym_inline.stripped \
	$(SYM_PROGDIR)/sym_inline.nodebug $(SYM_PROGDIR)/sym_cxx

# sym_inline is built (static, like the other traced programs) and traced by
# mk/programs.mk and mk/ptsim.mk; only its optimization level is ours.
PROG_OPT_sym_inline := -O2 -g
$(SYM_PROGDIR)/sym_inline.stripped: $(SYM_PROGDIR)/sym_inline
	$(Q)strip --strip-all -o $@ $<
$(SYM_PROGDIR)/sym_inline.nodebug: $(SYM_PROGDIR)/sym_inline
	$(Q)strip --strip-debug -o $@ $<
$(SYM_PROGDIR)/sym_cxx: tests/programs/sym_cxx.cpp
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -O2 -g -Wl,--build-id -o $@ $<

programs: $(SYM_PROGS)
TEST_PREREQS += $(SYM_PROGS)
