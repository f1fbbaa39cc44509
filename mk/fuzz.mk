# Fuzzing: libFuzzer targets in fuzz/fuzz_*.c, built with clang (ASan + UBSan)
# against the library sources compiled again into $(BUILD)/fuzz/.
#
#   make fuzz            build every target ($(BUILD)/fuzz/fuzz_NAME)
#   make fuzz-smoke      run each target FUZZ_SECONDS (30) seconds, FUZZ_JOBS (2) at a time
#   make fuzz-run T=NAME run one target FUZZ_SECONDS seconds
#   make fuzz-campaign T="NAME..." RUNS=N  run targets to N executions each (FUZZ_DIR, resumable)
#   make fuzz-summary    every campaign run in FUZZ_DIR and the totals per target
#
# The corpus that grows while fuzzing is fuzz/corpus-NAME/ (git-ignored); the
# seeds are assembled from the tests into $(BUILD)/fuzz/seeds-NAME/ by
# fuzz/seeds.sh.  When clang's libFuzzer runtime is installed, the targets are
# built before `make test` and tests/robustness.bats replays the seed corpora
# and the kept findings tests/corrupt/fuzz-* once each (smoke.sh -r): no
# campaign runs in `make test`.

FUZZ_CC ?= clang
FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_SECONDS ?= 30
FUZZ_JOBS ?= 2
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -D_GNU_SOURCE \
	-Iformats -Ilibcommon -Ilibmagictrace -Ifuzz -MMD -MP
# The library is other parts' code: their warnings are theirs (gcc -Werror
# guards them); only the fuzz sources are held to -Werror here.
FUZZ_LIBWARN := $(filter-out -Werror,$(WARN))
FUZZ_LDFLAGS := $(FUZZ_SAN) -fsanitize=fuzzer -Wl,--wrap=read -Wl,--wrap=write

FUZZ_RUNTIME := $(wildcard $(shell $(FUZZ_CC) -print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-x86_64.a)
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_TARGETS := $(FUZZ_SRC:fuzz/fuzz_%.c=$(FUZZ_BUILD)/fuzz_%)
FUZZ_LIBOBJ := $(LIBSRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_LIB := $(FUZZ_BUILD)/libmt.a

.PHONY: fuzz fuzz-run fuzz-seeds fuzz-campaign fuzz-summary

ifneq ($(FUZZ_RUNTIME),)
TEST_PREREQS += fuzz fuzz-seeds
endif

# mt-cat and mt-decode built against the same sanitized library, without
# libFuzzer (LeakSanitizer checks them at exit): tests/hostile.bats runs their
# error paths and raw mode to catch leaks coming back.
FUZZ_LSAN_TOOLS := $(FUZZ_BUILD)/lsan/mt-cat $(FUZZ_BUILD)/lsan/mt-decode

fuzz: $(FUZZ_TARGETS) $(FUZZ_LSAN_TOOLS) $(FUZZ_BUILD)/ptprog

$(FUZZ_BUILD)/tools/%.o: tools/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LIBWARN) -c -o $@ $<

$(FUZZ_BUILD)/lsan/%: $(FUZZ_BUILD)/tools/%.o $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ $(LDLIBS)

$(FUZZ_BUILD)/libcommon/%.o: libcommon/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LIBWARN) -c -o $@ $<
$(FUZZ_BUILD)/formats/%.o: formats/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LIBWARN) -c -o $@ $<
$(FUZZ_BUILD)/fuzz/%.o: fuzz/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(WARN) -c -o $@ $<

# Speed only, no result changes: ptdecode's classifier caches at 256 entries
# each (the hot table is in struct ptd, 128 KiB zeroed per decode; the
# second level 1 MiB, a fresh mmap with its shadow poisoned per decode under
# ASan), the packet-less loop limit at 2^10 instructions (same path, 128
# times shorter runs and record queues: at most ~80 KiB of records, under
# ASan's 128 KiB primary allocations) and image files read into memory
# instead of mapped (PTD_FMAP_READ: a munmap per decode is a TLB shootdown,
# ~10% of an exec; the same bytes).  PTD_CC1 sizes struct ptd: every
# ptd*.o gets it.
$(FUZZ_BUILD)/libcommon/ptd%.o: FUZZ_CFLAGS += -DPTD_CC1=256 -DPTD_CC2_BITS=8 '-DPTD_MAX_SPIN=(1u << 10)' -DPTD_FMAP_READ

