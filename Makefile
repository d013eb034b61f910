# dioshim — make builds the library and the launcher into build/;
# make test runs every test; make bench and make demo need root.

# make install: PREFIX, DESTDIR, and LIBDIR, the library's directory, which
# the launcher is built to look in (debian/rules: the multiarch one).
PREFIX ?= /usr/local
DESTDIR ?=
LIBDIR ?= $(PREFIX)/lib/dioshim
MANDIR ?= $(PREFIX)/share/man
BUILD ?= build

CC ?= cc
CFLAGS ?= -O2 -g
# CPPFLAGS and LDFLAGS (and CFLAGS) from the environment or the command
# line come before the house's flags: dpkg-buildflags' hardening.
# Not _FILE_OFFSET_BITS=64: the wrappers must export the plain names.
XCFLAGS := -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
	-fPIC -fvisibility=hidden -Iinclude -Ishim \
	-DDIOSHIM_LIBDIR='"$(LIBDIR)"' -DDIOSHIM_BINDIR='"$(PREFIX)/bin"'

# The wrappers (L5), one file per family: only the library links them.
WRAP_SRC := shim/wrap_fd.c shim/wrap_rw.c shim/wrap_stat.c shim/wrap_sync.c \
	shim/wrap_mm.c shim/wrap_proc.c shim/wrap_xfer.c
# Everything below the wrappers, bottom up (DESIGN.md 8, shim/layers): what
# the command and the unit tests link.  hot.c first: its page
# (test_fdtable).
CORE_SRC := shim/hot.c shim/guard.c shim/lockrank.c shim/entry.c shim/real.c \
	shim/sys.c \
	shim/abi.c shim/mem.c shim/log.c shim/config.c shim/umem.c \
	shim/extmap.c \
	shim/shm.c shim/lifeline.c shim/owner.c shim/hint.c shim/guest.c \
	shim/record.c shim/segbase.c shim/segment.c shim/segview.c shim/lib.c \
	shim/recover.c shim/gap.c shim/rangelock.c shim/commit.c \
	shim/inflight.c shim/prefill.c shim/publish.c shim/move.c \
	shim/reserve.c shim/space.c shim/lifecycle.c \
	shim/wtx.c \
	shim/fdtable.c shim/fdfork.c shim/serve.c shim/ring.c shim/batch.c \
	shim/fsync.c shim/grow.c shim/sizes.c shim/io.c shim/aio.c shim/uring.c \
	shim/uring_files.c shim/fdlife.c shim/resize.c shim/xfer.c shim/proc.c
LIB_SRC := $(CORE_SRC) $(WRAP_SRC)
HEADERS := $(wildcard include/*.h include/dioshim/*.h shim/*.h shim/*.def)

# make debug: the same tree with -DDIOSHIM_DEBUG in $(BUILD)/debug, which
# checks the lock order (shim/lockrank.h) at every take; make test runs
# its unit programs and a few suites too.
DEBUG_BUILD := $(BUILD)/debug
ifdef DEBUG
XCFLAGS += -DDIOSHIM_DEBUG
endif

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
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(XCFLAGS) -c -o $@ $<

# shim/dioshim.map: the bounds of lib.c's fork hooks (the linker's
# __start_/__stop_ of their section) are not exports.
$(BUILD)/libdioshim.so: $(LIB_OBJ) shim/dioshim.map
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,--no-undefined -Wl,-z,now \
		-Wl,--version-script=shim/dioshim.map -o $@ $(LIB_OBJ) \
		-ldl -lpthread

# Static: `dioshim -- CMD` adds one exec to every command it runs, and a
# static one skips the dynamic loader's work (about 1 ms of CPU an exec on
# the machines measured; bench "overhead", DESIGN.md 7's 2% budget).
CMD_SRC := shim/dioshim/dioshim.c shim/dioshim/status.c
$(BUILD)/dioshim: $(CMD_SRC) shim/dioshim/cmd.h $(CORE_OBJ) $(HEADERS) Makefile
	@echo "  CC      $@"
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(XCFLAGS) $(LDFLAGS) -static \
		-o $@ $(CMD_SRC) $(CORE_OBJ) -lpthread

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
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7
	# The pages' examples (a systemd drop-in, LD_PRELOAD) name the
	# library where this install puts it.
	sed 's|^\(Environment=LD_PRELOAD=\)/usr/local/lib/dioshim/|\1$(LIBDIR)/|' \
		contrib/man/dioshim.1 >$(DESTDIR)$(MANDIR)/man1/dioshim.1
	sed '/^\.SH SYNOPSIS/,/^\.SH/s|/usr/local/lib/dioshim/|$(LIBDIR)/|' \
		contrib/man/dioshim.7 >$(DESTDIR)$(MANDIR)/man7/dioshim.7
	chmod 0644 $(DESTDIR)$(MANDIR)/man1/dioshim.1 \
		$(DESTDIR)$(MANDIR)/man7/dioshim.7

clean:
	rm -rf $(BUILD)

debug:
	@$(MAKE) --no-print-directory BUILD=$(DEBUG_BUILD) DEBUG=1 test-build

.PHONY: all deps install clean debug
