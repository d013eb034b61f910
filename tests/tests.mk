# Tests: unit programs (one behaviour each, exit 0 pass / 1 fail / 77 skip)
# that link the mechanisms directly, helper programs the bats tests run,
# and the bats suites.  make test ends with "N passed, N failed, N skipped".

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
HELPER_SRC := $(wildcard tests/helpers/*.c)
HELPER_BIN := $(HELPER_SRC:tests/helpers/%.c=$(BUILD)/tests/helpers/%)
# Unit tests link the mechanisms, not the wrappers (CORE_OBJ).
UNIT_OBJ := $(CORE_OBJ)

$(BUILD)/tests/unit/%: tests/unit/%.c tests/unit/unit.h $(UNIT_OBJ) $(HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) $(XCFLAGS) -Itests/unit -o $@ $< $(UNIT_OBJ) \
		-ldl -lpthread

$(BUILD)/tests/helpers/%: tests/helpers/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE \
		-o $@ $< -lpthread -laio -luring

$(BUILD)/appendbench $(BUILD)/filesbench: $(BUILD)/%: bench/%.c
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra -Werror -o $@ $< -lpthread

test-build: all $(UNIT_BIN) $(HELPER_BIN) $(BUILD)/appendbench $(BUILD)/filesbench

# TESTS=unit or TESTS=tests/bats/append.bats narrows the run.
test: deps test-build debug
	@BUILD=$(abspath $(BUILD)) DEBUG_BUILD=$(abspath $(DEBUG_BUILD)) \
		tests/run.sh $(TESTS)

.PHONY: test test-build

# The checks of the house alone: the layers of shim/ (shim/layers), the
# sizes of files and functions, the exports against real.def.
layers: all
	@for t in tests/checks/*.sh; do \
		BUILD=$(abspath $(BUILD)) $$t || exit 1; done

.PHONY: layers

# The model checker for longer: 64 seeds of 20000 operations on ext4 and
# XFS (about 20 minutes); MODEL_SEEDS and MODEL_OPS as for tests/run.sh.
model: deps test-build
	@BUILD=$(abspath $(BUILD)) MODEL_SEEDS="$(or $(MODEL_SEEDS),$(shell seq 1 64))" \
		MODEL_OPS=$(or $(MODEL_OPS),20000) tests/run.sh tests/bats/model.bats

.PHONY: model

# The fault harness (tests/faults/faults.sh): every workload with a failure
# injected at each system call the shim and the program make, against the
# kernel alone under the same injection; ends with "N runs, N differences".
# Root and strace; FAULTS_FS, FAULTS_WORKLOADS, FAULTS_CALLS narrow it.
faults: deps test-build
	@BUILD=$(abspath $(BUILD)) tests/faults/faults.sh matrix

.PHONY: faults