# The MTEV writer's buffer and a descriptor reader's first buffer at 4 KiB
# (64 KiB each, allocated, poisoned and quarantined per reader and writer
# under ASan): more flushes and refills of the same bytes.
$(FUZZ_BUILD)/formats/mtev.o: FUZZ_CFLAGS += -DW_BUFSZ=4096u -DR_BUFSZ=4096u

# The cached walk's block and instruction caches at 2^10 and 2^8 entries
# (4.5 MiB and 384 KiB allocated per decode at their default size: under
# ASan fresh mmaps, their shadow poisoned, page-faulted and quarantined per
# exec; no result depends on their size, and fuzz_ptwalk compares every
# byte with libipt's: the blocks are all dropped when 1,024 are made, which
# tests/decode-walk.bats runs against libipt on a trace of more).
$(FUZZ_BUILD)/libcommon/ptd_walk.o: FUZZ_CFLAGS += -DWB_BITS=10 -DWI_BITS=8

# mt-write's FXT buffer at 64 KiB (256 KiB per writer: over ASan's 128 KiB
# primary size, a fresh mmap per exec): more flushes of the same bytes.  (The
# JSON buffer stays: it holds three JROOM events.)
$(FUZZ_BUILD)/libcommon/fxt.o: FUZZ_CFLAGS += '-DBUF_SIZE=(64u * 1024)'
# Its function table starts at 16 entries, not 1024 (216 KiB: a fresh mmap per
# writer; the growth path runs more), and the JSON buffer (256 KiB, it must
# hold three JROOM events) is kept for the next writer, poisoned while parked
# (tw_json.c): ~1 mmap/munmap pair per exec instead of ~3.
$(FUZZ_BUILD)/libcommon/tracewrite.o: FUZZ_CFLAGS += -DTW_FN_INIT=16
$(FUZZ_BUILD)/libcommon/tw_json.o: FUZZ_CFLAGS += -DTW_JBUF_SPARE

$(FUZZ_LIB): $(FUZZ_LIBOBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/fuzz/fuzz_%.o $(FUZZ_BUILD)/fuzz/memfd.o $(FUZZ_LIB)
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_LDFLAGS) -o $@ $(filter %.o,$^) $(filter %.a,$^) $(LDLIBS)

# the raw-PT targets' shared setup (image, input file, options, output)
$(FUZZ_BUILD)/fuzz_ptdecode $(FUZZ_BUILD)/fuzz_ptwalk $(FUZZ_BUILD)/fuzz_ptresync: $(FUZZ_BUILD)/fuzz/ptfuzz.o
# the walk's targets' comparison of libipt's decode with the walk's
$(FUZZ_BUILD)/fuzz_ptwalk $(FUZZ_BUILD)/fuzz_ptwalkcpu: $(FUZZ_BUILD)/fuzz/walkcmp.o

# The program the raw-PT targets decode against (fuzz/ptprog.c: ~500 bytes of
# its own code, then 56 KiB of static glibc code it never runs, so that a
# corrupt TIP still lands in code) and mt-ptsim's recordings of it, the PT
# seeds of both targets (fuzz/seeds.sh): stepped once, then synthesized as
# tests/.cache's variants are (mk/ptsim.mk), --window shorter (the program
# runs ~13,000 instructions).
PTPROG := $(FUZZ_BUILD)/ptprog
PTPROG_SIM := $(FUZZ_BUILD)/ptsim
PTPROG_VARIANTS := clean window noretcomp overflow drop corrupt truncate tsx tsxdrop \
	pcclean pcslow pcdrop pccorrupt pctruncate pctsx
