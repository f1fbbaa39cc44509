# mt-capture's test programs (linked with libmagictrace, like a user's program).
CAPTURE_PROGRAMS := tests/programs/capture/mt_calls tests/programs/capture/mt_late_thread

programs: $(CAPTURE_PROGRAMS)
TEST_PREREQS += $(CAPTURE_PROGRAMS)

tests/programs/capture/mt_calls: tests/programs/capture/mt_calls.c libmagictrace/magic_trace.h $(MTLIB_A)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 -O2 -g -fno-omit-frame-pointer $(WARN) -Ilibmagictrace -o $@ $< $(MTLIB_A) -lpthread

clean: clean-capture
.PHONY: clean-capture
clean-capture:
	rm -f $(CAPTURE_PROGRAMS)

tests/programs/capture/mt_late_thread: tests/programs/capture/mt_late_thread.c libmagictrace/magic_trace.h $(MTLIB_A)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 -O2 -g -fno-omit-frame-pointer $(WARN) -Ilibmagictrace -o $@ $< $(MTLIB_A) -lpthread
