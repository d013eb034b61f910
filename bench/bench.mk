# Benchmarks and the demo.  Both need root (they make scratch filesystems in
# loop devices): bench/run.sh says so and measures nothing without it,
# contrib/demo.sh says so and fails.
#
#   make bench                  kernel alone vs dioshim, ext4 and XFS;
#                               rewrites bench/RESULTS.md (~18 minutes)
#   make bench SECS=2 REPS=3    shorter (settings: see bench/run.sh)
#   make demo                   the main job in a minute or two

BENCH_BIN := all $(BUILD)/appendbench $(BUILD)/filesbench $(BUILD)/tests/helpers/asyncwrite \
	$(BUILD)/tests/helpers/t_grow \
	$(BUILD)/fwd.so $(BUILD)/callcost $(BUILD)/aiocost $(BUILD)/aiocsw
# The settings given to make, echoed into RESULTS.md's "Command:" line.
BENCH_VARS := SECS REPS WRITERS PROCS FSTYPES SECTIONS IMG_SIZE PREALLOC \
	OVERWRITE_SIZE CHECK TAR_FILES TAR_REPS CALL_REPS PROGRAMS
BENCH_CMD := $(strip make bench $(foreach v,$(BENCH_VARS),$(if $($(v)),$(v)='$($(v))')))

# The "forwarder" side of the overhead section.
$(BUILD)/fwd.so: bench/fwd.c
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Werror -fPIC -shared \
		-fvisibility=hidden -o $@ $< -ldl

$(BUILD)/callcost: bench/callcost.c bench/batches.h
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Werror -o $@ $<

$(BUILD)/aiocost: bench/aiocost.c bench/batches.h
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Werror -o $@ $< -laio

$(BUILD)/aiocsw: bench/aiocsw.c
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Werror -o $@ $< -laio

bench: deps $(BENCH_BIN)
	@BUILD=$(abspath $(BUILD)) BENCH_CMD="$(BENCH_CMD)" bench/run.sh

demo: deps $(BENCH_BIN)
	@BUILD=$(abspath $(BUILD)) contrib/demo.sh

.PHONY: bench demo