PTPROG_ARGS_window := --window 3000
PTPROG_ARGS_noretcomp := --noretcomp
PTPROG_ARGS_overflow := --inject overflow@50%
PTPROG_ARGS_drop := --inject drop@50%:64
PTPROG_ARGS_corrupt := --inject corrupt@50%:16
PTPROG_ARGS_truncate := --inject truncate-aux@50%
# MODE.TSX in every PSB+ (a cpu with TSX), clean and with bytes dropped
PTPROG_ARGS_tsx := --tsx
PTPROG_ARGS_tsxdrop := --tsx --inject drop@50%:64
# fuzz_ptwalkcpu's: per-cpu buffers whose cpu is handed to threads that do not
# exist (the same process's, another's with other code at the same addresses:
# its trace decodes to errors) for half of every 400 ns of trace (pcslow:
# 2 us), clean and faulted, a PSB every 256 bytes (the later option wins)
PTPROG_PC := --per-cpu --fake-switch 400 --psb-period 256
PTPROG_ARGS_pcclean := $(PTPROG_PC)
PTPROG_ARGS_pcslow := --per-cpu --fake-switch 2000 --psb-period 256
PTPROG_ARGS_pcdrop := $(PTPROG_PC) --inject drop@50%:64
PTPROG_ARGS_pccorrupt := $(PTPROG_PC) --inject corrupt@50%:16
PTPROG_ARGS_pctruncate := $(PTPROG_PC) --inject truncate-aux@50%
PTPROG_ARGS_pctsx := $(PTPROG_PC) --tsx
PTPROG_SEEDS := $(PTPROG_VARIANTS:%=$(PTPROG_SIM)/%/perf.data)

$(FUZZ_BUILD)/ptprog-code.bin: $(BUILD)/programs/recursion mk/fuzz.mk
	@mkdir -p $(dir $@)
	$(Q)objcopy -O binary -j .text $< $@.full && head -c 30720 $@.full > $@ && rm -f $@.full
$(PTPROG): fuzz/ptprog.c $(FUZZ_BUILD)/ptprog-code.bin mk/fuzz.mk
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -O1 -g -Wall -static -nostdlib -fno-stack-protector \
		'-DPTPROG_CODE="$(FUZZ_BUILD)/ptprog-code.bin"' -o $@ $<
$(PTPROG_SIM)/ptprog.run: $(PTPROG) | bin/mt-ptsim
	@mkdir -p $(dir $@)
	$(Q)bin/mt-ptsim --save-run $@ -- $< >/dev/null
$(PTPROG_SIM)/%/perf.data: $(PTPROG_SIM)/ptprog.run bin/mt-ptsim
	@mkdir -p $(dir $@)
	$(Q)bin/mt-ptsim --replay $< --psb-period 2048 $(PTPROG_ARGS_$*) -o $(dir $@) 2>/dev/null

# tests/decode.bats decodes the findings kept from it (tests/corrupt/*-ptprog.pt)
TEST_PREREQS += $(PTPROG)

# Seeds come from the tests (and mt-undump turns the golden text into MTEV).
fuzz-seeds: bin/mt-undump bin/mt-dump bin/mt-decode $(PTPROG_SEEDS)
	$(Q)sh fuzz/seeds.sh $(FUZZ_BUILD) $(FUZZ_SRC:fuzz/fuzz_%.c=%)

fuzz-smoke: fuzz fuzz-seeds
	$(Q)bash fuzz/smoke.sh -t $(FUZZ_SECONDS) -j $(FUZZ_JOBS) $(FUZZ_SRC:fuzz/fuzz_%.c=%)

fuzz-run: fuzz fuzz-seeds
	$(Q)bash fuzz/smoke.sh -t $(FUZZ_SECONDS) -j 1 $(T)

# A long campaign (fuzz/campaign.sh): target(s) T, RUNS mutated executions
# each, one after the other under nice -n 19, in runs of at most CHUNK seconds;
# resumable (run it again: it goes on from what FUZZ_DIR's runs counted);
# logs and corpora in FUZZ_DIR.  `make fuzz-summary` prints what they ran.
RUNS ?= 10000000
CHUNK ?= 1800
FUZZ_DIR ?= /work/fuzzlogs
fuzz-campaign: fuzz fuzz-seeds
	$(Q)bash fuzz/campaign.sh -n $(RUNS) -c $(CHUNK) -d $(FUZZ_DIR) $(T)
fuzz-summary:
	$(Q)bash fuzz/campaign-summary.sh $(FUZZ_DIR)

# One target alone, e.g. `make fuzz-write` (mt-write's, fuzz/fuzz_write.c).
.PHONY: fuzz-write
fuzz-write: $(FUZZ_BUILD)/fuzz_write



-include $(FUZZ_LIBOBJ:.o=.d) $(FUZZ_LSAN_TOOLS:$(FUZZ_BUILD)/lsan/%=$(FUZZ_BUILD)/tools/%.d) $(FUZZ_SRC:fuzz/%.c=$(FUZZ_BUILD)/fuzz/%.d) $(FUZZ_BUILD)/fuzz/memfd.d $(FUZZ_BUILD)/fuzz/ptfuzz.d $(FUZZ_BUILD)/fuzz/walkcmp.d
