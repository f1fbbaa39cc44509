# mt — one Makefile.  `make` builds bin/, `make test` runs everything.
# V=1 for verbose commands; CI=true turns warnings into errors.

PREFIX ?= /usr/local
CC ?= cc
CXX ?= c++
OPT ?= -O2 -g
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla
ifeq ($(CI),true)
WARN += -Werror
endif
CFLAGS ?= $(OPT)
ALL_CFLAGS := -std=gnu11 $(CFLAGS) $(WARN) -D_GNU_SOURCE -Iformats -Ilibcommon -Ilibmagictrace -MMD -MP $(EXTRA_CFLAGS)
LDLIBS := -lipt -ldw -lelf -ljansson -lcapstone -lzstd -lz -lpthread
LDFLAGS ?=

Q := @
ifeq ($(V),1)
Q :=
endif

# The build tree: objects, libraries, test programs and unit tests (bin/
# holds the tools).  Exported to the tests and scripts as MT_BUILD
# (mk/build-dir.sh gives them the same default).
BUILD ?= build
export MT_BUILD := $(abspath $(BUILD))
LIBSRC := $(wildcard libcommon/*.c) $(wildcard formats/*.c)
LIBOBJ := $(LIBSRC:%.c=$(BUILD)/%.o)
LIB := $(BUILD)/libmt.a

# The test oracles (oracles/: mt-ptsim's tracer, synthesizer and writers,
# mt-ptgen's walk, mt-compare's scorer) are a library of their own, linked
# only by the tools and tests that judge the product, never into libmt.
ORACLE_SRC := $(wildcard oracles/*.c)
ORACLE_OBJ := $(ORACLE_SRC:%.c=$(BUILD)/%.o)
ORACLE_LIB := $(BUILD)/liboracles.a
ORACLE_TOOLS := bin/mt-ptsim bin/mt-ptgen bin/mt-compare

TOOLSRC := $(wildcard tools/*.c)
TOOLS := $(TOOLSRC:tools/%.c=bin/%)
SCRIPTS := $(wildcard pipelines/*)

MTLIB_OBJ := $(BUILD)/libmagictrace/magic_trace.o
MTLIB_PIC := $(BUILD)/libmagictrace/magic_trace.pic.o
MTLIB_A := $(BUILD)/libmagictrace.a
MTLIB_SO := $(BUILD)/libmagictrace.so

UNITSRC := $(wildcard tests/unit/test_*.c)
UNITS := $(UNITSRC:tests/unit/%.c=$(BUILD)/tests/%)

.SECONDARY:
.PHONY: all deps deps-check test unit bats asan install clean trace bench fuzz-smoke programs

# A plain build installs nothing: only `make deps`, and `make test` and
# `make trace` through it, may install packages.
all: $(TOOLS) $(MTLIB_A) $(MTLIB_SO) programs

# `make deps` installs what the project needs (as root) or says how.
deps:
	$(Q)sh tools/deps.sh install

deps-check:
	$(Q)sh tools/deps.sh check

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(LIB): $(LIBOBJ)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(ORACLE_LIB): $(ORACLE_OBJ)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

bin/%: $(BUILD)/tools/%.o $(LIB)
	@mkdir -p bin
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(ORACLE_TOOLS:bin/%=$(BUILD)/tools/%.o): ALL_CFLAGS += -Ioracles
$(ORACLE_TOOLS): bin/%: $(BUILD)/tools/%.o $(ORACLE_LIB) $(LIB)
	@mkdir -p bin
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(ORACLE_LIB) $(LIB) $(LDLIBS)

$(MTLIB_OBJ): libmagictrace/magic_trace.c libmagictrace/magic_trace.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<
$(MTLIB_PIC): libmagictrace/magic_trace.c libmagictrace/magic_trace.h
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -c -o $@ $<
$(MTLIB_A): $(MTLIB_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^
$(MTLIB_SO): $(MTLIB_PIC)
	$(Q)$(CC) -shared -Wl,-soname,libmagictrace.so.1 -o $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(ORACLE_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/unit -Ioracles $(LDFLAGS) -o $@ $< $(ORACLE_LIB) $(LIB) $(LDLIBS)

# Test programs traced by the tests (tests/programs/Makefile.inc lists them).
# Each part of the project adds its own rules in mk/<part>.mk; TEST_PREREQS
# collects what `make test` needs built first (e.g. cached mt-ptsim runs).
TEST_PREREQS :=
programs:
-include $(sort $(wildcard mk/*.mk))

unit: $(UNITS)

test: deps all $(UNITS) $(TEST_PREREQS)
	$(Q)sh tests/run.sh $(UNITS)

# The tests run bin/: the sanitized tools go there for the run, and the
# plain ones (from $(BUILD)) are put back after it, whatever its result.
# ASAN_GOAL is what runs sanitized (tests/asan-bin.sh checks the put-back
# with a short goal).
ASAN_GOAL ?= test
asan:
	rm -rf bin
	$(MAKE) $(ASAN_GOAL) OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" LDFLAGS="-fsanitize=address,undefined" BUILD=build-asan; \
	  st=$$?; rm -rf bin; $(MAKE) all && exit $$st

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 pipelines/mt $(DESTDIR)$(PREFIX)/bin/mt
	install -m 644 $(MTLIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(MTLIB_SO) $(DESTDIR)$(PREFIX)/lib/libmagictrace.so.1
	ln -sf libmagictrace.so.1 $(DESTDIR)$(PREFIX)/lib/libmagictrace.so
	install -m 644 libmagictrace/magic_trace.h $(DESTDIR)$(PREFIX)/include/
	sed 's|@PREFIX@|$(PREFIX)|g' libmagictrace/magictrace.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/magictrace.pc

clean:
	rm -rf $(BUILD) build-asan bin out

-include $(LIBOBJ:.o=.d) $(ORACLE_OBJ:.o=.d) $(TOOLSRC:tools/%.c=$(BUILD)/tools/%.d) $(UNITS:%=%.d)
