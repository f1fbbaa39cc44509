# Test programs traced by mt-ptsim and the stages after it: tests/programs/NAME.c
# (or .cc) -> build/programs/NAME.  Each stresses one thing (see its header).
# Most are static so that a traced run stays small; dynamic is the
# dynamically linked program (lazy PLT binding); exception is dynamic too
# (a static C++ unwinder sorts every FDE on the first throw: millions of
# instructions) and is traced from main (mk/ptsim.mk).
PROG_DIR := $(BUILD)/programs
PROG_C := $(wildcard tests/programs/*.c)
PROG_CC := $(if $(shell command -v $(CXX) 2>/dev/null),$(wildcard tests/programs/*.cc))
PROGS := $(PROG_C:tests/programs/%.c=$(PROG_DIR)/%) $(PROG_CC:tests/programs/%.cc=$(PROG_DIR)/%)
PROG_NAMES := $(notdir $(PROGS))

PROG_OPT_default := -O1 -g
PROG_OPT_tailcall := -O2 -g
PROG_OPT_inline := -O2 -g
PROG_LINK_default := -static
PROG_LINK_dynamic := -Wl,-z,lazy
PROG_LINK_threads := -static -pthread
PROG_LINK_exception := -Wl,-z,lazy
PROG_LIBS_snapshot := $(MTLIB_A)

prog_opt = $(or $(PROG_OPT_$(1)),$(PROG_OPT_default))
prog_link = $(or $(PROG_LINK_$(1)),$(PROG_LINK_default))

programs: $(PROGS)

$(PROG_DIR)/%: tests/programs/%.c $(MTLIB_A) mk/programs.mk
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(call prog_opt,$*) -Wall -Ilibmagictrace -o $@ $< $(PROG_LIBS_$*) $(call prog_link,$*)

$(PROG_DIR)/%: tests/programs/%.cc mk/programs.mk
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CXX     $@")
	$(Q)$(CXX) $(call prog_opt,$*) -Wall -o $@ $< $(call prog_link,$*)
