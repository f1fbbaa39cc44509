# make trace PROG=path [ARGS="..."] [MODE=auto|pt|sample|singlestep] [TRIGGER=...]
#
# The mt pipeline as make rules, one file per stage under $(TRACE_DIR):
#   capture/ (perf.data, hits.mt)  mt-capture
#   decode.mt                      mt-decode, with the trigger hits appended (mt-cat)
#   segment.mt stitch.mt symbolize.mt
#   trace.fxt                      mt-write
# Each file depends on the one before it, on its stage's program and on its
# stage's command line (kept in .cmd files), so changing one stage re-runs
# only that stage and the ones after it.  Swap a stage with a variable, e.g.
#   MT_DECODE=./my-decode make trace
# With no PROG, traces the demo (examples/demo); MODE defaults to auto (PT
# where the CPU has it, else stack sampling).

TRACE_DIR ?= out/trace
PROG ?=
ARGS ?=
MODE ?= auto
TRIGGER ?=
CAPTURE_OPTS ?=
MT_CAPTURE ?= bin/mt-capture
MT_DECODE ?= bin/mt-decode
MT_SEGMENT ?= bin/mt-segment
MT_STITCH ?= bin/mt-stitch
MT_SYMBOLIZE ?= bin/mt-symbolize
MT_WRITE ?= bin/mt-write
MT_CAT ?= bin/mt-cat

TRACE_PROG := $(if $(PROG),$(PROG),examples/demo)
# a PROG found in PATH (PROG=ls) is not a file here: no dependency on it
TRACE_PROG_DEP := $(if $(PROG),$(wildcard $(PROG)),examples/demo)
TRACE_CAPTURE_CMD := $(MT_CAPTURE) run --mode $(MODE) $(if $(TRIGGER),--trigger $(TRIGGER)) $(CAPTURE_OPTS) -o $(TRACE_DIR)/capture -- $(TRACE_PROG) $(ARGS)
# mt-ptsim leaves the code images beside perf.data; the stages look there
TRACE_IMAGES := $(if $(filter singlestep,$(MODE)),$(TRACE_DIR)/capture/images)
TRACE_DECODE_CMD = $(MT_DECODE) $(if $(TRACE_IMAGES),--buildid-dir $(TRACE_IMAGES)) -o $(TRACE_DIR)/decode.only.mt $(TRACE_DIR)/capture/perf.data
TRACE_SEGMENT_CMD = $(MT_SEGMENT) $(if $(TRACE_IMAGES),--symfs $(TRACE_IMAGES)) -i $(TRACE_DIR)/decode.mt -o $(TRACE_DIR)/segment.mt
TRACE_STITCH_CMD = $(MT_STITCH) -i $(TRACE_DIR)/segment.mt -o $(TRACE_DIR)/stitch.mt
TRACE_SYMBOLIZE_CMD = $(MT_SYMBOLIZE) $(if $(TRACE_IMAGES),--images $(TRACE_IMAGES)) -o $(TRACE_DIR)/symbolize.mt $(TRACE_DIR)/stitch.mt
TRACE_WRITE_CMD = $(MT_WRITE) -o $(TRACE_DIR)/trace.fxt $(TRACE_DIR)/symbolize.mt

# A stage's program must exist; say which one is missing.  $(1) stage, $(2) program.
define trace_need
	@test -x "$(2)" || command -v "$(2)" >/dev/null 2>&1 || { \
	  echo "make trace: fatal: stage $(1) is missing: $(2) does not exist (not built, or not merged yet)" >&2; exit 1; }
endef
# Runs a stage; exit 1 (degraded data, output written) goes on with a warning.
define trace_run
	$(Q)echo "  TRACE   $(1)"; $(2); st=$$?; \
	  if [ $$st -eq 1 ]; then echo "make trace: warning: stage $(1) reported degraded data (output written)" >&2; \
	  elif [ $$st -ne 0 ]; then echo "make trace: fatal: stage $(1) failed (exit $$st)" >&2; exit $$st; fi
endef
# The .cmd file changes only when the stage's command line does.
define trace_cmdfile
$(TRACE_DIR)/.$(1).cmd: FORCE
	@mkdir -p $(TRACE_DIR)
	@echo '$(subst ','\'',$(2))' | cmp -s - $$@ || echo '$(subst ','\'',$(2))' > $$@
