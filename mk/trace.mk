# make trace PROG=path [ARGS="..."] [MODE=auto|pt|sample|singlestep] [TRIGGER=...]
#
# Runs `pipelines/mt run` (the one place the stage chain is written) into
# $(TRACE_DIR): perf.data, hits.mt, decode.mt, segment.mt, stitch.mt,
# symbolize.mt and trace.fxt.  Swap a stage as for mt, e.g.
#   MT_DECODE=./my-decode make trace
# With no PROG, traces the demo (examples/demo); MODE defaults to auto (PT
# where the CPU has it, else stack sampling).
#
# No value goes through the shell: PROG, ARGS, MODE, TRIGGER, CAPTURE_OPTS
# and TRACE_DIR reach the recipe in the environment, unexpanded ($(value ...):
# a `$(...)` in them is text, not a make or shell expansion).  PROG, MODE,
# TRIGGER and TRACE_DIR are one argument each, whatever they hold; ARGS and
# CAPTURE_OPTS are split at blanks (spaces, tabs, newlines) and at nothing
# else: no quotes, no globs, no `$`, `;` or backquote means anything.  An
# argument holding a blank needs `mt run -- PROG ARGS...` itself.
# mt run exits with PROG's status: a trace written (mt run removes an old one
# first) is success whatever PROG returned.

TRACE_DIR ?= out/trace
PROG ?=
ARGS ?=
MODE ?= auto
TRIGGER ?=
CAPTURE_OPTS ?=

.PHONY: trace

trace: export MT_TRACE_PROG = $(if $(value PROG),$(value PROG),examples/demo)
trace: export MT_TRACE_ARGS = $(value ARGS)
trace: export MT_TRACE_MODE = $(value MODE)
trace: export MT_TRACE_TRIGGER = $(value TRIGGER)
trace: export MT_TRACE_CAPTURE_OPTS = $(value CAPTURE_OPTS)
trace: export MT_TRACE_DIR = $(value TRACE_DIR)

trace: deps all
	$(Q)set -f; IFS=$$(printf ' \t\nx'); IFS=$${IFS%x}; \
	  pipelines/mt run --mode "$$MT_TRACE_MODE" $${MT_TRACE_TRIGGER:+--trigger "$$MT_TRACE_TRIGGER"} \
	    $$MT_TRACE_CAPTURE_OPTS --dir "$$MT_TRACE_DIR" -- "$$MT_TRACE_PROG" $$MT_TRACE_ARGS; \
	  st=$$?; if [ ! -s "$$MT_TRACE_DIR/trace.fxt" ]; then \
	    echo "make trace: fatal: mt run failed (exit $$st)" >&2; exit $$((st ? st : 1)); \
	  elif [ $$st -gt 1 ]; then echo "make trace: note: $$MT_TRACE_PROG exited with status $$st" >&2; fi; \
	  echo "make trace: the trace is $$(cd "$$MT_TRACE_DIR" && pwd)/trace.fxt ($$(wc -c < "$$MT_TRACE_DIR/trace.fxt") bytes)"; \
	  echo "make trace: open it at https://ui.perfetto.dev (\"Open trace file\"); stages' files are in $$MT_TRACE_DIR/"; \
	  echo "make trace: look at it offline: pipelines/mt serve $$(cd "$$MT_TRACE_DIR" && pwd)/trace.fxt   (summary: pipelines/mt summary $$MT_TRACE_DIR)"
