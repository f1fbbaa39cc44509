# The demo traced by `make trace`: -O2 with frame pointers (sampling mode walks
# them) and debug info (mt-symbolize names the inlined helper).
EXAMPLES := examples/demo
EXAMPLE_CFLAGS := -O2 -g -fno-omit-frame-pointer

all: $(EXAMPLES)

examples/demo: examples/demo.c libmagictrace/magic_trace.h $(MTLIB_A)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=gnu11 $(EXAMPLE_CFLAGS) $(WARN) -Ilibmagictrace -o $@ $< $(MTLIB_A)

clean: clean-examples
.PHONY: clean-examples
clean-examples:
	rm -f $(EXAMPLES)
