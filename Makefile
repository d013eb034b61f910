# dioshim — make builds the library and the launcher into build/;
# make test runs every test; make bench and make demo need root.

PREFIX ?= /usr/local
DESTDIR ?=
LIBDIR := $(PREFIX)/lib/dioshim
BUILD ?= build

CC ?= cc
CFLAGS ?= -O2 -g
# Not _FILE_OFFSET_BITS=64: the wrappers must export the plain names.
XCFLAGS := -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
	-fPIC -fvisibility=hidden -Iinclude -Ishim \
	-DDIOSHIM_LIBDIR='"$(LIBDIR)"'

LIB_SRC := shim/hot.c shim/interpose.c shim/real.c shim/fdtable.c shim/io.c shim/async.c \
	shim/shm.c shim/lifeline.c shim/owner.c shim/hint.c shim/guest.c shim/segbase.c shim/segment.c shim/segview.c shim/lifecycle.c \
	shim/reserve.c shim/publish.c shim/move.c shim/inflight.c shim/record.c shim/recover.c shim/rangelock.c shim/wtx.c \
	shim/prefill.c shim/gap.c shim/extmap.c shim/space.c shim/commit.c shim/config.c shim/log.c \
	shim/mem.c shim/umem.c shim/sys.c
# The mechanisms without the wrappers: what the command and unit tests link.
CORE_SRC := shim/hot.c shim/shm.c shim/lifeline.c shim/owner.c shim/hint.c shim/guest.c shim/segbase.c shim/segment.c shim/segview.c shim/lifecycle.c \
	shim/reserve.c shim/publish.c shim/move.c shim/inflight.c shim/record.c shim/recover.c shim/rangelock.c shim/wtx.c \
	shim/prefill.c shim/gap.c shim/extmap.c shim/space.c shim/config.c shim/log.c \
	shim/mem.c shim/umem.c shim/sys.c
HEADERS := $(wildcard include/*.h include/dioshim/*.h shim/*.h shim/*.def)

LIB_OBJ := $(LIB_SRC:shim/%.c=$(BUILD)/obj/%.o)
CORE_OBJ := $(CORE_SRC:shim/%.c=$(BUILD)/obj/%.o)

Q := @
ifeq ($(V),1)
Q :=
endif

all: $(BUILD)/libdioshim.so $(BUILD)/dioshim

$(BUILD)/obj/%.o: shim/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(XCFLAGS) -c -o $@ $<

$(BUILD)/libdioshim.so: $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) -shared -Wl,--no-undefined -Wl,-z,now \
		-o $@ $^ -ldl -lpthread

# Static: `dioshim -- CMD` adds one exec to every command it runs, and a
# static one skips the dynamic loader's work (about 1 ms of CPU an exec on
# the machines measured; bench "overhead", DESIGN.md 7's 2% budget).
$(BUILD)/dioshim: shim/dioshim/dioshim.c $(CORE_OBJ) $(HEADERS) Makefile
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) $(XCFLAGS) -static -o $@ $< $(CORE_OBJ) -lpthread

# ---- tests ---------------------------------------------------------------
include tests/tests.mk

# ---- benchmarks and the demo (root: they make scratch filesystems) --------
include bench/bench.mk

deps:
	@contrib/deps.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)
	install -m 0755 $(BUILD)/libdioshim.so $(DESTDIR)$(LIBDIR)/
	install -m 0755 $(BUILD)/dioshim $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/include/dioshim
	install -m 0644 include/dioshim.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 include/dioshim/layout.h \
		$(DESTDIR)$(PREFIX)/include/dioshim/

clean:
	rm -rf $(BUILD)

.PHONY: all deps install clean
