# mt-ptsim cache: one single-stepped run per test program, re-synthesized
# (mt-ptsim --replay, no stepping) into each variant.  Layout (docs/ptsim.md):
#   tests/.cache/ptsim/runs/PROG.run                 the execution log
#   tests/.cache/ptsim/VARIANT/PROG/{perf.data,truth.mt,truth-spans.mt,images/}
# perf.data is written last, so it is the target of each variant.
PTSIM_CACHE := tests/.cache/ptsim
PTSIM_VARIANTS := clean window noretcomp overflow drop corrupt truncate
# A PSB every ~2 KB so that every program's stream has several sync points
# (faults need one after them); the same for all variants, so that the faulted
# variants' truth is the clean one.
PTSIM_COMMON := --psb-period 2048
PTSIM_ARGS_clean :=
PTSIM_ARGS_window := --window 10000
PTSIM_ARGS_noretcomp := --noretcomp
PTSIM_ARGS_overflow := --inject overflow@50%
PTSIM_ARGS_drop := --inject drop@50%:64
PTSIM_ARGS_corrupt := --inject corrupt@50%:16
PTSIM_ARGS_truncate := --inject truncate-aux@50%
# Per-program options of the stepped run.
PTSIM_RUN_exception := --start-at main

# The stepped programs get one fixed environment (no PWD, no CI variables):
# what a run executes depends on its stack's contents (the environment's
# strings move everything above them), and every clone and every CI run
# steps them anew, so that runs are the same wherever the tree lies on one
# kind of machine (libc's cpu-chosen string functions still differ between
# kinds; threads and signals still interleave as the scheduler has it).
PTSIM_ENV := env -i PATH=/usr/bin:/bin LC_ALL=C

PTSIM_RUNS := $(PROG_NAMES:%=$(PTSIM_CACHE)/runs/%.run)
PTSIM_OUTS := $(foreach v,$(PTSIM_VARIANTS),$(PROG_NAMES:%=$(PTSIM_CACHE)/$(v)/%/perf.data))
PTCHECK := $(BUILD)/tests/ptcheck

$(PTSIM_CACHE)/runs/%.run: $(PROG_DIR)/% oracles/ptsim_trace.c oracles/ptsim.h | bin/mt-ptsim
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  PTSIM   $@")
	$(Q)$(PTSIM_ENV) bin/mt-ptsim $(PTSIM_RUN_$*) --save-run $@ -- $< >/dev/null

define ptsim_variant
$(PTSIM_CACHE)/$(1)/%/perf.data: $(PTSIM_CACHE)/runs/%.run bin/mt-ptsim
	@mkdir -p $$(dir $$@)
	$(Q)bin/mt-ptsim --replay $$< $(PTSIM_COMMON) $(PTSIM_ARGS_$(1)) -o $$(dir $$@) 2>/dev/null
endef
$(foreach v,$(PTSIM_VARIANTS),$(eval $(call ptsim_variant,$(v))))

$(PTCHECK): tests/ptsim/ptcheck.c $(LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

.PRECIOUS: $(PTSIM_CACHE)/runs/%.run
.PHONY: ptsim-cache
ptsim-cache: $(PTSIM_OUTS)

TEST_PREREQS += $(PTCHECK) $(PTSIM_OUTS)

SPANCHECK := $(BUILD)/tests/spancheck
$(SPANCHECK): tests/ptsim/spancheck.c $(LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB) $(LDLIBS)
TEST_PREREQS += $(SPANCHECK)

# Exactness reproducers (tests/programs/exact/, tests/exact.bats,
# docs/exactness.md): real libc/libstdc++ code paths (PLT stubs, .cold
# landing pads, signal frames, the unwinder, ld.so's hand-off).  Built here,
# stepped once into tests/.cache/ptsim-exact/runs/, replayed by the tests.
EXACT_DIR := $(PROG_DIR)/exact
EXACT_CACHE := tests/.cache/ptsim-exact
EXACT_NAMES := qsort callbacks except except_O0 sigwork stl coldjcc retgap twocall coldpart
EXACT_CFLAGS_qsort := -O2 -g -Wl,-z,lazy
EXACT_CFLAGS_callbacks := -O2 -g -fcf-protection=full -Wl,-z,ibtplt -Wl,-z,now
EXACT_CFLAGS_sigwork := -O1 -g -static
# stripped: only FDEs name its functions (main stays in .dynsym for --start-at)
EXACT_CFLAGS_coldjcc := -O2 -s -Wl,--export-dynamic-symbol=main
EXACT_CFLAGS_coldpart := -O2 -s -Wl,--export-dynamic-symbol=main
EXACT_CFLAGS_retgap := -O2 -g
EXACT_CFLAGS_twocall := -O2 -g
EXACT_CXXFLAGS_except := -O2 -g
EXACT_CXXFLAGS_except_O0 := -O0 -g
# qsort is stepped from its first instruction (ld.so's hand-off to _start);
# the others from main.
EXACT_RUN_callbacks := --start-at main
EXACT_RUN_except := --start-at main
EXACT_RUN_except_O0 := --start-at main
EXACT_RUN_sigwork := --start-at main
EXACT_RUN_stl := --start-at main
EXACT_RUN_coldjcc := --start-at main
EXACT_RUN_coldpart := --start-at main
EXACT_RUN_retgap := --start-at run
EXACT_RUN_twocall := --start-at main --stop-at stop

$(EXACT_DIR)/%: tests/programs/exact/%.c mk/ptsim.mk
	@mkdir -p $(dir $@)
	$(Q)$(CC) -Wall $(EXACT_CFLAGS_$*) -o $@ $<
$(EXACT_DIR)/except: tests/programs/exact/except.cc mk/ptsim.mk
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -Wall $(EXACT_CXXFLAGS_except) -o $@ $<
$(EXACT_DIR)/stl: tests/programs/exact/stl.cc mk/ptsim.mk
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -Wall -O2 -g -o $@ $<
$(EXACT_DIR)/except_O0: tests/programs/exact/except.cc mk/ptsim.mk
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -Wall $(EXACT_CXXFLAGS_except_O0) -o $@ $<

$(EXACT_CACHE)/runs/%.run: $(EXACT_DIR)/% oracles/ptsim_trace.c oracles/ptsim.h | bin/mt-ptsim
	@mkdir -p $(dir $@)
	$(Q)$(PTSIM_ENV) bin/mt-ptsim $(EXACT_RUN_$*) --save-run $@ -- $< >/dev/null

.PRECIOUS: $(EXACT_CACHE)/runs/%.run
EXACT_RUNS := $(EXACT_NAMES:%=$(EXACT_CACHE)/runs/%.run)
.PHONY: exact-cache
exact-cache: $(EXACT_RUNS)
TEST_PREREQS += $(EXACT_RUNS)

# mt-ptgen (tools/mt-ptgen.c, oracles/ptgen.c): tests/ptgen.bats walks the
# static test program fnptr (glibc included: ~1000 functions of real code).
TEST_PREREQS += $(PROG_DIR)/fnptr