endef

.PHONY: trace FORCE
FORCE:

$(eval $(call trace_cmdfile,capture,$(TRACE_CAPTURE_CMD)))
$(eval $(call trace_cmdfile,decode,$(TRACE_DECODE_CMD) $(MT_CAT)))
$(eval $(call trace_cmdfile,segment,$(TRACE_SEGMENT_CMD)))
$(eval $(call trace_cmdfile,stitch,$(TRACE_STITCH_CMD)))
$(eval $(call trace_cmdfile,symbolize,$(TRACE_SYMBOLIZE_CMD)))
$(eval $(call trace_cmdfile,write,$(TRACE_WRITE_CMD)))

# Programs are prerequisites only when they are ours (bin/...): a swapped-in
# stage is re-run when its command line changes.
trace_dep = $(filter bin/%,$(1))

trace: deps all $(TRACE_DIR)/trace.fxt
	@echo "make trace: the trace is $(abspath $(TRACE_DIR)/trace.fxt) ($$(wc -c < $(TRACE_DIR)/trace.fxt) bytes)"
	@echo "make trace: open it at https://ui.perfetto.dev (\"Open trace file\"); stages' files are in $(TRACE_DIR)/"
	@echo "make trace: look at it offline: pipelines/mt serve $(abspath $(TRACE_DIR)/trace.fxt)   (summary: pipelines/mt summary $(TRACE_DIR))"

$(TRACE_DIR)/capture/perf.data: $(TRACE_DIR)/.capture.cmd $(call trace_dep,$(MT_CAPTURE)) $(TRACE_PROG_DEP)
	$(call trace_need,capture,$(MT_CAPTURE))
	@rm -rf $(TRACE_DIR)/capture
	$(call trace_run,capture,$(TRACE_CAPTURE_CMD) || { st=$$?; test -f $(TRACE_DIR)/capture/perf.data || exit $$st; })
	@touch $@

$(TRACE_DIR)/decode.mt: $(TRACE_DIR)/capture/perf.data $(TRACE_DIR)/.decode.cmd $(call trace_dep,$(MT_DECODE) $(MT_CAT))
	$(call trace_need,decode,$(MT_DECODE))
	$(call trace_need,decode,$(MT_CAT))
	$(call trace_run,decode,$(TRACE_DECODE_CMD))
	$(Q)if [ -f $(TRACE_DIR)/capture/hits.mt ]; then \
	  $(MT_CAT) -o $@ $(TRACE_DIR)/decode.only.mt $(TRACE_DIR)/capture/hits.mt && rm -f $(TRACE_DIR)/decode.only.mt; \
	else mv $(TRACE_DIR)/decode.only.mt $@; fi

$(TRACE_DIR)/segment.mt: $(TRACE_DIR)/decode.mt $(TRACE_DIR)/.segment.cmd $(call trace_dep,$(MT_SEGMENT))
	$(call trace_need,segment,$(MT_SEGMENT))
	$(call trace_run,segment,$(TRACE_SEGMENT_CMD))

$(TRACE_DIR)/stitch.mt: $(TRACE_DIR)/segment.mt $(TRACE_DIR)/.stitch.cmd $(call trace_dep,$(MT_STITCH))
	$(call trace_need,stitch,$(MT_STITCH))
	$(call trace_run,stitch,$(TRACE_STITCH_CMD))

$(TRACE_DIR)/symbolize.mt: $(TRACE_DIR)/stitch.mt $(TRACE_DIR)/.symbolize.cmd $(call trace_dep,$(MT_SYMBOLIZE))
	$(call trace_need,symbolize,$(MT_SYMBOLIZE))
	$(call trace_run,symbolize,$(TRACE_SYMBOLIZE_CMD))

$(TRACE_DIR)/trace.fxt: $(TRACE_DIR)/symbolize.mt $(TRACE_DIR)/.write.cmd $(call trace_dep,$(MT_WRITE))
	$(call trace_need,write,$(MT_WRITE))
	$(call trace_run,write,$(TRACE_WRITE_CMD))
